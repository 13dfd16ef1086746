"""Selection and parent sampling against brute-force references written here, independent of pymoo."""

import numpy as np
import pytest

from population.sampling import parent_weights, sample_parents
from population.selection import SELECTION_STRATEGIES, nondominated_fronts, register_strategy, select

TOL = 1e-9


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


def brute_crowding(F):
    """Deb et al. 2002 crowding distance of one front (rows of minimised objectives F), per objective
    (next - previous) / range, extremes infinite, averaged over objectives. Ties are ordered by
    row (a stable sort), and an objective with zero range adds nothing, extremes included."""
    n, m = F.shape
    dist = np.zeros(n)
    for k in range(m):
        order = sorted(range(n), key=lambda i: (F[i, k], i))
        span = F[order[-1], k] - F[order[0], k]
        if span == 0:
            continue
        for pos, i in enumerate(order):
            lo = F[order[pos - 1], k] if pos > 0 else -np.inf
            hi = F[order[pos + 1], k] if pos < n - 1 else np.inf
            dist[i] += (hi - lo) / span
    return dist / m


def check_nsga2(r, d, size, chosen):
    """Whole fronts in order; from the split front every point whose crowding distance is above
    the cut, and only points at or above it (which of those tied at the cut is the rng's call)."""
    chosen = chosen.tolist()
    assert len(chosen) == min(size, len(r)) and len(set(chosen)) == len(chosen)
    chosen, taken = set(chosen), []
    for front in brute_fronts(r, d):
        if len(taken) == size:
            break
        if len(taken) + len(front) <= size:
            assert set(front) <= chosen
            taken += front
            continue
        need = size - len(taken)
        extra = chosen - set(taken)
        assert len(extra) == need and extra <= set(front)
        crowd = brute_crowding(-np.column_stack([r, d])[front])
        cut = np.sort(crowd)[::-1][need - 1]
        for i, c in zip(front, crowd):
            if c > cut + TOL:
                assert i in extra, f"point {i} (crowding {c}) beats the cut {cut} but was dropped"
            if i in extra:
                assert c >= cut - TOL, f"point {i} (crowding {c}) is below the cut {cut} but was kept"
        break


def points(seed, n, tied):
    rng = np.random.default_rng(seed)
    if tied:  # coarse grid: many ties and exact duplicates, inside fronts too
        return rng.integers(0, 6, n).astype(float), rng.integers(0, 4, n).astype(float)
    return rng.random(n), rng.random(n)


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_fronts_match_brute_force(seed, tied):
    r, d = points(seed, 150, tied)
    assert [f.tolist() for f in nondominated_fronts(r, d)] == brute_fronts(r, d)


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_nsga2_matches_brute_force(seed, tied):
    r, d = points(seed, 80, tied)
    for size in (1, 7, 17, 40, 79, 80, 200):
        check_nsga2(r, d, size, select("nsga2", r, d, size, np.random.default_rng(seed)))


def test_nsga2_on_points_that_are_all_one_front():
    # the anti-diagonal: one front, equal interior crowding; keeps both extremes
    r = np.linspace(0, 1, 21)
    d = 1 - r
    chosen = select("nsga2", r, d, 5, np.random.default_rng(0))
    check_nsga2(r, d, 5, chosen)
    assert {0, 20} <= set(chosen.tolist())


def test_nsga2_breaks_crowding_ties_with_the_rng():
    r = np.linspace(0, 1, 41)
    d = 1 - r
    picks = {tuple(sorted(select("nsga2", r, d, 6, np.random.default_rng(s)).tolist())) for s in range(10)}
    assert len(picks) > 1  # 39 interior points tie; different seeds choose differently
    a = select("nsga2", r, d, 6, np.random.default_rng(3))
    b = select("nsga2", r, d, 6, np.random.default_rng(3))
    assert a.tolist() == b.tolist()


def test_nsga2_all_duplicates_and_sizes():
    r = d = np.ones(10)
    for size in (0, 3, 10, 12):
        chosen = select("nsga2", r, d, size, np.random.default_rng(1))
        assert len(chosen) == min(size, 10) and len(set(chosen.tolist())) == len(chosen)


def test_nsga2_keeps_the_best_reward_and_the_most_diverse_on_a_big_archive():
    rng = np.random.default_rng(1)
    r, d = rng.random(20000), rng.random(20000)
    chosen = select("nsga2", r, d, 64, rng)
    assert len(set(chosen.tolist())) == 64
    assert int(np.argmax(r)) in chosen and int(np.argmax(d)) in chosen  # the extremes of the first front


def brute_top(primary, secondary, size):
    return sorted(range(len(primary)), key=lambda i: (-primary[i], -secondary[i], i))[:size]


def test_top_score_is_top_by_reward_then_diversity_then_index():
    rng = np.random.default_rng(2)
    r, d = rng.integers(0, 5, 100).astype(float), rng.integers(0, 3, 100).astype(float)
    for size in (1, 10, 33):
        assert select("top_score", r, d, size, rng).tolist() == brute_top(r, d, size)
    r = rng.random(100)
    assert sorted(select("top_score", r, d, 10, rng).tolist()) == sorted(np.argsort(-r)[:10].tolist())


