"""Red team of the function-minimisation family (eggholder, mishra_bird, keane_bump_10/20/30): the
program returns a point x, the verifier checks the feasible set and recomputes f(x).

What a cheat can try: step just outside the box, within the 1e-9 tolerance, where f keeps falling
(the Eggholder minimum lies on the edge x1 = 512); return values numpy would quietly turn into
numbers (True -> 1.0, "512" -> 512.0); or return numbers so large the constraint sums overflow.
Each test runs the artefact through the real path and shows, on a verifier with that one check
monkeypatched out (the previous code, where it was a hole), that the cheat would have paid."""

import dataclasses
import re

import numpy as np
import pytest

import tasks.families.functions.verify as functions
from rewards import Evaluator
from tasks import load_task
from tests.helpers.hostile_verdicts import with_warnings

EGG_MIN = [512.0, 404.2319]


def says_inf(text: str) -> bool:
    return re.search(r"(?<![a-z])inf(?![a-z])", text) is not None  # the published minimiser, on the box's edge


def old_point(returned, dim, usage):
    """The conversion before the red team: np.asarray(returned, dtype=float64), shape and finiteness."""
    try:
        x = np.asarray(returned, dtype=np.float64)
    except (TypeError, ValueError):
        return None, f"could not read the result as numbers; {usage}"
    if x.shape != (dim,):
        return None, f"x has shape {x.shape}, expected ({dim},); {usage}"
    if not np.all(np.isfinite(x)):
        return None, f"x holds NaN or inf; {usage}"
    return x, None


def unclipped(monkeypatch, name):
    """The weakened verifier: f is evaluated where the point is, not clipped into the box."""
    problem = functions.PROBLEMS[name]
    monkeypatch.setitem(functions.PROBLEMS, name, dataclasses.replace(problem, lo=problem.lo - np.inf,
                                                                      hi=problem.hi + np.inf))


def test_stepping_out_of_the_box_within_the_tolerance_buys_nothing(monkeypatch):
    task = load_task("eggholder")
    honest = task.verify(EGG_MIN)
    outside = [512.0 + 0.9e-9, 404.2319]
    verdict = task.verify(outside)
    assert honest.valid and verdict.valid  # within the tolerance: accepted...
    assert verdict.reward == honest.reward and verdict.metrics["f"] == honest.metrics["f"]  # ...at the edge's value
    unclipped(monkeypatch, "eggholder")
    weakened = task.verify(outside)
    assert weakened.metrics["f"] < honest.metrics["f"] - 1e-9 and weakened.reward > honest.reward


def test_stepping_out_of_the_box_through_the_sandbox(monkeypatch):
    task = load_task("eggholder")
    evaluator = Evaluator(task, workers=1)
    code = "import numpy as np\ndef minimize():\n    return np.array([{x!r}, 404.2319])\n"
    honest = evaluator.evaluate(code.format(x=512.0))
    hostile = evaluator.evaluate(code.format(x=512.0 + 0.9e-9))
    assert honest.valid and hostile.valid and hostile.reward == honest.reward
    unclipped(monkeypatch, "eggholder")
    assert evaluator.evaluate(code.format(x=512.0 + 0.9e-9)).reward > honest.reward


@pytest.mark.parametrize("name, returned, words", [
    ("keane_bump_10", [True] * 10, "x[0] is a boolean (True), not a number"),
    ("keane_bump_20", [1.0] * 19 + [True], "x[19] is a boolean"),
    ("eggholder", ["512", "404.2319"], "x[0] is a str, not a number"),  # numpy parses numeric strings
    ("mishra_bird", ["-3.1302468", -1.5821422], "x[0] is a str"),
])
def test_values_numpy_would_turn_into_numbers_are_rejected(name, returned, words, monkeypatch):
    task = load_task(name)
    verdict = task.verify(returned)
    assert not verdict.valid and verdict.reward == 0.0 and words in verdict.feedback and "\n" not in verdict.feedback
    monkeypatch.setattr(functions, "_point", old_point)
    weakened = task.verify(returned)
    assert weakened.valid and weakened.reward > 0.5, weakened.feedback  # e.g. "512" scored 0.99999996


def test_an_integer_no_float_holds_is_the_verifiers_own_line(monkeypatch):
    task = load_task("eggholder")
    verdict = task.verify([10**400, 0])
    assert not verdict.valid and "x[0] is an integer of 401 digits" in verdict.feedback
    monkeypatch.setattr(functions, "_point", old_point)
    weakened = task.verify([10**400, 0])  # the verifier raised; only Task.verify's guard caught it
    assert "could not check the result: OverflowError" in weakened.feedback


def old_keane_constraints(x):
    """Before the red team: the sum and product were computed whether or not x was in the box."""
    d = len(x)
    out = functions._box(np.zeros(d), np.full(d, 10.0), open_low=True)(x)
    total, prod = float(np.sum(x)), float(np.prod(x))
    if total > 7.5 * d + functions.TOL:
        out.append(f"sum(x) = {total:.6g} must be <= {7.5 * d:g}")
    if prod < 0.75 - functions.TOL:
        out.append(f"prod(x) = {prod:.6g} must be >= 0.75")
    return out


def old_mishra_constraints(x):
    """Before the red team: the disk was computed whether or not x was in the box."""
    disk = (x[0] + 5) ** 2 + (x[1] + 5) ** 2
    return functions._MISHRA_BOX(x) + ([f"(x1 + 5)^2 + (x2 + 5)^2 = {disk:.6g} must be < 25"] if disk >= 25 else [])


@pytest.mark.parametrize("name", ["keane_bump_10", "mishra_bird"])
def test_huge_coordinates_get_the_box_not_an_overflow(name, monkeypatch):
    task = load_task(name)
    dim = functions.PROBLEMS[name].dim
    hostile = [1e308] * dim if name.startswith("keane") else [-1e200, -1e200]
    verdict, caught = with_warnings(lambda: task._verify(hostile))  # the verifier itself, without Task.verify's guard
    assert not caught and not verdict.valid and "must be" in verdict.feedback and not says_inf(verdict.feedback)
    problem = functions.PROBLEMS[name]
    weak = old_keane_constraints if name.startswith("keane") else old_mishra_constraints
    monkeypatch.setitem(functions.PROBLEMS, name, dataclasses.replace(problem, constraints=weak))
    weakened, caught = with_warnings(lambda: task._verify(hostile))
    assert any("overflow" in str(w.message) for w in caught) and not weakened.valid  # numpy warned on the console


def test_a_boolean_array_from_the_sandbox_is_rejected():
    code = "import numpy as np\ndef minimize():\n    return np.ones(10, dtype=bool)\n"
    result = Evaluator(load_task("keane_bump_10"), workers=1).evaluate(code)
    assert not result.valid and "x[0] is a boolean" in result.feedback
