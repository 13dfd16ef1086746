"""Trusted check of a kissing configuration (AlphaEvolve B.11; EinsteinArena's kissing-number problems).

The lemma of AlphaEvolve's paper (Novikov et al. 2025): if C is a set of points in R^d with 0 not in C
and min_{x != y} |x - y| >= max_x |x|, the unit spheres centred at 2x / |x| (x in C) do not overlap and
all touch the unit sphere at the origin, so the kissing number in dimension d is at least |C|. The reward
is |C| for a set that satisfies it; any other set is rejected, naming the closest pair.

Exact, with no tolerance: the reward is a count, and touching spheres are the rule in good
configurations (the 604-vector one has 19,704 touching pairs), so any slack would let rounding decide.
Coordinates are integers (a float that is a whole number is taken as one), or p + q sqrt(2) written
[p, q] with integers p and q, which EinsteinArena's 604-vector construction needs; |p|, |q| <= 2^52.
Scaling every vector by the same factor changes nothing, so real coordinates are scaled up and rounded.

How every pair is decided: squared lengths and distances are a + b sqrt(2) with integers a, b. Each pair
is first compared in floats with a rigorous error margin, about 1e-10 of the squared lengths involved;
a pair inside the margin (every touching pair) is decided exactly in Python integers, the sign of
a + b sqrt(2) by signs and squares. ``check_exact`` decides every pair in integers, with no floats.
"""

from __future__ import annotations

import math

import numpy as np

from tasks.base import ExactCheck, Verdict, invalid

MAX_VECTORS = 1000  # far above any kissing configuration known in dimensions up to 12
MAX_COORD = 2**52  # |p| and |q|: every coordinate and difference is exact in a float
ROOT2 = math.sqrt(2.0)
MARGIN = 1e-10  # relative float error a pair may have before it is decided in integers (the error is < 1e-13)


def usage(d: int) -> str:
    return (f"the entry function must return a list of nonzero vectors of {d} coordinates each, every coordinate an "
            "integer or a pair [p, q] of integers meaning p + q*sqrt(2)")


