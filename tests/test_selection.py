"""Selection against a brute-force O(n^2) NSGA-II written here, independent of pymoo."""

import numpy as np
import pytest

from population.sampling import parent_weights, sample_parents
from population.selection import SELECTION_STRATEGIES, select


def brute_fronts(r, d):
    """Non-dominated fronts for maximising (r, d), by repeated O(n^2) peeling."""
    left = set(range(len(r)))
    fronts = []
    while left:
        front = [i for i in left if not any(
            r[j] >= r[i] and d[j] >= d[i] and (r[j] > r[i] or d[j] > d[i]) for j in left)]
        fronts.append(sorted(front))
        left -= set(front)
    return fronts


def brute_crowding(points):
    """Deb et al. 2002 crowding distance with objectives normalised by their range; extremes infinite."""
    n, m = points.shape
    if n <= 2:
        return np.full(n, np.inf)
    dist = np.zeros(n)
    for k in range(m):
        order = np.argsort(points[:, k], kind="stable")
        span = points[order[-1], k] - points[order[0], k]
        dist[order[0]] = dist[order[-1]] = np.inf
        if span == 0:
            continue
        for a in range(1, n - 1):
            dist[order[a]] += (points[order[a + 1], k] - points[order[a - 1], k]) / span
    return dist


def brute_nsga2_survivors(r, d, size):
    """The set every correct NSGA-II must keep: whole fronts, and from the split front the
    points whose crowding distance is strictly above the cut (ties at the cut are free)."""
    must, pool = [], None
    for front in brute_fronts(r, d):
        if len(must) == size:
            break
        if len(must) + len(front) <= size:
            must += front
        else:
            pool = front
            break
    return must, pool


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("tied", [False, True])
def test_nsga2_matches_brute_force(seed, tied):
    rng = np.random.default_rng(seed)
    n, size = 60, 17
    if tied:  # coarse grid: many ties and exact duplicates
        r, d = rng.integers(0, 5, n).astype(float), rng.integers(0, 4, n).astype(float)
    else:
        r, d = rng.random(n), rng.random(n)
    chosen = select("nsga2", r, d, size, np.random.default_rng(0))
    assert len(chosen) == size and len(set(chosen.tolist())) == size
    must, pool = brute_nsga2_survivors(r, d, size)
    assert set(must) <= set(chosen.tolist())
    if pool is not None:
        extra = sorted(set(chosen.tolist()) - set(must))
        assert set(extra) <= set(pool)
        if not tied:  # distinct points: crowding distance decides exactly
            crowd = brute_crowding(np.column_stack([r, d])[pool])
            cut = np.sort(crowd)[::-1][len(extra) - 1]
            picked = {pool[i] for i in range(len(pool)) if crowd[i] > cut}
            assert picked <= set(extra)
            assert all(crowd[pool.index(i)] >= cut for i in extra)


def test_nsga2_keeps_the_best_reward_and_the_most_diverse():
    rng = np.random.default_rng(1)
    r, d = rng.random(200), rng.random(200)
    chosen = set(select("nsga2", r, d, 10, rng).tolist())
    assert int(np.argmax(r)) in chosen and int(np.argmax(d)) in chosen


def test_top_score_is_really_top_by_reward():
    rng = np.random.default_rng(2)
    r, d = rng.random(100), rng.random(100)
    chosen = select("top_score", r, d, 10, rng)
    assert sorted(chosen.tolist()) == sorted(np.argsort(-r)[:10].tolist())


def test_top_div_is_top_by_diversity():
    rng = np.random.default_rng(3)
    r, d = rng.random(100), rng.random(100)
    assert sorted(select("top_div", r, d, 7, rng).tolist()) == sorted(np.argsort(-d)[:7].tolist())


def test_random_is_seeded_and_without_duplicates():
    r = d = np.zeros(50)
    a = select("random", r, d, 20, np.random.default_rng(5))
    b = select("random", r, d, 20, np.random.default_rng(5))
    assert a.tolist() == b.tolist() and len(set(a.tolist())) == 20


