// Pieces several pages share: links inside the page, the jobs table, the pager, actions.

import { ApiError, isAdmin, post, send, seg } from "./api.js";
import { ago, badge, h, table } from "./dom.js";

// A link to a page of the dashboard; `path` is relative to the mount ("jobs/<id>").
export function link(path, ...children) {
  return h("a", { href: path, "data-nav": "" }, children);
}

export function jobLink(id) {
  return link(`jobs/${seg(id)}`, h("code", null, id));
}

export function keyLink(key) {
  if (key === null || key === undefined) return h("span", { class: "muted" }, "—");
  return link(`key/${seg(key)}`, key);
}

export function query(path, params) {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") q.set(name, value);
  }
  const text = q.toString();
  return text ? `${path}?${text}` : path;
}

// A job's last reported progress as a bar (the native <progress>: no inline style under the
// dashboard's CSP) with its percentage and message; "—" when it never reported one.
export function progressBar(progress) {
  if (!progress) return h("span", { class: "muted" }, "—");
  const percent = `${Math.round(progress.fraction * 100)}%`;
  const label = progress.message ? `${percent} ${progress.message}` : percent;
  return h(
    "span",
    { class: "progress", title: label },
    h("progress", { value: String(progress.fraction), max: "1", "aria-label": label }),
    " ",
    h("span", { class: "progress-label" }, label),
  );
}

export const JOB_COLUMNS = [
  { title: "Job", cell: (j) => jobLink(j.id) },
  { title: "Task", cell: (j) => link(query("jobs", { task: j.task }), j.task) },
  { title: "Queue", cell: (j) => link(query("jobs", { queue: j.queue }), j.queue) },
  { title: "Status", cell: (j) => badge(j.status) },
  { title: "Key", cell: (j) => keyLink(j.key) },
  { title: "Attempts", class: "num", cell: (j) => `${j.attempts}/${j.max_attempts}` },
  { title: "Enqueued", cell: (j) => ago(j.enqueued_at) },
  { title: "Finished", cell: (j) => ago(j.finished_at) },
];

// The last error, one line (the job page has all of them, with tracebacks).
function lastError(j) {
  if (!j.error) return h("span", { class: "muted" }, "—");
  const text = `${j.error.type}: ${j.error.message}`;
  return h("span", { class: "error-line", title: text }, text.length > 90 ? `${text.slice(0, 89)}…` : text);
}

export function jobTable(jobs, empty) {
  let columns = JOB_COLUMNS;
  if (jobs.some((j) => j.progress)) columns = [...columns, { title: "Progress", cell: (j) => progressBar(j.progress) }];
  if (jobs.some((j) => j.error)) columns = [...columns, { title: "Last error", cell: lastError }];
  return table(columns, jobs, empty || "No jobs match.");
}

export function pager(nextHref, firstHref) {
  return h(
    "nav",
    { class: "pager" },
    firstHref ? link(firstHref, "« Newest") : null,
    nextHref ? link(nextHref, "Older »") : h("span", { class: "muted" }, "end of the list"),
  );
}

// An admin button that POSTs (or sends `method`), shows the outcome and calls done() on
// success. Read tokens get no button at all (and the API refuses them anyway: 403).
export function actionButton(label, path, done, params, method = "POST") {
  if (!isAdmin()) return null;
  const note = h("span", { class: "action-note", role: "status" });
  const button = h("button", { type: "button", class: "action", "data-action": label.toLowerCase() }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    note.textContent = "…";
    try {
      const body = method === "POST" ? await post(path, params) : await send(method, path, params);
      note.textContent = "done";
      if (done) done(body);
    } catch (exc) {
      note.textContent = exc instanceof ApiError ? exc.message : String(exc);
    } finally {
      button.disabled = false;
    }
  });
  return h("span", { class: "action-wrap" }, button, note);
}