def _coordinate(value, where: str):
    """(p, q, None) or (None, None, why) for one coordinate."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            return None, None, f"{where} is a list of {len(value)} items; a coordinate with sqrt(2) is a pair [p, q]"
        p, _, err = _coordinate(value[0], where + "[0]")
        q, _, err2 = (None, None, err) if err else _coordinate(value[1], where + "[1]")
        if err or err2:
            return None, None, err or err2
        return p, q, None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, None, f"{where} is {repr(value)[:40]} ({type(value).__name__}), not an integer"
    if isinstance(value, float):
        if not math.isfinite(value) or value != math.floor(value):
            return None, None, (f"{where} is {value!r}, not a whole number: scale every vector by the same factor "
                                "and round (only directions count), or write p + q*sqrt(2) as [p, q]")
        value = int(value)
    if abs(value) > MAX_COORD:
        return None, None, f"{where} has {abs(value).bit_length()} bits, more than the {MAX_COORD.bit_length() - 1} allowed"
    return value, 0, None


def read_vectors(returned, d: int):
    """(P, Q, None) with integer arrays of shape (n, d), the vectors being P + sqrt(2) Q, or (None, None, why)."""
    if isinstance(returned, dict):
        if "vectors" not in returned:
            return None, None, f"the returned dict lacks 'vectors'; {usage(d)}"
        returned = returned["vectors"]
    if not isinstance(returned, (list, tuple)):
        return None, None, f"{usage(d)}; got {type(returned).__name__}"
    if len(returned) < 2:
        return None, None, f"{len(returned)} vector(s): a configuration needs at least 2; {usage(d)}"
    if len(returned) > MAX_VECTORS:
        return None, None, f"{len(returned)} vectors, over the limit of {MAX_VECTORS}; {usage(d)}"
    p = np.zeros((len(returned), d), dtype=np.int64)
    q = np.zeros((len(returned), d), dtype=np.int64)
    for i, vector in enumerate(returned):
        if not isinstance(vector, (list, tuple)) or len(vector) != d:
            got = f"{len(vector)} coordinates" if isinstance(vector, (list, tuple)) else type(vector).__name__
            return None, None, f"vector {i} must have {d} coordinates, got {got}; {usage(d)}"
        for k, value in enumerate(vector):
            pk, qk, err = _coordinate(value, f"coordinate {k} of vector {i}")
            if err:
                return None, None, err
            p[i, k], q[i, k] = pk, qk
    zero = np.flatnonzero(~(p.any(axis=1) | q.any(axis=1)))
    if zero.size:
        return None, None, f"vector {zero[0]} is 0; every vector must be nonzero (its sphere's direction)"
    return p, q, None


def z2_sign(a: int, b: int) -> int:
    """The sign of a + b sqrt(2) for integers a and b, exactly."""
    if a >= 0 and b >= 0:
        return int(a > 0 or b > 0)
    if a <= 0 and b <= 0:
        return -1
    return (1 if a > 0 else -1) * (1 if a * a > 2 * b * b else -1)  # a, b of opposite signs; a^2 = 2b^2 is impossible


def squared(p: list[int], q: list[int]) -> tuple[int, int]:
    """|sum_k (p_k + q_k sqrt 2) e_k|^2 = a + b sqrt(2), as (a, b)."""
    return sum(x * x + 2 * y * y for x, y in zip(p, q)), sum(2 * x * y for x, y in zip(p, q))


def longest(p: np.ndarray, q: np.ndarray, candidates) -> tuple[int, tuple[int, int]]:
    """(index, exact squared length) of the longest vector among ``candidates``."""
    best, norm = None, None
    for i in candidates:
        here = squared(p[i].tolist(), q[i].tolist())
        if norm is None or z2_sign(here[0] - norm[0], here[1] - norm[1]) > 0:
            best, norm = int(i), here
    return best, norm


def verify_kissing(returned, d: int, best: float) -> Verdict:
    p, q, err = read_vectors(returned, d)
    if err is not None:
        return invalid(err)
    n = len(p)
    x = p.astype(np.float64) + ROOT2 * q.astype(np.float64)
    weight = ((np.abs(p) + 1.5 * np.abs(q)).astype(np.float64) ** 2).sum(axis=1)  # bounds every term's size
    norm2 = (x * x).sum(axis=1)
    close = np.flatnonzero(norm2 >= norm2.max() - MARGIN * (weight + weight.max()))
    m, (ma, mb) = longest(p, q, close)
    gram = x @ x.T
    iu, ju = np.triu_indices(n, 1)
    dist2 = norm2[iu] + norm2[ju] - 2 * gram[iu, ju]  # error below 1e-14 of weight[i] + weight[j]
    margin = MARGIN * (weight[iu] + weight[ju] + weight[m])
    gap = dist2 - norm2[m]
    bad = gap < -margin
    touching = 0
    for k in np.flatnonzero(np.abs(gap) <= margin):  # decided in integers
        i, j = int(iu[k]), int(ju[k])
        a, b = squared((p[i] - p[j]).tolist(), (q[i] - q[j]).tolist())
        sign = z2_sign(a - ma, b - mb)
        bad[k] = sign < 0
        touching += sign == 0
    cosine = gram[iu, ju] / np.sqrt(norm2[iu] * norm2[ju])
    angles = np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0)))
    if bad.any():
        k = int(np.flatnonzero(bad)[np.argmin(gap[bad] / norm2[m])])
        i, j = int(iu[k]), int(ju[k])
        what = "coincide" if dist2[k] <= margin[k] else (f"are too close: |x_{i} - x_{j}|^2 = {dist2[k]:.10g} < "
                                                 f"|x_{m}|^2 = {norm2[m]:.10g}, the longest vector's")
        return invalid(f"{int(bad.sum())} pair(s) break the lemma's condition min |x - y| >= max |x|; worst: vectors {i} "
                       f"and {j} {what} (angle {angles[k]:.4f} deg after normalising)", violating_pairs=float(bad.sum()))
    feedback = (f"valid kissing configuration: {n} vectors in dimension {d}, every pair at least as far apart as the "
                f"longest vector (decided exactly); {touching} pair(s) touch; smallest angle {angles.min():.4f} deg "
                f"(best known {best:g})")
    return Verdict(float(n), True, feedback, {"vectors": float(n), "touching_pairs": float(touching),
                                              "min_angle_deg": float(angles.min())})


def check_kissing(returned, d: int) -> ExactCheck:
    """Every pair decided in integers, no floats: squared distances a + b sqrt(2) against the longest vector's."""
    p, q, err = read_vectors(returned, d)
    if err is not None:
        return ExactCheck("unchecked", f"not vectors the verifier accepts: {err}")
    n = len(p)
    P, Q = p.astype(object), q.astype(object)  # Python integers: no overflow at any size
    m, (ma, mb) = longest(p, q, range(n))
    for i in range(n - 1):
        dp, dq = P[i + 1:] - P[i], Q[i + 1:] - Q[i]
        a = (dp * dp + 2 * dq * dq).sum(axis=1)
        b = (2 * dp * dq).sum(axis=1)
        for k, (ak, bk) in enumerate(zip(a.tolist(), b.tolist())):
            if z2_sign(ak - ma, bk - mb) < 0:
                return ExactCheck("tolerance_only", f"vectors {i} and {i + 1 + k} are closer than the longest vector "
                                                    f"{m} (exact integer arithmetic)")
    return ExactCheck("exact", f"all {n * (n - 1) // 2} pairs of the {n} vectors at least as far apart as the longest "
                               "vector, in exact integer arithmetic (coordinates p + q sqrt(2) compared by signs and "
                               "squares); every vector nonzero", float(n))
