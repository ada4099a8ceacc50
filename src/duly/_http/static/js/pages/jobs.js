// Jobs: filter by status / task / queue / key, look up by id, page with the API's cursor
// (`before=`), and retry or cancel every job matching the filter (admin).

import { ApiError, get, isAdmin, post } from "../api.js";
import { h, replace } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { jobTable, pager, query } from "../ui.js";

const STATUSES = ["", "scheduled", "queued", "running", "retrying", "succeeded", "failed", "cancelled"];
const FILTERS = ["status", "task", "queue", "key"];

function filtersOf(q) {
  const f = {};
  for (const name of FILTERS) f[name] = q.get(name) || "";
  return f;
}

function filterForm(ctx, current) {
  const select = h(
    "select",
    { name: "status", id: "filter-status" },
    STATUSES.map((st) => h("option", { value: st, selected: st === current.status }, st || "any status")),
  );
  const input = (name, placeholder) =>
    h("input", { name, id: `filter-${name}`, placeholder, value: current[name], autocomplete: "off" });
  const form = h(
    "form",
    { class: "filters", id: "job-filters" },
    select,
    input("task", "task"),
    input("queue", "queue"),
    input("key", "key"),
    h("button", { type: "submit" }, "Filter"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next = {};
    for (const name of FILTERS) next[name] = String(data.get(name) || "").trim();
    ctx.navigate(query("jobs", next));
  });
  const lookup = h("form", { class: "filters", id: "job-lookup" }, h("input", { name: "id", placeholder: "job id", id: "lookup-id", autocomplete: "off" }), h("button", { type: "submit" }, "Open"));
  lookup.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = String(new FormData(lookup).get("id") || "").trim();
    if (id) ctx.navigate(`jobs/${encodeURIComponent(id)}`);
  });
  return h("div", { class: "toolbar" }, form, lookup);
}

// "Retry all matching failed jobs" / "Cancel all matching queued jobs": every job of the
// filter, confirmed by a second click (admin only).
const BULK = {
  retry: { statuses: ["failed", "cancelled"], path: "jobs/retry", count: "retried", verb: "retried", doing: "retrying…" },
  cancel: {
    statuses: ["scheduled", "queued", "running", "retrying"],
    path: "jobs/cancel",
    count: "cancelled",
    verb: "cancelled",
    doing: "cancelling…",
  },
};

function bulkAction(action, current, done) {
  const spec = BULK[action];
  if (!isAdmin() || !spec.statuses.includes(current.status)) return null;
  const label = `${action === "retry" ? "Retry" : "Cancel"} all matching ${current.status} jobs`;
  const note = h("span", { class: "action-note", role: "status" });
  const button = h("button", { type: "button", class: "action", id: `bulk-${action}` }, label);
  let armed = false;
  button.addEventListener("click", async () => {
    if (!armed) {
      armed = true;
      button.textContent = "Click again to confirm";
      return;
    }
    button.disabled = true;
    note.textContent = spec.doing;
    try {
      const body = await post(spec.path, current);
      note.textContent = `${body[spec.count]} job(s) ${spec.verb}`;
      done();
    } catch (exc) {
      note.textContent = exc instanceof ApiError ? exc.message : String(exc);
    } finally {
      armed = false;
      button.disabled = false;
      button.textContent = label;
    }
  });
  return h("div", { class: "bulk" }, button, note);
}

export async function render(ctx) {
  const current = filtersOf(ctx.query);
  const before = ctx.query.get("before") || "";
  ctx.view.appendChild(h("h1", null, "Jobs"));
  ctx.view.appendChild(filterForm(ctx, current));
  const list = h("div", { id: "job-list", class: "card" });
  const bulk = h("div");
  ctx.view.appendChild(bulk);
  ctx.view.appendChild(list);

  async function refresh() {
    const started = performance.now();
    const body = await get("jobs", { ...current, before, limit: 50 });
    replace(
      list,
      jobTable(body.jobs),
      pager(body.next ? query("jobs", { ...current, before: body.next }) : null, before ? query("jobs", current) : null),
    );
    list.dataset.renderMs = String(Math.round(performance.now() - started));
    ctx.view.dataset.updated = String(Date.now());
  }

  const again = () => refresh().catch(() => {});
  replace(bulk, bulkAction("retry", current, again), bulkAction("cancel", current, again));
  await refresh();
  if (!before) {
    // The first page follows new jobs live; older pages stay put while you read them.
    const again = throttle(() => refresh().catch(() => {}), 1000);
    ctx.onLeave(subscribe(again, { progress: true })); // bars of running jobs move too
  }
}
