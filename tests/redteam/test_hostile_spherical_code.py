"""Red team of the spherical-code family (spherical_code_30): 30 points on S^2, reward the minimum
pairwise angle, recomputed by the verifier from the points alone.

The reward has no tolerance to ride (rows are normalised, angles come from atan2, duplicates
only lower it), so what a cheat can try is the count and the numbers: fewer points spread wider
(12 icosahedron vertices are 63.4 degrees apart, far above the 38.6 degree record for 30), and
entries so large that a row's norm overflows. Each test runs the artefact through the real path
and shows, on a verifier with that one check monkeypatched out, that the cheat would have paid."""

import math

import numpy as np
import pytest

import tasks.families.spherical_code.verify as spherical_code
from rewards import Evaluator
from tasks import load_task
from tests.helpers.hostile_verdicts import with_warnings

TASK = load_task("spherical_code_30")
PHI = (1 + math.sqrt(5)) / 2
ICOSAHEDRON = [[0, s1, s2 * PHI] for s1 in (-1, 1) for s2 in (-1, 1)] + \
              [[s1, s2 * PHI, 0] for s1 in (-1, 1) for s2 in (-1, 1)] + \
              [[s2 * PHI, 0, s1] for s1 in (-1, 1) for s2 in (-1, 1)]
ICOSAHEDRON_ANGLE = math.atan(2)  # 63.43 degrees between neighbouring vertices


def fibonacci(n=30):
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    phi = np.pi * (1 + 5**0.5) * i
    return np.stack([np.sqrt(1 - z * z) * np.cos(phi), np.sqrt(1 - z * z) * np.sin(phi), z], axis=1)


def count_unchecked(monkeypatch):
    """The weakened verifier: any number of points is taken for the 30 asked for."""
    real = spherical_code._points

    def any_count(returned, n, usage_text):
        points = returned["points"] if isinstance(returned, dict) else returned
        return real(returned, len(points), usage_text)

    monkeypatch.setattr(spherical_code, "_points", any_count)


@pytest.mark.parametrize("form", ["list", "dict"])
def test_fewer_points_spread_wider_are_rejected(form, monkeypatch):
    returned = ICOSAHEDRON if form == "list" else {"points": ICOSAHEDRON, "n": 30, "min_angle": 3.14}
    verdict = TASK.verify(returned)
    assert not verdict.valid and verdict.reward == 0.0
    assert "must have shape (30, 3), got shape (12, 3)" in verdict.feedback and "\n" not in verdict.feedback
    count_unchecked(monkeypatch)
    weakened = TASK.verify(returned)
    assert weakened.valid and weakened.reward == pytest.approx(ICOSAHEDRON_ANGLE, abs=1e-12)
    assert weakened.reward > TASK.best_known + 0.4  # a "record" 25 degrees above the known optimum


def test_fewer_points_through_the_sandbox(monkeypatch):
    code = f"def run_spherical_code():\n    return {{'points': {ICOSAHEDRON!r}, 'n': 30}}\n"
    evaluator = Evaluator(TASK, workers=1)
    result = evaluator.evaluate(code)
    assert not result.valid and result.reward == 0.0 and "got shape (12, 3)" in result.feedback
    count_unchecked(monkeypatch)
    assert evaluator.evaluate(code).reward > TASK.best_known


def test_a_norm_no_float_holds_is_one_line_not_an_overflow(monkeypatch):
    points = fibonacci()
    points[0] = [1.5e308, 1.5e308, 0.0]  # |p| = 2.1e308 > the largest float
    verdict, caught = with_warnings(lambda: TASK._verify(points.tolist()))  # the verifier itself, without Task.verify's guard
    assert not caught and not verdict.valid and "\n" not in verdict.feedback
    assert "absurd values" in verdict.feedback and "first: point 0" in verdict.feedback
    monkeypatch.setattr(spherical_code, "MAX_ENTRY", math.inf)
    weakened, caught = with_warnings(lambda: TASK._verify(points.tolist()))
    assert any("overflow" in str(w.message) for w in caught)
    assert weakened.valid and math.isinf(weakened.metrics["max_norm_deviation"])  # inf would reach the archive


@pytest.mark.parametrize("entry", [10**400, 2**64, True, "0.5", None, [0.5]])
def test_odd_entries_are_one_line(entry):
    points = fibonacci().tolist()
    points[3][1] = entry
    verdict = TASK.verify(points)
    assert not verdict.valid and "\n" not in verdict.feedback and "could not check" not in verdict.feedback
    assert "(30, 3)" in verdict.feedback or "point 3" in verdict.feedback or "non-numeric" in verdict.feedback, \
        verdict.feedback
