"""Selection strategies behind a registry (``selection.strategy`` in the config).

All take (rewards, diversity) arrays and return indices of the survivors. ``nsga2`` is the
paper's: non-dominated fronts on (reward, Div), both maximised, then crowding distance.
"""

from __future__ import annotations

import difflib
from typing import Callable

import numpy as np
from pymoo.operators.survival.rank_and_crowding.metrics import calc_crowding_distance
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

Strategy = Callable[[np.ndarray, np.ndarray, int, np.random.Generator], np.ndarray]
SELECTION_STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str):
    def wrap(fn: Strategy) -> Strategy:
        SELECTION_STRATEGIES[name] = fn
        return fn

    return wrap


def select(name: str, rewards: np.ndarray, diversity: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    if name not in SELECTION_STRATEGIES:
        near = difflib.get_close_matches(name, list(SELECTION_STRATEGIES), n=1, cutoff=0.0)
        raise ValueError(f"unknown selection strategy {name!r}; did you mean {near[0]!r}? valid: {sorted(SELECTION_STRATEGIES)}")
    rewards = np.asarray(rewards, dtype=np.float64)
    diversity = np.asarray(diversity, dtype=np.float64)
    if rewards.shape != diversity.shape:
        raise ValueError(f"rewards {rewards.shape} and diversity {diversity.shape} differ in shape")
    if len(rewards) <= size:
        return np.arange(len(rewards))
    return np.asarray(SELECTION_STRATEGIES[name](rewards, diversity, size, rng), dtype=np.int64)


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
