// One job: facts, a timeline of its states, every attempt's error with its traceback, its
// arguments (secrets already "***" from the API), result, and retry / cancel (admin).

import { ApiError, get, seg } from "../api.js";
import { ago, badge, card, h, json, replace, stamp, toDate } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { actionButton, jobLink, keyLink, link, progressBar, query } from "../ui.js";

const FINISHED = new Set(["succeeded", "failed", "cancelled"]);

// The job's life as dated steps, oldest first.
export function timeline(job) {
  const steps = [{ at: job.enqueued_at, label: "enqueued", cls: "queued" }];
  if (job.scheduled_for && job.scheduled_for !== job.enqueued_at) {
    steps.push({ at: job.scheduled_for, label: "scheduled for", cls: "scheduled" });
  }
  for (const err of job.errors || []) {
    const final = err.attempt === job.attempts && job.status === "failed";
    steps.push({
      at: err.at,
      label: `attempt ${err.attempt ?? "?"} ${final ? "failed" : "failed, retrying"}`,
      detail: `${err.type}: ${err.message}`,
      cls: final ? "failed" : "retrying",
    });
  }
  if (job.started_at) steps.push({ at: job.started_at, label: `started (attempt ${job.attempts})`, cls: "running" });
  if (job.finished_at) steps.push({ at: job.finished_at, label: job.status, cls: job.status });
  else if (!FINISHED.has(job.status)) steps.push({ at: null, label: `now ${job.status}`, cls: job.status });
  const time = (x) => {
    const d = toDate(x.at);
    return d === null ? Infinity : d.getTime();
  };
  steps.sort((a, b) => time(a) - time(b));
  return steps;
}

function timelineList(job) {
  return h(
    "ol",
    { class: "timeline", id: "job-timeline" },
    timeline(job).map((step) =>
      h(
        "li",
        { class: `step ${step.cls}` },
        h("span", { class: "dot" }),
        h("span", { class: "step-label" }, step.label),
        " ",
        step.at ? stamp(step.at) : null,
        step.detail ? h("div", { class: "step-detail" }, step.detail) : null,
      ),
    ),
  );
}

function errorsCard(job) {
  const errors = job.errors && job.errors.length ? job.errors : job.error ? [job.error] : [];
  if (!errors.length) return null;
  return card(
    `Errors (${errors.length})`,
    h(
      "div",
      { id: "job-errors" },
      errors
        .slice()
        .reverse()
        .map((err) =>
          h(
            "article",
            { class: "error" },
            h("header", null, h("strong", null, `attempt ${err.attempt ?? "?"}`), " ", stamp(err.at), " ", h("code", { class: "error-type" }, err.type)),
            h("p", { class: "error-message" }, err.message),
            err.traceback ? h("details", null, h("summary", null, "traceback"), h("pre", { class: "traceback" }, err.traceback)) : null,
          ),
        ),
    ),
  );
}

function facts(job) {
  const rows = [
    ["Status", badge(job.status)],
    ...(job.progress ? [["Progress", h("span", { id: "job-progress" }, progressBar(job.progress), " ", stamp(job.progress.at))]] : []),
    ["Task", link(query("jobs", { task: job.task }), job.task)],
    ["Queue", link(query("jobs", { queue: job.queue }), job.queue)],
    ["Key", keyLink(job.key)],
    ["Attempts", `${job.attempts} of ${job.max_attempts}`],
    ["Priority", String(job.priority)],
    ["Worker", job.worker ? h("code", null, job.worker) : h("span", { class: "muted" }, "—")],
    ["Lost to crashes", String(job.lost || 0)],
    ["Enqueued", h("span", null, stamp(job.enqueued_at), " (", ago(job.enqueued_at), ")")],
    ["Scheduled for", stamp(job.scheduled_for)],
    ["Started", stamp(job.started_at)],
    ["Finished", stamp(job.finished_at)],
  ];
  return h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", null, k), h("dd", null, v)]));
}

// What this job waits for (options(after=...), a chain's previous step) and what waits for it.
function linksCard(job, dependents) {
  const after = job.after || [];
  if (!after.length && !dependents.length) return null;
  const list = (id, ids) =>
    ids.length ? h("ul", { id, class: "links" }, ids.map((i) => h("li", null, jobLink(i)))) : h("p", { id, class: "muted" }, "—");
  return card("Dependencies", h("h3", null, "Waits for"), list("job-after", after), h("h3", null, "Waited for by"), list("job-dependents", dependents));
}

export async function render(ctx) {
  const id = ctx.params.id;
  const body = h("div", { id: "job" });
  ctx.view.appendChild(body);

  async function refresh() {
    let job;
    try {
      job = await get(`jobs/${seg(id)}`);
    } catch (exc) {
      if (exc instanceof ApiError && exc.status === 404) {
        replace(body, h("h1", null, "Job not found"), h("p", null, "No job has the id ", h("code", null, id), " (unknown, or removed by retention)."));
        return;
      }
      throw exc;
    }
    const again = () => refresh().catch(() => {});
    const { dependents } = await get(`jobs/${seg(id)}/dependents`);
    const actions = h(
      "div",
      { class: "actions" },
      job.status === "failed" || job.status === "cancelled" ? actionButton("Retry", `jobs/${seg(id)}/retry`, again) : null,
      FINISHED.has(job.status) ? null : actionButton("Cancel", `jobs/${seg(id)}/cancel`, again),
    );
    replace(
      body,
      h("h1", null, job.task, " ", badge(job.status)),
      h("p", { class: "muted" }, h("code", { id: "job-id" }, job.id)),
      actions,
      h("div", { class: "columns" }, card("Details", facts(job)), card("Timeline", timelineList(job))),
      h("div", { class: "columns" }, card("Arguments", h("div", { id: "job-args" }, json({ args: job.args, kwargs: job.kwargs }))), card("Result", json(job.result))),
      linksCard(job, dependents),
      errorsCard(job),
    );
    body.dataset.status = job.status;
  }

  await refresh();
  const again = throttle(() => refresh().catch(() => {}), 500);
  ctx.onLeave(
    subscribe(
      (event) => {
        if (event.reset || event.job_id === id) again();
      },
      { progress: true },
    ),
  );
}
