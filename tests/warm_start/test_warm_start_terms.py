"""The warm start's opt-in "add a fitted term" edits (task.yaml ``warm_start_mutations: [terms]``):
what they write, where, with which coefficients, and that they leave every other task's warm start alone."""

import dataclasses
import re

import numpy as np
import pytest

from rollout.edits import child_program
from tasks import load_task
from train.warm_start.data import EXTRA, _term_mutation, answer_for, mutate

RESULT = "    result = x[:, 0] * params[0] + x[:, 1] * params[1]\n"


def test_a_term_is_a_copy_of_one_term_times_one_variable_with_the_next_coefficient():
    code = load_task("symreg_physics").initial_program
    rng = np.random.default_rng(0)
    grown = {_term_mutation(code, rng).code for _ in range(60)}
    # 2 terms x 2 variables; the coefficient is params[2], the first index the program does not use
    assert grown == {code.replace(RESULT, RESULT.rstrip("\n") + f" + {term}\n") for term in (
        "x[:, 0] * params[2] * x[:, 0]", "x[:, 0] * params[2] * x[:, 1]",
        "x[:, 1] * params[2] * x[:, 0]", "x[:, 1] * params[2] * x[:, 1]")}


def test_only_the_simplest_terms_are_copied():
    line = "    result = x[:, 0] * params[0] + x[:, 1] * params[1] + x[:, 0] * params[2] * x[:, 0]\n"
    code = load_task("symreg_physics").initial_program.replace(RESULT, line)
    rng = np.random.default_rng(2)
    added = {_term_mutation(code, rng).reason for _ in range(60)}
    assert added == {f"Add a term: x[:, {i}] * params[3] * x[:, {j}]." for i in (0, 1) for j in (0, 1)}


def test_every_coefficient_of_the_copied_term_is_fresh_and_the_line_keeps_its_comment():
    code = ("import numpy as np\n# EVOLVE-BLOCK-START\ndef func(x, params):\n"
            "    y = params[0] * x[:, 0] * params[3] - 2.5 * np.exp(x[:, 1])  # größe\n"
            "    return y\n# EVOLVE-BLOCK-END\n")
    rng = np.random.default_rng(1)
    lines = {_term_mutation(code, rng).code.splitlines()[3] for _ in range(80)}
    # the fitted term gets params[4] and params[5] (params[3] is the highest in use); the constant 2.5 is
    # neither a variable nor a coefficient, so the variables are x[:, 0] and np.exp(x[:, 1])
    assert lines == {"    y = params[0] * x[:, 0] * params[3] - 2.5 * np.exp(x[:, 1])"
                     f" + params[4] * x[:, 0] * params[5] * {v}  # größe" for v in ("x[:, 0]", "np.exp(x[:, 1])")}


@pytest.mark.parametrize("code", [
    # no fitted coefficient on the line
    "# EVOLVE-BLOCK-START\ndef f(x):\n    return x[:, 0] * 2.0 + x[:, 1]\n# EVOLVE-BLOCK-END\n",
    # the sum is outside the EVOLVE block
    "def f(x, params):\n    return x[:, 0] * params[0] + x[:, 1]\n# EVOLVE-BLOCK-START\nK = 3\n# EVOLVE-BLOCK-END\n",
    # "expr | term" would bind the new term to the wrong operand
    "# EVOLVE-BLOCK-START\ndef f(x, params):\n    return x[:, 0] * params[0] | x[:, 1]\n# EVOLVE-BLOCK-END\n",
    # a statement over two lines
    "# EVOLVE-BLOCK-START\ndef f(x, params):\n    return (x[:, 0] * params[0]\n            + x[:, 1])\n# EVOLVE-BLOCK-END\n",
    "def f(:\n",  # not Python
])
def test_no_term_is_added_where_there_is_no_single_line_sum_of_fitted_terms(code):
    assert _term_mutation(code, np.random.default_rng(0)) is None


