// The dashboard's entry point: session, navigation, and the router over the pages.

import { ApiError, loadSession, logout, role } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import { connect, onState } from "./live.js";
import * as freshness from "./pages/freshness.js";
import * as groups from "./pages/groups.js";
import * as job from "./pages/job.js";
import * as jobs from "./pages/jobs.js";
import * as key from "./pages/key.js";
import * as overview from "./pages/overview.js";
import * as periodic from "./pages/periodic.js";
import * as queues from "./pages/queues.js";
import * as watches from "./pages/watches.js";
import * as workers from "./pages/workers.js";
import * as workflows from "./pages/workflows.js";

// [pattern, page, nav section]; ":name" matches one path segment, "*name" (last) the rest.
const ROUTES = [
  ["", overview, ""],
  ["queues", queues, "queues"],
  ["workers", workers, "workers"],
  ["jobs", jobs, "jobs"],
  ["jobs/:id", job, "jobs"],
  ["periodic", periodic, "periodic"],
  ["watches", watches, "watches"],
  ["groups", groups, "groups"],
  ["groups/:id", groups, "groups"],
  ["workflows", workflows, "workflows"],
  ["workflows/:id", workflows, "workflows"],
  ["freshness", freshness, "freshness"],
  ["freshness/:name", freshness, "freshness"],
  ["key/*key", key, "key"],
];

const NAV = [
  ["", "Overview"],
  ["queues", "Queues"],
  ["workers", "Workers"],
  ["jobs", "Jobs"],
  ["periodic", "Periodic"],
  ["watches", "Watches"],
  ["groups", "Groups"],
  ["workflows", "Workflows"],
  ["freshness", "Freshness"],
];

let leave = [];

function basePath() {
  return new URL(document.baseURI).pathname;
}

function match(rest) {
  const parts = rest === "" ? [] : rest.split("/");
  for (const [pattern, page, section] of ROUTES) {
    const want = pattern === "" ? [] : pattern.split("/");
    const tail = want.length && want[want.length - 1].startsWith("*");
    if (tail ? parts.length < want.length : want.length !== parts.length) continue;
    const params = {};
    let ok = true;
    want.forEach((w, i) => {
      const raw = w.startsWith("*") ? parts.slice(i).join("/") : parts[i];
      if (w.startsWith(":") || w.startsWith("*")) {
        try {
          params[w.slice(1)] = decodeURIComponent(raw);
        } catch {
          ok = false;
        }
        if (params[w.slice(1)] === "") ok = false;
      } else if (w !== raw) ok = false;
    });
    if (ok) return { page, params, section };
  }
  return null;
}

function markNav(section) {
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.section === section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

async function render() {
  for (const fn of leave) fn();
  leave = [];
  const main = document.getElementById("view");
  const view = h("div", { class: "view" });
  replace(main, view);
  const base = basePath();
  let rest = location.pathname.startsWith(base) ? location.pathname.slice(base.length) : "";
  rest = rest.replace(/\/+$/, "");
  const found = match(rest);
  if (found === null) {
    markNav(null);
    view.appendChild(h("h1", null, "Not found"));
    view.appendChild(h("p", null, "No page at this address."));
    return;
  }
  markNav(found.section);
  const ctx = {
    view,
    params: found.params,
    query: new URLSearchParams(location.search),
    onLeave: (fn) => leave.push(fn),
    navigate,
  };
  try {
    await found.page.render(ctx);
  } catch (exc) {
    const text = exc instanceof ApiError ? `${exc.message} (HTTP ${exc.status})` : String(exc);
    if (!(exc instanceof ApiError && exc.status === 401)) view.appendChild(errorBox(text));
  }
}

// Show the page at `path` (relative to the mount, e.g. "jobs?status=failed").
export function navigate(path, replaceState = false) {
  const target = new URL(path, document.baseURI);
  if (replaceState) history.replaceState(null, "", target);
  else history.pushState(null, "", target);
  render();
}

function onClick(event) {
  if (event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const a = event.target.closest("a[data-nav]");
  if (a === null) return;
  event.preventDefault();
  navigate(a.getAttribute("href"));
}

function header() {
  const nav = document.getElementById("nav");
  replace(
    nav,
    NAV.map(([path, label]) => h("a", { href: path || "./", "data-nav": "", dataset: { section: path } }, label)),
  );
  const who = document.getElementById("who");
  const live = h("span", { class: "live", id: "live-state" });
  onState((state) => {
    live.textContent = state === "live" ? "● live" : state;
    live.className = `live ${state}`;
  });
  const out = h("button", { type: "button", class: "link", id: "logout" }, "Log out");
  out.addEventListener("click", () => logout());
  replace(who, live, h("span", { class: `role role-${role()}` }, role()), out);
}

async function boot() {
  try {
    await loadSession();
  } catch (exc) {
    if (exc instanceof ApiError && exc.status === 401) return; // redirected to login
    replace(document.getElementById("view"), errorBox(`Cannot reach the API: ${exc.message}`));
    return;
  }
  document.body.dataset.role = role();
  header();
  document.addEventListener("click", onClick);
  window.addEventListener("popstate", render);
  connect();
  await render();
}

boot();
