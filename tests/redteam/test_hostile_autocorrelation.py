"""Hostile programs and artefacts against the third-autocorrelation reward (issue 31, items 2-3;
docs/reward_threats.md). Each test runs the real path and then a deliberately weakened verifier.

C(f) = 2n max|a * a| / (sum a)^2 >= 1 for every f, so no reward 1/C can exceed 1; the attacks are
on the arithmetic (underflow, rounding) and on the definition (the absolute value)."""

import math
import types
from fractions import Fraction

import numpy as np
import pytest

from tasks import load_task
from tests.helpers.hostile_verdicts import evaluate_quietly, verify_quietly, weakened

TASK = load_task("autocorrelation_third")

# One tall step and 999 low ones, at a scale where the low steps' products (2.25e-324) underflow
# to 0 in float64 while the tall step's do not: unscaled, max|a * a| loses the middle of the
# autoconvolution and C drops below 1 (reward 20.9, an impossible value).
TINY = [5 * 1.5e-162] + [1.5e-162] * 999
SAME_SHAPE = [5.0] + [1.0] * 999

# 80 heights from minimising AlphaResearch's max(a * a) (no absolute value) with a soft maximum:
# the autoconvolution dips to -120.8 while its top is 58.6, so max(c) gives C = 1.4653 (reward
# 0.6825, next to the best known 0.6858) where max|c| gives C = 3.0189 (reward 0.3312).
DIP = [7.6385, 3.8224, 2.864, 1.7309, 1.2978, -1.6803, 0.0156, -1.3576, 4.0607, -1.3409, 1.2913, 0.3545, 0.0013,
       1.6752, 1.2047, -0.8192, 0.9473, 0.5293, 0.2113, 2.2809, -0.769, 1.523, 0.9446, 2.6667, 1.5842, 1.3752,
       0.9665, 0.4925, -7.4052, -2.3164, 0.4536, 0.5135, 0.5979, 0.542, 0.7079, 0.5932, 0.9696, 0.8623, 0.5128,
       1.411, 0.4983, 1.5983, 1.0917, 1.1694, 1.5568, 1.6714, 1.407, 2.554, 0.5444, 1.5753, 2.4917, 3.3893, 2.1807,
       0.9217, 1.7344, -0.0152, -1.2279, -0.2461, 1.7854, 1.4724, 0.095, 0.9763, 0.1002, 1.4003, 1.4661, 0.7914,
       -0.0107, 1.41, 0.5694, 1.5324, 1.2001, -0.2329, 1.3137, 1.0217, 1.5945, 1.2003, 0.3016, 0.1159, 3.1012,
       4.9472]


def exact_c(heights, absolute=True):
    """C of the given floats in exact rational arithmetic (independent of the verifier)."""
    a = [Fraction(x) for x in heights]
    n = len(a)
    c = [sum(a[i] * a[m - i] for i in range(max(0, m - n + 1), min(m, n - 1) + 1)) for m in range(2 * n - 1)]
    peak = max(abs(x) for x in c) if absolute else max(c)
    return 2 * n * peak / sum(a) ** 2


def max_without_abs(a):
    """AlphaResearch's evaluator: max(a * a), not max |a * a| (the weakened verifier)."""
    total = math.fsum(a.tolist())
    return 2 * len(a) * float(np.max(np.convolve(a, a))) / total / total


def program(heights) -> str:
    return f"def find_better_c3_upper_bound():\n    return {heights!r}\n"


def test_tiny_heights_cannot_underflow_the_autoconvolution(capfd, caplog):
    real = verify_quietly(TASK, TINY, capfd, caplog)
    same = TASK.verify(SAME_SHAPE)
    assert real.valid and real.reward == pytest.approx(same.reward, rel=1e-12) and 0.5 < real.reward < 0.5001
    # (5, 1, ..., 1): c_m = m + 9 for m = 1..999 (pairs with the tall step, then the rest), top 1008
    assert real.metrics["C"] == pytest.approx(2000 * 1008 / 1004**2, rel=1e-12)
    unscaled = weakened("autocorrelation_third", scaled=lambda heights: heights)
    fooled = unscaled.verify(TINY)
    assert fooled.valid and fooled.reward > 20  # C < 1: impossible for any f
    through = evaluate_quietly(TASK, program(TINY), capfd, caplog)
    assert through.valid and through.reward == pytest.approx(real.reward, rel=1e-12)
    assert evaluate_quietly(unscaled, program(TINY), capfd, caplog).reward > 20


