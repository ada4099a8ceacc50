// Queues: depth by state and how long the oldest ready job has waited.

import { get } from "../api.js";
import { ago, card, h, num, replace, table, toDate, duration } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { link, query } from "../ui.js";

function waited(q) {
  const d = toDate(q.oldest_ready_at);
  if (d === null) return h("span", { class: "muted" }, "—");
  return h("span", { title: d.toISOString() }, duration((Date.now() - d.getTime()) / 1000));
}

export async function render(ctx) {
  ctx.view.appendChild(h("h1", null, "Queues"));
  const body = h("div");
  ctx.view.appendChild(body);
  const count = (name, status) => (q) => link(query("jobs", { queue: q.name, status }), num(q[name]));

  async function refresh() {
    const qs = await get("queues", { limit: 500 });
    replace(
      body,
      card(
        null,
        table(
          [
            { title: "Queue", cell: (q) => link(query("jobs", { queue: q.name }), q.name) },
            { title: "Queued", class: "num", cell: count("queued", "queued") },
            { title: "Parked (gated)", class: "num", cell: (q) => num(q.parked) },
            { title: "Scheduled", class: "num", cell: count("scheduled", "scheduled") },
            { title: "Running", class: "num", cell: count("running", "running") },
            { title: "Oldest ready job waiting", cell: waited },
            { title: "Since", cell: (q) => ago(q.oldest_ready_at) },
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
