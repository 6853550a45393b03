// The one way Holdpoint's pages call the public API: same-origin requests that carry the
// session cookie, with the session's CSRF token on every change, and the API's error shape
// turned into an ApiError whose message is the server's. One function per operation, named
// as in the Rust client (`holdpoint-client`); the pages never spell an `/api/v1` path.

let csrf = null;

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    // The API's `details` (for a decision that lost a race: `{hold}`, the hold as decided).
    this.details = details;
  }
}

// How long a request may take before the page says it got no answer. A request the browser
// cannot send at all (no network, no free connection) must not wait silently: the control that
// sent it shows why and can be used again.
const PATIENCE_MS = 30000;
// Walking the whole audit log, or replaying a policy over every recorded call, takes longer.
const LONG_PATIENCE_MS = 300000;

async function request(method, path, body, query, patience = PATIENCE_MS) {
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD" && csrf) headers["X-CSRF-Token"] = csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path + search(query), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      signal: AbortSignal.timeout(patience),
    });
  } catch (error) {
    throw unreachable(method, error, patience);
  }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(
      response.status,
      error.code || "error",
      error.message || response.statusText,
      error.details,
    );
  }
  return data;
}

// The error of a request that got no answer: it could not be sent (the network, the server
// down), or nothing came back in time. A change that timed out may still have been made, so
// it says so (a decision sent again that was recorded meanwhile is answered with the recorded
// one, which the card then shows).
function unreachable(method, error, patience) {
  const change = method !== "GET" && method !== "HEAD";
  const timedOut = error && (error.name === "TimeoutError" || error.name === "AbortError");
  if (!timedOut) {
    return new ApiError(0, "unreachable",
      "This could not be sent: Holdpoint cannot be reached (the network, or the server is down). Try again.");
  }
  const seconds = Math.round(patience / 1000);
  return new ApiError(0, "timeout", change
    ? `Holdpoint did not answer within ${seconds} seconds, so this may or may not have been done. Try again.`
    : `Holdpoint did not answer within ${seconds} seconds. Try again.`);
}

// `?a=1&b=2` from an object, leaving out empty values.
function search(query) {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

const seg = encodeURIComponent;
const world = (w) => `/api/v1/worlds/${seg(w)}`;
const inWorld = (w, kind, id) => (id === undefined ? `${world(w)}/${kind}` : `${world(w)}/${kind}/${seg(id)}`);
const hold = (id, action) => (action ? `/api/v1/holds/${seg(id)}/${action}` : `/api/v1/holds/${seg(id)}`);

// Session
let me = null;
export async function session() {
  const info = await request("GET", "/api/v1/session");
  csrf = info.csrf_token || null;
  me = info;
  return info;
}
export async function logout() {
  await request("POST", "/api/v1/logout");
  csrf = null;
  me = null;
}

// Whether the person signed in may decide `hold`, as the engine checks it: a person (admin or
// approver), and one of the hold's `approvers` when it names any (`Hold.approvers`: empty
// means any approver or admin). A hold the caller may not see never reaches the page.
export function mayDecide(hold) {
  if (!me || (me.role !== "admin" && me.role !== "approver")) return false;
  const approvers = (hold && hold.approvers) || [];
  return approvers.length === 0 || approvers.includes(me.name);
}

// Holds
export const holds = (params) => request("GET", "/api/v1/holds", undefined, params);
export const holdCounts = () => request("GET", "/api/v1/holds/counts");
export const getHold = (id) => request("GET", hold(id));
export const decide = (id, decision) => request("POST", hold(id, "decision"), decision);
export const holdFile = (id) => request("GET", hold(id, "file"));
export const decideBatch = (batch, seen, decision) =>
  request("POST", `/api/v1/batches/${seg(batch)}/decision`, { seen, decision });

// Worlds, agents, chats, turns
export const worlds = () => request("GET", "/api/v1/worlds");
export const getWorld = (w) => request("GET", world(w));
export const createWorld = (body) => request("POST", "/api/v1/worlds", body);
export const updateWorld = (w, changes) => request("PATCH", world(w), changes);
export const deleteWorld = (w) => request("DELETE", world(w));
export const agents = (w) => request("GET", inWorld(w, "agents"));
export const createAgent = (w, body) => request("POST", inWorld(w, "agents"), body);
export const updateAgent = (w, a, changes) => request("PATCH", inWorld(w, "agents", a), changes);
export const deleteAgent = (w, a) => request("DELETE", inWorld(w, "agents", a));
export const chats = (w) => request("GET", inWorld(w, "chats"));
export const getChat = (w, c) => request("GET", inWorld(w, "chats", c));
export const createChat = (w, body) => request("POST", inWorld(w, "chats"), body);
export const updateChat = (w, c, changes) => request("PATCH", inWorld(w, "chats", c), changes);
export const deleteChat = (w, c) => request("DELETE", inWorld(w, "chats", c));
export const messages = (w, c, page) => request("GET", `${inWorld(w, "chats", c)}/messages`, undefined, page);
export const sendMessage = (w, c, text) => request("POST", `${inWorld(w, "chats", c)}/messages`, { text });
export const getTurn = (w, t) => request("GET", inWorld(w, "turns", t));
export const cancelTurn = (w, t) => request("POST", `${inWorld(w, "turns", t)}/cancel`);

// Grants and policy
export const grants = (w) => request("GET", inWorld(w, "grants"));
export const revokeGrant = (id) => request("DELETE", `/api/v1/grants/${seg(id)}`);
export const policy = () => request("GET", "/api/v1/policy");
export const explain = (body) => request("POST", "/api/v1/policy/explain", body);
export const worldPolicy = (w) => request("GET", `${world(w)}/policy`);
export const setWorldPolicy = (w, text) => request("PUT", `${world(w)}/policy`, { text });
export const worldPolicyHistory = (w) => request("GET", `${world(w)}/policy/history`);
export const replayPolicy = (w, body) => request("POST", `${world(w)}/policy/replay`, body, undefined, LONG_PATIENCE_MS);
export const suggestedRule = (id) => request("GET", hold(id, "suggested-rule"));

// Tokens, webhooks, audit
export const tokens = () => request("GET", "/api/v1/tokens");
export const createToken = (body) => request("POST", "/api/v1/tokens", body);
export const revokeToken = (id) => request("DELETE", `/api/v1/tokens/${seg(id)}`);
export const webhooks = (w) => request("GET", inWorld(w, "webhooks"));
export const createWebhook = (w, body) => request("POST", inWorld(w, "webhooks"), body);
export const deleteWebhook = (id) => request("DELETE", `/api/v1/webhooks/${seg(id)}`);
export const deliveries = (id, page) => request("GET", `/api/v1/webhooks/${seg(id)}/deliveries`, undefined, page);
export const auditEvents = (params) => request("GET", "/api/v1/audit/events", undefined, params);
export const auditVerify = () => request("GET", "/api/v1/audit/verify", undefined, undefined, LONG_PATIENCE_MS);
