// Queues: depth by state, how long the oldest ready job has waited, and the last half hour's
// outcomes per queue; an admin pauses and resumes a queue here.

import { get, seg } from "../api.js";
import { barChart } from "../charts.js";
import { ago, card, duration, h, num, replace, table, toDate } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { actionButton, link, query } from "../ui.js";

const MINUTES = 30;

function waited(q) {
  const d = toDate(q.oldest_ready_at);
  if (d === null) return h("span", { class: "muted" }, "—");
  return h("span", { title: d.toISOString() }, duration((Date.now() - d.getTime()) / 1000));
}

export function depthChart(queues) {
  return barChart(
    queues.map((q) => ({
      name: q.name,
      parts: [
        { cls: "queued", value: q.queued, label: "queued" },
        { cls: "scheduled", value: q.scheduled, label: "scheduled" },
        { cls: "running", value: q.running, label: "running" },
      ],
    })),
    "jobs per queue: queued, scheduled, running",
  );
}

export async function render(ctx) {
  ctx.view.appendChild(h("h1", null, "Queues"));
  const body = h("div");
  ctx.view.appendChild(body);
  const count = (name, status) => (q) => link(query("jobs", { queue: q.name, status }), num(q[name]));

  async function refresh() {
    const [qs, st] = await Promise.all([get("queues", { limit: 500 }), get("stats", { minutes: MINUTES })]);
    const done = new Map();
    for (const row of st.rows) {
      const d = done.get(row.queue) || { succeeded: 0, failed: 0, retried: 0 };
      d.succeeded += row.succeeded;
      d.failed += row.failed;
      d.retried += row.retried;
      done.set(row.queue, d);
    }
    const outcome = (name) => (q) => num((done.get(q.name) || {})[name] || 0);
    const state = (q) =>
      h(
        "span",
        { class: "queue-state", "data-queue": q.name },
        h("span", { class: q.paused ? "badge status-paused" : "muted" }, q.paused ? "paused" : "running"),
        " ",
        actionButton(q.paused ? "Resume" : "Pause", `queues/${seg(q.name)}/${q.paused ? "resume" : "pause"}`, () =>
          refresh().catch(() => {}),
        ),
      );
    replace(
      body,
      qs.queues.length ? card("Depth", depthChart(qs.queues)) : null,
      card(
        null,
        table(
          [
            { title: "Queue", cell: (q) => link(query("jobs", { queue: q.name }), q.name) },
            { title: "State", cell: state },
            { title: "Queued", class: "num", cell: count("queued", "queued") },
            { title: "Parked (gated)", class: "num", cell: (q) => num(q.parked) },
            { title: "Scheduled", class: "num", cell: count("scheduled", "scheduled") },
            { title: "Running", class: "num", cell: count("running", "running") },
            { title: "Oldest ready job waiting", cell: waited },
            { title: "Since", cell: (q) => ago(q.oldest_ready_at) },
            { title: `Succeeded (${MINUTES} min)`, class: "num", cell: outcome("succeeded") },
            { title: `Failed (${MINUTES} min)`, class: "num", cell: outcome("failed") },
            { title: `Retried (${MINUTES} min)`, class: "num", cell: outcome("retried") },
          ],
          qs.queues,
          "No queue has jobs.",
        ),
      ),
    );
  }

  await refresh();
  const again = throttle(() => refresh().catch(() => {}), 1000);
  ctx.onLeave(subscribe(again));
  const timer = setInterval(again, 10000);
  ctx.onLeave(() => clearInterval(timer));
}
