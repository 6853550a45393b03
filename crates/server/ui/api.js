// The one way Holdpoint's pages call the public API: same-origin requests that carry the
// session cookie, with the session's CSRF token on every change, and the API's error shape
// turned into an ApiError whose message is the server's. One function per operation, named
// as in the Rust client (`holdpoint-client`); the pages never spell an `/api/v1` path.
import { PERSON_ROLES } from "./wire.js";

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

// Every request the pages make: its method and the path template of its operation in the
// OpenAPI document (`GET /api/v1/openapi.json`), `{name}` standing for a parameter. A test
// (crates/server/tests/suite/ui_wire.rs) reads this table and checks each line against the
// document, so keep it one operation a line, in this form.
const OPERATIONS = Object.freeze({
  session: ["GET", "/api/v1/session"],
  logout: ["POST", "/api/v1/logout"],
  events: ["GET", "/api/v1/events"],
  holds: ["GET", "/api/v1/holds"],
  holdCounts: ["GET", "/api/v1/holds/counts"],
  getHold: ["GET", "/api/v1/holds/{hold}"],
  decide: ["POST", "/api/v1/holds/{hold}/decision"],
  holdFile: ["GET", "/api/v1/holds/{hold}/file"],
  suggestedRule: ["GET", "/api/v1/holds/{hold}/suggested-rule"],
  decideBatch: ["POST", "/api/v1/batches/{batch}/decision"],
  worlds: ["GET", "/api/v1/worlds"],
  createWorld: ["POST", "/api/v1/worlds"],
  getWorld: ["GET", "/api/v1/worlds/{world}"],
  updateWorld: ["PATCH", "/api/v1/worlds/{world}"],
  deleteWorld: ["DELETE", "/api/v1/worlds/{world}"],
  agents: ["GET", "/api/v1/worlds/{world}/agents"],
  createAgent: ["POST", "/api/v1/worlds/{world}/agents"],
  updateAgent: ["PATCH", "/api/v1/worlds/{world}/agents/{agent}"],
  deleteAgent: ["DELETE", "/api/v1/worlds/{world}/agents/{agent}"],
  chats: ["GET", "/api/v1/worlds/{world}/chats"],
  createChat: ["POST", "/api/v1/worlds/{world}/chats"],
  getChat: ["GET", "/api/v1/worlds/{world}/chats/{chat}"],
  updateChat: ["PATCH", "/api/v1/worlds/{world}/chats/{chat}"],
  deleteChat: ["DELETE", "/api/v1/worlds/{world}/chats/{chat}"],
  messages: ["GET", "/api/v1/worlds/{world}/chats/{chat}/messages"],
  sendMessage: ["POST", "/api/v1/worlds/{world}/chats/{chat}/messages"],
  getTurn: ["GET", "/api/v1/worlds/{world}/turns/{turn}"],
  cancelTurn: ["POST", "/api/v1/worlds/{world}/turns/{turn}/cancel"],
  grants: ["GET", "/api/v1/worlds/{world}/grants"],
  revokeGrant: ["DELETE", "/api/v1/grants/{grant}"],
  policy: ["GET", "/api/v1/policy"],
  explain: ["POST", "/api/v1/policy/explain"],
  worldPolicy: ["GET", "/api/v1/worlds/{world}/policy"],
  setWorldPolicy: ["PUT", "/api/v1/worlds/{world}/policy"],
  worldPolicyHistory: ["GET", "/api/v1/worlds/{world}/policy/history"],
  replayPolicy: ["POST", "/api/v1/worlds/{world}/policy/replay"],
  tokens: ["GET", "/api/v1/tokens"],
  createToken: ["POST", "/api/v1/tokens"],
  revokeToken: ["DELETE", "/api/v1/tokens/{token}"],
  webhooks: ["GET", "/api/v1/worlds/{world}/webhooks"],
  createWebhook: ["POST", "/api/v1/worlds/{world}/webhooks"],
  deleteWebhook: ["DELETE", "/api/v1/webhooks/{webhook}"],
  deliveries: ["GET", "/api/v1/webhooks/{webhook}/deliveries"],
  notices: ["GET", "/api/v1/holds/{hold}/notices"],
  auditEvents: ["GET", "/api/v1/audit/events"],
  auditVerify: ["GET", "/api/v1/audit/verify"],
});

/** @typedef {keyof typeof OPERATIONS} Operation */

// The path of `operation` with its parameters filled in (each encoded as one segment).
function pathOf(/** @type {Operation} */ operation, params = {}) {
  return OPERATIONS[operation][1].replace(/\{([a-z_]+)\}/g, (_, name) => {
    const value = params[name];
    if (value === undefined || value === null || value === "") throw new Error(`api.js: ${operation} needs ${name}`);
    return encodeURIComponent(String(value));
  });
}

