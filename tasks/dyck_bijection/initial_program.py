"""Map each Dyck path of semilength n to a 321-avoiding permutation of 1..n, bijectively."""


# EVOLVE-BLOCK-START
def dyck_to_perm(path):
    """path: a string of n 'U' and n 'D' steps that never goes below its start.
    Returns a permutation of 1..n as a list (one-line notation)."""
    n = len(path) // 2
    perm = list(range(1, n + 1))
    return perm
# EVOLVE-BLOCK-END
