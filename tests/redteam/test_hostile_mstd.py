"""Hostile programs and artefacts against the MSTD reward (issue 31, items 2-3;
docs/reward_threats.md). Each test runs the real path and then a deliberately weakened verifier.

|A+A| / |A-A| is invariant under translation and scaling, so the range [0, 30) (which also caps
|A| at 30) and integrality are the whole constraint: a set in a wider range, or one scaled down
into [0, 30) as fractions, is a different, easier problem. The weapons: B, the 51/47 set found in
[0, 30); B + 59 B (every a + 59 b, 196 integers up to 1740), whose sums and differences decompose
uniquely, so its ratio is (51/47)^2 = 2601/2209 = 1.1775; and SIXTY, 24 integers in [1, 57] with
113 sums and 105 differences (1.0762, from a local search), which halved fits [0, 30) as fractions."""

import pytest

from tasks import load_task
from tests.helpers.hostile_verdicts import evaluate_quietly, verify_quietly, weakened

TASK = load_task("mstd_30")
B = [4, 5, 7, 8, 9, 12, 16, 17, 20, 24, 25, 27, 28, 29]
WIDE = sorted({a + 59 * b for a in B for b in B})  # 196 integers in [236, 1740]
SIXTY = [1, 2, 4, 5, 7, 8, 10, 17, 19, 26, 27, 28, 31, 32, 35, 38, 41, 44, 47, 50, 53, 55, 56, 57]
HALVED = [x / 2 for x in SIXTY]  # 24 exact fractions in [0.5, 28.5]
STARTER = 26 / 25  # Conway's set, the starter: what a cheat must beat to lift the reward
FLOATS = {"is_integer": lambda a: isinstance(a, (int, float))}  # the weakened integer check


def test_the_weapon_by_hand():
    assert len({a + b for a in B for b in B}) == 51 and len({a - b for a in B for b in B}) == 47
    assert len({a + b for a in WIDE for b in WIDE}) == 51**2 and len({a - b for a in WIDE for b in WIDE}) == 47**2
    assert TASK.verify(B).reward == pytest.approx(51 / 47, rel=1e-15)
    assert TASK.verify(B).reward == pytest.approx(TASK.best_known, rel=1e-12)  # B is the maximum in [0, 30)
    assert len({a + b for a in SIXTY for b in SIXTY}) == 113 and len({a - b for a in SIXTY for b in SIXTY}) == 105
    assert 0 < min(HALVED) and max(HALVED) < 30 and len(HALVED) <= 30 and all(2 * x == w for x, w in zip(HALVED, SIXTY))
    # repeats are rejected, and could not lift the ratio anyway: |A+A| and |A-A| are those of the set
    sums_and_differences = TASK._verify.__globals__["sums_and_differences"]
    assert sums_and_differences(B + B[:3]) == sums_and_differences(B) == (51, 47)
    assert "appear(s) more than once" in TASK.verify(B + B[:3]).feedback


def test_a_set_outside_the_range_is_refused(capfd, caplog):
    real = verify_quietly(TASK, WIDE, capfd, caplog)
    assert not real.valid and "got 196 elements, but a set in [0, 30) has at most 30" in real.feedback
    real = verify_quietly(TASK, SIXTY, capfd, caplog)
    assert not real.valid and "12 element(s) outside [0, 30), first: 31" in real.feedback, real.feedback
    assert weakened("mstd_30", N=60).verify(SIXTY).reward == pytest.approx(113 / 105, rel=1e-15)
    fooled = weakened("mstd_30", N=2000).verify(WIDE)  # the range, and with it the size bound, widened
    assert fooled.valid and fooled.reward == pytest.approx(2601 / 2209, rel=1e-15) and fooled.reward > 51 / 47


def test_fractions_inside_the_range_are_refused(capfd, caplog):
    real = verify_quietly(TASK, HALVED, capfd, caplog)
    assert not real.valid and "element 0 is 0.5 (float), not an integer" in real.feedback
    fooled = weakened("mstd_30", **FLOATS).verify(HALVED)
    assert fooled.valid and fooled.reward == pytest.approx(113 / 105, rel=1e-15) and fooled.reward > STARTER


PROGRAM = f"""
import numpy as np


def construct_set():
    return np.array({SIXTY}) / 2  # a set in [0, 60) scaled into [0, 30)
"""


def test_fractions_through_the_sandbox(capfd, caplog):
    real = evaluate_quietly(TASK, PROGRAM, capfd, caplog)
    assert not real.valid and real.reward == 0 and "not an integer" in real.feedback
    fooled = evaluate_quietly(weakened("mstd_30", **FLOATS), PROGRAM, capfd, caplog)
    assert fooled.valid and fooled.reward == pytest.approx(113 / 105, rel=1e-15)


# name, artefact, words; bite: whether the integer check alone stands between it and a score
HOSTILE = [
    ("boolean", [True, 2, 3], "element 0 is True (bool), not an integer", True),
    ("negative zero", [-0.0, 2, 3], "element 0 is -0.0 (float)", True),
    ("numeric string", [0, "2"], "element 1 is '2' (str)", True),
    ("null", [0, None], "element 1 is None (NoneType)", True),
    ("nested", [[0, 2, 3]], "element 0 is [0, 2, 3] (list)", True),
    ("NaN", [0, float("nan")], "element 1 is nan (float)", False),
    ("1e308", [0, 1e308], "element 1 is 1e+308 (float)", False),
    ("int too large", [0, 10**400], "1 element(s) outside [0, 30), first: a huge integer", False),
    ("negative", [-(10**400), 0], "first: a huge integer", False),
    ("too many", list(range(10**5)), "got 100000 elements, but a set in [0, 30) has at most 30", False),
]


@pytest.mark.parametrize("name, artefact, words, guarded_by_type", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_bad_values_get_one_clear_line(name, artefact, words, guarded_by_type, capfd, caplog):
    verdict = verify_quietly(TASK, artefact, capfd, caplog)
    assert not verdict.valid and words in verdict.feedback, verdict.feedback
    if guarded_by_type:  # without the integer check: paid as if numbers, or a crash
        weak = weakened("mstd_30", is_integer=lambda a: True).verify(artefact)
        assert weak.valid or "the verifier could not check the result" in weak.feedback, weak
