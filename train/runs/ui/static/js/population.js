// One epoch's selected population in (Div, reward), its Pareto front and next epoch's parents; a slider over epochs.
import {Q, RUN, api, app, chart, h, sol, table, url} from "./dom.js";

const dots = (size, fill) => ({show: true, size, fill, width: 0});

function scatter(pts) {
  const series = [
    {label: "member", data: pts.map(m => m.reward), paths: () => null, points: dots(7, "#1f77b4")},
    {label: "Pareto front", data: pts.map(m => m.front ? m.reward : null), color: "#d62728", points: dots(9, "#d62728")},
    {label: "parent next epoch", data: pts.map(m => m.parent ? m.reward : null), color: "#2ca02c", paths: () => null,
      points: {show: true, size: 14, fill: "transparent", width: 2}},
  ];
  return chart("reward against diversity (Div)", pts.map(m => m.diversity), series, {xlabel: "Div (eq. 6)"});
}

function slider(d) {
  return h("input", {type: "range", id: "epoch", min: 0, max: d.epochs.length - 1, value: d.epochs.indexOf(d.epoch), step: 1,
    on: {change: e => { location.href = url("/population", {run: RUN, epoch: d.epochs[+e.target.value]}); }}});
}

export async function viewPopulation() {
  const d = await api("population", {run: RUN, epoch: Q.get("epoch") ?? ""});
  if (!d.epochs.length) { app.replaceChildren(h("p", {}, "No population stored yet.")); return; }
  const pts = d.members.filter(m => m.diversity !== null).sort((a, b) => a.diversity - b.diversity || a.reward - b.reward);
  const next = d.next_epoch_logged ? "" : " (next epoch not logged yet)";
  const members = table(["member", "reward", "Div", "validity", "front", "parent next epoch"],
    d.members.map(m => [sol(m.id), m.reward, m.diversity, m.valid ? "valid" : "invalid", m.front ? "front" : "", m.parent ? "yes" : ""]));
  members.id = "members";
  app.replaceChildren(h("h1", {}, `Population at epoch ${d.epoch}`),
    h("p", {}, "epoch ", slider(d), ` ${d.epoch} (of ${d.epochs[0]}–${d.epochs[d.epochs.length - 1]})`),
    h("p", {}, `Div: ${d.source}. red: the Pareto front of (reward, Div); green rings: members the next epoch's prompts `
      + `showed as parents${next}.`), pts.length ? scatter(pts) : "", members);
}
