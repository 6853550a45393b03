// The hold card: one component for the inbox, the hold page and chats. It shows what is asked
// as data (arguments, digest, the rule that asked, the deadline and what happens then, the
// question's context, the quorum so far) and exactly the decisions the hold offers. It keeps
// itself current from the live stream: a hold decided in another tab, by another person, by
// the clock or withdrawn is re-read and shows how and by whom.
import { decide, getHold, holdFile } from "./api.js";
import { argumentLines, diffView, lineDiff } from "./diff.js";
import { h, relative, replace, seg, when } from "./dom.js";
import { onEvent, onResync } from "./live.js";
import {
  ApproveScope, DecideOutcome, DecisionAction, DecisionKind, EventType, HOLD_EVENT_TYPES, HoldKind,
  HoldStatus, OPEN_HOLD_STATUSES, OutcomeStatus, RESOLVING_EVENT_TYPES, SCOPE_OF_DECISION, Source,
  TimeoutAction, Verdict,
} from "./wire.js";

/** @typedef {import("./wire.js").ApproveScope} Scope */

// What each approve decision sends as `scope` (wire.js's SCOPE_OF_DECISION), and how its
// scope reads.
// How long a grant may last ("approve for N minutes/hours"), for the decisions that make
// one: the API's `expires_in`; "" makes a grant that lasts until it is revoked.
const LASTS = [
  ["", "until revoked"],
  ["10m", "10 minutes"],
  ["1h", "1 hour"],
  ["8h", "8 hours"],
  ["1d", "1 day"],
];
/** @type {Record<Scope, string>} */
const SCOPE_WORDS = {
  [ApproveScope.Once]: "once",
  [ApproveScope.Chat]: "for this chat",
  [ApproveScope.AlwaysArgs]: "always (these arguments)",
  [ApproveScope.AlwaysTool]: "always (this tool)",
};
// The approve decisions that make a grant: every scope but this call alone.
const GRANTS = Object.entries(SCOPE_OF_DECISION)
  .filter(([, scope]) => scope !== ApproveScope.Once)
  .map(([kind]) => kind);
// Argument values longer than this (as pretty JSON) are folded into a <details>.
const LONG = 160;

// `card(hold, {link, heading, names, agentName, via})`: an `<article class="card hold">` that
// keeps itself current. `link`: the title links to the hold's page. `heading`: the title's tag
// ("h2"). `names(id)` (a world's or a chat's), `agentName(agentId)`: names, where the page
// knows them. `via`: the client the decision was made through (`resolvedVia(history)`), where
// the page has the hold's history.
export function card(hold, options = {}) {
  const el = h("article", { class: "card hold", tabindex: "0", dataset: { hold: hold.id } });
  // Element ids are the card's own, so one hold shown twice on a page keeps its labels apart.
  cardCount += 1;
  const state = { hold, options, note: null, uid: `card${cardCount}`, via: options.via || null };
  CARDS.set(el, state);
  paint(el, state);
  watch(el);
  return el;
}

// The hold a card shows now.
export function shown(el) {
  const state = CARDS.get(el);
  return state && state.hold;
}

// Draws the card again as it is (once the page has learnt a name it shows, say).
export function repaint(el) {
  const state = CARDS.get(el);
  if (state) paint(el, state);
}

// Shows `hold` (a newer version of the card's hold) in the card, with an optional note.
export function update(el, hold, note) {
  const state = CARDS.get(el);
  if (!state || hold.id !== state.hold.id) return;
  if (hold.version < state.hold.version) return;
  // Nothing new (a re-read after the event that drew it): the card, and whatever is being
  // typed into it, stays as it is.
  if (hold.version === state.hold.version && hold.status === state.hold.status && note === undefined) return;
  // A note about the hold as it was (a vote counted) ends with it, unless a new one is given.
  if (note !== undefined) state.note = note;
  else if (isOpen(state.hold) && !isOpen(hold)) state.note = null;
  state.hold = hold;
  paint(el, state);
}

// Sends `decision` for the card's hold and shows the result; a decision that lost a race shows
// the recorded one. Returns the hold as it now stands (or null after an error, shown in the
// card next to `where`).
export async function send(el, decision, where) {
  const state = CARDS.get(el);
  const id = state.hold.id;
  const hadFocus = el.contains(document.activeElement);
  setBusy(el, true);
  clearErrors(el);
  try {
    const result = await decide(id, decision);
    update(el, result.hold, result.result === DecideOutcome.VoteRecorded ? "Your approval is counted; more are needed." : null);
    return result.hold;
  } catch (error) {
    const recorded = error.code === "already_decided" && error.details && error.details.hold;
    if (recorded) {
      update(el, recorded, "This was decided before your click reached Holdpoint; this is the decision recorded.");
      return recorded;
    }
    setBusy(el, false);
    showError(el, error, where);
    return null;
  } finally {
    // A decided card loses its buttons: keep the keyboard on the card.
    if (hadFocus && !el.contains(document.activeElement) && el.isConnected) el.focus({ preventScroll: true });
  }
}

