// Worlds, a world's agents and chats, and a chat: its messages, the agent's text as it streams,
// each tool call as a card with its status and its hold card inline, and the composer, locked
// while a hold is pending or a turn runs. Everything the LLM wrote goes in as text, or as the
// server's rendered Markdown built node by node: never as markup.
import * as api from "./api.js";
import { go } from "./app.js";
import { card, update } from "./card.js";
import { h, problem, replace, seg, when } from "./dom.js";
import { onEvent, onResync } from "./live.js";
import {
  ACTIVE_TURN_STATUSES, ApprovedBy, CallState, DecidedBy, EventType, MarkdownNodeType, MessageRole,
  OutcomeStatus, RESOLVING_EVENT_TYPES, StatusFilter, ToolResultStatus, TurnStatus,
} from "./wire.js";

const worldPath = (w) => `/worlds/${seg(w)}`;
const chatPath = (w, c) => `${worldPath(w)}/chats/${seg(c)}`;

export async function worlds(main) {
  const all = await api.worlds();
  main.append(
    h("h1", {}, "Worlds"),
    all.length === 0
      ? h("p", { class: "muted" }, "No worlds yet. An admin creates them under Manage.")
      : h(
          "ul",
          { class: "entries" },
          all.map((w) =>
            h(
              "li",
              {},
              h("a", { href: worldPath(w.name) }, w.name),
              w.description ? h("p", { class: "muted" }, w.description) : null,
            ),
          ),
        ),
  );
}

export async function world(main, [name]) {
  const [w, agents, chats] = await Promise.all([api.getWorld(name), api.agents(name), api.chats(name)]);
  const agentName = new Map(agents.map((a) => [a.id, a.name]));
  const status = h("p", { role: "status", class: "muted" });
  const start = async (agent, button) => {
    button.disabled = true;
    try {
      const chat = await api.createChat(w.name, { agent: agent.id });
      go(chatPath(w.name, chat.id));
    } catch (error) {
      button.disabled = false;
      replace(status, problem(error));
    }
  };
  main.append(
    h("p", { class: "crumbs" }, h("a", { href: "/worlds" }, "Worlds")),
    h("h1", {}, w.name),
    // ("" rather than null: `append` writes a null out as the word.)
    w.description ? h("p", { class: "muted" }, w.description) : "",
    h("p", {}, h("a", { href: `/worlds/${seg(w.name)}/policy`, "data-link": "policy" }, "Policy of this world")),
    h("h2", {}, "Agents"),
    agents.length === 0
      ? h("p", { class: "muted" }, "No agents in this world yet.")
      : h(
          "ul",
          { class: "entries agents" },
          agents.map((a) => {
            const button = h("button", { type: "button", "aria-label": `New chat with ${a.name}` }, "New chat");
            button.addEventListener("click", () => start(a, button));
            return h(
              "li",
              { dataset: { agent: a.id } },
              h("span", { class: "name" }, a.name),
              h("span", { class: "muted" }, a.llm.model),
              button,
            );
          }),
        ),
    status,
    h("h2", {}, "Chats"),
    chats.length === 0
      ? h("p", { class: "muted" }, "No chats yet: start one with an agent.")
      : h(
          "ul",
          { class: "entries chats" },
          [...chats].reverse().map((c) =>
            h(
              "li",
              {},
              h("a", { href: chatPath(w.name, c.id) }, c.title || "Untitled chat"),
              h("span", { class: "muted" }, ` ${agentName.get(c.agent) || "an agent no longer here"} · ${when(c.created_at)}`),
            ),
          ),
        ),
  );
}

// ---- The chat page ----

// The events that change what a chat page shows, besides streamed text.
const CHANGES = [
  EventType.MessageCreated,
  EventType.TurnStarted,
  EventType.TurnToolCall,
  EventType.TurnToolStarted,
  EventType.TurnToolFinished,
  EventType.TurnFinished,
  EventType.TurnFailed,
  EventType.TurnCanceled,
  EventType.TurnStopped,
  EventType.CallAllowed,
  EventType.CallDenied,
  EventType.HoldCreated,
  EventType.HoldAwaitingConfirm,
  ...RESOLVING_EVENT_TYPES,
];

