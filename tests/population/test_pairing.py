"""Crossover's second parent and best-shot's versions (population.pairing), by hand."""

import numpy as np

from population.pairing import choose_mate, choose_shots

EMB = {1: [1.0, 0.0], 2: [0.0, 1.0], 3: [1.0, 0.1], 4: [0.6, 0.8], 5: [0.0, -2.0], 6: [0.0, 3.0]}


def embeddings(ids):
    return np.array([EMB[i] for i in ids], dtype=np.float32)


def test_the_mate_comes_from_another_island_first_then_least_similar():
    # parent 1 = (1, 0). Island 1 holds 3 (cosine 0.995) and 4 (cosine 0.6): 4, although 2 on the
    # parent's own island is orthogonal (cosine 0).
    assert choose_mate(1, 0, [1, 2, 3, 4], [0, 0, 1, 1], embeddings) == 4
    # Without islands every other member is a candidate: 2.
    assert choose_mate(1, -1, [1, 2, 3, 4], [-1, -1, -1, -1], embeddings) == 2
    # Only the parent's island is present: fall back to all of P_t.
    assert choose_mate(1, 0, [1, 3, 4], [0, 0, 0], embeddings) == 4


def test_the_mate_is_the_lowest_id_among_equally_dissimilar_members():
    # 2, 5 and 6 all have cosine 0 with (1, 0) whatever their length: 2 (5 is (0, -2): also 0)
    assert choose_mate(1, -1, [6, 5, 2, 1], [-1] * 4, embeddings) == 2
    assert choose_mate(1, -1, [6, 5, 1, 1], [-1] * 4, embeddings) == 5


def test_no_mate_when_the_parent_is_alone_in_the_population():
    assert choose_mate(1, -1, [1, 1, 1], [-1, -1, -1], embeddings) is None
    assert choose_mate(1, 0, [], [], embeddings) is None


def test_shots_are_the_parent_and_the_islands_best_worst_first():
    reward = {1: 1.5, 2: 2.6359830849, 3: 2.6359830849, 4: 0.7, 5: 9.0}
    ids, tags = [1, 2, 3, 4, 5], [0, 0, 0, 0, 1]
    assert choose_shots(1, 0, ids, tags, reward, k=3) == [1, 2, 3]  # 5 is on another island
    assert choose_shots(1, 0, ids, tags, reward, k=2) == [1, 2]  # equal rewards: the lower id
    assert choose_shots(1, -1, ids, [-1] * 5, reward, k=2) == [1, 5]  # no islands: all of P_t
    assert choose_shots(4, 0, ids, tags, reward, k=4) == [4, 1, 2, 3]
    assert choose_shots(5, 1, ids, tags, reward, k=3) == [5]  # alone on its island
    assert choose_shots(2, 0, ids, tags, {**reward, 2: 3.0}, k=2) == [3, 2]  # the parent may be the best
