"""Trusted scoring of symbolic-regression predictions (paper eq. 26-28), run in the parent.

The sandboxed harness (tasks/symreg_harness.py) returns test predictions per case; the held-out
targets are read here from the task folder's ``heldout.npz``, which is never copied into the
sandbox. The paper's reward is R = -log10(median_i NMSE_i) (eq. 27-28). We use
R = log10(1 + 1/NMSE) on the median, with NMSE floored at 1e-12:
* for a good model it IS eq. 28 (they differ by log10(1 + NMSE) < 4.4e-7 once NMSE < 1e-6);
* an exact fit gets the cap, 12, instead of +inf;
* it stays > 0 for any valid model, also one worse than predicting the mean (NMSE >= 1, where
  eq. 28 goes negative): invalid programs score 0, so failing is never better than being poor,
  and poor models still rank (NMSE 1 -> 0.30, 10 -> 0.041).
The unclipped eq. 28 value is kept in the metrics (``neg_log10_nmse``) for comparison with papers.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tasks.base import Verdict, invalid

NMSE_FLOOR = 1e-12
REWARD_CAP = 12.0  # log10(1 + 1e12), to 4e-13


def nmse(y_hat: np.ndarray, y: np.ndarray) -> float:
    """Eq. 26: sum (y_hat - y)^2 / sum (y - mean y)^2."""
    y_hat, y = np.asarray(y_hat, dtype=float), np.asarray(y, dtype=float)
    if y_hat.shape != y.shape:
        raise ValueError(f"shapes differ: predictions {y_hat.shape}, targets {y.shape}")
    spread = float(np.sum((y - y.mean()) ** 2))
    if spread == 0:
        raise ValueError("the targets are constant: NMSE is undefined")
    return float(np.sum((y_hat - y) ** 2)) / spread


def reward_from_nmse(value: float) -> float:
    """log10(1 + 1/NMSE), NMSE floored at 1e-12: eq. 28 for good fits, in (0, 12] (see above)."""
    if not value >= 0:
        raise ValueError(f"NMSE must be >= 0, got {value!r}")
    return math.log10(1.0 + 1.0 / max(value, NMSE_FLOOR))


def load_heldout(folder: Path) -> list[np.ndarray]:
    with np.load(Path(folder) / "heldout.npz", allow_pickle=False) as data:
        n = len(data.files)
        return [data[f"y_test_{i}"] for i in range(n)]


def _floats(value, n: int) -> list[float] | None:
    """Harness-reported extras (shown in feedback only, never scored)."""
    try:
        out = [float(v) for v in value]
    except (TypeError, ValueError):
        return None
    return out if len(out) == n and all(math.isfinite(v) for v in out) else None


def verify_predictions(heldout: list[np.ndarray], returned) -> Verdict:
    n = len(heldout)
    if not isinstance(returned, dict) or not isinstance(returned.get("predictions"), list):
        return invalid("the harness result has no 'predictions' list (did the program replace the harness?)")
    preds = returned["predictions"]
    if len(preds) != n:
        return invalid(f"expected test predictions for {n} cases, got {len(preds)}")
    errors = []
    for i, (p, y) in enumerate(zip(preds, heldout)):
        try:
            arr = np.asarray(p, dtype=float)
        except (TypeError, ValueError):
            return invalid(f"case {i}: the test predictions are not a flat list of numbers")
        if arr.shape != y.shape:
            return invalid(f"case {i}: func(x, params) returned shape {arr.shape} on the test inputs, "
                           f"expected {y.shape} (one prediction per row of x)")
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        if bad:
            return invalid(f"case {i}: {bad} of {arr.size} test predictions are NaN or inf with the fitted "
                           "params; guard against log(0), division by zero and overflow outside the training range")
        errors.append(nmse(arr, y))
    median = float(np.median(errors))
    reward = reward_from_nmse(median)
    lines = [f"test NMSE per case: {', '.join(f'{e:.3g}' for e in errors)}; median {median:.3g} -> "
             f"reward log10(1 + 1/median NMSE) = {reward:.3f} (about -log10(NMSE) for good fits; at most "
             f"{REWARD_CAP:g}; below 0.3 means no better than predicting the mean)"]
    train = _floats(returned.get("train_nmse", ()), n)
    if train is not None:
        lines.append(f"train NMSE per case after the BFGS fit: {', '.join(f'{e:.3g}' for e in train)}")
    params = returned.get("params")
    if isinstance(params, list) and len(params) == n:
        fitted = [_floats(p, len(p)) if isinstance(p, list) else None for p in params]
        if all(f is not None for f in fitted):
            lines.append("fitted params per case: " + "; ".join("[" + ", ".join(f"{v:.4g}" for v in f) + "]"
                                                                for f in fitted))
    metrics = {"nmse_median": median, "neg_log10_nmse": -math.log10(max(median, NMSE_FLOOR)),
               **{f"nmse_case_{i}": e for i, e in enumerate(errors)}}
    return Verdict(reward, True, "\n".join(lines), metrics)
