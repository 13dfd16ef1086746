"""The function-minimisation tasks: every folder loads, its starter scores through the real
sandbox, verifiers reject infeasible points with the reason, rewards match hand computation."""

import math

import pytest

from rewards import Evaluator
from tasks import load_task, shipped_tasks

FMIN = ["eggholder", "mishra_bird", "keane_bump_10", "keane_bump_20", "keane_bump_30"]


def test_catalog_lists_every_task():
    assert set(FMIN) | {"circle_packing_26"} <= set(shipped_tasks())


@pytest.mark.parametrize("name", FMIN)
def test_starter_program_scores_through_the_sandbox(name):
    task = load_task(name)
    result = Evaluator(task, workers=1, timeout_s=30).evaluate(task.initial_program)
    assert result.valid, result.feedback
    assert 0 < result.reward < 1 and "f(x) =" in result.feedback


def test_eggholder_reward_by_hand():
    task = load_task("eggholder")
    # f(0, 0) = -47 sin(sqrt(47)); eq. 20 with f* = -959.6407.
    f = -47 * math.sin(math.sqrt(47))
    want = 959.6407 / (959.6407 + abs(f + 959.6407))
    verdict = task.verify([0.0, 0.0])
    assert verdict.valid and verdict.reward == pytest.approx(want, rel=1e-12)
    assert verdict.metrics["f"] == pytest.approx(f, rel=1e-12)
    assert task.verify([512.0, 404.2319]).reward == pytest.approx(1.0, abs=1e-6)  # the global minimum


def test_eggholder_rejects_a_point_outside_the_box_by_1e_6():
    verdict = load_task("eggholder").verify([512.0 + 1e-6, 0.0])
    assert not verdict.valid and verdict.reward == 0
    assert "x[0] = 512 must be >= -512 and <= 512" in verdict.feedback


def test_mishra_bird_minimum_and_its_disk_constraint():
    task = load_task("mishra_bird")
    assert task.verify([-3.1302468, -1.5821422]).reward == pytest.approx(1.0, abs=1e-5)
    verdict = task.verify([-0.5, -0.5])  # in the box, but (4.5^2 + 4.5^2) = 40.5 >= 25
    assert not verdict.valid and "must be < 25 (violated by 15.5)" in verdict.feedback


def test_keane_infeasible_point_says_which_constraint():
    task = load_task("keane_bump_10")
    verdict = task.verify([0.5] * 10)  # prod = 0.5^10 < 0.75
    assert not verdict.valid and "prod(x) = 0.000976562 must be >= 0.75" in verdict.feedback
    verdict = task.verify([0.0] + [2.0] * 9)  # x_i > 0 is strict
    assert not verdict.valid and "x[0] = 0 must be > 0" in verdict.feedback


def test_keane_reward_by_hand_and_record_capped_at_one():
    task = load_task("keane_bump_10")
    x = [1.0] * 10
    c = math.cos(1.0)
    f = -abs(10 * c**4 - 2 * c ** 20) / math.sqrt(sum(i for i in range(1, 11)))
    verdict = task.verify(x)
    assert verdict.valid and verdict.metrics["f"] == pytest.approx(f, rel=1e-12)
    assert verdict.reward == pytest.approx(0.747310362 / (0.747310362 + f + 0.747310362), rel=1e-12)
    from tasks.families.functions.verify import reward

    assert reward(-0.9, -0.747310362) == 1.0  # beating the rounded record is not penalised


@pytest.mark.parametrize("bad", [[1.0], [[1.0, 2.0]], [float("nan"), 1.0], ["a", "b"], None, {"x": 1}])
def test_malformed_points_are_invalid_with_usage(bad):
    verdict = load_task("eggholder").verify(bad)
    assert not verdict.valid and verdict.reward == 0 and "2 numbers" in verdict.feedback

