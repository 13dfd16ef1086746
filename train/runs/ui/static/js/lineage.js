// The lineage view: the best solutions' ancestry as a Cytoscape tree; click a node for its code, expand its children.
import {Q, RUN, api, app, code, fmt, h, kv, url, validity} from "./dom.js";

const STYLE = (lo, hi) => [
  {selector: "node", style: {"background-color": `mapData(reward, ${lo}, ${hi}, #3b1c6e, #f6d83a)`, label: "data(label)",
    "font-size": 9, "min-zoomed-font-size": 7, "text-wrap": "wrap", "text-valign": "bottom", width: 22, height: 22}},
  {selector: "node.invalid", style: {"background-color": "#bbb", shape: "diamond", "border-width": 2, "border-color": "#b00020"}},
  {selector: "node.top", style: {"border-width": 4, "border-color": "#111"}},
  {selector: "node:selected", style: {"border-width": 4, "border-color": "#1b5fbf"}},
  {selector: "edge", style: {width: 1.5, "line-color": "#999", "target-arrow-shape": "triangle", "target-arrow-color": "#999",
    "curve-style": "bezier"}},
  {selector: "edge.second", style: {"line-style": "dashed", "line-color": "#ff7f0e", "target-arrow-color": "#ff7f0e"}},
];

function nodeData(n) {
  const label = `#${n.id}\n${n.valid ? fmt(n.reward, 4) : "invalid"}`;
  return {data: {id: "n" + n.id, sid: n.id, label, reward: n.reward || 0, valid: n.valid, n_children: n.n_children, rank: n.rank},
    classes: (n.valid ? "" : "invalid") + (n.rank ? " top" : "")};
}

function edgesOf(n, have) {
  const out = [];
  if (n.parent_id !== null && have.has(n.parent_id)) {
    out.push({data: {id: `p${n.parent_id}-${n.id}`, source: "n" + n.parent_id, target: "n" + n.id}, classes: "parent"});
  }
  if (n.second_parent_id !== null && have.has(n.second_parent_id)) {
    out.push({data: {id: `s${n.second_parent_id}-${n.id}`, source: "n" + n.second_parent_id, target: "n" + n.id}, classes: "second"});
  }
  return out;
}

function legend() {
  return h("p", {cls: "legend"}, h("span", {}, "colour: reward (dark low, yellow high)"), h("span", {}, "grey diamond: invalid"),
    h("span", {}, "dashed orange edge: crossover's second parent"), h("span", {}, "thick border: a top solution"));
}

function makeTree(data) {
  const rewards = data.nodes.filter(n => n.valid).map(n => n.reward);
  const lo = rewards.length ? Math.min(...rewards) : 0, hi = Math.max(...rewards, lo + 1e-9);
  const have = new Set(data.nodes.map(n => n.id));
  return cytoscape({container: document.getElementById("cy"), wheelSensitivity: 0.3, textureOnViewport: true,
    hideEdgesOnViewport: data.nodes.length > 500, style: STYLE(lo, hi),
    elements: [...data.nodes.map(nodeData), ...data.nodes.flatMap(n => edgesOf(n, have))]});
}

function relayout(cy) {
  const roots = cy.nodes().filter(n => n.indegree(false) === 0);
  cy.layout({name: "breadthfirst", directed: true, spacingFactor: 1.2, roots, animate: false}).run();
}

async function expand(cy, sid) {
  const d = await api("expand", {run: RUN, id: sid, limit: 30});
  const ids = new Set(cy.nodes().map(n => n.data("sid")));
  const fresh = d.nodes.filter(n => !ids.has(n.id));
  fresh.forEach(n => ids.add(n.id));
  cy.add([...fresh.map(nodeData), ...fresh.flatMap(n => edgesOf(n, ids))]);
  cy.getElementById("n" + sid).data("expanded", `${d.nodes.length} of ${d.total}`);
  relayout(cy);
}

function collapse(cy, sid) { cy.getElementById("n" + sid).successors().filter(e => !e.data("rank")).remove(); }

async function openNode(cy, side, sid) {
  side.replaceChildren(h("p", {}, "loading #" + sid + "…"));
  try {
    const s = await api("solution", {run: RUN, id: sid});
    const diffs = s.diffs.flatMap(d => [h("h2", {}, `Diff against ${d.label} #${d.id}`), code(d.diff || "(identical)", "diff")]);
    side.replaceChildren(h("h2", {}, h("a", {href: url("/solution", {run: RUN, id: sid})}, `open solution #${sid}`)),
      h("div", {}, h("button", {on: {click: () => expand(cy, sid)}}, `expand children (${s.n_children})`), " ",
        h("button", {on: {click: () => collapse(cy, sid)}}, "collapse")),
      kv([["reward", s.reward], ["validity", validity(s.valid)], ["operator", s.operator], ["epoch", s.epoch], ["feedback", s.feedback]]),
      h("h2", {}, "Code"), code(s.code, "python"), ...diffs);
  } catch (e) { side.replaceChildren(h("p", {cls: "bad"}, e.message)); }
}

export async function viewLineage() {
  const data = await api("lineage", {run: RUN, best: Q.get("best") || 5});
  const side = h("div", {id: "side"}, h("p", {}, "Click a node to open it; expand loads its children."));
  app.replaceChildren(h("h1", {}, `Lineage: the ${data.best.length} best solutions' ancestry (${data.total} solutions in all)`),
    legend(), h("div", {cls: "split"}, h("div", {id: "cy"}), side));
  const cy = window.cy = makeTree(data);
  relayout(cy);
  cy.on("tap", "node", ev => openNode(cy, side, ev.target.data("sid")));
}
