// Management: worlds, agents and chats (create, change, delete), grants, the audit log,
// tokens, webhooks and the active policy with its explain form. Each section is offered to
// the roles the API lets do it (the access table in the server's `routes/mod.rs`); anyone else
// is told so instead of being shown forms the server would refuse.
import * as api from "./api.js";
import { lasting, spelled } from "./card.js";
import { actorName, h, problem, relative, replace, when } from "./dom.js";
import { DecidedBy, EVENT_TYPES, EventType, GrantScope, Order, PERSON_ROLES, PolicyLayer, Role } from "./wire.js";

const ADMINS = [Role.Admin];
const PEOPLE = PERSON_ROLES;

const SECTIONS = [
  { id: "worlds", title: "Worlds", roles: ADMINS, about: "Create, rename and delete worlds.", render: worldsSection },
  { id: "agents", title: "Agents", roles: ADMINS, about: "LLM settings, tools, system prompt and step limit of each agent.", render: agentsSection },
  { id: "chats", title: "Chats", roles: PEOPLE, about: "Start, rename and delete chats.", render: chatsSection },
  { id: "grants", title: "Grants", roles: PEOPLE, about: "Remembered approvals, per world; revoke one to be asked again.", render: grantsSection },
  { id: "audit", title: "Audit log", roles: PEOPLE, about: "Every change, newest first, by world, hold, person and type; verify the hash chain.", render: auditSection },
  { id: "tokens", title: "Tokens", roles: ADMINS, about: "API tokens for people and agents.", render: tokensSection },
  { id: "webhooks", title: "Webhooks", roles: ADMINS, about: "Send hold events to other systems, and see the deliveries.", render: webhooksSection },
  { id: "policy", title: "Policy", roles: PEOPLE, about: "The rules in force, and what they decide for a call.", render: policySection },
];

// Who a section's roles are, in words.
const who = (roles) => (roles.includes(Role.Approver) ? "admins and approvers" : "admins");

export async function manage(main, [section], me) {
  const mine = SECTIONS.filter((s) => s.roles.includes(me.role));
  const nav = h(
    "nav",
    { class: "manage-nav", "aria-label": "Management sections" },
    h("ul", {}, mine.map((s) =>
      h("li", {}, h("a", { href: `/manage/${s.id}`, "aria-current": s.id === section ? "page" : null }, s.title)))),
  );
  main.append(h("h1", {}, "Manage"));
  if (!mine.length) {
    main.append(notice("Management is for people: admins and approvers. This credential is an agent's."));
    return;
  }
  if (!section) {
    main.append(
      nav,
      h("dl", { class: "manage-overview" }, mine.map((s) => [
        h("dt", {}, h("a", { href: `/manage/${s.id}` }, s.title)),
        h("dd", {}, s.about),
      ])),
    );
    // (`append` would write a null out as the word "null".)
    if (mine.length < SECTIONS.length) {
      main.append(h("p", { class: "muted" }, "Worlds, agents, tokens and webhooks are managed by admins."));
    }
    return;
  }
  const s = SECTIONS.find((x) => x.id === section);
  if (!s) {
    main.append(nav, problem(new Error(`There is no management section "${section}".`)));
    return;
  }
  if (!s.roles.includes(me.role)) {
    main.append(nav, notice(
      `Only ${who(s.roles)} may manage ${s.title.toLowerCase()}. ` +
        `You are signed in as ${me.name} (${me.role}).`,
    ));
    return;
  }
  const body = h("section", { class: "manage", "aria-labelledby": "manage-title", "aria-busy": "true" }, h("h2", { id: "manage-title" }, s.title));
  main.append(nav, body);
  try {
    return await s.render(body, me);
  } finally {
    body.removeAttribute("aria-busy");
  }
}

function notice(text) {
  return h("p", { class: "card manage-notice", role: "status", id: "manage-refused" }, text);
}

// ---- forms: labels, hints, and the server's errors next to the field they name

let serial = 0;

// An input (or select, textarea) with its label, an optional hint and a place for its error.
// `field` is the API's name of the value (`llm.base_url`): an error whose `details.field`
// names it, or a part of it (`tools[2]`), is shown beneath it.
/**
 * @param {{label: string, field: string, value?: any, hint?: string, options?: Array<[string, string]>,
 *   rows?: number, type?: string, attrs?: Record<string, string>}} spec
 */
function field({ label, field, value, hint, options, rows, type = "text", attrs = {} }) {
  const id = `m${++serial}`;
  let input;
  if (options) {
    input = h("select", { id, name: field }, options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)));
  } else if (rows) {
    input = h("textarea", { id, name: field, rows, ...attrs });
    input.value = value ?? "";
  } else {
    input = h("input", { id, name: field, type, value: value ?? "", ...attrs });
  }
  return labelled(input, label, hint);
}

// Checkboxes for a list value (`events`), in a fieldset that errors about the list land on.
/** @param {{label: string, field: string, all: string[], chosen: string[], hint?: string}} spec */
function choices({ label, field, all, chosen, hint }) {
  const id = `m${++serial}`;
  const set = h("fieldset", { id, class: "choices" }, h("legend", {}, label), all.map((value) =>
    h("label", { class: "choice" }, h("input", { type: "checkbox", name: field, value, checked: chosen.includes(value) }), value)));
  return labelled(set, null, hint);
}

function labelled(input, label, hint) {
  const id = input.id;
  input.dataset.field = input.name || input.querySelector("input").name;
  const hintEl = hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null;
  const error = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
  input.setAttribute("aria-describedby", hintEl ? `${id}-hint ${id}-error` : `${id}-error`);
  return h("div", { class: "field" }, label ? h("label", { for: id }, label) : null, input, hintEl, error);
}

