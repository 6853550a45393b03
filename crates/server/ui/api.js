// The one way Holdpoint's pages call the public API: same-origin requests that carry the
// session cookie, with the session's CSRF token on every change, and the API's error shape
// turned into an Error whose message is the server's.

let csrf = null;

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function request(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD" && csrf) headers["X-CSRF-Token"] = csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || "error", error.message || response.statusText);
  }
  return data;
}

// Who is signed in; keeps the CSRF token for later changes.
export async function session() {
  const info = await request("GET", "/api/v1/session");
  csrf = info.csrf_token || null;
  return info;
}

export async function logout() {
  await request("POST", "/api/v1/logout");
  csrf = null;
}
