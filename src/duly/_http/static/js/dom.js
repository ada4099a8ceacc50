// DOM helpers. Every string from the API reaches the page through textContent or an
// attribute set with setAttribute: never innerHTML (job arguments and error messages are
// attacker-controlled text).

const SVG_NS = "http://www.w3.org/2000/svg";

// Bidirectional controls (LRE..RLO, LRI..PDI, LRM, RLM) would reorder what is shown around
// them ("user\u202Etxt.exe" reads "userexe.txt"): they are shown as escapes, never applied.
const BIDI = /[\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;

function escapeCode(c) {
  return `\\u${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
}

// `text` with every bidi control written as \uXXXX (for attributes such as a tooltip).
export function visible(text) {
  return String(text).replace(BIDI, escapeCode);
}

// A text node, or for text holding bidi controls a fragment where each is a marked escape.
function textNode(text) {
  if (!text.match(BIDI)) return document.createTextNode(text);
  const out = document.createDocumentFragment();
  let last = 0;
  for (const found of text.matchAll(BIDI)) {
    out.appendChild(document.createTextNode(text.slice(last, found.index)));
    const esc = document.createElement("span");
    esc.className = "bidi-escape";
    esc.title = "bidirectional control character";
    esc.textContent = escapeCode(found[0]);
    out.appendChild(esc);
    last = found.index + found[0].length;
  }
  out.appendChild(document.createTextNode(text.slice(last)));
  return out;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(textNode(String(child)));
  }
  return el;
}

function setAttrs(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (name === "title") {
      el.setAttribute(name, visible(value));
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  return el;
}

// h("a", {href: "/x", class: "y"}, "text", child, [more]) -> an element.
export function h(tag, attrs, ...children) {
  return append(setAttrs(document.createElement(tag), attrs), children);
}

// The same for SVG elements.
export function s(tag, attrs, ...children) {
  return append(setAttrs(document.createElementNS(SVG_NS, tag), attrs), children);
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  return append(clear(el), children);
}

const UNITS = [
  [86400, "d"],
  [3600, "h"],
  [60, "m"],
  [1, "s"],
];

// 3725 -> "1h 2m"; sub-second -> "<1s".
export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  const negative = seconds < 0;
  let left = Math.abs(seconds);
  if (left < 1) return negative ? "-<1s" : "<1s";
  const parts = [];
  for (const [size, unit] of UNITS) {
    if (left >= size && parts.length < 2) {
      const n = Math.floor(left / size);
      parts.push(`${n}${unit}`);
      left -= n * size;
    }
  }
  return (negative ? "-" : "") + parts.join(" ");
}

export function toDate(value) {
  if (value === null || value === undefined || value === "") return null;
  const d = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

// "12s ago" / "in 3m", with the exact time as a tooltip.
export function ago(value) {
  const d = toDate(value);
  if (d === null) return h("span", { class: "muted" }, "—");
  const delta = (Date.now() - d.getTime()) / 1000;
  const text = delta >= 0 ? `${duration(delta)} ago` : `in ${duration(-delta)}`;
  return h("time", { datetime: d.toISOString(), title: d.toISOString() }, text);
}

export function stamp(value) {
  const d = toDate(value);
  if (d === null) return h("span", { class: "muted" }, "—");
  const text = d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  return h("time", { datetime: d.toISOString() }, text);
}

export function badge(status) {
  return h("span", { class: `badge status-${String(status).replace(/[^a-z_]/g, "")}` }, status);
}

export function num(n) {
  if (n === null || n === undefined) return "—";
  return Number(n).toLocaleString("en-US");
}

// A JSON value shown as text (already redacted by the API: secrets are "***").
export function json(value) {
  let text;
  try {
    text = JSON.stringify(value, null, 2);
  } catch {
    text = String(value);
  }
  return h("pre", { class: "json" }, text === undefined ? "null" : text);
}

// A table: columns = [{title, cell: row => node|string, class?}], rows = [...].
export function table(columns, rows, empty = "Nothing here yet.") {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h(
    "table",
    { class: "grid" },
    h("thead", null, h("tr", null, columns.map((c) => h("th", { class: c.class }, c.title)))),
    h(
      "tbody",
      null,
      rows.map((row) =>
        h(
          "tr",
          { dataset: row && row.id ? { id: String(row.id) } : {} },
          columns.map((c) => h("td", { class: c.class }, c.cell(row))),
        ),
      ),
    ),
  );
}

export function card(title, ...children) {
  return h("section", { class: "card" }, title ? h("h2", null, title) : null, children);
}

export function stat(label, value, cls) {
  return h("div", { class: `stat ${cls || ""}` }, h("div", { class: "stat-value" }, value), h("div", { class: "stat-label" }, label));
}

export function errorBox(message) {
  return h("div", { class: "error-box", role: "alert" }, message);
}