// The confirm step of a question that asks for one: the choice is read back, and nothing is
// sent until it is confirmed (then the answer and its confirmation, one after the other, as
// the API records them). "Back" returns to the options with the question still open.
function review(el, form, choosing, spec, options) {
  const labels = spec.options.filter((o) => options.includes(o.id)).map((o) => o.label);
  const back = () => {
    step.remove();
    for (const part of choosing) part.hidden = false;
    choosing[0].querySelector("input")?.focus();
  };
  const confirm = async () => {
    const answered = await send(el, { action: DecisionAction.Answer, options }, form);
    if (answered && answered.status === HoldStatus.AwaitingConfirm) await send(el, { action: DecisionAction.Confirm }, form);
  };
  const step = h("div", { class: "review", role: "group", "aria-label": "Confirm the answer" },
    h("p", {}, `Confirm “${labels.join(", ")}”?`),
    h("div", { class: "buttons" },
      h("button", { type: "button", class: "primary", "data-decision": DecisionKind.Confirm, onclick: confirm }, "Confirm"),
      h("button", { type: "button", class: "quiet", "data-step": "back", onclick: back }, "Back")));
  for (const part of choosing) part.hidden = true;
  form.append(step);
  step.querySelector("button").focus();
}

// Approves once with the digest shown, as the keyboard's "a" does. Only where it is offered.
export function approveOnce(el) {
  const hold = shown(el);
  if (!hold || !isOpen(hold) || !hold.offers.includes(DecisionKind.ApproveOnce)) return null;
  return send(el, { action: DecisionAction.Approve, scope: ApproveScope.Once, digest: hold.spec.digest });
}

// Denies without a reason (or with the one typed), as the keyboard's "d" does.
export function denyNow(el) {
  const hold = shown(el);
  if (!hold || !isOpen(hold) || !hold.offers.includes(DecisionKind.Deny)) return null;
  return send(el, { action: DecisionAction.Deny, reason: reasonOf(el) });
}

// The client through which the decision that ended a hold was made (an MCP client's
// elicitation, a client naming itself with Holdpoint-Via), from the hold's history; null when
// none was named.
export function resolvedVia(history) {
  const ended = (history || []).find((e) => RESOLVING_EVENT_TYPES.includes(e.payload.type));
  return (ended && ended.actor && ended.actor.via) || null;
}

export function isOpen(hold) {
  return OPEN_HOLD_STATUSES.includes(hold.status);
}

// Whether `hold` is of a kind this page knows (wire.js's HoldKind); one it does not is shown
// as that, never drawn as another kind.
export function knownKind(hold) {
  return Object.values(HoldKind).includes(hold && hold.spec && hold.spec.kind);
}

// The card of a hold of a kind this page does not know: says so, and offers no decision.
function unknownKind(hold) {
  return h("p", { class: "error unknown-kind", role: "alert" },
    `This hold is of a kind this page does not know (“${hold.spec && hold.spec.kind}”): reload the page, or decide it from another client.`);
}

// --- Keeping cards current ------------------------------------------------------------------

const CARDS = new WeakMap();
let cardCount = 0;
// Cards by hold id; a card taken out of the page is dropped at the next event for its hold.
const byHold = new Map();
let listening = false;

function watch(el) {
  const id = CARDS.get(el).hold.id;
  if (!byHold.has(id)) byHold.set(id, new Set());
  byHold.get(id).add(el);
  if (listening) return;
  listening = true;
  // Every change after the one that raised it (a card is drawn from the hold as raised).
  const changes = HOLD_EVENT_TYPES.filter((type) => type !== EventType.HoldCreated);
  onEvent(changes, (event) => {
    if (event.hold && byHold.has(event.hold)) refresh(event.hold);
  });
  onResync(() => {
    for (const id of byHold.keys()) refresh(id);
  });
  setInterval(tick, 1000);
}

async function refresh(id) {
  const els = [...(byHold.get(id) || [])].filter((el) => {
    if (el.isConnected) return true;
    // Created but not yet placed: keep it; placed once and removed since: forget it.
    if (el.dataset.placed) byHold.get(id).delete(el);
    return !el.dataset.placed;
  });
  if (byHold.get(id) && byHold.get(id).size === 0) byHold.delete(id);
  if (els.length === 0) return;
  try {
    const { hold, history } = await getHold(id);
    const via = resolvedVia(history);
    for (const el of els) {
      const state = CARDS.get(el);
      if (state && via) state.via = via;
      update(el, hold);
    }
  } catch {
    // Not visible any more (or the server is away): the resync after reconnecting re-reads.
  }
}

