"""Kissing configuration in dimension 11: as many vectors as possible, every two at least as far apart as the
longest one is long (then unit spheres in their directions, at distance 2, touch the central one and not
each other)."""
import itertools


# EVOLVE-BLOCK-START
def kissing_vectors():
    """The 220 vectors +-e_i +-e_j (i < j): each has squared length 2, and two differ by at least 2."""
    d = 11
    vectors = []
    for i, j in itertools.combinations(range(d), 2):
        for si, sj in itertools.product((1, -1), repeat=2):
            v = [0] * d
            v[i], v[j] = si, sj
            vectors.append(v)
    return vectors
# EVOLVE-BLOCK-END


def run_kissing():
    return kissing_vectors()
