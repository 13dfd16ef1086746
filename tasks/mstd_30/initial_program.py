"""A set A in [0, 30) with more sums than differences: maximise |A+A| / |A-A|."""


# EVOLVE-BLOCK-START
def construct_set():
    """Conway's MSTD set: |A+A| = 26 > |A-A| = 25."""
    A = [0, 2, 3, 4, 7, 11, 12, 14]
    return A
# EVOLVE-BLOCK-END
