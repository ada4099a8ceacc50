// The entity page: everything about one key — its jobs (every state, newest first), its
// watches, and its scope in every freshness (with that scope's sync jobs).

import { ApiError, get, seg } from "../api.js";
import { card, h, replace, table } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { jobTable, pager, query } from "../ui.js";
import { scopeColumns } from "./freshness.js";
import { WATCH_COLUMNS } from "./watches.js";

// A watch belongs to a key when its job's key is that key or one of its arguments is it
// (a watch's own key is "<task>:<its arguments as JSON>").
export function watchOf(key) {
  return (w) => w.key === key || (w.args || []).includes(key) || Object.values(w.kwargs || {}).includes(key);
}

async function watchesOf(key) {
  const rows = [];
  for (const active of ["true", "false"]) {
    const page = await get("watches", { key, active, limit: 500 });
    rows.push(...page.watches.filter(watchOf(key)));
  }
  return rows;
}

// The scope named `key` of freshness `name`, or null.
async function scopeOf(name, key) {
  try {
    return (await get(`freshness/${seg(name)}/scopes/${seg(key)}`)).scope;
  } catch (exc) {
    // 400: this key cannot be a scope (too long, control characters); 404: no such freshness.
    if (exc instanceof ApiError && exc.status === 400) return null;
    if (!(exc instanceof ApiError && exc.status === 404)) throw exc;
    if (exc.message !== "no such route") return null;
  }
  // A server without the one-scope route: look through the first scopes (stalest first).
  const page = await get(`freshness/${seg(name)}/scopes`, { limit: 500 });
  return page.scopes.find((sc) => sc.scope === key) || null;
}

async function scopesOf(key) {
  const names = await get("freshness", { limit: 500 });
  const found = await Promise.all(names.freshness.map(async (f) => ({ name: f.name, scope: await scopeOf(f.name, key) })));
  // A scope never seen reads as "never": only the ones with a history belong here.
  return found.filter(({ scope: sc }) => sc && (sc.state !== "never" || sc.syncing || sc.requested_by || sc.failures));
}

export async function render(ctx) {
  const key = ctx.params.key;
  const before = ctx.query.get("before") || "";
  ctx.view.appendChild(h("h1", null, "Key ", h("code", { id: "entity-key" }, key)));
  const jobs = h("div", { id: "key-jobs" });
  const watches = h("div", { id: "key-watches" });
  const scopes = h("div", { id: "key-scopes" });
  ctx.view.appendChild(card("Jobs", jobs));
  ctx.view.appendChild(card("Watches", watches));
  ctx.view.appendChild(card("Freshness", scopes));

  async function refresh() {
    const [page, ws, sc] = await Promise.all([get("jobs", { key, before, limit: 50 }), watchesOf(key), scopesOf(key)]);
    replace(
      jobs,
      jobTable(page.jobs, "No job has this key."),
      pager(page.next ? query(`key/${seg(key)}`, { before: page.next }) : null, before ? `key/${seg(key)}` : null),
    );
    replace(watches, table(WATCH_COLUMNS.filter((c) => c.title !== "Ended"), ws, "No watch for this key."));
    const again = () => refresh().catch(() => {});
    replace(
      scopes,
      sc.length
        ? sc.map(({ name, scope }) =>
            h("div", { class: "scope" }, h("h3", null, name), table(scopeColumns(name, again).filter((c) => c.title !== "Scope"), [scope])),
          )
        : h("p", { class: "empty" }, "No freshness tracks this key."),
    );
    ctx.view.dataset.updated = String(Date.now());
  }

  await refresh();
  if (!before) {
    const again = throttle(() => refresh().catch(() => {}), 1000);
    ctx.onLeave(subscribe((event) => {
      if (event.reset || event.key === key || (event.key || "").endsWith(`:${key}`)) again();
    }));
  }
}
