// The live event stream (`GET /api/v1/events`), one per page load, shared by every view.
// EventSource reconnects by itself and sends `Last-Event-ID`, so nothing is missed while the
// server stays up; after any reconnect the views re-read what they show as well (`onResync`),
// so a page never keeps a card that looks pending but is not.

// Each SSE message is named by its event's type ("hold.created"); listeners by type.
const listeners = new Map();
const resyncs = new Set();
let source = null;
let broken = false;

function connect() {
  source = new EventSource("/api/v1/events");
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
