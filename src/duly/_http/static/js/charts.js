// Small SVG charts, drawn with createElementNS only (no library: see docs/dashboard.md).

import { h, s } from "./dom.js";

const W = 640;
const H = 180;
const PAD = { left: 40, right: 10, top: 10, bottom: 22 };

// The axis top: 4 gridline steps of 1, 2 or 5 times a power of ten.
function niceMax(value) {
  const raw = Math.max(1, value / 4);
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const step of [1, 2, 5, 10]) {
    if (step * power >= raw) return 4 * step * power;
  }
  return 40 * power;
}

function clock(minute) {
  const d = new Date(minute * 60000);
  return `${String(d.getUTCHours()).padStart(2, "0")}:${String(d.getUTCMinutes()).padStart(2, "0")}`;
}

// Lines over time. minutes: [POSIX minute, ...]; series: [{name, cls, values: [n, ...]}].
// The svg carries data-total-<name> attributes (what the browser tests read).
export function lineChart(minutes, series, label) {
  const top = niceMax(Math.max(0, ...series.flatMap((x) => x.values)));
  const iw = W - PAD.left - PAD.right;
  const ih = H - PAD.top - PAD.bottom;
  const x = (i) => PAD.left + (minutes.length <= 1 ? iw : (i * iw) / (minutes.length - 1));
  const y = (v) => PAD.top + ih - (v / top) * ih;
  const svg = s("svg", {
    class: "chart",
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": label,
    preserveAspectRatio: "none",
  });
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    svg.appendChild(s("line", { class: "grid-line", x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }));
    svg.appendChild(s("text", { class: "axis", x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, String(Math.round(v))));
  }
  const ticks = Math.min(6, minutes.length);
  for (let t = 0; t < ticks; t++) {
    const i = ticks === 1 ? 0 : Math.round((t * (minutes.length - 1)) / (ticks - 1));
    const anchor = t === 0 && ticks > 1 ? "start" : t === ticks - 1 && ticks > 1 ? "end" : "middle";
    svg.appendChild(s("text", { class: "axis", x: x(i), y: H - 6, "text-anchor": anchor }, clock(minutes[i])));
  }
  for (const line of series) {
    const points = line.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    svg.appendChild(s("polyline", { class: `series ${line.cls}`, points }, s("title", null, line.name)));
    const total = line.values.reduce((a, b) => a + b, 0);
    svg.setAttribute(`data-total-${line.cls}`, String(total));
  }
  return svg;
}

// Horizontal bars: rows = [{name, parts: [{cls, value, label}]}] stacked per row.
export function barChart(rows, label) {
  const rowH = 22;
  const height = Math.max(rowH, rows.length * rowH) + 4;
  const labelW = 140;
  const width = W;
  const top = niceMax(Math.max(0, ...rows.map((r) => r.parts.reduce((a, p) => a + p.value, 0))));
  const scale = (v) => ((width - labelW - 60) * v) / top;
  const svg = s("svg", { class: "chart bars", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label });
  rows.forEach((row, i) => {
    const yTop = i * rowH + 2;
    svg.appendChild(s("text", { class: "axis", x: labelW - 8, y: yTop + 15, "text-anchor": "end" }, row.name));
    let left = labelW;
    let sum = 0;
    for (const part of row.parts) {
      const w = scale(part.value);
      if (w > 0) {
        svg.appendChild(
          s("rect", { class: `bar ${part.cls}`, x: left, y: yTop + 3, width: w, height: rowH - 6 }, s("title", null, `${part.label}: ${part.value}`)),
        );
      }
      left += w;
      sum += part.value;
    }
    svg.appendChild(s("text", { class: "axis", x: left + 6, y: yTop + 15 }, String(sum)));
  });
  return svg;
}

export function legend(series) {
  return h(
    "div",
    { class: "legend" },
    series.map((x) => h("span", { class: `key ${x.cls}` }, h("i", null), x.name)),
  );
}

// A progress bar as SVG (groups, freshness).
export function progress(parts, total) {
  const svg = s("svg", { class: "progress", viewBox: "0 0 200 10", preserveAspectRatio: "none" });
  let left = 0;
  for (const part of parts) {
    const w = total > 0 ? (200 * part.value) / total : 0;
    if (w > 0) svg.appendChild(s("rect", { class: `bar ${part.cls}`, x: left, y: 0, width: w, height: 10 }));
    left += w;
  }
  return svg;
}
