// One epoch's selected population in two of its objectives (reward and Div by default; any objective the task
// declares can be picked), its Pareto front and next epoch's parents; a slider over epochs.
import {Q, RUN, api, app, chart, h, sol, table, url} from "./dom.js";

const dots = (size, fill) => ({show: true, size, fill, width: 0});

function scatter(pts, x, y) {
  const v = (m, o) => m.values[o.name];
  const series = [
    {label: "member", data: pts.map(m => v(m, y)), paths: () => null, points: dots(7, "#1f77b4")},
    {label: "Pareto front", data: pts.map(m => m.front ? v(m, y) : null), color: "#d62728", points: dots(9, "#d62728")},
    {label: "parent next epoch", data: pts.map(m => m.parent ? v(m, y) : null), color: "#2ca02c", paths: () => null,
      points: {show: true, size: 14, fill: "transparent", width: 2}},
  ];
  return chart(`${y.label} against ${x.label}`, pts.map(m => v(m, x)), series, {xlabel: x.label});
}

function slider(d) {
  return h("input", {type: "range", id: "epoch", min: 0, max: d.epochs.length - 1, value: d.epochs.indexOf(d.epoch), step: 1,
    on: {change: e => { location.href = url("/population", {run: RUN, epoch: d.epochs[+e.target.value], x: Q.get("x") ?? "",
      y: Q.get("y") ?? ""}); }}});
}

// The axis an objective select shows: the URL's choice where the run has that objective, else the default.
function picked(d, key, fallback) {
  const name = Q.get(key);
  return d.objectives.find(o => o.name === name) || d.objectives.find(o => o.name === fallback);
}

function axisSelect(d, key, current, redraw) {
  const sel = h("select", {id: "axis-" + key, on: {change: e => redraw(key, e.target.value)}},
    d.objectives.map(o => h("option", {value: o.name, selected: o.name === current.name ? "selected" : null}, o.label)));
  return h("label", {}, key + ": ", sel);
}

function plot(d, x, y) {
  const v = (m, o) => m.values[o.name];
  const pts = d.members.filter(m => v(m, x) !== null && v(m, y) !== null).sort((a, b) => v(a, x) - v(b, x) || v(a, y) - v(b, y));
  return pts.length ? scatter(pts, x, y) : h("p", {}, `No member has both ${x.label} and ${y.label}.`);
}

export async function viewPopulation() {
  const d = await api("population", {run: RUN, epoch: Q.get("epoch") ?? ""});
  if (!d.epochs.length) { app.replaceChildren(h("p", {}, "No population stored yet.")); return; }
  const axes = {x: picked(d, "x", "diversity"), y: picked(d, "y", "reward")};
  const box = h("div", {id: "plot"}, plot(d, axes.x, axes.y));
  const redraw = (key, name) => {
    axes[key] = d.objectives.find(o => o.name === name);
    Q.set(key, name);
    history.replaceState(null, "", url("/population", Q));
    box.replaceChildren(plot(d, axes.x, axes.y));
  };
  const declared = d.objectives.slice(2);
  const next = d.next_epoch_logged ? "" : " (next epoch not logged yet)";
  const front = "the Pareto front of " + (declared.length ? "reward, Div and " + declared.map(o => o.label).join(", ") : "(reward, Div)");
  const members = table(["member", ...d.objectives.map(o => o.label), "validity", "front", "parent next epoch"],
    d.members.map(m => [sol(m.id), ...d.objectives.map(o => m.values[o.name]), m.valid ? "valid" : "invalid", m.front ? "front" : "",
      m.parent ? "yes" : ""]));
  members.id = "members";
  app.replaceChildren(h("h1", {}, `Population at epoch ${d.epoch}`),
    h("p", {}, "epoch ", slider(d), ` ${d.epoch} (of ${d.epochs[0]}–${d.epochs[d.epochs.length - 1]})`),
    h("p", {}, axisSelect(d, "x", axes.x, redraw), " ", axisSelect(d, "y", axes.y, redraw)),
    h("p", {}, `Div: ${d.source}. red: ${front}; green rings: members the next epoch's prompts `
      + `showed as parents${next}. A missing objective value is left out of the plot and counts as the worst in the front.`),
    box, members);
}
