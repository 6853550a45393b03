// One hold: its card and its full history (raised, reminded, each vote and decision, grants,
// the outcome), who was notified of it (email, Slack), and, for a tool call of one of
// Holdpoint's chats, the tool's result once it ran.
import { agents, getHold, messages, notices, worlds } from "./api.js";
import { card, grantLasts, knownKind, outcomeWords, resolvedVia, ruleName } from "./card.js";
import { actorName, h, problem, relative, replace, when } from "./dom.js";
import { onEvent, onResync } from "./live.js";
import {
  DeliveryStatus, EventType, GrantScope, HOLD_EVENT_TYPES, HoldKind, MessageRole, NoticePurpose, ToolResultStatus,
} from "./wire.js";

// Events of a hold's history that the page follows as they happen.
const HISTORY = [...HOLD_EVENT_TYPES, EventType.GrantCreated];
// A chat is read this far back for the tool's result of a hold decided before the page opened.
const RESULT_PAGES = 5;

export async function hold(main, [id]) {
  const [detail, known] = await Promise.all([getHold(id), worlds().catch(() => [])]);
  const names = (world) => (known.find((w) => w.id === world) || {}).name;
  // A runtime agent is named by id in the hold.
  const crew = detail.hold.agent ? await agents(detail.hold.world).catch(() => []) : [];
  const agentName = (id) => (crew.find((a) => a.id === id) || {}).name;
  const history = h("ol", { class: "history" });
  const result = h("section", { class: "result", "aria-labelledby": "result-title", hidden: true });
  let current = detail.hold;

  const drawHistory = (events) => replace(history, events.map((e) => entry(e, current)));
  drawHistory(detail.history);

  // Shown once someone was notified; read again with the history (a reminder, an escalation
  // and the decision are events of the hold).
  const notified = h("ol", { class: "history notices" });
  const notifiedSection = h("section", { class: "notices-section", "aria-labelledby": "notices-title", hidden: true },
    h("h2", { id: "notices-title" }, "Notified"),
    notified);
  const drawNotices = async () => {
    let page;
    try {
      page = await notices(id);
    } catch (error) {
      replace(notified, problem(error));
      notifiedSection.hidden = false;
      return;
    }
    replace(notified, page.items.map(noticeEntry));
    notifiedSection.hidden = page.items.length === 0;
  };
  drawNotices();

  const reread = async () => {
    try {
      const again = await getHold(id);
      current = again.hold;
      drawHistory(again.history);
      drawSuggest();
      drawNotices();
    } catch (error) {
      replace(history, problem(error));
    }
  };

  const stops = [
    onEvent(HISTORY, (event) => {
      if (event.hold === id) reread();
    }),
    onEvent([EventType.TurnToolFinished], (event) => {
      if (current.tool_call_id && event.chat === current.chat && event.payload.call === current.tool_call_id) {
        showResult(result, event.payload.result);
      }
    }),
    onResync(reread),
  ];

  // A decided call can become a rule of its world's policy, reviewed in the policy's editor.
  const suggest = h("p", { class: "suggest-rule" });
  const drawSuggest = () => {
    const decided = current.spec.kind === HoldKind.Approval && current.outcome;
    replace(suggest, decided
      ? h("a", { href: `/worlds/${encodeURIComponent(current.world)}/policy/from/${encodeURIComponent(current.id)}`, "data-link": "suggest-rule" },
          "Suggest a rule from this decision")
      : null);
    suggest.hidden = !decided;
  };
  drawSuggest();

  const chatLink = current.chat && current.tool_call_id
    ? h("p", {}, h("a", { href: `/worlds/${encodeURIComponent(current.world)}/chats/${encodeURIComponent(current.chat)}` }, "Open the chat"))
    : null;
  replace(main,
    h("h1", {}, !knownKind(current) ? "Hold" : current.spec.kind === HoldKind.Approval ? "Approval" : "Question"),
    card(current, { names, agentName, via: resolvedVia(detail.history) }),
    chatLink,
    suggest,
    result,
    h("section", { class: "history-section", "aria-labelledby": "history-title" },
      h("h2", { id: "history-title" }, "History"),
      history),
    notifiedSection);
  pastResult(current, result);
  return () => {
    for (const stop of stops) stop();
  };
}

