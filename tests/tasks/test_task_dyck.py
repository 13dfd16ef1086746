"""The Dyck path -> 321-avoiding permutation bijection task (OpenEvolve bijection paper, Section 3.2).

Enumerations and the 321 check are compared with brute force and the Catalan numbers; a known
bijection (Billey-Jockusch-Stanley, written here from the paper's Appendix A, independently of
tasks/families/dyck/verify.py) scores exactly 1 through the verifier and through the real sandbox; the starter,
partial maps and hostile programs and artefacts get rewards computed here by hand."""

import itertools
import math
from pathlib import Path

import pytest

from rewards import Evaluator
from tasks import load_task
from tasks.families.dyck.verify import MAX_LEN, N_MAX, all_paths, catalan, dyck_paths, is_permutation, pattern_321, problem
from tests.helpers.dyck import BJS_PROGRAM, CATALAN, artefact, bjs, brute_force_paths, expected

HARNESS = Path(__file__).resolve().parents[2] / "tasks" / "families" / "dyck" / "harness.py"


@pytest.fixture(scope="module")
def task():
    return load_task("dyck_bijection")


def run(task, body: str, timeout_s: float = 30):
    return Evaluator(task, workers=1, timeout_s=timeout_s).evaluate(body)


def contains_321_brute(perm):
    return any(perm[i] > perm[j] > perm[k] for i, j, k in itertools.combinations(range(len(perm)), 3))


def avoiders(n):
    return {p for p in itertools.permutations(range(1, n + 1)) if not contains_321_brute(p)}


# ---- enumeration and the 321 check ------------------------------------------------------------

