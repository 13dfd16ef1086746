// One solution: its fields, code, diffs, the prompt it came from, the raw completion, its GRPO group with the
// advantages the run recorded, its children, and the picture drawn from the artefact the run recorded.
import {Q, RUN, api, app, code, fmt, h, kv, sol, table, url, validity} from "./dom.js";

const GROUP_HEAD = ["sample", "solution", "reward", "validity", "advantage"];
const NO_TEXT = "The prompt's text is not recorded for this run (runs record it in prompts/epoch-N.jsonl since the run browser); "
  + "above: what it showed.";

function fields(s) {
  const time = s.eval_time_s === null ? "–" : s.eval_time_s.toFixed(3) + " s";
  return kv([["reward", s.reward], ["validity", validity(s.valid)], ["exact check", s.exact_label], ["epoch", s.epoch],
    ["operator", s.operator],
    ["evaluation time", time], ["parent", s.parent_id === null ? "none (the starter)" : sol(s.parent_id)],
    ["second parent", s.second_parent_id === null ? "–" : sol(s.second_parent_id)], ["prompt id", s.prompt_id],
    ["children", `${s.n_children}`]]);
}

function picture(s) {
  if (!s.picture.available) return s.picture.note ? [h("h2", {}, "Picture"), h("p", {cls: "note", id: "render"}, s.picture.note)] : [];
  const box = h("div", {id: "render"}, h("p", {}, "drawing…"));
  const img = h("img", {cls: "render", alt: "the task's drawing of this solution", src: url("/api/render", {run: RUN, id: s.id})});
  img.addEventListener("load", () => box.replaceChildren(img));
  img.addEventListener("error", () => box.replaceChildren(h("p", {cls: "note"}, "no drawing: the task's render.py failed")));
  return [h("h2", {}, "Picture (the task's render.py on the artefact the run recorded)"), box];
}

function dropped(p) {
  if (p.dropped === null) return "not recorded (metrics.jsonl has no prompt_dropped)";
  return p.dropped.length ? p.dropped.join("; ") : "nothing";
}

function prompt(p) {
  if (p.parent_id === null) return [h("p", {}, "The starter: no prompt.")];
  const ancestors = p.ancestors.map(a => [sol(a.id), ` (${a.valid ? fmt(a.reward, 4) : "invalid"}) `]);
  return [kv([["parent shown", sol(p.parent_id)], ["second parent shown", p.second_parent_id === null ? "–" : sol(p.second_parent_id)],
    ["ancestors shown", p.ancestors.length ? h("span", {}, ancestors) : "none"],
    ["other programs shown", p.others.length ? h("span", {}, p.others.map(a => [sol(a.id), " "])) : "–"],
    ["what it showed", p.source === "recorded" ? "recorded by the run" : "reconstructed from the archive and metrics.jsonl"],
    ["dropped by the token budget", dropped(p)]]),
  p.text === null ? h("p", {cls: "note"}, NO_TEXT) : h("pre", {id: "prompt"}, p.text)];
}

function advantage(m, recorded) {
  if (!recorded) return "not recorded";
  if (m.advantage !== null) return fmt(m.advantage, 4);
  return m.scored ? "no tokens in the update (truncated)" : "lost (infra)";
}

function group(s, g) {
  const est = g.estimator
    ? `; advantages as the update applied them (${g.estimator.name}, norm by std: ${g.estimator.norm_by_std})` : "";
  const who = m => m.id === s.id ? h("b", {}, `#${m.id} (this)`) : sol(m.id);
  const rows = g.members.map(m => h("tr", {}, h("td", {}, "g" + m.g), h("td", {}, who(m)), h("td", {cls: "num"}, fmt(m.reward)),
    h("td", {}, m.valid ? "valid" : "invalid"), h("td", {cls: "num"}, advantage(m, g.recorded))));
  return [h("h2", {}, "GRPO group (the siblings of one prompt)"), h("p", {}, g.prompt ? "prompt " + g.prompt + est : ""),
    g.note ? h("p", {cls: "note", id: "groupnote"}, g.note) : "",
    g.members.length ? h("table", {id: "group"}, h("tr", {}, GROUP_HEAD.map(c => h("th", {}, c))), rows) : ""];
}

function children(s) {
  if (!s.children.length) return [];
  const rows = s.children.map(c => [sol(c.id), c.epoch, c.reward, c.valid ? "valid" : "invalid", c.operator]);
  return [h("h2", {}, `Children (best ${s.children.length} of ${s.n_children})`),
    table(["solution", "epoch", "reward", "validity", "operator"], rows)];
}

export async function viewSolution() {
  const s = await api("solution", {run: RUN, id: Q.get("id")});
  const diffs = s.diffs.map(d => [h("h2", {}, `Diff against its ${d.label} #${d.id} (reward ${fmt(d.reward)})`),
    h("div", {cls: "diff"}, code(d.diff || "(no change)", "diff"))]);
  const completion = s.completion === null ? h("p", {}, "none recorded") : h("pre", {id: "completion"}, s.completion);
  app.replaceChildren(h("h1", {}, `Solution #${s.id}`), fields(s), h("h2", {}, "Feedback"), h("pre", {id: "feedback"}, s.feedback),
    h("h2", {}, "Code"), h("div", {id: "code"}, code(s.code, "python")), ...picture(s), ...diffs.flat(),
    h("h2", {}, "Metrics"), h("pre", {id: "metrics"}, JSON.stringify(s.metrics, null, 1)), h("h2", {}, "Prompt"), ...prompt(s.prompt),
    h("h2", {}, "Raw completion"), completion, ...group(s, s.group), ...children(s));
}