// Calls `operation` with its path parameters, body, query and patience.
async function call(/** @type {Operation} */ operation, { params = undefined, body = undefined, query = undefined, patience = PATIENCE_MS } = {}) {
  return request(OPERATIONS[operation][0], pathOf(operation, params), body, query, patience);
}

// The URL of the live event stream (`GET /api/v1/events`), for live.js's EventSource.
export const EVENTS_URL = pathOf("events");

// Session
let me = null;
export async function session() {
  const info = await call("session");
  csrf = info.csrf_token || null;
  me = info;
  return info;
}
export async function logout() {
  await call("logout");
  csrf = null;
  me = null;
}

// Whether the person signed in may decide `hold`, as the engine checks it: a person (admin or
// approver), and one of the hold's `approvers` when it names any (`Hold.approvers`: empty
// means any approver or admin). A hold the caller may not see never reaches the page.
export function mayDecide(hold) {
  if (!me || !PERSON_ROLES.includes(me.role)) return false;
  const approvers = (hold && hold.approvers) || [];
  return approvers.length === 0 || approvers.includes(me.name);
}

// Holds
export const holds = (params) => call("holds", { query: params });
export const holdCounts = () => call("holdCounts");
export const getHold = (id) => call("getHold", { params: { hold: id } });
export const decide = (id, decision) => call("decide", { params: { hold: id }, body: decision });
export const holdFile = (id) => call("holdFile", { params: { hold: id } });
export const notices = (id) => call("notices", { params: { hold: id } });
export const decideBatch = (batch, seen, decision) =>
  call("decideBatch", { params: { batch }, body: { seen, decision } });

// Worlds, agents, chats, turns
export const worlds = () => call("worlds");
export const getWorld = (w) => call("getWorld", { params: { world: w } });
export const createWorld = (body) => call("createWorld", { body });
export const updateWorld = (w, changes) => call("updateWorld", { params: { world: w }, body: changes });
export const deleteWorld = (w) => call("deleteWorld", { params: { world: w } });
export const agents = (w) => call("agents", { params: { world: w } });
export const createAgent = (w, body) => call("createAgent", { params: { world: w }, body });
export const updateAgent = (w, a, changes) => call("updateAgent", { params: { world: w, agent: a }, body: changes });
export const deleteAgent = (w, a) => call("deleteAgent", { params: { world: w, agent: a } });
export const chats = (w) => call("chats", { params: { world: w } });
export const getChat = (w, c) => call("getChat", { params: { world: w, chat: c } });
export const createChat = (w, body) => call("createChat", { params: { world: w }, body });
export const updateChat = (w, c, changes) => call("updateChat", { params: { world: w, chat: c }, body: changes });
export const deleteChat = (w, c) => call("deleteChat", { params: { world: w, chat: c } });
export const messages = (w, c, page) => call("messages", { params: { world: w, chat: c }, query: page });
export const sendMessage = (w, c, text) => call("sendMessage", { params: { world: w, chat: c }, body: { text } });
export const getTurn = (w, t) => call("getTurn", { params: { world: w, turn: t } });
export const cancelTurn = (w, t) => call("cancelTurn", { params: { world: w, turn: t } });

// Grants and policy
export const grants = (w) => call("grants", { params: { world: w } });
export const revokeGrant = (id) => call("revokeGrant", { params: { grant: id } });
export const policy = () => call("policy");
export const explain = (body) => call("explain", { body });
export const worldPolicy = (w) => call("worldPolicy", { params: { world: w } });
export const setWorldPolicy = (w, text) => call("setWorldPolicy", { params: { world: w }, body: { text } });
export const worldPolicyHistory = (w) => call("worldPolicyHistory", { params: { world: w } });
export const replayPolicy = (w, body) => call("replayPolicy", { params: { world: w }, body, patience: LONG_PATIENCE_MS });
export const suggestedRule = (id) => call("suggestedRule", { params: { hold: id } });

// Tokens, webhooks, audit
export const tokens = () => call("tokens");
export const createToken = (body) => call("createToken", { body });
export const revokeToken = (id) => call("revokeToken", { params: { token: id } });
export const webhooks = (w) => call("webhooks", { params: { world: w } });
export const createWebhook = (w, body) => call("createWebhook", { params: { world: w }, body });
export const deleteWebhook = (id) => call("deleteWebhook", { params: { webhook: id } });
export const deliveries = (id, page) => call("deliveries", { params: { webhook: id }, query: page });
export const auditEvents = (params) => call("auditEvents", { query: params });
export const auditVerify = () => call("auditVerify", { patience: LONG_PATIENCE_MS });
