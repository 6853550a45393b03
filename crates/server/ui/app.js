// The web interface's entry point: who is signed in, the header, and which page a path shows.
// Each page is a module with `render(main, params, me)`; it may return a function that the
// router calls when the page is left (to stop timers and live listeners).
import { logout, session } from "./api.js";
import { problem, replace } from "./dom.js";
import { ready, signedInAs } from "./live.js";
import { Role } from "./wire.js";

// Path patterns, as in the server's `ui::PAGES`, and the module and its export for each.
/** @type {Array<[RegExp, string, string]>} */
const ROUTES = [
  [/^\/$/, "inbox.js", "inbox"],
  [/^\/holds\/([^/]+)$/, "hold.js", "hold"],
  [/^\/worlds$/, "chats.js", "worlds"],
  [/^\/worlds\/([^/]+)$/, "chats.js", "world"],
  [/^\/worlds\/([^/]+)\/chats\/([^/]+)$/, "chats.js", "chat"],
  [/^\/worlds\/([^/]+)\/policy$/, "policy.js", "worldPolicy"],
  [/^\/worlds\/([^/]+)\/policy\/from\/([^/]+)$/, "policy.js", "suggestRule"],
  [/^\/manage$/, "manage.js", "manage"],
  [/^\/manage\/([^/]+)$/, "manage.js", "manage"],
];

const main = document.getElementById("page");
const who = document.getElementById("who");
const signOut = /** @type {HTMLButtonElement} */ (document.getElementById("sign-out"));
let me = null;
let leave = null;

function signIn() {
  location.assign("/signin");
}

async function show(path) {
  if (leave) leave();
  leave = null;
  for (const nav of document.querySelectorAll("header [data-nav]")) {
    const current = nav.getAttribute("href") === "/" ? path === "/" || path.startsWith("/holds/") : path.startsWith(nav.getAttribute("href"));
    if (current) nav.setAttribute("aria-current", "page");
    else nav.removeAttribute("aria-current");
  }
  const route = ROUTES.find(([pattern]) => pattern.test(path));
  if (!route) return replace(main, problem(new Error(`No page here: ${path}`)));
  const [pattern, file, name] = route;
  const params = pattern.exec(path).slice(1).map(decodeURIComponent);
  try {
    const [page] = await Promise.all([import(`./${file}`), ready()]);
    replace(main);
    leave = (await page[name](main, params, me)) || null;
  } catch (error) {
    if (error.status === 401) return signIn();
    replace(main, problem(error));
  }
}

// Follows a link to another page without reloading: the live stream and the session stay.
export function go(path) {
  history.pushState(null, "", path);
  show(path);
  main.focus({ preventScroll: true });
  window.scrollTo(0, 0);
}

document.addEventListener("click", (event) => {
  const link = /** @type {HTMLAnchorElement | null} */ (/** @type {Element} */ (event.target).closest("a[href]"));
  if (!link || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey || link.target) return;
  const href = link.getAttribute("href");
  if (!href.startsWith("/") || href.startsWith("//") || href.startsWith("/api/") || href.startsWith("/ui/")) return;
  event.preventDefault();
  go(href);
});

window.addEventListener("popstate", () => show(location.pathname));

signOut.addEventListener("click", async () => {
  signOut.disabled = true;
  try {
    await logout();
    signIn();
  } catch (error) {
    signOut.disabled = false;
    replace(main, problem(error));
  }
});

async function start() {
  try {
    me = await session();
  } catch (error) {
    if (error.status === 401) return signIn();
    return replace(main, problem(error));
  }
  // Tabs share one live stream, among tabs of the same person only.
  signedInAs(`${me.role}:${me.world || ""}:${me.name}`);
  // A credential limited to one world says so; the world's name is on the worlds' pages.
  who.textContent = me.world ? `${me.name} (${me.role}, one world)` : `${me.name} (${me.role})`;
  signOut.hidden = false;
  document.getElementById("nav-manage").hidden = me.role !== Role.Admin;
  show(location.pathname);
}

start();
