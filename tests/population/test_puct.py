"""population/lineage_stats.py and population/puct.py: TTT-Discover's PUCT parent rule against numbers
worked out by hand, and the incremental lineage statistics against a brute-force recount."""

import numpy as np
import pytest

from population.lineage_stats import LineageStats
from population.puct import puct_pass, puct_scores, rank_prior

NAN = np.nan


def small_tree() -> LineageStats:
    """1 (0.5) -> 2 (0.6), 3 (0.9); 2 -> 4 (0.7), 5 (0.4); 4 -> 6 (reward 5.0 but invalid)."""
    stats = LineageStats()
    stats.add([1], [None], [0.5], [True])
    stats.add([2, 3], [1, 1], [0.6, 0.9], [True, True])
    stats.add([4, 5, 6], [2, 2, 4], [0.7, 0.4, 5.0], [True, True, False])
    return stats


def test_a_small_tree_by_hand():
    stats = small_tree()
    np.testing.assert_array_equal(stats.child_best[1:7], [0.9, 0.7, NAN, NAN, NAN, NAN])  # 6 is invalid: no best
    np.testing.assert_array_equal(stats.subtree_best[1:7], [0.9, 0.7, NAN, NAN, NAN, NAN])
    np.testing.assert_array_equal(stats.visits[1:7], [5, 3, 0, 1, 0, 0])  # descendants, invalid ones too
    assert stats.total == 5 and len(stats) == 6
    best, visits, total, related = stats.view([2, 3, 4], "children")
    np.testing.assert_array_equal(best, [0.7, NAN, NAN])
    assert visits.tolist() == [3, 0, 1] and total == 5
    assert related.tolist() == [[True, False, True], [False, True, False], [True, False, True]]
    # a grandchild better than every child: the subtree best sees it, the children's best does not
    stats.add([7], [4], [0.95], [True])
    assert stats.child_best[2] == 0.7 and stats.subtree_best[2] == 0.95 and stats.subtree_best[1] == 0.95
    assert stats.child_best[4] == 0.95 and stats.visits[1] == 6 and stats.visits[4] == 2


def test_puct_scores_by_hand():
    # candidates 2, 3, 4 of the small tree: R = 0.6, 0.9, 0.7; Q = 0.7 (2's best child), 0.9, 0.7 (own rewards);
    # n = 3, 0, 1; T = 5; scale = 0.9 - 0.6 = 0.3; prior weights 1, 3, 2 (of 6); sqrt(1 + 5) = 2.4494897
    s = puct_scores([0.6, 0.9, 0.7], [0.7, NAN, NAN], [3, 0, 1], 5, c=1.0)
    assert s.scale == pytest.approx(0.3)
    np.testing.assert_allclose(s.prior, [1 / 6, 1 / 2, 1 / 3])
    np.testing.assert_allclose(s.q, [0.7, 0.9, 0.7])
    np.testing.assert_allclose(s.bonus, [0.0306186, 0.3674235, 0.1224745], atol=1e-7)
    np.testing.assert_allclose(s.score, [0.7306186, 1.2674235, 0.8224745], atol=1e-7)
    # c scales the bonus only; c = 0 is greedy on Q
    np.testing.assert_allclose(puct_scores([0.6, 0.9, 0.7], [0.7, NAN, NAN], [3, 0, 1], 5, c=0.0).score, [0.7, 0.9, 0.7])
    # a best below the own reward lowers Q: the children fell short
    assert puct_scores([0.9, 0.6], [0.5, NAN], [4, 0], 4).q.tolist() == [0.5, 0.6]
    # one candidate, or all equal: the spread floor keeps the bonus finite and positive
    one = puct_scores([2.0], [NAN], [0], 0)
    assert one.scale == 1e-6 and one.prior.tolist() == [1.0] and one.score[0] == pytest.approx(2.0 + 1e-6)


def test_the_rank_prior_is_linear_and_ties_share_the_better_rank():
    np.testing.assert_allclose(rank_prior([0.3, 0.1, 0.2]), [3 / 6, 1 / 6, 2 / 6])
    # 2.0 twice: nobody better, weight 4 each; 1.0: two better, weight 2; 0.0: weight 1 (of 11)
    np.testing.assert_allclose(rank_prior([1.0, 2.0, 2.0, 0.0]), [2 / 11, 4 / 11, 4 / 11, 1 / 11])


