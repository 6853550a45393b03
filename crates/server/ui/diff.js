// A line difference between two texts, for people to read what a change does: an edited
// call's arguments before and after, a file write against the file as it is now. It is a
// view only: what is approved is always the arguments, by their digest.
import { h } from "./dom.js";

// Lines compared at most with the longest-common-subsequence table; beyond it the texts are
// shown as removed then added, whole, after their common start and end.
const MAX_CELLS = 4_000_000;

// `lineDiff(before, after)`: `[{op: "same" | "del" | "add", text}]`, in order, the fewest
// lines removed and added (the longest common subsequence of lines).
export function lineDiff(before, after) {
  const a = lines(before);
  const b = lines(after);
  // The common start and end need no table.
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let end = 0;
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end += 1;
  const head = a.slice(0, start).map((text) => ({ op: "same", text }));
  const tail = a.slice(a.length - end).map((text) => ({ op: "same", text }));
  const x = a.slice(start, a.length - end);
  const y = b.slice(start, b.length - end);
  return [...head, ...middle(x, y), ...tail];
}

function lines(text) {
  if (text === "") return [];
  const all = String(text).split("\n");
  // A final newline ends the last line; it starts no empty one.
  if (all[all.length - 1] === "") all.pop();
  return all;
}

function middle(x, y) {
  if (x.length === 0) return y.map((text) => ({ op: "add", text }));
  if (y.length === 0) return x.map((text) => ({ op: "del", text }));
  if ((x.length + 1) * (y.length + 1) > MAX_CELLS) {
    return [...x.map((text) => ({ op: "del", text })), ...y.map((text) => ({ op: "add", text }))];
  }
  // lcs[i][j]: the longest common subsequence of x[i..] and y[j..].
  const width = y.length + 1;
  const lcs = new Uint32Array((x.length + 1) * width);
  for (let i = x.length - 1; i >= 0; i -= 1) {
    for (let j = y.length - 1; j >= 0; j -= 1) {
      lcs[i * width + j] = x[i] === y[j]
        ? lcs[(i + 1) * width + j + 1] + 1
        : Math.max(lcs[(i + 1) * width + j], lcs[i * width + j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < x.length && j < y.length) {
    if (x[i] === y[j]) {
      out.push({ op: "same", text: x[i] });
      i += 1;
      j += 1;
    } else if (lcs[(i + 1) * width + j] >= lcs[i * width + j + 1]) {
      out.push({ op: "del", text: x[i] });
      i += 1;
    } else {
      out.push({ op: "add", text: y[j] });
      j += 1;
    }
  }
  for (; i < x.length; i += 1) out.push({ op: "del", text: x[i] });
  for (; j < y.length; j += 1) out.push({ op: "add", text: y[j] });
  return out;
}

// Unchanged lines kept around each change; longer runs are folded into one line.
const CONTEXT = 3;

// The difference as an element: each line marked `-` (removed), `+` (added) or ` ` (kept),
// with a count of what changed for screen readers; long unchanged runs folded.
export function diffView(diff) {
  const removed = diff.filter((d) => d.op === "del").length;
  const added = diff.filter((d) => d.op === "add").length;
  const rows = [];
  let run = [];
  // A run of unchanged lines: before the first change (leading), after the last (trailing),
  // or between two; the lines next to a change are kept, the rest folded.
  const flush = (leading, trailing) => {
    const keepStart = leading && !trailing ? 0 : CONTEXT;
    const keepEnd = trailing ? 0 : CONTEXT;
    if (run.length <= keepStart + keepEnd + 1) {
      rows.push(...run.map(line));
    } else {
      const hidden = run.length - keepStart - keepEnd;
      rows.push(...run.slice(0, keepStart).map(line));
      rows.push(h("div", { class: "diff-line fold", dataset: { op: "fold" } }, `… ${hidden} unchanged line${hidden === 1 ? "" : "s"}`));
      rows.push(...run.slice(run.length - keepEnd).map(line));
    }
    run = [];
  };
  let changed = false;
  for (const d of diff) {
    if (d.op === "same") {
      run.push(d);
      continue;
    }
    if (run.length) flush(!changed, false);
    changed = true;
    rows.push(line(d));
  }
  if (run.length) flush(!changed, true);
  return h("div", { class: "diff", dataset: { removed: String(removed), added: String(added) } },
    h("p", { class: "diff-summary muted" }, `${added} line${added === 1 ? "" : "s"} added, ${removed} removed`),
    h("pre", { class: "diff-lines" }, rows));
}

const MARK = { same: " ", del: "-", add: "+" };
const SAID = { del: "removed: ", add: "added: " };

function line(d) {
  return h("div", { class: `diff-line ${d.op}`, dataset: { op: d.op } },
    h("span", { class: "diff-mark", "aria-hidden": "true" }, MARK[d.op]),
    SAID[d.op] ? h("span", { class: "for-readers" }, SAID[d.op]) : null,
    d.text);
}

// Arguments as lines to compare: each field on its own, a text value with its own lines.
export function argumentLines(args) {
  if (!args || typeof args !== "object" || Array.isArray(args)) return JSON.stringify(args, null, 2);
  return Object.entries(args).map(([key, value]) =>
    typeof value === "string" ? `${key}: ${value}` : `${key}: ${JSON.stringify(value, null, 2)}`).join("\n");
}
