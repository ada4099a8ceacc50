// Groups: look one up by id; its progress, and its members (they share the group's key).

import { ApiError, get, seg } from "../api.js";
import { progress } from "../charts.js";
import { card, h, num, replace, stamp, stat } from "../dom.js";
import { subscribe, throttle } from "../live.js";
import { jobLink, jobTable, keyLink, link } from "../ui.js";

function lookupForm(ctx, value) {
  const form = h(
    "form",
    { class: "filters", id: "group-lookup" },
    h("input", { name: "id", placeholder: "group id", value: value || "", autocomplete: "off" }),
    h("button", { type: "submit" }, "Open"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = String(new FormData(form).get("id") || "").trim();
    if (id) ctx.navigate(`groups/${seg(id)}`);
  });
  return form;
}

export async function render(ctx) {
  const id = ctx.params.id;
  ctx.view.appendChild(h("h1", null, "Groups"));
  ctx.view.appendChild(lookupForm(ctx, id));
  if (!id) {
    ctx.view.appendChild(h("p", { class: "muted" }, "A group's id is the id `app.group(...)` returned; its members carry the group's key, so the key page lists them too."));
    return;
  }
  const body = h("div", { id: "group" });
  ctx.view.appendChild(body);

  async function refresh() {
    let g;
    try {
      g = await get(`groups/${seg(id)}`);
    } catch (exc) {
      if (exc instanceof ApiError && exc.status === 404) {
        replace(body, h("p", null, "No group has this id (unknown, or removed by retention)."));
        return;
      }
      throw exc;
    }
    const members = g.key ? await get("jobs", { key: g.key, limit: 100 }) : { jobs: [] };
    const done = g.succeeded + g.failed + g.cancelled;
    replace(
      body,
      card(
        `Group ${g.id}`,
        h(
          "div",
          { class: "stats" },
          stat("members", num(g.total)),
          stat("succeeded", num(g.succeeded), "ok"),
          stat("failed", num(g.failed), "bad"),
          stat("cancelled", num(g.cancelled)),
          stat("pending", num(g.pending), "warn"),
        ),
        progress(
          [
            { cls: "succeeded", value: g.succeeded },
            { cls: "failed", value: g.failed },
            { cls: "cancelled", value: g.cancelled },
          ],
          g.total,
        ),
        h(
          "p",
          null,
          `${done} of ${g.total} settled · created `,
          stamp(g.created_at),
          g.completed_at ? h("span", null, " · completed ", stamp(g.completed_at)) : " · not complete",
          g.callback_job_id ? h("span", null, " · on_complete job ", jobLink(g.callback_job_id)) : null,
          " · key ",
          keyLink(g.key),
        ),
      ),
      card("Members", jobTable(members.jobs), members.next && g.key ? link(`key/${seg(g.key)}`, "All members »") : null),
    );
  }

  await refresh();
  const again = throttle(() => refresh().catch(() => {}), 1000);
  ctx.onLeave(subscribe(again));
}