def test_a_pass_spreads_over_lineages_and_ties_follow_the_rng():
    stats = small_tree()
    ids = [1, 2, 3, 4, 5]
    rewards = [0.5, 0.6, 0.9, 0.7, 0.4]
    best, visits, total, related = stats.view(ids)
    # scores by hand (T = 5, scale 0.5, weights 2, 3, 5, 4, 1 of 15, sqrt 6):
    # 1: 0.9 + 0.5 * 2/15 * 2.449/6 = 0.9272; 2: 0.7 + 0.5 * 3/15 * 2.449/4 = 0.7612; 3: 0.9 + 0.5 * 5/15 * 2.449 = 1.3082
    # 4: 0.7 + 0.5 * 4/15 * 2.449/2 = 0.8633; 5: 0.4 + 0.5 * 1/15 * 2.449 = 0.4816
    # 3 first (blocks its ancestor 1), then 4 (blocks 2); 5 is a sibling of 4, not a relative: picked last
    np.testing.assert_allclose(puct_scores(rewards, best, visits, total).score,
                               [0.927217, 0.761237, 1.308248, 0.863299, 0.481650], atol=1e-6)
    picks = puct_pass(5, rewards, best, visits, total, related, 1.0, np.random.default_rng(0))
    assert [ids[i] for i in picks] == [3, 4, 5]
    assert [ids[i] for i in puct_pass(2, rewards, best, visits, total, related, 1.0, np.random.default_rng(0))] == [3, 4]
    # four unrelated, exactly tied candidates: the rng orders them, the same seed the same way
    tied = dict(rewards=[1.0] * 4, best=[NAN] * 4, visits=[0] * 4, total=0, related=np.eye(4, dtype=bool), c=1.0)
    orders = {tuple(puct_pass(4, rng=np.random.default_rng(seed), **tied).tolist()) for seed in range(20)}
    assert len(orders) > 1 and all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert (puct_pass(4, rng=np.random.default_rng(3), **tied).tolist()
            == puct_pass(4, rng=np.random.default_rng(3), **tied).tolist())


def test_an_improving_lineage_overtakes_a_stuck_one_with_a_higher_reward():
    """S (1, reward 0.9) and A (2, reward 0.6), two starting points; one prompt of G = 4 children a step.
    S's children all reach 0.5; A's reach 0.7, then 0.8, ... Rank sampling would draw S two times in three
    forever."""
    stats = LineageStats()
    stats.add([1, 2], [None, None], [0.9, 0.6], [True, True])
    ids, rewards, next_id, gained, picked, scores = [1, 2], [0.9, 0.6], 3, {1: 0.5, 2: 0.7}, [], []
    for _ in range(6):
        best, visits, total, related = stats.view(ids)
        scores.append(puct_scores(rewards, best, visits, total).score)
        (pick,) = puct_pass(1, rewards, best, visits, total, related, 1.0, np.random.default_rng(0))
        sid = ids[pick]
        picked.append(sid)
        new = list(range(next_id, next_id + 4))
        stats.add(new, [sid] * 4, [gained[sid]] * 4, [True] * 4)
        next_id += 4
        if sid == 2:
            gained[2] = round(gained[2] + 0.1, 10)
    # step 1: S 0.9 + 0.3 * 2/3 * 1 = 1.1, A 0.6 + 0.3 * 1/3 = 0.7 -> S; its children reach 0.5 (Q(S) = 0.5)
    # step 2 (T = 4): S 0.5 + 0.2 * sqrt 5 / 5 = 0.5894, A 0.6 + 0.1 * sqrt 5 = 0.8236 -> A
    # step 3 (T = 8): S 0.5 + 0.2 * 3 / 5 = 0.62, A 0.7 + 0.1 * 3 / 5 = 0.76 -> A
    np.testing.assert_allclose(scores[0], [1.1, 0.7])
    np.testing.assert_allclose(scores[1], [0.5894427, 0.8236068], atol=1e-7)
    np.testing.assert_allclose(scores[2], [0.62, 0.76])
    assert picked == [1, 2, 2, 2, 2, 2]


def test_reserved_visits_count_until_the_children_are_archived():
    stats = small_tree()
    stats.reserve(4, 8)  # a pick of 4: its 8 coming children are visits of 4, 2 and 1
    _, visits, total, _ = stats.view([1, 2, 3, 4])
    assert visits.tolist() == [5 + 8, 3 + 8, 0, 1 + 8] and total == 13
    assert "pending" not in stats.state_dict()
    stats.add([7, 8], [4, 4], [0.1, 0.2], [True, True])
    _, visits, total, _ = stats.view([1, 2, 3, 4])
    assert visits.tolist() == [7, 5, 0, 3] and total == 7


