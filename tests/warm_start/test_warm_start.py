"""The warm start: synthetic edits that apply, a loss equal to the plain answer NLL, a cached
derived model keyed by its recipe, and no-op children recognised in the loop."""

import dataclasses
import json
import re

import numpy as np
import pytest
import torch

from rollout.edits import child_program
from rollout.operators import make_operator
from tasks import load_task
from train.config.config import load_config, warm_start_inputs
from train.loop.task_tools import tools_for
from train.warm_start.data import Mutation, _line_mutation, _numbers, answer_for, combine, mutate

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


_DOCUMENTED = (
    "import numpy as np\n"
    "# EVOLVE-BLOCK-START\n"
    "def func(x, params):\n"
    '    """Two terms.\n'
    "\n"
    "    Args:\n"
    "        x (np.ndarray): shape (n, 2).\n"
    '    """\n'
    "    # the linear part\n"
    "    a = x[:, 0] * params[0]\n"
    "    b = -x[:, 1] / params[1]\n"
    "    c = a + b ** 2\n"
    "    return -c\n"
    "# EVOLVE-BLOCK-END\n"
)


def test_line_mutations_touch_statements_only_never_a_docstring_or_comment_line():
    # Dropping "x (np.ndarray): ..." out of a docstring is canonically no change at all: the symreg
    # warm start of recipe version 1 taught exactly that, and its policy wrote nothing else.
    lines = _DOCUMENTED.splitlines(keepends=True)
    rng = np.random.default_rng(0)
    removed, swapped = set(), 0
    for _ in range(200):
        m = _line_mutation(_DOCUMENTED, rng)
        if m is None:
            continue
        after = m.code.splitlines(keepends=True)
        if m.reason == "Remove a line.":
            (gone,) = [line for line in lines if line not in after]
            removed.add(gone.strip())
        else:
            swapped += 1
            assert sorted(after) == sorted(lines)
    assert removed == {"a = x[:, 0] * params[0]", "b = -x[:, 1] / params[1]", "c = a + b ** 2"}
    assert swapped > 0


def test_the_warm_start_never_targets_a_child_that_is_its_parent_again(monkeypatch):
    import train.warm_start.data as data
    from rewards.evaluator import Evaluation
    from train.warm_start.build import _valid_children

    comment_only = _DOCUMENTED.replace("# the linear part", "# the first part")
    docstring_only = _DOCUMENTED.replace("        x (np.ndarray): shape (n, 2).\n", "")
    real = _DOCUMENTED.replace("b ** 2", "b ** 3")
    draws = iter([Mutation(comment_only, "c"), Mutation(docstring_only, "d"), Mutation(real, "r")])
    monkeypatch.setattr(data, "mutate", lambda code, rng, extra=(): next(draws))

    class _AllValid:
        def evaluate_many(self, codes, progress=False):
            self.codes = codes
            return [Evaluation(reward=2.6359830849, valid=True, feedback="ok") for _ in codes]

    evaluator = _AllValid()
    kept, drawn, valid = _valid_children(evaluator, _DOCUMENTED, np.random.default_rng(0), 8, 3, set())
    assert [m.code for m, _ in kept] == [real] and evaluator.codes == [real]  # the no-ops are not even run
    assert (drawn, valid) == (1, 1)


def test_answer_for_refuses_a_child_that_make_diff_cannot_carry():
    with pytest.raises(ValueError):
        answer_for("a = 1\n", Mutation("=======\n", "bad"))


@pytest.mark.parametrize("operator", ["rewrite", "crossover"])
def test_whole_program_answers_rebuild_their_child_through_the_operator(operator):
    task = load_task("circle_packing_26")
    code, rng = task.initial_program, np.random.default_rng(11)
    children = [m for m in (mutate(code, rng) for _ in range(20)) if m is not None and m.code != code]
    assert len(children) >= 10
    for m in children:
        answer = answer_for(code, m, operator, task.entry_function)
        assert "<<<<<<< SEARCH" not in answer and answer.count("```") == 2
        assert make_operator(operator, task.entry_function).child(code, answer) == m.code


def test_answer_for_refuses_best_shot_and_unknown_operators():
    m = Mutation("def f():\n    return 2\n", "Try 1 -> 2.")
    for operator in ("best_shot", "mutate"):
        with pytest.raises(ValueError, match="no warm-start answers"):
            answer_for("def f():\n    return 1\n", m, operator, "f")


