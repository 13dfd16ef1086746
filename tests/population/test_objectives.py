"""Objectives a task declares (task.yaml ``objectives``): NSGA-II on reward, Div and those against fronts
and crowding computed by hand in plain Python, the rule for a missing or non-finite value, the task.yaml
checks, and the pool's values through a checkpoint (train/loop/evolution.py)."""

import dataclasses
import itertools
import math
import shutil

import numpy as np
import pytest

import tasks.base
from population.child import Child
from population.objectives import finite_columns, oriented, raw_value, raw_values
from population.selection import Pool, beaten_by_n_columns, fronts_of_columns, make_strategy, nsga2_columns, select
from rewards.evaluator import Evaluation
from tasks.base import Objective, load_task, task_objectives
from tests.helpers.evolution import STARTER
from tests.helpers.task_copies import load_error
from train.config.config import load_config
from train.loop.evolution import OBJECTIVE_NAMES, OBJECTIVE_VALUES, Evolution

# (reward, Div, eval time in s): the third is minimised. Hand-checked: on (reward, Div) alone 4 is beaten
# by 3, 7 by 2 and 5 by 1; with the time, 4 (fastest) and 7 are on the front; 5 is beaten by 1 in all three.
PLANTED = [(1.0, 0.1, 5.0), (0.9, 0.2, 1.0), (0.8, 0.3, 9.0), (0.5, 0.5, 0.5),
           (0.4, 0.4, 0.2), (0.3, 0.1, 8.0), (0.2, 0.6, 3.0), (0.7, 0.25, 0.3)]


def planted() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r, d, t = (np.array(c) for c in zip(*PLANTED))
    return r, d, oriented(t[:, None], ["min"])


# ---- brute force, plain Python: no numpy, no pymoo ----------------------------------------------
def dominates(a, b) -> bool:
    return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))


def brute_ranks(points) -> list[int]:
    """Pareto rank of each point (0: first front), all objectives maximised, by peeling fronts."""
    rank, left, r = [None] * len(points), set(range(len(points))), 0
    while left:
        front = {i for i in left if not any(dominates(points[j], points[i]) for j in left if j != i)}
        for i in front:
            rank[i] = r
        left -= front
        r += 1
    return rank


def brute_crowding(points, members) -> dict[int, float]:
    """NSGA-II's crowding distance within ``members``: per objective (next - previous) / range, extremes
    infinite, averaged over the objectives (pymoo's normalisation)."""
    out = {i: 0.0 for i in members}
    m = len(points[0])
    for j in range(m):
        order = sorted(members, key=lambda i: points[i][j])
        span = points[order[-1]][j] - points[order[0]][j]
        out[order[0]] = out[order[-1]] = math.inf
        for k in range(1, len(order) - 1):
            if span > 0:
                out[order[k]] += (points[order[k + 1]][j] - points[order[k - 1]][j]) / span / m
    return out


def as_points(r, d, extra) -> list[tuple[float, ...]]:
    return [tuple(float(v) for v in row) for row in np.column_stack([r, d, extra]).tolist()]


# ---- the planted set ----------------------------------------------------------------------------
def test_first_front_of_the_planted_set_matches_brute_force():
    r, d, extra = planted()
    points = as_points(r, d, extra)
    ranks = brute_ranks(points)
    brute_front = {i for i, k in enumerate(ranks) if k == 0}
    assert brute_front == {0, 1, 2, 3, 4, 6, 7}  # and by hand (PLANTED's comment)
    assert set(fronts_of_columns(np.array(points))[0].tolist()) == brute_front
    assert set(select("nsga2", r, d, len(brute_front), np.random.default_rng(0), objectives=extra).tolist()) == brute_front
    two = brute_ranks([p[:2] for p in points])
    assert {i for i, k in enumerate(two) if k == 0} == {0, 1, 2, 3, 6}


