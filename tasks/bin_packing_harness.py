"""Online bin packing, the program's side: runs INSIDE the sandbox, appended after the candidate program.

The items are not here. The trusted driver (tasks/bin_packing_driver.py) holds them in the evaluating
process and sends one at a time; the sandbox calls ``helix_online_step(request)`` for each and sends
back what it returns, the chosen bin. A request is {"item": size}; an instance's first request also
holds "instance" (its name, for feedback), "bins" (n: FunSearch's skeleton starts an instance of n
items with n empty bins, so there is always room) and "capacity".

The choice is FunSearch's skeleton (paper 001, Figure 2b and ``online_binpack`` in its released
notebook): the bins that can still take the item (remaining capacity >= item) are passed to
``priority(item, bins)`` as a float array of their remaining capacities, in bin order and including
every still-empty bin; the item goes to the valid bin with the highest priority (``np.argmax``: ties
to the first, so a constant priority is first fit and ``-(bins - item)`` is best fit). ``item`` is a
Python float; ``bins`` is a fresh copy, so changing it changes nothing.

This side keeps its own copy of the remaining capacities to build ``bins``; the driver keeps the
real one and refuses a bin the item does not fit, so a program that patches numpy or this harness
can only spoil its own packing. Names are prefixed ``_helix_`` so they cannot clash with the
program's; being executed after the program, the harness's definitions win.
"""

import numpy as _helix_np

_helix_state = {}


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


def helix_online_step(request):
    """One item: the index of the bin the program's priority puts it in."""
    state = _helix_state
    if "instance" in request:  # a new instance: n empty bins
        state.update(where=str(request["instance"]), i=0, fn=_helix_priority(),
                     remaining=_helix_np.full(int(request["bins"]), float(request["capacity"])))
        _helix_np.seterr(all="ignore")  # no warnings: a division by zero is the program's to handle (NaN is refused)
    item, remaining = float(request["item"]), state["remaining"]
    valid = _helix_np.flatnonzero(remaining - item >= 0)
    scores = _helix_scores(state["fn"], item, remaining[valid], f"{state['where']}, item {state['i']}")
    best = int(valid[int(_helix_np.argmax(scores))])
    remaining[best] -= item
    state["i"] += 1
    return best
