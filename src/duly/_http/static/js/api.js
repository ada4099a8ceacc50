// The HTTP API (issue 15), relative to the page's <base href>: the page works wherever the
// ASGI app is mounted. The session cookie is HttpOnly; POSTs carry the CSRF value from
// GET api/v1/session in the X-Duly-CSRF header.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const session = { role: null, csrf: null };

export function role() {
  return session.role;
}

export function isAdmin() {
  return session.role === "admin";
}

export function url(path, params) {
  const u = new URL(path, document.baseURI);
  for (const [name, value] of Object.entries(params || {})) {
    if (value !== null && value !== undefined && value !== "") u.searchParams.set(name, value);
  }
  return u.toString();
}

// To the login page, coming back here after (`next` is a path relative to the mount).
function toLogin() {
  const base = new URL(document.baseURI).pathname;
  const rest = location.pathname.startsWith(base) ? location.pathname.slice(base.length) : "";
  location.assign(url("login", { next: `/${rest}${location.search}` }));
}

async function request(method, path, params) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-Duly-CSRF"] = session.csrf || "";
  let response;
  try {
    response = await fetch(url(path, params), { method, headers, credentials: "same-origin" });
  } catch (exc) {
    throw new ApiError(0, `the server did not answer (${exc.message})`);
  }
  if (response.status === 401) {
    toLogin();
    throw new ApiError(401, "not logged in");
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = body && typeof body.error === "string" ? body.error : `HTTP ${response.status}`;
    throw new ApiError(response.status, message);
  }
  return body;
}

export function get(path, params) {
  return request("GET", `api/v1/${path}`, params);
}

export function post(path, params) {
  return request("POST", `api/v1/${path}`, params);
}

// Any other change (PUT, DELETE) of the API, with the CSRF header like a POST.
export function send(method, path, params) {
  return request(method, `api/v1/${path}`, params);
}

// Who is logged in: role "read" or "admin", and the CSRF value for POSTs.
export async function loadSession() {
  const body = await get("session");
  session.role = body.role;
  session.csrf = body.csrf;
  return session;
}

export async function logout() {
  await fetch(url("logout"), {
    method: "POST",
    headers: { "X-Duly-CSRF": session.csrf || "" },
    credentials: "same-origin",
  });
  location.assign(url("login"));
}

// Path segments go into URLs encoded, whatever they hold.
export function seg(value) {
  return encodeURIComponent(String(value));
}
