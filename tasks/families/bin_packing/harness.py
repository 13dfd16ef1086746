"""Online bin packing, the program's side: runs INSIDE the sandbox, appended after the candidate program.

The items are not here. The trusted driver (tasks/families/bin_packing/driver.py) holds them in the evaluating
process and packs every instance side by side: each request holds the next item of every instance
that has one, {"items": [[instance, size], ...]}, and the sandbox sends back what
``helix_online_step(request)`` returns, the bin chosen for each. The first request also opens the
instances, "open": [{"name", "bins", "capacity"}, ...]: FunSearch's skeleton starts an instance of n
items with n empty bins, so there is always room. Each instance is its own online problem; the items
of the others tell nothing about its future.

The choice is FunSearch's skeleton (paper 001, Figure 2b and ``online_binpack`` in its released
notebook): the bins that can still take the item (remaining capacity >= item) are passed to
``priority(item, bins)`` as a float array of their remaining capacities, in bin order and including
every still-empty bin; the item goes to the valid bin with the highest priority (``np.argmax``: ties
to the first, so a constant priority is first fit and ``-(bins - item)`` is best fit). ``item`` is a
Python float; ``bins`` is a fresh copy, so changing it changes nothing. Within a request, priority is
called for the instances in order; a function of (item, bins) alone packs exactly as it would
instance by instance.

This side keeps its own copy of the remaining capacities to build ``bins``; the driver keeps the
real one and refuses a bin the item does not fit, so a program that patches numpy or this harness
can only spoil its own packing. Names are prefixed ``_helix_`` so they cannot clash with the
program's; being executed after the program, the harness's definitions win.
"""

import numpy as _helix_np

_helix_open = []  # per instance: its name, remaining capacities and next item's number
_helix_fn = []  # the program's priority, taken once when the instances open


def _helix_priority():
    fn = globals().get("priority")
    if not callable(fn):
        raise NameError("the program does not define priority(item, bins)")
    return fn


def _helix_choice(fn, item, bins, where, i):
    """The position in ``bins`` of the highest priority(item, bins) (the first of equals), or a
    ValueError that says what is wrong. ``bins`` is a fresh array: the program may change it."""
    shape = bins.shape
    out = fn(item, bins)
    try:
        scores = _helix_np.asarray(out, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"priority(item, bins) must return a numeric numpy array; for {where}, item {i} it returned "
                         f"{type(out).__name__} {repr(out)[:60]}") from None
    if scores.shape != shape:
        raise ValueError(f"priority(item, bins) must return one priority per bin, shape {shape}; for {where}, item {i} "
                         f"(item {item:g}, {shape[0]} bins) it returned shape {scores.shape}")
    best = int(_helix_np.argmax(scores))
    if scores[best] != scores[best]:  # argmax lands on the first NaN if there is one
        raise ValueError(f"priority(item, bins) returned NaN for {where}, item {i} (item {item:g}, {shape[0]} bins); "
                         "return real numbers (guard divisions by zero)")
    return best


def _helix_place(fn, instance, item):
    """The index of the bin the program's priority puts ``item`` in, for one instance."""
    remaining, i, where = instance["remaining"], instance["i"], instance["where"]
    valid = _helix_np.flatnonzero(remaining >= item)  # remaining capacity >= item (exact: sums of integers)
    best = int(valid[_helix_choice(fn, item, remaining[valid], where, i)])
    remaining[best] -= item
    instance["i"] = i + 1
    return best


def helix_online_step(request):
    """One round: the bin of each item of the request, in its order."""
    if "open" in request:
        _helix_fn[:] = [_helix_priority()]
        _helix_open[:] = [{"where": str(o["name"]), "i": 0,
                           "remaining": _helix_np.full(int(o["bins"]), float(o["capacity"]))} for o in request["open"]]
        _helix_np.seterr(all="ignore")  # no warnings: a division by zero is the program's to handle (NaN is refused)
    fn = _helix_fn[0]
    return [_helix_place(fn, _helix_open[int(k)], float(size)) for k, size in request["items"]]
