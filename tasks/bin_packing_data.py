"""Online bin packing instances (FunSearch, paper 001, section 2.2 and Table 1), regenerated bit for
bit from fixed seeds: no downloads, and a test checks the shipped files.

* ``tasks/bin_packing_or/data.npz``: OR-Library-style "u" instances (Falkenauer's uniform class,
  OR-Library binpack1-4 = FunSearch's OR1-OR4): item sizes uniform integers in [20, 100],
  capacity 150, 120 / 250 / 500 / 1000 items. OR-Library has 20 instances per size; we generate
  5 per size (20 instances, 9,350 items) so that one evaluation takes seconds.
* ``tasks/bin_packing_weibull/data.npz``: FunSearch's "Weibull 5k" setting: 5 instances of 5,000
  items, sizes drawn from a Weibull distribution with scale 45 and shape 3, clipped to
  [1, capacity] and rounded to the nearest integer, capacity 100.

Each file holds ``capacity`` (int), ``names`` (the data sets, in order) and ``items_<name>``
(instances x items, int16). The same file is copied into the sandbox (the harness packs it) and
read by the verifier; nothing in it is secret.

    python tasks/bin_packing_data.py     # rewrite both data.npz files
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

TASKS_DIR = Path(__file__).resolve().parent

OR_CAPACITY = 150
OR_SIZES = {"OR1": 120, "OR2": 250, "OR3": 500, "OR4": 1000}
OR_LOW, OR_HIGH = 20, 100  # inclusive
OR_INSTANCES = 5
OR_SEED = 20231214  # FunSearch's publication date, as a fixed seed

WEIBULL_CAPACITY = 100
WEIBULL_SCALE, WEIBULL_SHAPE = 45.0, 3.0
WEIBULL_ITEMS = 5000
WEIBULL_INSTANCES = 5
WEIBULL_SEED = 5000


def or_instances() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(OR_SEED)
    return {name: rng.integers(OR_LOW, OR_HIGH + 1, size=(OR_INSTANCES, n)).astype(np.int16)
            for name, n in OR_SIZES.items()}


def weibull_instances() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(WEIBULL_SEED)
    raw = WEIBULL_SCALE * rng.weibull(WEIBULL_SHAPE, size=(WEIBULL_INSTANCES, WEIBULL_ITEMS))
    return {"Weibull5k": np.rint(np.clip(raw, 1, WEIBULL_CAPACITY)).astype(np.int16)}


def generate(task: str) -> dict[str, np.ndarray]:
    """The arrays of one task's data.npz: capacity, names, items_<name>."""
    if task == "bin_packing_or":
        capacity, sets = OR_CAPACITY, or_instances()
    elif task == "bin_packing_weibull":
        capacity, sets = WEIBULL_CAPACITY, weibull_instances()
    else:
        raise ValueError(f"unknown bin packing task {task!r}; known: bin_packing_or, bin_packing_weibull")
    out = {"capacity": np.array(capacity), "names": np.array(list(sets))}
    out.update({f"items_{name}": items for name, items in sets.items()})
    return out


def write(task: str, folder: Path | None = None) -> Path:
    path = (folder or TASKS_DIR / task) / "data.npz"
    np.savez_compressed(path, **generate(task))
    return path


if __name__ == "__main__":
    for name in ("bin_packing_or", "bin_packing_weibull"):
        print(f"wrote {write(name)}")
