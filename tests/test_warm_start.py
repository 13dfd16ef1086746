"""The warm start: synthetic edits that apply, a loss equal to the plain answer NLL, a cached
derived model keyed by its recipe, and no-op children recognised in the loop."""

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rollout.edits import child_program
from tasks import load_task
from train.warm_start_data import Mutation, _numbers, answer_for, mutate

TASKS = ["circle_packing_26", "keane_bump_10", "symreg_chemistry", "eggholder"]


@pytest.mark.parametrize("name", TASKS)
def test_every_mutation_answer_rebuilds_its_child_through_the_loops_own_parser(name):
    code = load_task(name).initial_program
    rng = np.random.default_rng(7)
    made = 0
    for _ in range(60):
        m = mutate(code, rng)
        if m is None or m.code == code:
            continue
        made += 1
        answer = answer_for(code, m)
        assert answer.startswith("<think>\n") and answer.endswith("</answer>")
        assert child_program(code, answer, load_task(name).entry_function) == m.code  # what the loop will do
    assert made >= 40


def test_numeric_mutations_stay_inside_the_evolve_block_and_change_only_numbers():
    code = load_task("circle_packing_26").initial_program
    start, end = code.index("# EVOLVE-BLOCK-START"), code.index("# EVOLVE-BLOCK-END")
    rng = np.random.default_rng(3)
    for _ in range(40):
        m = mutate(code, rng, line_prob=0.0)
        assert m.code[:start] == code[:start]
        assert m.code[m.code.index("# EVOLVE-BLOCK-END"):] == code[end:]
        # Same text once every number is masked: only literals changed.
        assert re.sub(r"\d+\.?\d*", "#", m.code) == re.sub(r"\d+\.?\d*", "#", code)
        assert re.fullmatch(r"Try (\S+ -> \S+)(, \S+ -> \S+)*\.", m.reason)


def test_numbers_found_are_the_literals_of_the_block():
    code = 'x = 1\n# EVOLVE-BLOCK-START\ny = 0.25 * 3\nz = "7"\n# EVOLVE-BLOCK-END\nw = 9\n'
    assert [t for _, _, t in _numbers(code)] == ["0.25", "3"]  # not 1 or 9 (outside), not "7" (a string)


def test_answer_for_refuses_a_child_that_make_diff_cannot_carry():
    with pytest.raises(ValueError):
        answer_for("a = 1\n", Mutation("=======\n", "bad"))


def test_cached_prompt_loss_equals_the_plain_answer_nll(tiny_model):
    from train.warm_start import Example, _loss

    rng = np.random.default_rng(0)
    prompt = rng.integers(100, 5000, 53).tolist()
    answers = [rng.integers(100, 5000, n).tolist() + [2] for n in (9, 4, 15)]
    examples = [Example("t", 0, prompt, "", a) for a in answers]
    tiny_model.eval()
    got = _loss(tiny_model, examples, pad_id=2)
    with torch.no_grad():
        total, count = 0.0, 0
        for a in answers:
            logits = tiny_model(input_ids=torch.tensor([prompt + a])).logits[0, len(prompt) - 1 : -1].float()
            total -= torch.log_softmax(logits, -1).gather(-1, torch.tensor(a)[:, None]).sum().item()
            count += len(a)
    assert got.item() == pytest.approx(total / count, rel=1e-5)
    got.backward()
    grads = [p.grad for p in tiny_model.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)


def _cfg(tmp_path, **ws):
    from train.config import load_config

    overrides = [f"model.cache_dir={tmp_path / 'cache'}", "model.policy=tiny-random", "warm_start.enabled=true",
                 "warm_start.parents=2", "warm_start.answers_per_parent=3", "warm_start.epochs=2", "warm_start.lr=1e-3",
                 "warm_start.bf16=false", "rollout.max_prompt_tokens=2048", "rollout.description=brief", "task.eval_workers=2"]
    overrides += [f"warm_start.{k}={v}" for k, v in ws.items()]
    return load_config(None, overrides)


@pytest.mark.slow
def test_a_warm_start_is_built_once_cached_and_keyed_by_its_recipe(tmp_path):
    from train.warm_start import ensure_warm_start, policy_source, warm_start_dir

    cfg = _cfg(tmp_path)
    out = ensure_warm_start(cfg, progress=False)
    summary = json.loads((out / "warm_start.json").read_text())
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert summary["parents"] == 2 and summary["examples"] == 6 and summary["tasks"] == ["circle_packing_26"]
    assert summary["loss_last"] < summary["loss_first"]  # four steps at lr 1e-3 on six answers
    rows = [json.loads(line) for line in (out / "warm_start_data.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all("<<<<<<< SEARCH" in r["answer"] for r in rows)
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert policy_source(cfg) == str(out)
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp  # found, not rebuilt
    assert warm_start_dir(_cfg(tmp_path, lr=2e-3)) != out  # another recipe is another model
    cfg.warm_start.enabled = False
    assert policy_source(cfg) == "tiny-random"


class _NoRun:
    def evaluate_many(self, codes, progress=False):
        assert not codes, "a no-op child must not be run"
        return []


def test_a_child_that_changes_nothing_is_unchanged_not_a_program():
    from train.children import UNCHANGED, evaluate_children

    task = load_task("circle_packing_26")
    parent = task.initial_program
    noop = ("<answer>\n<<<<<<< SEARCH\n    n = 26\n=======\n    n = 26  # keep the count\n>>>>>>> REPLACE\n</answer>")
    job = SimpleNamespace(parent_id=4, parent_code=parent, index=0, tag=2)
    (child,) = evaluate_children(task, _NoRun(), [job], [[([1], noop, False)]], epoch=3, progress=False)
    assert not child.is_program and child.tag == 2 and child.parent_id == 4 and child.prompt_id == "e3-p0-g0"
    assert child.reward == 0.0 and child.feedback == UNCHANGED and child.metrics == {"unchanged": 1.0}
    assert child.code != parent  # the comment is kept in the archive; canonically it is the parent