// The countdowns of every card on the page, once a second.
function tick() {
  const now = Date.now();
  for (const t of document.querySelectorAll("article.hold time[data-countdown]")) {
    t.textContent = countdown(t.getAttribute("datetime"), now);
  }
  for (const el of document.querySelectorAll("article.hold:not([data-placed])")) /** @type {HTMLElement} */ (el).dataset.placed = "1";
}

function countdown(iso, now = Date.now()) {
  return Date.parse(iso) > now ? relative(iso, now) : "now (the deadline has passed)";
}

// --- Drawing --------------------------------------------------------------------------------

function paint(el, state) {
  const { hold, options } = state;
  const kept = keep(el);
  el.dataset.status = hold.status;
  el.dataset.kind = hold.spec.kind;
  el.dataset.batch = hold.batch;
  const titleId = `${state.uid}-title`;
  el.setAttribute("aria-labelledby", titleId);
  const Heading = options.heading || "h2";
  const link = (title) => (options.link ? h("a", { href: `/holds/${encodeURIComponent(hold.id)}` }, title) : title);
  if (!knownKind(hold)) {
    replace(el,
      h(Heading, { class: "title", id: titleId }, h("span", { class: "kind" }, "Unknown kind of hold: "), link(hold.id)),
      meta(hold, options),
      unknownKind(hold));
    return;
  }
  const approving = hold.spec.kind === HoldKind.Approval;
  const title = approving ? hold.spec.tool : hold.spec.question;
  replace(
    el,
    h(Heading, { class: "title", id: titleId },
      h("span", { class: "kind" }, approving ? "Approve " : "Question: "),
      link(title)),
    meta(hold, options),
    approving ? approval(hold, sub(Heading), state) : question(hold, sub(Heading)),
    facts(hold),
    isOpen(hold) ? decisions(el, hold, state.uid) : outcome(hold, sub(Heading), state.via),
    state.note ? h("p", { class: "note", role: "status" }, state.note) : null,
    h("p", { class: "error", role: "alert", "data-error": "card" }),
  );
  restore(el, kept, hold);
}

function meta(hold, options) {
  const world = (options.names && options.names(hold.world)) || hold.world;
  // A runtime agent is named by id in the hold; its name where the page knows it.
  // A sub-agent's name is in the hold's lineage, where the page may not know the agent.
  const last = (hold.lineage || []).find((step) => step.agent === hold.agent);
  const agent = (hold.agent && options.agentName && options.agentName(hold.agent)) || (last && last.name);
  const who = agent ? `agent ${agent}` : hold.requested_by;
  return h("p", { class: "meta muted" },
    h("span", {}, `World ${world}`),
    // A hold of one of Holdpoint's chats links to it (the chat page takes a world's id as well
    // as its name); a chat named by a client from outside ("ticket-4711") is only its id.
    hold.chat && inHoldpointChat(hold)
      ? h("span", {}, " · ", h("a", { href: `/worlds/${seg(hold.world)}/chats/${seg(hold.chat)}` },
          (options.names && options.names(hold.chat)) || "in a chat"))
      : hold.chat ? h("span", { class: "external-chat" }, " · chat ", h("code", {}, hold.chat)) : null,
    h("span", {}, ` · asked by ${who}`),
    lineage(hold),
    h("span", {}, " · "),
    h("time", { datetime: hold.created_at, title: when(hold.created_at) }, relative(hold.created_at)));
}

// A sub-agent's call, or a remote agent's: the agents it came through, outermost first
// ("for helper → researcher"), each a Holdpoint agent's chat where it has one.
function lineage(hold) {
  const steps = hold.lineage || [];
  if (!steps.length) return null;
  const parts = [];
  steps.forEach((step, i) => {
    if (i) parts.push(" → ");
    parts.push(step.chat
      ? h("a", { href: `/worlds/${seg(hold.world)}/chats/${seg(step.chat)}` }, step.name)
      : h("span", { class: "remote" }, step.name));
  });
  return h("span", { class: "lineage", title: "The agents this call came through, outermost first" }, " · through ", ...parts);
}

// Whether the hold is a call of a turn in one of Holdpoint's own chats: raised by the runtime
// for its agent (a client from outside may name any chat, and has no turn to stop).
export function inHoldpointChat(hold) {
  return Boolean(hold.chat && hold.agent && hold.tool_call_id && hold.requested_by === `agent:${hold.agent}`);
}

