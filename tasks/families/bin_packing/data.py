"""Online bin packing instances (FunSearch, paper 001, section 2.2 and Table 1), regenerated bit for
bit from fixed seeds: no downloads, and a test checks the shipped files.

* ``tasks/bin_packing_or/data.npz``: OR-Library-style "u" instances (Falkenauer's uniform class,
  OR-Library binpack1-4 = FunSearch's OR1-OR4): item sizes uniform integers in [20, 100],
  capacity 150, 120 / 250 / 500 / 1000 items. OR-Library has 20 instances per size; we generate
  5 per size so that one evaluation takes seconds, and OR1 gets a sixth (below): 21 instances,
  9,470 items.
* ``tasks/bin_packing_weibull/data.npz``: FunSearch's "Weibull 5k" setting: 5 instances of 5,000
  items, sizes drawn from a Weibull distribution with scale 45 and shape 3, clipped to
  [1, capacity] and rounded to the nearest integer, capacity 100; plus a sixth of 120 (below).

The sixth instances: on none of the others is Martello and Toth's L2 bound above the trivial L1
(at these sizes it almost never is: 1 draw in 400 for 120 uniform items, none in 40 of 5,000
Weibull items), so a bug in L2 would change no reward. Each family therefore gets one more
instance of 120 items from the same distribution, drawn with its own seed: the first seed, counting
up from the family's, whose draw has L2 = L1 + 1 (OR: 56 > 55; Weibull: 49 > 48).
tests/tasks/test_task_bin_packing.py checks that with an independent transcription of L2, and that
replacing L2 by L1 in the verifier changes a reward.

Held out (task.yaml ``heldout``; Sim, Renau and Hart, arXiv 2501.11411, find evolved online
heuristics do not generalise beyond the instances they were evolved on): ``heldout.npz`` beside each
data.npz holds instances of the same sizes from the same distributions, drawn with seeds no run
sees: OR_HELDOUT_SEED (1053) for OR1-OR4, 5 instances each, and WEIBULL_HELDOUT_SEED (2053) for 5
Weibull instances of 5,000 items (no sixth instance: the held-out figure needs no L2 > L1 case).
The run's best program is scored on them once, at the end of the run, through the same trusted
driver; like data.npz they never enter the sandbox.

Each file holds ``capacity`` (int), ``names`` (the data sets, in order), ``items_<name>`` (the item
sizes of its instances one after the other, int16) and ``lengths_<name>`` (items per instance).
``read`` turns that back into one array per instance. The trusted driver and the verifier read it;
nothing of it is copied into the sandbox.

    python -m tasks.families.bin_packing.data  # rewrite both tasks' data.npz and heldout.npz
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tasks.base import TASKS_DIR

DATA_FILE = "data.npz"
HELDOUT_FILE = "heldout.npz"  # the held-out instances (task.yaml heldout): fresh seeds, never in a run

OR_CAPACITY = 150
OR_SIZES = {"OR1": 120, "OR2": 250, "OR3": 500, "OR4": 1000}
OR_LOW, OR_HIGH = 20, 100  # inclusive
OR_INSTANCES = 5
OR_SEED = 20231214  # FunSearch's publication date, as a fixed seed
OR_L2_SEED = 20231819  # the sixth OR1 instance: the first seed from OR_SEED up with L2 > L1 for 120 items

WEIBULL_CAPACITY = 100
WEIBULL_SCALE, WEIBULL_SHAPE = 45.0, 3.0
WEIBULL_ITEMS = 5000
WEIBULL_INSTANCES = 5
WEIBULL_SEED = 5000
WEIBULL_L2_SEED = 5275  # the sixth Weibull5k instance: the first seed from WEIBULL_SEED up with L2 > L1 for 120 items
L2_ITEMS = 120
OR_HELDOUT_SEED = 1053  # issue 53; outside the range searched for the L2 seeds above
WEIBULL_HELDOUT_SEED = 2053


def _weibull(rng: np.random.Generator, shape) -> np.ndarray:
    raw = WEIBULL_SCALE * rng.weibull(WEIBULL_SHAPE, size=shape)
    return np.rint(np.clip(raw, 1, WEIBULL_CAPACITY)).astype(np.int16)


def or_instances(heldout: bool = False) -> dict[str, list[np.ndarray]]:
    rng = np.random.default_rng(OR_HELDOUT_SEED if heldout else OR_SEED)
    sets = {name: list(rng.integers(OR_LOW, OR_HIGH + 1, size=(OR_INSTANCES, n)).astype(np.int16))
            for name, n in OR_SIZES.items()}
    if not heldout:
        sets["OR1"].append(np.random.default_rng(OR_L2_SEED).integers(OR_LOW, OR_HIGH + 1, L2_ITEMS).astype(np.int16))
    return sets


def weibull_instances(heldout: bool = False) -> dict[str, list[np.ndarray]]:
    rng = np.random.default_rng(WEIBULL_HELDOUT_SEED if heldout else WEIBULL_SEED)
    sets = {"Weibull5k": list(_weibull(rng, (WEIBULL_INSTANCES, WEIBULL_ITEMS)))}
    if not heldout:
        sets["Weibull5k"].append(_weibull(np.random.default_rng(WEIBULL_L2_SEED), L2_ITEMS))
    return sets


def generate(task: str, heldout: bool = False) -> dict[str, np.ndarray]:
    """The arrays of one task's data.npz (``heldout``: its heldout.npz): capacity, names, items_<name>, lengths_<name>."""
    if task == "bin_packing_or":
        capacity, sets = OR_CAPACITY, or_instances(heldout)
    elif task == "bin_packing_weibull":
        capacity, sets = WEIBULL_CAPACITY, weibull_instances(heldout)
    else:
        raise ValueError(f"unknown bin packing task {task!r}; known: bin_packing_or, bin_packing_weibull")
    out = {"capacity": np.array(capacity), "names": np.array(list(sets))}
    for name, instances in sets.items():
        out[f"items_{name}"] = np.concatenate(instances).astype(np.int16)
        out[f"lengths_{name}"] = np.array([len(a) for a in instances], dtype=np.int64)
    return out


def read(path: str | Path) -> tuple[int, dict[str, list[np.ndarray]]]:
    """(capacity, {data set: [item sizes of each instance, int64]}) from a data.npz written by ``generate``."""
    with np.load(path, allow_pickle=False) as data:
        capacity = int(data["capacity"])
        sets = {}
        for name in (str(n) for n in data["names"]):
            items, lengths = data[f"items_{name}"].astype(np.int64), data[f"lengths_{name}"]
            if lengths.sum() != items.size or (lengths < 1).any():
                raise ValueError(f"{path}: {name}'s lengths {lengths.tolist()} do not split its {items.size} items")
            sets[name] = np.split(items, np.cumsum(lengths)[:-1])
    return capacity, sets


def write(task: str, folder: Path | None = None, heldout: bool = False) -> Path:
    path = (folder or TASKS_DIR / task) / (HELDOUT_FILE if heldout else DATA_FILE)
    np.savez_compressed(path, **generate(task, heldout))
    return path


if __name__ == "__main__":
    for name in ("bin_packing_or", "bin_packing_weibull"):
        for held in (False, True):
            print(f"wrote {write(name, heldout=held)}")