def test_adding_the_objective_changes_the_chosen_population():
    r, d, extra = planted()
    points = as_points(r, d, extra)
    crowd = brute_crowding(points, [0, 1, 2, 3, 4, 6, 7])
    expected = set(sorted(crowd, key=lambda i: -crowd[i])[:5])  # the front of 7 does not fit in 5: largest crowding
    assert expected == {0, 2, 3, 4, 6} and crowd[3] > crowd[1] > crowd[7]  # 0, 2, 4, 6 are extremes (inf)
    for seed in range(5):
        with_time = set(select("nsga2", r, d, 5, np.random.default_rng(seed), objectives=extra).tolist())
        assert with_time == expected
        assert set(select("nsga2", r, d, 5, np.random.default_rng(seed)).tolist()) == {0, 1, 2, 3, 6}  # 2 objectives
    # an empty objectives block is no objective: the two-objective code path and result
    assert set(select("nsga2", r, d, 5, np.random.default_rng(0), objectives=np.zeros((8, 0))).tolist()) == {0, 1, 2, 3, 6}


@pytest.mark.parametrize("seed", range(25))
def test_nsga2_on_random_sets_keeps_whole_fronts_like_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(6, 14)), int(rng.integers(1, 3))
    r, d = np.round(rng.random(n), 1), np.round(rng.random(n), 1)  # rounded: ties and duplicates
    extra = np.round(rng.random((n, m)), 1)
    extra[rng.random((n, m)) < 0.15] = -np.inf  # missing values
    ranks = brute_ranks(as_points(r, d, finite_columns(extra)))
    assert brute_ranks(as_points(r, d, extra)) == ranks  # -inf and its finite stand-in rank alike
    for size in range(1, n):
        chosen = select("nsga2", r, d, size, np.random.default_rng(seed), objectives=extra)
        assert len(set(chosen.tolist())) == size
        last = max(ranks[i] for i in chosen)
        assert all(i in chosen for i in range(n) if ranks[i] < last)  # whole better fronts
        assert all(ranks[i] == last for i in chosen if ranks[i] >= last)


def test_pool_columns_and_only_nsga2_reads_the_objectives():
    r, d, extra = planted()
    pool = Pool(r, d, objectives=extra)
    assert pool.n_extra == 1 and pool.columns().shape == (8, 3)
    for name in ("top_score", "top_div", "random"):  # documented: they rank on reward and Div only
        a = make_strategy(name).select(pool, 5, np.random.default_rng(2))[0]
        b = make_strategy(name).select(Pool(r, d), 5, np.random.default_rng(2))[0]
        assert a.tolist() == b.tolist()
    with pytest.raises(ValueError, match="rows of rewards"):
        Pool(r, d, objectives=extra[:3])
    with pytest.raises(ValueError, match="NaN"):
        Pool(r, d, objectives=np.full((8, 1), np.nan))


# ---- missing and non-finite values ----------------------------------------------------------------
def test_a_missing_or_non_finite_value_is_the_worst():
    assert math.isnan(raw_value({}, 1.5, "speed")) and raw_value({"speed": 2}, 1.5, "speed") == 2.0
    assert raw_value({"eval_time_s": 99.0}, 1.5, "eval_time_s") == 1.5  # the child's field, not a metric
    assert raw_value({"ok": True}, 0.0, "ok") == 1.0 and math.isnan(raw_value({"s": "fast"}, 0.0, "s"))
    assert math.isnan(raw_value({"big": 10**400}, 0.0, "big"))
    values = raw_values([({"a": 1.0}, 0.5), ({}, 0.25)], ["a", "eval_time_s"])
    assert np.isnan(values[1, 0]) and values.tolist()[0] == [1.0, 0.5] and values[1, 1] == 0.25
    raw = np.array([[1.0, 2.0], [np.nan, np.nan], [np.inf, np.inf], [-np.inf, -np.inf]])
    assert oriented(raw, ["max", "min"]).tolist() == [[1.0, -2.0]] + [[-np.inf, -np.inf]] * 3  # +inf is no best
    with pytest.raises(ValueError, match="goal"):
        oriented(raw, ["max", "up"])
    # -inf one span below the column's finite values; a column with none becomes constant 0
    fixed = finite_columns(np.array([[3.0, -np.inf], [1.0, -np.inf], [-np.inf, -np.inf]]))
    assert fixed.tolist() == [[3.0, 0.0], [1.0, 0.0], [-1.0, 0.0]]
    assert finite_columns(np.array([[2.0], [-np.inf]])).tolist() == [[2.0], [1.0]]  # span 0: one below
    for col in ([1e308, -1e308, -np.inf], [1e20, -np.inf]):  # a span past the float range; 1 lost in rounding
        fixed = finite_columns(np.array(col)[:, None])[:, 0]
        assert np.isfinite(fixed).all() and fixed[-1] < fixed[:-1].min()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, None])