// The heading level under a card's title ("h2" → "h3").
function sub(heading) {
  return `h${Math.min(6, Number(heading.slice(1)) + 1)}`;
}

// An approval's call, each thing once: a command line as itself (not again among the
// arguments), a file write as the difference it makes, the other arguments as data, and the
// digest they are approved by behind a disclosure.
function approval(hold, level, state) {
  const spec = hold.spec;
  const args = spec.arguments && typeof spec.arguments === "object" && !Array.isArray(spec.arguments) ? spec.arguments : null;
  const command = spec.tool === "shell_cmd" && args && typeof args.command === "string" ? args.command : null;
  const write = isFileWrite(spec) ? args : null;
  // What the data below leaves out, shown above in its own form.
  const shownAbove = new Set(command !== null ? ["command"] : write ? ["path", "content"] : []);
  const rest = args ? Object.fromEntries(Object.entries(args).filter(([key]) => !shownAbove.has(key))) : spec.arguments;
  const restEmpty = args && Object.keys(rest).length === 0;
  return [
    spec.mcp ? mcpTool(spec) : null,
    spec.description ? h("p", { class: "why" }, h("span", { class: "muted" }, "The agent says: "), spec.description) : null,
    command !== null ? h("pre", { class: "command", "aria-label": "Command line" }, h("code", {}, command)) : null,
    write ? fileWrite(hold, level, state) : null,
    restEmpty ? null : h("div", { class: "args" }, h(level, { class: "sub" }, shownAbove.size ? "Other arguments" : "Arguments"), data(rest)),
    h("details", { class: "digest-details" },
      h("summary", {}, "Argument digest ", h("span", { class: "muted" }, `(${spec.digest.slice(0, 15)}…)`)),
      h("p", { class: "digest" }, h("span", { class: "muted" }, "The approval is for exactly these arguments: "), h("code", {}, spec.digest))),
  ];
}

// A `write_file` call of Holdpoint's agents: a path and the text to write.
function isFileWrite(spec) {
  const a = spec.arguments;
  return spec.tool === "write_file" && !spec.mcp && a && typeof a.path === "string" && typeof a.content === "string";
}

// The difference a file write makes to the file as it is now (read from the world's
// directory by the server), or the whole text for a new file. The difference is a view: the
// approval's digest covers the arguments, exactly as the agent sent them.
function fileWrite(hold, level, state) {
  const { path, content, append } = hold.spec.arguments;
  const box = h("div", { class: "file-write" },
    h(level, { class: "sub" }, append ? "Appends to " : "Writes ", h("code", { class: "file-path" }, path)));
  const body = h("div", { class: "file-diff", "aria-live": "off" });
  box.append(body);
  const draw = (now) => {
    if (!now) return replace(body, h("p", { class: "muted" }, "Reading the file as it is now…"));
    if (now.error) {
      return replace(body, h("p", { class: "muted", dataset: { file: "unknown" } }, `The file as it is now could not be read (${now.error}); the text to write:`),
        diffView(lineDiff("", content)));
    }
    if (!now.exists) {
      return replace(body, h("p", { class: "file-state", dataset: { file: "new" } }, "New file: nothing is there now."),
        diffView(lineDiff("", content)));
    }
    if (now.content === undefined || now.content === null) {
      return replace(body, h("p", { class: "file-state", dataset: { file: "unread" } },
        now.too_large ? `The file is there now (${now.bytes} bytes), too large to compare here; the text to write:`
          : `The file is there now (${now.bytes} bytes) and is not text; the text to write:`),
        diffView(lineDiff("", content)));
    }
    const after = append ? now.content + content : content;
    const diff = lineDiff(now.content, after);
    const changed = diff.filter((d) => d.op !== "same").length;
    return replace(body,
      h("p", { class: "file-state", dataset: { file: "changed" } },
        changed ? `Changes to the file as it is now (${now.bytes} bytes):` : "The file already reads exactly this: nothing changes."),
      diffView(diff));
  };
  // Decided before the card was drawn: the file as it was then is not kept (it may hold the
  // write by now), so the text the call carried is shown.
  if (state.file === undefined && !isOpen(hold)) {
    replace(body, h("p", { class: "muted", dataset: { file: "decided" } }, "The text the call carried (the file as it was then is not kept):"),
      diffView(lineDiff("", content)));
    return box;
  }
  if (state.file === undefined) {
    state.file = null;
    holdFile(hold.id).then(
      (now) => { state.file = now; draw(now); },
      (error) => { state.file = { error: error.message || String(error) }; draw(state.file); });
  }
  draw(state.file);
  return box;
}

