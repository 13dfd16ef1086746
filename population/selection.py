"""Selection strategies behind a registry (``selection.strategy`` in the config).

A strategy sees the selection pool (every program ever generated: reward, Div, and the tag
of the population slot each row was generated from) and returns the rows of the next
population with a tag per slot. Children inherit their parent slot's tag, which is how
``islands`` keeps lineages apart; the other strategies ignore tags.

``nsga2`` is the paper's: non-dominated fronts on (reward, Div), both maximised, then
crowding distance (pymoo's sorting and crowding on raw arrays; no pymoo Population objects,
which cost ~1 s at 10^5 points). Where the task declares objectives (task.yaml ``objectives``,
population/objectives.py), the pool carries them as maximised columns and ``nsga2`` ranks on
(reward, Div, *those) with the same sorting and crowding (``nsga2_columns``); without any it runs
the two-column code exactly as before. The other strategies rank on reward and Div only.
pymoo (and the scipy it loads, ~2 s) is imported where a front is sorted: a config names a strategy from the
registry without it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from population.objectives import finite_columns


@dataclass(frozen=True)
class Pool:
    rewards: np.ndarray
    diversity: np.ndarray
    tags: np.ndarray | None = None  # slot tag each row was generated from; -1 = none (the seed program)
    epoch: int = 0
    # (rows, m) the task's declared objectives, maximised (population.objectives.oriented: -inf = missing); None: none
    objectives: np.ndarray | None = None

    def __post_init__(self):
        if np.ndim(self.rewards) != 1 or np.shape(self.rewards) != np.shape(self.diversity):
            raise ValueError(f"rewards {np.shape(self.rewards)} and diversity {np.shape(self.diversity)} must be "
                             "1-D arrays of the same length")
        if self.objectives is not None and (np.ndim(self.objectives) != 2 or len(self.objectives) != len(self.rewards)):
            raise ValueError(f"objectives {np.shape(self.objectives)} must be a (rows, m) array with the {len(self.rewards)} "
                             "rows of rewards")
        if self.objectives is not None and np.isnan(np.asarray(self.objectives, dtype=np.float64)).any():
            raise ValueError("selection: an objective is NaN; population.objectives.oriented maps a missing value to -inf")
        for name in ("rewards", "diversity"):
            bad = np.flatnonzero(np.isnan(np.asarray(getattr(self, name), dtype=np.float64)))
            if bad.size:  # NaN is incomparable: every ordering below would be silently arbitrary
                raise ValueError(f"selection: {name} is NaN at rows {bad[:10].tolist()}; rewards must be numbers "
                                 "(the evaluator maps a failed score to 0 with feedback)")

    def tag_array(self) -> np.ndarray:
        return np.full(len(self.rewards), -1) if self.tags is None else np.asarray(self.tags)

    @property
    def n_extra(self) -> int:
        """How many declared objectives the pool carries besides reward and Div."""
        return 0 if self.objectives is None else int(np.shape(self.objectives)[1])

    def columns(self) -> np.ndarray:
        """(rows, 2 + m): reward, Div, then each declared objective, all maximised."""
        extra = np.zeros((len(self.rewards), 0)) if self.objectives is None else np.asarray(self.objectives, dtype=np.float64)
        return np.column_stack([np.asarray(self.rewards, dtype=np.float64), np.asarray(self.diversity, dtype=np.float64), extra])


class Strategy(Protocol):
    def select(self, pool: Pool, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(pool rows of the next population, a tag per slot)."""


SELECTION_STRATEGIES: dict[str, Callable[..., Strategy]] = {}


def register_strategy(name: str, on_columns: Callable | None = None):
    """Register a stateless ``fn(rewards, diversity, size, rng) -> rows`` or a Strategy class.
    ``on_columns(columns, size, rng) -> rows``: the same strategy over every maximised column (reward,
    Div, the task's declared objectives), used when the pool carries any; without it a stateless
    strategy ranks on reward and Div only, and a class decides for itself (``Pool.objectives``)."""

    def wrap(obj):
        if isinstance(obj, type):
            SELECTION_STRATEGIES[name] = obj
        else:
            SELECTION_STRATEGIES[name] = lambda **_: _Stateless(obj, on_columns)
        return obj

    return wrap


