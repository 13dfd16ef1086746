"""Dynamic sampling (trainer.dynamic_sampling): groups without spread are dropped and the batch is refilled
to B groups with spread, within a cap of extra rounds; every rank stays in step; off by default.

Spread is the estimator's own: advantages computed by hand below (GRPO: (r - mean) / (std + 1e-6) with
the unbiased std; without the std, r - mean)."""

import json
import math
import subprocess
import sys

import pytest

from population.archive import ReadOnlyArchive
from tests.helpers.env import child_env
from tests.helpers.planted_spread import PlantedSpreadEngine, first_two_flat, never_spread
from tests.helpers.scripted import QUICK, ROOT, TINY, metrics, run_helix
from train.config.config import ConfigError, load_config
from train.learner.grpo import groups_with_spread
from train.learner.learner import Learner
from train.loop.dynamic_sampling import DROPPED, plan_round
from train.loop.run_dir import TABLE, table_columns, table_header

NAN = float("nan")


# ---- which groups have spread ------------------------------------------------------------------
def test_sixteen_equal_rewards_have_no_spread_and_a_ladder_has():
    assert groups_with_spread([[2.6359830849] * 16, [1.0, 2.0, 3.0, 4.0]]) == [False, True]


def test_a_last_digit_difference_is_spread_only_where_the_std_magnifies_it():
    group = [0.5, 0.5, 0.5, 0.5000001]
    # by hand: mean 0.500000025, unbiased std 5e-8; normalised: 7.5e-8 / (5e-8 + 1e-6) = 0.0714 > 1e-6
    assert groups_with_spread([group], "grpo", norm_by_std=True) == [True]
    # r - mean alone: 7.5e-8, under the 1e-6 tolerance; a looser tolerance than 0.0714 drops it normalised too
    assert groups_with_spread([group], "grpo", norm_by_std=False) == [False]
    assert groups_with_spread([group], "grpo", norm_by_std=True, tolerance=0.08) == [False]
    assert groups_with_spread([group], "grpo", norm_by_std=True, tolerance=0.07) == [True]


def test_rewards_the_infrastructure_lost_are_left_out():
    assert groups_with_spread([[1.0, NAN, NAN, NAN], [1.0, NAN, 2.0, NAN], [3.0, NAN, 3.0, 3.0]]) == [False, True, False]


def test_the_entropic_estimator_judges_its_own_groups():
    assert groups_with_spread([[1.0, 1.0, 1.0, 5.0], [3.0] * 4], "entropic_adaptive_beta") == [True, False]


# ---- how many prompts a round draws ------------------------------------------------------------
@pytest.mark.parametrize("spread, batch, rounds, world, want", [
    ([False, False, True, True], 4, 0, 1, ([2, 3], 4)),  # half had spread: 2 missing / 0.5 = 4
    ([True, False, True, True], 4, 0, 1, ([0, 2, 3], 2)),  # 1 missing / 0.75 -> 2
    ([True, False, True, True], 4, 0, 3, ([0, 2, 3], 3)),  # at least one prompt per rank
    ([False, False], 2, 0, 1, ([], 2)),  # no spread seen: a whole batch
    ([True] * 4, 4, 0, 1, ([0, 1, 2, 3], 0)),  # full: no round
    ([False, False, True, True, True, True, True, True], 4, 1, 1, ([2, 3, 4, 5], 0)),  # surplus 6, 7 left out
    ([False, False], 2, 2, 1, ([], 0)),  # the cap
])
def test_plan_round(spread, batch, rounds, world, want):
    assert plan_round(spread, batch, rounds, 2, world) == want


def test_an_exact_quotient_draws_exactly_that_many():
    # B=33, 60 groups of which 22 have spread: 11 missing / (22/60) = 30 exactly; in floating point
    # 11 / (22 / 60) is 30.000000000000004 and a float ceil drew 31
    assert 11 / (22 / 60) > 30
    spread = [True] * 22 + [False] * 38
    assert plan_round(spread, 33, 0, 2, 1) == (list(range(22)), 30)
    # and one more group missing needs 12 * 60 / 22 = 32.7 -> 33 (capped at B)
    assert plan_round([True] * 21 + [False] * 39, 33, 0, 2, 1)[1] == 33
    # 3 missing at a rate of 7/10: 30/7 = 4.29 -> 5, not 4
    assert plan_round([True] * 7 + [False] * 3, 10, 0, 2, 1)[1] == 5


