"""The Dyck-path bijection task by brute force and by Billey-Jockusch-Stanley, for its tests and red-team tests."""

import itertools

from tasks.families.dyck.verify import N_MAX

CATALAN = [1, 2, 5, 14, 42, 132, 429]  # n = 1..7 (OEIS A000108)


def brute_force_paths(n):
    """Dyck words by filtering all 2^(2n) U/D words (product yields U before D: lexicographic)."""
    out = []
    for word in itertools.product("UD", repeat=2 * n):
        heights = list(itertools.accumulate(1 if c == "U" else -1 for c in word))
        if min(heights) >= 0 and heights[-1] == 0:
            out.append("".join(word))
    return out


def bjs(path):
    """Billey-Jockusch-Stanley (paper Appendix A, after Callan): with the ascent code A (partial
    sums of the lengths of the U runs) and the descent code D (same for the D runs), each without
    its last entry, s(D_i) = A_i + 1 are the excedances; the other values fill the other positions
    in increasing order."""
    n = len(path) // 2
    ups = [len(run) for run in path.replace("D", " ").split()]
    downs = [len(run) for run in path.replace("U", " ").split()]
    asc, desc = list(itertools.accumulate(ups))[:-1], list(itertools.accumulate(downs))[:-1]
    perm = [0] * (n + 1)
    for position, value in zip(desc, asc):
        perm[position] = value + 1
    rest = iter(sorted(set(range(1, n + 1)) - set(perm)))
    return [p or next(rest) for p in perm[1:]]


BJS_PROGRAM = '''
import itertools


def dyck_to_perm(path):
    n = len(path) // 2
    ups = [len(run) for run in path.replace("D", " ").split()]
    downs = [len(run) for run in path.replace("U", " ").split()]
    asc, desc = list(itertools.accumulate(ups))[:-1], list(itertools.accumulate(downs))[:-1]
    perm = [0] * (n + 1)
    for position, value in zip(desc, asc):
        perm[position] = value + 1
    rest = iter(sorted(set(range(1, n + 1)) - set(perm)))
    return [p or next(rest) for p in perm[1:]]
'''


def artefact(fn):
    """What a faithful harness returns for the map fn (paths from the brute-force enumeration; a
    function of the path gives the same outputs on the second pass)."""
    outputs = [[fn(p) for p in brute_force_paths(n)] for n in range(1, N_MAX + 1)]
    return {"outputs": outputs, "again": [list(block) for block in outputs], "first_problem": None}


def expected(per_n):
    """Reward from per-n (validity, injectivity, surjectivity) computed by hand."""
    return sum(sum(scores) / 3 for scores in per_n) / len(per_n)