// A value a person typed, trimmed; "" when empty.
function value(form, name) {
  const el = form.elements.namedItem(name);
  return el ? el.value.trim() : "";
}

// A mistake found before anything is sent, shaped like the server's so it lands the same way.
function mistake(name, message) {
  return new api.ApiError(422, "invalid_input", `${name}: ${message}`, { field: name });
}

// A form that sends `collect(form)` with `send`, then calls `done(result, form)`. The
// server's error goes beneath the field it names (and the field is marked invalid and
// focused), or above the button when it names none.
function apiForm({ label, fields, submit, collect, send, done }) {
  const general = h("p", { class: "error form-error", role: "alert", hidden: true });
  const button = h("button", { type: "submit" }, submit);
  const form = h("form", { class: "manage-form", novalidate: true, "aria-label": label }, fields, general, h("div", { class: "actions" }, button));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    button.disabled = true;
    try {
      const result = await send(collect(form));
      await done(result, form);
    } catch (error) {
      if (error.status === 401) return location.assign("/signin");
      showError(form, general, error);
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

function clearErrors(form) {
  for (const el of form.querySelectorAll(".field-error, .form-error")) {
    el.textContent = "";
    el.hidden = true;
  }
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
}

function showError(form, general, error) {
  const named = error.details && typeof error.details.field === "string" ? error.details.field : "";
  const target = named ? fieldFor(form, named) : null;
  if (!target) {
    general.textContent = error.message;
    general.hidden = false;
    return;
  }
  const box = document.getElementById(`${target.id}-error`);
  box.textContent = error.message;
  box.hidden = false;
  target.setAttribute("aria-invalid", "true");
  (target.matches("fieldset") ? target.querySelector("input") : target).focus();
}

// The input for an error's field: the one named exactly, else the longest name the field is
// inside of (`tools` for `tools[2]`, `llm.model` for `llm.model`).
function fieldFor(form, name) {
  let best = null;
  for (const el of form.querySelectorAll("[data-field]")) {
    const f = el.dataset.field;
    const inside = name === f || name.startsWith(`${f}[`) || name.startsWith(`${f}.`);
    if (inside && (!best || f.length > best.dataset.field.length)) best = el;
  }
  return best;
}

// ---- shared pieces

// A button that asks again in place before it acts: the first click shows what will happen
// and two buttons, only the second acts. (Not `window.confirm`: a dialog blocks the page.)
function confirmed(label, question, act) {
  const wrap = h("span", { class: "confirm" });
  const start = h("button", { type: "button", class: "quiet danger", dataset: { action: label.toLowerCase() } }, label);
  start.addEventListener("click", () => {
    const yes = h("button", { type: "button", class: "danger", dataset: { confirm: label.toLowerCase() } }, `Yes, ${label.toLowerCase()}`);
    const no = h("button", { type: "button", class: "quiet" }, "Keep");
    const error = h("span", { class: "error", role: "alert" });
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      try {
        await act();
        // What was deleted is gone with its buttons: focus goes to the message that says so.
        if (!wrap.isConnected) focusStatus();
      } catch (e) {
        yes.disabled = false;
        error.textContent = e.message;
      }
    });
    no.addEventListener("click", () => {
      replace(wrap, start);
      start.focus();
    });
    replace(wrap, h("span", { class: "confirm-ask", role: "group", "aria-label": question }, h("span", {}, question), yes, no, error));
    yes.focus();
  });
  wrap.append(start);
  return wrap;
}

// A button that shows and hides `make()`'s element under `host`, built afresh each time.
function toggle(label, host, make) {
  const button = h("button", { type: "button", class: "quiet", "aria-expanded": "false", dataset: { action: label.toLowerCase() } }, label);
  let shown = null;
  button.addEventListener("click", async () => {
    if (shown) {
      shown.remove();
      shown = null;
      button.setAttribute("aria-expanded", "false");
      return;
    }
    shown = h("div", { class: "manage-more" });
    host.append(shown);
    button.setAttribute("aria-expanded", "true");
    try {
      replace(shown, await make(() => button.click()));
    } catch (e) {
      replace(shown, problem(e));
    }
    const first = shown.querySelector("input, select, textarea, button");
    if (first) first.focus();
  });
  return button;
}

// One thing in a list: its name, facts about it, its buttons, and room for an edit form.
// Its buttons are described by its name, so "Delete" says what it deletes to a screen reader.
function entry(data, title, facts, actions) {
  const id = `m${++serial}`;
  const li = h("li", { class: "card manage-item", dataset: data });
  const buttons = h("div", { class: "actions" }, actions(li));
  for (const b of buttons.querySelectorAll("button")) b.setAttribute("aria-describedby", id);
  li.append(
    h("h3", { id }, title),
    facts.length ? h("dl", { class: "facts" }, facts.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])) : "",
    buttons,
  );
  return li;
}

// A secret the server shows once (a token, a webhook's signing secret), with a copy button.
function secret(what, text) {
  const code = h("code", { class: "secret" }, text);
  const said = h("span", { role: "status" });
  const copy = h("button", { type: "button", class: "quiet" }, "Copy");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      said.textContent = "Copied.";
    } catch {
      getSelection().selectAllChildren(code);
      said.textContent = "Selected: copy it with your keyboard.";
    }
  });
  const panel = h("div", { class: "card secret-panel", role: "region", "aria-label": `The new ${what}` },
    h("p", { class: "warn" }, `The new ${what}. Copy it now: you will not see it again.`),
    h("p", {}, code),
    h("div", { class: "actions" }, copy, h("button", { type: "button", onclick: () => panel.remove() }, "Done"), said));
  return panel;
}

