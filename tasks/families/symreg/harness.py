"""Symbolic-regression harness: runs INSIDE the sandbox, appended after the candidate program.

The program only defines ``func(x, params)``. This harness fits ``params`` on each case's training
data with BFGS (paper appendix B.5/D.5: "optimized externally using the BFGS algorithm"; random
starts in [0, 1]) and returns the test predictions. The held-out targets never enter this process:
the parent's verifier scores the predictions, so a program that patches numpy or scipy can only
spoil its own predictions, never its score. Everything here is prefixed ``_helix_`` so it cannot
clash with the program's own names; being executed after the program, its definitions win.
"""

import warnings as _helix_warnings

import numpy as _helix_np
from scipy.optimize import minimize as _helix_minimize

_HELIX_N_PARAMS = 10  # "params is a 1D NumPy array of up to 10 parameters"
_HELIX_STARTS = 3  # seeded random starts in [0, 1]; the best train fit is kept
_HELIX_SEED = 0
_HELIX_MAXITER = 1000
_HELIX_DATA = "data.npz"


def _helix_cases():
    with _helix_np.load(_HELIX_DATA, allow_pickle=False) as data:
        n = sum(1 for key in data.files if key.startswith("x_train_"))
        return [(data[f"x_train_{i}"], data[f"y_train_{i}"], data[f"x_test_{i}"]) for i in range(n)]


def _helix_func():
    fn = globals().get("func")
    if not callable(fn):
        raise NameError("the program does not define func(x, params)")
    return fn


def _helix_starts():
    return _helix_np.random.default_rng(_HELIX_SEED).uniform(0.0, 1.0, (_HELIX_STARTS, _HELIX_N_PARAMS))


def _helix_predict(fn, x, params):
    """func's output as a float vector, or a ValueError that says what is wrong with it."""
    out = fn(x.copy(), params.copy())
    try:
        y = _helix_np.asarray(out, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"func(x, params) must return a numeric numpy array; it returned {type(out).__name__}") from None
    if y.shape != (len(x),):
        raise ValueError(f"func(x, params) must return shape ({len(x)},) for x of shape {x.shape}; "
                         f"it returned shape {y.shape}")
    return y


def _helix_fit(fn, x, y):
    """(params, train NMSE): the best point any BFGS run evaluated, so a run that wanders into
    NaN or stops early still keeps its best fit."""
    var = float(_helix_np.mean((y - y.mean()) ** 2)) or 1.0
    best = {"loss": _helix_np.inf, "params": None}

    def loss(params):
        r = _helix_predict(fn, x, params) - y
        value = float(_helix_np.mean(r * r)) / var
        if not _helix_np.isfinite(value):
            return 1e30  # BFGS backs off; the best finite point is kept below
        if value < best["loss"]:
            best["loss"], best["params"] = value, params.copy()
        return value

    for p0 in _helix_starts():
        if loss(p0) < 1e30:
            _helix_minimize(loss, p0, method="BFGS", options={"maxiter": _HELIX_MAXITER})
    if best["params"] is None:
        raise ValueError(f"func(x, params) gives NaN or inf on the training data at all {_HELIX_STARTS} random "
                         "starting points in [0, 1]: guard against log(0), division by zero and overflow")
    return best["params"], best["loss"]


def helix_fit_and_predict():
    """Full evaluation: fit each case, predict its test inputs."""
    fn = _helix_func()
    out = {"predictions": [], "params": [], "train_nmse": []}
    with _helix_np.errstate(all="ignore"), _helix_warnings.catch_warnings():
        _helix_warnings.simplefilter("ignore")
        for x_train, y_train, x_test in _helix_cases():
            params, train_nmse = _helix_fit(fn, x_train, y_train)
            out["predictions"].append(_helix_predict(fn, x_test, params).tolist())
            out["params"].append(params.tolist())
            out["train_nmse"].append(train_nmse)
    return out


def helix_sanity_check():
    """Cascade stage 1: the very first call the full evaluation makes (case 0, first start),
    with the same checks, so a program rejected here would have failed the full run too."""
    fn = _helix_func()
    x_train = _helix_cases()[0][0]
    with _helix_np.errstate(all="ignore"), _helix_warnings.catch_warnings():
        _helix_warnings.simplefilter("ignore")
        _helix_predict(fn, x_train, _helix_starts()[0])
    return {"n_train": len(x_train)}