def test_a_negative_dip_earns_nothing(capfd, caplog):
    assert float(exact_c(DIP)) == pytest.approx(3.0188552928, rel=1e-9)
    assert float(exact_c(DIP, absolute=False)) == pytest.approx(1.4652874953, rel=1e-9)
    real = evaluate_quietly(TASK, program(DIP), capfd, caplog)
    assert real.valid and real.reward == pytest.approx(1 / float(exact_c(DIP)), rel=1e-12)
    paper = evaluate_quietly(weakened("autocorrelation_third", c_upper_bound=max_without_abs), program(DIP),
                             capfd, caplog)
    assert paper.reward == pytest.approx(1 / float(exact_c(DIP, absolute=False)), rel=1e-12)
    assert paper.reward > 0.68 > 0.5 > 0.34 > real.reward  # near the record, for a function with C = 3.02


CANCELLING = [
    [1e16, 3.0, -1e16],  # the sum is 3 exactly; naive float addition gives 4
    [1.0, 1e-17, 1e-17, 1e-17],  # the small heights vanish in a naive sum
    [2.0**60, 1.0, -(2.0**60), 7.0],
    DIP,
]


@pytest.mark.parametrize("heights", CANCELLING, ids=["1e16+3-1e16", "1+3e-17", "2^60", "dip"])
def test_c_is_exact_to_rounding_where_the_sum_cancels(heights, capfd, caplog):
    """The tolerance: C agrees with its exact rational value to 1e-12 relative, cancellation
    included (math.fsum). A naive sum would get the integral wrong and C with it."""
    real = verify_quietly(TASK, heights, capfd, caplog)
    assert real.valid and real.metrics["C"] == pytest.approx(float(exact_c(heights)), rel=1e-12)
    naive = weakened("autocorrelation_third", math=types.SimpleNamespace(
        fsum=lambda xs: float(np.sum(xs)), frexp=math.frexp, isfinite=math.isfinite))
    if heights[0] == 1e16:  # naive: sum 4 instead of 3, C smaller by (3/4)^2
        assert naive.verify(heights).reward == pytest.approx(real.reward * 16 / 9, rel=1e-9)


# name, heights, C when valid (the shape alone, by hand), else None
HOSTILE = [
    ("1e308 everywhere", [1e308] * 1000, 2.0),  # a constant function
    ("-1e308 and 1e308", [1e308, -1e308, 1e308], 18.0),  # (1, -1, 1): c = (1, -2, 3, -2, 1), sum 1: 6 * 3
    ("subnormals", [5e-324] * 3, 2.0),
    ("mixed extremes", [1e300, 1e-300, 1.0], 6.0),  # (1, 1e-600, 1e-300): one step, 2n = 6
    ("nearly zero integral", [1.0, -1.0, 1e-300], None),
    ("int too large", [1, 10**400], None),
    ("NaN", [1.0, float("nan")], None),
    ("boolean", [True, 1.0], None),
    ("numeric string", ["1", 1.0], None),
    ("nested", [[1.0, 2.0]], None),
    ("negative zeros", [-0.0, -0.0], None),
    ("too many", [1.0] * 1001, None),
]


@pytest.mark.parametrize("name, heights, c", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_bad_values_get_a_clear_verdict_without_warnings(name, heights, c, capfd, caplog):
    verdict = verify_quietly(TASK, heights, capfd, caplog)
    if c is None:
        assert not verdict.valid and verdict.reward == 0
        return
    assert verdict.valid and verdict.metrics["C"] == pytest.approx(c, rel=1e-12)  # only the shape counts
    unscaled = weakened("autocorrelation_third", scaled=lambda a: a).verify(heights)
    assert not unscaled.valid  # unscaled, the same function overflows or underflows: rejected or a crash
