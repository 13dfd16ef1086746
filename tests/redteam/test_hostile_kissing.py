"""Red team of kissing_number_11 (docs/reward_threats.md). The reward is a count, so the attack is one vector
too many: a set in which some pair is closer than the longest vector by a relative 1e-12, which any verifier
with a float tolerance would accept. The real check decides such pairs in integers and refuses the set with
one line; coordinates that are not exact numbers, absurd sizes and malformed vectors get one line too."""

import pytest

from tasks import load_task
from tests.helpers.hostile_verdicts import evaluate_quietly, verify_quietly

TASK = load_task("kissing_number_11")
K = 2**40


def d11(scale=1):
    """The starter's 220 roots +-e_i +-e_j, times ``scale``."""
    out = []
    for i in range(11):
        for j in range(i + 1, 11):
            for si in (1, -1):
                for sj in (1, -1):
                    v = [0] * 11
                    v[i], v[j] = si * scale, sj * scale
                    out.append(v)
    return out


def one_too_many():
    """D11 at scale 2^40 plus w = (2^39 + 1, 2^39, ..., 2^39, 0, 0, 0): half of (1, ..., 1) on 8 coordinates,
    whose inner product with every root is at most |root|^2 / 2, nudged by one unit. Its squared length
    2^81 + 2^40 + 1 is the largest, and 7 roots, (2^40, 2^40, 0, ...) among them, are 2^41 closer than
    that to it: a violation of 9e-13 relative. 221 vectors, one more than the starter."""
    w = [K // 2 + 1] + [K // 2] * 7 + [0] * 3
    return d11(K) + [w]


def test_one_vector_too_many_by_a_relative_1e_12_is_refused(capfd, caplog):
    vectors = one_too_many()
    norm = max(sum(x * x for x in v) for v in vectors)
    gaps = [sum((a - b) ** 2 for a, b in zip(vectors[-1], v)) - norm for v in vectors[:-1]]
    assert min(gaps) == -(2**41) and sum(g < 0 for g in gaps) == 7 and 2**41 / norm < 1e-12
    real = verify_quietly(TASK, vectors, capfd, caplog)
    assert not real.valid and "break the lemma's condition" in real.feedback
    through = evaluate_quietly(TASK, f"def run_kissing():\n    return {vectors!r}\n", capfd, caplog)
    assert not through.valid and through.reward == 0


def test_a_float_tolerance_would_have_paid_the_extra_vector(monkeypatch):
    """The same 221 vectors on the family's check with its integer decision replaced by 'touching'
    (a float verifier with any tolerance above 1e-12): accepted, a reward of 221 > 220."""
    import tasks.families.kissing.verify as kissing

    monkeypatch.setattr(kissing, "z2_sign", lambda a, b: 0)
    fooled = TASK.verify(one_too_many())
    assert fooled.valid and fooled.reward == 221


@pytest.mark.parametrize("vectors, words", [
    ([[0.5] * 11, [1] * 11], "not a whole number"),
    ([[float("nan")] * 11, [1] * 11], "not a whole number"),
    ([[1e308] * 11, [1] * 11], "bits, more than the 52 allowed"),
    ([[10**400] * 11, [1] * 11], "bits, more than the 52 allowed"),
    ([["1"] * 11, [1] * 11], "not an integer"),
    ([[None] * 11, [1] * 11], "not an integer"),
    ([[[1, True]] * 11, [1] * 11], "not an integer"),
    ([[1] * 11] * 1001, "over the limit of 1000"),
    ([[1] * 11, [[1, 0]] * 11], "coincide"),  # [p, 0] is p + 0 sqrt(2): the same vector twice
    ("vectors", "got str"),
])
def test_bad_values_get_one_line(vectors, words, capfd, caplog):
    verdict = verify_quietly(TASK, vectors, capfd, caplog)
    assert not verdict.valid and words in verdict.feedback, verdict.feedback