def test_a_round_draws_no_more_than_the_budget_leaves():
    assert plan_round([False, False, True, True], 4, 0, 2, 1, room=2) == ([2, 3], 2)
    assert plan_round([False, False, True, True], 4, 0, 2, 1, room=9) == ([2, 3], 4)
    assert plan_round([False, False, True, True], 4, 0, 2, 2, room=1) == ([2, 3], 0)  # not a prompt per rank: stop
    assert plan_round([False, False, True, True], 4, 0, 2, 1, room=0) == ([2, 3], 0)


# ---- config ------------------------------------------------------------------------------------
def test_config_checks():
    assert load_config(QUICK).trainer.dynamic_sampling.enabled is False  # off by default
    with pytest.raises(ConfigError, match="group-relative"):
        load_config(QUICK, ["trainer.dynamic_sampling.enabled=true", "trainer.adv_estimator=reinforce_plus_plus"])
    with pytest.raises(ConfigError, match="needs trainer.enabled"):
        load_config(QUICK, ["trainer.dynamic_sampling.enabled=true", "trainer.enabled=false"])
    with pytest.raises(ConfigError, match="max_rounds"):
        load_config(QUICK, ["trainer.dynamic_sampling.max_rounds=0"])
    with pytest.raises(ConfigError, match="max_rounds"):  # a typo names the key
        load_config(QUICK, ["trainer.dynamic_sampling.max_round=3"])


def test_the_table_gains_a_groups_column_only_when_on():
    assert table_columns() is TABLE
    header = table_header(table_columns(dynamic_sampling=True))
    assert "groups" in header and header.index("groups") < header.index("0-std")


# ---- the loop ----------------------------------------------------------------------------------
@pytest.fixture
def planted(monkeypatch):
    """The planted engine registered as ``planted``, and every Learner.step's groups recorded."""
    from rollout.engines import ENGINES

    steps = []
    real_step = Learner.step

    def spy(self, samples):
        steps.append([(s.group, s.reward) for s in samples])
        return real_step(self, samples)

    monkeypatch.setattr(Learner, "step", spy)
    monkeypatch.setitem(ENGINES, "planted", PlantedSpreadEngine)
    monkeypatch.setattr(PlantedSpreadEngine, "calls", [])
    return steps


def _children(run):
    with ReadOnlyArchive(run / "archive.sqlite") as arch:
        return [arch.get(s[0]) for s in arch.scores()[1:]]


def test_a_batch_with_planted_flat_groups_is_refilled_to_b_groups_with_spread(tmp_path, planted):
    # B = 4: prompts 0-1 of the first round are flat, 2-3 have spread; one round of 4 (2 missing at a rate
    # of 0.5) gives prompts 4-7, all with spread; the step trains on 2, 3, 4, 5 and leaves 6, 7 out.
    run = run_helix(tmp_path, "rollout.engine=planted", "rollout.group_size=4", "trainer.prompts_per_epoch=4",
                    "trainer.epochs=1", "trainer.dynamic_sampling.enabled=true")
    assert PlantedSpreadEngine.calls == [4, 4]
    (row,) = metrics(run)
    assert (row["ds_rounds"], row["ds_groups"], row["ds_groups_trained"], row["ds_groups_no_spread"]) == (1, 8, 4, 2)
    assert row["zero_std_frac"] == 0.25 and row["train_zero_std_frac"] == 0.0
    assert row["ds_extra_gen_time_s"] > 0 and row["ds_extra_time_s"] >= row["ds_extra_gen_time_s"]
    (step,) = planted
    assert sorted({g for g, _ in step}) == [2, 3, 4, 5] and len(step) == 4 * 4
    kids = _children(run)
    assert len(kids) == 8 * 4  # every round's children archived
    by_prompt = {}
    for k in kids:
        by_prompt.setdefault(int(k.prompt_id.split("-p")[1].split("-")[0]), []).append(k)
    assert sorted(by_prompt) == list(range(8))
    for p, group in by_prompt.items():
        if p in (2, 3, 4, 5):
            assert all(k.advantage is not None and k.advantage_inputs["tokens"] > 0 for k in group)
            assert sum(k.advantage > 0 for k in group) == 1  # the harmless edit beats three zeros
        else:
            assert all(k.advantage is None and k.advantage_inputs["dropped"] == DROPPED for k in group)
    prompts = [json.loads(line) for line in (run / "prompts" / "epoch-1.jsonl").read_text().splitlines()]
    assert [p["prompt"] for p in prompts] == list(range(8))  # both rounds' prompts recorded


