"""A known 20-cap in Z_3^4, for the cap-set task and its red-team tests."""

# A 20-cap in Z_3^4 (the largest possible, FunSearch Figure 4a / Pellegrino 1970), found by random
# greedy orders (seed 0, order 5370) and checked here by brute force over all 1140 triples.
CAP_20 = [(0, 0, 0, 0), (0, 0, 0, 2), (0, 0, 2, 0), (0, 0, 2, 2), (0, 1, 1, 1), (0, 1, 1, 2), (0, 2, 1, 0),
          (0, 2, 1, 1), (1, 0, 1, 1), (1, 0, 2, 1), (1, 1, 1, 0), (1, 1, 2, 0), (1, 2, 0, 0), (1, 2, 0, 1),
          (2, 0, 0, 1), (2, 0, 1, 1), (2, 1, 2, 1), (2, 1, 2, 2), (2, 2, 0, 2), (2, 2, 1, 2)]

def as_lists(vectors):
    return [list(v) for v in vectors]
