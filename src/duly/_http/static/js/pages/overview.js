// Overview: live outcomes per minute, queue depth, workers alive.

import { get } from "../api.js";
import { legend, lineChart } from "../charts.js";
import { card, h, num, replace, stat } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { jobTable, link } from "../ui.js";
import { depthChart } from "./queues.js";
import { alive } from "./workers.js";

// The chart's ranges (?minutes=); the API keeps counters App(stats_retention=), 24 h by default.
const RANGES = [
  [30, "30 min"],
  [180, "3 h"],
  [1440, "24 h"],
];
const SERIES = [
  ["succeeded", "Succeeded"],
  ["failed", "Failed"],
  ["retried", "Retried"],
];

// Per-minute totals over every task and queue, with empty minutes as zeros.
export function perMinute(rows, minutes) {
  const now = Math.floor(Date.now() / 60000);
  const axis = [];
  for (let m = now - minutes + 1; m <= now; m++) axis.push(m);
  const index = new Map(axis.map((m, i) => [m, i]));
  const series = SERIES.map(([cls, name]) => ({ cls, name, values: axis.map(() => 0) }));
  for (const row of rows) {
    const i = index.get(Math.floor(Date.parse(row.minute) / 60000));
    if (i === undefined) continue;
    series.forEach((line) => {
      line.values[i] += row[line.cls] || 0;
    });
  }
  return { axis, series };
}

function rangeTabs(current) {
  return h(
    "nav",
    { class: "tabs range" },
    RANGES.map(([minutes, label]) =>
      link(minutes === 30 ? "./" : `?minutes=${minutes}`, minutes === current ? h("strong", null, label) : label),
    ),
  );
}

export async function render(ctx) {
  const asked = Number(ctx.query.get("minutes"));
  const [minutes, label] = RANGES.find(([m]) => m === asked) || RANGES[0];
  ctx.view.appendChild(h("h1", null, "Overview"));
  const stats = h("div", { class: "stats", id: "overview-stats" });
  const outcomes = h("div", { id: "chart-outcomes" });
  const depth = h("div", { id: "chart-depth" });
  const depthOverTime = h("div", { id: "chart-depth-time" });
  ctx.view.appendChild(stats);
  ctx.view.appendChild(
    h(
      "div",
      { class: "columns" },
      card(`Outcomes per minute (last ${label})`, rangeTabs(minutes), outcomes, legend(SERIES.map(([cls, name]) => ({ cls, name })))),
      card("Queue depth", depth, depthOverTime),
    ),
  );
  const failures = h("div", { id: "recent-failures" });
  ctx.view.appendChild(card("Latest failures", failures));
  const samples = [];

  async function refresh() {
    const [st, qs, ws, failed] = await Promise.all([
      get("stats", { minutes: minutes }),
      get("queues", { limit: 500 }),
      get("workers", { limit: 500 }),
      get("jobs", { status: "failed", limit: 5 }),
    ]);
    replace(
      failures,
      jobTable(failed.jobs, "No failed job kept."),
      failed.next ? link("jobs?status=failed", "All failed jobs »") : null,
    );
    const { axis, series } = perMinute(st.rows, minutes);
    replace(outcomes, lineChart(axis, series, "jobs succeeded, failed and retried per minute"));
    const waiting = qs.queues.reduce((a, q) => a + q.queued + q.scheduled, 0);
    const running = qs.queues.reduce((a, q) => a + q.running, 0);
    const living = ws.workers.filter(alive).length;
    replace(
      stats,
      stat(`succeeded (${label})`, num(st.totals.succeeded), "ok"),
      stat(`failed (${label})`, num(st.totals.failed), "bad"),
      stat(`retried (${label})`, num(st.totals.retried), "warn"),
      stat("waiting", num(waiting)),
      stat("running", num(running)),
      stat("workers alive", num(living)),
    );
    replace(
      depth,
      qs.queues.length
        ? depthChart(qs.queues)
        : h("p", { class: "empty" }, "No queues yet."),
    );
    samples.push([Math.floor(Date.now() / 1000), waiting]);
    if (samples.length > 120) samples.shift();
    if (samples.length > 1) {
      replace(
        depthOverTime,
        h("h3", null, "Waiting jobs since this page opened"),
        lineChart(
          samples.map(([t]) => t / 60),
          [{ cls: "queued", name: "waiting", values: samples.map(([, v]) => v) }],
          "waiting jobs over time",
        ),
      );
    }
    ctx.view.dataset.updated = String(Date.now());
  }

  await refresh();
  const again = throttle(() => refresh().catch(() => {}), 1000);
  ctx.onLeave(subscribe(again));
  const timer = setInterval(again, 10000);
  ctx.onLeave(() => clearInterval(timer));
}
