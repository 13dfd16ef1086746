"""One epoch's metrics row (metrics.jsonl, wandb, the console table), computed from plain data.

Kept apart from the loop so the loop reads as the algorithm and every metric is in one place.
Phase times are also given as shares of the epoch (``share_*``), the first thing to look at
when a run is slower than expected.
"""

from __future__ import annotations

import numpy as np

from population.child import Child
from population.selection import nondominated_fronts

PHASES = ("gen_time_s", "eval_time_s", "train_time_s", "weight_sync_time_s", "embed_select_time_s", "checkpoint_time_s")


def _percentiles(values: np.ndarray, prefix: str) -> dict[str, float | None]:
    if len(values) == 0:
        return {f"{prefix}_p10": None, f"{prefix}_p50": None, f"{prefix}_p90": None}
    p10, p50, p90 = np.percentile(values, [10, 50, 90])
    return {f"{prefix}_p10": float(p10), f"{prefix}_p50": float(p50), f"{prefix}_p90": float(p90)}


def pareto_front_size(rewards: np.ndarray, diversity: np.ndarray) -> int:
    """Size of the first non-dominated front of the selection pool on (reward, Div)."""
    if len(rewards) == 0:
        return 0
    return len(nondominated_fronts(np.asarray(rewards), np.asarray(diversity), n_stop=1)[0])


def epoch_metrics(epoch: int, children: list[Child], completion_lengths: list[int],
                  truncated: list[bool], pool_rewards: np.ndarray, diversity: np.ndarray, chosen: np.ndarray,
                  best_reward: float | None, archive_size: int, train: dict, extra: dict | None = None) -> dict:
    """``diversity`` is Div of every pool row; ``chosen`` the pool rows kept as P_{t+1}."""
    # Infra failures (never judged) are left out of the reward statistics; infra_frac counts them.
    rewards = np.array([c.reward for c in children if c.scored] or [0.0], dtype=np.float64)
    n_programs = sum(c.is_program for c in children)
    pop_div = diversity[chosen] if len(chosen) else np.zeros(0)
    child_div = diversity[len(diversity) - n_programs:] if n_programs else np.zeros(0)
    lengths = np.asarray(completion_lengths, dtype=np.float64)
    gen_tokens = int(lengths.sum())
    m = dict(
        epoch=epoch,
        reward_mean=float(rewards.mean()), reward_max=float(rewards.max()), best_reward=best_reward or 0.0,
        valid_frac=float(np.mean([c.valid for c in children])),
        edit_fail_frac=float(np.mean([bool(c.metrics.get("edit_failed")) for c in children])),
        unchanged_frac=float(np.mean([bool(c.metrics.get("unchanged")) for c in children])),
        repeat_frac=float(np.mean([bool(c.metrics.get("repeat")) for c in children])),
        # held back unrun by the novelty gate as close to an archived program (evolution.novelty_threshold)
        near_repeat_frac=float(np.mean([bool(c.metrics.get("near_repeat")) for c in children])),
        diversity_mean=float(pop_div.mean()) if len(pop_div) else None,
        **_percentiles(pop_div, "diversity"),
        child_diversity_mean=float(child_div.mean()) if len(child_div) else None,
        pareto_front_size=pareto_front_size(pool_rewards, diversity),
        archive_size=archive_size, pool_size=len(pool_rewards), population_size=len(chosen),
        completion_len_mean=float(lengths.mean()), completion_len_max=int(lengths.max()),
        truncated_frac=float(np.mean(truncated)), gen_tokens=gen_tokens,
        n_programs=n_programs, infra_frac=float(np.mean([not c.scored for c in children])),
    )
    m.update(train)
    m.update(extra or {})
    return m


def operator_metrics(children: list[Child], prior_best: float | None, improves=None) -> dict[str, float]:
    """Per operator (rollout.operators) that made children this epoch: how many, the share that
    became programs, valid, mean and max reward, and the share that beat the best reward the
    archive held before the epoch (``prior_best``) by more than the task's tolerance (``improves``:
    ``Task.improves``; a last-digit difference is no new best). What tells a user whether an operator pays."""
    if improves is None:
        def improves(reward: float, best: float | None) -> bool:
            return best is None or reward > best
    out: dict[str, float] = {}
    for name in sorted({c.operator for c in children}):
        group = [c for c in children if c.operator == name]
        rewards = np.array([c.reward for c in group], np.float64)
        out.update({f"op_{name}_children": len(group),
                    f"op_{name}_program_frac": float(np.mean([c.is_program for c in group])),
                    f"op_{name}_valid_frac": float(np.mean([c.valid for c in group])),
                    f"op_{name}_reward_mean": float(rewards.mean()), f"op_{name}_reward_max": float(rewards.max()),
                    f"op_{name}_new_best_frac": float(np.mean([c.valid and improves(c.reward, prior_best) for c in group]))})
    return out


def search_metrics(children: list[Child]) -> dict[str, float]:
    """A search-form epoch's shares of children that returned the construction they were given
    (``same_construction``: their search found nothing better) and that were scored on their last
    report because the time limit stopped them (``reported``)."""
    return {"same_construction_frac": float(np.mean([bool(c.metrics.get("same_construction")) for c in children])),
            "reported_frac": float(np.mean([bool(c.metrics.get("reported")) for c in children]))}


def add_phase_times(m: dict, times: dict[str, float]) -> dict:
    """Add the phase times, their shares of the epoch and the rates derived from them to ``m``.

    Separate from ``epoch_metrics`` because the row is built before the checkpoint is written
    (the checkpoint carries it) and the checkpoint's own time is known only afterwards."""
    m.update(times)
    m["gen_tokens_per_s"] = m["gen_tokens"] / max(times.get("gen_time_s", 0.0), 1e-9)
    # eval_busy_s: all evaluation time, part of it maybe hidden under generation (rollout.batch_size)
    evaluating = times.get("eval_busy_s") or times.get("eval_time_s")
    m["evals_per_s"] = m["n_programs"] / evaluating if evaluating else None
    total = times.get("epoch_time_s") or sum(times.get(k, 0.0) for k in PHASES)
    for key in PHASES:
        if key in m and total:
            m["share_" + key[: -len("_time_s")]] = m[key] / total
    return m
