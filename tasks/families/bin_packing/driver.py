"""Online bin packing, the trusted side: the driver that holds the items and hands them to the program
a round at a time (task.yaml ``driver``, tasks/base.py; the channel is rewards/channel.py).

FunSearch's tasks promise that each item is placed without knowing the items still to come. When the
sandbox held the data (a copy of data.npz, and the harness's item arrays in the program's own
process), a program could read the future from the file, from the harness's frames or from
``gc.get_objects()``, plan an offline packing and steer every item into it: 98.7 on bin_packing_or,
above FunSearch's 96.4. Here the items stay in the evaluating process. The program's side
(tasks/families/bin_packing/harness.py) gets, per request, the next item of each instance; its reply is the
bin chosen for each.

The driver is FunSearch's skeleton (paper 001, Figure 2b; ``online_binpack`` in its notebook): an
instance of n items starts with n empty bins, so there is always room. It is authoritative about
the bins: a reply that is not a list of one plain int per item, or names no bin, or a bin without
room for its item, ends the run (ValueError, one line: bad_output). Which fitting bin the program
picks is its business; every choice made from past items only is an online algorithm. The artefact
is {data set: [bin index of each item, per instance]}, which the verifier (tasks/families/bin_packing/verify.py)
re-checks against its own copy of the sizes.

Only numpy and the standard library are imported here: Ray pickles this module by value for its
workers (rewards/ray_eval.py), which need not hold the repository.
"""

from __future__ import annotations

import numpy as np


# The checks on a reply, one function each (tests/redteam/test_bin_packing_online_redteam.py weakens them one at a time).
def is_reply_for(reply, count: int) -> bool:
    """A list with one entry per item of the request."""
    return type(reply) is list and len(reply) == count


def is_bin_index(b) -> bool:
    """A plain int: bool, float (3.0), None, str and list are all refused."""
    return type(b) is int


def names_a_bin(b: int, bins: int) -> bool:
    return 0 <= b < bins


def has_room(room: int, size: int) -> bool:
    """Integer sizes and capacities: a bin may be filled exactly, never beyond."""
    return room >= size


class OnlineDriver:
    """``driver()`` -> a fresh generator for one run: ``reply = yield request`` per round; it returns the packing.

    The instances are packed side by side: round i sends item i of every instance that has one (each
    instance is its own online problem, so the items of the others say nothing about its future),
    which takes as many rounds as the longest instance has items rather than one round trip per item
    (bin_packing_or: 1,000 for 9,470 items; bin_packing_weibull: 5,000 for 25,120). A round's
    request is {"items": [[instance, size], ...]} (instances numbered in data-set order); the first
    also holds "open": [{"name", "bins", "capacity"} per instance]. The reply lists the bin chosen for
    each of the round's items, in order."""

    def __init__(self, capacity: int, sets):
        """``sets``: {data set name: instances}, each instance a sequence of integer item sizes."""
        self.capacity = int(capacity)
        self.sets = {str(name): [np.asarray(sizes, dtype=np.int64) for sizes in instances]
                     for name, instances in sets.items()}

    def __call__(self):
        return self._drive()

    def _drive(self):
        capacity = self.capacity
        names = [(name, k) for name, instances in self.sets.items() for k in range(len(instances))]
        sizes = [self.sets[name][k].tolist() for name, k in names]
        where = [f"{name} instance {k}" for name, k in names]
        remaining = [[capacity] * len(s) for s in sizes]
        placed = [[] for _ in sizes]
        request = {"open": [{"name": w, "bins": len(s), "capacity": capacity} for w, s in zip(where, sizes)]}
        for i in range(max(map(len, sizes), default=0)):
            active = [j for j, s in enumerate(sizes) if i < len(s)]
            request["items"] = [[j, sizes[j][i]] for j in active]
            reply = yield request
            if not is_reply_for(reply, len(active)):
                what = f"a list of {len(reply)}" if type(reply) is list else f"{repr(reply)[:40]} ({type(reply).__name__})"
                raise ValueError(f"round {i}: the reply is {what}, not a list of {len(active)} bin indices (one per "
                                 "item of the request)")
            for j, b in zip(active, reply):
                placed[j].append(self._check(where[j], i, sizes[j][i], b, remaining[j]))
            request = {}
        packing = {name: [] for name in self.sets}
        for (name, _), p in zip(names, placed):
            packing[name].append(p)
        return packing

    def _check(self, where: str, i: int, size: int, b, remaining: list[int]) -> int:
        """``b`` if it names a bin of this instance with room for the item (which it then takes); else ValueError."""
        if not is_bin_index(b):
            raise ValueError(f"{where}, item {i}: the reply {repr(b)[:40]} ({type(b).__name__}) is not a bin index")
        if not names_a_bin(b, len(remaining)):
            shown = b if abs(b) < 10**15 else "a huge integer"
            raise ValueError(f"{where}, item {i}: bin {shown} does not exist (bins are numbered 0 to {len(remaining) - 1})")
        if not has_room(remaining[b], size):
            raise ValueError(f"{where}, item {i} (size {size}): bin {b} has {remaining[b]} of {self.capacity} left, "
                             "too little; an item only goes into a bin with room for it")
        remaining[b] -= size
        return b