@pytest.mark.parametrize("name", ["circle_packing_26", "keane_bump_10", "eggholder"])
def test_tasks_that_do_not_opt_in_keep_their_draws_and_have_no_site_anyway(name):
    task = load_task(name)
    code = task.initial_program
    assert task.warm_start_mutations == () and _term_mutation(code, np.random.default_rng(0)) is None
    plain, opted = np.random.default_rng(5), np.random.default_rng(5)
    assert [mutate(code, plain) for _ in range(30)] == [mutate(code, opted, extra=()) for _ in range(30)]


def test_the_symreg_tasks_opt_in_and_their_term_answers_rebuild_the_child_through_the_loops_parser():
    for name in ("symreg_physics", "symreg_chemistry", "symreg_biology"):
        task = load_task(name)
        assert task.warm_start_mutations == ("terms",)
        rng, kinds = np.random.default_rng(3), set()
        for _ in range(40):
            m = mutate(task.initial_program, rng, extra=task.warm_start_mutations)
            if m is None or m.code == task.initial_program:
                continue
            kinds.add(m.reason.split(":")[0].split(" ")[0])
            assert child_program(task.initial_program, answer_for(task.initial_program, m), task.entry_function) == m.code
        assert {"Add", "Try"} <= kinds  # terms among the numeric (and line) edits


def test_the_task_contract_and_the_warm_start_know_the_same_kinds():
    from tasks.base import WARM_START_MUTATIONS

    assert set(EXTRA) == set(WARM_START_MUTATIONS)  # task.yaml is checked against one, mutate draws from the other


def test_grown_programs_grow_again_but_never_multiply_up(tmp_path, tokenizer, monkeypatch):
    """Parents may hold grown terms and still get "Add a term" answers (so the policy sees a longer line
    grow), but a copied term is always one of the simplest: no target has a term of degree 3, which two
    growths of a grown term would give (and which is symreg_physics' law)."""
    import train.loop.task_tools as task_tools
    from rewards.evaluator import Evaluation
    from train.config.config import load_config, warm_start_inputs
    from train.warm_start.build import cache_key, make_examples

    class _AllValid:
        timeout_s = 20.0

        def __init__(self, *args, **kwargs):
            pass

        def evaluate(self, code):
            return Evaluation(reward=0.1216117816, valid=True, feedback="ok")

        def evaluate_many(self, codes, progress=False):
            return [self.evaluate(c) for c in codes]

        def close(self):
            pass

    monkeypatch.setattr(task_tools, "Evaluator", _AllValid)  # the run's evaluator, as the warm start borrows it
    run = load_config(None, [f"model.cache_dir={tmp_path}", "model.policy=tiny-random", "warm_start.enabled=true",
                             "task.name=symreg_physics", "warm_start.parents=8", "warm_start.answers_per_parent=6",
                             "rollout.max_prompt_tokens=2048", "rollout.description=brief"])
    cfg = warm_start_inputs(run)
    examples, _ = make_examples(cfg, task_tools.tools_for(run, tokenizer), np.random.default_rng(0), say=lambda _: None)
    grown_term = re.compile(r"params\[\d\] \* x\[")  # "x[:, i] * params[k] * x[:, j]"
    grown_parent = {e.parent: bool(grown_term.search(tokenizer.decode(e.prompt_ids).split("## Current Program")[1]))
                    for e in examples}
    growing = [e for e in examples if e.answer.startswith("<think>\nAdd a term:")]
    assert 0 < sum(grown_parent.values()) < len(grown_parent)  # some parents hold a grown term, some do not
    assert any(grown_parent[e.parent] for e in growing) and any(not grown_parent[e.parent] for e in growing)
    starter = [e.answer for e in examples if e.parent == 0]  # the prompt every run starts from
    assert len(starter) == 6 and any(a.startswith("<think>\nAdd a term:") for a in starter)
    for e in examples:
        terms = e.answer.split("=======\n")[1].splitlines()[0].split(" + ")
        assert max(t.count("x[:, ") for t in terms) == (2 if e in growing or grown_parent[e.parent] else 1), e.answer
    # the opt-in is part of the cache key: dropping it would be another model
    key = cache_key(cfg)
    plain = dataclasses.replace(load_task("symreg_physics"), warm_start_mutations=())
    monkeypatch.setattr("tasks.load_task", lambda name: plain)
    assert cache_key(cfg) != key
