"""The novelty gate (``evolution.novelty_threshold``): children are embedded before they are run, and
one that is too close to its parent or to a program an earlier epoch archived is not run at all.

Exact repeats (same code up to layout and comments) are caught by code hash before anything runs;
the gate also catches near repeats, programs that differ but embed alike, and saves their sandbox
time. A gated child is treated as a repeat (``evolution.repeats``): under ``score`` it earns the
reward of the program it is close to (what running a repeat would give), under ``zero`` nothing;
either way it is archived unrun, invalid and outside the selection pool. Siblings of the same
epoch are not compared with each other, as for exact repeats. The embeddings made here travel on
the children (``Child.embedding``), so the kNN index takes them as they are: each program goes
through the embedder once. ``NoveltyGate`` runs on the evaluation thread: it reads the kNN index
and a snapshot of the pool, both unchanged until the epoch's children are added, and never the
archive's SQLite connection (the parents' embeddings are read up front, on rank 0's main thread).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from population.child import Child
from population.novelty import check_threshold, is_near, pairwise


@dataclass(frozen=True)
class Near:
    """The archived program a child is closest to, how close, and whether that holds it back."""

    twin_id: int  # its parent, or any program an earlier epoch archived
    similarity: float  # cosine of the two embeddings; 1.0 for an exact repeat
    twin_reward: float  # what evolution.repeats=score gives the child if it is held back
    held: bool  # at or above the threshold: not run


def gated_feedback(near: Near, threshold: float, repeats: str, exact: bool) -> str:
    how = ("is already in the archive" if exact else
           f"embeds almost as solution {near.twin_id} does (cosine {near.similarity:.6f} >= "
           f"evolution.novelty_threshold {threshold:g})")
    where = f" (solution {near.twin_id})" if exact else ""
    earns = (f"it scores as that solution did (reward {near.twin_reward:.6g})" if repeats == "score"
             else "it earns nothing")
    return (f"This program {how}{where}, so it was not run: {earns}. "
            "Change what it computes in a way not tried before.")


class NoveltyGate:
    """One epoch's gate: ``check`` embeds children and names those at or above the threshold."""

    def __init__(self, threshold: float, embedder, index, pool_ids: np.ndarray, pool_rewards: np.ndarray,
                 parents: dict[int, np.ndarray]):
        """``index``: the kNN index (its row i is pool row i); ``pool_ids``, ``pool_rewards``: the pool's
        columns; ``parents``: the stored embedding of every parent (and crossover mate) of the epoch."""
        self.threshold = check_threshold(threshold)
        if self.threshold == 0.0:
            raise ValueError("a novelty gate with threshold 0 is off: build none")
        self.embedder, self.index = embedder, index
        self.pool_ids, self.pool_rewards = pool_ids, pool_rewards
        self.parents = parents
        self.embedded = 0  # texts that went through the embedder (metrics.jsonl ``embedded`` adds them)

    def reward_of(self, sid: int) -> float:
        row = int(np.searchsorted(self.pool_ids, sid))
        if row >= len(self.pool_ids) or self.pool_ids[row] != sid:
            raise KeyError(f"solution {sid} is not in the selection pool")
        return float(self.pool_rewards[row])

    def exact(self, sid: int) -> Near:
        """An exact repeat of archived program ``sid``: the same canonical code embeds the same (cosine 1)."""
        return Near(sid, 1.0, self.reward_of(sid), held=True)

    def check(self, codes: list[str], parents: list[tuple[int, ...]]) -> tuple[list[Near], np.ndarray]:
        """Embed ``codes`` (one embedder call; equal canonical code once) and compare each with its
        ``parents`` and with every indexed program. Returns each child's ``Near`` (``held``: do not run
        it) and its embedding row, (n, d)."""
        if not codes:
            return [], np.zeros((0, 0), np.float32)
        emb, _, embedded = self.embedder.embed_cached(codes, lambda _hash: None)  # equal canonical code once
        self.embedded += embedded
        best, rows = self.index.nearest(emb)
        twins = [int(self.pool_ids[r]) if r >= 0 else -1 for r in rows]
        for i, ids in enumerate(parents):  # exactly, whatever the index (faiss searches approximately)
            for pid in ids:
                sim = float(pairwise(emb[i : i + 1], self.parents[pid][None])[0])
                if sim >= best[i]:  # a tie names the parent
                    best[i], twins[i] = sim, pid
        held = is_near(best, self.threshold)
        return [Near(twins[i], float(best[i]), self.reward_of(twins[i]), bool(held[i])) for i in range(len(codes))], emb


def hold_back(child: Child, near: Near, threshold: float, repeats: str) -> None:
    """Make ``child`` a gated repeat: not run, not a program of the pool, rewarded as ``repeats`` says."""
    exact = bool(child.metrics.get("repeat"))
    child.is_program, child.valid = False, False
    child.reward = near.twin_reward if repeats == "score" else 0.0
    child.feedback = gated_feedback(near, threshold, repeats, exact)
    child.metrics = dict(child.metrics, novelty_similarity=near.similarity)
    if not exact:
        child.metrics["near_repeat"] = 1.0
