"""Trusted check of a cap set in Z_3^n, shared by tasks/cap_set_4 ... tasks/cap_set_8 (FunSearch,
paper 001, "Cap sets" and Figure 4a).

A cap set is a set of vectors in Z_3^n = {0, 1, 2}^n with no line: no three distinct vectors
a, b, c with a + b + c = 0 (mod 3), i.e. for distinct a, b the third point of their line,
c = -(a + b) mod 3, is not in the set. The reward is the set's size.

The artefact is the list of vectors that tasks/families/cap_set/harness.py built in the sandbox with the
program's priority function; it is re-checked from scratch here, never trusted: a list of at
most 3^n lists of n integers in {0, 1, 2} (no floats such as 1.0, no booleans), no vector twice,
and no line. Vectors are encoded as base-3 integers (first coordinate most significant, the
order of ``itertools.product``); the line check computes the third point's code for blocks of
pairs with two half-dimension addition tables and looks it up in a membership array, stopping
at the first line. A block of rows is checked against the whole set, so the work before a line is
found is at most (largest cap) x 3^n pairs: a few tens of milliseconds at n = 8.
"""

from __future__ import annotations

import numpy as np

from tasks.base import ExactCheck, Verdict, invalid

# Largest known cap sets in Z_3^n, FunSearch (Nature 2023) Figure 4a for n = 3..8 (n = 1, 2: 2 and 4,
# by hand; the exact maximum is known only for n <= 6).
BEST_KNOWN = {1: 2, 2: 4, 3: 9, 4: 20, 5: 45, 6: 112, 7: 236, 8: 512}
PRIOR_BEST = {8: 496}  # before FunSearch (Figure 4a, "Best known" row)
PAIRS_PER_BLOCK = 1 << 20  # pairs whose third point is computed at once


def usage(n: int) -> str:
    return (f"the harness returns the greedy cap set as a list of vectors, each a list of {n} integers in {{0, 1, 2}}; "
            f"priority(element, n) only orders the {3**n} vectors")


def powers(n: int) -> np.ndarray:
    """Base-3 place values, first coordinate most significant: code(v) = v @ powers(n)."""
    return 3 ** np.arange(n - 1, -1, -1, dtype=np.int64)


def _show(v) -> str:
    return "(" + ", ".join(str(int(x)) for x in v) + ")"


def _third_table(m: int) -> np.ndarray:
    """T[a, b] = code of -(a + b) mod 3 for codes a, b of vectors in Z_3^m (3^m x 3^m)."""
    if m == 0:
        return np.zeros((1, 1), dtype=np.int64)
    digits = (np.arange(3**m)[:, None] // powers(m)[None, :]) % 3
    return ((-(digits[:, None, :] + digits[None, :, :])) % 3) @ powers(m)


_TABLES: dict[int, np.ndarray] = {}


def _table(m: int) -> np.ndarray:
    if m not in _TABLES:
        _TABLES[m] = _third_table(m)
    return _TABLES[m]


def find_line(codes: np.ndarray, n: int) -> tuple[int, int, int] | None:
    """Indices (i, j, k) of three distinct vectors of the set (given as distinct base-3 codes)
    with v_i + v_j + v_k = 0 mod 3, or None if the set is a cap set."""
    codes = np.asarray(codes, dtype=np.int64)
    size = len(codes)
    if size < 3:
        return None
    low_dims = n // 2
    split = 3**low_dims
    t_high, t_low = _table(n - low_dims), _table(low_dims)
    high, low = codes // split, codes % split
    position = np.full(3**n, -1, dtype=np.int64)
    position[codes] = np.arange(size)
    rows = max(1, PAIRS_PER_BLOCK // size)
    for start in range(0, size, rows):
        stop = min(size, start + rows)
        third = t_high[high[start:stop, None], high[None, :]] * split + t_low[low[start:stop, None], low[None, :]]
        k = position[third]  # (rows, size): index of the third point, -1 when it is not in the set
        # the third point of (v, v) is v itself; for distinct a, b it differs from both
        k[np.arange(stop - start), np.arange(start, stop)] = -1
        hit = np.flatnonzero(k.ravel() >= 0)
        if hit.size:
            r, j = divmod(int(hit[0]), size)
            return start + r, j, int(k[r, j])
    return None


def shape_problem(returned, n: int) -> str | None:
    """Why ``returned`` is not a non-empty list of at most 3^n lists of n integers in {0, 1, 2}, or None."""
    use = usage(n)
    if not isinstance(returned, list):
        return f"got {type(returned).__name__}, not a list of vectors; {use}"
    if not returned:
        return f"the set is empty; {use}"
    total = 3**n
    if len(returned) > total:
        return f"got {len(returned)} vectors, but Z_3^{n} has only {total}; {use}"
    for i, v in enumerate(returned):
        if not isinstance(v, list) or len(v) != n:
            what = f"a list of length {len(v)}" if isinstance(v, list) else f"{repr(v)[:40]} ({type(v).__name__})"
            return f"vector {i} is {what}, not a list of {n} integers; {use}"
    flat = [x for v in returned for x in v]
    if any(type(x) is not int for x in flat):  # exact type: bool, float (1.0), str are all rejected
        i = next(i for i, x in enumerate(flat) if type(x) is not int)
        return (f"vector {i // n} has entry {repr(flat[i])[:40]} ({type(flat[i]).__name__}) at position "
                f"{i % n}, not an integer; {use}")
    low, high = min(flat), max(flat)
    if low < 0 or high > 2:
        i = next(i for i, x in enumerate(flat) if not 0 <= x <= 2)
        bad = flat[i] if abs(flat[i]) < 10**15 else "a huge integer"
        return f"vector {i // n} has entry {bad} at position {i % n}; entries must be 0, 1 or 2; {use}"
    return None


def verify_cap_set(returned, n: int) -> Verdict:
    problem = shape_problem(returned, n)
    if problem:
        return invalid(problem)
    vectors = np.array(returned, dtype=np.int64).reshape(len(returned), n)
    codes = vectors @ powers(n)
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    first = first[inverse.reshape(-1)]  # for each vector, the index of its first occurrence
    repeats = np.flatnonzero(first != np.arange(len(codes)))
    if repeats.size:
        j = int(repeats[0])
        return invalid(f"{repeats.size} repeated vector(s): vector {j} {_show(vectors[j])} repeats vector "
                       f"{int(first[j])}; a cap set has each vector once")
    line = find_line(codes, n)
    if line is not None:
        i, j, k = line
        return invalid(f"not a cap set: vectors {i} {_show(vectors[i])}, {j} {_show(vectors[j])} and {k} "
                       f"{_show(vectors[k])} form a line (they sum to 0 mod 3)")
    size = len(returned)
    best = BEST_KNOWN[n]
    if n in PRIOR_BEST:
        note = f"; the largest known is {best} (found by FunSearch; previously {PRIOR_BEST[n]})"
    else:
        note = f"; the largest known is {best}" + (" (proven maximum)" if n <= 6 else "")
    return Verdict(float(size), True, f"a cap set of {size} vectors in Z_3^{n}{note}",
                   {"size": float(size), "fraction_of_best_known": size / best})


def exact_cap_set(returned, n: int) -> ExactCheck:
    """Integers mod 3: ``verify_cap_set``'s line check is exact integer arithmetic with no tolerance, so a set it
    accepted is a cap set exactly; the size is counted again here (tasks/base.py ``check_exact``)."""
    size = len({tuple(v) for v in returned})
    return ExactCheck("exact", f"integers mod 3: {size} distinct vectors with no line, checked in integer arithmetic "
                               "by the verifier itself (no tolerance)", float(size))