def test_combine_carries_both_changes_or_refuses_a_clash():
    root = "a = 1.0\nb = 2.0\nc = 3.0\nd = 4.0\ne = 5.0\nf = 6.0\ng = 7.0\n"
    first = root.replace("a = 1.0", "a = 1.1")
    second = root.replace("g = 7.0", "g = 6.5")
    both = combine(root, first, second)
    assert both.code == root.replace("a = 1.0", "a = 1.1").replace("g = 7.0", "g = 6.5")
    assert combine(root, first, root.replace("a = 1.0", "a = 0.9")) is None  # same line: no merge
    assert combine(root, first, first) is None  # nothing of B's is new


@pytest.mark.parametrize("mix, n, plan", [
    ({"edit": 1.0}, 8, ["edit"] * 8),
    # 8 x (0.4, 0.2, 0.2) / 0.8 = 4, 2, 2; crossover never teaches on the starter (prompt 0)
    ({"edit": 0.4, "rewrite": 0.2, "crossover": 0.2}, 8, ["edit", "crossover", "crossover", "edit", "edit", "edit",
                                                          "rewrite", "rewrite"]),
    # 5.6, 1.6, 0.8 -> 5, 1, 1 (at least one each), then the most under-served: rewrite (0.6 short) ties
    # edit (0.6) and the mix's first wins: 6, 1, 1
    ({"edit": 0.7, "rewrite": 0.2, "crossover": 0.1}, 8, ["edit", "crossover"] + ["edit"] * 5 + ["rewrite"]),
    ({"edit": 0.3, "rewrite": 0.3, "crossover": 0.3}, 2, ["rewrite", "crossover"]),
])
def test_operator_plan_gives_each_operator_its_share_of_the_prompts(mix, n, plan):
    from train.warm_start.build import operator_plan

    assert operator_plan(mix, n) == plan


def test_the_warm_start_key_changes_only_when_it_teaches_another_operator(tmp_path):
    from train.warm_start.build import cache_key

    def key(mix):
        return cache_key(_inputs(tmp_path, operators=mix))

    base = key({"edit": 1.0})
    assert key({"edit": 0.8, "best_shot": 0.2}) == base  # best_shot answers are not taught: same model
    assert key({"edit": 0.8, "rewrite": 0.2}) != base
    assert key({"edit": 0.8, "rewrite": 0.2}) != key({"edit": 0.8, "crossover": 0.2})


def test_the_key_names_the_tasks_as_resolved_not_as_written(tmp_path):
    """warm_start.tasks naming the run's own task is the default warm start (one cache, not two); several
    tasks are keyed in their order, however they are spaced."""
    from train.warm_start.build import cache_key

    default = cache_key(_inputs(tmp_path))  # the run's task: circle_packing_26
    assert cache_key(_inputs(tmp_path, tasks="circle_packing_26")) == default
    both = cache_key(_inputs(tmp_path, tasks="circle_packing_26,keane_bump_10"))
    assert both not in (default, cache_key(_inputs(tmp_path, tasks="keane_bump_10")))
    assert cache_key(_inputs(tmp_path, tasks="circle_packing_26, keane_bump_10")) == both
    assert cache_key(_inputs(tmp_path, tasks="keane_bump_10,circle_packing_26")) != both


def test_mixed_operator_examples_show_each_operators_prompt_and_answer(tmp_path, tokenizer):
    from train.warm_start.build import make_examples

    cfg = _config(tmp_path, {"edit": 0.5, "rewrite": 0.25, "crossover": 0.25}, parents=4, answers_per_parent=2)
    examples, stats = make_examples(warm_start_inputs(cfg), tools_for(cfg, tokenizer), np.random.default_rng(0),
                                    say=lambda _: None)
    by_parent = {}
    for e in examples:
        by_parent.setdefault(e.parent, []).append(e)
    prompts = {p: tokenizer.decode(es[0].prompt_ids) for p, es in by_parent.items()}
    assert stats["operators"] == {"edit": 2, "crossover": 1, "rewrite": 1}, stats  # 4 x (0.5, 0.25, 0.25)
    assert sum("## Program B" in t for t in prompts.values()) == 1
    for p, es in by_parent.items():
        whole = ["```python" in e.answer for e in es]
        assert len(set(whole)) == 1  # one prompt, one operator
        if "## Program B" in prompts[p]:  # crossover: the first target carries both parents' changes
            assert whole[0] and es[0].answer.startswith("<think>\nKeep A's change and add B's.")
        elif whole[0]:
            assert "replaces the current program whole" in prompts[p]
        else:
            assert all("<<<<<<< SEARCH" in e.answer for e in es) and "SEARCH" in prompts[p]