function status() {
  return h("p", { class: "manage-status", role: "status", tabindex: "-1" });
}

function focusStatus() {
  const said = /** @type {HTMLElement | null} */ (document.querySelector(".manage-status:not(:empty)"));
  if (said) said.focus();
}

function empty(text) {
  return h("li", { class: "muted" }, text);
}

// The world a section shows, kept while the page is open so sections agree.
let chosenWorld = null;

// A world picker above `render(area, world)`, which runs again when another is picked.
async function inWorld(body, me, render) {
  const worlds = await api.worlds();
  if (!worlds.length) {
    body.append(h("p", { class: "muted" }, "There are no worlds yet. ",
      me.role === Role.Admin ? h("a", { href: "/manage/worlds" }, "Create one.") : "An admin creates them."));
    return;
  }
  if (!worlds.some((w) => w.id === chosenWorld)) chosenWorld = worlds[0].id;
  const select = h("select", { id: "manage-world", name: "world" }, worlds.map((w) =>
    h("option", { value: w.id, selected: w.id === chosenWorld }, w.name)));
  const area = h("div", { class: "manage-area" });
  const show = async () => {
    chosenWorld = select.value;
    replace(area);
    try {
      await render(area, worlds.find((w) => w.id === chosenWorld));
    } catch (e) {
      replace(area, problem(e));
    }
  };
  select.addEventListener("change", show);
  body.append(h("div", { class: "field world-pick" }, h("label", { for: "manage-world" }, "World"), select), area);
  await show();
}

// Only what changed, for a PATCH (a change that changes nothing is not made).
function changed(now, before) {
  const out = {};
  for (const [k, v] of Object.entries(now)) {
    if (JSON.stringify(v) !== JSON.stringify(before[k])) out[k] = v;
  }
  return out;
}

// ---- worlds

async function worldsSection(body) {
  const list = h("ul", { class: "manage-list", "aria-label": "Worlds" });
  const said = status();
  const refresh = async () => {
    const worlds = await api.worlds();
    replace(list, worlds.length ? worlds.map((w) => worldEntry(w, refresh, said)) : empty("No worlds yet."));
  };
  body.append(
    h("h3", {}, "New world"),
    apiForm({
      label: "New world",
      fields: worldFields({}),
      submit: "Create world",
      collect: (f) => ({ name: value(f, "name"), description: value(f, "description") || undefined }),
      send: api.createWorld,
      done: async (w, f) => {
        f.reset();
        said.textContent = `World ${w.name} created.`;
        await refresh();
      },
    }),
    said,
    h("h3", {}, "Worlds"),
    list,
  );
  await refresh();
}

function worldFields(w) {
  return [
    field({ label: "Name", field: "name", value: w.name, hint: "1 to 64 letters, digits, '_', '-' or '.'", attrs: { autocomplete: "off" } }),
    field({ label: "Description", field: "description", value: w.description, rows: 2 }),
  ];
}

function worldEntry(w, refresh, said) {
  const routes = w.notice_routes || [];
  const routed = routes.length ? `${routes.length} of its own` : "only the configuration file's";
  return entry({ id: w.id, name: w.name }, w.name, [w.description && ["About", w.description], ["Notice routes", routed], ["Created", when(w.created_at)]], (li) => [
    toggle("Edit", li, () => apiForm({
      label: `Change world ${w.name}`,
      fields: worldFields(w),
      submit: "Save",
      collect: (f) => changed({ name: value(f, "name"), description: value(f, "description") }, { name: w.name, description: w.description || "" }),
      send: (changes) => api.updateWorld(w.id, changes),
      done: async () => {
        said.textContent = `World ${w.name} saved.`;
        await refresh();
      },
    })),
    toggle("Notice routes", li, () => routesForm(w, refresh, said)),
    confirmed("Delete", `Delete world ${w.name}, with its agents, chats and grants?`, async () => {
      await api.deleteWorld(w.id);
      said.textContent = `World ${w.name} deleted.`;
      await refresh();
    }),
  ]);
}

// A world's own notice routes, edited as the JSON list the API takes (each a
// `[[channels.routes]]` without `world`): the whole list is replaced; empty removes them. The
// server checks them against its [channels] and its error, naming `notice_routes[N].FIELD`,
// shows beneath the list.
function routesForm(w, refresh, said) {
  const routes = w.notice_routes || [];
  return apiForm({
    label: `Notice routes of world ${w.name}`,
    fields: [field({
      label: "Notice routes (JSON)",
      field: "notice_routes",
      value: routes.length ? JSON.stringify(routes, null, 2) : "",
      rows: 8,
      hint: 'Who this world\'s holds are sent to, beside the configuration file\'s routes: a list such as [{"tool": "deploy_*", "to": ["dana@example.com"], "as": "dana"}]. Groups, email and Slack are the file\'s. Empty removes them.',
      attrs: { spellcheck: "false" },
    })],
    submit: "Save routes",
    collect: (f) => {
      const text = value(f, "notice_routes");
      let list;
      try {
        list = text ? JSON.parse(text) : [];
      } catch (e) {
        throw mistake("notice_routes", `not JSON: ${e.message}`);
      }
      if (!Array.isArray(list)) throw mistake("notice_routes", "must be a list of routes: [{…}, …]");
      return { notice_routes: list };
    },
    send: (changes) => api.updateWorld(w.id, changes),
    done: async (saved) => {
      const n = (saved.notice_routes || []).length;
      said.textContent = n ? `World ${w.name}: ${n} notice route${n === 1 ? "" : "s"} saved.` : `World ${w.name}: its own notice routes removed.`;
      await refresh();
    },
  });
}

// ---- agents