def test_a_child_without_a_number_never_dominates_on_that_objective(bad):
    # rows 0 and 1 tie on reward and Div; row 1's score (maximised) is missing or not finite.
    raw = np.array([[0.5], [math.nan if bad is None else bad], [0.9]])
    r, d = np.array([1.0, 1.0, 0.2]), np.array([0.5, 0.5, 0.1])
    extra = oriented(raw, ["max"])
    assert fronts_of_columns(finite_columns(np.column_stack([r, d, extra])))[0].tolist() == [0, 2]
    for seed in range(3):
        assert sorted(select("nsga2", r, d, 2, np.random.default_rng(seed), objectives=extra).tolist()) == [0, 2]
    # under goal min the same rule holds: still the worst, not the best
    extra_min = oriented(np.array([[0.5], [math.nan if bad is None else bad], [0.1]]), ["min"])
    assert sorted(select("nsga2", r, d, 2, np.random.default_rng(0), objectives=extra_min).tolist()) == [0, 2]


def test_crowding_stays_finite_with_missing_values():
    r, d = np.linspace(0, 1, 6), np.linspace(1, 0, 6)  # one front of 6
    extra = oriented(np.array([[1.0], [np.nan], [3.0], [np.nan], [2.0], [0.5]]), ["min"])
    chosen = nsga2_columns(np.column_stack([r, d, extra]), 4, np.random.default_rng(0))
    assert len(set(chosen.tolist())) == 4 and {0, 5} <= set(chosen.tolist())  # the extremes of reward / Div


# ---- task.yaml ---------------------------------------------------------------------------------
@pytest.fixture()
def task_copy(tmp_path, monkeypatch):
    task = load_task("circle_packing_26")
    shutil.copytree(task.folder, tmp_path / "copy", ignore=shutil.ignore_patterns("__pycache__"))
    spec = tmp_path / "copy" / "task.yaml"
    spec.write_text(spec.read_text().replace("name: circle_packing_26", "name: copy"))
    monkeypatch.setattr(tasks.base, "TASKS_DIR", tmp_path)
    return tmp_path / "copy"


def declare(block: str):
    return lambda text: text.rstrip("\n") + "\n" + block + "\n"


def test_task_yaml_objectives_load(task_copy):
    (task_copy / "task.yaml").write_text(declare("objectives:\n  - {metric: eval_time_s, goal: min}\n  - {metric: n_ok, goal: max}")(
        (task_copy / "task.yaml").read_text()))
    want = (Objective("eval_time_s", "min"), Objective("n_ok", "max"))
    assert load_task("copy").objectives == want and task_objectives("copy") == want
    (task_copy / "task.yaml").write_text((task_copy / "task.yaml").read_text().split("objectives:")[0] + "objectives: []\n")
    assert load_task("copy").objectives == () and task_objectives("copy") == ()


