// The inbox: every pending hold the caller may see, across worlds, a page at a time. Holds
// arrive and leave live; the holds of one batch are shown together with "decide all", bound
// to exactly the holds shown. Filters live in the query string, so a filtered inbox can be
// bookmarked. Keys: j/k or the arrows move between cards, Enter opens one, a approves once,
// d denies.
import { agents, decideBatch, holds, mayDecide, worlds } from "./api.js";
import { approveOnce, card, denyNow, isOpen, outcomeWords, repaint, shown, update } from "./card.js";
import { h, problem, replace } from "./dom.js";
import { onEvent, onResync, RESOLVED } from "./live.js";

const PAGE = 50;
// How long a decided hold stays in view, saying how it was decided, before it leaves.
const LEAVE_MS = 8000;
const FILTERS = ["world", "kind", "agent", "tool", "order"];
const ORDERS = [
  ["newest", "Newest first"],
  ["urgent", "Most urgent first"],
  ["oldest", "Oldest first"],
];

function readFilters() {
  const query = new URLSearchParams(location.search);
  const f = {};
  for (const key of FILTERS) f[key] = query.get(key) || "";
  if (!ORDERS.some(([o]) => o === f.order)) f.order = "newest";
  return f;
}

function writeFilters(f) {
  const query = new URLSearchParams();
  for (const key of FILTERS) if (f[key] && !(key === "order" && f[key] === "newest")) query.set(key, f[key]);
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
  const list = h("div", { class: "holds", "aria-label": "Pending holds", "aria-live": "off" });
  const status = h("p", { class: "inbox-status", role: "status" });
  const more = h("button", { type: "button", class: "quiet more", hidden: true }, "Load more");
  const empty = h("p", { class: "empty muted", hidden: true }, "Nothing is waiting for you.");
  const count = document.getElementById("pending-count");

  // What the page shows: units (one per batch) in list order, cards by hold id, open holds.
  let units = new Map();
  let cards = new Map();
  let open = new Set();
  let next = null;
  let generation = 0;
  const timers = new Set();

  function recount() {
    const n = open.size;
    const text = n === 0 && !next ? "" : `${n}${next ? "+" : ""}`;
    document.title = text ? `(${text}) Holdpoint` : "Holdpoint";
    if (count) count.textContent = text;
    empty.hidden = n > 0 || cards.size > 0 || Boolean(next);
  }

  function matches(hold) {
    if (filters.world) {
      const w = known.find((x) => x.name === filters.world || x.id === filters.world);
      if (!w || w.id !== hold.world) return false;
    }
    if (filters.kind && hold.spec.kind !== filters.kind) return false;
    if (filters.agent && hold.agent !== filters.agent) return false;
    if (filters.tool && (hold.spec.kind !== "approval" || hold.spec.tool !== filters.tool)) return false;
    return isOpen(hold);
  }

  // --- Units: a single card, or a batch shown together ------------------------------------

  function unitOf(hold) {
    let unit = units.get(hold.batch);
    if (!unit) {
      unit = { batch: hold.batch, ids: [], el: null };
      units.set(hold.batch, unit);
    }
    return unit;
  }

  // Adds `hold` to the page; `where`: "end", "start", or "urgent" (by deadline).
  function add(hold, where) {
    if (cards.has(hold.id)) return;
    if (isOpen(hold)) open.add(hold.id);
    const unit = unitOf(hold);
    unit.ids.push(hold.id);
    if (unit.ids.length === 1) {
      unit.el = cardFor(hold, "h2");
      place(unit, where);
    } else if (unit.ids.length === 2) {
      regroup(unit, hold);
    } else {
      unit.el.querySelector(".batch-cards").append(cardFor(hold, "h3"));
    }
    if (unit.ids.length > 1) label(unit);
  }

  function cardFor(hold, heading) {
    const el = card(hold, { link: true, names, agentName, heading });
    cards.set(hold.id, el);
    return el;
  }

  function place(unit, where) {
    if (where === "start") return list.prepend(unit.el);
    if (where === "urgent") {
      const due = deadlineOf(unit);
      for (const other of units.values()) {
        if (other !== unit && other.el && other.el.isConnected && deadlineOf(other) > due) {
          return list.insertBefore(unit.el, other.el);
        }
      }
    }
    list.append(unit.el);
  }

  function deadlineOf(unit) {
    const times = unit.ids.map((id) => shown(cards.get(id))).filter((h) => h.deadline).map((h) => Date.parse(h.deadline));
    return times.length ? Math.min(...times) : Infinity;
  }

  // A batch's second hold turns its card into a group with "decide all".
  function regroup(unit, hold) {
    const single = unit.el;
    const hadFocus = single.contains(document.activeElement);
    const group = h("section", { class: "batch", dataset: { batch: unit.batch } },
      h("h2", { class: "batch-title" }),
      h("div", { class: "buttons batch-actions" },
        h("button", { type: "button", class: "primary", "data-batch-decision": "approve", onclick: () => decideAll(unit, "approve") }, "Approve all once"),
        h("button", { type: "button", class: "danger", "data-batch-decision": "deny", onclick: () => decideAll(unit, "deny") }, "Deny all")),
      h("p", { class: "error batch-error", role: "alert" }),
      h("div", { class: "batch-cards" }, cardFor(shown(single), "h3"), cardFor(hold, "h3")));
    unit.el = group;
    single.replaceWith(group);
    if (hadFocus) cards.get(shown(single).id).focus();
  }

  function label(unit) {
    const holdsShown = unit.ids.map((id) => shown(cards.get(id)));
    const pending = holdsShown.filter(isOpen).length;
    const approvals = holdsShown.filter((x) => x.spec.kind === "approval").length;
    const first = holdsShown[0];
    unit.el.setAttribute("aria-label", `Batch of ${unit.ids.length} holds`);
    unit.el.querySelector(".batch-title").textContent =
      `${unit.ids.length} holds asked together by ${first.agent || first.requested_by} (${pending} still open)`;
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
      .map((id) => shown(cards.get(id)))
      .filter((x) => x.spec.kind === "approval")
      .map((x) => ({ hold: x.id, digest: x.spec.digest }));
    error.textContent = "";
    for (const b of buttons) b.disabled = true;
    try {
      const result = await decideBatch(unit.batch, seen, action === "approve" ? { action: "approve", scope: "once" } : { action: "deny" });
      for (const r of result.holds) if (cards.has(r.hold.id)) update(cards.get(r.hold.id), r.hold);
      settle(unit);
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

  // Shows every hold of a batch, decided ones included, so "decide all" covers all of it.
  async function completeBatch(unit) {
    try {
      const page = await holds({ batch: unit.batch, status: "any", limit: 500 });
      for (const hold of page.items) {
        if (cards.has(hold.id)) update(cards.get(hold.id), hold);
        else add(hold, "end");
      }
      label(unit);
    } catch (e) {
      unit.el.querySelector(".batch-error").append(" ", e.message);
    }
  }

  // A decided hold leaves after a while; a batch leaves once all of it is decided.
  function settle(unit) {
    if (!unit.el) return;
    if (unit.ids.length > 1) label(unit);
    const stillOpen = unit.ids.some((id) => isOpen(shown(cards.get(id))));
    if (stillOpen || unit.leaving) return;
    unit.leaving = true;
    const timer = setTimeout(() => {
      timers.delete(timer);
      leave(unit);
    }, LEAVE_MS);
    timers.add(timer);
  }

  function leave(unit) {
    const wasFocused = unit.el.contains(document.activeElement);
    const after = nextCard(unit.el);
    unit.el.remove();
    units.delete(unit.batch);
    for (const id of unit.ids) {
      cards.delete(id);
      open.delete(id);
    }
    if (wasFocused && after) after.focus();
    recount();
  }

  // --- Loading ----------------------------------------------------------------------------

  function query(cursor) {
    const q = { world: filters.world, kind: filters.kind, agent: filters.agent, tool: filters.tool, limit: PAGE, cursor };
    if (filters.order !== "oldest") q.order = filters.order;
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
      more.hidden = !next;
      status.textContent = "";
    } catch (error) {
      if (error.status === 401) throw error;
      replace(status, problem(error));
    } finally {
      more.disabled = false;
      recount();
    }
  }

  async function reload() {
    generation += 1;
    for (const t of timers) clearTimeout(t);
    timers.clear();
    units = new Map();
    cards = new Map();
    open = new Set();
    next = null;
    replace(list);
    await load(null);
  }

  more.addEventListener("click", () => load(next));

  // --- Filters ----------------------------------------------------------------------------

  const worldSelect = h("select", { id: "filter-world", name: "world" },
    h("option", { value: "" }, "All worlds"),
    known.map((w) => h("option", { value: w.name }, w.name)));
  const kindSelect = h("select", { id: "filter-kind", name: "kind" },
    h("option", { value: "" }, "Approvals and questions"),
    h("option", { value: "approval" }, "Approvals"),
    h("option", { value: "question" }, "Questions"));
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
  const apply = () => {
    filters = {
      world: worldSelect.value,
      kind: kindSelect.value,
      agent: agentSelect.value,
      tool: toolInput.value.trim(),
      order: orderSelect.value,
    };
    writeFilters(filters);
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
  form.addEventListener("submit", sum);
  for (const select of [worldSelect, kindSelect, agentSelect, orderSelect]) select.addEventListener("change", sum);
  // The agents of every world, for the agent filter and to name each card's agent.
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
    for (const el of cards.values()) if (shown(el).agent) repaint(el);
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
    const what = hold.spec.kind === "approval" ? `Approve ${hold.spec.tool}?` : hold.spec.question;
    const n = new Notification("Holdpoint: a new hold", { body: what, tag: hold.id });
    n.onclick = () => {
      window.focus();
      const el = cards.get(hold.id);
      if (el) el.focus();
    };
  }

  // --- Live arrival and departure -----------------------------------------------------------

  const stops = [
    onEvent(["hold.created"], (event) => {
      const hold = event.payload.hold;
      if (!hold || !matches(hold)) return;
      // Oldest first: a new hold belongs after the pages not loaded yet.
      if (filters.order === "oldest" && next) {
        recount();
        return;
      }
      add(hold, filters.order === "newest" ? "start" : filters.order === "urgent" ? "urgent" : "end");
      status.textContent = `New: ${titleOf(hold)}.`;
      recount();
      announce(hold);
    }),
    onEvent(RESOLVED, (event) => {
      const el = event.hold && cards.get(event.hold);
      if (!el) return;
      open.delete(event.hold);
      const before = shown(el);
      const decided = { ...before, status: event.payload.outcome.status, outcome: event.payload.outcome };
      update(el, decided);
      status.textContent = `${titleOf(before)}: ${outcomeWords(decided)}.`;
      settle(units.get(before.batch));
      recount();
    }),
    onResync(reload),
  ];

  // --- Keys -------------------------------------------------------------------------------

  function allCards() {
    return [...list.querySelectorAll("article.hold")];
  }

  function nextCard(from) {
    const all = allCards();
    const inside = new Set(from.matches("article.hold") ? [from] : from.querySelectorAll("article.hold"));
    const rest = all.filter((el) => !inside.has(el));
    return rest.find((el) => from.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) || rest[rest.length - 1];
  }

  function onKey(event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target.closest && target.closest("input, textarea, select, [contenteditable]")) return;
    const all = allCards();
    const current = document.activeElement && document.activeElement.closest && document.activeElement.closest("article.hold");
    const at = current ? all.indexOf(current) : -1;
    const move = (to) => {
      if (all.length === 0) return;
      const el = all[Math.max(0, Math.min(all.length - 1, to))];
      el.focus();
      event.preventDefault();
    };
    switch (event.key) {
      case "j":
      case "ArrowDown":
        return move(at + 1);
      case "k":
      case "ArrowUp":
        return move(at < 0 ? 0 : at - 1);
      case "Enter":
        if (current && target === current) {
          event.preventDefault();
          current.querySelector(".title a").click();
        }
        return;
      case "a":
        if (current) {
          event.preventDefault();
          approveOnce(current);
        }
        return;
      case "d":
        if (current) {
          event.preventDefault();
          denyNow(current);
        }
        return;
      default:
    }
  }
  document.addEventListener("keydown", onKey);

  replace(main,
    h("div", { class: "inbox-head" },
      h("h1", {}, "Inbox"),
      notify),
    filterBox,
    h("p", { class: "muted keys" }, "Keys: j/k or ↓/↑ move, Enter opens, a approves once, d denies."),
    status,
    list,
    empty,
    more);
  await load(null);

  return () => {
    generation += 1;
    for (const stop of stops) stop();
    for (const t of timers) clearTimeout(t);
    document.removeEventListener("keydown", onKey);
    document.title = "Holdpoint";
    if (count) count.textContent = "";
  };
}

function field(id, text, control) {
  return h("div", { class: "field" }, h("label", { for: id }, text), control);
}

// A hold in a sentence: the question, or the tool (with its command line, for a shell command).
function titleOf(hold) {
  if (hold.spec.kind !== "approval") return `“${hold.spec.question}”`;
  const command = hold.spec.arguments && hold.spec.arguments.command;
  return typeof command === "string" ? `${hold.spec.tool} “${command}”` : hold.spec.tool;
}