async function agentsSection(body, me) {
  await inWorld(body, me, async (area, world) => {
    const list = h("ul", { class: "manage-list", "aria-label": `Agents of ${world.name}` });
    const said = status();
    const refresh = async () => {
      const agents = await api.agents(world.id);
      replace(list, agents.length ? agents.map((a) => agentEntry(world, a, refresh, said)) : empty("No agents in this world yet."));
    };
    area.append(
      h("h3", {}, "New agent"),
      apiForm({
        label: "New agent",
        fields: agentFields({}),
        submit: "Create agent",
        collect: (f) => agentBody(f, null),
        send: (body) => api.createAgent(world.id, body),
        done: async (a, f) => {
          f.reset();
          said.textContent = `Agent ${a.name} created.`;
          await refresh();
        },
      }),
      said,
      h("h3", {}, "Agents"),
      list,
    );
    await refresh();
  });
}

function agentFields(a) {
  const llm = a.llm || {};
  return [
    field({ label: "Name", field: "name", value: a.name, hint: "1 to 64 letters, digits, '_', '-' or '.'", attrs: { autocomplete: "off" } }),
    field({ label: "LLM base URL", field: "llm.base_url", value: llm.base_url, hint: "An OpenAI-compatible endpoint, such as http://localhost:11434/v1", attrs: { inputmode: "url", autocomplete: "off" } }),
    field({ label: "Model", field: "llm.model", value: llm.model, attrs: { autocomplete: "off" } }),
    field({ label: "API key variable", field: "llm.api_key_env", value: llm.api_key_env, hint: "The environment variable of the server that holds the key (never the key itself); empty for none." }),
    field({ label: "Temperature", field: "llm.temperature", value: llm.temperature, hint: "0 to 2; empty for the model's default.", attrs: { inputmode: "decimal" } }),
    field({ label: "Tools", field: "tools", value: (a.tools || []).join("\n"), rows: 3, hint: "Tool names or globs, one a line; empty for every built-in tool." }),
    field({ label: "System prompt", field: "system_prompt", value: a.system_prompt, rows: 5 }),
    field({ label: "Most steps per turn", field: "max_steps", value: a.max_steps, hint: "LLM calls a turn may make, 1 to 200; empty for the default.", attrs: { inputmode: "numeric" } }),
  ];
}

// A new agent's body, or (with `before`) the changes to an agent.
function agentBody(f, before) {
  const temperature = value(f, "llm.temperature");
  const steps = value(f, "max_steps");
  const tools = value(f, "tools").split(/[\n,]/).map((t) => t.trim()).filter(Boolean);
  if (temperature !== "" && !Number.isFinite(Number(temperature))) throw mistake("llm.temperature", "a number between 0 and 2");
  if (steps !== "" && !/^\d+$/.test(steps)) throw mistake("max_steps", "a whole number between 1 and 200");
  const llm = {
    ...(before ? before.llm : {}),
    base_url: value(f, "llm.base_url"),
    model: value(f, "llm.model"),
    api_key_env: value(f, "llm.api_key_env") || undefined,
    temperature: temperature === "" ? undefined : Number(temperature),
  };
  const body = {
    name: value(f, "name"),
    llm,
    system_prompt: f.elements.namedItem("system_prompt").value,
    // Every tool is "*" once an agent had a list: a change cannot unset it.
    tools: tools.length ? tools : before && before.tools ? ["*"] : undefined,
    max_steps: steps === "" ? undefined : Number(steps),
  };
  if (!before) return body;
  return changed(body, { ...before, llm: { ...before.llm } });
}

function agentEntry(world, a, refresh, said) {
  const facts = [
    ["Model", `${a.llm.model} at ${a.llm.base_url}`],
    a.llm.api_key_env && ["API key from", a.llm.api_key_env],
    a.llm.temperature !== undefined && a.llm.temperature !== null && ["Temperature", String(a.llm.temperature)],
    ["Tools", a.tools ? a.tools.join(", ") || "none" : "every built-in tool"],
    ["Steps per turn", String(a.max_steps)],
  ];
  return entry({ id: a.id, name: a.name }, a.name, facts, (li) => [
    toggle("Edit", li, () => apiForm({
      label: `Change agent ${a.name}`,
      fields: agentFields(a),
      submit: "Save",
      collect: (f) => agentBody(f, a),
      send: (changes) => api.updateAgent(world.id, a.id, changes),
      done: async () => {
        said.textContent = `Agent ${a.name} saved.`;
        await refresh();
      },
    })),
    confirmed("Delete", `Delete agent ${a.name}?`, async () => {
      await api.deleteAgent(world.id, a.id);
      said.textContent = `Agent ${a.name} deleted.`;
      await refresh();
    }),
  ]);
}

// ---- chats

async function chatsSection(body, me) {
  await inWorld(body, me, async (area, world) => {
    const agents = await api.agents(world.id);
    const names = new Map(agents.map((a) => [a.id, a.name]));
    const options = agents.map((a) => [a.id, a.name]);
    const list = h("ul", { class: "manage-list", "aria-label": `Chats of ${world.name}` });
    const said = status();
    const refresh = async () => {
      const chats = await api.chats(world.id);
      replace(list, chats.length ? chats.map((c) => chatEntry(world, c, names, options, refresh, said)) : empty("No chats in this world yet."));
    };
    area.append(h("h3", {}, "New chat"));
    if (!agents.length) area.append(h("p", { class: "muted" }, "A chat needs an agent; this world has none yet."));
    else {
      area.append(apiForm({
        label: "New chat",
        fields: chatFields({}, options),
        submit: "Start chat",
        collect: (f) => ({ agent: value(f, "agent"), title: value(f, "title") || undefined }),
        send: (body) => api.createChat(world.id, body),
        done: async (c, f) => {
          f.reset();
          said.textContent = `Chat ${c.title || c.id} started.`;
          await refresh();
        },
      }));
    }
    area.append(said, h("h3", {}, "Chats"), list);
    await refresh();
  });
}

