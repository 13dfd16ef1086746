"""Trusted check of a step function for Erdős' minimum overlap problem (AlphaEvolve B.5; the repository of
problems' problem 5; EinsteinArena's erdos-min-overlap). By Haugland (2016) the constant C5 is the infimum,
over step functions h: [0, 2] -> [0, 1] with integral 1, of

    M(h) = max_k integral h(x) (1 - h(x + k)) dx     (1 - h taken as 0 outside [0, 2]),

so every such h proves C5 <= M(h); the task minimises it and rewards 1/M (higher is better; M <= 1/2 for
the constant 1/2, and C5 >= 0.379005, so the reward stays below 2.64).

h has heights h_0 .. h_{n-1} on n equal steps of width 2/n. The overlap at shift k is piecewise linear in k
with breakpoints at multiples of 2/n, where it equals (2/n) sum_i h_i g_(i+m) with g = 1 - h; so
M(h) = (2/n) max(np.correlate(h, 1 - h, "full")), AlphaEvolve's and EinsteinArena's formula.

Normalisation, as EinsteinArena's verifier: the program's heights are scaled by (n/2) / sum(h), so that the
integral is exactly 1, and every scaled height must then be <= 1. That bound is decided exactly, in
integers (n max h <= 2 sum h for the returned floats), so no rounding can push a height above 1 and no
tolerance is granted; heights must be >= 0 and not all 0. Up to MAX_STEPS steps; np.correlate's sums are
accurate to about 1e-13 relative, and ``check_exact`` recomputes M in integers for a record.
"""

from __future__ import annotations

import math

import numpy as np

from tasks.base import ExactCheck, Verdict, invalid
from tasks.families.exact import integers
from tasks.families.step_functions.exact import MAX_WORK_BITS, convolve, packed_bits
from tasks.families.step_functions.heights import read_heights, scaled

MAX_STEPS = 10_000  # the published records use 51 to 600 steps
BEST_KNOWN_M = 0.3808703105862199  # Together AI's 600 steps, checked here (task.yaml)
USAGE = (f"find_step_function() must return a list of 1 to {MAX_STEPS} finite heights >= 0 for equal steps on "
         "[0, 2]; they are scaled to integral 1, after which none may exceed 1")


def too_high(heights: list[float]) -> tuple[int, float] | None:
    """(step, by how much its height exceeds 1) for the highest step if it exceeds 1 once the heights are
    scaled to sum n/2, else None; decided exactly: n max(h) <= 2 sum(h) in integers of the returned floats."""
    a, _ = integers(heights)
    top = max(range(len(a)), key=a.__getitem__)
    if len(a) * a[top] <= 2 * sum(a):
        return None
    return top, (len(a) * a[top] - 2 * sum(a)) / (2 * sum(a))


def overlap(h: np.ndarray) -> float:
    """M(h) = (2/n) max correlate(h', 1 - h') for h' = h scaled to sum n/2 (see the module)."""
    n = len(h)
    h = scaled(h)  # exact; the normalisation below undoes any scale, and 1e308s cannot overflow the sum
    total = math.fsum(h.tolist())
    normal = h * (n / 2 / total) if total != n / 2 else h
    return float(np.max(np.correlate(normal, 1 - normal, "full"))) * 2 / n


def verify(returned) -> Verdict:
    heights, err = read_heights(returned, MAX_STEPS, USAGE)
    if err is not None:
        return invalid(err)
    if not np.any(heights):
        return invalid("all heights are 0, so h cannot be scaled to integral 1")
    high = too_high(heights.tolist())
    if high is not None:
        step, excess = high
        return invalid(f"scaled to integral 1 (sum n/2 = {len(heights) / 2:g}), step {step} has height 1 + {excess:.2g} > 1 "
                       "(decided exactly); h must stay in [0, 1]: lower the tallest steps or raise the others")
    m = overlap(heights)
    reward = 1.0 / m
    feedback = (f"{len(heights)} steps: M = max_k overlap = {m:.10g}, reward 1/M = {reward:.10g} (best known M = "
                f"{BEST_KNOWN_M:.10g}, reward {1 / BEST_KNOWN_M:.10g}; lower M is better)")
    return Verdict(reward, True, feedback, {"M": m, "steps": float(len(heights))})


def check_exact(returned) -> ExactCheck:
    """M(h) recomputed exactly. With h = H / D (integers H, and S = sum H), the scaled heights are
    n H_i / (2S) and 1 minus them (2S - n H_j) / (2S) = G_j / (2S), so M = max_m sum_i H_i G_(i+m) / (2 S^2):
    one integer correlation. The constraints (0 <= scaled h <= 1) are exact in ``verify`` already."""
    heights, err = read_heights(returned, MAX_STEPS, USAGE)
    if err is not None or not np.any(heights) or too_high(heights.tolist()) is not None:
        return ExactCheck("unchecked", "not a step function the verifier accepts")
    a, _ = integers(heights.tolist())
    n, total = len(a), sum(a)
    g = [2 * total - n * x for x in a]
    if packed_bits(a, g) > MAX_WORK_BITS:
        return ExactCheck("unchecked", f"{n} heights spanning {max(a).bit_length()} bits are too many for an exact "
                                       "correlation here")
    peak = max(convolve(a, g[::-1]))  # correlate(a, g) is convolve(a, reversed g)
    return ExactCheck("exact", f"M = max_k overlap from the {n} heights in integer arithmetic: M = "
                               f"{peak / (2 * total * total):.15g}, reward 1/M = {2 * total * total / peak:.15g} "
                               "(0 <= h <= 1 after scaling to integral 1, checked exactly)", 2 * total * total / peak)
