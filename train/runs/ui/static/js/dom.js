// Shared helpers of the run browser's views: the page's URL state, elements, the JSON API, tables, charts.
// Untrusted text (programs, completions, feedback, run names) only ever goes into the page as text nodes
// (h() below, textContent); never as HTML.

export const Q = new URLSearchParams(location.search);
export const RUN = Q.get("run") || "";
export const app = document.getElementById("app");
export const POLL_MS = 2500;
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];

function setAttr(el, k, v) {
  if (v === null || v === undefined || v === false) return;
  if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
  else if (k === "cls") el.className = v;
  else el.setAttribute(k, v);
}

export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) setAttr(el, k, v);
  for (const kid of kids.flat(Infinity)) {
    if (kid !== null && kid !== undefined) el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

export const url = (path, params) => path + "?" + new URLSearchParams(params).toString();
export const sol = (id) => h("a", {href: url("/solution", {run: RUN, id})}, "#" + id);

export function fmt(v, digits = 6) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  return Number.isInteger(v) ? String(v) : v.toPrecision(digits);
}

export async function api(path, params) {
  const r = await fetch(url("/api/" + path, params || {}));
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

export function fail(err) { app.replaceChildren(h("p", {cls: "bad"}, "Error: " + err.message)); }

function cell(c) {
  if (c instanceof Node) return h("td", {}, c);
  return h("td", {cls: typeof c === "number" ? "num" : null}, fmt(c));
}

export function table(head, rows) {
  return h("table", {}, h("tr", {}, head.map(c => h("th", {}, c))), rows.map(r => h("tr", {}, r.map(cell))));
}

export function kv(pairs) {
  return h("table", {cls: "kv"}, pairs.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {}, v instanceof Node ? v : fmt(v)))));
}

export function code(text, lang) {
  const el = h("code", {cls: "language-" + lang});
  el.textContent = text;
  if (window.hljs && text.length < 200000) hljs.highlightElement(el);
  return h("pre", {}, el);
}

export const validity = (ok) => h("span", {cls: ok ? "ok" : "bad"}, ok ? "valid" : "invalid");

export function nav() {
  const navEl = document.getElementById("nav");
  if (!RUN && location.pathname === "/") return;
  if (location.pathname !== "/compare") {
    for (const [p, label] of [["/run", "overview"], ["/lineage", "lineage"], ["/population", "population"]]) {
      navEl.append(h("a", {href: url(p, {run: RUN}), cls: location.pathname === p ? "on" : null}, label));
    }
  }
  navEl.append(h("span", {}, RUN ? "run: " + RUN : ""));
}

function uplotSeries(s, i, n) {
  return {label: s.label, stroke: s.color || PALETTE[i % 10], width: 1.5, spanGaps: s.spanGaps ?? true,
    points: s.points || {show: n < 60}, paths: s.paths};
}

// One uPlot chart in a titled box; series: [{label, data, color?, points?, paths?, spanGaps?}].
export function chart(title, x, series, opts) {
  const box = h("div", {cls: "chart", "data-chart": title}, h("h3", {}, title));
  const xlabel = (opts && opts.xlabel) || "epoch";
  const config = Object.assign({
    width: 560, height: 220, scales: {x: {time: false}}, axes: [{label: xlabel}, {}],
    series: [{label: xlabel}].concat(series.map((s, i) => uplotSeries(s, i, x.length))),
  }, opts && opts.uplot);
  box.plot = new uPlot(config, [x, ...series.map(s => s.data)], box);
  return box;
}
