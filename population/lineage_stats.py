"""What each archived solution's descendants reached, kept up to date as children are archived, for the
PUCT parent rule (population/puct.py). Pure bookkeeping over archive ids: no archive access.

Per solution s, indexed by its archive id:

* ``child_best[s]``: the best reward among the valid children of s (NaN: none yet), TTT-Discover's Q(s);
* ``subtree_best[s]``: the best reward among all valid descendants of s (NaN: none yet);
* ``visits[s]``: how many children s and its descendants have had, TTT-Discover's n(s): every completion
  is one expansion of its parent (a failed or invalid one too: TTT-Discover counts those with
  ``record_failed_rollout``), counted on the parent and on every ancestor of it;
* ``total``: how many children the run has had, TTT-Discover's T.

Why incremental: an archive reaches 10^6 rows, and a recursive query per epoch would read all of them. A
child costs one walk up its parent's ancestry (visits), and a valid one a walk that stops at the first
ancestor already as good (a best never decreases going up). Lineage is the ``parent_id`` tree: a
crossover's second parent is not credited, so every solution has one line of ancestors.

Between the picks of an epoch and the archiving of their children, ``reserve`` counts the children a pick
will bring (``pending``), so later picks of the same epoch (another pass, a dynamic-sampling round) see
them, as a batched tree search counts virtual visits; ``add`` then replaces them by the real ones.
"""

from __future__ import annotations

import numpy as np

ABSENT, ROOT = -2, -1  # parent[] of an id not (yet) counted, and of a solution without a parent
VALUES = ("children", "subtree")  # population.puct_value: which best is Q(s)
_KEYS = ("parent", "child_best", "subtree_best", "visits")


