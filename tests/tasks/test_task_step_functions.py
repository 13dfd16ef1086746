"""The step-function tasks (issue 53, item 3): first_autocorrelation (C1 upper bound, reward 1/C) and
erdos_minimum_overlap (C5 upper bound, reward 1/M). Their discrete formulas are checked against the
continuous definitions on finer grids, against exact rational brute force, and against hand values;
check_exact against the same brute force."""

import random
from fractions import Fraction

import numpy as np
import pytest

from tasks import load_task
from tasks.families.exact import integers
from tasks.families.step_functions.exact import convolve

C1 = load_task("first_autocorrelation")
C5 = load_task("erdos_minimum_overlap")


def exact_check(task, artefact):
    return task._verify.__globals__["check_exact"](artefact)


def brute_c(heights) -> Fraction:
    """C(f) = 2n max(a * a) / (sum a)^2 by the definition of the convolution, in rationals."""
    a = [Fraction(x) for x in heights]
    n = len(a)
    conv = [sum(a[i] * a[m - i] for i in range(n) if 0 <= m - i < n) for m in range(2 * n - 1)]
    return 2 * n * max(conv) / sum(a) ** 2


def brute_m(heights) -> Fraction:
    """M(h) = (2/n) max_s sum_i h'_i (1 - h'_(i+s)) with h' = h scaled to sum n/2, in rationals."""
    h = [Fraction(x) for x in heights]
    n = len(h)
    h = [x * Fraction(n, 2) / sum(h) for x in h]
    return Fraction(2, n) * max(sum(h[i] * (1 - h[i + s]) for i in range(n) if 0 <= i + s < n) for s in range(-n + 1, n))


# ---- first_autocorrelation -----------------------------------------------------------------------

@pytest.mark.parametrize("heights, c", [([1.0] * 20, 2), ([1, 1], 2), ([2, 1], Fraction(16, 9)), ([1, 0, 1], 3),
                                        ([3.0], 2)])
def test_first_autocorrelation_by_hand(heights, c):
    """[2, 1]: a * a = (4, 4, 1), so C = 2*2*4 / 3^2 = 16/9; [1, 0, 1]: (1, 0, 2, 0, 1), C = 6*2 / 4 = 3."""
    verdict = C1.verify(heights)
    assert verdict.valid and verdict.metrics["C"] == pytest.approx(float(c), rel=1e-15)
    assert verdict.reward == pytest.approx(1 / float(c), rel=1e-15)


def test_first_autocorrelation_formula_is_the_continuous_sup_norm():
    """The formula's convention (steps of width 1/(2n) on [-1/4, 1/4]): f sampled 400 times per step and
    convolved as a Riemann sum gives max f*f / (integral f)^2 within the sampling error."""
    rng = np.random.default_rng(3)
    heights = rng.random(7)
    fine, dx = np.repeat(heights, 400), 0.5 / (7 * 400)
    continuous = np.max(np.convolve(fine, fine)) * dx / (fine.sum() * dx) ** 2
    assert C1.verify(heights.tolist()).metrics["C"] == pytest.approx(continuous, rel=1e-3)


def test_first_autocorrelation_agrees_with_rational_brute_force_and_check_exact():
    rng = random.Random(5)
    for n in (1, 2, 5, 13, 40):
        heights = [rng.choice([0.0, rng.random(), rng.random() * 1e-8, 3.0]) for _ in range(n)]
        heights[0] = 0.5  # not all zero
        want = brute_c(heights)
        assert C1.verify(heights).metrics["C"] == pytest.approx(float(want), rel=1e-13)
        check = exact_check(C1, heights)
        assert check.status == "exact" and check.value == float(1 / want)


def test_the_fft_path_agrees_with_the_direct_one():
    """Above 10,000 steps the verifier convolves by FFT; on 12,000 heights it agrees with the exact value."""
    heights = np.random.default_rng(0).random(12_000).tolist()
    verdict = C1.verify(heights)
    check = exact_check(C1, heights)
    assert verdict.valid and check.status == "exact" and verdict.reward == pytest.approx(check.value, rel=1e-12)


def test_first_autocorrelation_only_the_shape_counts_and_negatives_are_refused():
    base = C1.verify([1.0, 2.0, 0.5]).reward
    assert C1.verify([2.0**-600, 2.0**-599, 2.0**-601]).reward == pytest.approx(base, rel=1e-15)
    assert C1.verify([1e300, 2e300, 0.5e300]).reward == pytest.approx(base, rel=1e-15)
    verdict = C1.verify([1.0, -1e-12, 1.0])  # no tolerance: f >= 0 is exact
    assert not verdict.valid and "height 1 = -1e-12" in verdict.feedback and "non-negative" in verdict.feedback
    assert exact_check(C1, [1.0, -1e-12, 1.0]).status == "unchecked"
    assert not C1.verify([0.0, 0.0]).valid and "all heights are 0" in C1.verify([0.0, 0.0]).feedback


