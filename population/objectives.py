"""Objectives a task declares beside reward and Div (task.yaml ``objectives``), as selection sees them.

A declared objective names a metric the task's verifier returns with every verdict (``child.metrics``),
or ``eval_time_s``: the evaluation's wall time, a field of every evaluated program, not a verifier
metric (a verifier metric of that name is not read). Its goal is ``max`` or ``min``.

Selection maximises every column, so a ``min`` objective is negated (``oriented``). A value that is
missing or not finite (NaN, +-inf) is the worst there is: -inf after orientation, whatever the goal,
so a child never beats another on an objective it has no number for (two such children tie on it).
``finite_columns`` then puts -inf one span below the lowest finite value of its column, because
pymoo's sorting and crowding distance need finite numbers; the order, hence every front, is the same.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np

GOALS = ("max", "min")
EVAL_TIME = "eval_time_s"  # the child field an objective may name besides the verifier's metrics


def raw_value(metrics: Mapping, eval_time_s: float, metric: str) -> float:
    """One child's value of ``metric`` as stored, NaN where it has none (a non-number counts as none)."""
    value = eval_time_s if metric == EVAL_TIME else metrics.get(metric)
    if isinstance(value, numbers.Real):  # bool is Real: a flag metric is 0 or 1
        try:
            return float(value)
        except OverflowError:  # an int beyond a float's range is no number selection can use
            return math.nan
    return math.nan


def raw_values(rows: Sequence[tuple[Mapping, float]], metrics: Sequence[str]) -> np.ndarray:
    """(len(rows), len(metrics)) values of (metrics, eval_time_s) rows; NaN where missing."""
    out = np.full((len(rows), len(metrics)), math.nan)
    for i, (found, seconds) in enumerate(rows):
        for j, metric in enumerate(metrics):
            out[i, j] = raw_value(found, seconds, metric)
    return out


def archived_values(archive, ids: Sequence[int], metrics: Sequence[str]) -> np.ndarray:
    """``raw_values`` of archived solutions (population.archive: every child's metrics and eval_time_s are
    stored), for a resumed pool or a run browser's plot; NaN where missing."""
    if not len(ids) or not metrics:
        return np.full((len(ids), len(metrics)), math.nan)
    found, seconds = archive._many("metrics", ids), archive._many("eval_time_s", ids)
    return raw_values([(json.loads(found[i] or "{}"), seconds[i]) for i in ids], metrics)


def oriented(values: np.ndarray, goals: Sequence[str]) -> np.ndarray:
    """Raw values as maximised columns: ``min`` columns negated, every non-finite value -inf (the worst)."""
    values = np.asarray(values, dtype=np.float64).reshape(-1, len(goals))
    for goal in goals:
        if goal not in GOALS:
            raise ValueError(f"objective goal must be one of {', '.join(GOALS)}, got {goal!r}")
    sign = np.array([1.0 if g == "max" else -1.0 for g in goals])
    out = values * sign
    out[~np.isfinite(out)] = -np.inf
    return out


def finite_columns(columns: np.ndarray) -> np.ndarray:
    """Maximised columns with each -inf put one span (max - min of the column's finite values, 1 if
    that is 0) below the column's lowest finite value; a column with no finite value becomes 0s.
    Strict order and ties are kept, so Pareto fronts are unchanged; crowding distances stay finite."""
    out = np.array(columns, dtype=np.float64, copy=True)
    for j in range(out.shape[1]):
        col = out[:, j]
        worst = np.isneginf(col)
        if not worst.any():
            continue
        finite = col[~worst]
        if finite.size == 0:
            col[:] = 0.0
            continue
        with np.errstate(over="ignore"):  # a span over the float range is taken as 1 below
            low, span = finite.min(), finite.max() - finite.min()
        stand_in = low - (span if 0 < span < np.inf else 1.0)
        col[worst] = stand_in if stand_in < low else np.nextafter(low, -np.inf)  # near -1e308: the next float down
    return out