// Which MCP server's tool the call is, and what that server declares of it (hints, not
// guarantees: they come from the server).
function mcpTool(spec) {
  const a = spec.annotations || {};
  const hints = [
    a.read_only === true ? "read-only" : null,
    a.destructive === true ? "destructive" : null,
    a.destructive === false ? "not destructive" : null,
    a.idempotent === true ? "idempotent" : null,
    a.open_world === true ? "reaches the outside world" : null,
  ].filter((x) => x !== null);
  return h("p", { class: "mcp" },
    h("span", { class: "muted" }, "Tool "), h("code", { class: "mcp-tool" }, spec.mcp.tool),
    h("span", { class: "muted" }, " of MCP server "), h("code", { class: "mcp-server" }, spec.mcp.server),
    hints.length ? h("span", { class: "muted" }, ` (the server says: ${hints.join(", ")})`) : null);
}

function question(hold, level) {
  const spec = hold.spec;
  return [
    spec.kind === HoldKind.Question && hold.spec.multiple ? h("p", { class: "muted" }, "Several options may be chosen.") : null,
    spec.context ? h("div", { class: "args" }, h(level, { class: "sub" }, "Context"), data(spec.context)) : null,
  ];
}

// JSON as data: an object's fields one by one, each value pretty-printed; long ones folded.
function data(value) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return h("pre", {}, pretty(value));
  const keys = Object.keys(value);
  if (keys.length === 0) return h("p", { class: "muted" }, "(none)");
  return h("dl", { class: "data" }, keys.map((key) => {
    const text = pretty(value[key]);
    const long = text.length > LONG || text.split("\n").length > 6;
    return [
      h("dt", {}, key),
      h("dd", {}, long
        ? h("details", {}, h("summary", {}, `${text.slice(0, 60).replace(/\s+/g, " ")}… (${text.length} characters)`), h("pre", {}, text))
        : h("pre", {}, text)),
    ];
  }));
}

function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

// The rule that asked, the deadline and what happens then, the quorum so far.
function facts(hold) {
  const items = [];
  if (hold.rule) items.push(h("li", {}, `Asked by ${ruleName(hold.rule)}`));
  else if (hold.asks_because) items.push(h("li", {}, `Asked because ${hold.asks_because}`));
  else if (hold.spec.kind === HoldKind.Approval) items.push(h("li", {}, "Asked because no rule decides this call (the policy's mode)"));
  if (isOpen(hold)) {
    items.push(hold.deadline
      ? h("li", { class: "deadline" }, "Deadline ",
          // A countdown is not news: it is read when the card is, not every second.
          h("time", { datetime: hold.deadline, "data-countdown": "", title: when(hold.deadline), "aria-live": "off" }, countdown(hold.deadline)),
          `; then ${timeoutWords(hold)}`)
      : h("li", { class: "deadline" }, "No deadline: it waits until someone decides"));
  }
  if (hold.quorum > 1) {
    const votes = hold.votes || [];
    items.push(h("li", { class: "quorum" }, `Approvals ${votes.length} of ${hold.quorum}`,
      votes.length ? `: ${votes.map((v) => v.by).join(", ")}` : ""));
  }
  if (hold.approvers && hold.approvers.length) {
    items.push(h("li", { class: "deciders" }, "Who may decide: ",
      h("strong", {}, hold.approvers.join(", ")), " (no one else)"));
  }
  return h("ul", { class: "facts" }, items);
}

// A length of time in words: "10 minutes", "1 hour", "1 day 2 hours" (two units at most).
export function lasting(ms) {
  /** @type {Array<[number, string]>} */
  const units = [[86400, "day"], [3600, "hour"], [60, "minute"], [1, "second"]];
  let left = Math.max(0, Math.round(ms / 1000));
  const parts = [];
  for (const [size, word] of units) {
    const n = Math.floor(left / size);
    if (n > 0 && parts.length < 2) parts.push(`${n} ${word}${n === 1 ? "" : "s"}`);
    left -= n * size;
  }
  return parts.length ? parts.join(" ") : "0 seconds";
}

// A duration as the server writes it ("1day", "2h 30m", "90s") in words ("1 day",
// "2 hours 30 minutes"); text that is not one is returned as it is.
export function spelled(text) {
  const units = { d: 86400, day: 86400, days: 86400, h: 3600, hour: 3600, hours: 3600, hr: 3600,
    m: 60, min: 60, mins: 60, minute: 60, minutes: 60, s: 1, sec: 1, secs: 1, second: 1, seconds: 1,
    w: 604800, week: 604800, weeks: 604800 };
  const parts = String(text).trim().split(/\s+/);
  let total = 0;
  for (const part of parts) {
    const m = /^(\d+)\s*([a-z]+)$/.exec(part);
    if (!m || !(m[2] in units)) return text;
    total += Number(m[1]) * units[m[2]];
  }
  return lasting(total * 1000);
}

