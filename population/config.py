"""The ``population:`` and ``selection:`` config sections, owned by the package that uses them. A
field's range rule sits in its metadata (``rule``: predicate, what it must be); train.config
checks every rule at load."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


def _rule(default, ok, text: str):
    return field(default=default, metadata={"rule": (ok, text)})


@dataclass
class PopulationConfig:
    # false: no evolving population; every prompt shows the task's starter program with no
    # ancestors (TrainOnly with the trainer on, BestOfN with it off).
    enabled: bool = True
    size: int = _rule(32, lambda v: v >= 1, "must be >= 1")  # |P_t| kept by selection
    knn_k: int = _rule(5, lambda v: v >= 1, "must be >= 1")  # k in eq. 6
    knn_index: Literal["exact", "faiss"] = "exact"  # faiss: approximate HNSW for very large archives
    embedder: str = "all-minilm-l6-v2"
    embed_batch_size: int = _rule(32, lambda v: v >= 1, "must be >= 1")
    canonicalize: bool = True
    parent_sampling: Literal["rank", "uniform"] = "rank"


@dataclass
class SelectionConfig:
    strategy: str = "nsga2"  # a name in population.selection.SELECTION_STRATEGIES: nsga2 | top_score | top_div | random | islands
    include_invalid: bool = True  # paper behaviour: reward-0 programs compete too (rare novel failures survive)
    n_islands: int = _rule(4, lambda v: v >= 1, "must be >= 1")  # islands only
    reset_every: int = _rule(5, lambda v: v >= 1, "must be >= 1")  # islands only: epochs between resets of the worse half
