"""The cap set tasks (FunSearch, paper 001: "Cap sets", Figure 4): cap_set_4 ... cap_set_8.

The verifier (tasks/families/cap_set/verify.py) is checked against an O(N^3) brute force over all triples on
random sets, against every subset of Z_3^2, against the known maxima 4 (n=2) and 9 (n=3), found
here by exhaustive search, and a 20-cap in Z_3^4 (the maximum, Figure 4a); FunSearch's own
512-cap (Figure 4c) and its evolved priority (Figure 4b, run through the real sandbox) give 512
at n = 8. Starters and hostile programs go through the real sandbox; hostile artefacts go to the
verifier directly.
"""

import itertools
import random

import numpy as np
import pytest

from rewards import Evaluator
from rewards.sandbox import run_program
from tasks import load_task
from tasks.families.cap_set.verify import BEST_KNOWN, find_line, powers, verify_cap_set
from tests.helpers.cap_set import CAP_20, as_lists

NS = (4, 5, 6, 7, 8)

# FunSearch's evolved priority, paper 001 Figure 4b: with the greedy skeleton it gives a 512-cap in Z_3^8.
FUNSEARCH_PRIORITY = '''
def priority(el, n):
    score = n
    in_el = 0
    el_count = el.count(0)
    if el_count == 0:
        score += n ** 2
        if el[1] == el[-1]:
            score *= 1.5
        if el[2] == el[-2]:
            score *= 1.5
        if el[3] == el[-3]:
            score *= 1.5
    else:
        if el[1] == el[-1]:
            score *= 0.5
        if el[2] == el[-2]:
            score *= 0.5
    for e in el:
        if e == 0:
            if in_el == 0:
                score *= n * 0.5
            elif in_el == el_count - 1:
                score *= 0.5
            else:
                score *= n * 0.5 ** in_el
            in_el += 1
        else:
            score += 1
    if el[1] == el[-1]:
        score *= 1.5
    if el[2] == el[-2]:
        score *= 1.5
    return score
'''


