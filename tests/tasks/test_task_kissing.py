"""kissing_number_11 (issue 53, item 3): the lemma's condition min |x - y| >= max |x| decided exactly, against
a brute force in integers, for integer and Z[sqrt 2] coordinates, including pairs that floats cannot tell
apart."""

import itertools
import random
import runpy
from decimal import Decimal, localcontext

import pytest

from tasks import load_task
from tasks.families.kissing.verify import z2_sign

TASK = load_task("kissing_number_11")
D11 = runpy.run_path(str(TASK.folder / "initial_program.py"))["run_kissing"]()


def exact_check(artefact):
    return TASK._verify.__globals__["check_exact"](artefact)


def lemma_holds(vectors) -> bool:
    """The condition by brute force: integer vectors, every pair against the largest squared norm."""
    norm = max(sum(x * x for x in v) for v in vectors)
    return all(sum((a - b) ** 2 for a, b in zip(u, v)) >= norm for u, v in itertools.combinations(vectors, 2))


def test_the_starter_is_d11_with_220_vectors():
    assert len(D11) == 220 and lemma_holds(D11)
    verdict = TASK.verify(D11)
    assert verdict.valid and verdict.reward == 220 < TASK.best_known
    # each root touches the 2 * 2 * (11 - 2) = 36 roots sharing one coordinate with the same sign there: 220 * 36 / 2
    assert verdict.metrics["touching_pairs"] == 220 * 36 / 2 and verdict.metrics["min_angle_deg"] == pytest.approx(60)
    assert exact_check(D11).status == "exact" and exact_check(D11).value == 220


def test_random_integer_sets_agree_with_the_brute_force():
    rng = random.Random(8)
    for _ in range(40):
        n = rng.randint(2, 14)
        vectors = [[rng.randint(-3, 3) for _ in range(11)] for _ in range(n)]
        if any(not any(v) for v in vectors):
            continue
        assert TASK.verify(vectors).valid == lemma_holds(vectors), vectors


def test_one_unit_too_close_is_refused_and_there_is_no_tolerance():
    """Adding 2 e_0 (squared norm 4) to D11 raises the bar to 4, which e_0 + e_1 and e_0 + e_2 (distance^2 2)
    miss; and a D11 root moved by one unit toward another is refused: no nudge passes the verifier."""
    verdict = TASK.verify(D11 + [[2] + [0] * 10])
    assert not verdict.valid and "break the lemma's condition" in verdict.feedback
    moved = [list(v) for v in D11]
    moved[0] = [1, 1, 1] + [0] * 8
    assert not TASK.verify(moved).valid and not lemma_holds(moved)


@pytest.mark.parametrize("short", [1, -1])
def test_pairs_floats_cannot_separate_are_decided_exactly(short):
    """x = (N, 0, 0), y = (1, -2^20, -2^20) with N = 2^40 + 1: |x - y|^2 = (N - 1)^2 + 2^41 = N^2 - 1, one
    below |x|^2 = N^2 (about 2^80), so the pair breaks the condition; with the 2^20 moved by one unit the
    distance exceeds N^2 and the set is valid. In floats the two cases are the same number."""
    n = 2**40 + 1
    y = [1, -(2**20), -(2**20)] if short == 1 else [1, -(2**20), -(2**20) - 1]
    vectors = [[n, 0, 0] + [0] * 8, y + [0] * 8]
    gap = sum((a - b) ** 2 for a, b in zip(vectors[0], vectors[1])) - n * n
    assert (gap < 0) == (short == 1) and abs(gap) < 2**22 and float(gap + n * n) == float(n * n)
    assert TASK.verify(vectors).valid == (short != 1) == lemma_holds(vectors)
    if short != 1:
        assert exact_check(vectors).status == "exact"


def decimal_lemma(vectors) -> bool:
    """The condition for [p, q] coordinates by brute force in 80-digit decimals (ties are exact integers there)."""
    with localcontext() as ctx:
        ctx.prec = 80
        root2 = Decimal(2).sqrt()
        points = [[Decimal(p) + Decimal(q) * root2 for p, q in v] for v in vectors]
        norm = max(sum(x * x for x in v) for v in points)
        return all(sum((a - b) ** 2 for a, b in zip(u, v)) >= norm - Decimal(10) ** -60
                   for u, v in itertools.combinations(points, 2))


def test_sqrt2_coordinates_agree_with_a_high_precision_brute_force():
    """Random sets with coordinates p + q sqrt(2), p and q in [-3, 3] on four axes: the verifier (floats, then
    integers for close pairs) and check_exact (integers only) agree with 80-digit decimals; about a third are valid."""
    rng = random.Random(6)
    valid = 0
    for _ in range(60):
        vectors = [[[rng.randint(-3, 3), rng.randint(-3, 3)] for _ in range(4)] + [[0, 0]] * 7 for _ in range(rng.randint(2, 6))]
        if any(all(c == [0, 0] for c in v) for v in vectors):
            continue
        want = decimal_lemma(vectors)
        assert TASK.verify(vectors).valid == want, vectors
        if want:
            valid += 1
            assert exact_check(vectors).status == "exact"
    assert valid >= 5


def test_z2_sign_against_high_precision():
    rng = random.Random(2)
    with localcontext() as ctx:
        ctx.prec = 80
        root2 = Decimal(2).sqrt()
        cases = [(rng.randint(-10**12, 10**12), rng.randint(-10**12, 10**12)) for _ in range(500)]
        cases += [(99, -70), (-99, 70), (577, -408), (-577, 408), (0, 0), (0, 5), (-3, 0), (665857, -470832)]
        for a, b in cases:
            value = Decimal(a) + Decimal(b) * root2
            assert z2_sign(a, b) == (value > 0) - (value < 0), (a, b)


@pytest.mark.parametrize("returned, words", [
    ([[0.5] + [0] * 10, [1] + [0] * 10], "not a whole number"),
    ([[True] + [0] * 10, [1] + [0] * 10], "not an integer"),
    ([[0] * 11, [1] + [0] * 10], "vector 0 is 0"),
    ([[1] * 10, [1] * 11], "must have 11 coordinates, got 10"),
    ([[2**60] + [0] * 10, [1] + [0] * 10], "61 bits"),
    ([[[1, 2, 3]] + [0] * 10, [1] + [0] * 10], "a pair [p, q]"),
    ([[1] + [0] * 10], "at least 2"),
    ([[1] + [0] * 10] * 1001, "over the limit of 1000"),
    ({"vecs": D11}, "lacks 'vectors'"),
])
def test_malformed_returns_get_one_line(returned, words):
    verdict = TASK.verify(returned)
    assert not verdict.valid and words in verdict.feedback and "\n" not in verdict.feedback, verdict.feedback


def test_whole_floats_count_as_integers_and_duplicates_coincide():
    as_floats = [[float(x) for x in v] for v in D11]
    assert TASK.verify(as_floats).reward == 220
    verdict = TASK.verify(D11 + [D11[0]])
    assert not verdict.valid and "vectors 0 and 220 coincide" in verdict.feedback