function chatFields(c, options) {
  return [
    field({ label: "Agent", field: "agent", value: c.agent, options }),
    field({ label: "Title", field: "title", value: c.title, attrs: { autocomplete: "off" } }),
  ];
}

function chatEntry(world, c, names, options, refresh, said) {
  const title = c.title || "(untitled)";
  const link = h("a", { href: `/worlds/${encodeURIComponent(world.id)}/chats/${encodeURIComponent(c.id)}` }, title);
  return entry({ id: c.id, title: c.title }, link, [["Agent", names.get(c.agent) || c.agent], ["Started", when(c.created_at)]], (li) => [
    toggle("Edit", li, () => apiForm({
      label: `Change chat ${title}`,
      fields: chatFields(c, options),
      submit: "Save",
      collect: (f) => changed({ title: value(f, "title"), agent: value(f, "agent") }, { title: c.title, agent: c.agent }),
      send: (changes) => api.updateChat(world.id, c.id, changes),
      done: async () => {
        said.textContent = `Chat ${title} saved.`;
        await refresh();
      },
    })),
    confirmed("Delete", `Delete chat ${title} and its messages?`, async () => {
      await api.deleteChat(world.id, c.id);
      said.textContent = `Chat ${title} deleted.`;
      await refresh();
    }),
  ]);
}

// ---- grants

/** @type {Record<import("./wire.js").GrantScope, string>} */
const SCOPES = {
  [GrantScope.Chat]: "these arguments, in one chat",
  [GrantScope.AlwaysArgs]: "these arguments, anywhere in the world",
  [GrantScope.AlwaysTool]: "any arguments, anywhere in the world",
};

async function grantsSection(body, me) {
  await inWorld(body, me, async (area, world) => {
    const list = h("ul", { class: "manage-list", "aria-label": `Grants of ${world.name}` });
    const said = status();
    const refresh = async () => {
      const grants = await api.grants(world.id);
      replace(list, grants.length ? grants.map((g) => grantEntry(g, refresh, said)) : empty("No grants in this world: every call is decided by policy."));
    };
    area.append(said, list);
    await refresh();
  });
}

function grantEntry(g, refresh, said) {
  // An expired grant no longer matches: it is listed (until revoked) but marked as such.
  const expired = g.expired || (g.expires_at && Date.parse(g.expires_at) <= Date.now());
  const facts = [
    ["Allows", SCOPES[g.scope] || g.scope],
    ["Expires", g.expires_at
      ? h("span", { class: expired ? "grant-expiry expired" : "grant-expiry" },
          expired ? `Expired ${relative(g.expires_at)} (${when(g.expires_at)}): its calls are asked again`
            : `${when(g.expires_at)} (${relative(g.expires_at)}; lasts ${lasting(Date.parse(g.expires_at) - Date.parse(g.created_at))})`)
      : h("span", { class: "grant-expiry" }, "Never: until revoked")],
    g.chat && ["Chat", g.chat],
    g.digest && ["Arguments digest", h("code", {}, g.digest)],
    ["Granted by", `${g.created_by}, ${relative(g.created_at)}`],
    ["From hold", h("a", { href: `/holds/${encodeURIComponent(g.from_hold)}` }, g.from_hold)],
  ];
  const title = expired ? [g.tool, " ", h("span", { class: "badge expired" }, "expired")] : g.tool;
  const li = entry({ id: g.id, tool: g.tool, expired: expired ? "true" : "false" }, title, facts, () => [
    confirmed("Revoke", `Revoke this grant? Calls it allowed will be asked again.`, async () => {
      await api.revokeGrant(g.id);
      said.textContent = `Grant for ${g.tool} revoked.`;
      await refresh();
    }),
  ]);
  if (expired) li.classList.add("expired");
  return li;
}

// ---- audit log

const AUDIT_PAGE = 50;
// The event types people filter by: every type of the API but the agent's streamed text
// (its message, piece by piece).
const AUDIT_TYPES = EVENT_TYPES.filter((type) => type !== EventType.TurnText);
// The filters, as the address keeps them (`/manage/audit?hold=…&actor=alice`).
const AUDIT_FILTERS = ["world", "hold", "actor", "type"];

