// HELIX run browser. Every view is a URL (path + query), drawn from the JSON API.
// Untrusted text (programs, completions, feedback, run names) only ever goes into the page as
// text nodes (h() below, textContent); never as HTML.
"use strict";

const Q = new URLSearchParams(location.search);
const RUN = Q.get("run") || "";
const app = document.getElementById("app");
const POLL_MS = 2500;

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === "cls") el.className = v;
    else el.setAttribute(k, v);
  }
  for (const kid of kids.flat(Infinity)) if (kid !== null && kid !== undefined) el.append(kid instanceof Node ? kid : String(kid));
  return el;
}
const url = (path, params) => path + "?" + new URLSearchParams(params).toString();
const fmt = (v, d = 6) => (v === null || v === undefined) ? "–" : (typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toPrecision(d)) : String(v));
const sol = (id) => h("a", {href: url("/solution", {run: RUN, id})}, "#" + id);

async function api(path, params) {
  const r = await fetch(url("/api/" + path, params || {}));
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
function fail(err) { app.replaceChildren(h("p", {cls: "bad"}, "Error: " + err.message)); }
function table(head, rows) {
  return h("table", {}, h("tr", {}, head.map(c => h("th", {}, c))),
    rows.map(r => h("tr", {}, r.map(c => c instanceof Node ? h("td", {}, c) : h("td", {cls: typeof c === "number" ? "num" : null}, fmt(c))))));
}
function kv(pairs) { return h("table", {cls: "kv"}, pairs.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {}, v instanceof Node ? v : fmt(v))))); }
function code(text, lang) {
  const el = h("code", {cls: "language-" + lang});
  el.textContent = text;
  if (window.hljs && text.length < 200000) hljs.highlightElement(el);
  return h("pre", {}, el);
}
function nav() {
  const links = [["/run", "overview"], ["/lineage", "lineage"], ["/population", "population"]];
  const navEl = document.getElementById("nav");
  if (RUN || location.pathname !== "/") {
    for (const [p, label] of links) if (location.pathname !== "/compare") navEl.append(h("a", {href: url(p, {run: RUN}), cls: location.pathname === p ? "on" : null}, label));
    navEl.append(h("span", {}, RUN ? "run: " + RUN : ""));
  }
}
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];
function chart(title, x, series, opts) {
  const box = h("div", {cls: "chart", "data-chart": title}, h("h3", {}, title));
  const plot = new uPlot(Object.assign({
    width: 560, height: 220, scales: {x: {time: false}},
    series: [{label: (opts && opts.xlabel) || "epoch"}].concat(series.map((s, i) => ({label: s.label, stroke: s.color || PALETTE[i % 10], width: 1.5, spanGaps: true, points: s.points || {show: x.length < 60}, paths: s.paths}))),
    axes: [{label: (opts && opts.xlabel) || "epoch"}, {}],
  }, opts && opts.uplot), [x, ...series.map(s => s.data)], box);
  box.plot = plot;
  return box;
}

// ---- runs ------------------------------------------------------------------------------
async function viewRuns() {
  const data = await api("runs");
  const rows = data.runs.map(r => [h("a", {href: url("/run", {run: r.run})}, r.run || r.name), r.task, r.variant,
    h("span", {cls: "status-" + r.status}, r.status), r.epochs_planned ? `${fmt(r.epochs)} / ${r.epochs_planned}` : fmt(r.epochs),
    r.solutions, r.best, r.ratio === null ? "–" : r.ratio.toFixed(4)]);
  const folders = {};
  for (const r of data.runs) { const f = r.run.includes("/") ? r.run.slice(0, r.run.lastIndexOf("/")) : "."; (folders[f] = folders[f] || []).push(r.run); }
  const cmp = Object.entries(folders).filter(([, rs]) => rs.length > 1).map(([f, rs]) => h("li", {}, h("a", {href: url("/compare", {runs: rs.join(",")})}, `compare the ${rs.length} runs in ${f}`)));
  app.replaceChildren(h("h1", {}, "Runs under " + data.root), table(["run", "task", "variant", "status", "epochs", "solutions", "best reward", "ratio to best known"], rows),
    cmp.length ? h("ul", {}, cmp) : "");
}

