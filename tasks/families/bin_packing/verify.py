"""Trusted scoring of online bin packings, shared by tasks/bin_packing_or and tasks/bin_packing_weibull
(FunSearch, paper 001, section 2.2 "Bin packing" and Table 1).

The program evolves ``priority(item, bins)``. The trusted driver (tasks/families/bin_packing/driver.py, in
the evaluating process) hands the sandboxed harness (tasks/families/bin_packing/harness.py) the items one
round at a time, takes back the bin chosen for each, refuses a bin without room, and returns the
bin assignment: for each data set, for each instance, the bin index of each item in arrival
order. Here the assignment is re-checked from scratch against the item sizes this module loads
itself from the task folder's data.npz (which never enters the sandbox):

* exactly the data sets and instances of the task, each with one entry per item (so every item is
  placed exactly once), every entry a plain int in [0, n_items) (no floats, bools, None);
* no bin holds more than the capacity.

Score (FunSearch's "fraction of excess bins over the L2 lower bound", Table 1): per data set,
excess = (sum of bins used - sum of L2 bounds) / sum of L2 bounds over its instances, i.e. the
mean number of bins over the mean bound, as FunSearch's released notebook computes it; a task
with several data sets (OR1-OR4) takes the plain mean of their excesses. The reward is
100 / (1 + excess): monotone in the excess, 100 only if every instance meets its lower bound,
above 0 for every valid packing (a crash scores 0), so the best-fit starter is positive.

L2 is Martello & Toth's bound (Discrete Applied Mathematics 28 (1990) 59-70, "Lower bounds and
reduction procedures for the bin packing problem"; FunSearch ref. [46]). For 0 <= a <= C/2 let
J1 = {w > C - a}, J2 = {C - a >= w > C/2}, J3 = {C/2 >= w >= a}; then
L(a) = |J1| + |J2| + max(0, ceil((sum J3 - (|J2| C - sum J2)) / C)) and L2 = max_a L(a). The
maximum is attained at a = 0 or at an item size <= C/2 (between two such sizes J3 is fixed and
moving items from J2 to J1 only raises L), so those are the only values tried. L(0) is
max(#items > C/2, ceil(sum / C)) >= L1.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np

from tasks.base import ExactCheck, Verdict, invalid
from tasks.families.bin_packing.data import DATA_FILE, read
from tasks.families.exact import outcome

# FunSearch (Nature 2023) Table 1: fraction of excess bins over the L2 bound, in percent.
PUBLISHED = {
    "first_fit": {"OR1": 6.42, "OR2": 6.45, "OR3": 5.74, "OR4": 5.23, "Weibull5k": 4.23},
    "best_fit": {"OR1": 5.81, "OR2": 6.06, "OR3": 5.37, "OR4": 4.94, "Weibull5k": 3.98},
    "funsearch": {"OR1": 5.30, "OR2": 4.19, "OR3": 3.11, "OR4": 2.47, "Weibull5k": 0.68},
}


def reward_of(excess_pct: float) -> float:
    """The reward for a mean excess in percent: 100 / (1 + excess), 100 at the lower bound."""
    return 100.0 / (1.0 + excess_pct / 100.0)


def l1_bound(sizes, capacity: float) -> int:
    """ceil(sum / C): the continuous lower bound."""
    return int(math.ceil(float(np.sum(sizes)) / capacity - 1e-9))


def l2_bound(sizes, capacity: float) -> int:
    """Martello & Toth's L2 lower bound on the number of bins (see the module docstring)."""
    w = np.sort(np.asarray(sizes, dtype=float))
    if w.size == 0:
        return 0
    if w[-1] > capacity:
        raise ValueError(f"an item of size {w[-1]:g} exceeds the capacity {capacity:g}")
    prefix = np.concatenate(([0.0], np.cumsum(w)))

    def count_le(x):  # number of items <= x, and the sum of the others is prefix[-1] - prefix[that]
        return int(np.searchsorted(w, x, side="right"))

    half = capacity / 2
    n_half = count_le(half)  # items <= C/2; J1 + J2 are the items above C/2
    best = 0
    for a in np.unique(np.concatenate(([0.0], w[:n_half]))):
        n_j2_start = n_half  # J2: C/2 < w <= C - a
        n_j1_start = count_le(capacity - a)  # J1: w > C - a
        n_j3_start = int(np.searchsorted(w, a, side="left"))  # J3: a <= w <= C/2
        j1 = w.size - n_j1_start
        j2 = n_j1_start - n_j2_start
        sum_j2 = prefix[n_j1_start] - prefix[n_j2_start]
        sum_j3 = prefix[n_half] - prefix[n_j3_start]
        spill = sum_j3 - (j2 * capacity - sum_j2)
        extra = max(0, int(math.ceil(spill / capacity - 1e-9)))
        best = max(best, j1 + j2 + extra)
    return best


class Instances:
    """The item sizes of a task's data sets, read from its data.npz: ``names`` (data set names, in
    order), ``items[name]`` (one int64 array per instance) and ``capacity``."""

    def __init__(self, folder: Path, file: str = DATA_FILE):
        """``file``: data.npz (the run's instances) or heldout.npz (tasks/families/bin_packing/data.py)."""
        self.capacity, self.items = read(Path(folder) / file)
        self.names = list(self.items)
        self.l2 = {n: np.array([l2_bound(inst, self.capacity) for inst in self.items[n]]) for n in self.names}

    def usage(self) -> str:
        shape = ", ".join(f"{n}: {len(a)} instances of {'/'.join(sorted({str(len(i)) for i in a}, key=int))} items"
                          for n, a in self.items.items())
        return (f"the artefact is a dict {{data set: [one list per instance of the bin index of each item]}} "
                f"({shape}); priority(item, bins) only chooses the bins")