// The log newest first, a page of 50 at a time, by world, hold, person and type. A page is
// where the API's `next` says (`before`): Older goes on from the page's end, Newer back to
// the page before, Newest to the start, and "Go to event" to any position of the log. The
// filters and the page are kept in the address, so a view of the log can be linked to.
async function auditSection(body, me) {
  const worlds = await api.worlds();
  const asked = new URLSearchParams(location.search);
  const input = (name, label, hint) => {
    const id = `audit-${name}`;
    const el = h("input", { id, name, type: "text", autocomplete: "off", spellcheck: "false", value: asked.get(name) || "" });
    return [el, h("div", { class: "field" }, h("label", { for: id }, label), el, hint ? h("p", { class: "hint" }, hint) : null)];
  };
  const world = h("select", { id: "audit-world", name: "world" }, h("option", { value: "" }, "Every world"),
    worlds.map((w) => h("option", { value: w.id, selected: asked.get("world") === w.id || asked.get("world") === w.name }, w.name)));
  const type = h("select", { id: "audit-type", name: "type" }, h("option", { value: "" }, "Every type"),
    AUDIT_TYPES.map((t) => h("option", { value: t, selected: asked.get("type") === t }, t)));
  const [hold, holdField] = input("hold", "Hold", "Its id, as on the hold's page.");
  const [actor, actorField] = input("actor", "Person", "Who acted: a person's, agent's or token's name.");
  const filters = h("form", { class: "audit-filters", "aria-label": "Filter the audit log" },
    h("div", { class: "field" }, h("label", { for: "audit-world" }, "World"), world),
    holdField, actorField,
    h("div", { class: "field" }, h("label", { for: "audit-type" }, "Type"), type),
    h("div", { class: "actions" }, h("button", { type: "submit", id: "audit-show" }, "Show")));
  const list = h("ol", { class: "audit-list", "aria-label": "Events" });
  const where = h("p", { class: "muted audit-where", role: "status" });
  const error = h("div", { class: "audit-error" });
  const newest = h("button", { type: "button", class: "quiet", id: "audit-newest" }, "Newest");
  const newer = h("button", { type: "button", class: "quiet", id: "audit-newer" }, "← Newer");
  const older = h("button", { type: "button", class: "quiet", id: "audit-older" }, "Older →");
  const jumpAt = h("input", { id: "audit-at", name: "at", type: "text", inputmode: "numeric", autocomplete: "off", size: "8" });
  const jump = h("form", { class: "audit-jump", "aria-label": "Go to an event" },
    h("label", { for: "audit-at" }, "Go to event #"), jumpAt,
    h("button", { type: "submit", class: "quiet", id: "audit-go" }, "Go"));

  // `before` of each page shown since the newest (0: the newest), so Newer can go back.
  let starts = [];
  let before = Number(asked.get("before")) || 0;
  let next = 0;
  const chosen = () => ({
    world: world.value || undefined,
    hold: hold.value.trim() || undefined,
    actor: actor.value.trim() || undefined,
    type: type.value || undefined,
  });
  const remember = () => {
    const q = new URLSearchParams();
    const f = chosen();
    for (const name of AUDIT_FILTERS) if (f[name]) q.set(name, f[name]);
    if (before) q.set("before", String(before));
    const search = q.toString();
    history.replaceState(history.state, "", `${location.pathname}${search ? `?${search}` : ""}`);
  };
  const load = async () => {
    replace(error);
    remember();
    // A page is filled from as many of the API's pages as it takes (a filter the store has
    // no index for may leave some short), up to the start of the log.
    const events = [];
    let at = before;
    do {
      const page = await api.auditEvents({ ...chosen(), order: Order.Newest, before: at || undefined, limit: AUDIT_PAGE - events.length });
      events.push(...page.events);
      at = page.next;
    } while (events.length < AUDIT_PAGE && at > 0);
    next = at;
    replace(list, events.length ? events.map(auditEntry) : h("li", { class: "muted" }, "No events here."));
    where.textContent = events.length
      ? `Newest first: events ${events[0].seq} to ${events[events.length - 1].seq}${next > 0 ? "; older ones follow" : "; the first of the log"}.`
      : before ? `No events before event ${before}.` : "No events.";
    newest.disabled = !before;
    newer.disabled = starts.length === 0;
    older.disabled = next <= 0;
  };
  const show = () => load().catch((e) => replace(error, problem(e)));
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    starts = [];
    before = 0;
    show();
  });
  world.addEventListener("change", () => filters.requestSubmit());
  type.addEventListener("change", () => filters.requestSubmit());
  newest.addEventListener("click", () => {
    starts = [];
    before = 0;
    show();
  });
  newer.addEventListener("click", () => {
    before = starts.pop() || 0;
    show();
  });
  older.addEventListener("click", () => {
    starts.push(before);
    before = next;
    show();
  });
  jump.addEventListener("submit", (event) => {
    event.preventDefault();
    const n = Number(jumpAt.value.trim());
    if (!Number.isInteger(n) || n < 1) {
      replace(error, problem(new Error("An event's number: a whole number from 1.")));
      return;
    }
    // The page that starts at event n: every event before n + 1.
    starts.push(before);
    before = n + 1;
    show();
  });
  if (me.role === Role.Admin) body.append(verifier());
  body.append(
    filters,
    where,
    error,
    list,
    h("nav", { class: "audit-pager", "aria-label": "Pages of the audit log" }, newest, newer, older, jump),
  );
  await load();
}

function verifier() {
  const result = h("p", { id: "audit-result", role: "status" });
  const button = h("button", { type: "button", id: "audit-verify" }, "Verify the chain");
  button.addEventListener("click", async () => {
    button.disabled = true;
    result.className = "";
    result.textContent = "Checking every event…";
    try {
      const r = await api.auditVerify();
      if (r.intact) {
        result.className = "verdict ok";
        result.textContent = r.events
          ? `Intact: all ${r.events} events chain up to event ${r.head_seq}, hash ${r.head_hash}.`
          : "Intact: the log is empty.";
      } else {
        result.className = "verdict bad";
        result.textContent = `Broken at event ${r.first_bad_event}: ${r.reason}`;
      }
    } catch (e) {
      replace(result, problem(e));
    } finally {
      button.disabled = false;
    }
  });
  return h("div", { class: "card audit-verify" },
    h("p", {}, "Verifying reads every event and checks each one's hash and link to the one before."),
    button, result);
}

function auditEntry(e) {
  const about = e.hold ? h("a", { href: `/holds/${encodeURIComponent(e.hold)}` }, "hold") : null;
  return h("li", { class: "audit-event", dataset: { seq: e.seq, type: e.payload.type } },
    h("div", { class: "audit-head" },
      h("span", { class: "seq" }, `#${e.seq}`),
      h("strong", {}, e.payload.type),
      h("span", {}, actorName(e.actor)),
      h("time", { datetime: e.at, title: when(e.at) }, relative(e.at)),
      about),
    h("details", {}, h("summary", {}, "Details"), h("pre", {}, JSON.stringify(e, null, 2))));
}

