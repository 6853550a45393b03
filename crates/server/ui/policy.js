// A world's policy: what is in force (the base's locked rules and floor over the world's own
// text, or the base whole), every version (who, when, digest), and an editor whose text can
// be replayed over the world's recorded calls before it is applied. A decided hold's page
// opens it with the rule suggested from that decision added to the text, to review and apply.
import * as api from "./api.js";
import { actorName, h, problem, relative, replace, seg, when } from "./dom.js";
import { onEvent } from "./live.js";
import { CallVerdict, EventType, Role } from "./wire.js";

// How far back a replay reads, as the API's `since` ("" reads every recorded call).
const SINCE = [
  ["", "every recorded call"],
  ["1d", "the last day"],
  ["7d", "the last 7 days"],
  ["30d", "the last 30 days"],
];

export async function worldPolicy(main, [name], me) {
  return page(main, name, null, me);
}

// The same page, with the rule suggested from hold `id` added to the editor's text.
export async function suggestRule(main, [name, id], me) {
  return page(main, name, id, me);
}

async function page(main, name, holdId, me) {
  const [w, state, base, suggestion] = await Promise.all([
    api.getWorld(name),
    api.worldPolicy(name),
    api.policy(),
    holdId ? api.suggestedRule(holdId) : null,
  ]);
  const inForce = h("section", { class: "policy-in-force", "aria-labelledby": "in-force-title" });
  const history = h("section", { class: "policy-history", "aria-labelledby": "history-title" });
  const admin = me && me.role === Role.Admin;

  const draw = async (current) => {
    replace(inForce, h("h2", { id: "in-force-title" }, "In force"), ...inForceParts(current, state, base));
    try {
      const versions = await api.worldPolicyHistory(name);
      replace(history, h("h2", { id: "history-title" }, "Versions"), versionList(versions));
    } catch (error) {
      replace(history, h("h2", { id: "history-title" }, "Versions"), problem(error));
    }
  };

  const editor = edit(name, state.current, suggestion, holdId, admin, async (saved) => {
    state.current = saved;
    await draw(saved);
  });
  main.append(
    h("p", { class: "crumbs" }, h("a", { href: "/worlds" }, "Worlds"), " / ", h("a", { href: `/worlds/${seg(w.name)}` }, w.name)),
    h("h1", {}, `Policy of ${w.name}`),
    inForce,
    editor.section,
    history,
  );
  await draw(state.current);
  if (suggestion) editor.area.focus();

  // A change made elsewhere (another tab, the CLI) is shown as it happens.
  const stop = onEvent([EventType.PolicyChanged], async (event) => {
    if (event.world !== w.id) return;
    try {
      const again = await api.worldPolicy(name);
      state.current = again.current;
      await draw(again.current);
    } catch {
      // The next change, or a reload of the page, shows it.
    }
  });
  return stop;
}

// What binds the world now: the base's locked rules and floor, then the world's own text;
// without a text of its own, the base whole (its locked rules marked).
function inForceParts(current, state, base) {
  const locked = new Set(state.locked);
  const baseRules = current ? base.rules.filter((r) => locked.has(r.name)) : base.rules;
  return [
    current
      ? h("p", { class: "layer-summary" },
          `This world's own policy, version ${current.version}, set by ${actorName(current.by)} `,
          h("time", { datetime: current.at, title: when(current.at) }, relative(current.at)),
          ", over the base's locked rules and floor.")
      : h("p", { class: "layer-summary" }, "This world has no policy of its own: the server's policy (the base) applies whole."),
    state.mode_floor
      ? h("p", { class: "floor" }, "Mode floor (base): ", h("code", {}, state.mode_floor),
          " — no world's mode may be looser.")
      : null,
    h("h3", {}, current ? "Base rules that bind every world" : "Base rules"),
    baseRules.length === 0
      ? h("p", { class: "muted" }, current ? "The base locks no rule." : "The base has no rules: its mode decides.")
      : h("ul", { class: "rules" }, baseRules.map((r) => ruleItem(r, locked.has(r.name)))),
    current ? h("h3", {}, "This world's policy") : null,
    current ? h("pre", { class: "policy-text", "aria-label": `Policy text, version ${current.version}` }, current.text) : null,
  ];
}

function ruleItem(rule, isLocked) {
  return h("li", { dataset: { rule: rule.name, locked: isLocked ? "true" : "false" } },
    h("span", { class: `action ${rule.action}` }, rule.action),
    " ",
    h("span", { class: "name" }, rule.name),
    h("span", { class: "muted" }, ` — ${rule.tools.join(", ")}`),
    isLocked ? h("span", { class: "badge locked", title: "No world's policy can loosen it" }, "locked") : null);
}

function versionList(versions) {
  if (versions.length === 0) return h("p", { class: "muted" }, "No versions yet.");
  return h("ol", { class: "versions", reversed: true },
    [...versions].reverse().map((v) => h("li", { dataset: { version: String(v.version) } },
      h("strong", {}, `Version ${v.version}`),
      ` by ${actorName(v.by)}, `,
      h("time", { datetime: v.at, title: when(v.at) }, when(v.at)),
      h("br"),
      h("span", { class: "muted" }, "SHA-256 "),
      h("code", { class: "digest" }, v.digest))));
}

