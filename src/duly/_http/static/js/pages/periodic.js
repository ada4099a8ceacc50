// Periodic tasks: schedule, next tick, the last run.

import { get } from "../api.js";
import { ago, badge, card, duration, h, replace, stamp, table } from "../dom.js";
import { jobLink, link, query } from "../ui.js";

function schedule(p) {
  if (p.cron) return h("span", null, h("code", null, p.cron), p.tz ? ` (${p.tz})` : "");
  if (p.every !== null && p.every !== undefined) return `every ${duration(p.every)}`;
  return "—";
}

export async function render(ctx) {
  ctx.view.appendChild(h("h1", null, "Periodic tasks"));
  const body = h("div");
  ctx.view.appendChild(body);
  const rows = [];
  let cursor = null;
  do {
    const page = await get("periodic", { limit: 500, cursor });
    rows.push(...page.periodic);
    cursor = page.next;
  } while (cursor && rows.length < 5000);
  replace(
    body,
    card(
      null,
      table(
        [
          { title: "Task", cell: (p) => link(query("jobs", { task: p.task }), p.task) },
          { title: "Schedule", cell: schedule },
          { title: "Catch up", cell: (p) => (p.catch_up ? "yes" : "no") },
          { title: "Next run", cell: (p) => h("span", null, stamp(p.next_run_at), " (", ago(p.next_run_at), ")") },
          {
            title: "Last run",
            cell: (p) => (p.last_job ? h("span", null, jobLink(p.last_job.id), " ", badge(p.last_job.status), " ", ago(p.last_job.enqueued_at)) : h("span", { class: "muted" }, "never")),
          },
        ],
        rows,
        "No periodic task is registered in this app.",
      ),
    ),
  );
}
