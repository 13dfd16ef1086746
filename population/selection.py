"""Selection strategies behind a registry (``selection.strategy`` in the config).

A strategy sees the selection pool (every program ever generated: reward, Div, and the tag
of the population slot each row was generated from) and returns the rows of the next
population with a tag per slot. Children inherit their parent slot's tag, which is how
``islands`` keeps lineages apart; the other strategies ignore tags.

``nsga2`` is the paper's: non-dominated fronts on (reward, Div), both maximised, then
crowding distance (pymoo's sorting and crowding on raw arrays; no pymoo Population objects,
which cost ~1 s at 10^5 points).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np
from pymoo.operators.survival.rank_and_crowding.metrics import calc_crowding_distance
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting


@dataclass(frozen=True)
class Pool:
    rewards: np.ndarray
    diversity: np.ndarray
    tags: np.ndarray | None = None  # slot tag each row was generated from; -1 = none (the seed program)
    epoch: int = 0

    def __post_init__(self):
        if np.shape(self.rewards) != np.shape(self.diversity):
            raise ValueError(f"rewards {np.shape(self.rewards)} and diversity {np.shape(self.diversity)} differ in shape")

    def tag_array(self) -> np.ndarray:
        return np.full(len(self.rewards), -1) if self.tags is None else np.asarray(self.tags)


class Strategy(Protocol):
    def select(self, pool: Pool, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(pool rows of the next population, a tag per slot)."""


SELECTION_STRATEGIES: dict[str, Callable[..., Strategy]] = {}


def register_strategy(name: str):
    """Register a stateless ``fn(rewards, diversity, size, rng) -> rows`` or a Strategy class."""

    def wrap(obj):
        if isinstance(obj, type):
            SELECTION_STRATEGIES[name] = obj
        else:
            SELECTION_STRATEGIES[name] = lambda **_: _Stateless(obj)
        return obj

    return wrap


class _Stateless:
    def __init__(self, fn):
        self.fn = fn

    def select(self, pool: Pool, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n = len(pool.rewards)
        rows = np.arange(n) if n <= size else np.asarray(self.fn(pool.rewards, pool.diversity, size, rng), dtype=np.int64)
        return rows, pool.tag_array()[rows]


def make_strategy(name: str, **options) -> Strategy:
    if name not in SELECTION_STRATEGIES:
        near = difflib.get_close_matches(name, list(SELECTION_STRATEGIES), n=1, cutoff=0.0)
        raise ValueError(f"unknown selection strategy {name!r}; did you mean {near[0]!r}? valid: {sorted(SELECTION_STRATEGIES)}")
    return SELECTION_STRATEGIES[name](**options)


def select(name: str, rewards: np.ndarray, diversity: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """One-shot selection by name (rows only), for strategies that need no history."""
    pool = Pool(np.asarray(rewards, dtype=np.float64), np.asarray(diversity, dtype=np.float64))
    return make_strategy(name).select(pool, size, rng)[0]


def _top(keys: list[np.ndarray], size: int) -> np.ndarray:
    """Indices of the ``size`` largest by keys[0], ties by keys[1], ..., then lowest index."""
    order = np.lexsort([np.arange(len(keys[0]))] + [-k for k in reversed(keys)])
    return order[:size]


@register_strategy("nsga2")
def nsga2(rewards, diversity, size, rng):
    F = -np.column_stack([rewards, diversity])  # pymoo minimises
    fronts = NonDominatedSorting().do(F, n_stop_if_ranked=size)
    chosen: list[int] = []
    for front in fronts:
        front = np.asarray(front)
        if len(chosen) + len(front) <= size:
            chosen.extend(front.tolist())
            continue
        crowding = calc_crowding_distance(F[front])
        tiebreak = rng.permutation(len(front))
        order = np.lexsort([tiebreak, -crowding])  # largest crowding first, random among equals
        chosen.extend(front[order[: size - len(chosen)]].tolist())
        break
    return np.array(chosen)


@register_strategy("top_score")
def top_score(rewards, diversity, size, rng):
    return _top([rewards, diversity], size)


@register_strategy("top_div")
def top_div(rewards, diversity, size, rng):
    return _top([diversity, rewards], size)


@register_strategy("random")
def random(rewards, diversity, size, rng):
    return rng.choice(len(rewards), size=size, replace=False)


@register_strategy("islands")
class Islands:
    """FunSearch-style islands (paper 001, 'programs database'): ``n_islands`` lineages evolve
    apart; each keeps its best programs. Every ``reset_every`` epochs the worse half of the
    islands (by best reward) is emptied and re-seeded with the best program of a random
    surviving island."""

    def __init__(self, n_islands: int = 4, reset_every: int = 5):
        if n_islands < 1 or reset_every < 1:
            raise ValueError("islands needs n_islands >= 1 and reset_every >= 1")
        self.n = n_islands
        self.reset_every = reset_every
        self.born_after = np.zeros(n_islands, dtype=np.int64)  # rows before this index left the island at a reset
        self.seed_row = np.full(n_islands, -1, dtype=np.int64)  # the survivor's best that re-seeded the island

    def _members(self, island: int, tags: np.ndarray) -> np.ndarray:
        rows = np.flatnonzero(tags == island)
        rows = rows[rows >= self.born_after[island]]
        if self.seed_row[island] >= 0:
            rows = np.union1d(rows, [self.seed_row[island]])
        return rows

    def _reset(self, pool: Pool, tags: np.ndarray, rng: np.random.Generator) -> None:
        best = np.array([pool.rewards[m].max() if len(m) else -np.inf for m in (self._members(i, tags) for i in range(self.n))])
        order = np.lexsort([rng.permutation(self.n), best])  # worst first, random among equals
        losers, survivors = order[: self.n // 2], order[self.n // 2 :]
        for island in losers:
            donor = self._members(int(rng.choice(survivors)), tags)
            if len(donor) == 0:
                continue
            self.born_after[island] = len(pool.rewards)
            self.seed_row[island] = donor[np.argmax(pool.rewards[donor])]

    def select(self, pool: Pool, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        tags = pool.tag_array()
        if pool.epoch > 0 and pool.epoch % self.reset_every == 0 and self.n > 1:
            self._reset(pool, tags, rng)
        quotas = [size // self.n + (1 if i < size % self.n else 0) for i in range(self.n)]
        seeds = np.flatnonzero(tags == -1)
        rows, slot_tags = [], []
        for island, quota in enumerate(quotas):
            members = self._members(island, tags)
            if len(members) == 0:  # a fresh island starts from the seed program(s)
                members = seeds
            keep = members[_top([pool.rewards[members], pool.diversity[members]], quota)]
            rows.extend(keep.tolist())
            slot_tags.extend([island] * len(keep))
        return np.array(rows, dtype=np.int64), np.array(slot_tags, dtype=np.int64)
