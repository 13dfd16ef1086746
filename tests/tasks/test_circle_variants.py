"""Circle packing in the unit disk (n = 26, eq. 19) and n = 32 in the unit square (eq. 18):
hand-built packings with hand-computed rewards, and violations of 1e-6 that must be caught."""

import math

import numpy as np
import pytest

from tasks import load_task


def grid_32():
    """4 rows x 8 columns of touching circles of radius 1/16: sum of radii 32/16 = 2."""
    centers = [((i + 0.5) / 8, (j + 0.5) / 4) for j in range(4) for i in range(8)]
    return np.array(centers), np.full(32, 1 / 16)


def ring_26(ring=0.8):
    """26 equal circles centred on a circle of radius ``ring``, neighbours touching:
    r = ring * sin(pi / 26), all inside the unit disk while ring + r <= 1."""
    angles = 2 * np.pi * np.arange(26) / 26
    r = ring * math.sin(math.pi / 26)
    return np.stack([ring * np.cos(angles), ring * np.sin(angles)], axis=1), np.full(26, r)


def test_grid_of_32_is_valid_with_reward_2():
    centers, radii = grid_32()
    verdict = load_task("circle_packing_32").verify([centers.tolist(), radii.tolist(), 99.0])
    assert verdict.valid and verdict.reward == pytest.approx(2.0, abs=1e-12)  # the claimed 99 is ignored


def test_32_overlap_of_1e6_is_rejected():
    centers, radii = grid_32()
    radii[9] += 1e-6  # column 1, row 1: now overlaps its left and right neighbours (rows are 0.25 apart) by 1e-6
    verdict = load_task("circle_packing_32").verify([centers.tolist(), radii.tolist()])
    assert not verdict.valid and verdict.reward == 0.0
    assert "overlap: 2 pair(s)" in verdict.feedback and "circles 8 and 9 overlap by 1e-06" in verdict.feedback


def test_32_circle_outside_the_square_by_1e6_is_rejected():
    centers, radii = grid_32()
    centers[0, 0] -= 1e-6  # the corner circle moves left, away from its neighbour
    verdict = load_task("circle_packing_32").verify({"centers": centers.tolist(), "radii": radii.tolist()})
    assert not verdict.valid
    assert "circle 0" in verdict.feedback and "left edge" in verdict.feedback and "by 1e-06" in verdict.feedback
    assert "overlap" not in verdict.feedback


def test_32_wrong_count_is_rejected():
    centers, radii = grid_32()
    verdict = load_task("circle_packing_32").verify([centers[:26].tolist(), radii[:26].tolist()])
    assert not verdict.valid and "shape (32, 2)" in verdict.feedback


def test_ring_of_26_in_the_disk_is_valid_with_the_hand_computed_sum():
    centers, radii = ring_26()
    verdict = load_task("circle_packing_26_disk").verify([centers.tolist(), radii.tolist()])
    assert verdict.valid
    assert verdict.reward == pytest.approx(26 * 0.8 * math.sin(math.pi / 26), rel=1e-12)  # 2.50717...


def test_tightest_ring_touches_the_boundary_and_is_still_valid():
    s = math.sin(math.pi / 26)
    r = s / (1 + s)  # ring + r = 1 with ring = 1 - r, and neighbours touch: (1 - r) s = r
    centers, radii = ring_26(ring=1 - r)
    verdict = load_task("circle_packing_26_disk").verify([centers.tolist(), radii.tolist()])
    assert verdict.valid and verdict.reward == pytest.approx(26 * s / (1 + s), rel=1e-12)  # 2.79676...


def test_disk_overlap_of_1e6_is_rejected():
    centers, radii = ring_26()
    radii[3] += 1e-6  # still inside the disk (0.896 + 1e-6 < 1), overlapping circles 2 and 4
    verdict = load_task("circle_packing_26_disk").verify([centers.tolist(), radii.tolist()])
    assert not verdict.valid and "overlap: 2 pair(s)" in verdict.feedback and "out of bounds" not in verdict.feedback


def test_disk_circle_outside_by_1e6_is_rejected():
    s = math.sin(math.pi / 26)
    r = s / (1 + s)
    centers, radii = ring_26(ring=1 - r)
    centers[5] *= (1 - r + 1e-6) / (1 - r)  # pushed radially outward: |c| + r = 1 + 1e-6
    verdict = load_task("circle_packing_26_disk").verify([centers.tolist(), radii.tolist()])
    assert not verdict.valid
    assert "1 circle(s) leave the unit disk" in verdict.feedback and "circle 5" in verdict.feedback
    assert "outside by 1e-06" in verdict.feedback


def test_the_square_is_not_the_disk():
    """The n = 26 square starter's packing lies in [0, 1]^2: in the disk task most of it is outside."""
    centers, radii = grid_32()
    verdict = load_task("circle_packing_26_disk").verify([centers[:26].tolist(), radii[:26].tolist()])
    assert not verdict.valid and "leave the unit disk" in verdict.feedback


@pytest.mark.parametrize("name, low, high", [("circle_packing_26_disk", 3.0, 4.664465), ("circle_packing_32", 1.5, 2.9395)])
def test_starter_programs_score_in_the_sandbox(name, low, high):
    from rewards import Evaluator

    task = load_task(name)
    result = Evaluator(task, workers=1).evaluate(task.initial_program)
    assert result.valid and low < result.reward < high, result.feedback
