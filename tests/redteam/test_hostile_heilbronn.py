"""Red team of heilbronn_triangle_11 (docs/reward_threats.md): points outside the triangle (the smallest area
grows with the square of a scale, so a configuration blown up by 2 would score 4 times the record), riding the
1e-9 tolerance on the edges, degenerate and malformed point sets. Each attack gains nothing and gets one line;
on a verifier with the one check taken out the same points would have gained."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

import tasks.families.heilbronn.verify as heilbronn
from tasks import load_task
from tests.helpers.hostile_verdicts import evaluate_quietly, verify_quietly

TASK = load_task("heilbronn_triangle_11")
REFERENCE = Path(__file__).resolve().parents[1] / "tasks" / "references" / "heilbronn_triangle_11.json"
ALPHAEVOLVE = json.loads(REFERENCE.read_text())["constructions"][0]["points"]
CENTROID = np.array([0.5, math.sqrt(3) / 6])


def grown(points, factor):
    """The points moved away from the triangle's centroid by ``factor``: the smallest area times factor^2."""
    return (CENTROID + factor * (np.array(points) - CENTROID)).tolist()


def blind(monkeypatch):
    """Containment and its charge taken out: every overhang counts as 0."""
    real = heilbronn.overhangs
    monkeypatch.setattr(heilbronn, "overhangs", lambda points: np.minimum(real(points), 0.0))


def test_points_outside_the_triangle_are_refused(capfd, caplog, monkeypatch):
    big = grown(ALPHAEVOLVE, 2.0)
    real = verify_quietly(TASK, big, capfd, caplog)
    assert not real.valid and "lie outside the triangle" in real.feedback
    through = evaluate_quietly(TASK, f"def run_heilbronn():\n    return {big!r}\n", capfd, caplog)
    assert not through.valid and through.reward == 0
    blind(monkeypatch)
    fooled = TASK.verify(big)
    assert fooled.valid and fooled.reward == pytest.approx(4 * TASK.best_known, rel=1e-8)  # a false record, 4x


def test_riding_the_tolerance_buys_nothing(capfd, caplog, monkeypatch):
    """Grown by 1 + 2e-9 about the centroid, the edge points step out by at most 6e-10 (inside the 1e-9
    tolerance) and the smallest area grows by 4e-9: a new best on a verifier that ignores the overhang.
    Charged, the reward is the area over the enlarged triangle's: no more than the points' own score."""
    ridden = grown(ALPHAEVOLVE, 1 + 2e-9)
    over = heilbronn.overhangs(np.array(ridden)).max()
    assert 1e-10 < over < heilbronn.TOL
    own = TASK.verify(ALPHAEVOLVE).reward
    real = verify_quietly(TASK, ridden, capfd, caplog)
    assert real.valid and real.reward <= own * (1 + 1e-12) and "charged" in real.feedback
    blind(monkeypatch)
    fooled = TASK.verify(ridden)
    assert fooled.reward == pytest.approx(own * (1 + 2e-9) ** 2, rel=1e-12)
    assert TASK.improves(fooled.reward, own) and not TASK.improves(real.reward, own)


def test_degenerate_sets_score_zero_with_the_triple_named(capfd, caplog):
    same = [[0.5, 0.3]] * 11
    verdict = verify_quietly(TASK, same, capfd, caplog)
    assert verdict.valid and verdict.reward == 0 and "points 0, 1 and 2 are collinear (or two coincide)" in verdict.feedback


@pytest.mark.parametrize("points, words", [
    ([[1e308, 0.0]] * 11, "absurd values"), ([[0.5, 0.2]] * 12, "shape (11, 2)"), ([[0.5, "0.2"]] * 11, "only numbers"),
    ([[10**400, 0]] * 11, "only numbers"), ([[0.5, None]] * 11, "only numbers"), (None, "got NoneType"),
    ({"points": [[0.5, 0.2]] * 11, "score": 1.0}, "collinear"),  # a reported score is ignored
])
def test_bad_values_get_one_line(points, words, capfd, caplog):
    verdict = verify_quietly(TASK, points, capfd, caplog)
    assert words in verdict.feedback and verdict.reward == 0, verdict.feedback
