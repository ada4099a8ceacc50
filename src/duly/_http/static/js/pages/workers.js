// Workers: alive or dead by their last heartbeat, and the jobs each is running.

import { get } from "../api.js";
import { ago, badge, card, h, replace, table, toDate } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { jobLink, link, query } from "../ui.js";

// A worker is alive while its last heartbeat is younger than its lease (30 s by default).
export function alive(worker) {
  const seen = toDate(worker.last_seen);
  if (seen === null) return false;
  const lease = Number((worker.info || {}).lease) || 30;
  return (Date.now() - seen.getTime()) / 1000 <= Math.max(lease, 5);
}

export async function render(ctx) {
  ctx.view.appendChild(h("h1", null, "Workers"));
  const body = h("div");
  ctx.view.appendChild(body);

  async function refresh() {
    const [ws, running] = await Promise.all([
      get("workers", { limit: 500 }),
      get("jobs", { status: "running", limit: 500 }),
    ]);
    const byWorker = new Map();
    for (const j of running.jobs) {
      if (!byWorker.has(j.worker)) byWorker.set(j.worker, []);
      byWorker.get(j.worker).push(j);
    }
    const info = (w, name) => {
      const value = (w.info || {})[name];
      return value === undefined || value === null ? "—" : Array.isArray(value) ? value.join(", ") : String(value);
    };
    replace(
      body,
      card(
        null,
        table(
          [
            { title: "Worker", cell: (w) => h("code", null, w.id) },
            { title: "State", cell: (w) => badge(alive(w) ? "alive" : "dead") },
            { title: "Host", cell: (w) => `${info(w, "host")} (pid ${info(w, "pid")})` },
            { title: "Queues", cell: (w) => info(w, "queues") },
            { title: "Concurrency", class: "num", cell: (w) => info(w, "concurrency") },
            { title: "Started", cell: (w) => ago(w.started_at) },
            { title: "Last heartbeat", cell: (w) => ago(w.last_seen) },
            {
              title: "Running",
              cell: (w) => {
                const mine = byWorker.get(w.id) || [];
                if (!mine.length) return h("span", { class: "muted" }, "idle");
                return h("ul", { class: "inline" }, mine.map((j) => h("li", null, jobLink(j.id), " ", j.task)));
              },
            },
          ],
          ws.workers,
          "No worker has registered.",
        ),
      ),
      ws.next ? h("p", { class: "muted" }, "More workers than shown (500).") : null,
      h("p", null, link(query("jobs", { status: "running" }), "All running jobs »")),
    );
  }

  await refresh();
  const again = throttle(() => refresh().catch(() => {}), 2000);
  ctx.onLeave(subscribe(again));
  const timer = setInterval(again, 5000);
  ctx.onLeave(() => clearInterval(timer));
}