def test_small_archive_keeps_everything_and_unknown_strategy_names_nearest():
    assert select("nsga2", np.ones(3), np.ones(3), 8, np.random.default_rng()).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="did you mean 'top_score'"):
        select("top_scor", np.ones(3), np.ones(3), 2, np.random.default_rng())
    assert {"nsga2", "top_score", "top_div", "random"} <= set(SELECTION_STRATEGIES)


def test_parent_sampling_is_seeded_and_favours_high_reward():
    rewards = np.array([0.1, 2.0, 0.5, 1.0])
    a = sample_parents(rewards, 8, np.random.default_rng(9))
    b = sample_parents(rewards, 8, np.random.default_rng(9))
    assert a.tolist() == b.tolist()
    draws = sample_parents(rewards, 20000, np.random.default_rng(0))
    freq = np.bincount(draws, minlength=4) / 20000
    np.testing.assert_allclose(freq, parent_weights(rewards), atol=0.01)
    np.testing.assert_allclose(parent_weights(rewards), np.array([1 / 4, 1, 1 / 3, 1 / 2]) / (1 / 4 + 1 + 1 / 3 + 1 / 2))
    assert np.allclose(parent_weights(rewards, "uniform"), 0.25)
    with pytest.raises(ValueError, match="valid"):
        sample_parents(rewards, 2, np.random.default_rng(), mode="best")


from population.selection import Islands, Pool, make_strategy  # noqa: E402


def test_islands_start_from_the_seed_program_one_slot_each():
    rows, tags = Islands(n_islands=4, reset_every=5).select(Pool(np.array([1.0]), np.array([1.0]), np.array([-1])), 8,
                                                           np.random.default_rng(0))
    assert rows.tolist() == [0, 0, 0, 0] and tags.tolist() == [0, 1, 2, 3]


def test_islands_keep_lineages_apart_and_fill_quotas_by_reward():
    rng = np.random.default_rng(0)
    # row 0 is the seed; rows 1.. belong to islands by tag; island 0 holds the best programs by far
    tags = np.array([-1, 0, 0, 0, 1, 1, 2, 2, 2, 3])
    rewards = np.array([1.0, 9.0, 8.0, 7.0, 2.0, 3.0, 1.5, 0.5, 2.5, 0.1])
    rows, slot_tags = Islands(4, reset_every=100).select(Pool(rewards, np.zeros(10), tags, epoch=3), 8, rng)
    by_island = {i: sorted(rows[slot_tags == i].tolist()) for i in range(4)}
    assert by_island == {0: [1, 2], 1: [4, 5], 2: [6, 8], 3: [9]}  # island 0's 9.0 and 8.0 never leak out


def test_islands_reset_reseeds_the_worse_half_from_a_survivor():
    tags = np.array([-1, 0, 0, 1, 1, 2, 3])
    rewards = np.array([1.0, 5.0, 4.0, 6.0, 3.0, 0.2, 0.1])
    islands = Islands(4, reset_every=2)
    rows, slot_tags = islands.select(Pool(rewards, np.zeros(7), tags, epoch=2), 8, np.random.default_rng(1))
    losers = {2, 3}  # best rewards 0.2 and 0.1
    for island in losers:
        seeded = rows[slot_tags == island].tolist()
        assert len(seeded) == 1 and seeded[0] in (1, 3)  # the best of island 0 or of island 1
    assert sorted(rows[slot_tags == 0].tolist()) == [1, 2] and sorted(rows[slot_tags == 1].tolist()) == [3, 4]
    # after the reset, old members of a reset island are gone for good; its new children count
    tags2 = np.append(tags, [2, 2])
    rewards2 = np.append(rewards, [0.05, 7.0])
    rows2, slot_tags2 = islands.select(Pool(rewards2, np.zeros(9), tags2, epoch=3), 8, np.random.default_rng(1))
    assert 5 not in rows2.tolist() and 8 in rows2[slot_tags2 == 2].tolist()


def test_stateless_strategies_pass_tags_through():
    pool = Pool(np.arange(5.0), np.zeros(5), np.array([3, 1, 4, 1, 5]))
    rows, tags = make_strategy("top_score").select(pool, 2, np.random.default_rng(0))
    assert rows.tolist() == [4, 3] and tags.tolist() == [5, 1]