// ---- run overview ---------------------------------------------------------------------------
const OV_CHARTS = [
  ["reward", [["best_reward", "best so far"], ["reward_max", "max"], ["reward_mean", "mean"]]],
  ["children's outcomes (fraction)", [["valid_frac", "valid"], ["edit_fail_frac", "edit did not apply"], ["unchanged_frac", "unchanged"], ["repeat_frac", "repeat"], ["zero_std_frac", "zero-std groups"]]],
  ["KL and entropy", [["kl", "KL"], ["entropy", "entropy"]]],
  ["phase time (s)", [["gen_time_s", "generate"], ["eval_time_s", "evaluate"], ["train_time_s", "train"], ["weight_sync_time_s", "weight sync"], ["embed_select_time_s", "embed + select"], ["checkpoint_time_s", "checkpoint"]]],
];
async function viewRun() {
  const ov = await api("overview", {run: RUN});
  const head = h("div", {id: "ovhead"});
  const charts = h("div", {cls: "charts"});
  const built = [];
  for (const [title, keys] of OV_CHARTS) {
    const have = keys.filter(([k]) => ov.series[k]);
    if (!have.length || !ov.epoch.length) continue;
    const box = chart(title, ov.epoch, have.map(([k, label]) => ({label, data: ov.series[k]})));
    built.push([box, have]); charts.append(box);
  }
  const tbl = h("div", {id: "solutions"});
  const state = {offset: 0, order: "-id"};
  const order = h("select", {on: {change: e => { state.order = e.target.value; state.offset = 0; page(); }}},
    [["-id", "newest first"], ["-reward", "best first"], ["id", "oldest first"]].map(([v, l]) => h("option", {value: v}, l)));
  async function page() {
    const d = await api("solutions", {run: RUN, offset: state.offset, limit: 50, order: state.order});
    const rows = d.rows.map(s => [sol(s.id), s.parent_id === null ? "–" : sol(s.parent_id), s.second_parent_id === null ? "–" : sol(s.second_parent_id),
      s.epoch, s.reward, h("span", {cls: s.valid ? "ok" : "bad"}, s.valid ? "valid" : "invalid"), s.operator, s.eval_time_s]);
    tbl.replaceChildren(h("div", {cls: "pager"}, order,
      h("button", {disabled: state.offset === 0 ? "" : null, on: {click: () => { state.offset = Math.max(0, state.offset - 50); page(); }}}, "◀ prev"),
      `${d.total ? state.offset + 1 : 0}–${Math.min(state.offset + 50, d.total)} of ${d.total}`,
      h("button", {disabled: state.offset + 50 >= d.total ? "" : null, on: {click: () => { state.offset += 50; page(); }}}, "next ▶")),
    table(["solution", "parent", "second parent", "epoch", "reward", "validity", "operator", "eval s"], rows));
  }
  function header(ov) {
    head.replaceChildren(kv([["status", h("span", {cls: "status-" + ov.status}, ov.status)], ["epochs logged", ov.epoch.length ? ov.epoch[ov.epoch.length - 1] : "none"],
      ["solutions", ov.solutions], ["best", ov.best ? h("span", {}, sol(ov.best.id), ` reward ${fmt(ov.best.reward, 10)} (epoch ${ov.best.epoch})`) : "no valid solution yet"]]),
      ov.notes.map(n => h("p", {cls: "note"}, "Note: " + n)));
  }
  header(ov);
  app.replaceChildren(h("h1", {}, "Run " + (RUN || "(this folder)")), head, h("h2", {}, "Per-epoch curves (metrics.jsonl)"), charts,
    h("h2", {}, "Solutions"), tbl, h("h2", {}, "Operators"), ov.operators.length ? table(["epoch", "operator", "children", "program", "valid", "reward mean", "reward max", "new best"],
      ov.operators.map(r => [r.epoch, r.operator, r.children, r.program_frac, r.valid_frac, r.reward_mean, r.reward_max, r.new_best_frac])) : h("p", {}, "no operator metrics logged"),
    h("h2", {}, "Config"), table(["key", "value"], ov.config));
  await page();
  setInterval(async () => {  // live: new epochs and new solutions while the run goes
    try {
      const nv = await api("overview", {run: RUN});
      for (const [box, have] of built) box.plot.setData([nv.epoch, ...have.map(([k]) => nv.series[k] || nv.epoch.map(() => null))]);
      header(nv);
      if (state.offset === 0) await page();
      document.getElementById("live").textContent = "live · updated " + new Date().toLocaleTimeString();
    } catch (e) { document.getElementById("live").textContent = "update failed: " + e.message; }
  }, POLL_MS);
}