def test_catalan_numbers_and_path_enumeration_match_brute_force():
    assert [catalan(n) for n in range(1, 8)] == CATALAN
    assert [math.comb(2 * n, n) // (n + 1) for n in range(1, 8)] == CATALAN
    for n in range(1, N_MAX + 1):
        assert dyck_paths(n) == brute_force_paths(n)  # same paths, same order
    assert all_paths() == [brute_force_paths(n) for n in range(1, 8)]
    assert sum(map(len, all_paths())) == 625
    assert dyck_paths(3) == ["UUUDDD", "UUDUDD", "UUDDUD", "UDUUDD", "UDUDUD"]


def test_the_harness_enumerates_the_same_paths_in_the_same_order():
    namespace = {}
    exec(compile(HARNESS.read_text(), str(HARNESS), "exec"), namespace)  # trusted code, read as text: self-contained
    assert "from tasks" not in HARNESS.read_text() and "import tasks" not in HARNESS.read_text()
    harness_paths = [namespace["_helix_dyck_paths"](n) for n in range(1, N_MAX + 1)]
    assert harness_paths == [brute_force_paths(n) for n in range(1, 8)]
    assert namespace["_HELIX_N_MAX"] == N_MAX and namespace["_HELIX_MAX_LEN"] == MAX_LEN


def test_321_check_against_brute_force_and_catalan_counts():
    for n in range(1, 7):
        count = 0
        for perm in itertools.permutations(range(1, n + 1)):
            found = pattern_321(perm)
            assert (found is not None) == contains_321_brute(perm), perm
            if found is not None:
                a, b, c = found
                assert a > b > c and perm.index(a) < perm.index(b) < perm.index(c)
            assert (problem(list(perm), n) is None) == (found is None)
            count += found is None
        assert count == CATALAN[n - 1]
    assert pattern_321([3, 2, 1]) == (3, 2, 1) and pattern_321([2, 4, 1, 3]) is None
    assert pattern_321([1, 4, 3, 5, 2]) == (4, 3, 2)


def test_problem_names_what_is_wrong():
    assert problem([2, 1, 3], 3) is None
    assert "3 entries, not 4" in problem([1, 2, 3], 4)
    assert "repeats 1" in problem([1, 1, 2], 3)
    assert "not a permutation of 1..3" in problem([0, 1, 2], 3)
    assert "contains the pattern 321 (3, 2, 1)" in problem([3, 2, 1], 3)
    assert "no permutation" in problem(None, 2)
    assert is_permutation([3, 1, 2], 3) and not is_permutation([1, 2, 4], 3)


# ---- the known bijection scores 1 ---------------------------------------------------------------

def test_bjs_is_a_bijection_by_brute_force():
    assert bjs("UDUD") == [2, 1] and bjs("UUDD") == [1, 2] and bjs("UDUDUD") == [2, 3, 1]
    for n in range(1, N_MAX + 1):
        images = [tuple(bjs(p)) for p in brute_force_paths(n)]
        assert len(set(images)) == len(images) == CATALAN[n - 1]
        assert set(images) == avoiders(n)


def test_bjs_scores_exactly_one_through_the_verifier(task):
    verdict = task.verify(artefact(bjs))
    assert verdict.valid and verdict.reward == 1.0 == task.best_known
    assert verdict.metrics == {"validity": 1.0, "injectivity": 1.0, "surjectivity": 1.0, "n_bijective": 7.0,
                               "surjectivity_n7": 1.0}
    assert "a bijection for 7 of 7 semilengths" in verdict.feedback


def test_bjs_scores_exactly_one_through_the_sandbox(task):
    result = run(task, BJS_PROGRAM)
    assert result.status == "ok" and result.valid and result.reward == 1.0, result


def test_outputs_are_paired_by_position_not_by_any_claim(task):
    """Reversing each block is a different map (path i gets the output of path C_n - 1 - i); it is
    still a bijection, so it still scores 1: the verifier only looks at positions."""
    outputs = [block[::-1] for block in artefact(bjs)["outputs"]]
    assert task.verify({"outputs": outputs, "again": outputs}).reward == 1.0
    keyed = [{p: bjs(p) for p in brute_force_paths(n)} for n in range(1, 8)]
    assert not task.verify({"outputs": keyed, "again": keyed}).valid


# ---- the starter and partial maps -----------------------------------------------------------------

def test_starter_is_the_identity_and_scores_its_hand_computed_value(task):
    value = expected([(1, 1 / c, 1 / c) for c in CATALAN])  # valid; one distinct output per n
    assert value == pytest.approx(0.50525189, abs=1e-8)
    assert task.verify(artefact(lambda p: list(range(1, len(p) // 2 + 1)))).reward == pytest.approx(value, rel=1e-12)
    result = run(task, task.initial_program)
    assert result.valid and result.reward == pytest.approx(value, rel=1e-12)
    assert "# EVOLVE-BLOCK-START" in task.initial_program and "# EVOLVE-BLOCK-END" in task.initial_program
    assert "dyck_to_perm('UUDD') and dyck_to_perm('UDUD') both give [1, 2]: not injective" in result.feedback
    assert result.feedback.startswith("mean over n=1..7: validity 1.0000, injectivity 0.2579, surjectivity 0.2579")


def test_one_collision_at_n7(task):
    paths7 = brute_force_paths(7)

    def almost(p):
        return bjs(paths7[0]) if p == paths7[-1] else bjs(p)

    verdict = task.verify(artefact(almost))
    assert verdict.reward == pytest.approx(expected([(1, 1, 1)] * 6 + [(1, 428 / 429, 428 / 429)]), rel=1e-12)
    assert verdict.reward < 1 and verdict.metrics["n_bijective"] == 6
    assert f"dyck_to_perm('{paths7[0]}') and dyck_to_perm('{paths7[-1]}') both give" in verdict.feedback


def test_injective_outputs_outside_the_target_count_for_injectivity_only(task):
    """The paper's injectivity counts distinct outputs whatever they are; validity and
    surjectivity count only 321-avoiding permutations of [n]. 0-based positions of the U steps are
    distinct per path and never a permutation of 1..n: 0 + 1 + 0 for every n."""
    verdict = task.verify(artefact(lambda p: [i for i, c in enumerate(p) if c == "U"]))
    assert verdict.valid and verdict.reward == pytest.approx(1 / 3, rel=1e-12)
    m = verdict.metrics
    assert m["validity"] == 0 and m["injectivity"] == 1 and m["surjectivity"] == 0


def test_reversed_identity(task):
    """[n, ..., 1]: valid for n = 1, 2 (21 avoids 321), contains 321 from n = 3; one output per n."""
    per_n = [(1, 1, 1), (1, 1 / 2, 1 / 2)] + [(0, 1 / c, 0) for c in CATALAN[2:]]
    verdict = task.verify(artefact(lambda p: list(range(len(p) // 2, 0, -1))))
    assert verdict.reward == pytest.approx(expected(per_n), rel=1e-12)
    assert "n=2: 2/2 valid, 1 distinct, 1/2 hit" in verdict.feedback


# ---- hostile programs, through the sandbox -----------------------------------------------------

def test_not_permutations_duplicates_and_wrong_length(task):
    ones = run(task, "def dyck_to_perm(path):\n    return [1] * (len(path) // 2)\n")
    # n = 1: [1] is right; n >= 2: invalid, one distinct output
    want = expected([(1, 1, 1)] + [(0, 1 / c, 0) for c in CATALAN[1:]])
    assert ones.valid and ones.reward == pytest.approx(want, rel=1e-12)
    assert "dyck_to_perm('UUDD') = [1, 1] repeats 1: not a permutation of 1..2" in ones.feedback
    longer = run(task, "def dyck_to_perm(path):\n    return list(range(1, len(path) // 2 + 2))\n")
    assert longer.valid and longer.reward == pytest.approx(expected([(0, 1 / c, 0) for c in CATALAN]), rel=1e-12)
    assert "dyck_to_perm('UD') = [1, 2] has 2 entries, not 1" in longer.feedback


def test_strings_floats_and_nothing_are_no_output(task):
    strings = run(task, "def dyck_to_perm(path):\n    return path\n")
    assert not strings.valid and strings.reward == 0
    assert "no path gave a list of integers" in strings.feedback and "returned str" in strings.feedback
    floats = run(task, "def dyck_to_perm(path):\n    return [float(i) for i in range(1, len(path) // 2 + 1)]\n")
    assert not floats.valid and floats.reward == 0 and "not an integer" in floats.feedback
    as_array = BJS_PROGRAM.replace("return [p or next(rest) for p in perm[1:]]",
                                   "return np.array([p or next(rest) for p in perm[1:]])")
    numpy_ok = run(task, "import numpy as np\n" + as_array)
    assert numpy_ok.valid and numpy_ok.reward == 1.0  # numpy integers are integers


def test_a_function_that_raises_for_some_paths(task):
    raising = "    n = len(path) // 2\n    if path == 'UDUUDD':\n        raise ValueError('no idea')\n"
    program = BJS_PROGRAM.replace("    n = len(path) // 2\n", raising, 1)
    result = run(task, program)
    want = expected([(1, 1, 1)] * 2 + [(0.8, 0.8, 0.8)] + [(1, 1, 1)] * 4)  # n = 3: 4 of 5 paths
    assert result.valid and result.reward == pytest.approx(want, rel=1e-12)
    assert ("dyck_to_perm('UDUUDD') gave no permutation: dyck_to_perm('UDUUDD') raised ValueError: no idea"
            in result.feedback)


def test_a_program_cannot_claim_a_score(task):
    """The harness's definitions come after the program's, so a forged entry point is never called;
    extra keys in an artefact are ignored."""
    forged = task.initial_program + '''

def helix_map_all_paths():
    return {"reward": 1.0, "validity": 1.0, "injectivity": 1.0, "surjectivity": 1.0, "outputs": "perfect"}
'''
    result = run(task, forged)
    starter = expected([(1, 1 / c, 1 / c) for c in CATALAN])
    assert result.valid and result.reward == pytest.approx(starter, rel=1e-12)
    claim = artefact(lambda p: list(range(1, len(p) // 2 + 1)))
    claim |= {"reward": 1.0, "injectivity": 1.0, "surjectivity": 1.0}
    assert task.verify(claim).reward == pytest.approx(starter, rel=1e-12)


def test_a_program_that_patches_the_harness_gets_a_malformed_result(task):
    """Patching the harness at call time only changes the artefact, which is checked: here, on the
    very last call (path 'UD' of the reversed second pass), the harness's own list of second
    outputs loses its last block's last entry."""
    program = '''
import sys


def dyck_to_perm(path):
    harness = sys._getframe(1).f_locals
    if path == "UD" and harness.get("into") is harness.get("again"):
        harness["again"][-1].pop()
    return list(range(1, len(path) // 2 + 1))
'''
    result = run(task, program)
    assert not result.valid and result.reward == 0
    assert "'again': block 7 must hold 429 outputs (one per Dyck path of semilength 7), got 428" in result.feedback


# ---- hostile artefacts, straight to the verifier ----------------------------------------------------

@pytest.mark.parametrize("mutate, message", [
    (lambda a: a["outputs"].pop(), "must hold 7 blocks"),
    (lambda a: a["outputs"][6].pop(), "block 7 must hold 429 outputs"),
    (lambda a: a["outputs"][3].append([1, 2, 3, 4]), "block 4 must hold 14 outputs"),
    (lambda a: a["outputs"][2].__setitem__(0, "123"), "output 0 of block 3 is neither null nor a list"),
    (lambda a: a["outputs"][2].__setitem__(1, [1.0, 2.0, 3.0]), "output 1 of block 3 holds an entry that is not an int"),
    (lambda a: a["outputs"][2].__setitem__(1, [True, 2, 3]), "output 1 of block 3 holds an entry"),
    (lambda a: a["outputs"][2].__setitem__(1, [[1], [2], [3]]), "output 1 of block 3 holds an entry"),
    (lambda a: a["outputs"][2].__setitem__(1, [10**12, 2, 3]), "output 1 of block 3 holds an entry"),
    (lambda a: a["outputs"][0].__setitem__(0, list(range(MAX_LEN + 1))), "output 0 of block 1 is neither null"),
    (lambda a: a.__setitem__("outputs", {"1": []}), "must hold 7 blocks"),
    (lambda a: a.pop("outputs"), "must be a dict with 'outputs'"),
    (lambda a: a.pop("again"), "'again' must hold 7 blocks"),
    (lambda a: a["again"][4].pop(), "'again': block 5 must hold 42 outputs"),
    (lambda a: a["again"][2].__setitem__(1, [1.0, 2.0, 3.0]), "'again': output 1 of block 3 holds an entry"),
])
def test_malformed_artefacts_are_rejected(task, mutate, message):
    returned = artefact(bjs)
    mutate(returned)
    verdict = task.verify(returned)
    assert not verdict.valid and verdict.reward == 0 and message in verdict.feedback, verdict.feedback


@pytest.mark.parametrize("returned", [None, 1.0, "1.0", [], [[1]], {"reward": 1.0}])
def test_non_dict_artefacts_are_rejected(task, returned):
    verdict = task.verify(returned)
    assert not verdict.valid and verdict.reward == 0


def test_untrusted_problem_text_is_shown_truncated(task):
    returned = artefact(bjs)
    returned["outputs"][1][0] = returned["again"][1][0] = None
    returned["first_problem"] = "x" * 10_000
    verdict = task.verify(returned)
    assert verdict.valid and "gave no permutation: " + "x" * 200 in verdict.feedback
    assert "x" * 201 not in verdict.feedback
    assert verdict.reward == pytest.approx(expected([(1, 1, 1), (0.5, 0.5, 0.5)] + [(1, 1, 1)] * 5), rel=1e-12)
