"""Online bin packing, the trusted side: the driver that holds the items and hands them to the program
one at a time (task.yaml ``driver``, tasks/base.py; the channel is rewards/channel.py).

FunSearch's tasks promise that each item is placed without knowing the items still to come. When the
sandbox held the data (a copy of data.npz, and the harness's item arrays in the program's own
process), a program could read the future from the file, from the harness's frames or from
``gc.get_objects()``, plan an offline packing and steer every item into it: 98.6 on bin_packing_or,
above FunSearch's 96.4. Here the items stay in the evaluating process. The program's side
(tasks/bin_packing_harness.py) gets, per request, one item; its reply is the bin chosen for it.

The driver is FunSearch's skeleton (paper 001, Figure 2b; ``online_binpack`` in its notebook): an
instance of n items starts with n empty bins, so there is always room. It is authoritative about
the bins: a reply that is not a plain int, names no bin, or names a bin without room for the item
ends the run (ValueError, one line: bad_output). Which fitting bin the program picks is its
business; every choice made from past items only is an online algorithm. The artefact is
{data set: [bin index of each item, per instance]}, which the verifier (tasks/bin_packing.py)
re-checks against its own copy of the sizes.

Only numpy and the standard library are imported here: Ray pickles this module by value for its
workers (rewards/ray_eval.py), which need not hold the repository.
"""

from __future__ import annotations

import numpy as np


class OnlineDriver:
    """``driver()`` -> a fresh generator for one run: ``reply = yield request`` per item, in arrival
    order, data set by data set and instance by instance; it returns the packing."""

    def __init__(self, capacity: int, sets):
        """``sets``: {data set name: instances}, each instance a sequence of integer item sizes."""
        self.capacity = int(capacity)
        self.sets = {str(name): [np.asarray(sizes, dtype=np.int64) for sizes in instances]
                     for name, instances in sets.items()}

    def __call__(self):
        return self._drive()

    def _drive(self):
        packing = {}
        for name, instances in self.sets.items():
            packing[name] = []
            for k, sizes in enumerate(instances):
                packing[name].append((yield from self._instance(f"{name} instance {k}", sizes.tolist())))
        return packing

    def _instance(self, where: str, sizes: list[int]):
        """One instance: its first request also says its name, its bin count and the capacity."""
        n, capacity = len(sizes), self.capacity
        remaining = [capacity] * n
        placed = []
        for i, size in enumerate(sizes):
            request = {"item": size}
            if i == 0:
                request.update(instance=where, bins=n, capacity=capacity)
            b = yield request
            if type(b) is not int:  # exact type: bool, float (3.0), None, str, list are all refused
                raise ValueError(f"{where}, item {i}: the reply {repr(b)[:40]} ({type(b).__name__}) is not a bin index")
            if not 0 <= b < n:
                shown = b if abs(b) < 10**15 else "a huge integer"
                raise ValueError(f"{where}, item {i}: bin {shown} does not exist (bins are numbered 0 to {n - 1})")
            if remaining[b] < size:
                raise ValueError(f"{where}, item {i} (size {size}): bin {b} has {remaining[b]} of {capacity} left, "
                                 "too little; an item only goes into a bin with room for it")
            remaining[b] -= size
            placed.append(b)
        return placed
