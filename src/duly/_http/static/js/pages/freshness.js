// Freshness: every freshness with its count of stale scopes; a freshness's scopes, stalest
// first, with "refresh now" (admin).

import { get, seg } from "../api.js";
import { ago, badge, card, h, replace, table } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { actionButton, jobLink, keyLink, link, pager, query } from "../ui.js";

export function score(sc) {
  if (sc.score === null || sc.score === undefined) return "never synced";
  return `${(sc.score * 100).toFixed(0)}% of max staleness`;
}

export function scopeColumns(name, done) {
  return [
    { title: "Scope", cell: (sc) => keyLink(sc.scope) },
    { title: "State", cell: (sc) => badge(sc.state) },
    { title: "Staleness", cell: score },
    { title: "Last synced", cell: (sc) => ago(sc.last_synced_at) },
    { title: "Syncing", cell: (sc) => (sc.job ? jobLink(sc.job) : sc.syncing ? "yes" : "no") },
    { title: "Failures", class: "num", cell: (sc) => String(sc.failures) },
    { title: "Last error", cell: (sc) => sc.last_error || h("span", { class: "muted" }, "—") },
    { title: "Next due", cell: (sc) => ago(sc.next_due) },
    { title: "", cell: (sc) => actionButton("Refresh now", `freshness/${seg(name)}/scopes/${seg(sc.scope)}/refresh`, done) },
  ];
}

async function list(ctx) {
  ctx.view.appendChild(h("h1", null, "Freshness"));
  const page = await get("freshness", { limit: 500 });
  ctx.view.appendChild(
    card(
      null,
      table(
        [
          { title: "Freshness", cell: (f) => link(`freshness/${seg(f.name)}`, f.name) },
          { title: "Sync task", cell: (f) => link(query("jobs", { task: f.task }), f.task) },
          { title: "Stale scopes", class: "num", cell: (f) => (f.stale ? badge(`${f.stale} stale`) : "0") },
        ],
        page.freshness,
        "No freshness is declared in this app.",
      ),
    ),
  );
}

async function scopes(ctx, name) {
  const stale = ctx.query.get("stale") === "true";
  const cursor = ctx.query.get("cursor") || "";
  ctx.view.appendChild(h("h1", null, "Freshness ", h("code", null, name)));
  ctx.view.appendChild(
    h("nav", { class: "tabs" }, link(`freshness/${seg(name)}`, "All scopes"), link(query(`freshness/${seg(name)}`, { stale: "true" }), "Stale only")),
  );
  const body = h("div");
  ctx.view.appendChild(body);
  async function refresh() {
    const page = await get(`freshness/${seg(name)}/scopes`, { stale: stale ? "true" : "", cursor, limit: 50 });
    replace(
      body,
      card("Scopes, stalest first", table(scopeColumns(name, () => refresh().catch(() => {})), page.scopes, "No scope yet.")),
      pager(page.next ? query(`freshness/${seg(name)}`, { stale: stale ? "true" : "", cursor: page.next }) : null, cursor ? query(`freshness/${seg(name)}`, { stale: stale ? "true" : "" }) : null),
    );
  }
  await refresh();
  const again = throttle(() => refresh().catch(() => {}), 2000);
  ctx.onLeave(subscribe(again));
}

export async function render(ctx) {
  if (ctx.params.name) await scopes(ctx, ctx.params.name);
  else await list(ctx);
}
