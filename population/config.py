"""The ``population:`` and ``selection:`` config sections, owned by the package that uses them. A
field's range sits in its annotation (``Annotated[int, ">= 1"]``); train's config loader checks
every bound at load, so this package needs no validator of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal


@dataclass
class PopulationConfig:
    # false: no evolving population; every prompt shows the task's starter program with no
    # ancestors (TrainOnly with the trainer on, BestOfN with it off).
    enabled: bool = True
    size: Annotated[int, ">= 1"] = 32  # |P_t| kept by selection
    knn_k: Annotated[int, ">= 1"] = 5  # k in eq. 6
    knn_index: Literal["exact", "faiss"] = "exact"  # faiss: approximate HNSW for very large archives
    embedder: str = "all-minilm-l6-v2"
    embed_batch_size: Annotated[int, ">= 1"] = 32
    canonicalize: bool = True
    # how the B parents of an epoch are drawn from P_t (population/sampling.py): rank | uniform | puct
    # (TTT-Discover's rule: a member scored by what its children reached and explored by visit counts)
    parent_sampling: Literal["rank", "uniform", "puct"] = "rank"
    puct_c: Annotated[float, ">= 0 (0: no exploration bonus)"] = 1.0  # puct only: c, in units of P_t's reward spread
    # puct only: Q(s) is the best valid reward among s's children (TTT-Discover) or among all its descendants
    puct_value: Literal["children", "subtree"] = "children"


@dataclass
class SelectionConfig:
    strategy: str = "nsga2"  # a name in population.selection.SELECTION_STRATEGIES: nsga2 | top_score | top_div | random | islands
    include_invalid: bool = True  # paper behaviour: reward-0 programs compete too (rare novel failures survive)
    n_islands: Annotated[int, ">= 1"] = 4  # islands only
    reset_every: Annotated[int, ">= 1"] = 5  # islands only: epochs between resets of the worse half
