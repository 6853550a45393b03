// The live event stream (`GET /api/v1/events`), shared by every view of the page and by every
// tab of the browser: one EventSource, held by a SharedWorker (`live-worker.js`) that hands
// each event to every tab. A browser allows six connections per server over HTTP/1.1, so a
// stream per tab left a sixth tab blank and made a decision clicked in the first wait, unsent,
// for a connection. Where a browser has no SharedWorker (or it cannot start), the page holds
// its own EventSource, as before.
//
// EventSource reconnects by itself and sends `Last-Event-ID`, so nothing is missed while the
// server stays up; after any reconnect the views re-read what they show as well (`onResync`),
// so a page never keeps a card that looks pending but is not. Pages read what they show only
// once the stream is open (`ready`, which the router awaits): the server subscribes before it
// answers, so whatever is committed after a page's read reaches the page as an event. A tab
// that joins a stream already open is told so at once, and the worker sends it every event
// that arrives after it joined.

import { EVENTS_URL } from "./api.js";
import { EVENT_TYPES } from "./wire.js";

/** @typedef {import("./wire.js").EventType} EventType */

// The worker takes every event type of the API (`EVENT_TYPES`, generated from the protocol)
// from the stream from the start, so an event that arrives before a view's `onEvent` reached
// the worker is not lost to that tab.

// Each SSE message is named by its event's type ("hold.created"); listeners by type.
const listeners = new Map();
const resyncs = new Set();
// The stream as this page holds it: `listen(type)` and `close()`.
let link = null;
let broken = false;
let openedOnce = false;
let markOpened = null;
const opened = new Promise((resolve) => {
  markOpened = resolve;
});
// Who is signed in: tabs of different people (one signed out, another signed in) do not share.
let who = "";
// How long a page waits for the stream before reading anyway (a proxy that buffers the
// stream would otherwise keep the page blank); a late stream then re-reads through `onResync`.
const PATIENCE_MS = 3000;

function onOpen() {
  openedOnce = true;
  markOpened();
  if (broken) {
    broken = false;
    for (const f of resyncs) f();
  }
}

function onBroken() {
  broken = true;
}

function deliver(type, data) {
  let event;
  try {
    event = JSON.parse(data);
  } catch {
    return;
  }
  for (const f of listeners.get(type) || []) f(event);
}

// The tabs' one stream, through the SharedWorker.
function shared() {
  const worker = new SharedWorker("/ui/live-worker.js", { name: `holdpoint live ${who}` });
  const port = worker.port;
  let closed = false;
  port.addEventListener("message", ({ data: message }) => {
    if (closed || !message) return;
    if (message.kind === "open") onOpen();
    else if (message.kind === "error") onBroken();
    else if (message.kind === "event") deliver(message.type, message.data);
  });
  port.start();
  const own = {
    listen(type) {
      port.postMessage({ kind: "listen", type });
    },
    close() {
      closed = true;
      port.postMessage({ kind: "bye" });
      port.close();
    },
  };
  // The worker could not start (its script did not load): the page holds its own stream.
  worker.addEventListener("error", () => {
    if (closed || link !== own) return;
    own.close();
    link = alone();
  });
  port.postMessage({ kind: "hello", url: EVENTS_URL, types: [...new Set([...EVENT_TYPES, ...listeners.keys()])] });
  return own;
}

// This page's own stream.
function alone() {
  const source = new EventSource(EVENTS_URL);
  const handler = (message) => deliver(message.type, message.data);
  source.addEventListener("open", onOpen);
  source.addEventListener("error", onBroken);
  for (const type of listeners.keys()) source.addEventListener(type, handler);
  return {
    listen(type) {
      source.addEventListener(type, handler);
    },
    close() {
      source.close();
    },
  };
}

function connect() {
  if (typeof SharedWorker === "function") {
    try {
      return shared();
    } catch {
      // Not allowed here (a sandboxed page, say): the page's own stream.
    }
  }
  return alone();
}

// A page being left lets go of its part at once: with a stream of its own the browser might
// keep the connection for a while, and the next pages would wait for one; the worker closes
// the shared stream when the last tab has gone. A page shown again from the back/forward
// cache connects anew and re-reads. One case this cannot cover: the last tab's page kept in
// that cache (Chromium keeps the inbox) keeps the worker with it, frozen, and a frozen worker
// may not have read the page's "bye" yet; the stream then stays open until the browser drops
// the page, or shows it again (the worker reads the "bye", then the page's new "hello").
window.addEventListener("pagehide", () => {
  if (link) link.close();
  link = null;
});
window.addEventListener("pageshow", (event) => {
  if (!event.persisted || link) return;
  broken = true;
  link = connect();
});

// Says who is signed in (before the first `ready` or `onEvent`), so that tabs share a stream
// only with tabs of the same person.
export function signedInAs(key) {
  who = String(key);
}

// Resolves once the stream is open (or after a few seconds without it: see PATIENCE_MS).
export function ready() {
  if (!link) link = connect();
  const late = new Promise((resolve) =>
    setTimeout(() => {
      // Pages read without the stream: when it opens at last, they read again.
      if (!openedOnce) broken = true;
      resolve();
    }, PATIENCE_MS));
  return Promise.race([opened, late]);
}

// Calls `f(event)` for each event of the given types ([EventType.HoldCreated, …]) that the
// caller may see, with the event's JSON as the API defines it; returns a function that stops it.
/**
 * @param {readonly EventType[]} types
 * @param {(event: any) => void} f
 */
export function onEvent(types, f) {
  if (!link) link = connect();
  for (const type of types) {
    if (!listeners.has(type)) {
      listeners.set(type, new Set());
      link.listen(type);
    }
    listeners.get(type).add(f);
  }
  return () => {
    for (const type of types) listeners.get(type).delete(f);
  };
}

// Calls `f()` after the stream reconnects; returns a function that stops it.
export function onResync(f) {
  resyncs.add(f);
  return () => resyncs.delete(f);
}
