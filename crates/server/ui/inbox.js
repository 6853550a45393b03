// The inbox, a triage tool: every pending hold the caller may see, across worlds, as a list of
// one-line rows (what would run, who asks, where, how old, how long is left, what makes it
// risky), and the selected hold's card beside it (below it on a phone). The list shows a page
// at a time; holds that arrive while it is full are counted ("37 new holds — show"), never
// drawn, so a burst of thousands leaves the tab responsive. The holds of one batch are shown
// together with "decide all", bound to exactly the holds shown. Filters live in the query
// string, so a filtered inbox can be bookmarked; the counts (in the header, the title and the
// filters) are the server's. Keys: see KEYS below (`?` shows them).
import { agents, decide, decideBatch, holdCounts, holds, mayDecide, worlds } from "./api.js";
import { approveOnce, card, denyNow, isOpen, outcomeWords, ruleName, shown, update } from "./card.js";
import { h, problem, relative, replace, when } from "./dom.js";
import { onEvent, onResync } from "./live.js";
import {
  ApproveScope, DecisionAction, DecisionKind, EventType, HoldKind, Order, RESOLVING_EVENT_TYPES, StatusFilter,
} from "./wire.js";

const PAGE = 50;
// How long a decided hold stays in the list, saying how it was decided, before it leaves.
const LEAVE_MS = 8000;
// How long after the last hold event the counts are read again (and at most how long they
// may lag during a burst).
const RECOUNT_QUIET_MS = 300;
const RECOUNT_MAX_MS = 2000;
const FILTERS = ["world", "kind", "agent", "tool", "order"];
const ORDERS = [
  [Order.Newest, "Newest first"],
  [Order.Urgent, "Most urgent first"],
  [Order.Oldest, "Oldest first"],
];
const KEYS = [
  ["j / ↓", "next hold"],
  ["k / ↑", "previous hold"],
  ["a", "approve once (the arguments shown)"],
  ["d", "deny: type a reason if you like, then Enter (Esc: back)"],
  ["e", "edit the arguments, then approve"],
  ["x", "select or unselect the hold"],
  ["A", "approve every selected hold once"],
  ["Enter", "open the hold's page"],
  ["/", "filter"],
  ["Esc", "clear the selection, close this list"],
  ["?", "show or hide the keys"],
];

function readFilters() {
  const query = new URLSearchParams(location.search);
  /** @type {Record<string, string>} */
  const f = {};
  for (const key of FILTERS) f[key] = query.get(key) || "";
  if (!ORDERS.some(([o]) => o === f.order)) f.order = Order.Newest;
  return f;
}

function writeFilters(f) {
  const query = new URLSearchParams();
  for (const key of FILTERS) if (f[key] && !(key === "order" && f[key] === Order.Newest)) query.set(key, f[key]);
  const text = query.toString();
  history.replaceState(null, "", text ? `/?${text}` : "/");
}

