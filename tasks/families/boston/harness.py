"""Boston Housing harness: runs INSIDE the sandbox, appended after the candidate program.

The program defines ``run_model(X_train, y_train, X_test)``. This harness loads ``data.npz`` (the
404 training rows with their targets and the 102 held-out rows' features only), calls it once, and
returns its predictions. The held-out targets are not in this process nor in its directory, and
tasks/ is hidden from it (the repository's .git is not: once heldout.npz is committed, `git show`
can read it; tests/tasks/test_task_boston.py marks that as a known leak). The parent's verifier scores
the predictions, so a program that patches numpy or pandas can only spoil its own predictions,
never its score. Types, shape, finiteness and magnitude are checked by the verifier, not here, so
a wrong answer is reported the same way whether or not this code ran as written (a program can
forge this harness's result: it runs in the same process). So the predictions leave here with
their types: a float conversion would turn True into 1.0 and "22.5" into 22.5 (it did: [True] *
102 scored 0.6535), hiding from the verifier what it must reject. Names are prefixed ``_helix_`` so
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
    return {"predictions": _helix_predictions(out)}


def _helix_predictions(out):
    """run_model's result as a JSON list, one item per row, each item as it was: numbers as
    floats or ints, booleans as booleans, strings as strings (the verifier names what is wrong)."""
    if isinstance(out, (list, tuple)):  # kept as they are: np.asarray([1.5, True]) would be all floats
        items = list(out)
    else:
        try:
            items = _helix_np.asarray(out).tolist()  # ndarray, Series, DataFrame: numpy scalars become Python's
        except (TypeError, ValueError):
            items = None
        if not isinstance(items, list):
            raise TypeError("run_model must return one number per row of X_test (a numpy array, list or pandas "
                            f"Series); it returned {type(out).__name__}") from None
    if items and all(_helix_single(v) for v in items):  # an (n, 1) column, e.g. from a Keras-style model
        items = [v[0] for v in items]
    return [v.item() if isinstance(v, _helix_np.generic) else v for v in items]


def _helix_single(v):
    """A row of one value: [x], (x,) or an array of shape (1,)."""
    if isinstance(v, _helix_np.ndarray):
        return v.shape == (1,)
    return isinstance(v, (list, tuple)) and len(v) == 1