// ---- tokens

/** @type {Array<[string, string]>} */
const ROLES = [
  [Role.Approver, "approver: a person who decides holds"],
  [Role.Agent, "agent: a program that asks"],
  [Role.Admin, "admin: everything"],
];

async function tokensSection(body) {
  const worlds = await api.worlds();
  const list = h("ul", { class: "manage-list", "aria-label": "Tokens" });
  const said = status();
  const shown = h("div", { id: "token-secret" });
  const names = new Map(worlds.map((w) => [w.id, w.name]));
  const refresh = async () => {
    const tokens = await api.tokens();
    replace(list, tokens.length ? tokens.map((t) => tokenEntry(t, names, refresh, said)) : empty("No tokens."));
  };
  body.append(
    h("h3", {}, "New token"),
    apiForm({
      label: "New token",
      fields: [
        field({ label: "Name", field: "name", hint: "The person's or program's name; several tokens may share one.", attrs: { autocomplete: "off" } }),
        field({ label: "Role", field: "role", value: Role.Approver, options: ROLES }),
        field({ label: "World", field: "world", value: "", options: [["", "every world"], ...worlds.map((w) => /** @type {[string, string]} */ ([w.id, w.name]))], hint: "Limit an approver's or agent's token to one world. Admins are never limited." }),
      ],
      submit: "Create token",
      collect: (f) => ({ name: value(f, "name"), role: value(f, "role"), world: value(f, "world") || undefined }),
      send: api.createToken,
      done: async (created, f) => {
        f.reset();
        replace(shown, secret(`token for ${created.info.name}`, created.token));
        said.textContent = `Token for ${created.info.name} created.`;
        await refresh();
      },
    }),
    shown,
    said,
    h("h3", {}, "Tokens"),
    list,
  );
  await refresh();
}

function tokenEntry(t, names, refresh, said) {
  const facts = [
    ["Role", t.role],
    // A token limited to a world that was deleted stays limited to it: it sees no world.
    ["World", t.world_deleted
      ? h("span", { class: "world-deleted" }, "a deleted world: it sees no world")
      : t.world ? names.get(t.world) || t.world : "every world"],
    ["Created", when(t.created_at)],
    ["Id", h("code", {}, t.id)],
  ];
  return entry({ id: t.id, name: t.name }, t.name, facts, () => [
    confirmed("Revoke", `Revoke this token of ${t.name}? Its browser sessions end too.`, async () => {
      await api.revokeToken(t.id);
      said.textContent = `Token of ${t.name} revoked.`;
      await refresh();
    }),
  ]);
}

// ---- webhooks

// The events a webhook may be sent (the server's choice: a subscription of others is
// refused), and those it is sent unless it says.
const HOOK_DEFAULT = [EventType.HoldCreated, EventType.HoldReminded, EventType.HoldDecided, EventType.HoldExpired];
const HOOK_EVENTS = [...HOOK_DEFAULT, EventType.HoldWithdrawn];

async function webhooksSection(body, me) {
  await inWorld(body, me, async (area, world) => {
    const list = h("ul", { class: "manage-list", "aria-label": `Webhooks of ${world.name}` });
    const said = status();
    const shown = h("div", { id: "webhook-secret" });
    const refresh = async () => {
      const hooks = await api.webhooks(world.id);
      replace(list, hooks.length ? hooks.map((w) => webhookEntry(w, refresh, said)) : empty("No webhooks in this world."));
    };
    area.append(
      h("h3", {}, "New webhook"),
      apiForm({
        label: "New webhook",
        fields: [
          field({ label: "URL", field: "url", hint: "Receives a signed POST for each event.", attrs: { inputmode: "url", autocomplete: "off" } }),
          choices({ label: "Events", field: "events", all: HOOK_EVENTS, chosen: HOOK_DEFAULT }),
        ],
        submit: "Create webhook",
        collect: (f) => ({
          url: value(f, "url"),
          events: [...f.querySelectorAll("input[name='events']:checked")].map((c) => c.value),
        }),
        send: (body) => api.createWebhook(world.id, body),
        done: async (created, f) => {
          f.reset();
          replace(shown, secret("webhook's signing secret", created.secret));
          said.textContent = `Webhook to ${created.webhook.url} created.`;
          await refresh();
        },
      }),
      shown,
      said,
      h("h3", {}, "Webhooks"),
      list,
    );
    await refresh();
  });
}

function webhookEntry(w, refresh, said) {
  return entry({ id: w.id, url: w.url }, w.url, [["Events", w.events.join(", ")], ["Created", when(w.created_at)]], (li) => [
    toggle("Deliveries", li, () => deliveries(w)),
    confirmed("Delete", `Delete the webhook to ${w.url}? Its deliveries stop.`, async () => {
      await api.deleteWebhook(w.id);
      said.textContent = `Webhook to ${w.url} deleted.`;
      await refresh();
    }),
  ]);
}

async function deliveries(w) {
  const list = h("ol", { class: "deliveries", "aria-label": `Deliveries to ${w.url}` });
  const more = h("button", { type: "button", class: "quiet", hidden: true }, "More");
  let after;
  const load = async () => {
    const page = await api.deliveries(w.id, { after, limit: 50 });
    if (after === undefined && !page.items.length) list.append(h("li", { class: "muted" }, "No deliveries yet."));
    for (const d of page.items) {
      const outcome = d.last_status ? `HTTP ${d.last_status}` : d.last_error || "";
      list.append(h("li", { dataset: { status: d.status } },
        h("strong", {}, d.status), ` ${d.event_type} (event ${d.event}), `,
        `${d.attempts} attempt${d.attempts === 1 ? "" : "s"}`, outcome ? `, ${outcome}` : "",
        ", ", h("time", { datetime: d.updated_at, title: when(d.updated_at) }, relative(d.updated_at))));
    }
    after = page.next;
    more.hidden = page.next === undefined || page.next === null;
  };
  more.addEventListener("click", () => load().catch((e) => list.append(h("li", {}, problem(e)))));
  await load();
  return [h("h4", {}, "Deliveries"), list, more];
}

