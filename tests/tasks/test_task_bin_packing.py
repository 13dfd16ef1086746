"""Online bin packing (FunSearch, paper 001, section 2.2 and Table 1): bin_packing_or, bin_packing_weibull.

The L2 bound (tasks/families/bin_packing/verify.py) is checked against hand-computed examples, against a literal
transcription of Martello & Toth's definition over a fine grid of alpha, and against
L1 <= L2 <= OPT with OPT found by exhaustive search on small instances. First fit and best fit are
implemented here from their textbook definitions (bins opened on demand, not the harness's
pre-opened ones); the assignments the harness builds in the real sandbox with the corresponding
priority functions must equal them item for item, and the verifier's excess must equal the one
computed here. Hostile artefacts go to the verifier directly, hostile programs through the sandbox
(the online driver's own defences: tests/tasks/test_bin_packing_online*.py and tests/redteam/test_bin_packing_online_redteam.py).

Generated instances here vs FunSearch's Table 1 (excess over L2, %):
  first fit  OR1-OR4 7.05 / 6.02 / 5.48 / 5.15 (paper 6.42 / 6.45 / 5.74 / 5.23), Weibull 5k 4.53 (4.23)
  best fit   OR1-OR4 6.38 / 5.63 / 5.18 / 4.70 (paper 5.81 / 6.06 / 5.37 / 4.94), Weibull 5k 4.17 (3.98)
(OR1 and Weibull 5k each hold one more instance of 120 items on which L2 > L1: tasks/families/bin_packing/data.py.)
"""

import json
import math
import random

import numpy as np
import pytest

import tasks.families.bin_packing.verify as tasks_bin_packing
from rewards import Evaluator
from rewards.sandbox import run_program
from tasks import load_task
from tasks.base import MAX_DATA_BYTES
from tasks.families.bin_packing.data import generate, read
from tasks.families.bin_packing.verify import PUBLISHED, Instances, l1_bound, l2_bound, reward_of

TASKS = ("bin_packing_or", "bin_packing_weibull")

FIRST_FIT = "import numpy as np\n\ndef priority(item, bins):\n    return np.zeros_like(bins)\n"

# FunSearch's heuristic for the Weibull datasets, from its released bin_packing notebook (Apache 2.0).
FUNSEARCH_WEIBULL = '''import numpy as np

def priority(item, bins):
    max_bin_cap = max(bins)
    score = (bins - max_bin_cap)**2 / item + bins**2 / (item**2)
    score += bins**2 / item**3
    score[bins > item] = -score[bins > item]
    score[1:] -= score[:-1]
    return score
'''


# ---- independent references ------------------------------------------------------------------