class LineageStats:
    def __init__(self):
        self.parent = np.full(0, ABSENT, np.int64)
        self.child_best = np.zeros(0)
        self.subtree_best = np.zeros(0)
        self.visits = np.zeros(0, np.int64)
        self.pending = np.zeros(0, np.int64)
        self.total = 0
        self.pending_total = 0

    def __len__(self) -> int:
        """How many solutions are counted."""
        return int((self.parent != ABSENT).sum())

    def _grow(self, size: int) -> None:
        """Room for ids < ``size``, doubling so that an epoch's children cost no copy of 10^6 rows."""
        have = len(self.parent)
        if size <= have:
            return
        new = max(size, 2 * have, 1024)
        self.parent = np.concatenate([self.parent, np.full(new - have, ABSENT, np.int64)])
        self.child_best = np.concatenate([self.child_best, np.full(new - have, np.nan)])
        self.subtree_best = np.concatenate([self.subtree_best, np.full(new - have, np.nan)])
        self.visits = np.concatenate([self.visits, np.zeros(new - have, np.int64)])
        self.pending = np.concatenate([self.pending, np.zeros(new - have, np.int64)])

    def chain(self, sid: int) -> list[int]:
        """``sid`` and its ancestors, nearest first."""
        out, a = [], int(sid)
        while a >= 0:
            out.append(a)
            a = int(self.parent[a])
        return out

    def add(self, ids, parent_ids, rewards, valid) -> None:
        """Count newly archived solutions (a parent before its children, as the archive numbers them);
        ``parent_ids`` holds None for a root. Clears the epoch's reserved visits."""
        ids = np.asarray(ids, np.int64).reshape(-1)
        parents = np.array([ROOT if p is None else int(p) for p in parent_ids], np.int64)
        rewards = np.asarray(rewards, np.float64).reshape(-1)
        valid = np.asarray(valid, bool).reshape(-1)
        if not len(ids) == len(parents) == len(rewards) == len(valid):
            raise ValueError(f"{len(ids)} ids, {len(parents)} parents, {len(rewards)} rewards and {len(valid)} "
                             "validity flags: one of each per solution")
        if len(ids) == 0:
            return
        if ids.min() < 1:
            raise ValueError(f"archive ids start at 1, got {int(ids.min())}")
        self._grow(int(ids.max()) + 1)
        earlier: set[int] = set()  # this batch's, before the row at hand
        for sid, p in zip(ids.tolist(), parents.tolist()):  # all checked before anything is counted
            if self.parent[sid] != ABSENT or sid in earlier:
                raise ValueError(f"solution {sid} is counted already")
            if p != ROOT and not (0 < p < sid and (self.parent[p] != ABSENT or p in earlier)):
                raise ValueError(f"solution {sid}'s parent {p} is not counted before it")
            earlier.add(sid)
        self.parent[ids] = parents
        has_parent = parents != ROOT
        self.total += int(has_parent.sum())
        for p, k in zip(*np.unique(parents[has_parent], return_counts=True)):
            self.visits[self.chain(int(p))] += int(k)
        good = has_parent & valid & np.isfinite(rewards)
        np.fmax.at(self.child_best, parents[good], rewards[good])
        for p, r in zip(parents[good].tolist(), rewards[good].tolist()):
            a = p
            while a >= 0 and not self.subtree_best[a] >= r:  # NaN (none yet) compares False
                self.subtree_best[a] = r
                a = int(self.parent[a])
        self.pending[:] = 0
        self.pending_total = 0

    def reserve(self, sid: int, children: int) -> None:
        """A pick of ``sid`` this epoch: the ``children`` it will bring count as visits until ``add``."""
        self.pending[self.chain(sid)] += int(children)
        self.pending_total += int(children)

    def view(self, ids, value: str = "children") -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
        """For candidates ``ids``: their best (``value``: children or subtree; NaN where none), their visits
        and the run's total (reserved ones included), and ``related[i, j]``: i and j are one solution or
        one is an ancestor of the other."""
        if value not in VALUES:
            raise ValueError(f"unknown PUCT value {value!r}; valid: {list(VALUES)}")
        ids = np.asarray(ids, np.int64).reshape(-1)
        if len(ids) and (ids.max() >= len(self.parent) or (self.parent[ids] == ABSENT).any()):
            missing = [int(i) for i in ids if i >= len(self.parent) or self.parent[i] == ABSENT]
            raise KeyError(f"solutions {missing} are not counted in the lineage statistics")
        best = (self.child_best if value == "children" else self.subtree_best)[ids]
        where: dict[int, list[int]] = {}
        for j, sid in enumerate(ids.tolist()):
            where.setdefault(sid, []).append(j)
        below = np.zeros((len(ids), len(ids)), bool)  # below[i, j]: ids[j] is ids[i] or one of its ancestors
        for i, sid in enumerate(ids.tolist()):
            for a in self.chain(sid):
                if a in where:
                    below[i, where[a]] = True
        related = below | below.T
        return best.copy(), self.visits[ids] + self.pending[ids], self.total + self.pending_total, related

    def state_dict(self) -> dict[str, np.ndarray]:
        """The counted rows (reserved visits are not state: a checkpoint follows ``add``)."""
        size = int(np.flatnonzero(self.parent != ABSENT).max()) + 1 if len(self) else 0
        state = {key: getattr(self, key)[:size].copy() for key in _KEYS}
        state["total"] = np.asarray(self.total, np.int64)
        return state

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray]) -> "LineageStats":
        stats = cls()
        size = len(state["parent"])
        if any(len(state[key]) != size for key in _KEYS):
            raise ValueError(f"lineage statistics of unequal lengths: {[len(state[k]) for k in _KEYS]}")
        stats._grow(size)
        for key in _KEYS:
            getattr(stats, key)[:size] = state[key]
        stats.total = int(state["total"])
        return stats

    @classmethod
    def from_rows(cls, ids, parent_ids, rewards, valid) -> "LineageStats":
        """The statistics of a whole archive in one pass, children before parents (O(rows)): for a
        checkpoint that holds none (written before, or under another population.parent_sampling)."""
        stats = cls()
        ids = np.asarray(ids, np.int64).reshape(-1)
        parents = np.array([ROOT if p is None else int(p) for p in parent_ids], np.int64)
        rewards = np.asarray(rewards, np.float64).reshape(-1)
        valid = np.asarray(valid, bool).reshape(-1)
        if len(ids) == 0:
            return stats
        if (ids < 1).any() or len(np.unique(ids)) != len(ids) or (parents >= ids).any():
            raise ValueError("archive rows must have distinct ids >= 1, each after its parent")
        stats._grow(int(ids.max()) + 1)
        stats.parent[ids] = parents
        if ((parents != ROOT) & (stats.parent[np.maximum(parents, 0)] == ABSENT)).any():
            raise ValueError("an archive row names a parent that is not among the rows")
        has_parent = parents != ROOT
        stats.total = int(has_parent.sum())
        good = has_parent & valid & np.isfinite(rewards)
        np.fmax.at(stats.child_best, parents[good], rewards[good])
        visits = [0] * len(stats.parent)
        sub = [float("nan")] * len(stats.parent)
        order = np.argsort(ids)[::-1]
        for sid, p, r, g in zip(ids[order].tolist(), parents[order].tolist(), rewards[order].tolist(), good[order].tolist()):
            if p == ROOT:
                continue
            visits[p] += visits[sid] + 1
            best = sub[sid]  # what sid passes up: its own reward if valid, and its descendants' best
            if g and not best >= r:  # NaN (none below sid) compares False
                best = r
            if best == best and not sub[p] >= best:
                sub[p] = best
        stats.visits[:] = visits
        stats.subtree_best[:] = sub
        return stats