def _check_instance(name: str, k: int, entry, sizes: np.ndarray, capacity: int):
    """(bins used, None) or (None, what is wrong) for one instance's assignment."""
    n = len(sizes)
    where = f"{name} instance {k}"
    if not isinstance(entry, list):
        return None, f"{where}: got {type(entry).__name__}, not a list of {n} bin indices"
    if len(entry) != n:
        how = "missing" if len(entry) < n else "extra"
        return None, (f"{where}: {len(entry)} bin indices for {n} items ({abs(len(entry) - n)} {how}); "
                      "every item must be placed exactly once")
    for i, b in enumerate(entry):
        if type(b) is not int:  # exact type: bool, float (3.0), None, str are all rejected
            return None, f"{where}: item {i} has bin {repr(b)[:40]} ({type(b).__name__}), not an integer index"
    low, high = min(entry), max(entry)
    if low < 0 or high >= n:
        i = next(i for i, b in enumerate(entry) if not 0 <= b < n)
        bad = entry[i] if abs(entry[i]) < 10**15 else "a huge integer"
        return None, f"{where}: item {i} has bin {bad}; bin indices must be in [0, {n})"
    bins = np.asarray(entry, dtype=np.int64)
    loads = np.bincount(bins, weights=sizes, minlength=n)
    over = np.flatnonzero(loads > capacity)
    if over.size:
        b = int(over[np.argmax(loads[over])])
        members = np.flatnonzero(bins == b)
        shown = ", ".join(f"{int(i)} ({int(sizes[i])})" for i in members[:6]) + (", ..." if members.size > 6 else "")
        return None, (f"{where}: bin {b} holds {int(loads[b])} > capacity {capacity} (over by "
                      f"{int(loads[b]) - capacity}; items {shown}); {over.size} bin(s) overfilled")
    return int(np.unique(bins).size), None


def verify_packing(inst: Instances, returned) -> Verdict:
    use = inst.usage()
    if not isinstance(returned, dict):
        return invalid(f"got {type(returned).__name__}, not a dict of assignments; {use}")
    if set(returned) != set(inst.names):
        missing = [n for n in inst.names if n not in returned]
        extra = [str(k)[:20] for k in returned if k not in inst.names]
        return invalid(f"data sets missing: {missing or 'none'}, unexpected: {extra or 'none'}; {use}")
    excess, metrics, parts = [], {}, []
    total_bins = total_l2 = 0
    for name in inst.names:
        items, l2 = inst.items[name], inst.l2[name]
        got = returned[name]
        if not isinstance(got, list) or len(got) != len(items):
            what = f"{len(got)} instances" if isinstance(got, list) else type(got).__name__
            return invalid(f"{name}: got {what}, not a list of {len(items)} instances; {use}")
        used = []
        for k, (entry, sizes) in enumerate(zip(got, items)):
            count, problem = _check_instance(name, k, entry, sizes, inst.capacity)
            if problem:
                return invalid(problem)
            used.append(count)
        bins, bound = int(np.sum(used)), int(np.sum(l2))
        e = (bins - bound) / bound
        excess.append(e)
        metrics[f"excess_pct_{name}"] = 100 * e
        metrics[f"bins_{name}"] = float(bins)
        metrics[f"l2_{name}"] = float(bound)
        parts.append(f"{name} {100 * e:.2f}%")
        total_bins, total_l2 = total_bins + bins, total_l2 + bound
    mean_pct = 100 * float(np.mean(excess))
    reward = reward_of(mean_pct)
    metrics["excess_pct"] = mean_pct
    label = "mean excess" if len(parts) > 1 else "excess"
    detail = ", ".join(parts) + "; " if len(parts) > 1 else ""
    feedback = (f"{label} over the L2 lower bound {mean_pct:.3f}% ({detail}{total_bins} bins, L2 {total_l2}); "
                f"reward 100/(1 + excess) = {reward:.4f}; lower excess is better")
    return Verdict(reward, True, feedback, metrics)


def exact_packing(inst: Instances, returned) -> ExactCheck:
    """Integers throughout (tasks/base.py ``check_exact``): item sizes and the capacity are integers, so
    ``verify_packing``'s load check has no tolerance; here every bin's load is summed again in Python
    integers and the reward 100 / (1 + mean excess) is recomputed as a fraction of bin counts."""
    excess, over = [], []
    for name in inst.names:
        used = 0
        for k, (entry, sizes) in enumerate(zip(returned[name], inst.items[name])):
            loads: dict[int, int] = {}
            for b, size in zip(entry, sizes.tolist()):
                loads[b] = loads.get(b, 0) + size
            over += [(float(load - inst.capacity), f"{name} instance {k}: bin {b} holds {load} > {inst.capacity}")
                     for b, load in loads.items() if load > inst.capacity]
            used += len(loads)
        bound = int(inst.l2[name].sum())
        excess.append(Fraction(used - bound, bound))
    reward = 100 / (1 + sum(excess) / len(excess))
    return outcome(over, f"integer sizes and capacity: every bin's load is within {inst.capacity} exactly; reward "
                         f"100 / (1 + mean excess) = {float(reward):.15g} from integer bin counts", float(reward))