// ---- policy

async function policySection(body) {
  const [policy, worlds] = await Promise.all([api.policy(), api.worlds()]);
  body.append(
    h("dl", { class: "facts" },
      h("dt", {}, "When no rule matches"), h("dd", {}, MODES[policy.mode] || policy.mode),
      h("dt", {}, "Default deadline"), h("dd", {}, spelled(policy.default_deadline)),
      h("dt", {}, "Longest deadline"), h("dd", {}, spelled(policy.max_deadline)),
      h("dt", {}, "Reminder"), h("dd", {}, `${spelled(policy.remind_before)} before the deadline`)),
    h("h3", {}, `Rules (${policy.rules.length})`),
    policy.rules.length
      ? h("ol", { class: "manage-list rules", "aria-label": "Rules" }, policy.rules.map(ruleEntry))
      : h("p", { class: "muted" }, "No rules: the mode decides every call."),
    policy.source !== undefined && policy.source !== null
      ? h("details", { class: "policy-source" }, h("summary", {}, "The policy file"), h("pre", {}, policy.source))
      : h("p", { class: "muted" }, "The server runs without a policy file."),
    h("h3", {}, "Explain a call"),
  );
  if (!worlds.length) {
    body.append(h("p", { class: "muted" }, "Explaining needs a world (for its grants); there is none yet."));
    return;
  }
  const answer = h("div", { id: "explain-result", role: "status" });
  body.append(apiForm({
    label: "Explain a call",
    fields: [
      field({ label: "World", field: "world", value: chosenWorld || worlds[0].id, options: worlds.map((w) => [w.id, w.name]) }),
      field({ label: "Tool", field: "tool", hint: "As the agent names it, such as shell_cmd.", attrs: { autocomplete: "off" } }),
      field({ label: "Arguments (JSON)", field: "arguments", value: "{}", rows: 4, attrs: { spellcheck: "false" } }),
    ],
    submit: "Explain",
    collect: (f) => {
      let args;
      try {
        args = JSON.parse(value(f, "arguments") || "{}");
      } catch (e) {
        throw mistake("arguments", `not JSON: ${e.message}`);
      }
      return { world: value(f, "world"), tool: value(f, "tool"), arguments: args };
    },
    send: api.explain,
    done: (x) => {
      replace(answer, explanation(x));
    },
  }), answer);
}

const MODES = {
  manual: "ask a person (manual)",
  auto_approve: "allow (auto_approve)",
  auto_deny: "deny (auto_deny)",
};

function ruleEntry(r) {
  const facts = [
    ["Tools", r.tools.join(", ")],
    ...(r.args || []).map((a) => ["Argument", `${a.pointer || "(all)"} ${a.not ? "not " : ""}${a.test} ${JSON.stringify(a.value)}`]),
    r.command && ["Command", `${r.command.program}${r.command.args && r.command.args.length ? " " + r.command.args.join(" ") : ""}${r.command.flags && r.command.flags.length ? " with " + r.command.flags.join(", ") : ""} (at ${r.command.pointer})`],
    r.annotations && ["Annotations", Object.entries(r.annotations).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => `${k}=${v}`).join(", ")],
    r.ask && r.ask.approvers && r.ask.approvers.length && ["Approvers", r.ask.approvers.join(", ")],
    r.ask && r.ask.quorum > 1 && ["Quorum", String(r.ask.quorum)],
    r.ask && r.ask.deadline && ["Deadline", spelled(r.ask.deadline)],
    r.ask && r.ask.on_timeout && ["On timeout", r.ask.on_timeout],
    r.ask && ["Offers", r.ask.offers.join(", ")],
  ];
  const li = entry({ rule: r.name, action: r.action }, [h("span", { class: `verdict-tag ${r.action}` }, r.action), " ", r.name], facts, () => []);
  return li;
}

function decidedBy(d) {
  // A rule's number is its place in the server's policy file; a world's own policy, or a
  // locked rule of the base over it, is named by its layer instead.
  switch (d.by) {
    case DecidedBy.Rule:
      if (d.rule.layer === PolicyLayer.World) return `rule ${d.rule.name} of this world's own policy`;
      if (d.rule.layer === PolicyLayer.Base) return `rule ${d.rule.name} (a locked rule of the server's policy file)`;
      return `rule ${d.rule.name} (number ${d.rule.index + 1} in the server's policy file)`;
    case DecidedBy.Grant:
      return `grant ${d.grant}`;
    case DecidedBy.Mode:
      return `the policy's mode (${d.mode}): no rule matched`;
    default:
      return `“${d.by}” (a decider this page does not know)`;
  }
}

function explanation(x) {
  return h("div", { class: "card explanation", dataset: { decision: x.decision } },
    h("p", {}, h("span", { class: `verdict-tag ${x.decision}` }, x.decision), " decided by ", h("strong", {}, decidedBy(x.decided_by))),
    x.matched.length
      ? h("p", {}, "Rules that match: ", x.matched.map((m) => `${m.rule.name} (${m.action})`).join(", "))
      : h("p", { class: "muted" }, "No rule matches."),
    x.ask
      ? h("p", {}, `A hold would wait ${spelled(x.ask.deadline)}, then ${x.ask.on_timeout}; it offers ${x.ask.offers.join(", ")}.`)
      : null);
}