const ACTIVE = new Set(ACTIVE_TURN_STATUSES);
// How many calls' early text (`earlyText`) a chat page keeps at most.
const EARLY_CALLS = 16;

export async function chat(main, [worldName, chatId]) {
  const [c, agents] = await Promise.all([api.getChat(worldName, chatId), api.agents(worldName)]);
  const agent = agents.find((a) => a.id === c.agent);
  const page = new ChatPage(main, worldName, c, agent ? agent.name : "the agent");
  await page.load();
  return () => page.leave();
}

class ChatPage {
  constructor(main, worldName, c, agentName) {
    this.world = worldName;
    this.chat = c;
    this.agentName = agentName;
    this.reset();
    // Policy's word on a call, as the live stream told it ("rule \"ci\""), by call id: the
    // stored result says only whether policy or a grant allowed it.
    this.allowedBy = new Map();
    // Text a call streamed before the read that shows its card ended, by call id: the event
    // can overtake the read, and the text would otherwise be lost until the result.
    this.earlyText = new Map();
    this.running = null;
    /** Another read is due once this one ends: `true` for a whole one, `"yes"` for the new part. @type {boolean | "yes"} */
    this.again = false;

    this.list = h("div", { class: "transcript", role: "log", "aria-label": "Messages" });
    this.live = h("div", { class: "transcript-live", "aria-live": "off" });
    this.ending = h("p", { class: "turn-end muted", role: "status" });
    this.loose = h("div", { class: "chat-holds" });
    this.text = h("textarea", {
      id: "message",
      name: "message",
      rows: 3,
      "aria-describedby": "composer-status",
      placeholder: `Message ${agentName}`,
    });
    this.send = h("button", { type: "submit" }, "Send");
    this.cancel = h("button", { type: "button", class: "quiet cancel-turn", hidden: true }, "Cancel the turn");
    this.status = h("p", { id: "composer-status", class: "composer-status", role: "status" });
    this.error = h("div", { class: "composer-error" });
    const form = h(
      "form",
      { class: "composer", "aria-label": "New message" },
      h("label", { for: "message" }, "Your message"),
      this.text,
      this.status,
      this.error,
      h("div", { class: "composer-actions" }, this.send, this.cancel),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    this.text.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.submit();
      }
    });
    this.cancel.addEventListener("click", () => this.cancelTurn());

    main.append(
      h(
        "p",
        { class: "crumbs" },
        h("a", { href: "/worlds" }, "Worlds"),
        " / ",
        h("a", { href: worldPath(worldName) }, worldName),
      ),
      h("h1", {}, c.title || "Untitled chat"),
      h("p", { class: "muted" }, `With ${agentName}`),
      this.list,
      this.live,
      this.ending,
      this.loose,
      form,
    );

    const mine = (f) => (event) => {
      if (event.chat === c.id) f(event);
    };
    this.stops = [
      onEvent([EventType.TurnText], mine((e) => this.streamed(e.payload))),
      onEvent([EventType.TurnToolText], mine((e) => this.toolText(e.payload))),
      onEvent([EventType.CallAllowed, EventType.CallDenied], mine((e) => this.policySaid(e.payload))),
      onEvent([EventType.MessageCreated], mine((e) => this.sealText(e.payload.message))),
      onEvent(CHANGES, mine(() => this.refresh())),
      onResync(() => this.refresh(true)),
    ];
  }

  // What this page knows of the server; `load` fills it from scratch.
  reset() {
    this.messages = [];
    this.after = undefined;
    this.turnId = null;
    this.turn = null;
    this.holds = [];
    // The chat's decided holds, by the tool call they held (a turn keeps only its current
    // step's calls): after a reload, each earlier call's card still says who decided, when
    // and why.
    this.decided = new Map();
    this.callCards = new Map();
    this.holdCards = new Map();
    // The piece of the agent's text streaming now, and earlier pieces waiting for their
    // stored message (each with the refresh that will have it).
    this.stream = null;
    this.sealed = [];
    this.generation = 0;
  }

  leave() {
    this.left = true;
    for (const stop of this.stops) stop();
  }

  // The first read; its error is the page's (the router shows it).
  async load() {
    this.running = this.read(true);
    try {
      await this.running;
    } finally {
      this.settled();
    }
  }

  // Re-reads what changed; one read at a time (events may arrive while one runs), and one
  // more if something changed meanwhile.
  async refresh(all = false) {
    if (this.running) {
      this.again = this.again || all || "yes";
      return this.running;
    }
    this.running = this.read(all)
      .catch((error) => replace(this.error, problem(error)))
      .finally(() => this.settled());
    return this.running;
  }

  settled() {
    this.running = null;
    const again = this.again;
    this.again = false;
    if (again && !this.left) this.refresh(again === true);
  }

  // Reads the messages after the last one shown (all of them when `all`), the chat's latest
  // turn and its pending holds, and shows exactly that.
  async read(all) {
    const generation = ++this.generation;
    if (all) {
      this.reset();
      this.generation = generation;
      replace(this.list);
      replace(this.live);
      replace(this.loose);
    }
    const fresh = [];
    for (;;) {
      const page = await api.messages(this.world, this.chat.id, { after: this.after, limit: 1000 });
      fresh.push(...page.items);
      if (page.items.length) this.after = page.items[page.items.length - 1].position;
      if (!page.next) break;
    }
    for (const m of fresh) {
      this.messages.push(m);
      if (m.message.turn) this.turnId = m.message.turn;
    }
    const calls = fresh.some((m) => (m.message.tool_calls || []).length);
    const [turn, holds, decided] = await Promise.all([
      this.turnId ? api.getTurn(this.world, this.turnId) : null,
      api.holds({ world: this.world, chat: this.chat.id, limit: 500 }),
      // Read from scratch, calls shown: the holds already decided, for the calls' cards.
      all && calls ? decidedHolds(this.world, this.chat.id) : [],
    ]);
    if (this.left) return;
    for (const hold of decided) {
      if (!hold.tool_call_id) continue;
      if (!this.decided.has(hold.tool_call_id)) this.decided.set(hold.tool_call_id, []);
      this.decided.get(hold.tool_call_id).push(hold);
    }
    this.turn = turn;
    this.holds = holds.items;
    follow(() => {
      for (const m of fresh) this.show(m);
      this.showTurn();
    });
    this.dropSealed(generation);
    this.showLock();
  }

  // ---- Messages ----

  show({ message, rendered }) {
    if (message.role === MessageRole.Tool) return this.result(message.tool_call_id, message.content);
    const role = message.role;
    const body = !message.content
      ? null
      : rendered
        ? h("div", { class: "md" }, markdown(rendered))
        : h("p", { class: "plain" }, message.content);
    const calls = (message.tool_calls || []).map((call) => this.callCard(call, message.at));
    this.list.append(
      h(
        "article",
        { class: `msg ${role}`, dataset: { role } },
        h("h2", { class: "who" }, role === "user" ? "You" : this.agentName),
        body,
        calls.length ? h("div", { class: "calls" }, calls) : null,
      ),
    );
  }

  // ---- Streamed text ----

  streamed({ turn, text }) {
    if (!this.stream || this.stream.turn !== turn) {
      this.stream = { turn, el: h("div", { class: "msg assistant streaming", "aria-busy": "true" }, h("h2", { class: "who" }, this.agentName), h("p", { class: "plain" })) };
      this.live.append(this.stream.el);
    }
    follow(() => this.stream.el.lastChild.append(text));
  }

  // The agent's message is stored: its streamed piece stays until a read that has it.
  sealText(message) {
    if (message.role !== MessageRole.Assistant || !this.stream) return;
    this.sealed.push({ el: this.stream.el, generation: this.generation });
    this.stream = null;
  }

  dropSealed(generation) {
    this.sealed = this.sealed.filter((s) => {
      if (s.generation >= generation) return true;
      s.el.remove();
      return false;
    });
    // A turn that ended without storing its text (cancelled while the LLM wrote) left none.
    if (this.stream && !(this.turn && ACTIVE.has(this.turn.status))) {
      this.stream.el.remove();
      this.stream = null;
    }
  }

  // ---- Tool calls ----

  callCard(call, at) {
    const el = h(
      "article",
      { class: "call", dataset: { call: call.id, tool: call.name, status: CallState.Proposed, at: at || "" } },
      h("h3", {}, h("span", { class: "tool" }, call.name), " ", h("span", { class: "call-status" }, "Checking policy")),
      args(call),
      h("div", { class: "call-hold" }),
      h("p", { class: "call-stream plain", hidden: true, "aria-live": "polite" }),
      h("div", { class: "call-detail" }),
    );
    this.callCards.set(call.id, el);
    const early = this.earlyText.get(call.id);
    if (early) {
      this.earlyText.delete(call.id);
      const out = el.querySelector(".call-stream");
      out.hidden = false;
      out.append(early);
    }
    return el;
  }

  // What a running call streams (a remote agent's answer as it comes, or its question), shown
  // as it arrives until the call's result is final; the result shows it whole.
  toolText({ call, text }) {
    const el = this.callCards.get(call);
    if (!el) {
      // Kept for the card's read; a few calls' worth, as a call shown by no read keeps none.
      if (!this.earlyText.has(call) && this.earlyText.size >= EARLY_CALLS) {
        this.earlyText.delete(this.earlyText.keys().next().value);
      }
      this.earlyText.set(call, (this.earlyText.get(call) || "") + text);
      return;
    }
    if (el.dataset.final) return;
    const out = el.querySelector(".call-stream");
    out.hidden = false;
    follow(() => out.append(text));
  }

  policySaid({ tool_call_id: id, decided_by: by }) {
    if (!id) return;
    const text =
      by.by === DecidedBy.Rule ? `rule "${by.rule.name}"`
      : by.by === DecidedBy.Grant ? "a standing grant"
      : by.by === DecidedBy.Mode ? `the policy's mode (${by.mode})`
      : `“${by.by}” (a decider this page does not know)`;
    this.allowedBy.set(id, text);
  }

  // A call's final result, from its tool message.
  result(id, content) {
    const el = this.callCards.get(id);
    if (!el) return;
    let result;
    try {
      result = JSON.parse(content);
    } catch {
      result = { status: ToolResultStatus.Failed, error: content };
    }
    this.setCall(el, result.status, describe(result, this.allowedBy.get(id)), output(result));
  }

  showTurn() {
    const turn = this.turn;
    const used = new Set();
    // Calls whose hold was decided before this read: the hold raised for the call (by its
    // id; of several, the one raised nearest the call's message), with its card.
    for (const [id, el] of this.callCards) {
      const slot = el.querySelector(".call-hold");
      const candidates = this.decided.get(id);
      if (!candidates || slot.firstChild) continue;
      const at = Date.parse(el.dataset.at || "");
      const hold = candidates.reduce((best, x) =>
        !best || Math.abs(Date.parse(x.created_at) - at) < Math.abs(Date.parse(best.created_at) - at) ? x : best, null);
      used.add(hold.id);
      this.placeHold(slot, hold.id, hold);
    }
    if (turn) {
      for (const rec of turn.calls || []) {
        const el = this.callCards.get(rec.call.id);
        if (!el) continue;
        if (rec.hold) {
          used.add(rec.hold);
          this.placeHold(el.querySelector(".call-hold"), rec.hold);
        }
        if (el.dataset.final) continue;
        if (rec.result) this.setCall(el, rec.result.status, describe(rec.result, this.allowedBy.get(rec.call.id)), output(rec.result));
        else this.setCall(el, ...callState(rec, this.allowedBy.get(rec.call.id)));
      }
      const ended = {
        [TurnStatus.Failed]: `The turn failed: ${turn.error || "no reason given"}`,
        [TurnStatus.Canceled]: "The turn was canceled.",
        [TurnStatus.Stopped]: "A person denied a call and stopped the turn.",
      }[turn.status];
      this.ending.textContent = ended || "";
    } else {
      this.ending.textContent = "";
    }
    // Pending holds of this chat that belong to no call shown here.
    const loose = this.holds.filter((hold) => !used.has(hold.id)).map((hold) => this.holdCard(hold));
    const shown = [...this.loose.children];
    // Left alone when nothing changed, so a card being filled in keeps its focus.
    if (shown.length !== loose.length || shown.some((el, i) => el !== loose[i])) replace(this.loose, loose);
  }

  setCall(el, status, text, extra) {
    // A call's state (CallState) until its result (ToolResultStatus) is final.
    const final = status === CallState.Done || !(status in CALL_STATES || status === UNKNOWN);
    if (el.dataset.status === status && el.dataset.final) return;
    el.dataset.status = status;
    if (final) {
      el.dataset.final = "yes";
      const streamed = el.querySelector(".call-stream");
      streamed.hidden = true;
      streamed.textContent = "";
    }
    el.querySelector(".call-status").textContent = text;
    replace(el.querySelector(".call-detail"), extra || null);
  }

  // Puts the hold's card in `slot`, once: a card keeps itself current from the live stream.
  placeHold(slot, id, decided) {
    // The card shows the call (its command once, its arguments, the difference a write
    // makes): the call's own lines give way to it.
    const own = slot.parentNode && slot.parentNode.querySelector(":scope > pre.args");
    if (own) own.hidden = true;
    const known = this.holdCards.get(id);
    if (known) {
      if (known.parentNode !== slot) replace(slot, known);
      return;
    }
    const hold = this.holds.find((x) => x.id === id) || decided;
    if (hold) return replace(slot, this.holdCard(hold));
    // Decided already (the call runs, say): its card shows how.
    const wait = h("div", { class: "muted" }, "Reading the hold…");
    this.holdCards.set(id, wait);
    replace(slot, wait);
    api.getHold(id).then(
      (detail) => wait.replaceWith(this.holdCard(detail.hold, true)),
      (error) => replace(wait, problem(error)),
    );
  }

  // The card of `hold`, made once; a newer version read here is shown in it too (the card
  // follows the live stream itself, and leaves itself as drawn when nothing changed).
  holdCard(hold, fresh = false) {
    let el = this.holdCards.get(hold.id);
    if (!el || fresh) {
      el = card(hold, {
        link: true,
        heading: "h4",
        names: (id) => (id === this.chat.world ? this.world : id === this.chat.id ? this.chat.title : null),
        agentName: (id) => (id === this.chat.agent ? this.agentName : null),
      });
      this.holdCards.set(hold.id, el);
    } else {
      update(el, hold);
    }
    return el;
  }

  // ---- The composer ----

  showLock() {
    const turn = this.turn;
    const active = turn && ACTIVE.has(turn.status);
    const pending = this.holds.length;
    let why = "";
    if (pending) {
      why = pending === 1
        ? "Locked: a hold in this chat waits for a decision. Decide it above to go on."
        : `Locked: ${pending} holds in this chat wait for a decision. Decide them above to go on.`;
    } else if (active) {
      why = `Locked: ${this.agentName} is working on your last message.`;
    }
    const locked = Boolean(why) || this.sending;
    // Focus was on the composer before it locked (and went nowhere since): give it back.
    const refocus = this.text.disabled && !locked && document.activeElement === document.body;
    this.text.disabled = locked;
    this.send.disabled = locked;
    this.status.textContent = why;
    this.status.dataset.lock = pending ? "hold" : active ? "turn" : "";
    this.cancel.hidden = !active;
    this.cancel.disabled = false;
    if (refocus) this.text.focus();
  }

  async submit() {
    const text = this.text.value;
    if (!text.trim() || this.send.disabled) return;
    this.sending = true;
    replace(this.error);
    this.showLock();
    try {
      const started = await api.sendMessage(this.world, this.chat.id, text);
      this.text.value = "";
      this.turnId = started.turn;
    } catch (error) {
      replace(this.error, problem(error));
    } finally {
      this.sending = false;
    }
    await this.refresh();
  }

  async cancelTurn() {
    if (!this.turn) return;
    this.cancel.disabled = true;
    replace(this.error);
    try {
      await api.cancelTurn(this.world, this.turn.id);
    } catch (error) {
      // Already over: the read below shows how it ended.
      if (error.status !== 409) replace(this.error, problem(error));
    }
    await this.refresh();
  }
}