def test_exact_convolution_matches_a_loop():
    rng = random.Random(1)
    for la, lb in ((1, 1), (3, 8), (60, 17)):
        a = [rng.randrange(2**70) for _ in range(la)]
        b = [rng.randrange(2**20) for _ in range(lb)]
        assert convolve(a, b) == [sum(a[i] * b[m - i] for i in range(la) if 0 <= m - i < lb) for m in range(la + lb - 1)]
    assert integers([0.5, 0.75, 3.0]) == ([2, 3, 12], 4)
    with pytest.raises(ValueError):
        convolve([1, -1], [1])


# ---- erdos_minimum_overlap -----------------------------------------------------------------------

@pytest.mark.parametrize("heights, m", [([0.5] * 20, Fraction(1, 2)), ([1.0, 0.0], 1), ([0.0, 1.0, 1.0, 0.0], Fraction(1, 2)),
                                        ([1.0] * 7, Fraction(1, 2)), ([0.25, 1.0, 0.75], Fraction(1, 2))])
def test_minimum_overlap_by_hand(heights, m):
    """[1, 0]: h = 1 on [0, 1], g = 1 on [1, 2]: shifted by 1 they overlap fully, M = 1. [1]*7 is scaled to 1/2.
    [0.25, 1, 0.75] (sum 2, scaled by 3/4): h' = (3/16, 3/4, 9/16), g = 1 - h' = (13/16, 1/4, 7/16); the
    largest correlation is at shift -1: h'_1 g_0 + h'_2 g_1 = 39/64 + 9/64 = 3/4, so M = (2/3)(3/4) = 1/2."""
    assert brute_m(heights) == m
    verdict = C5.verify(heights)
    assert verdict.valid and verdict.metrics["M"] == pytest.approx(float(m), rel=1e-15)


def test_minimum_overlap_formula_is_the_continuous_overlap():
    """M's convention (n steps on [0, 2], shifts over the whole line): h and 1 - h sampled 300 times per
    step, their overlap integral at every sampled shift, maximised, agrees with the formula."""
    heights = 0.3 + 0.4 * np.random.default_rng(2).random(9)
    heights = heights / heights.sum() * 4.5  # sum n/2 = integral 1
    assert heights.max() <= 1
    fine, dx = np.repeat(heights, 300), 2 / (9 * 300)
    continuous = np.max(np.correlate(fine, 1 - fine, "full")) * dx
    assert C5.verify(heights.tolist()).metrics["M"] == pytest.approx(continuous, rel=1e-12)


def test_minimum_overlap_agrees_with_rational_brute_force_and_check_exact():
    rng = random.Random(7)
    for n in (1, 3, 8, 25):
        heights = [rng.random() for _ in range(n)]
        top = max(heights)
        heights = [x / top * 0.9 for x in heights]  # scaled to sum n/2 they may exceed 1: skip those
        verdict = C5.verify(heights)
        if not verdict.valid:
            assert "> 1" in verdict.feedback and max(heights) * n > 2 * sum(heights)
            continue
        want = brute_m(heights)
        assert verdict.metrics["M"] == pytest.approx(float(want), rel=1e-13)
        check = exact_check(C5, heights)
        assert check.status == "exact" and check.value == float(1 / want)


def test_a_sum_that_rounds_to_n_over_2_cannot_lift_a_height_above_1():
    """[1, 0.5 - 2^-54, 0]: the float sum is exactly 1.5 = n/2, so a float check sees max h = 1 (EinsteinArena's
    verifier accepts it); the true sum is 2^-54 short, so scaled to integral 1 the top step exceeds 1. Decided
    exactly, it is refused; the same heights with 0.5 are valid."""
    heights = [1.0, 0.5 - 2.0**-54, 0.0]
    assert sum(heights) == 1.5 and 0.5 - 2.0**-54 != 0.5
    verdict = C5.verify(heights)
    assert not verdict.valid and "step 0 has height 1 + 3.7e-17 > 1" in verdict.feedback
    assert C5.verify([1.0, 0.5, 0.0]).valid


def test_minimum_overlap_refuses_what_is_not_a_function_into_0_1():
    for heights, words in (([0.5, -0.5, 1.0], "negative"), ([0.0, 0.0], "all heights are 0"),
                           ([3.0, 0.25, 0.25], "> 1"), ([0.5] * 10_001, "over the limit of 10000")):
        verdict = C5.verify(heights)
        assert not verdict.valid and words in verdict.feedback, verdict.feedback


def test_an_exact_check_too_large_to_run_says_unchecked():
    """Heights spanning 2^1000 make every packed digit 2,100 bits wide: 9,100 of them exceed the 16 Mbit the
    exact convolution is allowed, so check_exact answers "unchecked" (quickly) while the verifier scores them."""
    heights = [1.0] * 4600 + [2.0**-1000] * 4500  # scaled to sum n/2 the 1s become 4550/4600 < 1
    assert C1.verify(heights).valid and C5.verify(heights).valid
    for task in (C1, C5):
        check = exact_check(task, heights)
        assert check.status == "unchecked" and "too many for an exact" in check.detail