def test_cached_prompt_loss_equals_the_plain_answer_nll(tiny_model):
    import contextlib

    from train.learner.supervised import Answer, accumulate_prompt

    rng = np.random.default_rng(0)
    prompt = rng.integers(100, 5000, 53).tolist()
    answers = [rng.integers(100, 5000, n).tolist() + [2] for n in (9, 4, 15)]
    examples = [Answer(prompt, a, 0) for a in answers]
    tiny_model.eval()
    tiny_model.zero_grad(set_to_none=True)
    got = accumulate_prompt(tiny_model, examples, 2, len(examples), contextlib.nullcontext())  # one pass, backward done
    with torch.no_grad():
        total, count = 0.0, 0
        for a in answers:
            logits = tiny_model(input_ids=torch.tensor([prompt + a])).logits[0, len(prompt) - 1 : -1].float()
            total -= torch.log_softmax(logits, -1).gather(-1, torch.tensor(a)[:, None]).sum().item()
            count += len(a)
    assert got == pytest.approx(total / count, rel=1e-5)
    grads = [p.grad for p in tiny_model.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("per_pass", [1, 2, 3])
def test_answers_in_passes_give_the_one_pass_loss_and_gradient(tiny_model, per_pass):
    """warm_start.answers_per_pass: the prompt's cache is shared by every pass (computed once, read only),
    each pass adds its share of the token-weighted mean, so loss and gradient are the one-pass ones (checked
    against the plain answer NLL by the test above); a cache that kept a pass's answers would shift the later
    passes' positions and fail this."""
    import contextlib

    from train.learner.supervised import Answer, accumulate_prompt

    rng = np.random.default_rng(1)
    prompt = rng.integers(100, 5000, 41).tolist()
    answers = [rng.integers(100, 5000, n).tolist() + [2] for n in (9, 4, 15, 7, 11)]
    examples = [Answer(prompt, a, 0) for a in answers]
    tiny_model.eval()
    tiny_model.zero_grad(set_to_none=True)
    whole = accumulate_prompt(tiny_model, examples, 2, len(examples), contextlib.nullcontext())  # one pass
    reference = {n: p.grad.clone() for n, p in tiny_model.named_parameters() if p.grad is not None}
    tiny_model.zero_grad(set_to_none=True)
    got = accumulate_prompt(tiny_model, examples, 2, per_pass, contextlib.nullcontext())
    assert got == pytest.approx(whole, rel=1e-6)
    grads = {n: p.grad for n, p in tiny_model.named_parameters() if p.grad is not None}
    assert grads.keys() == reference.keys()
    for name, g in grads.items():
        torch.testing.assert_close(g, reference[name], rtol=1e-4, atol=1e-7, msg=name)
    tiny_model.zero_grad(set_to_none=True)


def _inputs(tmp_path, operators: dict | None = None, **ws):
    """The warm start's inputs as a run with these settings gathers them."""
    return warm_start_inputs(_config(tmp_path, operators, **ws))


def _config(tmp_path, operators: dict | None = None, **ws):
    """A run's config with a small warm start of tiny-random."""
    overrides = [f"model.cache_dir={tmp_path / 'cache'}", "model.policy=tiny-random", "warm_start.enabled=true",
                 "warm_start.parents=2", "warm_start.answers_per_parent=3", "warm_start.epochs=2", "warm_start.lr=1e-3",
                 "warm_start.dtype=float32", "rollout.max_prompt_tokens=2048", "rollout.description=brief", "task.eval_workers=2"]
    overrides += [f"warm_start.{k}={v}" for k, v in ws.items()]
    overrides += [f"evolution.operators={json.dumps(operators)}"] if operators else []
    return load_config(None, overrides)


@pytest.mark.slow
def test_a_warm_start_is_built_once_cached_and_keyed_by_its_recipe(tmp_path, monkeypatch):
    from train.learner import supervised
    from train.learner.models import load_tokenizer
    from train.warm_start.build import built_policy_source, ensure_warm_start, policy_source, warm_start_dir

    def not_here(*args, **kwargs):
        raise AssertionError("the fine-tune must run in the build's child process, not in the run's")

    monkeypatch.setattr(supervised, "fine_tune", not_here)  # the spawned child imports its own, unpatched
    cfg = _config(tmp_path)
    inputs, lend = warm_start_inputs(cfg), tools_for(cfg, load_tokenizer("tiny-random"))
    with pytest.raises(FileNotFoundError, match="is not in the cache .* build it with `python train/helix.py warm-start"):
        built_policy_source(inputs)  # an export finds the run's warm start; it never builds one
    out = ensure_warm_start(inputs, lend, progress=False)
    summary = json.loads((out / "warm_start.json").read_text())
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert summary["parents"] == 2 and summary["examples"] == 6 and summary["tasks"] == ["circle_packing_26"]
    assert summary["loss_last"] < summary["loss_first"]  # four steps at lr 1e-3 on six answers
    rows = [json.loads(line) for line in (out / "warm_start_data.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all("<<<<<<< SEARCH" in r["answer"] for r in rows)
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert policy_source(inputs, lend) == str(out) == built_policy_source(inputs)
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp  # found, not rebuilt
    assert warm_start_dir(_inputs(tmp_path, lr=2e-3)) != out  # another recipe is another model
    off = dataclasses.replace(inputs, recipe=dataclasses.replace(inputs.recipe, enabled=False))
    assert policy_source(off, lend) == "tiny-random" == built_policy_source(off)


class _NoRun:
    def evaluate_many(self, codes, progress=False):
        assert not codes, "a no-op child must not be run"
        return []


def test_a_child_that_changes_nothing_is_unchanged_not_a_program():
    from rollout.engine_api import Completion
    from train.loop.children import UNCHANGED, Job, evaluate_children

    task = load_task("circle_packing_26")
    parent = task.initial_program
    noop = ("<answer>\n<<<<<<< SEARCH\n    n = 26\n=======\n    n = 26  # keep the count\n>>>>>>> REPLACE\n</answer>")
    job = Job(index=0, parent_id=4, parent_code=parent, token_ids=[1], tag=2)
    (child,) = evaluate_children(task, _NoRun(), [job], [[Completion([1], noop, False)]], epoch=3, progress=False)
    assert not child.is_program and child.tag == 2 and child.parent_id == 4 and child.prompt_id == "e3-p0-g0"
    assert child.reward == 0.0 and child.feedback == UNCHANGED and child.metrics == {"unchanged": 1.0}
    assert child.code != parent  # the comment is kept in the archive; canonically it is the parent


def test_auto_dtype_trains_in_bf16_only_on_a_cpu_with_native_bf16_and_keys_the_cache_by_it(tmp_path, monkeypatch):
    """On an AVX2-only CPU torch emulates bf16, and a training step is 22x slower than in fp32: auto must pick fp32 there,
    and a model fine-tuned in one dtype must not be reused for the other."""
    import train.warm_start.build as ws

    real_check = ws.cpu_has_native_bf16  # before the monkeypatch below replaces it
    inputs = _inputs(tmp_path, dtype="auto")
    keys = {}
    for native, expected in [(True, "bfloat16"), (False, "float32")]:
        monkeypatch.setattr(ws, "cpu_has_native_bf16", lambda native=native: native)
        assert ws.autocast_dtype("auto") == expected
        assert ws.autocast_dtype("float32") == "float32" and ws.autocast_dtype("bfloat16") == "bfloat16"
        keys[expected] = ws.cache_key(inputs)
    assert keys["bfloat16"] != keys["float32"]
    # an explicit dtype and the auto that resolves to it build the same weights, so they share a cache entry
    assert ws.cache_key(_inputs(tmp_path, dtype="float32")) == keys["float32"]
    assert real_check() == bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())  # on this machine, either way


def test_the_old_bf16_switch_is_refused_with_the_new_key_named(tmp_path):
    from train.config.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="dtype"):
        load_config(None, ["warm_start.bf16=false"])