// The chat's holds that are decided, every page of them.
async function decidedHolds(world, chat) {
  const out = [];
  let cursor;
  for (;;) {
    const page = await api.holds({ world, chat, status: StatusFilter.Resolved, limit: 500, cursor });
    out.push(...page.items);
    if (!page.next) break;
    cursor = page.next;
  }
  return out;
}

// Runs `f`, which adds to the page; a reader at the bottom stays there, one who scrolled up
// to read is left where they are.
function follow(f) {
  const page = document.documentElement;
  const atBottom = window.innerHeight + window.scrollY >= page.scrollHeight - 80;
  f();
  if (atBottom) window.scrollTo(0, page.scrollHeight);
}

// ---- How a call is shown ----

function args(call) {
  let value;
  try {
    value = JSON.parse(call.arguments);
  } catch {
    return h("pre", { class: "args" }, call.arguments);
  }
  if (value && typeof value.command === "string" && Object.keys(value).length <= 2) {
    return h("pre", { class: "args command" }, h("code", {}, `$ ${value.command}`));
  }
  return h("pre", { class: "args" }, JSON.stringify(value, null, 2));
}

/** @type {Record<import("./wire.js").ApprovedBy, string>} */
const BY = {
  [ApprovedBy.Policy]: "policy",
  [ApprovedBy.Grant]: "a standing grant",
  [ApprovedBy.Person]: "a person",
  [ApprovedBy.Timeout]: "the hold's timeout outcome",
  [ApprovedBy.Session]: "a skill allowed for this chat",
};

