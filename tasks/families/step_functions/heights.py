"""Reading the heights of a step function from an artefact the program returned (shared by the step-function
tasks' verifiers and their exact checks).

The artefact is a flat list of numbers. Booleans, strings, None, nested lists, NaN, infinity and integers
too large for a float are refused with one line naming the first offender; so are negative heights (both
problems are about non-negative functions). No numpy conversion decides what a number is: ``"0.5"`` is a
string, not 0.5.
"""

from __future__ import annotations

import math

import numpy as np


def read_heights(returned, max_steps: int, usage: str) -> tuple[np.ndarray | None, str | None]:
    """(float64 heights, None) or (None, why): 1 to ``max_steps`` finite numbers >= 0."""
    if not isinstance(returned, list):
        return None, f"got {type(returned).__name__}, not a list; {usage}"
    if not returned:
        return None, f"no heights; {usage}"
    if len(returned) > max_steps:
        return None, f"{len(returned)} heights, over the limit of {max_steps}; {usage}"
    for i, v in enumerate(returned):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None, f"height {i} is {repr(v)[:40]} ({type(v).__name__}), not a number; {usage}"
        if isinstance(v, int) and abs(v) > 2**1023:
            return None, f"height {i} is an integer of {len(str(abs(v)))} digits, too large for a float; {usage}"
    a = np.array(returned, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        return None, f"{bad.size} height(s) are NaN or infinite, first: height {bad[0]} = {a[bad[0]]}; {usage}"
    negative = np.flatnonzero(a < 0)
    if negative.size:
        i = int(negative[0])
        return None, (f"{negative.size} height(s) are negative, first: height {i} = {a[i]:.6g}; the function must be "
                      f"non-negative everywhere; {usage}")
    return a, None


def scaled(heights: np.ndarray) -> np.ndarray:
    """Non-negative heights, not all 0, times the power of two that brings the largest into [1/2, 1): exact
    (a height below 2^-1022 of the largest is flushed to 0), so huge or tiny heights neither overflow nor
    underflow in the products; the ratios the tasks score do not change."""
    return np.ldexp(heights, -math.frexp(float(np.max(heights)))[1])
