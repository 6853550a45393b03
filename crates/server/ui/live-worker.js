// The one live event stream (`GET /api/v1/events`) of all of a browser's tabs of Holdpoint: a
// SharedWorker that holds one EventSource and hands every event to each tab (`live.js`). A
// browser allows six connections per server over HTTP/1.1; a stream per tab took one each, so a
// sixth tab never drew and a decision clicked in the first waited, unsent, for a connection.
// The worker lives as long as any tab of this origin (and this person: `live.js` names it)
// is open, whichever tab opened it first, so no tab's closing ends the stream of the others.
//
// Messages from a tab: {kind: "hello", url, types} (it listens; `url` is the stream's, as
// api.js names it, and `types` are the event types to take from the stream: wire.js's), {kind: "listen", type} (one more type), {kind: "bye"} (it left).
// To a tab: {kind: "open"} (the stream is open; sent at once to a tab that says hello while
// it is), {kind: "error"} (the stream broke; it comes back by itself), and
// {kind: "event", type, data} (one SSE message: its event's type and its JSON text).

const ports = new Set();
const types = new Set();
let source = null;
// The stream's URL, as the first tab said (a classic worker imports no module: the tabs tell
// it the API's names).
let url = null;
let open = false;
let retry = null;
// After the server refused the stream (a session that ended, a limit): how long to wait
// before asking again, doubled each time up to a minute.
let delay = 1000;

function post(message) {
  for (const port of ports) port.postMessage(message);
}

function forward(message) {
  post({ kind: "event", type: message.type, data: message.data });
}

function listen(type) {
  if (typeof type !== "string" || types.has(type)) return;
  types.add(type);
  if (source) source.addEventListener(type, forward);
}

function connect() {
  clearTimeout(retry);
  retry = null;
  const es = new EventSource(url);
  source = es;
  open = false;
  for (const type of types) es.addEventListener(type, forward);
  es.addEventListener("open", () => {
    if (source !== es) return;
    open = true;
    delay = 1000;
    post({ kind: "open" });
  });
  es.addEventListener("error", () => {
    if (source !== es) return;
    open = false;
    post({ kind: "error" });
    // A network error: EventSource reconnects by itself, with `Last-Event-ID`, so nothing is
    // missed. An answer that is not a stream (401, 429, 503): it gives up; ask again later
    // (the tabs re-read what they show once it is open again).
    if (es.readyState === EventSource.CLOSED) {
      source = null;
      retry = setTimeout(() => {
        if (ports.size > 0) connect();
      }, delay);
      delay = Math.min(delay * 2, 60000);
    }
  });
}

function receive(port, message) {
  if (!message || typeof message !== "object") return;
  switch (message.kind) {
    case "hello":
      if (typeof message.url !== "string") return;
      url = url || message.url;
      ports.add(port);
      for (const type of message.types || []) listen(type);
      // No stream (the first tab, or one refused and waiting to ask again): open one now.
      if (!source) connect();
      else if (open) port.postMessage({ kind: "open" });
      return;
    case "listen":
      listen(message.type);
      return;
    case "bye":
      ports.delete(port);
      // The last tab left: let the connection go at once, as a tab's own stream did. (Unless
      // the browser froze this worker first, with the last page kept in its back/forward cache:
      // the stream then goes when that page is dropped, and this worker with it, or this runs
      // when the page is shown again.)
      if (ports.size === 0 && source) {
        source.close();
        source = null;
        open = false;
      }
      return;
    default:
  }
}

self.addEventListener("connect", (/** @type {MessageEvent} */ event) => {
  const port = event.ports[0];
  port.addEventListener("message", (message) => receive(port, message.data));
  // A tab that went away without a word (it crashed): newer browsers say so.
  port.addEventListener("close", () => receive(port, { kind: "bye" }));
  port.start();
});
