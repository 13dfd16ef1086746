"""Trusted scoring of Boston Housing predictions (HELIX appendix B.1.3, eq. 8-9), run in the parent.

The sandboxed harness (tasks/boston_harness.py) returns run_model's predictions for the 102
held-out rows; their targets are read here from tasks/boston_housing/heldout.npz, which is never
copied into the sandbox. RMSE = sqrt(mean((y - y_hat)^2)) over those rows (eq. 9) and
R = 2 - log10(RMSE + 1e-10) (eq. 8). The reward is R floored at 0, so a valid but absurd model
(RMSE > 100, i.e. $100k off on prices of $5k-$50k) never scores below a crash; the unfloored value
is kept in the metrics as ``paper_reward``. Nothing the program reports besides its predictions is
read.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tasks.base import Verdict, invalid

EPS = 1e-10  # eq. 8


def rmse(pred, y) -> float:
    """Eq. 9: root mean squared error over the held-out rows."""
    pred, y = np.asarray(pred, dtype=float), np.asarray(y, dtype=float)
    if pred.shape != y.shape:
        raise ValueError(f"shapes differ: predictions {pred.shape}, targets {y.shape}")
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def paper_reward(value: float) -> float:
    """Eq. 8: R = 2 - log10(RMSE + 1e-10)."""
    if not value >= 0:
        raise ValueError(f"RMSE must be >= 0, got {value!r}")
    return 2.0 - math.log10(value + EPS)


def load_heldout(folder: Path) -> np.ndarray:
    with np.load(Path(folder) / "heldout.npz", allow_pickle=False) as data:
        return data["y_test"].astype(float)


def verify_predictions(y_test: np.ndarray, returned) -> Verdict:
    n = len(y_test)
    if not isinstance(returned, dict) or not isinstance(returned.get("predictions"), list):
        return invalid("the harness result has no 'predictions' list (did the program replace the harness?)")
    preds = returned["predictions"]
    if any(isinstance(v, bool) for v in preds):
        return invalid("run_model returned booleans; return one house price (a float) per row of X_test")
    try:
        arr = np.asarray(preds, dtype=float)
    except (TypeError, ValueError):
        return invalid(f"run_model must return one number per row of X_test ({n} numbers); got a nested or "
                       "non-numeric list")
    if arr.shape != (n,):
        got = f"{arr.shape[0]} predictions" if arr.ndim == 1 else f"an array of shape {arr.shape}"
        return invalid(f"run_model returned {got} for the {n} rows of X_test: return exactly one prediction per "
                       f"row, in X_test's order (off by {arr.size - n:+d} values)")
    bad = ~np.isfinite(arr)
    if bad.any():
        return invalid(f"{int(bad.sum())} of {n} predictions are NaN or inf (first at row {int(np.argmax(bad))} of "
                       "X_test); check for division by zero, log of non-positive values, or unfilled rows")
    error = rmse(arr, y_test)
    paper = paper_reward(error)
    reward = max(0.0, paper)
    mae = float(np.mean(np.abs(arr - y_test)))
    r2 = 1.0 - float(np.sum((arr - y_test) ** 2)) / float(np.sum((y_test - y_test.mean()) ** 2))
    feedback = (f"held-out RMSE {error:.4f} (MEDV, thousands of dollars) on {n} houses, MAE {mae:.3f}, R^2 {r2:.4f} -> "
                f"reward 2 - log10(RMSE) = {reward:.4f} (lower RMSE is better; RMSE 1 gives reward 2)")
    return Verdict(reward, True, feedback, {"rmse": error, "mae": mae, "r2": r2, "paper_reward": paper})
