import json
import runpy

import numpy as np
import pytest

from tasks import available_tasks, load_task

TASK = load_task("circle_packing_26")


def grid_packing():
    """A 5x5 grid of r = 0.1 circles plus one circle in the gap between four of them."""
    centers = [[0.1 + 0.2 * i, 0.1 + 0.2 * j] for i in range(5) for j in range(5)]
    gap = 0.1 * np.sqrt(2) - 0.1  # the hole at (0.2, 0.2) between 4 circles of radius 0.1
    centers.append([0.2, 0.2])
    radii = [0.1] * 25 + [gap]
    return centers, radii, 25 * 0.1 + gap


def test_registry_and_unknown_task():
    assert "circle_packing_26" in available_tasks()
    with pytest.raises(ValueError, match="Did you mean 'circle_packing_26'"):
        load_task("circle_packing26")


def test_starter_program_is_valid_and_scores_its_sum_of_radii():
    centers, radii, _ = runpy.run_path(str(TASK.folder / "initial_program.py"))["run_packing"]()
    verdict = TASK.verify(json.loads(json.dumps([centers.tolist(), radii.tolist(), 99.0])))
    assert verdict.valid and verdict.reward == pytest.approx(float(np.sum(radii)))
    assert 0.9 < verdict.reward < 2.2


def test_hand_built_packing_gets_its_exact_sum_and_fake_sums_are_ignored():
    centers, radii, true_sum = grid_packing()
    verdict = TASK.verify([centers, radii, 1000.0])
    assert verdict.valid and verdict.reward == pytest.approx(2.5 + 0.1 * np.sqrt(2) - 0.1, abs=1e-12)
    assert verdict.metrics["sum_radii"] == pytest.approx(true_sum)
    assert TASK.verify({"centers": centers, "radii": radii}).reward == pytest.approx(true_sum)


@pytest.mark.parametrize("mutate, words", [
    (lambda c, r: (c, r[:25] + [0.2]), "overlap"),
    (lambda c, r: ([[0.05, 0.5]] + c[1:], r), "left edge"),
    (lambda c, r: (c, [-0.1] + r[1:]), "negative radius"),
    (lambda c, r: (c, [float("nan")] + r[1:]), "NaN"),
    (lambda c, r: (c, ["nan"] + r[1:]), "NaN"),
    (lambda c, r: (c[:25], r[:25]), "shape"),
    (lambda c, r: (c, r + [0.0]), "shape"),
    (lambda c, r: (c, [[0.1]] * 26), "shape"),
    (lambda c, r: ("centres", r), "numeric"),
    (lambda c, r: (c, [{"r": 1}] * 26), "numeric"),
])
def test_invalid_packings_score_zero_with_a_reason(mutate, words):
    centers, radii, _ = grid_packing()
    c, r = mutate(centers, radii)
    verdict = TASK.verify([c, r])
    assert not verdict.valid and verdict.reward == 0.0
    assert words.lower() in verdict.feedback.lower()


@pytest.mark.parametrize("value", [None, 3.0, "text", [1], {"centers": None}])
def test_wrong_return_types_are_invalid_not_exceptions(value):
    verdict = TASK.verify(value)
    assert not verdict.valid and verdict.reward == 0.0 and verdict.feedback