@pytest.mark.parametrize("block, words", [
    ("objectives: {metric: x, goal: max}", ["'objectives' must be a list of {metric: NAME, goal: max|min}"]),
    ("objectives:\n  - eval_time_s", ["objectives[0] must be a mapping", "'eval_time_s'"]),
    ("objectives:\n  - {metric: x, goal: max, weight: 2}", ["objectives[0]: unknown key 'weight'", "only 'metric' and 'goal'"]),
    ("objectives:\n  - {metrc: x, goal: max}", ["unknown key 'metrc'", "Did you mean 'metric'"]),
    ("objectives:\n  - {metric: x}", ["objectives[0]: missing key 'goal'"]),
    ("objectives:\n  - {metric: x, goal: maximise}", ["objectives[0]: 'goal' must be 'max' or 'min', got 'maximise'"]),
    ("objectives:\n  - {metric: x, goal: true}", ["'goal' must be 'max' or 'min', got True"]),
    ("objectives:\n  - {metric: 3, goal: max}", ["objectives[0]: 'metric' must be a non-empty string", "got 3"]),
    ("objectives:\n  - {metric: '', goal: max}", ["'metric' must be a non-empty string"]),
    ("objectives:\n  - {metric: x, goal: max}\n  - {metric: x, goal: min}", ["metric 'x' is declared twice"]),
    ("objectives:\n  - {metric: reward, goal: max}", ["objectives[0]: 'reward' is always an objective"]),
    ("objectives:\n  - {metric: diversity, goal: min}", ["'diversity' is always an objective"]),
    ("objective:\n  - {metric: x, goal: max}", ["unknown key 'objective'", "Did you mean 'objectives'"]),
])
def test_task_yaml_objective_errors_are_one_line(task_copy, block, words):
    message = load_error(task_copy, declare(block))
    assert "\n" not in message and str(task_copy / "task.yaml") in message
    for word in words:
        assert word in message
    from train.commands.task_check import TaskCheckError, _load  # the task check shows the same line

    with pytest.raises(TaskCheckError) as info:
        _load("copy")
    assert words[0] in str(info.value) and "\n" not in str(info.value)


# ---- the pool and checkpoints (train/loop/evolution.py) -------------------------------------------
class TimedEvaluator:
    """The starter's evaluation with metrics, without a sandbox."""

    def evaluate(self, code):
        return Evaluation(STARTER, True, "valid packing", {"n_ok": 26.0}, eval_time_s=2.0)


OBJECTIVES = (Objective("eval_time_s", "min"), Objective("n_ok", "max"))


def evolution(tmp_path, objectives=OBJECTIVES, resume=None) -> Evolution:
    cfg = load_config(None, ["task.name=circle_packing_26", "population.size=2", "population.knn_k=2"])
    task = dataclasses.replace(load_task("circle_packing_26"), objectives=objectives)
    return Evolution(cfg, tmp_path / "archive.sqlite", task, TimedEvaluator(), resume=resume)


def kids(evo, epoch: int, spec) -> list[Child]:
    root, code = int(evo.pool["id"][0]), evo.task.initial_program
    return [Child(parent_id=root, epoch=epoch, prompt_id=f"e{epoch}-p0-g{k}", completion="<answer>",
                  code=code.replace("0.1", f"0.1{epoch}{k}"), reward=reward, valid=True, feedback="f", is_program=True,
                  tag=0, metrics=metrics, eval_time_s=seconds) for k, (reward, seconds, metrics) in enumerate(spec)]


FIRST = [(1.84, 0.5, {"n_ok": 26.0}), (1.83, 0.1, {}), (1.85, 9.0, {"n_ok": 25.0})]
SECOND = [(1.9, 4.0, {"n_ok": 26.0}), (1.8, 0.05, {"n_ok": 26.0})]


def test_the_pool_carries_each_programs_values(tmp_path):
    evo = evolution(tmp_path)
    evo.add_children(kids(evo, 1, FIRST))
    assert evo.objective_values.shape == (4, 2)
    np.testing.assert_array_equal(evo.objective_values, [[2.0, 26.0], [0.5, 26.0], [0.1, np.nan], [9.0, 25.0]])
    plain = evolution(tmp_path / "plain", objectives=())
    plain.add_children(kids(plain, 1, FIRST))
    assert plain.objective_values.shape == (4, 0) and OBJECTIVE_VALUES not in plain.state_dict()


