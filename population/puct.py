"""TTT-Discover's PUCT rule for choosing the states to expand (Yuksekgonul et al. 2026, arXiv 2601.16175,
§3.3 "reuse"), as a parent-sampling option: parents whose children keep improving are expanded again,
parents whose children fall short are left once they have been tried. Pure math: the lineage numbers come
in as arrays (population/lineage_stats.py keeps them).

Followed from the public code, test-time-training/discover at 96df74f,
tinker_cookbook/recipes/ttt/sampler.py: ``PUCTSampler`` (lines 319-623): ``_compute_scale`` and
``_compute_prior`` (428-440), ``sample_states`` (471-527), the visit updates in ``update_states`` (534-550)
and ``record_failed_rollout`` (619-623). A published summary of the paper's §3.3 names the same terms (Q the
best reward among the states generated from s, P a rank prior, n(s) the expansions of s or its descendants,
T all expansions); the paper's own text was not at hand. The rule as the code runs it:

    score(s) = Q(s) + c * scale * P(s) * sqrt(1 + T) / (1 + n(s))

* Q(s): the best reward among the valid children of s (the max, not the mean: one great child is what
  discovery wants); R(s), its own reward, while it has none. Q(s) can fall below R(s): a state whose
  children are all worse loses its standing. ``value="subtree"`` takes the best among all descendants
  instead (HELIX's reading of issue 54, an ablation; TTT-Discover's code keeps the children's best).
* P(s): a linear rank prior over the candidates, weight N - rank (best N, worst 1), normalised. Ties
  share the better rank here (TTT-Discover's double argsort gives tied states arbitrary distinct ranks).
* scale = max R - min R over the candidates (at least 1e-6), so c is in units of the reward spread.
  TTT-Discover leaves its initial states out of the spread, whose values are placeholders there; HELIX's
  starter is evaluated like any child, so it counts.
* n(s): expansions of s or of any descendant (visits propagate up the lineage); T: all expansions.
  Every rollout is one expansion, a failed one too, so a parent picked for one prompt of G completions
  gains G visits. TTT-Discover divides n and T by the group size in its formula but sets that divisor to
  1 (sampler.py line 356), so its running rule is the one above; c defaults to its 1.0 (line 341).

One pass picks by score, highest first (ties: the higher own reward, then the rng), and a pick blocks
its ancestors and descendants among the candidates for the rest of the pass (TTT-Discover's
``_get_full_lineage``), so one batch spreads over distinct lines. TTT-Discover's batch ends when every
candidate is blocked; HELIX needs B prompts, so the caller runs another pass with the picks' visits
counted (``LineageStats.reserve``), which is where a parent is chosen more than once in an epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCALE_FLOOR = 1e-6  # TTT-Discover's floor on the reward spread


@dataclass(frozen=True)
class Scores:
    score: np.ndarray  # Q + bonus, per candidate
    q: np.ndarray
    prior: np.ndarray
    bonus: np.ndarray
    scale: float


def rank_prior(rewards: np.ndarray) -> np.ndarray:
    """P(s) proportional to N - rank(s), rank(s) = how many candidates are strictly better (0 = best)."""
    r = np.asarray(rewards, np.float64).reshape(-1)
    n = len(r)
    better = n - np.searchsorted(np.sort(r), r, side="right")
    w = (n - better).astype(np.float64)
    return w / w.sum()


def puct_scores(rewards, best, visits, total: int, c: float = 1.0) -> Scores:
    """The rule above for each candidate: own reward R, best child (or descendant) reward (NaN: none),
    visits n, and the run's expansions T."""
    r = np.asarray(rewards, np.float64).reshape(-1)
    best = np.asarray(best, np.float64).reshape(-1)
    n = np.asarray(visits, np.float64).reshape(-1)
    if not len(r) == len(best) == len(n):
        raise ValueError(f"{len(r)} rewards, {len(best)} bests and {len(n)} visit counts: one of each per candidate")
    if len(r) == 0:
        raise ValueError("cannot score parents in an empty population")
    if not np.isfinite(r).all():
        raise ValueError(f"PUCT needs finite rewards; got {r[~np.isfinite(r)].tolist()[:3]}")
    if (n < 0).any() or total < 0 or c < 0:
        raise ValueError(f"visits, total and c must be >= 0; got min visits {n.min()}, total {total}, c {c}")
    q = np.where(np.isnan(best), r, best)
    scale = max(float(r.max() - r.min()), SCALE_FLOOR)
    prior = rank_prior(r)
    bonus = c * scale * prior * np.sqrt(1.0 + total) / (1.0 + n)
    return Scores(q + bonus, q, prior, bonus, scale)


def puct_pass(count: int, rewards, best, visits, total: int, related: np.ndarray, c: float,
              rng: np.random.Generator) -> np.ndarray:
    """Up to ``count`` candidate indices, best score first, none related to an earlier pick (at least
    one: the best is never blocked). ``related[i, j]``: i and j are one solution or one is an ancestor
    of the other. The rng breaks exact ties only, so the same rng state gives the same picks."""
    if count < 1:
        raise ValueError(f"number of parents must be >= 1, got {count}")
    s = puct_scores(rewards, best, visits, total, c)
    related = np.asarray(related, bool)
    if related.shape != (len(s.score), len(s.score)):
        raise ValueError(f"related is {related.shape}, not one row and column per candidate ({len(s.score)})")
    order = np.lexsort((rng.random(len(s.score)), -np.asarray(rewards, np.float64), -s.score))
    blocked = np.zeros(len(order), bool)
    picks = []
    for i in order:
        if blocked[i]:
            continue
        picks.append(i)
        blocked |= related[i]
        if len(picks) == count:
            break
    return np.array(picks, np.int64)
