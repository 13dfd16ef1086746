"""The exact kNN update for large archives, with a bf16 (AMX / AVX512-BF16) prefilter.

Adding m newcomers to an archive of N costs one m x N similarity pass. In fp32 that pass is the
whole epoch's selection time at N = 10^6 (2 x 256 x 10^6 x 384 = 197 GFLOP); in bf16 on a CPU
with native bf16 matmul it runs ~3x faster, but bf16 similarities are off by up to ``BF16_EPS``.
So bf16 only *prefilters*: every pair that could enter a top-k list under the error bound is
rescored in fp32, and the lists are built from fp32 values alone. The result is the fp32 answer
(up to the last-bit rounding of a dot product computed in another order), never an approximation.

Error bound, for unit vectors q, b (d = 384) rounded to bf16 (unit roundoff u = 2^-8), fp32
accumulation, and a bf16 output: |q.b - bf16(q).bf16(b)| <= (2u + u^2) |q||b| + d 2^-24 and the
output rounding adds u |q.b|, so < 3u + 1e-4 = 0.0118; ``BF16_EPS`` is 0.0125.
"""

from __future__ import annotations

import numpy as np

from population.topk import topk_rows

BF16_EPS = 0.0125


def bf16_native() -> bool:
    """Whether torch's CPU matmul has native bf16 (AVX512-BF16 or AMX); without it bf16 is emulated and slower."""
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