export async function inbox(main) {
  let filters = readFilters();
  let known = [];
  try {
    known = await worlds();
  } catch (error) {
    if (error.status === 401) throw error;
  }
  const names = (id) => (known.find((w) => w.id === id) || {}).name;
  // The runtime's agents by id, read once the filters are first shown (a hold names its
  // agent by id).
  const agentNames = new Map();
  const agentName = (id) => agentNames.get(id);

  // Arrivals and departures are announced once, in words, by `status`; the list itself is not
  // a live region (the page's main element is).
  const rowsEl = h("ol", { class: "rows", "aria-label": "Pending holds", "aria-live": "off" });
  const status = h("p", { class: "inbox-status", role: "status" });
  const arrivals = h("button", { type: "button", class: "quiet arrivals", hidden: true, "aria-live": "off" });
  const more = h("button", { type: "button", class: "quiet more", hidden: true }, "Load more");
  const detail = h("section", { class: "detail", "aria-label": "The selected hold" });
  const firstRun = welcome();
  const empty = h("p", { class: "empty muted", hidden: true }, "No pending hold matches these filters.");
  const count = document.getElementById("pending-count");
  const help = h("section", { class: "keys-help card", hidden: true, "aria-labelledby": "keys-title" },
    h("h2", { id: "keys-title" }, "Keys"),
    h("dl", {}, KEYS.map(([key, does]) => [h("dt", {}, h("kbd", {}, key)), h("dd", {}, does)])),
    h("p", { class: "muted" }, "Keys do nothing while you type in a field."));

  // What the list shows: holds by id (`rows`), the batches they belong to (`units`, one per
  // batch, in list order), the open ones, and the selection.
  let rows = new Map();
  let units = new Map();
  let open = new Set();
  let picked = new Set();
  // Holds that arrived (and are still open) but are not drawn: the list was full.
  let unseen = new Set();
  let current = null;
  let next = null;
  let generation = 0;
  const timers = new Set();
  // The server's counts of pending holds: the total and each world's by kind.
  let counts = null;

  // --- Counts ------------------------------------------------------------------------------

  function showCount() {
    const n = counts ? counts.pending : open.size;
    const text = n === 0 && !(next && !counts) ? "" : `${n}${next && !counts ? "+" : ""}`;
    document.title = text ? `(${text}) Holdpoint` : "Holdpoint";
    if (count) count.textContent = text;
    const filtered = ["world", "kind", "agent", "tool"].some((k) => filters[k]);
    const nothing = rows.size === 0 && !next && unseen.size === 0;
    // The first-run page where nothing at all is pending; else a word on the filters.
    firstRun.hidden = !(nothing && !filtered && (!counts || counts.pending === 0));
    empty.hidden = !(nothing && firstRun.hidden);
    arrivals.hidden = unseen.size === 0;
    arrivals.textContent = unseen.size === 1 ? "1 new hold — show" : `${unseen.size} new holds — show`;
    labelFilters();
  }

  // Events come in bursts: the counts shown are redrawn at the first event at once, then at
  // most once per 50 ms while more arrive, not once per event (a timer, not an animation
  // frame, so a hidden tab's title still follows).
  let countTimer = null;
  let countDue = false;
  function countSoon() {
    if (countTimer !== null) {
      countDue = true;
      return;
    }
    showCount();
    countTimer = setTimeout(() => {
      countTimer = null;
      if (countDue) {
        countDue = false;
        countSoon();
      }
    }, 50);
  }

  let recountTimer = null;
  let recountSince = 0;
  let recounting = false;
  // Reads the counts again once hold events stop for a moment (or every RECOUNT_MAX_MS during
  // a burst): between reads, each event moves the total by one.
  function recountSoon() {
    const now = Date.now();
    if (!recountTimer) recountSince = now;
    clearTimeout(recountTimer);
    const wait = Math.max(0, Math.min(RECOUNT_QUIET_MS, recountSince + RECOUNT_MAX_MS - now));
    recountTimer = setTimeout(recount, wait);
  }

  async function recount() {
    recountTimer = null;
    if (recounting) return recountSoon();
    recounting = true;
    const mine = generation;
    try {
      const read = await holdCounts();
      if (mine === generation || counts === null) counts = read;
    } catch (error) {
      if (error.status === 401) throw error;
    } finally {
      recounting = false;
      showCount();
    }
  }

  function countBy(world, kind) {
    if (!counts) return null;
    return counts.worlds
      .filter((c) => (!world || c.world === world) && (!kind || c.kind === kind))
      .reduce((sum, c) => sum + c.pending, 0);
  }

  // --- Rows ------------------------------------------------------------------------------

  function matches(hold) {
    if (filters.world) {
      const w = known.find((x) => x.name === filters.world || x.id === filters.world);
      if (!w || w.id !== hold.world) return false;
    }
    if (filters.kind && hold.spec.kind !== filters.kind) return false;
    if (filters.agent && hold.agent !== filters.agent) return false;
    if (filters.tool && (hold.spec.kind !== HoldKind.Approval || hold.spec.tool !== filters.tool)) return false;
    return isOpen(hold);
  }

  function unitOf(hold) {
    let unit = units.get(hold.batch);
    if (!unit) {
      unit = { batch: hold.batch, ids: [], el: null };
      units.set(hold.batch, unit);
    }
    return unit;
  }

  // Adds `hold` to the list; `where`: "end", "start", or "urgent" (by deadline).
  function add(hold, where) {
    if (rows.has(hold.id)) return;
    if (isOpen(hold)) open.add(hold.id);
    const el = rowFor(hold);
    rows.set(hold.id, { hold, el });
    const unit = unitOf(hold);
    unit.ids.push(hold.id);
    if (unit.ids.length === 1) {
      unit.el = el;
      place(unit, where);
    } else if (unit.ids.length === 2) {
      regroup(unit, el);
    } else {
      // A batch's holds in the order they were raised (ids are made in time order).
      const list = unit.el.querySelector("ol");
      const later = [...list.children].find((other) => other.dataset.hold > hold.id);
      list.insertBefore(el, later || null);
    }
    if (unit.ids.length > 1) label(unit);
  }

  function place(unit, where) {
    if (where === "start") return rowsEl.prepend(unit.el);
    if (where === Order.Urgent) {
      const due = deadlineOf(unit);
      for (const other of rowsEl.children) {
        const u = units.get(other.dataset.batch);
        if (u && u !== unit && deadlineOf(u) > due) return rowsEl.insertBefore(unit.el, other);
      }
    }
    rowsEl.append(unit.el);
  }

  function deadlineOf(unit) {
    const times = unit.ids.map((id) => rows.get(id).hold).filter((x) => x.deadline).map((x) => Date.parse(x.deadline));
    return times.length ? Math.min(...times) : Infinity;
  }

  // One line: what would run (or what is asked), the marks that make it risky, who asks,
  // where, how old it is, how long is left.
  function rowFor(hold) {
    const el = h("li", { class: "row", tabindex: "-1", dataset: { hold: hold.id, batch: hold.batch, kind: hold.spec.kind } });
    paintRow(el, hold);
    el.addEventListener("click", (event) => {
      if (event.target.closest("input")) return;
      select(hold.id, { focus: true, reveal: true });
    });
    return el;
  }

  function paintRow(el, hold) {
    el.dataset.status = hold.status;
    const pick = h("input", { type: "checkbox", class: "pick", "aria-label": `Select ${titleOf(hold)}`, tabindex: "-1" });
    pick.checked = picked.has(hold.id);
    pick.addEventListener("change", () => togglePick(hold.id, pick.checked));
    // A sub-agent's (or a remote agent's) call names every agent it came through.
    const agent = hold.lineage && hold.lineage.length
      ? hold.lineage.map((step) => step.name).join(" → ")
      : (hold.agent && agentName(hold.agent)) || hold.agent || hold.requested_by;
    replace(el,
      pick,
      h("span", { class: "what", title: titleOf(hold) }, what(hold)),
      h("span", { class: "marks" }, marks(hold)),
      h("span", { class: "who" }, agent),
      h("span", { class: "where" }, names(hold.world) || hold.world),
      h("time", { class: "age", datetime: hold.created_at, title: `Asked ${when(hold.created_at)}` }, short(hold.created_at)),
      isOpen(hold)
        ? h("time", { class: "left", datetime: hold.deadline || "", title: hold.deadline ? `Deadline ${when(hold.deadline)}` : "No deadline" }, left(hold.deadline))
        : h("span", { class: "left outcome-mark" }, outcomeWords(hold)));
  }

  // A batch's second hold turns its row into a group with "decide all".
  function regroup(unit, second) {
    const single = unit.el;
    const hadFocus = single.contains(document.activeElement);
    const group = h("li", { class: "batch", dataset: { batch: unit.batch } },
      h("div", { class: "batch-head" },
        h("span", { class: "batch-title" }),
        h("span", { class: "buttons batch-actions" },
          h("button", { type: "button", class: "primary", "data-batch-decision": DecisionAction.Approve, onclick: () => decideAll(unit, DecisionAction.Approve) }, "Approve all once"),
          h("button", { type: "button", class: "danger", "data-batch-decision": DecisionAction.Deny, onclick: () => decideAll(unit, DecisionAction.Deny) }, "Deny all"))),
      h("p", { class: "error batch-error", role: "alert" }),
      h("ol", { class: "batch-rows" }));
    single.replaceWith(group);
    const [a, b] = single.dataset.hold < second.dataset.hold ? [single, second] : [second, single];
    group.querySelector("ol").append(a, b);
    unit.el = group;
    if (hadFocus) single.focus();
  }

  function label(unit) {
    const held = unit.ids.map((id) => rows.get(id).hold);
    const pending = held.filter(isOpen).length;
    const approvals = held.filter((x) => x.spec.kind === HoldKind.Approval).length;
    const first = held[0];
    const who = (first.agent && agentName(first.agent)) || first.agent || first.requested_by;
    unit.el.setAttribute("aria-label", `Batch of ${unit.ids.length} holds`);
    unit.el.querySelector(".batch-title").textContent =
      `${unit.ids.length} holds asked together by ${who} (${pending} still open)`;
    // "Decide all" covers the approvals of a batch; questions are answered one by one.
    unit.el.querySelector(".batch-actions").hidden = approvals < 2 || pending === 0;
  }

  // "Decide all", bound to the approvals shown (ids and digests): a batch that differs from
  // what is shown is refused by Holdpoint, and nothing is decided.
  async function decideAll(unit, action) {
    const group = unit.el;
    const error = group.querySelector(".batch-error");
    const buttons = group.querySelectorAll("[data-batch-decision]");
    const seen = unit.ids
      .map((id) => rows.get(id).hold)
      .filter((x) => x.spec.kind === HoldKind.Approval)
      .map((x) => ({ hold: x.id, digest: x.spec.digest }));
    error.textContent = "";
    for (const b of buttons) b.disabled = true;
    try {
      const result = await decideBatch(unit.batch, seen, action === DecisionAction.Approve ? { action: DecisionAction.Approve, scope: ApproveScope.Once } : { action: DecisionAction.Deny });
      for (const r of result.holds) decided(r.hold);
    } catch (e) {
      if (e.code === "batch_mismatch") {
        error.textContent = `Holdpoint refused to decide this batch: it is not as shown here (${e.message}). Nothing was decided. The whole batch is shown below now; check it and decide again.`;
        await completeBatch(unit);
      } else {
        error.textContent = e.message;
      }
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  }

  // Shows every hold of a batch, decided ones included, so "decide all" covers all of it and
  // the batch's count is true even where it continues on a page not read yet.
  async function completeBatch(unit) {
    try {
      const page = await holds({ batch: unit.batch, status: StatusFilter.Any, limit: 500 });
      for (const hold of page.items) {
        if (rows.has(hold.id)) decided(hold);
        else add(hold, "end");
      }
      if (unit.ids.length > 1) label(unit);
    } catch (e) {
      if (unit.el && unit.el.querySelector(".batch-error")) unit.el.querySelector(".batch-error").append(" ", e.message);
    }
  }

  // A newer version of a hold in the list (decided here or elsewhere).
  function decided(hold) {
    const row = rows.get(hold.id);
    if (!row) return;
    if (hold.version !== undefined && row.hold.version !== undefined && hold.version < row.hold.version) return;
    row.hold = hold;
    if (!isOpen(hold)) {
      open.delete(hold.id);
      picked.delete(hold.id);
    }
    paintRow(row.el, hold);
    if (current === hold.id) row.el.setAttribute("aria-current", "true");
    const el = current === hold.id && detail.querySelector("article.hold");
    if (el) update(el, hold);
    settle(units.get(hold.batch));
  }

  // A decided hold leaves after a while; a batch leaves once all of it is decided.
  function settle(unit) {
    if (!unit || !unit.el) return;
    if (unit.ids.length > 1) label(unit);
    const stillOpen = unit.ids.some((id) => isOpen(rows.get(id).hold));
    if (stillOpen || unit.leaving) return;
    unit.leaving = true;
    const timer = setTimeout(() => {
      timers.delete(timer);
      leave(unit);
    }, LEAVE_MS);
    timers.add(timer);
  }

  function leave(unit) {
    const wasCurrent = unit.ids.includes(current);
    const wasFocused = unit.el.contains(document.activeElement);
    const after = wasCurrent ? neighbour(current, 1, (id) => !unit.ids.includes(id)) || neighbour(current, -1, (id) => !unit.ids.includes(id)) : null;
    unit.el.remove();
    units.delete(unit.batch);
    for (const id of unit.ids) {
      rows.delete(id);
      open.delete(id);
      picked.delete(id);
    }
    if (wasCurrent) select(after, { focus: wasFocused });
    showCount();
  }

  // --- Selection: the current hold (its card beside the list) and the picked ones ----------

  function order() {
    return [...rowsEl.querySelectorAll("li.row")].map((el) => el.dataset.hold);
  }

  // The next (step 1) or previous (-1) hold from `id` in the list that `ok` accepts.
  /** @param {(id: string) => boolean} [ok] */
  function neighbour(id, step, ok = () => true) {
    const ids = order();
    let at = ids.indexOf(id);
    if (at < 0) return null;
    for (at += step; at >= 0 && at < ids.length; at += step) if (ok(ids[at])) return ids[at];
    return null;
  }

  function select(id, { focus = false, reveal = false } = {}) {
    const before = current && rows.get(current);
    if (before) {
      before.el.removeAttribute("aria-current");
      before.el.tabIndex = -1;
    }
    current = id && rows.has(id) ? id : null;
    if (!current) {
      replace(detail, h("p", { class: "muted no-selection" }, rows.size ? "Choose a hold to see it here." : ""));
      const first = rowsEl.querySelector("li.row");
      if (first) first.tabIndex = 0;
      return;
    }
    const row = rows.get(current);
    row.el.setAttribute("aria-current", "true");
    row.el.tabIndex = 0;
    const shownCard = detail.querySelector("article.hold");
    if (!shownCard || shown(shownCard).id !== current) {
      replace(detail, card(row.hold, { link: true, names, agentName, heading: "h2" }));
    }
    if (focus) row.el.focus({ preventScroll: false });
    if (reveal && narrow()) detail.scrollIntoView({ block: "start" });
  }

  const narrow = () => !window.matchMedia("(min-width: 60rem)").matches;

  function togglePick(id, on) {
    const row = rows.get(id);
    if (!row) return;
    if (on && isOpen(row.hold)) picked.add(id);
    else picked.delete(id);
    row.el.querySelector("input.pick").checked = picked.has(id);
    row.el.classList.toggle("picked", picked.has(id));
    pickedNote();
  }

  const pickedLine = h("p", { class: "picked-line", hidden: true });
  function pickedNote() {
    pickedLine.hidden = picked.size === 0;
    pickedLine.textContent = `${picked.size} selected: A approves them once, Esc clears.`;
  }

  function clearPicks() {
    for (const id of [...picked]) togglePick(id, false);
  }

  // "A": approves the selected approvals once, each bound to the digest shown. The holds of a
  // batch go as one batch decision ("decide all" for the holds seen); where Holdpoint refuses
  // it because the batch holds approvals not selected, each selected hold is approved alone.
  async function approvePicked() {
    const chosen = [...picked].map((id) => rows.get(id).hold)
      .filter((x) => isOpen(x) && x.spec.kind === HoldKind.Approval && x.offers.includes(DecisionKind.ApproveOnce));
    if (chosen.length === 0) {
      status.textContent = "Nothing to approve: select holds with x first.";
      return;
    }
    const byBatch = new Map();
    for (const x of chosen) {
      if (!byBatch.has(x.batch)) byBatch.set(x.batch, []);
      byBatch.get(x.batch).push(x);
    }
    let done = 0;
    const problems = [];
    status.textContent = `Approving ${chosen.length} holds…`;
    for (const [batch, list] of byBatch) {
      const seen = list.map((x) => ({ hold: x.id, digest: x.spec.digest }));
      try {
        const result = await decideBatch(batch, seen, { action: DecisionAction.Approve, scope: ApproveScope.Once });
        for (const r of result.holds) decided(r.hold);
        done += list.length;
      } catch (e) {
        if (e.code !== "batch_mismatch") {
          problems.push(e.message);
          continue;
        }
        for (const x of list) {
          try {
            const result = await decide(x.id, { action: DecisionAction.Approve, scope: ApproveScope.Once, digest: x.spec.digest });
            decided(result.hold);
            done += 1;
          } catch (e2) {
            if (e2.details && e2.details.hold) decided(e2.details.hold);
            problems.push(`${titleOf(x)}: ${e2.message}`);
          }
        }
      }
    }
    clearPicks();
    status.textContent = `Approved ${done} of ${chosen.length} selected holds once.${problems.length ? ` Not approved: ${problems.join("; ")}` : ""}`;
    if (current && !isOpen(rows.get(current).hold)) advance();
  }

  // After a decision made with the keyboard: the next open hold (`leaving`, just decided, is
  // passed over though its row does not know yet).
  function advance(leaving = null) {
    const ok = (id) => id !== leaving && isOpen(rows.get(id).hold);
    const to = neighbour(current, 1, ok) || neighbour(current, -1, ok);
    if (to) select(to, { focus: true });
    else if (current) rows.get(current).el.focus();
  }

  // --- Loading ----------------------------------------------------------------------------

  function query(cursor) {
    const q = { world: filters.world, kind: filters.kind, agent: filters.agent, tool: filters.tool, limit: PAGE, cursor };
    if (filters.order !== Order.Oldest) q.order = filters.order;
    return q;
  }

  async function load(cursor) {
    const mine = generation;
    more.disabled = true;
    try {
      const page = await holds(query(cursor));
      if (mine !== generation) return;
      next = page.next || null;
      for (const hold of page.items) add(hold, "end");
      // For measurement (the bench's inbox): when the first rows were first in the page.
      if (rows.size && !performance.getEntriesByName("holdpoint:first-rows").length) performance.mark("holdpoint:first-rows");
      // A batch at the end of the page may go on in the next: show all of it now, so its
      // count is true and "decide all" covers it.
      const last = page.items[page.items.length - 1];
      if (next && last) completeBatch(units.get(last.batch));
      more.hidden = !next;
      status.textContent = "";
      if (!current || !rows.has(current)) select(order()[0] || null);
    } catch (error) {
      if (error.status === 401) throw error;
      replace(status, problem(error));
    } finally {
      more.disabled = false;
      showCount();
    }
  }

  async function reload() {
    generation += 1;
    for (const t of timers) clearTimeout(t);
    timers.clear();
    rows = new Map();
    units = new Map();
    open = new Set();
    picked = new Set();
    unseen = new Set();
    pickedNote();
    const keep = current;
    current = null;
    next = null;
    replace(rowsEl);
    await Promise.all([load(null), recount()]);
    if (keep && rows.has(keep)) select(keep);
  }

  more.addEventListener("click", () => load(next));
  arrivals.addEventListener("click", async () => {
    await reload();
    const first = order()[0];
    if (first) select(first, { focus: true });
  });

  // --- Filters ----------------------------------------------------------------------------

  const worldSelect = h("select", { id: "filter-world", name: "world" },
    h("option", { value: "" }, "All worlds"),
    known.map((w) => h("option", { value: w.name, dataset: { id: w.id } }, w.name)));
  const kindSelect = h("select", { id: "filter-kind", name: "kind" },
    h("option", { value: "" }, "Approvals and questions"),
    h("option", { value: HoldKind.Approval }, "Approvals"),
    h("option", { value: HoldKind.Question }, "Questions"));
  const agentSelect = h("select", { id: "filter-agent", name: "agent" }, h("option", { value: "" }, "Any agent"));
  if (filters.agent) agentSelect.append(h("option", { value: filters.agent }, filters.agent));
  const toolInput = h("input", { type: "text", id: "filter-tool", name: "tool", autocomplete: "off", placeholder: "any" });
  const orderSelect = h("select", { id: "filter-order", name: "order" }, ORDERS.map(([v, text]) => h("option", { value: v }, text)));
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter holds" },
    field("filter-world", "World", worldSelect),
    field("filter-kind", "Kind", kindSelect),
    field("filter-agent", "Agent", agentSelect),
    field("filter-tool", "Tool", toolInput),
    field("filter-order", "Order", orderSelect),
    h("button", { type: "submit", class: "quiet" }, "Apply"));
  worldSelect.value = filters.world;
  kindSelect.value = filters.kind;
  agentSelect.value = filters.agent;
  toolInput.value = filters.tool;
  orderSelect.value = filters.order;

  // The counts in the filters: each world's pending holds (of the kind chosen), and each
  // kind's (in the world chosen).
  function labelFilters() {
    if (!counts) return;
    const chosenWorld = filters.world ? (known.find((w) => w.name === filters.world || w.id === filters.world) || {}).id : null;
    const kind = filters.kind || null;
    for (const option of worldSelect.options) {
      const n = countBy(option.dataset.id || null, kind);
      const base = option.value ? option.value : "All worlds";
      option.textContent = `${base} (${n})`;
    }
    const kinds = { "": "Approvals and questions", approval: "Approvals", question: "Questions" };
    for (const option of kindSelect.options) {
      option.textContent = `${kinds[option.value]} (${countBy(chosenWorld, option.value || null)})`;
    }
  }

  const apply = () => {
    filters = {
      world: worldSelect.value,
      kind: kindSelect.value,
      agent: agentSelect.value,
      tool: toolInput.value.trim(),
      order: orderSelect.value,
    };
    writeFilters(filters);
    sum();
    reload();
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    apply();
  });
  for (const select of [worldSelect, kindSelect, agentSelect, orderSelect]) select.addEventListener("change", apply);
  // Folded on a phone unless a filter is set; open where there is room.
  const active = () => ["world", "kind", "agent", "tool"].filter((k) => filters[k]).length;
  const summary = h("summary", {});
  const filterBox = h("details", { class: "filter-box" }, summary, form);
  const sum = () => {
    const n = active();
    summary.textContent = n ? `Filters and order (${n} set)` : "Filters and order";
  };
  sum();
  filterBox.open = active() > 0 || window.matchMedia("(min-width: 40rem)").matches;
  // The agents of every world, for the agent filter and to name each row's agent.
  let agentsRead = false;
  const readAgents = async () => {
    if (agentsRead) return;
    agentsRead = true;
    const lists = await Promise.all(known.map((w) => agents(w.id).then((list) => [w, list], () => [w, []])));
    const chosen = agentSelect.value;
    replace(agentSelect, h("option", { value: "" }, "Any agent"));
    for (const [w, list] of lists) {
      for (const a of list) {
        agentNames.set(a.id, a.name);
        agentSelect.append(h("option", { value: a.id }, known.length > 1 ? `${a.name} (${w.name})` : a.name));
      }
    }
    if (chosen && !agentNames.has(chosen)) agentSelect.append(h("option", { value: chosen }, chosen));
    agentSelect.value = chosen;
    for (const row of rows.values()) if (row.hold.agent) paintRow(row.el, row.hold);
    if (current) rows.get(current)?.el.setAttribute("aria-current", "true");
    for (const unit of units.values()) if (unit.ids.length > 1) label(unit);
    const el = detail.querySelector("article.hold");
    if (el && shown(el).agent) replace(detail, card(shown(el), { link: true, names, agentName, heading: "h2" }));
  };
  filterBox.addEventListener("toggle", () => {
    if (filterBox.open) readAgents();
  });
  if (filterBox.open) readAgents();

  // --- Notifications ------------------------------------------------------------------------

  const notify = h("button", { type: "button", class: "quiet notify" });
  function notifyState() {
    if (!("Notification" in window)) {
      notify.hidden = true;
      return;
    }
    const p = Notification.permission;
    notify.textContent = p === "granted" ? "Notifications on for new holds"
      : p === "denied" ? "Notifications are blocked in this browser's settings"
      : "Notify me of new holds";
    notify.disabled = p !== "default";
  }
  notify.addEventListener("click", async () => {
    await Notification.requestPermission();
    notifyState();
  });
  notifyState();

  function announce(hold) {
    if (!("Notification" in window) || Notification.permission !== "granted" || !document.hidden) return;
    // Only those who may decide it: a hold that names its approvers notifies no one else.
    if (!mayDecide(hold)) return;
    const what = hold.spec.kind === HoldKind.Approval ? `Approve ${hold.spec.tool}?`
      : hold.spec.kind === HoldKind.Question ? hold.spec.question
      : titleOf(hold);
    const n = new Notification("Holdpoint: a new hold", { body: what, tag: hold.id });
    n.onclick = () => {
      window.focus();
      if (rows.has(hold.id)) select(hold.id, { focus: true });
    };
  }

  // --- Live arrival and departure -----------------------------------------------------------

  const stops = [
    onEvent([EventType.HoldCreated], (event) => {
      const hold = event.payload.hold;
      if (counts && hold && isOpen(hold)) {
        counts.pending += 1;
        const c = counts.worlds.find((x) => x.world === hold.world && x.kind === hold.spec.kind);
        if (c) c.pending += 1;
        else counts.worlds.push({ world: hold.world, kind: hold.spec.kind, pending: 1 });
      }
      recountSoon();
      if (!hold || !matches(hold)) return countSoon();
      // A batch already in the list takes its holds in; otherwise a hold is drawn only while
      // the list has room and the order puts it among what is read. The rest are counted.
      const inList = units.has(hold.batch) && units.get(hold.batch).el;
      const room = rows.size < PAGE && !(filters.order === Order.Oldest && next);
      if (!inList && !room) {
        unseen.add(hold.id);
        return countSoon();
      }
      add(hold, inList ? "end" : filters.order === Order.Newest ? "start" : filters.order === Order.Urgent ? Order.Urgent : "end");
      // Nothing open is selected (nothing was, or what was is decided): the new hold is.
      if (!current || !isOpen(rows.get(current).hold)) select(hold.id);
      status.textContent = `New: ${titleOf(hold)}.`;
      countSoon();
      announce(hold);
    }),
    onEvent(RESOLVING_EVENT_TYPES, (event) => {
      if (counts) counts.pending = Math.max(0, counts.pending - 1);
      recountSoon();
      if (event.hold && unseen.delete(event.hold)) return countSoon();
      const row = event.hold && rows.get(event.hold);
      if (!row || !isOpen(row.hold)) return countSoon();
      const before = row.hold;
      decided({ ...before, status: event.payload.outcome.status, outcome: event.payload.outcome });
      status.textContent = `${titleOf(before)}: ${outcomeWords(rows.get(before.id)?.hold || before)}.`;
      countSoon();
    }),
    onResync(reload),
  ];

  // The rows' ages and time left, every few seconds.
  const ticker = setInterval(() => {
    const now = Date.now();
    for (const t of rowsEl.querySelectorAll("time.age")) t.textContent = short(t.getAttribute("datetime"), now);
    for (const t of rowsEl.querySelectorAll("time.left")) t.textContent = left(t.getAttribute("datetime"), now);
  }, 5000);

  // --- Keys -------------------------------------------------------------------------------

  function cardEl() {
    return detail.querySelector("article.hold");
  }

  // "a" and "d" decide the current hold through its card, then move on at once to the next
  // open hold, without waiting for Holdpoint's answer: the row shows the outcome when it
  // comes, and a decision that fails says so in the status line.
  function decideKey(how) {
    const el = cardEl();
    if (!el) return;
    const hold = shown(el);
    if (!hold || !isOpen(hold)) return;
    const sent = how(el);
    if (!sent) return;
    const wasCurrent = current === hold.id;
    if (wasCurrent) advance(hold.id);
    sent.then((result) => {
      if (result) return decided(result);
      const why = el.querySelector("[data-error=card]");
      status.textContent = `${titleOf(hold)} was not decided: ${(why && why.textContent) || "Holdpoint refused it"}.`;
    });
  }

  function denyStart() {
    const el = cardEl();
    if (!el || !isOpen(shown(el))) return;
    const reason = el.querySelector("input[name=reason]");
    if (reason) reason.focus();
  }

  function editStart() {
    const el = cardEl();
    if (!el) return;
    const edit = el.querySelector("details.edit");
    if (!edit) return;
    edit.open = true;
    edit.querySelector("textarea").focus();
  }

  // In the card's reason field, Enter denies and Esc goes back to the list.
  detail.addEventListener("keydown", (event) => {
    if (!event.target.matches || !event.target.matches("input[name=reason]")) return;
    const el = cardEl();
    if (event.key === "Enter") {
      event.preventDefault();
      if (el) decideKey(denyNow);
    } else if (event.key === "Escape") {
      event.preventDefault();
      if (current) rows.get(current)?.el.focus();
    }
  });

  function onKey(event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target.closest && target.closest("input:not([type=checkbox]):not([type=radio]), textarea, select, [contenteditable]")) return;
    // Keys are the list's while focus is on the page, the list or the card, not elsewhere
    // (the header's links, the filters' buttons).
    const inPage = target === document.body || main.contains(target);
    if (!inPage) return;
    const move = (step) => {
      const ids = order();
      if (ids.length === 0) return;
      const at = current ? ids.indexOf(current) : -1;
      const to = at < 0 ? ids[0] : ids[Math.max(0, Math.min(ids.length - 1, at + step))];
      select(to, { focus: true });
      event.preventDefault();
    };
    const onRow = target.closest && target.closest("li.row");
    switch (event.key) {
      case "j":
      case "ArrowDown":
        if (target.closest("article.hold, form") && event.key === "ArrowDown") return;
        return move(1);
      case "k":
      case "ArrowUp":
        if (target.closest("article.hold, form") && event.key === "ArrowUp") return;
        return move(current ? -1 : 0);
      case "Enter":
        if (onRow && current) {
          event.preventDefault();
          const link = cardEl()?.querySelector(".title a");
          if (link) link.click();
        }
        return;
      case "a":
        event.preventDefault();
        decideKey(approveOnce);
        return;
      case "d":
        event.preventDefault();
        denyStart();
        return;
      case "e":
        event.preventDefault();
        editStart();
        return;
      case "x":
        if (current) {
          event.preventDefault();
          togglePick(current, !picked.has(current));
        }
        return;
      case "A":
        event.preventDefault();
        approvePicked();
        return;
      case "/":
        event.preventDefault();
        filterBox.open = true;
        toolInput.focus();
        return;
      case "?":
        event.preventDefault();
        help.hidden = !help.hidden;
        return;
      case "Escape":
        if (!help.hidden) help.hidden = true;
        else if (picked.size) clearPicks();
        return;
      default:
    }
  }
  document.addEventListener("keydown", onKey);

  replace(main,
    h("div", { class: "inbox-head" },
      h("h1", {}, "Inbox"),
      h("p", { class: "muted keys" }, "Press ", h("kbd", {}, "?"), " for keys"),
      status,
      notify),
    filterBox,
    help,
    firstRun,
    h("div", { class: "triage" },
      h("section", { class: "queue", "aria-label": "Pending holds" },
        arrivals,
        pickedLine,
        empty,
        rowsEl,
        more),
      detail));
  main.classList.add("wide");
  await Promise.all([load(null), recount()]);

  return () => {
    generation += 1;
    main.classList.remove("wide");
    for (const stop of stops) stop();
    for (const t of timers) clearTimeout(t);
    clearTimeout(recountTimer);
    clearTimeout(countTimer);
    clearInterval(ticker);
    document.removeEventListener("keydown", onKey);
    document.title = "Holdpoint";
    if (count) count.textContent = "";
  };
}