class _Stateless:
    def __init__(self, fn, on_columns: Callable | None = None):
        self.fn = fn
        self.on_columns = on_columns

    def select(self, pool: Pool, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n = len(pool.rewards)
        if size < 0:
            raise ValueError(f"population size must be >= 0, got {size}")
        if n <= size:  # everything survives; no strategy needed
            rows = np.arange(n)
        elif pool.n_extra and self.on_columns is not None:  # declared objectives: rank on every column
            rows = np.asarray(self.on_columns(pool.columns(), size, rng), dtype=np.int64).reshape(-1)
        else:
            rows = np.asarray(self.fn(pool.rewards, pool.diversity, size, rng), dtype=np.int64).reshape(-1)
        if n > size and (len(rows) != size or len(np.unique(rows)) != size or rows.min(initial=0) < 0 or rows.max(initial=0) >= n):
            raise RuntimeError(f"selection strategy {getattr(self.fn, '__name__', self.fn)!r} returned {rows.tolist()[:20]}"
                               f"; it must return {size} distinct rows in [0, {n})")
        return rows, pool.tag_array()[rows]


def make_strategy(name: str, **options) -> Strategy:
    if name not in SELECTION_STRATEGIES:
        near = difflib.get_close_matches(str(name).lower(), list(SELECTION_STRATEGIES), n=1, cutoff=0.0) or ["-"]
        raise ValueError(f"unknown selection strategy {name!r}; did you mean {near[0]!r}? valid: {sorted(SELECTION_STRATEGIES)}")
    return SELECTION_STRATEGIES[name](**options)


def select(name: str, rewards: np.ndarray, diversity: np.ndarray, size: int, rng: np.random.Generator,
           objectives: np.ndarray | None = None) -> np.ndarray:
    """One-shot selection by name: ``min(size, N)`` distinct row indices (for strategies that
    need no history; a stateful one such as islands starts from its defaults). ``objectives``: the
    declared objectives as maximised (rows, m) columns (population.objectives.oriented)."""
    pool = Pool(np.asarray(rewards, dtype=np.float64), np.asarray(diversity, dtype=np.float64), objectives=objectives)
    return make_strategy(name).select(pool, size, rng)[0]


def _top(keys: list[np.ndarray], size: int) -> np.ndarray:
    """Indices of the ``size`` largest by keys[0], ties by keys[1], ..., then lowest index."""
    order = np.lexsort([np.arange(len(keys[0]))] + [-k for k in reversed(keys)])
    return order[:size]


PRUNE_MIN_ROWS = 20_000  # pool size from which nondominated_fronts(n_stop=...) drops rows that cannot be reached


def beaten_by_n(rewards: np.ndarray, diversity: np.ndarray, n: int) -> np.ndarray:
    """Rows strictly worse in both objectives than at least ``n`` others (a sufficient test, not all).

    Such a row's dominators fill the fronts above it with >= n rows, so ranking n rows never
    reaches it; and whatever it dominates is beaten by n+1 rows, so dropping these rows leaves
    every other row's Pareto rank, hence the first fronts, exactly as they were."""
    total = len(rewards)
    q = 4 * n
    while q < total:
        r_cut = np.partition(rewards, total - q)[total - q]  # the q-th largest reward
        d_cut = np.partition(diversity, total - q)[total - q]
        if np.count_nonzero((rewards >= r_cut) & (diversity >= d_cut)) >= n:
            return (rewards < r_cut) & (diversity < d_cut)
        q *= 4
    return np.zeros(total, dtype=bool)


def nondominated_fronts(rewards: np.ndarray, diversity: np.ndarray, n_stop: int | None = None,
                        prune_min_rows: int = PRUNE_MIN_ROWS) -> list[np.ndarray]:
    """Pareto fronts of (reward, Div), both maximised, best first (pymoo's sorting on the raw
    array). With ``n_stop``, only the fronts needed to rank at least that many rows; from
    ``prune_min_rows`` rows on, rows ``beaten_by_n`` are left out of the sort first (the same
    fronts, in the same order: ~1 s less at 10^6 rows)."""
    rewards, diversity = np.asarray(rewards, dtype=np.float64), np.asarray(diversity, dtype=np.float64)
    keep = None
    if n_stop is not None and len(rewards) >= prune_min_rows:
        keep = np.flatnonzero(~beaten_by_n(rewards, diversity, n_stop))
        rewards, diversity = rewards[keep], diversity[keep]
    from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

    F = -np.column_stack([rewards, diversity])  # pymoo minimises
    fronts = [np.asarray(f, dtype=np.int64) for f in NonDominatedSorting().do(F, n_stop_if_ranked=n_stop)]
    return fronts if keep is None else [keep[f] for f in fronts]


def beaten_by_n_columns(columns: np.ndarray, n: int) -> np.ndarray:
    """``beaten_by_n`` over any number of maximised columns: rows strictly below the q-th largest
    value of every column while at least ``n`` rows reach all of them (the same argument holds)."""
    total = len(columns)
    q = 4 * n
    while q < total:
        cuts = np.array([np.partition(col, total - q)[total - q] for col in columns.T])
        if np.count_nonzero((columns >= cuts).all(axis=1)) >= n:
            return (columns < cuts).all(axis=1)
        q *= 4
    return np.zeros(total, dtype=bool)


def fronts_of_columns(columns: np.ndarray, n_stop: int | None = None, prune_min_rows: int = PRUNE_MIN_ROWS) -> list[np.ndarray]:
    """Pareto fronts of finite maximised columns, best first, as ``nondominated_fronts`` computes them for two."""
    columns = np.asarray(columns, dtype=np.float64)
    keep = None
    if n_stop is not None and len(columns) >= prune_min_rows:
        keep = np.flatnonzero(~beaten_by_n_columns(columns, n_stop))
        columns = columns[keep]
    from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

    fronts = [np.asarray(f, dtype=np.int64) for f in NonDominatedSorting().do(-columns, n_stop_if_ranked=n_stop)]
    return fronts if keep is None else [keep[f] for f in fronts]


def _by_fronts(fronts: list[np.ndarray], F: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Whole fronts while they fit; the front that does not fit keeps its largest crowding distances
    (pymoo's on the minimised ``F``, with extremes infinite), random among equals."""
    from pymoo.operators.survival.rank_and_crowding.metrics import calc_crowding_distance

    chosen: list[int] = []
    for front in fronts:
        if len(chosen) == size:
            break
        if len(chosen) + len(front) <= size:
            chosen.extend(front.tolist())
            continue
        crowding = calc_crowding_distance(F[front])
        tiebreak = rng.permutation(len(front))
        order = np.lexsort([tiebreak, -crowding])  # largest crowding first, random among equals
        chosen.extend(front[order[: size - len(chosen)]].tolist())
        break
    return np.array(chosen, dtype=np.int64)


def nsga2_columns(columns: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``nsga2`` over (reward, Div, declared objectives). A missing objective value (-inf) is put below
    its column's finite values first (population.objectives.finite_columns)."""
    columns = finite_columns(columns)
    return _by_fronts(fronts_of_columns(columns, n_stop=size), -columns, size, rng)


@register_strategy("nsga2", on_columns=nsga2_columns)
def nsga2(rewards, diversity, size, rng):
    """NSGA-II on (reward, Div), both maximised. The pool, not just P_t + children: P_{t+1} = NSGA-II(D),
    paper section 3."""
    F = -np.column_stack([rewards, diversity]).astype(np.float64)
    return _by_fronts(nondominated_fronts(rewards, diversity, n_stop=size), F, size, rng)


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

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"born_after": self.born_after.copy(), "seed_row": self.seed_row.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        if np.shape(state["born_after"]) != (self.n,):
            raise ValueError(f"islands checkpoint has {np.shape(state['born_after'])[0]} islands; "
                             f"selection.n_islands is {self.n}")
        self.born_after = np.array(state["born_after"], dtype=np.int64)
        self.seed_row = np.array(state["seed_row"], dtype=np.int64)

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