class Bf16Shadow:
    """A bf16 copy of the archive's embedding rows, grown by 25% steps (no per-epoch copy)."""

    def __init__(self):
        import torch

        self.torch = torch
        self.rows = torch.zeros((0, 0), dtype=torch.bfloat16)
        self.n = 0

    def sync(self, emb: np.ndarray) -> None:
        """Convert the rows of ``emb`` not yet mirrored (all of them after a restore)."""
        torch = self.torch
        need = len(emb)
        if need > len(self.rows) or self.rows.shape[1] != emb.shape[1]:
            grown = torch.zeros((max(need + need // 4, 1024), emb.shape[1]), dtype=torch.bfloat16)
            if self.n and self.rows.shape[1] == emb.shape[1]:
                grown[: self.n] = self.rows[: self.n]
            else:
                self.n = 0
            self.rows = grown
        if need > self.n:
            self.rows[self.n : need] = torch.from_numpy(np.ascontiguousarray(emb[self.n : need]))
            self.n = need


# bf16 values are compared as their int16 bit patterns, in numpy: vectorised and single-threaded,
# where torch's bf16 elementwise ops were ~10x slower (and ~50x on a CPU shared with other
# processes: OpenMP barriers). Non-negative floats order exactly like their bit patterns, and every
# negative pattern is below every non-negative one; only the order among negatives is reversed.
# So a column's integer max is its true max whenever that is >= 0, and any negative max is
# bounded above by 0; a threshold > 0 compares exactly, and one <= 0 is taken as "accept all".
_LOWEST = np.int16(-32768)


def to_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (int16), rounding to nearest."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(torch.bfloat16).view(torch.int16).numpy()


def from_bits(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (int16) -> float32."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(bits, dtype=np.int16)).view(torch.bfloat16).float().numpy()


def max_upper_bound(bits_max: np.ndarray) -> np.ndarray:
    """From integer maxima of bf16 patterns, an upper bound on each float max (exact when >= 0)."""
    return np.where(bits_max < 0, np.float32(0.0), from_bits(bits_max))


def threshold_bits(floor: np.ndarray) -> np.ndarray:
    """Patterns p such that bits >= p accepts every bf16 value >= floor (exact for floor > 0)."""
    bits = to_bits(floor)
    return np.where((floor <= 0) | (bits < 0), _LOWEST, bits).astype(np.int16)  # <= 0: -0.0 >= 0.0 too


def nonzero_2d(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.nonzero of a C-contiguous bool array whose size is a multiple of 8, for sparse masks:
    the scan runs over 8-byte words (8x fewer elements), then only the nonzero words are opened."""
    flat = mask.reshape(-1)
    words = np.flatnonzero(flat.view(np.uint64))
    pos = (words[:, None] * 8 + np.arange(8)).reshape(-1)
    pos = pos[flat[pos]]
    return np.divmod(pos, mask.shape[1])


def _merge_bounds(bound: np.ndarray, cols: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Each column of ``bound`` (k, m), descending, merged with the ``values`` offered to it (``cols``)."""
    m = bound.shape[1]
    ids = np.concatenate([np.repeat(np.arange(m), k), cols])
    vals = np.concatenate([bound.T.ravel(), values])
    order = np.lexsort((-vals, ids))
    ids, vals = ids[order], vals[order]
    rank = np.arange(len(ids)) - np.searchsorted(ids, ids)  # position within its column's run
    keep = rank < k
    out = np.full((m, k), -np.inf, dtype=np.float32)
    out[ids[keep], rank[keep]] = vals[keep]
    return out.T.copy()


def add_prefiltered(emb: np.ndarray, topk: np.ndarray, shadow: Bf16Shadow, new: np.ndarray, k: int,
                    chunk: int) -> np.ndarray:
    """Update old rows' ``topk`` in place for the newcomers ``new`` and return the newcomers' top-k.

    ``emb`` (N, d) and ``topk`` (N, k) are the archive's fp32 rows and lists; ``new`` (m, d) is
    normalised. Same contract as ``KnnIndex._add`` before the append."""
    torch = shadow.torch
    shadow.sync(emb)
    m, n = len(new), len(emb)
    inner = new @ new.T
    np.fill_diagonal(inner, -np.inf)  # an item is never its own neighbour
    # bound[:, i]: k lower bounds on newcomer i's true similarities (exact inner ones, bf16 ones - eps);
    # its k-th largest bounds i's k-th neighbour from below, so a pair whose bf16 value is below
    # that minus eps can never be among i's top k.
    bound = topk_rows(inner, k).T.copy()  # (k, m)
    qb = torch.from_numpy(new).to(torch.bfloat16)
    width = min(chunk, n)
    sims_buf = torch.empty((m, width), dtype=torch.bfloat16)  # buffers reused: no page faults per chunk
    mask_buf = np.zeros(m * width + 8, dtype=bool)
    pair_rows, pair_cols, pair_approx = [], [], []
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        c = stop - start
        torch.matmul(qb, shadow.rows[start:stop].T, out=sims_buf[:, :c])  # (m, c) bf16
        bits = sims_buf[:, :c].view(torch.int16).numpy()
        best = max_upper_bound(bits.max(axis=0))  # each old row's best newcomer (an upper bound when < 0)
        # Old rows whose k-th neighbour a newcomer may beat: rescore exactly below.
        old = np.flatnonzero(best >= topk[start:stop, -1] - BF16_EPS)
        if old.size:
            rows = start + old
            exact = new @ emb[rows].T  # (m, r) fp32
            hit = exact.max(axis=0) > topk[rows, -1]
            if hit.any():
                rows, exact = rows[hit], exact[:, hit]
                topk[rows] = topk_rows(np.concatenate([topk[rows], exact.T], 1), k)
        # Candidate neighbours of each newcomer: bf16 value >= its bound - eps. The floor is compared
        # in bf16, lowered by 2^-8 first so rounding it (error <= 2^-9 below 1) never raises it.
        floor = threshold_bits(bound[-1] - BF16_EPS - 2.0**-8)
        size = m * c + (-(m * c)) % 8
        mask_buf[m * c : size] = False
        mask = mask_buf[: m * c].reshape(m, c)
        np.greater_equal(bits, floor[:, None], out=mask)
        c_idx, r_idx = nonzero_2d(mask_buf[:size].reshape(1, size))
        c_idx, r_idx = np.divmod(r_idx, c)
        if r_idx.size:
            approx = from_bits(bits[c_idx, r_idx])
            pair_rows.append(start + r_idx)
            pair_cols.append(c_idx)
            pair_approx.append(approx)
            bound = _merge_bounds(bound, c_idx, approx - BF16_EPS, k)
    new_topk = topk_rows(inner, k)
    if pair_rows:
        rows, cols, approx = np.concatenate(pair_rows), np.concatenate(pair_cols), np.concatenate(pair_approx)
        keep = approx >= bound[-1][cols] - BF16_EPS  # the final bounds are the tightest
        rows, cols = rows[keep], cols[keep]
        exact = np.einsum("pd,pd->p", emb[rows], new[cols])
        order = np.argsort(cols, kind="stable")
        rows, cols, exact = rows[order], cols[order], exact[order]
        counts = np.bincount(cols, minlength=m)
        width = int(counts.max(initial=0))
        if width:
            offered = np.full((m, width), -np.inf, dtype=np.float32)
            slot = np.arange(len(cols)) - np.repeat(np.cumsum(counts) - counts, counts)
            offered[cols, slot] = exact
            new_topk = topk_rows(np.concatenate([new_topk, offered], 1), k)
    return new_topk