// How long a grant lasts, in words: "for 1 hour (until 14:05)", or "until revoked".
export function grantLasts(grant) {
  if (!grant.expires_at) return "until revoked";
  const length = Date.parse(grant.expires_at) - Date.parse(grant.created_at);
  return `for ${lasting(length)} (until ${when(grant.expires_at)})`;
}

// As the server and the CLI say it: rule "name", or rules[N] for a rule without one.
export function ruleName(rule) {
  return rule.name === `rules[${rule.index}]` ? rule.name : `rule “${rule.name}”`;
}

function timeoutWords(hold) {
  const t = hold.on_timeout;
  switch (t.action) {
    case TimeoutAction.Approve:
      return "it is approved";
    case TimeoutAction.Deny:
      return "it is denied";
    case TimeoutAction.Choose:
      return `option “${optionLabel(hold, t.option)}” is applied`;
    case TimeoutAction.NoAnswer:
      return "it ends with no answer";
    default:
      return `“${t.action}” (a timeout this page does not know)`;
  }
}

function optionLabel(hold, id) {
  const option = (hold.spec.options || []).find((o) => o.id === id);
  return option ? option.label : id;
}

// How the hold ended and by whom, in words.
export function outcomeWords(hold) {
  const o = hold.outcome;
  if (!o) return "";
  const by = o.decided_by && o.decided_by.length ? o.decided_by.join(", ") : null;
  const chosen = (o.options || []).map((c) => c.label).join(", ");
  let text;
  if (o.source === Source.Timeout) {
    text = "No one decided before the deadline: "
      + (o.verdict === Verdict.Approve ? "approved"
        : o.verdict === Verdict.Deny ? "denied"
        : chosen ? `“${chosen}” applied`
        : "no answer");
  } else if (o.source === Source.Default) {
    text = `Denied by default: ${by || "a client"} could not ask anyone`;
    if (chosen) text = `Default applied (${chosen}) by ${by || "a client"}'s client`;
  } else if (o.status === OutcomeStatus.Canceled && o.source !== Source.Person) {
    text = `Withdrawn by ${by || o.source}`;
  } else {
    const who = by || o.source;
    switch (o.status) {
      case OutcomeStatus.Approved:
        text = o.edited ? `Approved with edited arguments by ${who}` : `Approved ${SCOPE_WORDS[o.scope] || ""} by ${who}`.replace("  ", " ");
        break;
      case OutcomeStatus.Denied:
        text = o.stop_turn ? `Denied and the turn stopped by ${who}` : `Denied by ${who}`;
        break;
      case OutcomeStatus.Answered:
        text = `Answered by ${who}: ${chosen}`;
        break;
      case OutcomeStatus.Confirmed:
        text = `Confirmed by ${who}: ${chosen}`;
        break;
      case OutcomeStatus.Canceled:
        text = `Canceled by ${who}`;
        break;
      default:
        text = `${o.status} by ${who}`;
    }
  }
  return o.reason ? `${text} — “${o.reason}”` : text;
}

function outcome(hold, level, via) {
  const o = hold.outcome;
  return h("div", { class: `outcome ${hold.status}` },
    h("p", {}, h("strong", {}, outcomeWords(hold))),
    via ? h("p", { class: "via muted" }, "Decided via ", h("span", { class: "via-client" }, via)) : null,
    o ? h("p", { class: "muted" }, h("time", { datetime: o.decided_at, title: when(o.decided_at) }, relative(o.decided_at))) : null,
    o && o.edited && o.arguments
      ? h("div", { class: "args edited" },
          h(level, { class: "sub" }, "Arguments that run: the edit, before and after"),
          diffView(lineDiff(argumentLines(hold.spec.arguments), argumentLines(o.arguments))),
          h("details", {}, h("summary", {}, "The arguments that run, whole"), data(o.arguments)))
      : null);
}

// --- Deciding -------------------------------------------------------------------------------

