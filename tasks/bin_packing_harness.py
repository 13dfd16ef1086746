"""Online bin packing harness: runs INSIDE the sandbox, appended after the candidate program.

The program only defines ``priority(item, bins)``. This harness is FunSearch's skeleton (paper 001,
Figure 2b and ``online_binpack`` / ``evaluate`` in its released bin_packing notebook): an instance
of n items starts with n empty bins (so there is always room); for each item in arrival order the
bins that can still take it (remaining capacity >= item) are passed to ``priority(item, bins)``
as a float array of their remaining capacities, in bin order and including every still-empty bin;
the item goes to the valid bin with the highest priority (``np.argmax``: ties to the first, so a
constant priority is first fit and ``-(bins - item)`` is best fit). ``item`` is a Python float;
``bins`` is a fresh copy, so changing it changes nothing.

It returns only the assignment, {data set: [[bin index of each item] per instance]}; the verifier
in the trainer re-checks capacities and counts the bins against its own copy of the sizes, so a
program that patches numpy or the harness can only spoil its own packing. Names are prefixed
``_helix_`` so they cannot clash with the program's; being executed after the program, the
harness's definitions win.
"""

import numpy as _helix_np

_HELIX_DATA = "data.npz"


def _helix_instances():
    with _helix_np.load(_HELIX_DATA, allow_pickle=False) as data:
        capacity = float(data["capacity"])
        names = [str(n) for n in data["names"]]
        return capacity, [(n, data[f"items_{n}"].astype(float)) for n in names]


def _helix_priority():
    fn = globals().get("priority")
    if not callable(fn):
        raise NameError("the program does not define priority(item, bins)")
    return fn


def _helix_scores(fn, item, bins, where):
    """priority(item, bins) as a float vector of len(bins), or a ValueError that says what is wrong."""
    out = fn(item, bins.copy())
    try:
        scores = _helix_np.asarray(out, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"priority(item, bins) must return a numeric numpy array; for {where} it returned "
                         f"{type(out).__name__} {repr(out)[:60]}") from None
    if scores.shape != bins.shape:
        raise ValueError(f"priority(item, bins) must return one priority per bin, shape {bins.shape}; for {where} "
                         f"(item {item:g}, {len(bins)} bins) it returned shape {scores.shape}")
    if _helix_np.isnan(scores).any():
        raise ValueError(f"priority(item, bins) returned NaN for {where} (item {item:g}, {len(bins)} bins); "
                         "return real numbers (guard divisions by zero)")
    return scores


def _helix_pack(fn, items, capacity, where):
    remaining = _helix_np.full(len(items), capacity)
    assignment = []
    for i, item in enumerate(items.tolist()):
        valid = _helix_np.flatnonzero(remaining - item >= 0)
        scores = _helix_scores(fn, item, remaining[valid], f"{where}, item {i}")
        best = int(valid[int(_helix_np.argmax(scores))])
        remaining[best] -= item
        assignment.append(best)
    return assignment


def helix_online_binpack():
    """Full evaluation: every instance of every data set, packed online with the program's priority."""
    fn = _helix_priority()
    capacity, sets = _helix_instances()
    out = {}
    with _helix_np.errstate(all="ignore"):
        for name, instances in sets:
            out[name] = [_helix_pack(fn, items, capacity, f"{name} instance {k}") for k, items in enumerate(instances)]
    return out