function allowed(by, rule) {
  if (by === ApprovedBy.Policy || by === ApprovedBy.Grant) return rule || BY[by];
  return BY[by] || `“${by}” (a way of allowing this page does not know)`;
}

// The states of a call not yet done, by their names.
const CALL_STATES = Object.fromEntries(Object.values(CallState).map((state) => [state, true]));

// The status of a call in a state this page does not know (it may still change).
const UNKNOWN = "unknown";

// A call not yet done: [status, text].
function callState(rec, rule) {
  switch (rec.state) {
    case CallState.Proposed:
      return [CallState.Proposed, "Checking policy"];
    case CallState.Held:
      return [CallState.Held, "Waiting for a decision"];
    case CallState.Ready:
      return [CallState.Ready, `Allowed by ${allowed(rec.approved_by, rule)}; about to run`];
    case CallState.Running:
      return [CallState.Running, `Running (allowed by ${allowed(rec.approved_by, rule)})`];
    default:
      return [UNKNOWN, `A call in a state this page does not know (“${rec.state}”)`];
  }
}

// A call's result as people read it.
function describe(result, rule) {
  const names = (list) => (list && list.length ? list.join(", ") : "someone");
  const reason = (r) => (r ? `: ${r}` : "");
  switch (result.status) {
    case ToolResultStatus.Executed:
      return `Executed, allowed by ${allowed(result.approved_by, rule)}${result.arguments ? " (with edited arguments)" : ""}`;
    case ToolResultStatus.Failed:
      return `Ran and failed: ${result.error}`;
    case ToolResultStatus.DeniedByPerson:
      return `Denied by ${names(result.decided_by)}${reason(result.reason)}`;
    case ToolResultStatus.DeniedByDefault:
      return `Denied by default (applied by ${names(result.applied_by)})${reason(result.reason)}`;
    case ToolResultStatus.DeniedByPolicy:
      return `Denied by policy: ${result.rule}`;
    case ToolResultStatus.TimedOut:
      return `Timed out: nobody decided in time (applied: ${result.applied})`;
    case ToolResultStatus.NotExecuted:
      return `Not run: ${result.reason}`;
    case ToolResultStatus.Interrupted:
      return `Interrupted: ${result.note}`;
    case ToolResultStatus.InvalidArguments:
      return `Invalid arguments: ${result.error}`;
    case ToolResultStatus.Answer: {
      const chosen = (result.options || []).map((o) => o.label || o.id).join(", ");
      if (result.by_default) return `Default applied by ${names(result.decided_by)}: ${chosen || "no option"}`;
      if (result.outcome === OutcomeStatus.TimedOut) return `Nobody answered in time${chosen ? `; applied: ${chosen}` : ""}`;
      if (result.outcome === OutcomeStatus.Canceled) return "Withdrawn before anyone answered";
      return `Answered by ${names(result.decided_by)}: ${chosen || "no option"}`;
    }
    default:
      return `A result this page does not know (“${result.status}”)`;
  }
}