function decisions(el, hold, uid) {
  const form = h("form", { class: "decide", "aria-label": "Decide" });
  form.addEventListener("submit", (e) => e.preventDefault());
  const offers = new Set(hold.offers);
  const button = (kind, label, cls, onclick) =>
    offers.has(kind) ? h("button", { type: "button", class: cls, "data-decision": kind, onclick }, label) : null;

  if (hold.status === HoldStatus.AwaitingConfirm) {
    const answer = hold.pending_answer;
    form.append(
      h("p", {}, answer ? `${answer.by} chose “${answer.options.map((o) => o.label).join(", ")}”. Confirm?` : "Confirm the chosen answer?"),
      h("div", { class: "buttons" },
        button(DecisionKind.Confirm, "Confirm", "primary", () => send(el, { action: DecisionAction.Confirm }, form)),
        button(DecisionKind.Cancel, "Cancel the question", "quiet", () => send(el, { action: DecisionAction.Cancel }, form))),
    );
    return form;
  }

  if (hold.spec.kind === HoldKind.Question) {
    const spec = hold.spec;
    const type = spec.multiple ? "checkbox" : "radio";
    const inputs = [];
    const fieldset = h("fieldset", { class: "options" }, h("legend", { class: "for-readers" }, spec.question));
    spec.options.forEach((option, i) => {
      const id = `${uid}-option-${i}`;
      const input = h("input", { type, name: "option", value: option.id, id });
      inputs.push([input, option.id]);
      fieldset.append(h("div", { class: "option" }, input,
        h("label", { for: id }, option.label,
          option.description ? h("span", { class: "muted" }, ` — ${option.description}`) : null,
          option.id === spec.default_option ? h("span", { class: "muted" }, " (default)") : null)));
    });
    // Only the options this card drew can be sent, and only as the hold's own ids: an input
    // added or altered in the page afterwards changes nothing.
    const chosen = () => inputs.filter(([input]) => input.checked).map(([, id]) => id);
    const choosing = h("div", { class: "buttons" },
      button(DecisionKind.Answer, spec.confirm ? "Choose" : "Answer", "primary", () => {
        const options = chosen();
        if (options.length === 0) return showError(el, new Error("Choose an option first."), form);
        if (spec.confirm) return review(el, form, [fieldset, choosing], spec, options);
        send(el, { action: DecisionAction.Answer, options }, form);
      }),
      button(DecisionKind.Cancel, "Cancel the question", "quiet", () => send(el, { action: DecisionAction.Cancel }, form)));
    form.append(fieldset, choosing);
    return form;
  }

  const digest = hold.spec.digest;
  const reasonId = `${uid}-reason`;
  const denies = offers.has(DecisionKind.Deny) || offers.has(DecisionKind.DenyStop);
  // Up front: approve this call once, or deny it (with the reason typed beside it, if any).
  form.append(h("div", { class: "buttons first" },
    button(DecisionKind.ApproveOnce, "Approve once", "primary",
      () => send(el, { action: DecisionAction.Approve, scope: ApproveScope.Once, digest }, form)),
    button(DecisionKind.Deny, "Deny", "danger", () => send(el, { action: DecisionAction.Deny, reason: reasonOf(el) }, form))));
  if (denies) {
    // "Deny and stop the turn" only where there is a turn: a call of one of Holdpoint's chats.
    const stop = inHoldpointChat(hold)
      ? button(DecisionKind.DenyStop, "Deny and stop the turn", "danger quiet", () => send(el, { action: DecisionAction.DenyStop, reason: reasonOf(el) }, form))
      : null;
    form.append(h("div", { class: "reason" },
      h("label", { for: reasonId }, "Reason for denying ", h("span", { class: "muted" }, "(optional, sent with a denial)")),
      h("input", { type: "text", id: reasonId, name: "reason", autocomplete: "off" }),
      stop ? h("div", { class: "buttons" }, stop) : null));
  }
  // Approving for longer (a grant): one control; what it will do is chosen, and read on its
  // button, before it acts.
  const scoped = GRANTS.filter((kind) => offers.has(kind));
  if (scoped.length) {
    const scopeId = `${uid}-scope`;
    const lastsId = `${uid}-lasts`;
    const scope = h("select", { id: scopeId, name: "scope" },
      scoped.map((kind) => h("option", { value: kind }, SCOPE_WORDS[SCOPE_OF_DECISION[kind]])));
    const lasts = h("select", { id: lastsId, name: "expires_in" },
      LASTS.map(([value, words]) => h("option", { value }, words)));
    const go = h("button", { type: "button", class: "quiet scoped-approve" });
    const label = () => {
      const kind = scope.value;
      const words = (LASTS.find(([value]) => value === lasts.value) || LASTS[0])[1];
      go.dataset.decision = kind;
      go.textContent = `Approve ${SCOPE_WORDS[SCOPE_OF_DECISION[kind]]}, ${lasts.value ? `for ${words}` : words}`;
    };
    scope.addEventListener("change", label);
    lasts.addEventListener("change", label);
    go.addEventListener("click", () => send(el, {
      action: DecisionAction.Approve,
      scope: SCOPE_OF_DECISION[scope.value],
      digest,
      expires_in: lasts.value || undefined,
    }, form));
    label();
    form.append(h("fieldset", { class: "scoped" },
      h("legend", {}, "Or approve for longer"),
      h("div", { class: "field" }, h("label", { for: scopeId }, "Approve"), scope),
      h("div", { class: "field" },
        h("label", { for: lastsId }, "Remember the approval for"),
        lasts),
      h("div", { class: "buttons" }, go)));
  }
  if (offers.has(DecisionKind.Edit)) form.append(editor(el, hold, uid));
  return form;
}

