// Periodic schedules: the decorated ones (@app.periodic) and the stored ones (app.schedule),
// their next and last tick, the ticks skipped while the previous job still ran, and (admins)
// a button removing a stored one.

import { get, seg } from "../api.js";
import { ago, badge, card, duration, h, num, replace, stamp, table } from "../dom.js";
import { actionButton, jobLink, link, query } from "../ui.js";

function schedule(p) {
  if (p.cron) return h("span", null, h("code", null, p.cron), p.tz ? ` (${p.tz})` : "");
  if (p.every !== null && p.every !== undefined) return `every ${duration(p.every)}`;
  return "—";
}

function lastTick(p) {
  if (!p.last_tick) return h("span", { class: "muted" }, "never");
  const job = p.last_job_id ? h("span", null, jobLink(p.last_job_id), " ", p.last_status ? badge(p.last_status) : "") : null;
  return h("span", null, job, " ", ago(p.last_tick));
}

function skipped(p) {
  if (!p.skipped) return h("span", { class: "muted skipped", dataset: { skipped: "0" } }, p.overlap === "skip" ? "none" : "— (queued)");
  return h(
    "span",
    { class: "skipped", dataset: { skipped: String(p.skipped) }, title: `latest skipped tick: ${p.last_skipped_tick}` },
    `${num(p.skipped)} skipped, last `,
    ago(p.last_skipped_tick),
  );
}

export async function render(ctx) {
  ctx.view.appendChild(h("h1", null, "Periodic schedules"));
  const body = h("div");
  ctx.view.appendChild(body);

  async function refresh() {
    const rows = [];
    let cursor = null;
    do {
      const page = await get("schedules", { limit: 500, cursor });
      rows.push(...page.schedules);
      cursor = page.next;
    } while (cursor && rows.length < 5000);
    replace(
      body,
      card(
        null,
        table(
          [
            { title: "Name", cell: (p) => h("span", { class: "schedule-name", dataset: { name: p.name, kind: p.kind } }, p.name) },
            { title: "Kind", cell: (p) => p.kind },
            { title: "Task", cell: (p) => link(query("jobs", { task: p.task }), p.task) },
            { title: "Schedule", cell: schedule },
            { title: "Next tick", cell: (p) => h("span", null, stamp(p.next_tick), " (", ago(p.next_tick), ")") },
            { title: "Last tick", cell: lastTick },
            { title: "Overlapping ticks", cell: skipped },
            {
              title: "",
              cell: (p) => (p.kind === "stored" ? actionButton("Remove", `schedules/${seg(p.name)}`, () => refresh(), null, "DELETE") : null),
            },
          ],
          rows,
          "No periodic task is registered in this app, and no schedule is stored.",
        ),
      ),
    );
  }

  await refresh();
}