def test_a_refill_stays_within_run_max_evaluations(tmp_path, planted):
    # B = 4 x G = 4: 16 children, then room for 8 more = 2 prompts (not the 4 the rate asks for); then the budget stops
    run = run_helix(tmp_path, "rollout.engine=planted", "rollout.group_size=4", "trainer.prompts_per_epoch=4",
                    "trainer.epochs=3", "trainer.dynamic_sampling.enabled=true", "run.max_evaluations=24")
    assert PlantedSpreadEngine.calls == [4, 2]
    (row,) = metrics(run)
    assert (row["ds_rounds"], row["ds_groups"], row["ds_groups_trained"]) == (1, 6, 4)
    assert len(_children(run)) == 24


def test_the_cap_stops_a_task_where_nothing_varies(tmp_path, planted, monkeypatch):
    monkeypatch.setattr(PlantedSpreadEngine, "FLAT", staticmethod(never_spread))
    run = run_helix(tmp_path, "rollout.engine=planted", "rollout.group_size=4", "trainer.epochs=1",
                    "trainer.dynamic_sampling.enabled=true", "trainer.dynamic_sampling.max_rounds=3")
    assert PlantedSpreadEngine.calls == [2, 2, 2, 2]  # B = 2, then three extra rounds of 2: the cap
    (row,) = metrics(run)
    assert (row["ds_rounds"], row["ds_groups"], row["ds_groups_trained"], row["zero_std_frac"]) == (3, 8, 0, 1.0)
    assert row["skipped_step"] == 1.0  # nothing to learn: no step, no NaN
    (step,) = planted
    assert len(step) == 1 and math.isnan(step[0][1])  # the one sample without a reward that keeps the rank in step


def test_off_by_default_the_epoch_is_what_it_was(tmp_path, planted, monkeypatch):
    monkeypatch.setattr(PlantedSpreadEngine, "FLAT", staticmethod(first_two_flat))
    run = run_helix(tmp_path, "rollout.engine=planted", "rollout.group_size=4", "trainer.epochs=1")
    assert PlantedSpreadEngine.calls == [2]
    (row,) = metrics(run)
    assert "ds_groups" not in row and row["zero_std_frac"] == 1.0  # both groups flat, trained on as before
    (step,) = planted
    assert sorted({g for g, _ in step}) == [0, 1]


@pytest.mark.slow
def test_two_ranks_stay_in_step_when_one_keeps_no_group(tmp_path):
    # Rank 1's groups never have spread: each round it keeps none and joins the step with a sample
    # without a reward; rank 0 keeps its own. gloo on CPU; a hang would hit the timeout.
    worker = ROOT / "tests" / "workers" / "planted_spread_helix.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(worker),
           "--config", QUICK, *TINY, f"run.output_dir={tmp_path}", "run.name=ds", "rollout.engine=planted",
           "rollout.group_size=4", "trainer.prompts_per_epoch=4", "trainer.dynamic_sampling.enabled=true"]
    proc = subprocess.run(cmd, cwd=ROOT, env=child_env(OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = metrics(tmp_path / "ds")
    # epoch 1: prompts 0-1 (rank 0) spread, 2-3 (rank 1) flat; a round of 4: 4-5 spread, 6-7 flat. (Epoch 2's
    # rank-0 groups depend on the parents selection drew: a harmless edit of the starter is a repeat there.)
    assert (rows[0]["ds_rounds"], rows[0]["ds_groups"], rows[0]["ds_groups_trained"]) == (1, 8, 4)
    assert rows[0]["skipped_step"] == 0.0 and rows[0]["train_tokens"] > 0 and rows[1]["ds_rounds"] <= 2
    kids = _children(tmp_path / "ds")
    trained = {k.prompt_id.split("-g")[0] for k in kids if k.advantage is not None}
    assert {p for p in trained if p.startswith("e1-")} == {"e1-p0", "e1-p1", "e1-p4", "e1-p5"}
    assert len([p for p in trained if p.startswith("e2-")]) == rows[1]["ds_groups_trained"]
    for prompt in trained:  # every group trained on has spread; the rest were archived with the reason
        assert len({k.reward for k in kids if k.prompt_id.startswith(prompt + "-g")}) > 1
    assert all(k.advantage_inputs["dropped"] == DROPPED for k in kids if k.prompt_id.split("-g")[0] not in trained)
