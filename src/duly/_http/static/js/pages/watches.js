// Watches: the active ones, and the history of ended ones with their reasons; each watch's
// last checks (start, duration, outcome) open under its "Checks" cell.

import { get } from "../api.js";
import { ago, badge, card, duration, h, replace, table } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { jobLink, link, pager, query } from "../ui.js";

export function argsText(w) {
  const parts = (w.args || []).map((a) => JSON.stringify(a));
  for (const [name, value] of Object.entries(w.kwargs || {})) parts.push(`${name}=${JSON.stringify(value)}`);
  return parts.join(", ");
}

// The watches whose checks are open: kept open across the live refreshes.
const openChecks = new Set();

function took(seconds) {
  return seconds < 1 ? `${Math.round(seconds * 1000)} ms` : duration(seconds);
}

export function checksCell(w) {
  const history = w.history || [];
  if (!history.length) return String(w.checks);
  const rows = history
    .slice()
    .reverse()
    .map((c) =>
      h("tr", { class: "check", dataset: { outcome: c.outcome } }, h("td", null, ago(c.at)), h("td", { class: "num" }, took(c.seconds)), h("td", null, badge(c.outcome))),
    );
  return h(
    "details",
    {
      class: "checks",
      open: openChecks.has(w.job_id),
      ontoggle: (event) => (event.target.open ? openChecks.add(w.job_id) : openChecks.delete(w.job_id)),
    },
    h("summary", null, `${w.checks} · last ${history[history.length - 1].outcome}`),
    h("table", { class: "grid checks" }, h("thead", null, h("tr", null, h("th", null, "Check"), h("th", { class: "num" }, "Took"), h("th", null, "Outcome"))), h("tbody", null, rows)),
  );
}

export const WATCH_COLUMNS = [
  { title: "Watch", cell: (w) => w.watch },
  { title: "Arguments", cell: (w) => h("code", null, argsText(w)) },
  { title: "Job", cell: (w) => jobLink(w.job_id) },
  { title: "State", cell: (w) => badge(w.state) },
  { title: "Reason", cell: (w) => w.reason || h("span", { class: "muted" }, "—") },
  { title: "Checks", class: "num", cell: checksCell },
  { title: "Started", cell: (w) => ago(w.started_at) },
  { title: "Last check", cell: (w) => ago(w.last_check) },
  { title: "Next check", cell: (w) => ago(w.next_check) },
  { title: "Ended", cell: (w) => ago(w.ended_at) },
];

export async function render(ctx) {
  const active = ctx.query.get("active") !== "false";
  const before = ctx.query.get("before") || "";
  const watch = ctx.query.get("watch") || "";
  ctx.view.appendChild(h("h1", null, "Watches"));
  ctx.view.appendChild(
    h(
      "nav",
      { class: "tabs" },
      link(query("watches", { watch }), active ? h("strong", null, "Active") : "Active"),
      link(query("watches", { watch, active: "false" }), active ? "History" : h("strong", null, "History")),
    ),
  );
  const body = h("div");
  ctx.view.appendChild(body);

  async function refresh() {
    const page = await get("watches", { active: active ? "true" : "false", watch, before, limit: 50 });
    replace(
      body,
      card(null, table(WATCH_COLUMNS, page.watches, active ? "No active watch." : "No ended watch kept.")),
      pager(page.next ? query("watches", { watch, active: active ? "" : "false", before: page.next }) : null, before ? query("watches", { watch, active: active ? "" : "false" }) : null),
    );
  }

  await refresh();
  if (!before) {
    const again = throttle(() => refresh().catch(() => {}), 2000);
    ctx.onLeave(subscribe(again));
  }
}
