"""Trusted check of a step function for the first autocorrelation inequality (AlphaEvolve B.1; the
repository of problems' problem 2; EinsteinArena's first-autocorrelation-inequality): C1 is the largest
constant with

    max_{|t| <= 1/2} (f*f)(t) >= C1 (integral of f over [-1/4, 1/4])^2   for every f >= 0,

so every non-negative f gives the upper bound C(f) = max f*f / (integral f)^2 >= C1; the task minimises it
and rewards 1/C (higher is better; C >= 1 for every f, so the reward is at most 1).

f has heights a_0 .. a_{n-1} >= 0 on n equal steps of width h = 1/(2n) covering [-1/4, 1/4]. As in the
third-inequality task, f*f is piecewise linear with f*f(-1/2 + (m+1) h) = h c_m, c = np.convolve(a, a), and
its maximum is at a breakpoint, so exactly C(f) = 2n max c_m / (sum a)^2: AlphaEvolve's formula, and
EinsteinArena's max(convolve(f, f) dx) / (sum f dx)^2 with dx = 1/(2n). No absolute value is needed: f >= 0.

The heights are scaled by a power of two first (exact), so they cannot overflow or underflow; the sum is
math.fsum (correctly rounded). Up to DIRECT_STEPS heights the convolution is np.convolve (sums of
non-negative products: about 1e-13 relative at worst); beyond, scipy's FFT convolution, whose error is
about 1e-16 n relative to the largest term, at most 2e-11 at MAX_STEPS. A reward at or above best_known is
re-checked by ``check_exact`` in integers, so no rounding can make a record.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.signal import fftconvolve

from tasks.base import ExactCheck, Verdict, invalid
from tasks.families.exact import integers
from tasks.families.step_functions.exact import MAX_WORK_BITS, convolve, packed_bits
from tasks.families.step_functions.heights import read_heights, scaled

MAX_STEPS = 100_000  # the published records use 600 to 30,000 steps
DIRECT_STEPS = 10_000  # np.convolve up to here, FFT beyond
BEST_KNOWN_C = 1.503163554681561  # AlphaEvolve V2's 1,319 steps, checked here (task.yaml)
USAGE = (f"find_better_c1_upper_bound() must return a list of 1 to {MAX_STEPS} finite heights >= 0 "
         "for equal steps on [-1/4, 1/4]")


def c_upper_bound(a: np.ndarray) -> float:
    """C(f) = 2n max(a * a) / (sum a)^2 for heights scaled by ``scaled`` (see the module)."""
    conv = np.convolve(a, a) if len(a) <= DIRECT_STEPS else fftconvolve(a, a)
    total = math.fsum(a.tolist())
    return 2 * len(a) * float(np.max(conv)) / total / total


def verify(returned) -> Verdict:
    heights, err = read_heights(returned, MAX_STEPS, USAGE)
    if err is not None:
        return invalid(err)
    if not np.any(heights):
        return invalid("all heights are 0, so the integral of f is 0 and max f*f / (integral f)^2 is undefined")
    c = c_upper_bound(scaled(heights))
    reward = 1.0 / c
    feedback = (f"{len(heights)} steps: C = max f*f / (integral f)^2 = {c:.10g}, reward 1/C = {reward:.10g} "
                f"(best known C = {BEST_KNOWN_C:.10g}, reward {1 / BEST_KNOWN_C:.10g}; lower C is better)")
    return Verdict(reward, True, feedback, {"C": c, "steps": float(len(heights))})


def check_exact(returned) -> ExactCheck:
    """C(f) recomputed exactly: the heights as integers (C is scale-invariant), their autoconvolution in
    integers, C = 2n max c_m / (sum a)^2 as a ratio of integers. The only constraint, f >= 0, is exact in
    ``verify`` already; this pins the reward 1/C to its last digit."""
    heights, err = read_heights(returned, MAX_STEPS, USAGE)
    if err is not None or not np.any(heights):
        return ExactCheck("unchecked", "not a step function the verifier accepts")
    a, _ = integers(heights.tolist())
    if packed_bits(a, a) > MAX_WORK_BITS:
        return ExactCheck("unchecked", f"{len(a)} heights spanning {max(a).bit_length()} bits are too many for an "
                                       "exact convolution here")
    n, total, peak = len(a), sum(a), max(convolve(a, a))
    return ExactCheck("exact", f"C = 2n max f*f / (integral f)^2 from the {n} heights in integer arithmetic: "
                               f"C = {2 * n * peak / (total * total):.15g}, reward 1/C = "
                               f"{total * total / (2 * n * peak):.15g} (heights >= 0 checked exactly)",
                      total * total / (2 * n * peak))