function field(id, text, control) {
  return h("div", { class: "field" }, h("label", { for: id }, text), control);
}

// What a new user needs: what a hold is, and four ways to raise one.
function welcome() {
  const origin = location.origin;
  return h("section", { class: "first-run empty card", hidden: true, "aria-labelledby": "first-run-title" },
    h("h2", { id: "first-run-title" }, "Nothing is waiting for you."),
    h("p", {}, "A hold is a question an agent asks a person before it goes on: approve this tool call (with exactly these arguments), or choose one of these options. The agent waits; what you decide here is what it gets back. Holds you may decide appear here as they are raised."),
    h("h3", {}, "Raise one to see how it works"),
    h("dl", { class: "ways" },
      h("dt", {}, "With curl (an agent's token)"),
      h("dd", {}, h("pre", {}, h("code", {},
        `curl -H "Authorization: Bearer $AGENT" -H 'Content-Type: application/json' \\\n  ${origin}/api/v1/worlds/lab/holds \\\n  -d '{"items": [{"kind": "approval", "tool": "shell_cmd", "arguments": {"command": "make deploy"}}]}'`))),
      h("dt", {}, "From a script"),
      h("dd", {}, h("pre", {}, h("code", {}, 'holdpoint ask "Deploy v2 to production?" --option deploy --option abort --default abort --timeout 30m'))),
      h("dt", {}, "In front of MCP servers"),
      h("dd", {}, h("code", {}, "holdpoint mcp --world lab"), " for a coding agent, or ", h("code", {}, `${origin}/mcp/lab`), ": each tool call policy does not allow waits here."),
      h("dt", {}, "An agent of Holdpoint's own"),
      h("dd", {}, "Create one under ", h("a", { href: "/manage/agents" }, "Manage"), ", then talk to it in ", h("a", { href: "/worlds" }, "Chats"), ": its tool calls that policy does not allow come here.")));
}

