"""Trusted check of a step function for the third autocorrelation inequality (AlphaResearch
appendix D.5-D.6): C3 is the largest constant with

    max_{|t| <= 1/2} |(f*f)(t)| >= C3 (integral of f over [-1/4, 1/4])^2   for every (signed) f,

so every f gives the upper bound C(f) = max |f*f| / (integral f)^2 >= C3; the task minimises it.
The reward is the paper's own score, 1 / C(f) (higher is better).

f is the step function with heights a_0 .. a_{n-1} (the program's output, of either sign) on n
equal steps of width h = 1/(2n) covering [-1/4, 1/4], and 0 outside. The autoconvolution of two
boxes of width h is a triangle of base 2h and peak h, so f*f is piecewise linear with breakpoints
t_k = -1/2 + k h (k = 0 .. 2n), f*f(t_0) = f*f(t_2n) = 0 and f*f(t_{m+1}) = h c_m, where
c = a * a is the discrete autoconvolution (np.convolve). The maximum of |f*f| over a piecewise
linear function is at a breakpoint, so, exactly,

    C(f) = h max_m |c_m| / (h sum a)^2 = 2n max_m |c_m| / (sum a)^2.

Since the integral of f*f over [-1/2, 1/2] is (integral f)^2, C(f) >= 1 for every f, and the
reward 1/C lies in (0, 1). AlphaResearch's evaluator takes max(c) rather than max |c|; that is
the same whenever the largest |c_m| is positive, and the definition above (with |.|) is what
is implemented here, so a function whose autoconvolution dips far below 0 gets no credit for it.

Rejected with the reason: not a flat list of numbers, booleans, NaN or infinity, no heights,
more than MAX_STEPS, all heights 0, or heights summing to exactly 0 (the ratio is undefined).
The heights are first multiplied by a power of two (exact) that brings max |a| into [1/2, 1): C is
scale-invariant, so huge or tiny heights cannot overflow; the sum uses math.fsum, the correctly
rounded sum of the given floats, so heights summing to exactly 0 are caught.
"""

from __future__ import annotations

import math

import numpy as np

from tasks.base import ExactCheck, Verdict, invalid
from tasks.families.exact import integers, ratio

MAX_STEPS = 1000
BEST_KNOWN_C = 1.4687620697  # AlphaEvolve's C3' (max |f*f|); Vinuesa's 1.4581 is for max f*f (task.yaml)
USAGE = (f"find_better_c3_upper_bound() must return a list of 1 to {MAX_STEPS} finite step heights "
         "(numbers, either sign) for equal steps on [-1/4, 1/4]")


def scaled(heights: np.ndarray) -> np.ndarray:
    """The heights times the power of two that brings max |a| into [1/2, 1): exact (no rounding
    unless a height is below 2^-1022 of the largest), so a zero sum stays exactly zero."""
    return np.ldexp(heights, -math.frexp(float(np.max(np.abs(heights))))[1])


def c_upper_bound(a: np.ndarray) -> float:
    """C(f) = 2n max |a * a| / (sum a)^2 for heights scaled by ``scaled`` with a nonzero sum (see the module)."""
    total = math.fsum(a.tolist())
    peak = float(np.max(np.abs(np.convolve(a, a))))
    return 2 * len(a) * peak / total / total


def verify(returned) -> Verdict:
    if not isinstance(returned, list):
        return invalid(f"got {type(returned).__name__}, not a list; {USAGE}")
    if not returned:
        return invalid(f"no heights; {USAGE}")
    if len(returned) > MAX_STEPS:
        return invalid(f"{len(returned)} heights, over the limit of {MAX_STEPS}; {USAGE}")
    for i, v in enumerate(returned):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return invalid(f"height {i} is {repr(v)[:40]} ({type(v).__name__}), not a number; {USAGE}")
    try:
        a = np.array(returned, dtype=np.float64)
    except OverflowError:  # an integer beyond the float range
        return invalid(f"a height is too large to be a float; {USAGE}")
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        return invalid(f"{bad.size} height(s) are NaN or infinite, first: height {bad[0]} = {a[bad[0]]}; {USAGE}")
    if not np.any(a):
        return invalid("all heights are 0, so the integral of f is 0 and max|f*f| / (integral f)^2 is undefined")
    a = scaled(a)
    if math.fsum(a.tolist()) == 0:
        return invalid("the heights sum to 0, so the integral of f is 0 and max|f*f| / (integral f)^2 is "
                       "undefined; make the integral nonzero")
    c = c_upper_bound(a)
    if not (math.isfinite(c) and c > 0):
        return invalid(f"the integral of f is too close to 0 relative to the heights (C = {c:g}); make it larger")
    reward = 1.0 / c
    feedback = (f"{len(a)} steps: C = max|f*f| / (integral f)^2 = {c:.6g}, reward 1/C = {reward:.6g} "
                f"(best known C = {BEST_KNOWN_C}, reward {1 / BEST_KNOWN_C:.6g}; lower C is better)")
    return Verdict(reward, True, feedback, {"C": c, "steps": float(len(a))})


def check_exact(returned) -> ExactCheck:
    """C(f) recomputed exactly (tasks/base.py ``check_exact``): the heights scaled to integers (tasks/families/exact.py;
    C is scale-invariant), their autoconvolution in Python integers, C = 2n max |c_m| / (sum a)^2 as a
    rational. The verifier has no tolerance to ride; this pins the reward 1/C down to its last digit."""
    a, _ = integers(returned)
    total = sum(a)
    if not a or total == 0:  # verify rejects both
        return ExactCheck("unchecked", "not a step function the verifier accepts (no heights, or a zero integral)")
    heights = np.array(a, dtype=object)  # numpy's convolution over Python integers: exact, and fast enough
    peak = max(abs(c) for c in np.convolve(heights, heights).tolist())
    n = len(a)
    return ExactCheck("exact", f"C = 2n max|f*f| / (integral f)^2 computed exactly from the {n} heights (integer "
                               f"arithmetic): C = {ratio(2 * n * peak, total * total):.15g}, reward 1/C = "
                               f"{ratio(total * total, 2 * n * peak):.15g}", ratio(total * total, 2 * n * peak))