// The editor: the text, a replay over recorded calls, and applying it (admins).
function edit(name, current, suggestion, holdId, admin, saved) {
  const area = h("textarea", {
    id: "policy-text", name: "policy", rows: "16", spellcheck: "false", autocomplete: "off",
    "aria-describedby": "policy-problems",
  });
  area.value = startingText(current, suggestion);
  const since = h("select", { id: "replay-since", name: "since" }, SINCE.map(([value, words]) => h("option", { value }, words)));
  const problems = h("div", { id: "policy-problems", class: "problems", role: "alert" });
  const report = h("div", { class: "replay", role: "status" });
  const status = h("p", { class: "saved", role: "status" });
  const busy = (on) => {
    for (const b of section.querySelectorAll("button")) b.disabled = on;
  };

  const replay = async () => {
    clear();
    busy(true);
    try {
      const body = { text: area.value };
      if (since.value) body.since = since.value;
      replace(report, replayReport(await api.replayPolicy(name, body)));
    } catch (error) {
      showProblems(error);
    } finally {
      busy(false);
    }
  };
  const apply = async () => {
    clear();
    busy(true);
    try {
      const version = await api.setWorldPolicy(name, area.value);
      status.textContent = `Version ${version.version} is in force.`;
      await saved(version);
    } catch (error) {
      showProblems(error);
    } finally {
      busy(false);
    }
  };
  const clear = () => {
    replace(problems);
    replace(status);
    area.removeAttribute("aria-invalid");
  };
  // Every problem the API names, each with where it is in the text.
  const showProblems = (error) => {
    const list = error.details && Array.isArray(error.details.problems) ? error.details.problems : [];
    area.setAttribute("aria-invalid", "true");
    replace(problems,
      h("p", { class: "error" }, list.length
        ? `Not applied: ${list.length} problem${list.length === 1 ? "" : "s"}. The version in force stays.`
        : error.message),
      list.length
        ? h("ul", { class: "problem-list" }, list.map((p) =>
            h("li", { dataset: { path: p.path } }, p.path ? h("code", {}, p.path) : null, p.path ? ": " : "", p.message)))
        : null);
  };

  const section = h("section", { class: "policy-editor", "aria-labelledby": "editor-title" },
    h("h2", { id: "editor-title" }, suggestion ? "Add the suggested rule" : "Change this world's policy"),
    suggestion
      ? h("p", { class: "suggested" }, `The narrowest rule that would have decided hold `,
          h("a", { href: `/holds/${seg(holdId)}` }, holdId.slice(0, 8)),
          ` as it was decided (${suggestion.action}) is added at the end, with the call as its example. Review it, edit it, replay, then apply.`)
      : null,
    h("label", { for: "policy-text" }, "Policy text (TOML; the format is in docs/policy.md)"),
    area,
    problems,
    h("div", { class: "replay-controls" },
      h("label", { for: "replay-since" }, "Replay over"),
      since),
    h("div", { class: "buttons" },
      h("button", { type: "button", class: "quiet", "data-action": "replay", onclick: replay }, "Replay before applying"),
      admin
        ? h("button", { type: "button", class: "primary", "data-action": "apply", onclick: apply }, "Apply")
        : null),
    admin ? null : h("p", { class: "muted" }, "Only admins can apply a world's policy; you can replay a text to see what it would change."),
    status,
    report);
  return { section, area };
}

// The editor's first text: the world's own, else a start; with a suggestion, it appended.
function startingText(current, suggestion) {
  const text = current ? current.text : "# This world's own policy. It replaces the base here, except the base's locked rules and floor.\nmode = \"manual\"\n";
  if (!suggestion) return text;
  return `${text.replace(/\s*$/, "")}\n\n${suggestion.rule.replace(/\s*$/, "")}\n`;
}

// What the candidate would have decided differently: counts, then the first examples of each.
function replayReport(r) {
  const differently = r.calls - r.unchanged;
  return [
    h("h3", {}, "Replay"),
    h("p", { class: "replay-summary" },
      `${r.calls} recorded call${r.calls === 1 ? "" : "s"} replayed: ${r.unchanged} decided the same, ${differently} differently.`),
    r.granted
      ? h("p", { class: "muted" }, `${r.granted} of them allowed by a grant in force at the time, where the rules would ask.`)
      : null,
    r.changes.length === 0
      ? null
      : h("ul", { class: "changes" }, r.changes.map((c) => h("li", { dataset: { before: c.before, after: c.after } },
          h("strong", {}, `${c.count} ${BEFORE[c.before] || c.before} → would ${AFTER[c.after] || c.after}`),
          h("ul", { class: "examples" }, c.examples.map((e) => h("li", {},
            h("time", { datetime: e.at, title: when(e.at) }, relative(e.at)), " ",
            h("code", {}, e.tool), " ",
            h("code", { class: "arguments" }, JSON.stringify(e.arguments)),
            e.hold ? [" ", h("a", { href: `/holds/${seg(e.hold)}` }, "hold")] : null)))))),
  ];
}

const BEFORE = {
  allowed: "allowed without asking",
  denied: "denied without asking",
  approved: "approved by a person",
  denied_by_person: "denied by a person",
  timed_out: "timed out",
  withdrawn: "withdrawn",
  pending: "still pending",
};
/** @type {Record<import("./wire.js").CallVerdict, string>} */
const AFTER = { [CallVerdict.Allow]: "be allowed", [CallVerdict.Ask]: "ask", [CallVerdict.Deny]: "be denied" };
