"""Which programs an operator shows beside its parent (rollout.operators): crossover's second
parent and best-shot's versions. Pure functions of P_t's ids and tags (islands; -1: none), so the
rules can be checked by hand; train.loop.evolution.Evolution feeds them from the archive."""

from __future__ import annotations

from typing import Callable

import numpy as np


def choose_mate(parent_id: int, tag: int, ids, tags, embeddings: Callable[[list[int]], np.ndarray]) -> int | None:
    """Crossover's second parent: a member of P_t from another lineage. Members of another island
    come first where the population has islands; among the candidates, the one whose embedding is
    least similar (cosine) to the parent's, the lowest id on ties. None when P_t holds no other
    program. ``embeddings(ids)``: one row per id, in order."""
    slots = [(int(i), int(t)) for i, t in zip(ids, tags) if int(i) != parent_id]
    if not slots:
        return None
    elsewhere = [s for s in slots if s[1] != tag]
    candidates = sorted({i for i, _ in (elsewhere if elsewhere and tag != -1 else slots)})
    emb = np.asarray(embeddings([parent_id] + candidates), dtype=np.float64)
    emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    similarity = emb[1:] @ emb[0]
    return candidates[int(np.argmin(similarity))]  # argmin: the first (lowest id) on ties


def choose_shots(parent_id: int, tag: int, ids, tags, reward_of: dict[int, float], k: int) -> list[int]:
    """Best-shot's versions: the parent and the k-1 best other members of its island (of all P_t
    without islands), sorted by reward, worst first; ties by id."""
    same = sorted({int(i) for i, t in zip(ids, tags) if int(i) != parent_id and (tag == -1 or int(t) == tag)})
    best = sorted(same, key=lambda i: (-reward_of[i], i))[: k - 1]
    return sorted(best + [parent_id], key=lambda i: (reward_of[i], i))
