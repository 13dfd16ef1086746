"""Boston Housing harness: runs INSIDE the sandbox, appended after the candidate program.

The program defines ``run_model(X_train, y_train, X_test)``. This harness loads ``data.npz`` (the
404 training rows with their targets and the 102 held-out rows' features only), calls it once, and
returns its predictions. The held-out targets are not in this process nor in its directory, and
tasks/ is hidden from it (the repository's .git is not: once heldout.npz is committed, `git show`
can read it; tests/test_task_boston.py marks that as a known leak). The parent's verifier scores
the predictions, so a program that patches numpy or pandas can only spoil its own predictions,
never its score. Shape and finiteness are checked by the verifier, not here, so a wrong answer is
reported the same way whether or not this code ran as written. Names are prefixed ``_helix_`` so
they cannot clash with the program's; being executed after the program, these definitions win.
"""

import numpy as _helix_np
import pandas as _helix_pd

_HELIX_DATA = "data.npz"
_HELIX_TARGET = "MEDV"


def _helix_load():
    """(X_train DataFrame, y_train Series, X_test DataFrame), fresh copies for each call."""
    with _helix_np.load(_HELIX_DATA, allow_pickle=False) as data:
        names = [str(n) for n in data["feature_names"]]
        x_train = _helix_pd.DataFrame(data["X_train"], columns=names)
        y_train = _helix_pd.Series(data["y_train"], name=_HELIX_TARGET)
        x_test = _helix_pd.DataFrame(data["X_test"], columns=names)
    return x_train, y_train, x_test


def _helix_one_core():
    """The sandbox gives a program one thread (OMP_NUM_THREADS=1), which numpy, scikit-learn and
    xgboost follow. LightGBM's scikit-learn API does not: by default it starts one OpenMP thread per
    physical core, from joblib.cpu_count(only_physical_cores=True) looked up at fit time, and on a
    busy machine those spinning threads turned a 0.06 s fit into 5 s and sometimes over a minute.
    So joblib.cpu_count reports one core here (an explicit n_jobs still wins)."""
    try:
        import joblib as _joblib
    except ImportError:
        return
    _joblib.cpu_count = lambda only_physical_cores=False: 1


def helix_run_model():
    """Full evaluation: train on the training rows, predict the held-out rows."""
    fn = globals().get("run_model")
    if not callable(fn):
        raise NameError("the program does not define run_model(X_train, y_train, X_test)")
    _helix_one_core()
    x_train, y_train, x_test = _helix_load()
    out = fn(x_train, y_train, x_test)
    try:
        pred = _helix_np.asarray(out, dtype=float)
    except (TypeError, ValueError):
        raise TypeError("run_model must return one number per row of X_test (a numpy array, list or pandas "
                        f"Series); it returned {type(out).__name__}") from None
    if pred.ndim == 2 and pred.shape[1] == 1:  # a (n, 1) column, e.g. from a Keras-style model
        pred = pred[:, 0]
    return {"predictions": pred.tolist()}