// A hold in a sentence: the question, or the tool (with its command line, for a shell command).
function titleOf(hold) {
  const spec = hold.spec;
  switch (spec.kind) {
    case HoldKind.Approval: {
      const command = spec.arguments && spec.arguments.command;
      return typeof command === "string" ? `${spec.tool} “${command}”` : spec.tool;
    }
    case HoldKind.Question:
      return `“${spec.question}”`;
    default:
      return `a hold of a kind this page does not know (“${spec.kind}”)`;
  }
}

// What would run: the tool and its key argument (a command line, a path, a URL…), or the
// question asked.
function what(hold) {
  const spec = hold.spec;
  switch (spec.kind) {
    case HoldKind.Approval: {
      const arg = keyArgument(spec.arguments);
      return [h("code", { class: "tool" }, spec.tool), arg ? [" ", h("code", { class: "arg" }, arg)] : null];
    }
    case HoldKind.Question:
      return [h("span", { class: "kind-mark" }, "Question "), spec.question];
    default:
      return [h("span", { class: "kind-mark error unknown-kind" }, `Unknown kind of hold (“${spec.kind}”)`)];
  }
}

const KEY_ARGUMENTS = ["command", "cmd", "path", "file", "url", "query", "sql", "name", "target"];

function keyArgument(args) {
  if (!args || typeof args !== "object" || Array.isArray(args)) return args === undefined ? "" : JSON.stringify(args);
  const key = KEY_ARGUMENTS.find((k) => typeof args[k] === "string") || Object.keys(args).find((k) => typeof args[k] === "string");
  const text = key !== undefined ? args[key] : JSON.stringify(args);
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

// The marks that make a hold worth a second look: what its MCP server declares, the rule that
// asked, a quorum.
function marks(hold) {
  const out = [];
  const a = hold.spec.annotations || {};
  if (a.destructive === true) out.push(h("span", { class: "mark risk" }, "destructive"));
  if (a.open_world === true) out.push(h("span", { class: "mark" }, "outside world"));
  if (a.read_only === true) out.push(h("span", { class: "mark calm" }, "read-only"));
  if (hold.rule) out.push(h("span", { class: "mark rule", title: `Asked by ${ruleName(hold.rule)}` }, ruleName(hold.rule)));
  if (hold.quorum > 1) out.push(h("span", { class: "mark" }, `${(hold.votes || []).length}/${hold.quorum} approvals`));
  if (hold.approvers && hold.approvers.length) out.push(h("span", { class: "mark", title: `Only ${hold.approvers.join(", ")} may decide` }, `only ${hold.approvers.join(", ")}`));
  return out;
}

// "12s", "4m", "3h", "2d": how long ago.
function short(iso, now = Date.now()) {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m` : s < 86400 ? `${Math.floor(s / 3600)}h` : `${Math.floor(s / 86400)}d`;
}

// How long until the deadline: "4m left", "due", or "no deadline".
function left(iso, now = Date.now()) {
  if (!iso) return "no deadline";
  const ms = Date.parse(iso) - now;
  if (ms <= 0) return "due";
  return `${relative(iso, now).replace(/^in /, "").replace(/ \d+s$/, "")} left`;
}