// What an executed call printed, collapsible: a command's output as its streams and exit
// code, anything else as JSON.
function output(result) {
  if (result.status !== ToolResultStatus.Executed) return null;
  const out = result.output;
  const shell = out && typeof out === "object" && typeof out.stdout === "string";
  const parts = shell
    ? [
        out.stdout ? h("pre", { class: "stdout" }, out.stdout) : null,
        out.stderr ? h("pre", { class: "stderr", "aria-label": "standard error" }, out.stderr) : null,
      ]
    : [h("pre", {}, typeof out === "string" ? out : JSON.stringify(out, null, 2))];
  const size = parts.reduce((n, p) => n + (p ? p.textContent.length : 0), 0);
  let summary = "Output";
  if (shell) {
    const notes = [];
    if (out.exit_code !== undefined && out.exit_code !== null) notes.push(`exit code ${out.exit_code}`);
    if (out.timed_out) notes.push("timed out");
    if (out.truncated) notes.push("truncated");
    if (!out.stdout && !out.stderr) notes.push("nothing printed");
    if (notes.length) summary += ` (${notes.join(", ")})`;
  }
  return h("details", { class: "output", open: size < 2000 }, h("summary", {}, summary), parts);
}

// ---- Markdown, as the server rendered it ----

const SCHEMES = ["http:", "https:", "mailto:"];