def l2_by_definition(sizes, capacity) -> int:
    """Martello & Toth's L2, literally: max over alpha in [0, C/2] (every multiple of 1/2, enough
    for integer sizes and capacity) of |J1| + |J2| + max(0, ceil((sum J3 - (|J2| C - sum J2)) / C))."""
    w = np.asarray(sizes, dtype=np.int64)
    best = 0
    for alpha in np.arange(0, capacity / 2 + 0.25, 0.5):
        j1 = w[w > capacity - alpha]
        j2 = w[(w <= capacity - alpha) & (w > capacity / 2)]
        j3 = w[(w <= capacity / 2) & (w >= alpha)]
        spill = j3.sum() - (len(j2) * capacity - j2.sum())
        best = max(best, len(j1) + len(j2) + max(0, -(-int(spill) // capacity)))
    return best


def optimum(sizes, capacity) -> int:
    """The fewest bins, by exhaustive branch and bound (largest items first)."""
    items = sorted(sizes, reverse=True)
    best = len(items)

    def place(i, loads):
        nonlocal best
        if len(loads) >= best:
            return
        if i == len(items):
            best = len(loads)
            return
        seen = set()
        for j, load in enumerate(loads):
            if load + items[i] <= capacity and load not in seen:
                seen.add(load)
                loads[j] += items[i]
                place(i + 1, loads)
                loads[j] -= items[i]
        place(i + 1, loads + [items[i]])

    place(0, [])
    return best


def first_fit(sizes, capacity):
    """Textbook first fit: the lowest-numbered open bin with room, else a new bin."""
    remaining = np.empty(0, dtype=np.int64)
    assignment = []
    for w in sizes:
        fits = np.flatnonzero(remaining >= w)
        if fits.size:
            b = int(fits[0])
        else:
            b = len(remaining)
            remaining = np.append(remaining, capacity)
        remaining[b] -= w
        assignment.append(b)
    return assignment


def best_fit(sizes, capacity):
    """Textbook best fit: the open bin with the least room that still fits (ties: the lowest
    number), else a new bin; open bins kept in buckets by remaining capacity (integer sizes)."""
    buckets = [[] for _ in range(capacity + 1)]  # remaining capacity -> open bins (ascending numbers)
    n_bins = 0
    assignment = []
    for w in (int(x) for x in sizes):
        room = next((r for r in range(w, capacity + 1) if buckets[r]), None)
        if room is None:
            b, room = n_bins, capacity
            n_bins += 1
        else:
            b = buckets[room].pop(0)
        left = buckets[room - w]
        left.insert(next((k for k, x in enumerate(left) if x > b), len(left)), b)
        assignment.append(b)
    return assignment


def loads_ok(sizes, assignment, capacity) -> bool:
    loads = {}
    for w, b in zip(sizes, assignment):
        loads[b] = loads.get(b, 0) + int(w)
    return max(loads.values()) <= capacity


# ---- fixtures -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tasks():
    return {name: load_task(name) for name in TASKS}


@pytest.fixture(scope="module")
def data():
    """{task: (capacity, {data set: [item sizes of each instance]})} from the shipped files."""
    return {name: read(load_task(name).folder / "data.npz") for name in TASKS}


@pytest.fixture(scope="module")
def references(data):
    """{task: {heuristic: {data set: (assignments, bins used, L2 by definition)}}}, all computed here."""
    out = {}
    for name, (capacity, sets) in data.items():
        out[name] = {}
        for label, heuristic in (("first_fit", first_fit), ("best_fit", best_fit)):
            out[name][label] = {}
            for set_name, instances in sets.items():
                assignments = [heuristic(inst, capacity) for inst in instances]
                assert all(loads_ok(inst, a, capacity) for inst, a in zip(instances, assignments))
                used = sum(len(set(a)) for a in assignments)
                bound = sum(l2_by_definition(inst, capacity) for inst in instances)
                out[name][label][set_name] = (assignments, used, bound)
    return out


def expected_reward(per_set) -> float:
    """FunSearch's excess per data set (total bins over total L2), averaged, as 100 / (1 + excess)."""
    excess = np.mean([(used - bound) / bound for _, used, bound in per_set.values()])
    return 100 / (1 + excess)


def run(task, code: str, timeout_s: float = 30):
    return Evaluator(task, workers=1, timeout_s=timeout_s).evaluate(code)


# ---- the L2 bound -----------------------------------------------------------------------------

@pytest.mark.parametrize("sizes, capacity, l1, l2, opt", [
    ([6, 6, 6], 10, 2, 3, 3),  # alpha = 0: three items above C/2, each alone
    ([60, 60, 60, 45, 45], 100, 3, 4, 4),  # alpha = 45: a 45 fits with no 60, so the two 45s need a 4th bin
    ([80, 55, 30, 30, 30], 100, 3, 3, 3),  # 80 | 55 + 30 | 30 + 30
    ([5, 5, 5, 5, 1], 10, 3, 3, 3),  # no item above C/2: L2 = L1
    ([50, 50, 50, 50], 100, 2, 2, 2),  # C/2 itself is not "above C/2"
    ([70, 70, 35, 35, 35], 100, 3, 4, 4),  # alpha = 35: J1 = {70, 70}, J3 = three 35s = 105 > C
    ([51, 50, 50, 49], 100, 2, 2, 2),  # 51 + 49 | 50 + 50: alpha = 49 gives J2 = {51} with room for 49
    ([100, 100, 1], 100, 3, 3, 3),
    ([], 10, 0, 0, 0),
])
def test_l2_by_hand(sizes, capacity, l1, l2, opt):
    assert l1_bound(sizes, capacity) == l1 == math.ceil(sum(sizes) / capacity)
    assert l2_bound(sizes, capacity) == l2 == l2_by_definition(sizes, capacity)
    assert optimum(sizes, capacity) == opt


def test_l2_against_the_definition_and_brute_force_optimum():
    rng = random.Random(13)
    gaps = 0
    for trial in range(400):
        capacity = rng.randint(6, 30)
        n = rng.randint(1, 9)
        low = rng.choice([1, capacity // 4, capacity // 3])
        sizes = [rng.randint(max(1, low), capacity) for _ in range(n)]
        l1, l2, opt = l1_bound(sizes, capacity), l2_bound(sizes, capacity), optimum(sizes, capacity)
        assert l2 == l2_by_definition(sizes, capacity), (sizes, capacity)
        assert l1 <= l2 <= opt, (sizes, capacity, l1, l2, opt)
        gaps += l2 > l1
    assert gaps > 40  # L2 beats L1 often on these instances, so the comparison means something
    with pytest.raises(ValueError, match="exceeds the capacity"):
        l2_bound([11], 10)


def test_l2_on_larger_random_instances_matches_the_definition():
    rng = np.random.default_rng(0)
    for capacity, low, high, n in ((150, 20, 100, 500), (100, 1, 100, 300), (100, 30, 70, 200), (120, 40, 119, 100)):
        sizes = rng.integers(low, high + 1, n)
        assert l2_bound(sizes, capacity) == l2_by_definition(sizes, capacity) >= l1_bound(sizes, capacity)


# ---- shipped data ------------------------------------------------------------------------------

def test_shipped_data_equals_regeneration(tasks, data):
    expect = {"bin_packing_or": (150, {"OR1": [120] * 6, "OR2": [250] * 5, "OR3": [500] * 5, "OR4": [1000] * 5}),
              "bin_packing_weibull": (100, {"Weibull5k": [5000] * 5 + [120]})}
    for name, task in tasks.items():
        assert task.data_files == ()  # the items stay with the driver, outside the sandbox
        assert (task.folder / "data.npz").stat().st_size <= MAX_DATA_BYTES
        fresh = generate(name)
        with np.load(task.folder / "data.npz", allow_pickle=False) as shipped:
            assert sorted(shipped.files) == sorted(fresh)
            for key in fresh:
                np.testing.assert_array_equal(shipped[key], fresh[key])
        capacity, sets = data[name]
        assert (capacity, {k: [len(a) for a in v] for k, v in sets.items()}) == expect[name]
    or_items = np.concatenate([a for v in data["bin_packing_or"][1].values() for a in v])
    assert or_items.min() == 20 and or_items.max() == 100 and abs(or_items.mean() - 60) < 1
    weibull = np.concatenate(data["bin_packing_weibull"][1]["Weibull5k"])
    # Weibull(scale 45, shape 3): mean 45 * Gamma(4/3) = 40.18, std 14.6 (standard error 0.09 here)
    assert weibull.min() >= 1 and weibull.max() <= 100 and abs(weibull.mean() - 45 * math.gamma(4 / 3)) < 0.4


# ---- the verifier against first fit and best fit computed here -------------------------------

def test_verifier_scores_first_and_best_fit_as_computed_here(tasks, references):
    for name, task in tasks.items():
        for label in ("first_fit", "best_fit"):
            per_set = references[name][label]
            verdict = task.verify({s: [list(a) for a in v[0]] for s, v in per_set.items()})
            assert verdict.valid, verdict.feedback
            assert verdict.reward == pytest.approx(expected_reward(per_set), rel=1e-12)
            for s, (_, used, bound) in per_set.items():
                assert verdict.metrics[f"bins_{s}"] == used and verdict.metrics[f"l2_{s}"] == bound
                paper = PUBLISHED[label]["Weibull5k" if s == "Weibull5k" else s]
                # generated instances, not FunSearch's: the same regime as its Table 1, not the same digits
                assert abs(100 * (used - bound) / bound - paper) < 1.0, (name, label, s)
    # the numbers in this module's docstring and in the task files
    ref = references["bin_packing_or"]["best_fit"]
    assert [ref[s][1:] for s in ("OR1", "OR2", "OR3", "OR4")] == [(317, 298), (544, 515), (1055, 1003), (2095, 2001)]
    assert references["bin_packing_weibull"]["best_fit"]["Weibull5k"][1:] == (10544, 10122)
    assert references["bin_packing_weibull"]["first_fit"]["Weibull5k"][1:] == (10581, 10122)


def test_every_family_holds_an_instance_where_l2_beats_l1(data):
    """Else a wrong L2 would change no reward. Checked with the literal transcription of L2 above."""
    for name, (capacity, sets) in data.items():
        gaps = [(s, k) for s, instances in sets.items() for k, sizes in enumerate(instances)
                if l2_by_definition(sizes, capacity) > l1_bound(sizes, capacity)]
        assert gaps == {"bin_packing_or": [("OR1", 5)], "bin_packing_weibull": [("Weibull5k", 5)]}[name], (name, gaps)


def test_replacing_l2_by_l1_changes_the_reward(tasks, references, monkeypatch):
    """The best-fit packing (the starter's) scores differently once the verifier's L2 is L1: the data exercise L2."""
    artefacts = {name: {s: [list(a) for a in v[0]] for s, v in references[name]["best_fit"].items()} for name in TASKS}
    real = {name: tasks[name].verify(artefacts[name]).reward for name in TASKS}
    monkeypatch.setattr(tasks_bin_packing, "l2_bound", l1_bound)
    for name in TASKS:
        weakened = tasks_bin_packing.verify_packing(Instances(tasks[name].folder), artefacts[name])
        assert weakened.valid and weakened.reward < real[name] - 1e-3, (name, weakened.reward, real[name])


def test_reward_is_a_monotone_transform_of_the_excess():
    assert reward_of(0.0) == 100.0 and reward_of(100.0) == 50.0
    assert reward_of(0.68) == pytest.approx(load_task("bin_packing_weibull").best_known, abs=1e-4)
    or_best = load_task("bin_packing_or").best_known
    assert reward_of(np.mean([5.30, 4.19, 3.11, 2.47])) == pytest.approx(or_best, abs=1e-4)
    assert all(reward_of(a) > reward_of(b) > 0 for a, b in ((0, 0.1), (3, 4), (100, 400)))


# ---- through the real sandbox ------------------------------------------------------------------

def test_task_files(tasks):
    for task in tasks.values():
        assert task.entry_function == "priority" and task.run_entry == "helix_online_step" and callable(task.driver)
        assert "FunSearch" in task.best_known_source and "Table 1" in task.best_known_source
        assert "# EVOLVE-BLOCK-START" in task.initial_program and "# EVOLVE-BLOCK-END" in task.initial_program
        assert "return -(bins - item)" in task.initial_program  # best fit, FunSearch's starting point
        assert "seconds" not in task.description and "L2" in task.description


@pytest.mark.parametrize("name", TASKS)
def test_starter_is_best_fit_and_first_fit_is_first_fit_through_the_sandbox(tasks, references, name):
    task = tasks[name]
    for code, label in ((task.initial_program, "best_fit"), (FIRST_FIT, "first_fit")):
        per_set = references[name][label]
        out = run_program(code, task.run_entry, 30, task.memory_mb, harness=task.harness, driver=task.driver)
        assert out.status == "ok", out.error
        assert out.value == {s: v[0] for s, v in per_set.items()}  # item for item
        result = run(task, code)
        assert result.valid and result.reward == pytest.approx(expected_reward(per_set), rel=1e-12), result.feedback
    starter = run(task, task.initial_program)
    exact = {"bin_packing_or": 94.811667411, "bin_packing_weibull": 95.997723824}[name]
    assert starter.reward == pytest.approx(exact, abs=1e-9)


def test_priority_sees_floats_and_every_fitting_bin_including_the_empty_ones(tasks, data):
    task = tasks["bin_packing_or"]
    checked = ("import numpy as np\n\ndef priority(item, bins):\n"
               "    assert type(item) is float and bins.dtype == np.float64 and bins.ndim == 1\n"
               "    assert (bins >= item).all() and bins[-1] == 150.0\n"
               "    room = bins.copy()\n"
               "    bins[:] = 0.0  # a copy of the harness's state: changing it changes nothing\n"
               "    return -(room - item)\n")
    result = run(task, checked)
    assert result.valid and result.reward == run(task, task.initial_program).reward
    # worst fit takes the roomiest bin: with the empty bins offered, every item gets a bin of its own
    worst = run(task, "def priority(item, bins):\n    return bins\n")
    capacity, sets = data["bin_packing_or"]
    excess = np.mean([(sum(map(len, s)) - b) / b for s, b in
                      ((s, sum(l2_by_definition(i, capacity) for i in s)) for s in sets.values())])
    assert worst.valid and worst.reward == pytest.approx(100 / (1 + excess), rel=1e-12) and worst.reward < 50


def test_funsearch_weibull_heuristic_through_the_sandbox(tasks):
    """FunSearch's published Weibull heuristic relies on the harness's exact semantics (max(bins) is
    the capacity because the empty bins are offered; score[1:] -= score[:-1] uses the bin order)."""
    result = run(tasks["bin_packing_weibull"], FUNSEARCH_WEIBULL, timeout_s=60)
    assert result.valid and result.metrics["bins_Weibull5k"] == 10208 and result.metrics["l2_Weibull5k"] == 10122
    assert result.reward == pytest.approx(99.15752351, abs=1e-8) and result.metrics["excess_pct"] < 1.0


# ---- hostile artefacts -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def good(references):
    """A valid assignment of bin_packing_or (best fit), to break in the tests below."""
    return {s: [list(a) for a in v[0]] for s, v in references["bin_packing_or"]["best_fit"].items()}


def broken(good, change):
    bad = json.loads(json.dumps(good))
    change(bad)
    return bad


def overfiller(sizes):
    """Moves one item of OR2 instance 3 into a bin that cannot take it (best fit leaves bins nearly full)."""
    def change(bad):
        a = bad["OR2"][3]
        loads = np.bincount(a, weights=sizes)
        i = 10
        target = next(b for b in np.argsort(-loads) if b != a[i] and loads[b] + sizes[i] > 150)
        a[i] = int(target)
    return change


def test_hostile_artefacts(tasks, good, data):
    task = tasks["bin_packing_or"]
    assert task.verify(good).valid
    n = 250  # OR2 items
    overfill = overfiller(data["bin_packing_or"][1]["OR2"][3])
    cases = [
        (overfill, "OR2 instance 3: bin"),
        (lambda b: b["OR1"][0].append(0), "OR1 instance 0: 121 bin indices for 120 items (1 extra)"),
        (lambda b: b["OR4"][4].pop(), "OR4 instance 4: 999 bin indices for 1000 items (1 missing)"),
        (lambda b: b["OR2"][1].__setitem__(7, 3.0), "item 7 has bin 3.0 (float), not an integer index"),
        (lambda b: b["OR2"][1].__setitem__(7, True), "item 7 has bin True (bool)"),
        (lambda b: b["OR2"][1].__setitem__(7, None), "item 7 has bin None (NoneType)"),
        (lambda b: b["OR2"][1].__setitem__(7, -1), f"item 7 has bin -1; bin indices must be in [0, {n})"),
        (lambda b: b["OR2"][1].__setitem__(7, n), f"item 7 has bin {n}; bin indices must be in [0, {n})"),
        (lambda b: b["OR2"][1].__setitem__(7, 10**40), "item 7 has bin a huge integer"),
        (lambda b: b.pop("OR3"), "data sets missing: ['OR3']"),
        (lambda b: b.__setitem__("score", 100.0), "unexpected: ['score']"),
        (lambda b: b["OR1"].pop(), "OR1: got 5 instances, not a list of 6 instances"),
        (lambda b: b.__setitem__("OR1", "all in bin 0"), "OR1: got str, not a list of 6 instances"),
        (lambda b: b["OR1"].__setitem__(2, {"bins": 1}), "OR1 instance 2: got dict, not a list of 120 bin indices"),
    ]
    for change, why in cases:
        verdict = task.verify(broken(good, change))
        assert not verdict.valid and verdict.reward == 0 and why in verdict.feedback, (why, verdict.feedback)
    over = task.verify(broken(good, overfill))
    assert "> capacity 150 (over by" in over.feedback
    for bad in (None, [], 94.0, "reward 100", {"reward": 100.0, "valid": True}):
        assert not task.verify(bad).valid
    # every item in bin 0, and one item per bin: the first is overfilled, the second valid and poor
    all_in_one = {s: [[0] * len(a) for a in v] for s, v in data["bin_packing_or"][1].items()}
    assert "bin 0 holds" in task.verify(all_in_one).feedback
    alone = {s: [list(range(len(a))) for a in v] for s, v in data["bin_packing_or"][1].items()}
    verdict = task.verify(alone)
    assert verdict.valid and verdict.reward < 50 and verdict.metrics["bins_OR4"] == 5000


HOSTILE = [
    ("import numpy as np\ndef priority(item, bins):\n    return np.full(bins.shape, np.nan)\n",
     "returned NaN for OR1 instance 0, item 0"),
    ("import numpy as np\ndef priority(item, bins):\n    s = -(bins - item)\n    s[-1] = np.nan\n    return s\n",
     "returned NaN"),
    ("def priority(item, bins):\n    return 1.0\n", "must return one priority per bin, shape (120,)"),
    ("def priority(item, bins):\n    return list(bins) + [0.0]\n", "it returned shape (121,)"),
    ("import numpy as np\ndef priority(item, bins):\n    return np.ones((len(bins), 2))\n", "returned shape (120, 2)"),
    ("def priority(item, bins):\n    return 'first'\n", "must return a numeric numpy array"),
    ("def priority(item, bins):\n    return None\n", "shape"),
    ("def priority(item, bins):\n    raise RuntimeError('boom')\n", "raised RuntimeError: boom"),
    ("def priority(item, bins):\n    while True:\n        pass\n", "timeout"),
    ("def heuristic(item, bins):\n    return -(bins - item)\n", "does not define priority(item, bins)"),
]


@pytest.mark.parametrize("code, why", HOSTILE)
def test_hostile_programs_through_the_sandbox(tasks, code, why):
    result = run(tasks["bin_packing_or"], code, timeout_s=3)
    assert not result.valid and result.reward == 0 and why.lower() in result.feedback.lower(), result.feedback


def test_programs_that_fake_the_harness_or_break_it_earn_nothing_extra(tasks, data):
    task = tasks["bin_packing_or"]
    starter = run(task, task.initial_program).reward
    # its own harness entry and a reported score: the trusted harness is defined after it and wins
    fake = ("def helix_online_binpack():\n    return {'score': 100.0}\n\n"
            "def priority(item, bins):\n    print('excess 0.0%, reward 100')\n    return -(bins - item)\n")
    result = run(task, fake)
    assert result.valid and result.reward == starter, result.feedback
    # patching numpy so that every bin looks like a fit: the harness picks a full bin, the driver refuses it
    patched = ("import numpy as np\n_flat = np.flatnonzero\n"
               "np.flatnonzero = lambda a: _flat(np.ones_like(a))\n\n"
               "def priority(item, bins):\n    return -(bins - item)\n")
    result = run(task, patched)
    assert not result.valid and result.reward == 0 and result.status == "bad_output", result.feedback
    assert "too little; an item only goes into a bin with room for it" in result.feedback, result.feedback
