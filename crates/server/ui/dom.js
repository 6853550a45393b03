// Building the page's elements. Everything a person did not write into this repository (hold
// arguments, questions, names, LLM text) goes in as text nodes, never as markup: `h` has no way
// to insert markup, and an `href` must be one of Holdpoint's own paths.

// An element: `h("button", { class: "primary", onclick: f }, "Approve")`. Children may be
// strings (inserted as text), nodes, arrays of them, or null/false (skipped).
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "href" && !isOwnPath(value)) throw new Error(`not a Holdpoint path: ${value}`);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

// A path on this server ("/holds/…"), never another origin or a `javascript:` URL.
function isOwnPath(value) {
  return typeof value === "string" && value.startsWith("/") && !value.startsWith("//");
}

// Replaces an element's children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// A path segment, escaped.
export function seg(value) {
  return encodeURIComponent(value);
}

// "in 4m 05s", "12s ago": how far `iso` is from now.
export function relative(iso, now = Date.now()) {
  const ms = Date.parse(iso) - now;
  const s = Math.round(Math.abs(ms) / 1000);
  const text =
    s < 60 ? `${s}s`
    : s < 3600 ? `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`
    : s < 86400 ? `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`
    : `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
  return ms >= 0 ? `in ${text}` : `${text} ago`;
}

// A timestamp as the reader's local date and time.
export function when(iso) {
  return new Date(iso).toLocaleString();
}

// A message for a person, from an error thrown by api.js or elsewhere.
// Who did something (an event's actor), in words: "alice (approver) via CLIENT", "deadline".
export function actorName(actor) {
  if (!actor) return "someone";
  const via = actor.via ? ` via ${actor.via}` : "";
  if (actor.name) return (actor.role ? `${actor.name} (${actor.role})` : actor.name) + via;
  return actor.source + via;
}

export function problem(error) {
  return h("p", { class: "error", role: "alert" }, error.message || String(error));
}