function markdown(nodes) {
  return nodes.map(node);
}

function node(n) {
  const kids = () => markdown(n.children || []);
  switch (n.type) {
    case MarkdownNodeType.Text:
      return n.text;
    case MarkdownNodeType.Code:
      return h("code", {}, n.text);
    case MarkdownNodeType.LineBreak:
      return h("br");
    case MarkdownNodeType.Rule:
      return h("hr");
    case MarkdownNodeType.Paragraph:
      return h("p", {}, kids());
    case MarkdownNodeType.Heading:
      // Below the page's own headings.
      return h(`h${Math.min(6, Math.max(1, n.level) + 2)}`, {}, kids());
    case MarkdownNodeType.Emphasis:
      return h("em", {}, kids());
    case MarkdownNodeType.Strong:
      return h("strong", {}, kids());
    case MarkdownNodeType.Strikethrough:
      return h("s", {}, kids());
    case MarkdownNodeType.BlockQuote:
      return h("blockquote", {}, kids());
    case MarkdownNodeType.CodeBlock:
      return h(
        "pre",
        { class: "code", dataset: n.language ? { language: n.language } : undefined },
        h("code", {}, n.text),
      );
    case MarkdownNodeType.List:
      return n.start === undefined || n.start === null ? h("ul", {}, kids()) : h("ol", { start: n.start }, kids());
    case MarkdownNodeType.Item:
      return h("li", {}, kids());
    case MarkdownNodeType.Link:
      return link(n.href, kids());
    case MarkdownNodeType.Table:
      return h(
        "div",
        { class: "table" },
        h(
          "table",
          {},
          (n.children || []).map((row) =>
            h("tr", {}, (row.children || []).map((cell) => h(row.header ? "th" : "td", {}, markdown(cell.children || [])))),
          ),
        ),
      );
    default:
      // A node this page does not know: said so, with its text.
      return h("span", { class: "error unknown-kind", dataset: { node: String(n.type) } }, `[unknown kind of Markdown: ${n.type}] `, kids());
  }
}

// A link out of Holdpoint, only to the web or mail (the server allows no other; checked again
// here since an `href` is where script could hide). `h` takes only Holdpoint's own paths.
function link(href, children) {
  let url = null;
  try {
    url = new URL(href);
  } catch {
    url = null;
  }
  if (!url || !SCHEMES.includes(url.protocol)) return h("span", {}, children);
  const a = h("a", { rel: "noopener noreferrer nofollow", target: "_blank" }, children);
  a.href = url.href;
  return a;
}
