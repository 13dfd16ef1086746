"""The bin-packing harness as it was before the trusted driver (commit 9816832), kept ONLY as the
"before" of scripts/bench/bench_sandbox.py and as the positive control of tests/tasks/test_bin_packing_online*.py
and tests/redteam/test_bin_packing_online_redteam.py: the cheats there lift the reward when it runs, so they are not duds. No task uses it.

It runs INSIDE the sandbox, after the program, with data.npz copied into the sandbox's directory, and
packs every instance there, one after the other (FunSearch's online_binpack): the whole item sequence
is in the program's own process, which is the hole the driver closes (tasks/families/bin_packing/driver.py).
Its entry is ``helix_online_binpack()``; it returns the same artefact the driver does.
"""

import numpy as _helix_np

_HELIX_DATA = "data.npz"


def _helix_instances():
    """(capacity, [(data set, [float array per instance])]): the one change from 9816832, which read
    items_<name> as an instances x items array; data.npz now stores the items flat with lengths_<name>."""
    with _helix_np.load(_HELIX_DATA, allow_pickle=False) as data:
        capacity = float(data["capacity"])
        names = [str(n) for n in data["names"]]
        return capacity, [(n, _helix_np.split(data[f"items_{n}"].astype(float),
                                              _helix_np.cumsum(data[f"lengths_{n}"])[:-1])) for n in names]


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