def test_top_div_is_top_by_diversity():
    rng = np.random.default_rng(3)
    r, d = rng.integers(0, 3, 100).astype(float), rng.integers(0, 5, 100).astype(float)
    assert select("top_div", r, d, 7, rng).tolist() == brute_top(d, r, 7)


def test_random_is_seeded_and_without_duplicates():
    r = d = np.zeros(50)
    a = select("random", r, d, 20, np.random.default_rng(5))
    b = select("random", r, d, 20, np.random.default_rng(5))
    c = select("random", r, d, 20, np.random.default_rng(6))
    assert a.tolist() == b.tolist() != c.tolist()
    assert len(set(a.tolist())) == 20 and 0 <= a.min() and a.max() < 50
    counts = np.bincount(np.concatenate([select("random", r, d, 10, np.random.default_rng(s)) for s in range(500)]),
                         minlength=50)
    assert counts.min() > 50 and counts.max() < 150  # expected 100 each


def test_small_archive_keeps_everything():
    for name in ("nsga2", "top_score", "top_div", "random"):
        assert select(name, np.ones(3), np.ones(3), 8, np.random.default_rng()).tolist() == [0, 1, 2]


def test_unknown_strategy_names_the_nearest_and_the_valid_ones():
    with pytest.raises(ValueError, match="did you mean 'top_score'") as err:
        select("top_scor", np.ones(3), np.ones(3), 2, np.random.default_rng())
    for name in ("nsga2", "top_div", "random"):
        assert name in str(err.value)
    with pytest.raises(ValueError, match="did you mean 'nsga2'"):
        select("NSGA-2", np.ones(3), np.ones(3), 2, np.random.default_rng())
    assert {"nsga2", "top_score", "top_div", "random"} <= set(SELECTION_STRATEGIES)


def test_bad_input_gets_a_clear_message():
    with pytest.raises(ValueError, match="NaN at rows \\[1\\]"):
        select("nsga2", np.array([1.0, np.nan, 2.0]), np.ones(3), 2, np.random.default_rng())
    with pytest.raises(ValueError, match="same length"):
        select("nsga2", np.ones(3), np.ones(4), 2, np.random.default_rng())


def test_register_strategy_plugs_in_and_is_checked():
    @register_strategy("lowest_reward_test")
    def lowest(rewards, diversity, size, rng):
        return np.argsort(rewards)[:size]

    @register_strategy("broken_test")
    def broken(rewards, diversity, size, rng):
        return np.zeros(size, dtype=int)

    try:
        assert select("lowest_reward_test", np.array([3.0, 1.0, 2.0]), np.zeros(3), 2, np.random.default_rng()).tolist() == [1, 2]
        with pytest.raises(RuntimeError, match="distinct rows"):
            select("broken_test", np.arange(5.0), np.zeros(5), 3, np.random.default_rng())
    finally:
        SELECTION_STRATEGIES.pop("lowest_reward_test")
        SELECTION_STRATEGIES.pop("broken_test")


# ---- parent sampling ------------------------------------------------------------------------

def brute_rank_weights(rewards):
    """w_i = 1 / (1 + number of strictly better rewards), normalised."""
    w = np.array([1.0 / (1 + sum(1 for y in rewards if y > x)) for x in rewards])
    return w / w.sum()


def test_parent_sampling_is_seeded():
    rewards = np.array([0.1, 2.0, 0.5, 1.0])
    for mode in ("rank", "uniform"):
        a = sample_parents(rewards, 8, np.random.default_rng(9), mode)
        b = sample_parents(rewards, 8, np.random.default_rng(9), mode)
        assert a.tolist() == b.tolist() and a.dtype == np.int64


def test_rank_sampling_favours_high_reward():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=12)
    rewards[3] = rewards[7]  # a tie shares the better rank
    want = brute_rank_weights(rewards)
    np.testing.assert_allclose(parent_weights(rewards), want)
    draws = sample_parents(rewards, 60000, np.random.default_rng(1))
    freq = np.bincount(draws, minlength=12) / 60000
    np.testing.assert_allclose(freq, want, atol=0.01)
    order = np.argsort(-rewards, kind="stable")
    assert freq[order[0]] > 2.5 * freq[order[-1]]
    assert np.all(np.diff(want[order]) <= 1e-12)  # monotone in reward
    assert np.corrcoef(rewards, freq)[0, 1] > 0.6


def test_uniform_mode_nan_and_errors():
    rewards = np.array([0.1, 2.0, np.nan, 1.0])
    assert np.allclose(parent_weights(rewards, "uniform"), 0.25)
    assert parent_weights(rewards)[2] == parent_weights(rewards).min()  # NaN ranks last
    freq = np.bincount(sample_parents(rewards, 40000, np.random.default_rng(2), "uniform"), minlength=4) / 40000
    np.testing.assert_allclose(freq, 0.25, atol=0.01)
    with pytest.raises(ValueError, match="valid: \\['rank', 'uniform'\\]"):
        sample_parents(rewards, 2, np.random.default_rng(), mode="best")
    with pytest.raises(ValueError, match="empty population"):
        sample_parents(np.array([]), 2, np.random.default_rng())


# ---- islands (FunSearch-style ablation) -----------------------------------------------------

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
