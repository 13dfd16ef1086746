// Several runs against children evaluated: best so far, the top-k mean (from the child where k valid solutions exist),
// the valid fraction; the fixed-budget and area tables.
import {Q, api, app, chart, h, table} from "./dom.js";

function topkNote(d) {
  const from = d.runs.map(r => `${r.run}: ${r.topk_from === null ? "never (fewer than " + d.k + " valid)" : "child " + r.topk_from}`);
  return h("p", {cls: "note", id: "topk-note"}, `The top-${d.k} mean is drawn from the first child after which ${d.k} valid `
    + `solutions exist (the starter counts), so it never falls; before that it is undefined. Starts at ${from.join(", ")}.`);
}

function tables(d) {
  const out = [];
  if (d.tables.budget) {
    out.push(h("h2", {}, "Best so far at fixed budgets (mean ± std over seeds)"), table(d.tables.budget[0], d.tables.budget.slice(1)));
  }
  if (d.tables.area) {
    out.push(h("h2", {}, `Top-${d.k} mean and area under the curve over the first ${d.budget} children (the shortest run)`),
      table(d.tables.area[0], d.tables.area.slice(1)),
      h("p", {cls: "note"}, `In these tables, while fewer than ${d.k} valid solutions exist the top-${d.k} mean is `
        + "the mean of those there are."));
  }
  return out;
}

export async function viewCompare() {
  const d = await api("compare", {runs: Q.get("runs") || "", k: Q.get("k") || 10});
  const errors = d.errors.map(e => h("p", {cls: "bad"}, `${e.run}: unreadable (${e.error})`));
  if (!d.runs.length) { app.replaceChildren(h("p", {}, "No run with an archive to compare."), ...errors); return; }
  const joined = uPlot.join(d.runs.map(r => [r.x, r.best, r.topk, r.valid]));
  const pick = (off, gaps) => d.runs.map((r, i) => ({label: r.run, data: joined[1 + i * 3 + off], spanGaps: gaps}));
  app.replaceChildren(h("h1", {}, `Compare ${d.runs.length} runs against children evaluated`), ...errors, h("div", {cls: "charts"},
    chart("best valid reward so far", joined[0], pick(0, true), {xlabel: "children"}),
    chart(`mean of the top ${d.k} so far`, joined[0], pick(1, true), {xlabel: "children"}),
    chart("valid fraction of the children so far", joined[0], pick(2, true), {xlabel: "children"})), topkNote(d), ...tables(d));
}
