"""Trusted check of a set A of integers in [0, 30) with more sums than differences (AlphaResearch
appendix D.3, "MSTD (n=30)"): the reward is |A+A| / |A-A|, recomputed here from the elements.

The program returns the elements of A as a flat list of distinct integers (the AlphaResearch
program returns the equivalent 0/1 indicator array of length 30). Anything else is rejected with
the reason: a non-list, an empty list, a non-integer element (floats such as 3.0 and booleans
included: JSON true would otherwise count as 1), an element outside [0, 30), and a repeated
element (A is a set; a duplicate means the program does not build what it thinks it does, so it
is rejected rather than silently removed). No score the program reports is ever read.
"""

from __future__ import annotations

from fractions import Fraction

from tasks.base import ExactCheck, Verdict, invalid

N = 30
CONWAY = (0, 2, 3, 4, 7, 11, 12, 14)  # |A+A| = 26, |A-A| = 25: the benchmark's reference value 1.04
USAGE = f"construct_set() must return a list of distinct integers in [0, {N}) (the elements of A)"


def is_integer(a) -> bool:
    """A Python int, not a bool (JSON true would count as 1) nor a float: 29.5 would let a set of
    half-integers in [0, 30), a set of integers in [0, 60) in disguise, score (see the hostile tests)."""
    return isinstance(a, int) and not isinstance(a, bool)


def sums_and_differences(elements) -> tuple[int, int]:
    """|A+A| and |A-A| of a collection of integers, by enumerating all pairs."""
    return len({a + b for a in elements for b in elements}), len({a - b for a in elements for b in elements})


def verify(returned) -> Verdict:
    if not isinstance(returned, list):
        return invalid(f"got {type(returned).__name__}, not a list; {USAGE}")
    if not returned:
        return invalid(f"A is empty; {USAGE}")
    if len(returned) > N:
        return invalid(f"got {len(returned)} elements, but a set in [0, {N}) has at most {N}; {USAGE}")
    for i, a in enumerate(returned):
        if not is_integer(a):
            return invalid(f"element {i} is {repr(a)[:40]} ({type(a).__name__}), not an integer; {USAGE}")
    outside = [a for a in returned if not 0 <= a < N]
    if outside:
        first = outside[0] if abs(outside[0]) < 10**15 else "a huge integer"
        return invalid(f"{len(outside)} element(s) outside [0, {N}), first: {first}; {USAGE}")
    repeated = sorted(a for a in set(returned) if returned.count(a) > 1)
    if repeated:
        return invalid(f"A is a set, but {repeated} appear(s) more than once; {USAGE}")
    sums, diffs = sums_and_differences(returned)
    ratio = sums / diffs
    feedback = (f"|A| = {len(returned)}, |A+A| = {sums}, |A-A| = {diffs}, ratio {ratio:.6g} "
                f"(Conway's set reaches 26/25 = 1.04; higher is better)")
    return Verdict(ratio, True, feedback, {"ratio": ratio, "size": float(len(returned)),
                                           "sums": float(sums), "differences": float(diffs)})


def check_exact(returned) -> ExactCheck:
    """Integers only: the verifier's count of sums and differences is already exact, so a valid set's
    ratio is exact; it is recomputed here as a fraction (tasks/base.py ``check_exact``)."""
    sums, diffs = sums_and_differences(returned)
    ratio = Fraction(sums, diffs)
    return ExactCheck("exact", f"integers: |A+A| / |A-A| = {sums}/{diffs} = {float(ratio):.15g}, counted exactly "
                               "(the verifier has no tolerance)", float(ratio))