// ---- lineage ------------------------------------------------------------------------------
function nodeData(n) {
  return {data: {id: "n" + n.id, sid: n.id, label: `#${n.id}\n${n.valid ? fmt(n.reward, 4) : "invalid"}`, reward: n.reward || 0,
    valid: n.valid, n_children: n.n_children, rank: n.rank}, classes: (n.valid ? "" : "invalid") + (n.rank ? " top" : "")};
}
function edgesOf(n, have) {
  const out = [];
  if (n.parent_id !== null && have.has(n.parent_id)) out.push({data: {id: `p${n.parent_id}-${n.id}`, source: "n" + n.parent_id, target: "n" + n.id}, classes: "parent"});
  if (n.second_parent_id !== null && have.has(n.second_parent_id)) out.push({data: {id: `s${n.second_parent_id}-${n.id}`, source: "n" + n.second_parent_id, target: "n" + n.id}, classes: "second"});
  return out;
}
async function viewLineage() {
  const data = await api("lineage", {run: RUN, best: Q.get("best") || 5});
  const side = h("div", {id: "side"}, h("p", {}, "Click a node to open it; expand loads its children."));
  app.replaceChildren(h("h1", {}, `Lineage: the ${data.best.length} best solutions' ancestry (${data.total} solutions in all)`),
    h("p", {cls: "legend"}, h("span", {}, "colour: reward (dark low, yellow high)"), h("span", {}, "grey diamond: invalid"),
      h("span", {}, "dashed orange edge: crossover's second parent"), h("span", {}, "thick border: a top solution")),
    h("div", {cls: "split"}, h("div", {id: "cy"}), side));
  const rewards = data.nodes.filter(n => n.valid).map(n => n.reward);
  const lo = rewards.length ? Math.min(...rewards) : 0, hi = Math.max(...rewards, lo + 1e-9);
  const have = new Set(data.nodes.map(n => n.id));
  const cy = window.cy = cytoscape({
    container: document.getElementById("cy"), wheelSensitivity: 0.3, textureOnViewport: true, hideEdgesOnViewport: data.nodes.length > 500,
    elements: [...data.nodes.map(nodeData), ...data.nodes.flatMap(n => edgesOf(n, have))],
    style: [
      {selector: "node", style: {"background-color": `mapData(reward, ${lo}, ${hi}, #3b1c6e, #f6d83a)`, label: "data(label)", "font-size": 9, "min-zoomed-font-size": 7,
        "text-wrap": "wrap", "text-valign": "bottom", width: 22, height: 22}},
      {selector: "node.invalid", style: {"background-color": "#bbb", shape: "diamond", "border-width": 2, "border-color": "#b00020"}},
      {selector: "node.top", style: {"border-width": 4, "border-color": "#111"}},
      {selector: "node:selected", style: {"border-width": 4, "border-color": "#1b5fbf"}},
      {selector: "edge", style: {width: 1.5, "line-color": "#999", "target-arrow-shape": "triangle", "target-arrow-color": "#999", "curve-style": "bezier"}},
      {selector: "edge.second", style: {"line-style": "dashed", "line-color": "#ff7f0e", "target-arrow-color": "#ff7f0e"}},
    ],
  });
  const roots = () => cy.nodes().filter(n => n.indegree(false) === 0);
  const relayout = () => cy.layout({name: "breadthfirst", directed: true, spacingFactor: 1.2, roots: roots(), animate: false}).run();
  relayout();
  async function expand(sid) {
    const d = await api("expand", {run: RUN, id: sid, limit: 30});
    const ids = new Set(cy.nodes().map(n => n.data("sid")));
    const fresh = d.nodes.filter(n => !ids.has(n.id));
    fresh.forEach(n => ids.add(n.id));
    cy.add([...fresh.map(nodeData), ...fresh.flatMap(n => edgesOf(n, ids))]);
    cy.getElementById("n" + sid).data("expanded", `${d.nodes.length} of ${d.total}`);
    relayout();
  }
  function collapse(sid) { cy.getElementById("n" + sid).successors().filter(e => !e.data("rank")).remove(); }
  cy.on("tap", "node", async ev => {
    const sid = ev.target.data("sid");
    side.replaceChildren(h("p", {}, "loading #" + sid + "…"));
    try {
      const s = await api("solution", {run: RUN, id: sid});
      side.replaceChildren(h("h2", {}, h("a", {href: url("/solution", {run: RUN, id: sid})}, `open solution #${sid}`)),
        h("div", {}, h("button", {on: {click: () => expand(sid)}}, `expand children (${s.n_children})`), " ",
          h("button", {on: {click: () => collapse(sid)}}, "collapse")),
        kv([["reward", s.reward], ["validity", h("span", {cls: s.valid ? "ok" : "bad"}, s.valid ? "valid" : "invalid")], ["operator", s.operator], ["epoch", s.epoch], ["feedback", s.feedback]]),
        h("h2", {}, "Code"), code(s.code, "python"), ...s.diffs.flatMap(d => [h("h2", {}, `Diff against ${d.label} #${d.id}`), code(d.diff || "(identical)", "diff")]));
    } catch (e) { side.replaceChildren(h("p", {cls: "bad"}, e.message)); }
  });
}

