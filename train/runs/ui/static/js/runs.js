// The runs view: every run under the served folder; an unreadable run is a row with its error.
import {api, app, fmt, h, table, url} from "./dom.js";

function runRow(r) {
  const name = h("a", {href: url("/run", {run: r.run})}, r.run || r.name);
  if (r.error) return [name, h("span", {cls: "bad"}, "unreadable: " + r.error), "", "", "", "", "", "", ""];
  const epochs = r.epochs_planned ? `${fmt(r.epochs)} / ${r.epochs_planned}` : fmt(r.epochs);
  return [name, r.task, r.variant, h("span", {cls: "status-" + r.status}, r.status), epochs, r.solutions, r.best,
    r.best_exact || "–", r.ratio === null ? "–" : r.ratio.toFixed(4)];
}

function compareLinks(runs) {
  const folders = {};
  for (const r of runs) {
    const f = r.run.includes("/") ? r.run.slice(0, r.run.lastIndexOf("/")) : ".";
    (folders[f] = folders[f] || []).push(r.run);
  }
  return Object.entries(folders).filter(([, rs]) => rs.length > 1)
    .map(([f, rs]) => h("li", {}, h("a", {href: url("/compare", {runs: rs.join(",")})}, `compare the ${rs.length} runs in ${f}`)));
}

export async function viewRuns() {
  const data = await api("runs");
  const head = ["run", "task", "variant", "status", "epochs", "solutions", "best reward", "its exact check", "ratio to best known"];
  const runs = table(head, data.runs.map(runRow));
  runs.id = "runs";
  const cmp = compareLinks(data.runs.filter(r => !r.error));
  app.replaceChildren(h("h1", {}, "Runs under " + data.root), runs, cmp.length ? h("ul", {}, cmp) : "");
}