def test_a_checkpoint_resumes_to_the_same_selection_with_objectives(tmp_path):
    evo = evolution(tmp_path)
    evo.add_children(kids(evo, 1, FIRST))
    evo.select(1, np.random.default_rng(7))
    state = evo.state_dict() | {"archive/epoch": np.asarray(1)}
    assert state[OBJECTIVE_NAMES].tolist() == ["eval_time_s", "n_ok"] and state[OBJECTIVE_VALUES].shape == (4, 2)
    values = evo.objective_values.copy()
    evo.add_children(kids(evo, 2, SECOND))  # the uninterrupted run's next epoch
    _, chosen = evo.select(2, np.random.default_rng(3))
    uninterrupted = (chosen.tolist(), evo.population["tag"].tolist(), evo.objective_values.copy())
    evo.archive.close()

    for trimmed in (False, True):  # trimmed: a checkpoint from before objectives (values read from the archive)
        saved = {k: v for k, v in state.items() if not (trimmed and k in (OBJECTIVE_NAMES, OBJECTIVE_VALUES))}
        back = evolution(tmp_path, resume=saved)
        np.testing.assert_array_equal(back.objective_values, values)
        back.add_children(kids(back, 2, SECOND))
        _, chosen = back.select(2, np.random.default_rng(3))
        assert (chosen.tolist(), back.population["tag"].tolist()) == uninterrupted[:2]
        np.testing.assert_array_equal(back.objective_values, uninterrupted[2])
        back.archive.close()
    tampered = state | {OBJECTIVE_VALUES: state[OBJECTIVE_VALUES] + 1.0}  # the checkpoint's values are the ones used
    back = evolution(tmp_path, resume=tampered)
    np.testing.assert_array_equal(back.objective_values, values + 1.0)


def test_an_old_checkpoint_loads_for_a_task_without_objectives(tmp_path):
    evo = evolution(tmp_path, objectives=())
    evo.add_children(kids(evo, 1, FIRST))
    evo.select(1, np.random.default_rng(7))
    state = evo.state_dict() | {"archive/epoch": np.asarray(1)}
    assert not {OBJECTIVE_NAMES, OBJECTIVE_VALUES} & set(state)  # as a checkpoint before this change
    pool, population = evo.pool.tolist(), evo.population.tolist()
    evo.archive.close()
    back = evolution(tmp_path, objectives=(), resume=state)
    assert back.pool.tolist() == pool and back.population.tolist() == population and back.objective_values.shape == (4, 0)


def test_the_objective_changes_what_evolution_selects(tmp_path):
    chosen = {}
    for name, objectives in (("two", ()), ("time", (Objective("eval_time_s", "min"),))):
        evo = evolution(tmp_path / name, objectives=objectives)
        evo.add_children(kids(evo, 1, FIRST + [(1.845, 5.0, {})]))
        evo.select(1, np.random.default_rng(0))
        chosen[name] = sorted(evo.population["id"].tolist())
        evo.archive.close()
    assert chosen["two"] != chosen["time"]


def test_fronts_come_best_first():
    cols = np.array(list(itertools.product([0.0, 1.0], repeat=3)))
    fronts = fronts_of_columns(cols)
    assert fronts[0].tolist() == [7] and fronts[-1].tolist() == [0]


def test_pruning_a_large_pool_keeps_the_fronts_and_the_choice():
    rng = np.random.default_rng(5)
    n = 20_000
    columns = np.column_stack([rng.random(n), rng.random(n), oriented(rng.gamma(2.0, 1.0, (n, 1)), ["min"])])
    columns[rng.random(n) < 0.05, 2] = -np.inf  # some missing
    fixed = finite_columns(columns)
    pruned = fronts_of_columns(fixed, n_stop=32)
    whole = fronts_of_columns(fixed, n_stop=32, prune_min_rows=10**9)
    assert [f.tolist() for f in pruned] == [f.tolist() for f in whole]
    assert beaten_by_n_columns(fixed, 32).sum() > n // 10  # the pruning does drop rows here (~4,000)
    chosen = nsga2_columns(columns, 32, np.random.default_rng(0))
    ranks = {i: k for k, f in enumerate(whole) for i in f.tolist()}
    assert len(set(chosen.tolist())) == 32 and max(ranks[i] for i in chosen) == len(whole) - 1
