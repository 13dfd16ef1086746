"""Trusted scoring of Boston Housing predictions (HELIX appendix B.1.3, eq. 8-9), run in the parent.

The sandboxed harness (tasks/families/boston/harness.py) returns run_model's predictions for the 102
held-out rows; their targets are read here from tasks/boston_housing/heldout.npz, which is never
copied into the sandbox. RMSE = sqrt(mean((y - y_hat)^2)) over those rows (eq. 9) and
R = 2 - log10(RMSE + 1e-10) (eq. 8). The reward is R floored at 0, so a valid but absurd model
(RMSE > 100, i.e. $100k off on prices of $5k-$50k) never scores below a crash; the unfloored value
is kept in the metrics as ``paper_reward``. Nothing the program reports besides its predictions is
read.

Each prediction must be a real number (an int or a float; booleans, strings, None and nested
lists are rejected, each with one line) with |value| <= MAX_ABS_PREDICTION (1e6, thousands of
dollars): a larger one is rejected as absurd. The bound changes no reward: one prediction
beyond +-1060 already puts RMSE over 100 (|1060 - 50| / sqrt(102) > 100), which scores 0. It
keeps every square far from overflow: 1e200 used to come back valid with reward 0, inf in the
metrics, a 200-digit MAE in the feedback and overflow warnings on the trainer's console.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tasks.base import ExactCheck, Verdict, invalid

EPS = 1e-10  # eq. 8
MAX_ABS_PREDICTION = 1e6  # MEDV is 5 to 50 (thousands of dollars); beyond this a prediction is absurd


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


def _as_predictions(preds: list, n: int):
    """A float array of n finite, sane predictions, or (None, why)."""
    usage = f"return one house price (a float) per row of X_test ({n} numbers)"
    nested = [v for v in preds if isinstance(v, (list, tuple))]
    if nested:
        widths = {len(v) for v in nested}
        if len(nested) == len(preds) and len(widths) == 1:
            return None, (f"run_model returned an array of shape ({len(preds)}, {widths.pop()}) for the {n} rows of "
                          f"X_test: {usage}")
        return None, f"run_model must return one number per row of X_test ({n} numbers); got a nested list"
    flags = [i for i, v in enumerate(preds) if isinstance(v, (bool, np.bool_))]
    if flags:
        return None, f"run_model returned booleans ({len(flags)} of {len(preds)}, first at row {flags[0]}); {usage}"
    other = [i for i, v in enumerate(preds) if not isinstance(v, (int, float, np.integer, np.floating))]
    if other:
        kind = "None" if preds[other[0]] is None else type(preds[other[0]]).__name__
        return None, (f"run_model must return one number per row of X_test; {len(other)} prediction(s) are not "
                      f"numbers (first at row {other[0]}: {kind}); {usage}")
    if len(preds) != n:
        return None, (f"run_model returned {len(preds)} predictions for the {n} rows of X_test: return exactly one "
                      f"prediction per row, in X_test's order (off by {len(preds) - n:+d} values)")
    bad = [i for i, v in enumerate(preds) if not isinstance(v, int) and not math.isfinite(v)]
    if bad:
        return None, (f"{len(bad)} of {n} predictions are NaN or inf (first at row {bad[0]} of X_test); check for "
                      "division by zero, log of non-positive values, or unfilled rows")
    absurd = [i for i, v in enumerate(preds) if abs(v) > MAX_ABS_PREDICTION]  # exact for ints of any size
    if absurd:
        v = preds[absurd[0]]
        shown = f"{v:.3g}" if not isinstance(v, int) else f"an integer of {len(str(abs(v)))} digits"
        return None, (f"{len(absurd)} of {n} predictions are absurd (|y| > {MAX_ABS_PREDICTION:g} thousand dollars; "
                      f"first at row {absurd[0]}: {shown}); house prices here are 5 to 50")
    return np.array(preds, dtype=float), None


def verify_predictions(y_test: np.ndarray, returned) -> Verdict:
    n = len(y_test)
    if not isinstance(returned, dict) or not isinstance(returned.get("predictions"), list):
        return invalid("the harness result has no 'predictions' list (did the program replace the harness?)")
    preds = returned["predictions"]
    arr, err = _as_predictions(preds, n)
    if err is not None:
        return invalid(err)
    error = rmse(arr, y_test)
    paper = paper_reward(error)
    reward = max(0.0, paper)
    mae = float(np.mean(np.abs(arr - y_test)))
    r2 = 1.0 - float(np.sum((arr - y_test) ** 2)) / float(np.sum((y_test - y_test.mean()) ** 2))
    feedback = (f"held-out RMSE {error:.4f} (MEDV, thousands of dollars) on {n} houses, MAE {mae:.3f}, R^2 {r2:.4f} -> "
                f"reward 2 - log10(RMSE) = {reward:.4f} (lower RMSE is better; RMSE 1 gives reward 2)")
    return Verdict(reward, True, feedback, {"rmse": error, "mae": mae, "r2": r2, "paper_reward": paper})


def unchecked(returned) -> ExactCheck:
    """No exact check (tasks/base.py ``check_exact``): the reward measures a fitted model's predictions against
    held-out rows in floating point, with no constraint behind it to hold or fail."""
    return ExactCheck("unchecked", "the reward is the RMSE of a fitted model's predictions on held-out rows, a "
                                   "floating-point measurement: no constraint to check exactly")