// ---- solution -----------------------------------------------------------------------------
async function viewSolution() {
  const s = await api("solution", {run: RUN, id: Q.get("id")});
  const p = s.prompt;
  const parts = [h("h1", {}, `Solution #${s.id}`),
    kv([["reward", s.reward], ["validity", h("span", {cls: s.valid ? "ok" : "bad"}, s.valid ? "valid" : "invalid")], ["epoch", s.epoch], ["operator", s.operator],
      ["evaluation time", s.eval_time_s === null ? "–" : s.eval_time_s.toFixed(3) + " s"], ["parent", s.parent_id === null ? "none (the starter)" : sol(s.parent_id)],
      ["second parent", s.second_parent_id === null ? "–" : sol(s.second_parent_id)], ["prompt id", s.prompt_id], ["children", `${s.n_children}`]]),
    h("h2", {}, "Feedback"), h("pre", {id: "feedback"}, s.feedback),
    h("h2", {}, "Code"), h("div", {id: "code"}, code(s.code, "python"))];
  if (s.renderable) {
    const pic = h("div", {id: "render"}, h("p", {}, "drawing (re-run in the sandbox)…"));
    const img = h("img", {cls: "render", alt: "the task's drawing of this solution", src: url("/api/render", {run: RUN, id: s.id})});
    img.addEventListener("load", () => pic.replaceChildren(img));
    img.addEventListener("error", () => pic.replaceChildren(h("p", {cls: "note"}, "no drawing: the re-run failed or the task has none")));
    parts.push(h("h2", {}, "Picture (the task's render.py)"), pic);
  }
  for (const d of s.diffs) parts.push(h("h2", {}, `Diff against its ${d.label} #${d.id} (reward ${fmt(d.reward)})`), h("div", {cls: "diff"}, code(d.diff || "(no change)", "diff")));
  parts.push(h("h2", {}, "Metrics"), h("pre", {id: "metrics"}, JSON.stringify(s.metrics, null, 1)));
  parts.push(h("h2", {}, "Prompt"));
  if (p.parent_id === null) parts.push(h("p", {}, "The starter: no prompt."));
  else {
    parts.push(kv([["parent shown", sol(p.parent_id)], ["second parent shown", p.second_parent_id === null ? "–" : sol(p.second_parent_id)],
      ["ancestors shown", p.ancestors.length ? h("span", {}, p.ancestors.map(a => [sol(a.id), ` (${a.valid ? fmt(a.reward, 4) : "invalid"}) `])) : "none"],
      ["other programs shown", p.others.length ? h("span", {}, p.others.map(a => [sol(a.id), " "])) : "–"],
      ["what it showed", p.source === "recorded" ? "recorded by the run" : "reconstructed from the archive and metrics.jsonl"],
      ["dropped by the token budget", p.dropped === null ? "not recorded (metrics.jsonl has no prompt_dropped)" : (p.dropped.length ? p.dropped.join("; ") : "nothing")]]));
    parts.push(p.text === null ? h("p", {cls: "note"}, "The prompt's text is not recorded for this run (runs record it in prompts/epoch-N.jsonl since the run browser); above: what it showed.") : h("pre", {id: "prompt"}, p.text));
  }
  parts.push(h("h2", {}, "Raw completion"), s.completion === null ? h("p", {}, "none recorded") : h("pre", {id: "completion"}, s.completion));
  const groupBox = h("div", {id: "groupbox"}, h("p", {}, "loading the group's advantages…"));
  parts.push(h("h2", {}, "GRPO group (the siblings of one prompt; advantages from train.learner.grpo.compute_advantages)"), groupBox);
  if (s.children.length) parts.push(h("h2", {}, `Children (best ${s.children.length} of ${s.n_children})`),
    table(["solution", "epoch", "reward", "validity", "operator"], s.children.map(c => [sol(c.id), c.epoch, c.reward, c.valid ? "valid" : "invalid", c.operator])));
  app.replaceChildren(...parts);
  (async () => { try {  // lazily, after the page is drawn: the first group imports torch on the server
    const g = await api("group", {run: RUN, id: s.id});
    groupBox.replaceChildren(h("p", {}, g.prompt ? "prompt " + g.prompt : ""), g.note ? h("p", {cls: "note"}, g.note) : "",
      g.members.length ? h("table", {id: "group"}, h("tr", {}, ["sample", "solution", "reward", "validity", "advantage"].map(c => h("th", {}, c))),
        g.members.map(m => h("tr", {}, h("td", {}, "g" + m.g), h("td", {}, m.id === s.id ? h("b", {}, "#" + m.id + " (this)") : sol(m.id)),
          h("td", {cls: "num"}, fmt(m.reward)), h("td", {}, m.valid ? "valid" : "invalid"), h("td", {cls: "num"}, m.scored ? fmt(m.advantage, 4) : "lost (infra)")))) : "");
  } catch (e) { groupBox.replaceChildren(h("p", {cls: "bad"}, "group: " + e.message)); } })();
}

