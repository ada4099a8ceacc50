// Workflows: look one up by id (what `app.chain(...)` returned); its status and its steps in
// order, each with its state, what it waits for, and a link to its job page.

import { ApiError, get, seg } from "../api.js";
import { badge, card, h, replace, table } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { jobLink, link, query } from "../ui.js";

function lookupForm(ctx, value) {
  const form = h(
    "form",
    { class: "filters", id: "workflow-lookup" },
    h("input", { name: "id", placeholder: "workflow id", value: value || "", autocomplete: "off" }),
    h("button", { type: "submit" }, "Open"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = String(new FormData(form).get("id") || "").trim();
    if (id) ctx.navigate(`workflows/${seg(id)}`);
  });
  return form;
}

const STEP_COLUMNS = [
  { title: "Step", class: "num", cell: (j, i) => String(i + 1) },
  { title: "Job", cell: (j) => jobLink(j.id) },
  { title: "Task", cell: (j) => link(query("jobs", { task: j.task }), j.task) },
  { title: "Status", cell: (j) => badge(j.status) },
  { title: "Waits for", cell: (j) => (j.after && j.after.length ? j.after.map((a) => jobLink(a)) : h("span", { class: "muted" }, "—")) },
  { title: "Error", cell: (j) => (j.error ? `${j.error.type}: ${j.error.message}` : h("span", { class: "muted" }, "—")) },
];

export async function render(ctx) {
  const id = ctx.params.id;
  ctx.view.appendChild(h("h1", null, "Workflows"));
  ctx.view.appendChild(lookupForm(ctx, id));
  if (!id) {
    ctx.view.appendChild(h("p", { class: "muted" }, "A workflow's id is the id `app.chain(...)` returned."));
    return;
  }
  const body = h("div", { id: "workflow" });
  ctx.view.appendChild(body);

  async function refresh() {
    let wf;
    try {
      wf = await get(`workflows/${seg(id)}`);
    } catch (exc) {
      if (exc instanceof ApiError && exc.status === 404) {
        replace(body, h("p", null, "No workflow has this id (unknown, or removed by retention)."));
        return;
      }
      throw exc;
    }
    const rows = wf.jobs.map((j, i) => ({ ...j, index: i }));
    const columns = STEP_COLUMNS.map((c) => ({ ...c, cell: (j) => c.cell(j, j.index) }));
    replace(
      body,
      card(`Workflow ${wf.id}`, h("p", null, "Status ", h("span", { id: "workflow-status" }, badge(wf.status)), ` · ${wf.jobs.length} steps`)),
      card("Steps", h("div", { id: "workflow-steps" }, table(columns, rows, "No steps left (removed by retention)."))),
    );
    body.dataset.status = wf.status;
  }

  await refresh();
  const again = throttle(() => refresh().catch(() => {}), 1000);
  ctx.onLeave(subscribe(again));
}
