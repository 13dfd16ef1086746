"""Hostile programs and artefacts against the cap-set reward (issue 31, items 2-3;
docs/reward_threats.md). Each test runs the real path and then a deliberately weakened verifier.

The artefact is the set itself, re-checked from scratch, so a program that bypasses or forges the
greedy harness gains nothing unless it has a real cap set (which is then a real result). What
must hold is the check: every line, in the right sign, over every pair."""

import itertools

import numpy as np
import pytest

import tasks.families.cap_set.verify as cs
from tasks import load_task
from tests.helpers.cap_set import CAP_20, as_lists
from tests.helpers.hostile_verdicts import evaluate_quietly, verify_quietly

TASKS = {n: load_task(f"cap_set_{n}") for n in (4, 8)}


def hyperplane(n):
    """All 3^(n-1) vectors with first coordinate 1: an affine subspace, full of lines
    (a + b + c has first coordinate 3 = 0), but no vector is the sum a + b of two others."""
    return [[1, *rest] for rest in itertools.product(range(3), repeat=n - 1)]


def sign_bug_table(m):
    """The weakened verifier: third point a + b instead of -(a + b) (a line is a + b + c = 0)."""
    if m == 0:
        return np.zeros((1, 1), dtype=np.int64)
    digits = (np.arange(3**m)[:, None] // cs.powers(m)[None, :]) % 3
    return ((digits[:, None, :] + digits[None, :, :]) % 3) @ cs.powers(m)


def with_sign_bug(monkeypatch):
    monkeypatch.setattr(cs, "_third_table", sign_bug_table)
    monkeypatch.setattr(cs, "_TABLES", {})  # the tables are cached per half-dimension


@pytest.mark.parametrize("n", [4, 8])
def test_an_affine_hyperplane_is_not_a_cap(n, capfd, caplog, monkeypatch):
    """27 vectors at n = 4 (the proven maximum is 20), 2187 at n = 8 (the record is 512)."""
    plane = hyperplane(n)
    real = verify_quietly(TASKS[n], plane, capfd, caplog)
    assert not real.valid and "form a line (they sum to 0 mod 3)" in real.feedback, real.feedback
    with monkeypatch.context() as m:
        with_sign_bug(m)
        fooled = TASKS[n].verify(plane)
    assert fooled.valid and fooled.reward == 3 ** (n - 1) > TASKS[n].best_known


# The program disables the harness's blocking (numpy.zeros of booleans becomes an array that never
# says blocked) and ranks only the hyperplane x_1 = 1: the harness returns all 27 of its vectors.
UNBLOCKED = '''
import numpy as np

_zeros = np.zeros


class _Never:
    def __getitem__(self, key):
        return False

    def __setitem__(self, key, value):
        pass


np.zeros = lambda shape, dtype=float: _Never() if dtype is bool else _zeros(shape, dtype)


def priority(element, n):
    return 1.0 if element[0] == 1 else -np.inf
'''


def test_a_harness_forced_to_return_a_hyperplane(capfd, caplog, monkeypatch):
    task = TASKS[4]
    real = evaluate_quietly(task, UNBLOCKED, capfd, caplog)
    assert not real.valid and real.reward == 0 and "form a line" in real.feedback, real.feedback
    with monkeypatch.context() as m:
        with_sign_bug(m)
        fooled = evaluate_quietly(task, UNBLOCKED, capfd, caplog)
    assert fooled.valid and fooled.reward == 27  # what the patched harness returns, paid by the sign bug


def test_duplicates_are_caught_twice(capfd, caplog, monkeypatch):
    """A repeated vector is named by the repeat check; without it, the line check still sees
    v + v + v = 0 (two copies and the third point v), so no duplicate can ever pad the size."""
    padded = as_lists(CAP_20) + as_lists(CAP_20[:5])
    real = verify_quietly(TASKS[4], padded, capfd, caplog)
    assert not real.valid and "5 repeated vector(s)" in real.feedback
    with monkeypatch.context() as m:
        m.setattr(np, "unique", _all_distinct)  # the repeat check sees no repeat
        without = TASKS[4].verify(padded)
        assert not without.valid and "form a line" in without.feedback, without.feedback
        m.setattr(cs, "find_line", lambda codes, n: None)
        assert TASKS[4].verify(padded).reward == 25 > TASKS[4].best_known  # both checks gone: paid


def _all_distinct(codes, return_index=False, return_inverse=False):
    index = np.arange(len(codes))
    return codes, index, index


HOSTILE = [
    ("1e308", [[0, 0, 1e308, 0]], "entry 1e+308 (float) at position 2, not an integer"),
    ("NaN", [[0, float("nan"), 0, 0]], "entry nan (float) at position 1"),
    ("negative zero", [[0, 0, -0.0, 0]], "entry -0.0 (float) at position 2"),
    ("int too large", [[0, 0, 0, 10**400]], "vector 0 has entry a huge integer at position 3"),
    ("numeric string", [[0, "1", 0, 0]], "entry '1' (str)"),
    ("boolean", [[0, True, 0, 0]], "entry True (bool)"),
    ("nested", [[[0], 0, 0, 0]], "entry [0] (list)"),
    ("3, an alias of 0", [[0, 0, 0, 3]], "vector 0 has entry 3 at position 3; entries must be 0, 1 or 2"),
    ("-1, an alias of 2", [[0, 0, 0, -1], [0, 0, 0, 2]], "vector 0 has entry -1 at position 3"),
]


@pytest.mark.parametrize("name, artefact, words", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_bad_values_get_one_clear_line(name, artefact, words, capfd, caplog, monkeypatch):
    verdict = verify_quietly(TASKS[4], artefact, capfd, caplog)
    assert not verdict.valid and words in verdict.feedback, verdict.feedback
    monkeypatch.setattr(cs, "shape_problem", lambda returned, n: None)
    weak = TASKS[4].verify(artefact)  # without the shape check: paid as if vectors, or a crash
    assert weak.valid or "the verifier could not check the result" in weak.feedback, weak