// One event of the history, in words.
function entry(event, hold) {
  const p = event.payload;
  let text;
  switch (p.type) {
    case EventType.HoldCreated:
      text = `Raised by ${actorName(event.actor)}${hold.rule ? `; ${ruleName(hold.rule)} asked` : ""}`;
      break;
    case EventType.HoldReminded:
      text = `Reminder sent: the deadline is ${when(p.deadline)}`;
      break;
    case EventType.HoldVoted:
      text = `${p.vote.by} approved (${p.approvals} of ${p.quorum} needed)${p.vote.reason ? ` — “${p.vote.reason}”` : ""}`;
      break;
    case EventType.HoldAwaitingConfirm:
      text = `${p.answer.by} chose “${p.answer.options.map((o) => o.label).join(", ")}”; waiting for the confirm step`;
      break;
    case EventType.HoldDecided:
    case EventType.HoldExpired:
    case EventType.HoldWithdrawn:
      text = outcomeWords({ ...hold, outcome: p.outcome });
      // The words name who decided; the client they decided in is added.
      if (event.actor && event.actor.via) text += ` (via ${event.actor.via})`;
      break;
    case EventType.GrantCreated:
      // How long it lasts is part of what was granted: "for 1 hour (until …)", or until revoked.
      text = `Grant created by ${p.grant.created_by}: ${GRANT[p.grant.scope] || p.grant.scope} ${grantLasts(p.grant)}, for ${p.grant.tool}`;
      break;
    default:
      text = `${p.type} (an event this page does not know)`;
  }
  return h("li", { dataset: { type: p.type } },
    h("time", { datetime: event.at, title: when(event.at) }, relative(event.at)), " ",
    h("span", {}, text));
}

/** @type {Record<import("./wire.js").NoticePurpose, string>} */
const PURPOSE = {
  [NoticePurpose.First]: "Notified",
  [NoticePurpose.Reminder]: "Reminded",
  [NoticePurpose.Escalation]: "Escalated to",
  [NoticePurpose.Last]: "Last notice to",
};

// One notice: why, to whom (and as whom they decide), over what, and how its delivery went.
function noticeEntry(n) {
  const who = n.decides_as === n.recipient ? n.recipient : `${n.recipient} (deciding as ${n.decides_as})`;
  const step = n.purpose === NoticePurpose.Escalation && n.round ? ` (step ${n.round})` : "";
  const tries = `${n.attempts} attempt${n.attempts === 1 ? "" : "s"}`;
  let how;
  if (n.status === DeliveryStatus.Delivered) how = "delivered";
  else if (n.status === DeliveryStatus.Failed) how = `failed after ${tries}`;
  else how = n.attempts ? `not delivered yet, ${tries} failed` : "being sent";
  const at = n.sent_at || n.updated_at;
  return h("li", { dataset: { purpose: n.purpose, status: n.status } },
    h("time", { datetime: at, title: when(at) }, relative(at)), " ",
    h("span", {}, `${PURPOSE[n.purpose] || n.purpose}${step} ${who} by ${n.channel}: ${how}`),
    n.last_error ? [" ", h("span", { class: "notice-error" }, `— ${n.last_error}`)] : null);
}

/** @type {Record<import("./wire.js").GrantScope, string>} */
const GRANT = {
  [GrantScope.Chat]: "these arguments are not asked again in this chat",
  [GrantScope.AlwaysArgs]: "these arguments are not asked again in this world",
  [GrantScope.AlwaysTool]: "the tool is not asked again in this world",
};

function showResult(section, result) {
  const words = {
    executed: "The tool ran",
    failed: "The tool ran and failed",
    denied_by_person: "It did not run: denied",
    denied_by_default: "It did not run: denied by default",
    denied_by_policy: "It did not run: denied by policy",
    timed_out: "It did not run: nobody decided in time",
    not_executed: "It did not run",
    interrupted: "Holdpoint stopped while it ran; it was not run again",
  };
  const body = result.status === ToolResultStatus.Executed ? result.output : result;
  replace(section,
    h("h2", { id: "result-title" }, "Result"),
    h("p", {}, words[result.status] || result.status),
    h("details", { open: true }, h("summary", {}, "Output"),
      h("pre", {}, typeof body === "string" ? body : JSON.stringify(body, null, 2))));
  section.hidden = false;
}

// The result of a call that ran before the page opened: the chat's tool message for it.
async function pastResult(hold, section) {
  if (!hold.chat || !hold.tool_call_id || !hold.outcome) return;
  let after;
  for (let i = 0; i < RESULT_PAGES; i += 1) {
    let page;
    try {
      page = await messages(hold.world, hold.chat, { after, limit: 1000 });
    } catch {
      return;
    }
    const found = page.items.find(({ message: m }) =>
      m.role === MessageRole.Tool && m.tool_call_id === hold.tool_call_id && Date.parse(m.at) >= Date.parse(hold.created_at));
    if (found) {
      let parsed;
      try {
        parsed = JSON.parse(found.message.content);
      } catch {
        parsed = { status: ToolResultStatus.Executed, output: found.message.content };
      }
      if (section.hidden) showResult(section, parsed);
      return;
    }
    if (!page.next) return;
    after = page.next;
  }
}