def brute_force(parents: dict[int, int | None], rewards: dict[int, float], valid: dict[int, bool]):
    """Child best, subtree best and descendant count of every id, by walking each one's subtree."""
    kids: dict[int, list[int]] = {i: [] for i in parents}
    for i, p in parents.items():
        if p is not None:
            kids[p].append(i)
    child_best, subtree_best, visits = {}, {}, {}
    for i in parents:
        good = [rewards[k] for k in kids[i] if valid[k]]
        child_best[i] = max(good) if good else NAN
        below, stack = [], list(kids[i])
        while stack:
            k = stack.pop()
            below.append(k)
            stack += kids[k]
        visits[i] = len(below)
        good = [rewards[k] for k in below if valid[k]]
        subtree_best[i] = max(good) if good else NAN
    return child_best, subtree_best, visits


def test_incremental_statistics_equal_a_brute_force_recount_of_2000_rows():
    rng = np.random.default_rng(11)
    n = 2000
    parents: dict[int, int | None] = {1: None, 2: None}  # two seeds: a forest counts too
    for i in range(3, n + 1):  # mostly recent parents, for deep lines, sometimes an old one
        parents[i] = int(max(1, i - 1 - rng.geometric(0.05))) if rng.random() < 0.9 else int(rng.integers(1, i))
    rewards = {i: float(rng.normal()) for i in parents}
    valid = {i: bool(rng.random() < 0.8) for i in parents}
    stats, i = LineageStats(), 1
    while i <= n:  # batches of 1 to 150 rows, as epochs of children arrive
        batch = list(range(i, min(n, i + int(rng.integers(1, 150))) + 1))
        stats.add(batch, [parents[b] for b in batch], [rewards[b] for b in batch], [valid[b] for b in batch])
        i = batch[-1] + 1
    child_best, subtree_best, visits = brute_force(parents, rewards, valid)
    ids = list(parents)
    np.testing.assert_array_equal(stats.child_best[ids], [child_best[i] for i in ids])
    np.testing.assert_array_equal(stats.subtree_best[ids], [subtree_best[i] for i in ids])
    np.testing.assert_array_equal(stats.visits[ids], [visits[i] for i in ids])
    assert stats.total == n - 2 and max(len(stats.chain(i)) for i in ids) > 50  # deep lines were exercised
    rebuilt = LineageStats.from_rows(ids, [parents[i] for i in ids], [rewards[i] for i in ids], [valid[i] for i in ids])
    restored = LineageStats.from_state(stats.state_dict())
    for other in (rebuilt, restored):
        for key, value in stats.state_dict().items():
            np.testing.assert_array_equal(other.state_dict()[key], value, err_msg=key)


def test_bad_input_is_one_clear_error():
    stats = small_tree()
    with pytest.raises(ValueError, match="solution 3 is counted already"):
        stats.add([3], [1], [0.1], [True])
    with pytest.raises(ValueError, match="solution 9's parent 8 is not counted before it"):
        stats.add([9], [8], [0.1], [True])
    with pytest.raises(ValueError, match="one of each per solution"):
        stats.add([9, 10], [1], [0.1], [True])
    with pytest.raises(KeyError, match=r"\[42\]"):
        stats.view([1, 42])
    with pytest.raises(ValueError, match="unknown PUCT value 'subtre'; valid: \\['children', 'subtree'\\]"):
        stats.view([1], "subtre")
    with pytest.raises(ValueError, match="finite rewards"):
        puct_scores([0.5, np.inf], [NAN, NAN], [0, 0], 0)
    with pytest.raises(ValueError, match="empty population"):
        puct_scores([], [], [], 0)
    with pytest.raises(ValueError, match="each after its parent"):
        LineageStats.from_rows([1, 2], [None, 2], [0.0, 0.0], [True, True])


def test_a_refused_batch_counts_nothing():
    stats = small_tree()
    before = stats.state_dict()
    with pytest.raises(ValueError, match="solution 8's parent 9 is not counted before it"):
        stats.add([7, 8], [1, 9], [0.1, 0.2], [True, True])  # 7 is fine, 8 is not: neither is counted
    with pytest.raises(ValueError, match="solution 7 is counted already"):
        stats.add([7, 7], [1, 1], [0.1, 0.2], [True, True])
    for key, value in stats.state_dict().items():
        np.testing.assert_array_equal(value, before[key], err_msg=key)
    stats.add([7, 8], [1, 7], [0.1, 0.2], [True, True])  # a parent earlier in the same batch is fine
    assert stats.visits[1] == 7 and stats.visits[7] == 1 and stats.subtree_best[7] == 0.2