// ---- population -----------------------------------------------------------------------------
async function viewPopulation() {
  const d = await api("population", {run: RUN, epoch: Q.get("epoch") ?? ""});
  if (!d.epochs.length) { app.replaceChildren(h("p", {}, "No population stored yet.")); return; }
  const k = d.epochs.indexOf(d.epoch);
  const slider = h("input", {type: "range", id: "epoch", min: 0, max: d.epochs.length - 1, value: k, step: 1,
    on: {change: e => { location.href = url("/population", {run: RUN, epoch: d.epochs[+e.target.value]}); }}});
  const pts = d.members.filter(m => m.diversity !== null).sort((a, b) => a.diversity - b.diversity || a.reward - b.reward);
  const parts = [h("h1", {}, `Population at epoch ${d.epoch}`), h("p", {}, "epoch ", slider, ` ${d.epoch} (of ${d.epochs[0]}–${d.epochs[d.epochs.length - 1]})`),
    h("p", {}, `Div: ${d.source}. red: the Pareto front of (reward, Div); green rings: members the next epoch's prompts showed as parents${d.next_epoch_logged ? "" : " (next epoch not logged yet)"}.`)];
  if (pts.length) {
    const x = pts.map(m => m.diversity);
    const none = {show: false}, dots = (size, fill) => ({show: true, size, fill, width: 0});
    parts.push(chart("reward against diversity (Div)", x, [
      {label: "member", data: pts.map(m => m.reward), paths: () => null, points: dots(7, "#1f77b4")},
      {label: "Pareto front", data: pts.map(m => m.front ? m.reward : null), color: "#d62728", points: dots(9, "#d62728")},
      {label: "parent next epoch", data: pts.map(m => m.parent ? m.reward : null), color: "#2ca02c", paths: () => null, points: {show: true, size: 14, fill: "transparent", width: 2}},
    ].map(s => (s.points = s.points || none, s)), {xlabel: "Div (eq. 6)"}));
  }
  const members = table(["member", "reward", "Div", "validity", "front", "parent next epoch"],
    d.members.map(m => [sol(m.id), m.reward, m.diversity, m.valid ? "valid" : "invalid", m.front ? "front" : "", m.parent ? "yes" : ""]));
  members.id = "members";
  parts.push(members);
  app.replaceChildren(...parts);
}

// ---- compare ------------------------------------------------------------------------------
async function viewCompare() {
  const d = await api("compare", {runs: Q.get("runs") || "", k: Q.get("k") || 10});
  if (!d.runs.length) { app.replaceChildren(h("p", {}, "No run with an archive to compare.")); return; }
  const joined = uPlot.join(d.runs.map(r => [r.x, r.best, r.topk, r.valid]));
  const x = joined[0], n = d.runs.length;
  const pick = off => d.runs.map((r, i) => ({label: r.run, data: joined[1 + i * 3 + off]}));
  const parts = [h("h1", {}, `Compare ${n} runs against children evaluated`), h("div", {cls: "charts"},
    chart("best valid reward so far", x, pick(0), {xlabel: "children"}),
    chart(`mean of the top ${d.k} so far`, x, pick(1), {xlabel: "children"}),
    chart("valid fraction of the children so far", x, pick(2), {xlabel: "children"}))];
  if (d.tables.budget) parts.push(h("h2", {}, "Best so far at fixed budgets (mean ± std over seeds)"), table(d.tables.budget[0], d.tables.budget.slice(1)));
  if (d.tables.area) parts.push(h("h2", {}, `Top-${d.k} mean and area under the curve over the first ${d.budget} children (the shortest run)`), table(d.tables.area[0], d.tables.area.slice(1)));
  app.replaceChildren(...parts);
}

const VIEWS = {"/": viewRuns, "/run": viewRun, "/lineage": viewLineage, "/solution": viewSolution, "/population": viewPopulation, "/compare": viewCompare};
nav();
(VIEWS[location.pathname] || viewRuns)().then(() => document.body.setAttribute("data-ready", "1"))
  .catch(e => { fail(e); document.body.setAttribute("data-ready", "error"); });