// "Edit the arguments, then approve": a JSON editor; what the server says is wrong with the
// edit is shown under it and tied to it for screen readers.
function editor(el, hold, uid) {
  const areaId = `${uid}-edit`;
  const errorId = `${areaId}-error`;
  const area = h("textarea", { id: areaId, name: "arguments", rows: "8", spellcheck: "false", "aria-describedby": errorId, autocomplete: "off" });
  area.value = JSON.stringify(hold.spec.arguments, null, 2);
  const fieldError = h("p", { class: "error field-error", id: errorId, "data-error": "edit" });
  const details = h("details", { class: "edit" },
    h("summary", {}, "Edit the arguments, then approve"),
    h("label", { for: areaId }, "Arguments (JSON)"),
    area,
    fieldError,
    h("div", { class: "buttons" }, h("button", { type: "button", class: "primary", "data-decision": DecisionKind.Edit, onclick: () => {
      let args;
      try {
        args = JSON.parse(area.value);
      } catch (error) {
        area.setAttribute("aria-invalid", "true");
        return showError(el, new Error(`This is not JSON: ${error.message}`), details);
      }
      send(el, { action: DecisionAction.Edit, arguments: args, reason: reasonOf(el) }, details);
    } }, "Approve these arguments")));
  return details;
}

function reasonOf(el) {
  const input = el.querySelector("input[name=reason]");
  const text = input ? input.value.trim() : "";
  return text || undefined;
}

function setBusy(el, busy) {
  for (const b of el.querySelectorAll("button[data-decision]")) b.disabled = busy;
  el.setAttribute("aria-busy", busy ? "true" : "false");
}

function clearErrors(el) {
  for (const p of el.querySelectorAll("[data-error]")) p.textContent = "";
  for (const a of el.querySelectorAll("[aria-invalid]")) a.removeAttribute("aria-invalid");
}

// Shows an error in the card: next to the editor for an edit, else under the decisions.
function showError(el, error, where) {
  const inEditor = where && where.matches && where.matches("details.edit");
  const target = el.querySelector(inEditor ? "[data-error=edit]" : "[data-error=card]");
  if (inEditor) el.querySelector("textarea[name=arguments]").setAttribute("aria-invalid", "true");
  if (target) target.textContent = error.message || String(error);
}

// What a person has typed or chosen survives a redraw of a card that is still open.
function keep(el) {
  const reason = el.querySelector("input[name=reason]");
  const area = el.querySelector("textarea[name=arguments]");
  const edit = el.querySelector("details.edit");
  const lasts = el.querySelector("select[name=expires_in]");
  const scope = el.querySelector("select[name=scope]");
  return {
    lasts: lasts ? lasts.value : "",
    scope: scope ? scope.value : null,
    reason: reason ? reason.value : "",
    args: area ? area.value : null,
    editing: edit ? edit.open : false,
    checked: [...el.querySelectorAll("input[name=option]:checked")].map((i) => i.id),
    focus: el.contains(document.activeElement) && document.activeElement.id ? document.activeElement.id : null,
  };
}

function restore(el, kept, hold) {
  if (!isOpen(hold)) return;
  const reason = el.querySelector("input[name=reason]");
  if (reason) reason.value = kept.reason;
  const lasts = el.querySelector("select[name=expires_in]");
  if (lasts) lasts.value = kept.lasts;
  const scope = el.querySelector("select[name=scope]");
  if (scope && kept.scope && [...scope.options].some((o) => o.value === kept.scope)) scope.value = kept.scope;
  // The button reads what the restored choices will do.
  if (lasts) lasts.dispatchEvent(new Event("change"));
  const area = el.querySelector("textarea[name=arguments]");
  if (area && kept.args !== null) area.value = kept.args;
  const edit = el.querySelector("details.edit");
  if (edit) edit.open = kept.editing;
  for (const id of kept.checked) {
    const input = el.querySelector(`input[id="${CSS.escape(id)}"]`);
    if (input) input.checked = true;
  }
  if (kept.focus) {
    const again = el.querySelector(`[id="${CSS.escape(kept.focus)}"]`);
    if (again) again.focus();
  }
}
