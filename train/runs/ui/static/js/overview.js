// The run overview: per-epoch curves (live), the solutions table paged on the server, operators, config.
import {POLL_MS, RUN, api, app, chart, fmt, h, kv, sol, table, validity} from "./dom.js";

const OV_CHARTS = [
  ["reward", [["best_reward", "best so far"], ["reward_max", "max"], ["reward_mean", "mean"]]],
  ["children's outcomes (fraction)", [["valid_frac", "valid"], ["edit_fail_frac", "edit did not apply"],
    ["unchanged_frac", "unchanged"], ["repeat_frac", "repeat"], ["zero_std_frac", "zero-std groups"]]],
  ["KL and entropy", [["kl", "KL"], ["entropy", "entropy"]]],
  ["phase time (s)", [["gen_time_s", "generate"], ["eval_time_s", "evaluate"], ["train_time_s", "train"],
    ["weight_sync_time_s", "weight sync"], ["embed_select_time_s", "embed + select"], ["checkpoint_time_s", "checkpoint"]]],
];
const PAGE = 50;
const ORDERS = [["-id", "newest first"], ["-reward", "best first"], ["id", "oldest first"]];
const SOLUTION_HEAD = ["solution", "parent", "second parent", "epoch", "reward", "validity", "operator", "eval s"];
const OPERATOR_HEAD = ["epoch", "operator", "children", "program", "valid", "reward mean", "reward max", "new best"];

function charts(ov) {
  const box = h("div", {cls: "charts"}), built = [];
  for (const [title, keys] of OV_CHARTS) {
    const have = keys.filter(([k]) => ov.series[k]);
    if (!have.length || !ov.epoch.length) continue;
    const c = chart(title, ov.epoch, have.map(([k, label]) => ({label, data: ov.series[k]})));
    built.push([c, have]);
    box.append(c);
  }
  return [box, built];
}

function solutionRow(s) {
  const parent = id => id === null ? "–" : sol(id);
  return [sol(s.id), parent(s.parent_id), parent(s.second_parent_id), s.epoch, s.reward, validity(s.valid), s.operator, s.eval_time_s];
}

function solutionsTable() {
  const box = h("div", {id: "solutions"}), state = {offset: 0, order: "-id"};
  const order = h("select", {on: {change: e => { state.order = e.target.value; state.offset = 0; page(); }}},
    ORDERS.map(([v, l]) => h("option", {value: v}, l)));
  const go = delta => { state.offset = Math.max(0, state.offset + delta); page(); };
  async function page() {
    const d = await api("solutions", {run: RUN, offset: state.offset, limit: PAGE, order: state.order});
    const shown = `${d.total ? state.offset + 1 : 0}–${Math.min(state.offset + PAGE, d.total)} of ${d.total}`;
    box.replaceChildren(h("div", {cls: "pager"}, order,
      h("button", {disabled: state.offset === 0 ? "" : null, on: {click: () => go(-PAGE)}}, "◀ prev"), shown,
      h("button", {disabled: state.offset + PAGE >= d.total ? "" : null, on: {click: () => go(PAGE)}}, "next ▶")),
    table(SOLUTION_HEAD, d.rows.map(solutionRow)));
  }
  return {box, page, first: () => state.offset === 0};
}

function header(head, ov) {
  const best = ov.best ? h("span", {}, sol(ov.best.id), ` reward ${fmt(ov.best.reward, 10)} (epoch ${ov.best.epoch}; ${ov.best.exact})`)
    : "no valid solution yet";
  const rows = [["status", h("span", {cls: "status-" + ov.status}, ov.status)],
    ["epochs logged", ov.epoch.length ? ov.epoch[ov.epoch.length - 1] : "none"], ["solutions", ov.solutions], ["best", best]];
  const ex = ov.best_exact, held = ov.heldout;
  if (ex) rows.push(["best that holds exactly", h("span", {}, sol(ex.id), ` reward ${fmt(ex.reward, 10)} (epoch ${ex.epoch})`)]);
  if (held) rows.push(["held out", h("span", {id: "heldout"}, sol(held.solution_id),
    ` reward ${held.valid ? fmt(held.reward, 10) : "0 (" + held.status + ")"} on ${held.about}`)]);
  head.replaceChildren(kv(rows), ov.notes.map(n => h("p", {cls: "note"}, "Note: " + n)));
}

function operators(ov) {
  if (!ov.operators.length) return h("p", {}, "no operator metrics logged");
  return table(OPERATOR_HEAD, ov.operators.map(r => [r.epoch, r.operator, r.children, r.program_frac, r.valid_frac,
    r.reward_mean, r.reward_max, r.new_best_frac]));
}

function poll(head, built, solutions) {
  setInterval(async () => {  // live: new epochs and new solutions while the run goes
    const live = document.getElementById("live");
    try {
      const nv = await api("overview", {run: RUN});
      for (const [box, have] of built) box.plot.setData([nv.epoch, ...have.map(([k]) => nv.series[k] || nv.epoch.map(() => null))]);
      header(head, nv);
      if (solutions.first()) await solutions.page();
      live.textContent = "live · updated " + new Date().toLocaleTimeString();
    } catch (e) { live.textContent = "update failed: " + e.message; }
  }, POLL_MS);
}

export async function viewRun() {
  const ov = await api("overview", {run: RUN});
  const head = h("div", {id: "ovhead"});
  const [chartBox, built] = charts(ov);
  const solutions = solutionsTable();
  header(head, ov);
  app.replaceChildren(h("h1", {}, "Run " + (RUN || "(this folder)")), head, h("h2", {}, "Per-epoch curves (metrics.jsonl)"),
    chartBox, h("h2", {}, "Solutions"), solutions.box, h("h2", {}, "Operators"), operators(ov),
    h("h2", {}, "Config"), table(["key", "value"], ov.config));
  await solutions.page();
  poll(head, built, solutions);
}