def build_512_cap():
    """FunSearch's explicit 512-cap in Z_3^8, paper 001 Figure 4c, transcribed."""
    n = 8
    V = list(itertools.product(range(3), repeat=n))
    support = lambda v: tuple(i for i in range(n) if v[i] != 0)  # noqa: E731 - as printed
    reflections = lambda v: sum(1 for i in range(1, n // 2) if v[i] == v[-i])  # noqa: E731
    weight8 = [v for v in V if sum(1 for x in v if x) == 8 and reflections(v) >= 2]
    supports_16 = [(0, 1, 2, 3), (0, 1, 2, 5), (0, 3, 6, 7), (0, 5, 6, 7),
                   (1, 3, 4, 6), (1, 4, 5, 6), (2, 3, 4, 7), (2, 4, 5, 7)]
    weight4 = [v for v in V if support(v) in supports_16]
    supports_8 = [(0, 1, 2, 7), (0, 1, 2, 6), (0, 1, 3, 7), (0, 1, 6, 7), (0, 1, 5, 7), (0, 2, 3, 6),
                  (0, 2, 6, 7), (0, 2, 5, 6), (1, 2, 4, 7), (1, 2, 4, 6), (1, 3, 4, 7), (1, 4, 6, 7),
                  (1, 4, 5, 7), (2, 3, 4, 6), (2, 4, 6, 7), (2, 4, 5, 6)]
    weight4_2 = [v for v in V if support(v) in supports_8 and reflections(v) == 1]
    allowed_zeros = [(0, 4, 7), (0, 2, 4), (0, 1, 4), (0, 4, 6), (1, 2, 6), (2, 6, 7), (1, 2, 7), (1, 6, 7)]
    weight5 = [v for v in V if tuple(i for i in range(n) if v[i] == 0) in allowed_zeros
               and reflections(v) <= 1 and (v[1] * v[7]) % 3 != 1 and (v[2] * v[6]) % 3 != 1]
    return weight8 + weight4 + weight4_2 + weight5


def is_cap_brute_force(vectors) -> bool:
    """O(N^3): no three distinct vectors (by position, so a repeat is not a cap) sum to 0 mod 3."""
    if len(set(map(tuple, vectors))) != len(vectors):
        return False
    return not any(all((x + y + z) % 3 == 0 for x, y, z in zip(a, b, c))
                   for a, b, c in itertools.combinations(vectors, 3))


def is_cap_by_pairs(vectors) -> bool:
    """O(N^2) with a Python set of tuples (independent of the verifier's codes and tables)."""
    members = set(map(tuple, vectors))
    if len(members) != len(vectors):
        return False
    return not any(tuple((-(x + y)) % 3 for x, y in zip(a, b)) in members
                   for a, b in itertools.combinations(vectors, 2))


def max_cap_size(n: int) -> int:
    """Exhaustive branch and bound over caps containing 0 (a translate of any cap does)."""
    V = list(itertools.product(range(3), repeat=n))
    idx = {v: i for i, v in enumerate(V)}
    third = [[idx[tuple((-(a + b)) % 3 for a, b in zip(u, w))] for w in V] for u in V]
    best = 0

    def grow(cap, cand):
        nonlocal best
        best = max(best, len(cap))
        while cand:
            if len(cap) + bin(cand).count("1") <= best:
                return
            i = (cand & -cand).bit_length() - 1
            cand &= ~(1 << i)
            blocked = 0
            for j in cap:
                blocked |= 1 << third[i][j]
            grow(cap + [i], cand & ~blocked)

    grow([0], ((1 << len(V)) - 1) & ~1)
    return best


@pytest.fixture(scope="module")
def tasks():
    return {n: load_task(f"cap_set_{n}") for n in NS}


def run(task, code: str):
    return Evaluator(task, workers=1, timeout_s=30).evaluate(code)


# ---- the verifier against independent checks ------------------------------------------------

def test_every_subset_of_z3_squared_matches_brute_force_and_the_maximum_is_4():
    points = list(itertools.product(range(3), repeat=2))
    sizes = []
    for mask in range(1, 1 << 9):
        subset = [p for i, p in enumerate(points) if mask >> i & 1]
        cap = is_cap_brute_force(subset)
        verdict = verify_cap_set(as_lists(subset), 2)
        assert verdict.valid == cap, subset
        if cap:
            assert verdict.reward == len(subset)
            sizes.append(len(subset))
        else:
            assert verdict.reward == 0 and "form a line" in verdict.feedback
    assert max(sizes) == 4 == max_cap_size(2)  # Figure 3 of the paper: a 4-cap in Z_3^2
    # C(9, 4) = 126 sets of 4 points; 12 lines, each in 6 of them (two lines span at least 5 points): 126 - 72
    assert sum(1 for s in sizes if s == 4) == 54


def test_the_largest_cap_in_z3_cubed_has_9_vectors():
    assert max_cap_size(3) == 9 == BEST_KNOWN[3]
    # the paraboloid z = x^2 + y^2 (-1 is not a square mod 3, so no three of its points are collinear)
    paraboloid = [(x, y, (x * x + y * y) % 3) for x in range(3) for y in range(3)]
    assert is_cap_brute_force(paraboloid)
    assert verify_cap_set(as_lists(paraboloid), 3).reward == 9
    for extra in set(itertools.product(range(3), repeat=3)) - set(paraboloid):  # 9 is the maximum: all 18 fail
        assert not is_cap_brute_force(paraboloid + [extra])
        assert not verify_cap_set(as_lists(paraboloid + [extra]), 3).valid


@pytest.mark.parametrize("n", [3, 4])
def test_random_sets_match_brute_force(n):
    rng = random.Random(n)
    points = list(itertools.product(range(3), repeat=n))
    outcomes = []
    for trial in range(300):
        if trial % 2:  # a random subset: small ones are often caps, large ones rarely
            subset = rng.sample(points, rng.randint(1, 12 if n == 3 else 22))
        else:  # a random maximal cap by greedy (brute-force checks), sometimes plus one more vector
            subset = []
            for p in rng.sample(points, len(points)):
                if is_cap_by_pairs(subset + [p]):
                    subset.append(p)
            if trial % 4 == 0:
                subset.insert(rng.randint(0, len(subset)), rng.choice(sorted(set(points) - set(subset))))
        cap = is_cap_brute_force(subset)
        verdict = verify_cap_set(as_lists(subset), n)
        assert verdict.valid == cap and verdict.reward == (len(subset) if cap else 0), subset
        if not cap:  # the line named is a real one: three distinct vectors summing to 0 mod 3
            i, j, k = find_line(np.array(subset) @ powers(n), n)
            assert len({i, j, k}) == 3 and all((subset[i][c] + subset[j][c] + subset[k][c]) % 3 == 0 for c in range(n))
        outcomes.append(cap)
    assert 60 < sum(outcomes) < 240  # both answers occur often


def test_a_20_cap_in_z3_to_the_4_is_the_best_known_and_complete(tasks):
    assert len(set(CAP_20)) == 20 and is_cap_brute_force(CAP_20)
    verdict = tasks[4].verify(as_lists(CAP_20))
    assert verdict.valid and verdict.reward == 20 == tasks[4].best_known
    assert verdict.metrics == {"size": 20.0, "fraction_of_best_known": 1.0}
    for extra in set(itertools.product(range(3), repeat=4)) - set(CAP_20):  # no vector can be added
        assert not tasks[4].verify(as_lists(CAP_20 + [extra])).valid


def test_funsearch_512_cap_figure_4c(tasks):
    cap = build_512_cap()
    assert len(cap) == 512 and is_cap_by_pairs(cap)
    verdict = tasks[8].verify(as_lists(cap))
    assert verdict.valid and verdict.reward == 512 == tasks[8].best_known
    assert "512 vectors in Z_3^8" in verdict.feedback and "previously 496" in verdict.feedback


def test_maximal_inputs_at_n_8(tasks):
    everything = as_lists(itertools.product(range(3), repeat=8))
    verdict = tasks[8].verify(everything)  # all 6561 vectors: full of lines
    assert not verdict.valid and "form a line" in verdict.feedback
    cap = build_512_cap()
    rest = sorted(set(itertools.product(range(3), repeat=8)) - set(cap))
    worst = tasks[8].verify(as_lists(cap + rest))  # a line appears only after 512 rows of pairs
    assert not worst.valid and "form a line" in worst.feedback


# ---- hostile artefacts -------------------------------------------------------------------------

BAD = [
    (as_lists(CAP_20 + [CAP_20[3]]), "1 repeated vector(s): vector 20 (0, 0, 2, 2) repeats vector 3"),
    (as_lists(CAP_20 + [(1, 1, 1, 1)]), "form a line"),
    (as_lists(CAP_20[:5]) + [[0, 1, 3, 1]], "vector 5 has entry 3 at position 2; entries must be 0, 1 or 2"),
    ([[0, 0, 0, -1]] + as_lists(CAP_20[1:]), "vector 0 has entry -1 at position 3"),
    ([[0, 0, 0, 10**40]], "vector 0 has entry a huge integer"),
    (as_lists(CAP_20[:3]) + [[0, 1, 1, 1, 0]], "vector 3 is a list of length 5, not a list of 4 integers"),
    ([[0, 0, 0]], "vector 0 is a list of length 3"),
    ([[0, 0, 1.0, 0]], "vector 0 has entry 1.0 (float) at position 2, not an integer"),
    ([[0, True, 0, 0]], "vector 0 has entry True (bool) at position 1, not an integer"),
    ([[0, "1", 0, 0]], "entry '1' (str)"),
    ([[0, None, 0, 0]], "entry None (NoneType)"),
    ([[0, 0, 0, 0], 5], "vector 1 is 5 (int), not a list of 4 integers"),
    ([[[0, 0, 0, 0]]], "vector 0 is a list of length 1"),
    ({"cap": as_lists(CAP_20), "size": 999}, "got dict, not a list of vectors"),
    (None, "got NoneType, not a list"),
    ([], "the set is empty"),
    ([[0, 0, 0, 0]] * 82, "got 82 vectors, but Z_3^4 has only 81"),
]


@pytest.mark.parametrize("bad, why", BAD)
def test_invalid_artefacts(tasks, bad, why):
    verdict = tasks[4].verify(bad)
    assert not verdict.valid and verdict.reward == 0 and why in verdict.feedback, verdict.feedback


def test_a_hidden_duplicate_in_a_large_set(tasks):
    cap = as_lists(build_512_cap())
    cap.insert(300, list(cap[17]))
    verdict = tasks[8].verify(cap)
    assert not verdict.valid and "vector 300" in verdict.feedback and "repeats vector 17" in verdict.feedback


# ---- through the real sandbox --------------------------------------------------------------

def test_task_files(tasks):
    for n, task in tasks.items():
        assert task.best_known == BEST_KNOWN[n] and "FunSearch" in task.best_known_source
        assert task.entry_function == "priority" and task.run_entry == f"helix_cap_set_{n}"
        assert "# EVOLVE-BLOCK-START" in task.initial_program and "# EVOLVE-BLOCK-END" in task.initial_program
        assert f"Z_3^{n}" in task.description and "seconds" not in task.description
    assert [BEST_KNOWN[n] for n in NS] == [20, 45, 112, 236, 512]


@pytest.mark.parametrize("n", NS)
def test_starter_through_the_sandbox(tasks, n):
    # constant priority: greedy in itertools.product order takes exactly {0, 1}^n (a cap: a coordinate
    # of three distinct 0/1 vectors summing to 0 mod 3 must be 0+0+0 or 1+1+1, so they cannot differ)
    result = run(tasks[n], tasks[n].initial_program)
    assert result.valid and result.reward == 2**n, result.feedback
    assert is_cap_brute_force(list(itertools.product(range(2), repeat=min(n, 5))))


def test_funsearch_priority_gives_its_512_cap_through_the_sandbox(tasks):
    """Figure 4b's priority with the harness builds exactly Figure 4c's 512-cap: the harness is
    FunSearch's skeleton (tie order included)."""
    task = tasks[8]
    code = "import numpy as np\n" + FUNSEARCH_PRIORITY
    out = run_program(code, task.run_entry, 30, task.memory_mb, harness=task.harness)
    assert out.status == "ok", out.error
    assert len(out.value) == 512 and set(map(tuple, out.value)) == set(build_512_cap())
    result = run(task, code)
    assert result.valid and result.reward == 512 == task.best_known, result.feedback


def test_a_priority_that_lists_a_known_cap_first_gets_exactly_its_size(tasks):
    code = f"CAP = {CAP_20!r}\n\ndef priority(element, n):\n    return 1.0 if element in CAP else 0.0\n"
    result = run(tasks[4], code)
    assert result.valid and result.reward == 20, result.feedback
    # numpy scalars, ints and bools are numbers; -inf means never added
    code = ("import numpy as np\n\ndef priority(element, n):\n"
            "    return np.float32(sum(element)) if element[0] else -np.inf\n")
    out = run_program(code, tasks[4].run_entry, 30, tasks[4].memory_mb, harness=tasks[4].harness)
    assert out.status == "ok" and out.value and all(v[0] != 0 for v in out.value), out.value
    assert out.value[0] == [2, 2, 2, 2] and is_cap_brute_force(out.value)  # the highest priority comes first
    result = run(tasks[4], code)
    assert result.valid and result.reward == len(out.value), result.feedback
    assert run(tasks[4], "def priority(element, n):\n    return element[0] == 1\n").valid


HOSTILE = [
    ("def priority(element, n):\n    raise RuntimeError('boom')\n", "raised RuntimeError: boom"),
    ("def priority(element, n):\n    return float('nan')\n", "returned NaN for element (0, 0, 0, 0)"),
    ("def priority(element, n):\n    return 'high'\n", "must return a number"),
    ("def priority(element, n):\n    return None\n", "must return a number"),
    ("def priority(element, n):\n    return [1.0, 2.0]\n", "must return a number"),
    ("def priority(element, n):\n    while True:\n        pass\n", "timeout"),
    ("def solve(n):\n    return 0\n", "does not define priority(element, n)"),
]


@pytest.mark.parametrize("code, why", HOSTILE)
def test_hostile_programs_through_the_sandbox(tasks, code, why):
    result = Evaluator(tasks[4], workers=1, timeout_s=3).evaluate(code)
    assert not result.valid and result.reward == 0 and why in result.feedback, result.feedback


def test_programs_that_fake_the_harness_or_break_it_earn_nothing_extra(tasks):
    # its own harness entry and a reported score: the trusted harness is defined after it and wins
    fake = ("def helix_cap_set_4():\n    return [[0, 0, 0, 0]] * 81\n\n"
            "def priority(element, n):\n    print('size 81')\n    return 0.0\n")
    result = run(tasks[4], fake)
    assert result.valid and result.reward == 16, result.feedback
    # patching numpy so that nothing is ever blocked: the harness returns all 81 vectors, full of lines
    broken = ("import numpy as np\n_zeros = np.zeros\n\n"
              "class _Never:\n    def __getitem__(self, key):\n        return False\n"
              "    def __setitem__(self, key, value):\n        pass\n\n"
              "np.zeros = lambda shape, dtype=float: _Never() if dtype is bool else _zeros(shape, dtype)\n\n"
              "def priority(element, n):\n    return 0.0\n")
    result = run(tasks[4], broken)
    assert not result.valid and result.reward == 0 and "form a line" in result.feedback, result.feedback
