"""Red team of the step-function tasks (first_autocorrelation, erdos_minimum_overlap; docs/reward_threats.md).

What a program can try on a verifier that recomputes C or M from the heights: negative heights (both
problems are about non-negative functions, and a signed function can make max f*f small), heights so tiny
that their products underflow, a function whose integral is not 1 (the overlap shrinks with it), heights
above 1 after the normalisation, and a float sum that rounds to n/2. Each attack runs through the real
verifier (and the sandbox where it matters), gains nothing and gets one line; the same artefact on a
verifier with the one check taken out shows what it would have gained."""

import math

import numpy as np
import pytest

from tasks import load_task
from tests.helpers.hostile_verdicts import evaluate_quietly, verify_quietly, weakened

C1 = load_task("first_autocorrelation")
C5 = load_task("erdos_minimum_overlap")

# 80 signed heights whose autoconvolution has top 58.6 but dips to -120.8 (tests/redteam/test_hostile_autocorrelation.py):
# max f*f / (integral f)^2 = 1.4653, below the best known C1 bound 1.50316, because f is not non-negative.
DIP = [7.6385, 3.8224, 2.864, 1.7309, 1.2978, -1.6803, 0.0156, -1.3576, 4.0607, -1.3409, 1.2913, 0.3545, 0.0013,
       1.6752, 1.2047, -0.8192, 0.9473, 0.5293, 0.2113, 2.2809, -0.769, 1.523, 0.9446, 2.6667, 1.5842, 1.3752,
       0.9665, 0.4925, -7.4052, -2.3164, 0.4536, 0.5135, 0.5979, 0.542, 0.7079, 0.5932, 0.9696, 0.8623, 0.5128,
       1.411, 0.4983, 1.5983, 1.0917, 1.1694, 1.5568, 1.6714, 1.407, 2.554, 0.5444, 1.5753, 2.4917, 3.3893, 2.1807,
       0.9217, 1.7344, -0.0152, -1.2279, -0.2461, 1.7854, 1.4724, 0.095, 0.9763, 0.1002, 1.4003, 1.4661, 0.7914,
       -0.0107, 1.41, 0.5694, 1.5324, 1.2001, -0.2329, 1.3137, 1.0217, 1.5945, 1.2003, 0.3016, 0.1159, 3.1012,
       4.9472]
TINY = [5 * 1.5e-162] + [1.5e-162] * 999  # products of 2.25e-324 underflow to 0 unless the heights are rescaled


def accepting_anything(returned, max_steps, usage):
    """read_heights without its checks (sign, count, type): the weakened parser."""
    return np.array(returned, dtype=np.float64), None


def program(name, heights) -> str:
    return f"def {name}():\n    return {heights!r}\n"


def test_a_signed_function_is_refused_though_it_would_beat_the_record(capfd, caplog):
    real = verify_quietly(C1, DIP, capfd, caplog)
    assert not real.valid and "height 5 = -1.6803" in real.feedback and "non-negative" in real.feedback
    fooled = weakened("first_autocorrelation", read_heights=accepting_anything).verify(DIP)
    assert fooled.valid and fooled.metrics["C"] == pytest.approx(1.4652874953, rel=1e-9)
    assert fooled.reward > C1.best_known + 0.01  # a false record by 0.017
    through = evaluate_quietly(C1, program("find_better_c1_upper_bound", DIP), capfd, caplog)
    assert not through.valid and through.reward == 0


def test_tiny_heights_cannot_underflow_the_autoconvolution(capfd, caplog):
    real = verify_quietly(C1, TINY, capfd, caplog)
    same = C1.verify([5.0] + [1.0] * 999)
    assert real.valid and real.reward == pytest.approx(same.reward, rel=1e-12) and real.reward < 1
    fooled = weakened("first_autocorrelation", scaled=lambda heights: heights).verify(TINY)
    assert fooled.valid and fooled.reward > 1  # C < 1: impossible for any f >= 0


def test_a_function_of_small_integral_is_scaled_to_integral_1(capfd, caplog):
    """h = 0.001 everywhere has overlap 2 * 0.001 * 0.999 unnormalised, reward 500.5; scaled to integral 1 it is the
    constant 1/2, M = 1/2, reward 2, as for h = 1/2 itself (AlphaEvolve required sum n/2, EinsteinArena scales)."""
    small = [0.001] * 20
    real = verify_quietly(C5, small, capfd, caplog)
    assert real.valid and real.reward == pytest.approx(2.0, rel=1e-12) == C5.verify([0.5] * 20).reward

    def unnormalised(h):
        return float(np.max(np.correlate(h, 1 - h, "full"))) * 2 / len(h)

    fooled = weakened("erdos_minimum_overlap", overlap=unnormalised).verify(small)
    assert fooled.valid and fooled.reward == pytest.approx(1 / (2 * 0.001 * 0.999), rel=1e-9)
    assert fooled.reward > 500 > C5.best_known
    through = evaluate_quietly(C5, program("find_step_function", small), capfd, caplog)
    assert through.valid and through.reward == pytest.approx(2.0, rel=1e-12)


def test_heights_above_1_after_scaling_are_refused_in_one_line(capfd, caplog):
    for heights in ([3.0, 0.25, 0.25], [1.0, 0.5 - 2.0**-54, 0.0], [1e308] + [1.0] * 9):
        verdict = verify_quietly(C5, heights, capfd, caplog)
        assert not verdict.valid and "> 1 (decided exactly)" in verdict.feedback
    fooled = weakened("erdos_minimum_overlap", too_high=lambda heights: None).verify([3.0, 0.25, 0.25])
    assert fooled.valid  # the bound is the only thing keeping h in [0, 1]


# name, heights, the verdict's words (None: valid)
HOSTILE = [
    ("1e308 everywhere", [1e308] * 50, None),  # the constant function for both tasks
    ("subnormals", [5e-324] * 3, None),
    ("mixed extremes", [1e300, 1e300, 1e-300], None),
    ("int too large", [1, 10**400], "too large for a float"),
    ("NaN", [1.0, float("nan")], "NaN or infinite"),
    ("inf", [float("inf"), 1.0], "NaN or infinite"),
    ("boolean", [True, 1.0], "not a number"),
    ("numeric string", ["1", 1.0], "not a number"),
    ("nested", [[1.0, 2.0]], "not a number"),
    ("negative zeros", [-0.0, -0.0], "all heights are 0"),
    ("dict", {"values": [1.0]}, "not a list"),
]


@pytest.mark.parametrize("task", [C1, C5], ids=lambda t: t.name)
@pytest.mark.parametrize("name, heights, words", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_bad_values_get_a_clear_verdict_without_warnings(task, name, heights, words, capfd, caplog):
    verdict = verify_quietly(task, heights, capfd, caplog)
    if words is None:
        assert verdict.valid and math.isfinite(verdict.reward) and verdict.reward > 0
        return
    assert not verdict.valid and words in verdict.feedback, verdict.feedback


def test_too_many_steps_are_refused_before_any_arithmetic(capfd, caplog):
    for task, limit in ((C1, 100_000), (C5, 10_000)):
        verdict = verify_quietly(task, [1.0] * (limit + 1), capfd, caplog)
        assert not verdict.valid and f"over the limit of {limit}" in verdict.feedback
