// The live event stream (`GET /api/v1/events`), one per page load, shared by every view.
// EventSource reconnects by itself and sends `Last-Event-ID`, so nothing is missed while the
// server stays up; after any reconnect the views re-read what they show as well (`onResync`),
// so a page never keeps a card that looks pending but is not. Pages read what they show only
// once the stream is open (`ready`, which the router awaits): the server subscribes before it
// answers, so whatever is committed after a page's read reaches the page as an event.

// Each SSE message is named by its event's type ("hold.created"); listeners by type.
const listeners = new Map();
const resyncs = new Set();
let source = null;
let broken = false;
let opened = null;
let openedOnce = false;
// How long a page waits for the stream before reading anyway (a proxy that buffers the
// stream would otherwise keep the page blank); a late stream then re-reads through `onResync`.
const PATIENCE_MS = 3000;

function connect() {
  source = new EventSource("/api/v1/events");
  opened = new Promise((resolve) =>
    source.addEventListener("open", () => {
      openedOnce = true;
      resolve();
    }, { once: true }));
  source.onopen = () => {
    if (broken) {
      broken = false;
      for (const f of resyncs) f();
    }
  };
  source.onerror = () => {
    broken = true;
  };
}

function deliver(message) {
  let event;
  try {
    event = JSON.parse(message.data);
  } catch {
    return;
  }
  for (const f of listeners.get(message.type) || []) f(event);
}

// A page being left closes its stream at once: otherwise the browser may keep the connection
// for a while (it allows six per server), and the next pages would wait for one. A page shown
// again from the back/forward cache connects anew and re-reads.
window.addEventListener("pagehide", () => {
  if (source) source.close();
});
window.addEventListener("pageshow", (event) => {
  if (!event.persisted || !source) return;
  broken = true;
  connect();
  for (const [type] of listeners) source.addEventListener(type, deliver);
});

// Resolves once the stream is open (or after a few seconds without it: see PATIENCE_MS).
export function ready() {
  if (!source) connect();
  const late = new Promise((resolve) =>
    setTimeout(() => {
      // Pages read without the stream: when it opens at last, they read again.
      if (!openedOnce) broken = true;
      resolve();
    }, PATIENCE_MS));
  return Promise.race([opened, late]);
}

// Calls `f(event)` for each event of the given types (["hold.created", …]) that the caller
// may see, with the event's JSON as the API defines it; returns a function that stops it.
export function onEvent(types, f) {
  if (!source) connect();
  for (const type of types) {
    if (!listeners.has(type)) {
      listeners.set(type, new Set());
      source.addEventListener(type, deliver);
    }
    listeners.get(type).add(f);
  }
  return () => {
    for (const type of types) listeners.get(type).delete(f);
  };
}

// The types of the events that end a hold's wait (their payload has `outcome`).
export const RESOLVED = ["hold.decided", "hold.expired", "hold.withdrawn"];
// Every event that changes a hold.
export const HOLD_EVENTS = ["hold.created", "hold.reminded", "hold.voted", "hold.awaiting_confirm", ...RESOLVED];

// Calls `f()` after the stream reconnects; returns a function that stops it.
export function onResync(f) {
  resyncs.add(f);
  return () => resyncs.delete(f);
}
