"""Hostile programs and artefacts against the Dyck-path bijection reward (issue 31, items 2-3;
docs/reward_threats.md). Each test runs the real path and then a deliberately weakened verifier.

The reward measures whether the outputs form a bijection on n = 1..7, not whether they come from a
construction: a map that depends on the path alone but is a lookup table scores 1.0 (the README
says so; pinned below). What the verifier must stop is a "map" that is no function of the path at
all, such as a counter of calls, which the harness's fixed call order would otherwise pay 1.0."""

import pytest

from tasks import load_task
from tasks.families.dyck.verify import dyck_paths
from tests.helpers.dyck import BJS_PROGRAM, CATALAN, artefact, bjs, expected
from tests.helpers.hostile_verdicts import evaluate_quietly, verify_quietly, weakened

TASK = load_task("dyck_bijection")

AVOIDERS = '''
import itertools


def avoiders(n):
    """The 321-avoiding permutations of 1..n, in lexicographic order."""
    return [list(p) for p in itertools.permutations(range(1, n + 1))
            if not any(p[i] > p[j] > p[k] for i, j, k in itertools.combinations(range(n), 3))]
'''

# Hands out the k-th 321-avoiding permutation of [n] on its k-th call with a path of semilength n
# (starting again when they run out): no map at all, yet a bijection for the harness's first pass.
COUNTER = AVOIDERS + '''
QUEUES = {}


def dyck_to_perm(path):
    n = len(path) // 2
    if not QUEUES.get(n):
        QUEUES[n] = avoiders(n)
    return QUEUES[n].pop(0)
'''

# A seeded random 321-avoiding permutation per call: deterministic, but no function of the path.
RANDOM = AVOIDERS + '''
import random

RNG = random.Random(0)
CACHE = {}


def dyck_to_perm(path):
    n = len(path) // 2
    if n not in CACHE:
        CACHE[n] = avoiders(n)
    return RNG.choice(CACHE[n])
'''

# The same counter, memoised on the path: a lookup table built in call order. It is a function of
# the path and a bijection, so it scores 1.0: the reward cannot tell a table from a construction.
MEMO = COUNTER + '''
SEEN = {}
_counter = dyck_to_perm


def dyck_to_perm(path):
    if path not in SEEN:
        SEEN[path] = _counter(path)
    return SEEN[path]
'''

ONE_PASS = {"consistent": lambda outputs, again: (outputs, None)}  # the weakened verifier: no second look


def test_a_counter_of_calls_is_not_a_bijection(capfd, caplog):
    """Second pass (reverse order): path i of semilength n gets permutation C_n - 1 - i, so only
    the middle path of an odd C_n (n = 1, 3, 7) answers the same twice and keeps its output."""
    real = evaluate_quietly(TASK, COUNTER, capfd, caplog)
    per_n = [(1, 1, 1), (0, 0, 0), (1 / 5, 1 / 5, 1 / 5), (0, 0, 0), (0, 0, 0), (0, 0, 0), (1 / 429,) * 3]
    assert real.valid and real.reward == pytest.approx(expected(per_n), rel=1e-12), real.feedback
    assert ("dyck_to_perm('UUDD') gave [1, 2], then [2, 1] when called again: the output must depend on the path "
            "alone") in real.feedback
    fooled = evaluate_quietly(weakened("dyck_bijection", **ONE_PASS), COUNTER, capfd, caplog)
    assert fooled.valid and fooled.reward == 1.0 == TASK.best_known  # a "bijection" without any map


def test_a_random_map_is_not_paid_for_lucky_draws(capfd, caplog):
    real = evaluate_quietly(TASK, RANDOM, capfd, caplog)
    lucky = evaluate_quietly(weakened("dyck_bijection", **ONE_PASS), RANDOM, capfd, caplog)
    assert real.reward < 0.3 < 0.6 < lucky.reward < 1, (real.reward, lucky.reward)
    assert "when called again" in real.feedback


def test_a_lookup_table_built_in_call_order_scores_one(capfd, caplog):
    """The accepted limit (docs/tasks.md, docs/reward_threats.md): a function of the path that is a
    bijection scores 1.0, the best known, whatever it is built from; it cannot score more."""
    table = evaluate_quietly(TASK, MEMO, capfd, caplog)
    honest = evaluate_quietly(TASK, BJS_PROGRAM, capfd, caplog)
    assert table.reward == honest.reward == 1.0 == TASK.best_known


def test_an_artefact_that_differs_between_passes_loses_exactly_those_paths(capfd, caplog):
    returned = artefact(bjs)
    returned["again"][6][0] = bjs(dyck_paths(7)[1])  # one path of semilength 7 answers differently
    verdict = verify_quietly(TASK, returned, capfd, caplog)
    assert verdict.reward == pytest.approx(expected([(1, 1, 1)] * 6 + [(428 / 429,) * 3]), rel=1e-12)
    assert weakened("dyck_bijection", **ONE_PASS).verify(returned).reward == 1.0
    everything = artefact(bjs)
    everything["again"] = [[None] * c for c in CATALAN]
    gone = verify_quietly(TASK, everything, capfd, caplog)
    assert not gone.valid and "no path gave the same list of integers twice" in gone.feedback


def _set(key, n, i, value):
    def mutate(a):
        a[key][n][i] = value
    return mutate


HOSTILE = [
    ("int too large", _set("outputs", 2, 0, [10**400, 2, 3]), "holds an entry that is not an integer"),
    ("float NaN", _set("outputs", 2, 0, [float("nan"), 2, 3]), "holds an entry that is not an integer"),
    ("1e308", _set("again", 2, 0, [1e308, 2, 3]), "'again': output 0 of block 3 holds an entry"),
    ("boolean", _set("outputs", 1, 0, [True, 2]), "holds an entry that is not an integer"),
    ("negative zero", _set("outputs", 1, 0, [-0.0, 2]), "holds an entry that is not an integer"),
    ("string", _set("again", 0, 0, "1"), "'again': output 0 of block 1 is neither null nor a list"),
    ("dict block", lambda a: a["outputs"].__setitem__(3, {"UUDD": [1, 2]}), "block 4 must hold 14 outputs"),
    ("no second pass", lambda a: a.pop("again"), "'again' must hold 7 blocks (semilengths 1..7), got NoneType"),
]


@pytest.mark.parametrize("name, mutate, words", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_bad_values_get_one_clear_line(name, mutate, words, capfd, caplog):
    returned = artefact(bjs)
    mutate(returned)
    verdict = verify_quietly(TASK, returned, capfd, caplog)
    assert not verdict.valid and words in verdict.feedback, verdict.feedback
    # without the shape check the same artefact is scored as if it were a map, or crashes the verifier
    weak = weakened("dyck_bijection", _malformed=lambda blocks, key="outputs": None).verify(returned)
    assert weak.valid or "the verifier could not check the result" in weak.feedback, weak
