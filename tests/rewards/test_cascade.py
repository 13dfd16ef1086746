"""Cascade evaluation: a cheap stage-1 check in the sandbox, the full run only if it passes."""

import textwrap

import pytest

from rewards import Evaluator
from tasks import load_task
from tests.helpers.task_copies import copy_task, load_error

CHEM = load_task("symreg_chemistry")
TRUE = """
import numpy as np

def func(x, params):
    t, a = x[:, 0], x[:, 1]
    return -params[0] * a**2 - params[1] * a * np.exp(-params[2] * t)
"""


@pytest.fixture()
def tasks_dir(tmp_path, monkeypatch):
    """symreg_chemistry copied as `copy`, in a private tasks/ folder with the shared harness."""
    return copy_task(CHEM, "symreg", tmp_path, monkeypatch)


def test_symreg_tasks_use_the_cascade_and_the_evaluator_can_switch_it():
    assert CHEM.cascade_entry == "helix_sanity_check" and CHEM.cascade_timeout_s == 5
    assert Evaluator(CHEM).cascade and not Evaluator(CHEM, cascade=False).cascade
    assert not Evaluator(CHEM, timeout_s=5).cascade  # a stage 1 as long as the full run only adds cost
    fmin = load_task("eggholder")
    assert fmin.cascade_entry is None and not Evaluator(fmin).cascade
    with pytest.raises(ValueError, match="defines no cascade"):
        Evaluator(fmin, cascade=True)


def test_a_program_failing_fast_is_rejected_at_stage_1():
    wrong = "import numpy as np\ndef func(x, params):\n    return x[:3, 0]\n"
    cascaded = Evaluator(CHEM, workers=1).evaluate(wrong)
    assert not cascaded.valid and cascaded.reward == 0 and cascaded.status == "error"
    assert "rejected at stage 1 of the cascade" in cascaded.feedback and "was skipped" in cascaded.feedback
    assert "must return shape (400,)" in cascaded.feedback
    plain = Evaluator(CHEM, workers=1, cascade=False).evaluate(wrong)
    assert plain.status == "error" and "stage 1" not in plain.feedback and "must return shape (400,)" in plain.feedback


def test_a_hanging_program_costs_the_stage_1_limit_not_the_full_one(tasks_dir):
    spec = tasks_dir / "task.yaml"
    spec.write_text(spec.read_text().replace("cascade_timeout_s: 5", "cascade_timeout_s: 1"))
    task = load_task("copy")
    hang = "import time\ndef func(x, params):\n    time.sleep(60)\n    return x[:, 0]\n"
    result = Evaluator(task, workers=1, timeout_s=30).evaluate(hang)
    assert result.status == "timeout" and "rejected at stage 1" in result.feedback and "1 s limit" in result.feedback
    assert result.eval_time_s < 10


def test_a_valid_program_gets_the_same_reward_with_and_without_the_cascade():
    code = textwrap.dedent(TRUE)
    with_cascade = Evaluator(CHEM, workers=1).evaluate(code)
    without = Evaluator(CHEM, workers=1, cascade=False).evaluate(code)
    assert with_cascade.valid and with_cascade.reward == without.reward > 9
    assert with_cascade.metrics == without.metrics and "stage 1" not in with_cascade.feedback


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("cascade_timeout_s: 5", "cascade_timeout_s: 60"), ["must be below 'timeout_s'"]),
    (lambda t: t.replace("cascade_timeout_s: 5", "cascade_timeout_s: 25"), ["(25) must be below 'cpu_timeout_s' (20)"]),
    (lambda t: t.replace("cascade_timeout_s: 5", ""), ["'cascade_entry' needs 'cascade_timeout_s'"]),
    (lambda t: t.replace("cascade_entry: helix_sanity_check", "cascade_entry: check"), ["does not define check()"]),
    (lambda t: t.replace("harness: families/symreg/harness.py", "").replace("harness_entry: helix_fit_and_predict", ""),
     ["'cascade_entry' names a function of the harness"]),
    (lambda t: t.replace("cascade_timeout_s: 5", "cascade_timeout_s: -1"), ["'cascade_timeout_s' must be a number > 0"]),
])
def test_cascade_keys_are_validated(tasks_dir, edit, words):
    error = load_error(tasks_dir, edit)
    for word in words:
        assert word in error
