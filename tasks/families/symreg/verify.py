"""Trusted scoring of symbolic-regression predictions (paper eq. 26-28), run in the parent.

The sandboxed harness (tasks/families/symreg/harness.py) returns test predictions per case; the held-out
targets are read here from the task folder's ``heldout.npz``, which is never copied into the
sandbox. The paper's reward is R = -log10(median_i NMSE_i) (eq. 27-28). We use
R = log10(1 + 1/NMSE) on the median, with NMSE floored at 1e-12:
* for a good model it IS eq. 28 (they differ by log10(1 + NMSE) < 4.4e-7 once NMSE < 1e-6);
* an exact fit gets the cap, 12, instead of +inf;
* it stays > 0 for any valid model, also one worse than predicting the mean (NMSE >= 1, where
  eq. 28 goes negative): invalid programs score 0, so failing is never better than being poor,
  and poor models still rank (NMSE 1 -> 0.30, 10 -> 0.041).
The unclipped eq. 28 value is kept in the metrics (``neg_log10_nmse``) for comparison with papers.

Each case's predictions must be a flat list of finite numbers (JSON numbers: no booleans, strings
or nulls, which numpy would silently turn into 1.0, a parsed float or NaN) of at most 1e100 in
magnitude: a larger prediction is an overflow in all but name (squared, 1e154 already overflows a
float), and is rejected like NaN and inf, so no NMSE or metric is ever inf and numpy never warns.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tasks.base import ExactCheck, Verdict, invalid

NMSE_FLOOR = 1e-12
REWARD_CAP = 12.0  # log10(1 + 1e12), to 4e-13
MAX_ABS_PREDICTION = 1e100  # 200 squared errors of this size sum to 2e202: far from overflow
MAX_PARAMS_SHOWN = 10  # the harness fits 10; a longer (forged) list is not shown


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
    except (TypeError, ValueError, OverflowError):
        return None
    return out if len(out) == n and all(math.isfinite(v) for v in out) else None


def _show(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) or abs(v) < 10**15 else "a huge integer"


def case_problem(i: int, p, shape: tuple[int, ...]) -> str | None:
    """Why case i's predictions cannot be scored (one line), or None: see the module docstring."""
    if not isinstance(p, list):
        return f"case {i}: the test predictions are not a flat list of numbers (got {type(p).__name__})"
    if len(p) != shape[0] or any(isinstance(v, list) for v in p):
        try:
            got = f"shape {np.asarray(p, dtype=float).shape}"
        except (TypeError, ValueError, OverflowError):
            got = "a nested or ragged list"
        return (f"case {i}: func(x, params) returned {got} on the test inputs, expected {shape} "
                "(one prediction per row of x)")
    for j, v in enumerate(p):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return (f"case {i}: test prediction {j} is {repr(v)[:40]} ({type(v).__name__}), not a number; "
                    "the test predictions are not a flat list of numbers")
    bad = sum(1 for v in p if isinstance(v, float) and not math.isfinite(v))
    if bad:
        return (f"case {i}: {bad} of {len(p)} test predictions are NaN or inf with the fitted params; guard "
                "against log(0), division by zero and overflow outside the training range")
    huge = [v for v in p if abs(v) > MAX_ABS_PREDICTION]
    if huge:
        return (f"case {i}: {len(huge)} of {len(p)} test predictions exceed {MAX_ABS_PREDICTION:g} in magnitude "
                f"(first: {_show(huge[0])}), an overflow in all but name; guard against exp() or powers "
                "that blow up outside the training range")
    return None


def verify_predictions(heldout: list[np.ndarray], returned) -> Verdict:
    n = len(heldout)
    if not isinstance(returned, dict) or not isinstance(returned.get("predictions"), list):
        return invalid("the harness result has no 'predictions' list (did the program replace the harness?)")
    preds = returned["predictions"]
    if len(preds) != n:
        return invalid(f"expected test predictions for {n} cases, got {len(preds)}")
    errors = []
    for i, (p, y) in enumerate(zip(preds, heldout)):
        problem = case_problem(i, p, y.shape)
        if problem:
            return invalid(problem)
        errors.append(nmse(np.asarray(p, dtype=float), y))
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
        fitted = [_floats(p, len(p)) if isinstance(p, list) and len(p) <= MAX_PARAMS_SHOWN else None for p in params]
        if all(f is not None for f in fitted):
            lines.append("fitted params per case: " + "; ".join("[" + ", ".join(f"{v:.4g}" for v in f) + "]"
                                                                for f in fitted))
    metrics = {"nmse_median": median, "neg_log10_nmse": -math.log10(max(median, NMSE_FLOOR)),
               **{f"nmse_case_{i}": e for i, e in enumerate(errors)}}
    return Verdict(reward, True, "\n".join(lines), metrics)


def unchecked(returned) -> ExactCheck:
    """No exact check (tasks/base.py ``check_exact``): the reward measures fitted predictions against held-out
    targets in floating point, with no constraint behind it to hold or fail."""
    return ExactCheck("unchecked", "the reward is the NMSE of fitted predictions on held-out targets, a floating-point "
                                   "measurement: no constraint to check exactly")
