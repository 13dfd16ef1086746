"""heilbronn_triangle_11 (issue 53, item 3): the smallest of the 165 triangle areas against a brute force in
rationals, containment with its 1e-9 tolerance (charged, not paid), and check_exact at zero tolerance."""

import itertools
import math
import random
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest

from tasks import load_task
from tasks.families.heilbronn.verify import sqrt3_times_at_least

TASK = load_task("heilbronn_triangle_11")
H = math.sqrt(3) / 2
STARTER = [[0.5 + math.sqrt(3) / 6 * math.cos(2 * math.pi * k / 11), math.sqrt(3) / 6 * (1 + math.sin(2 * math.pi * k / 11))]
           for k in range(11)]


def exact_check(artefact):
    return TASK._verify.__globals__["check_exact"](artefact)


def brute_force(points) -> Fraction:
    """The smallest triangle area over all triples, exactly (shoelace formula, one triple at a time)."""
    pts = [(Fraction(x), Fraction(y)) for x, y in points]
    return min(abs(a[0] * (b[1] - c[1]) + b[0] * (c[1] - a[1]) + c[0] * (a[1] - b[1])) / 2
               for a, b, c in itertools.combinations(pts, 3))


def random_inside(rng, n=11):
    """n points drawn uniformly in the triangle (reflecting the unit rhombus's upper half)."""
    out = []
    for _ in range(n):
        u, v = rng.random(), rng.random()
        if u + v > 1:
            u, v = 1 - u, 1 - v
        out.append([u + 0.5 * v, H * v])
    return out


def test_random_configurations_match_the_brute_force():
    rng = random.Random(11)
    for _ in range(20):
        points = random_inside(rng)
        verdict = TASK.verify(points)
        want = float(brute_force(points)) / (math.sqrt(3) / 4)
        assert verdict.valid and verdict.reward == pytest.approx(want, rel=1e-9)
        check = exact_check(points)
        assert check.status in ("exact", "tolerance_only")  # sampled points may round 1e-17 outside an edge
        if check.status == "exact":
            assert check.value == pytest.approx(want, rel=1e-15)


def test_the_vertices_and_edge_midpoints_by_hand():
    """The 3 vertices and 3 edge midpoints plus 5 more points: the midpoint triangle has area 1/4 of T's,
    but three collinear points (a vertex, a midpoint, a vertex) give 0: a valid configuration scoring 0."""
    pts = [[0, 0], [1, 0], [0.5, H], [0.5, 0], [0.75, H / 2], [0.25, H / 2]] + random_inside(random.Random(1), 5)
    verdict = TASK.verify(pts)
    assert verdict.valid and verdict.reward == 0.0 and "collinear" in verdict.feedback
    assert "points 0, 1 and 3" in verdict.feedback


def test_the_starter_is_inside_exactly_and_scores_its_area():
    verdict = TASK.verify(STARTER)
    # three consecutive points 2pi/11 apart on a circle of radius r = sqrt(3)/6: area 2 r^2 sin(pi/11)^2 sin(2pi/11)
    r, a = math.sqrt(3) / 6, math.pi / 11
    by_hand = 2 * r * r * math.sin(a) ** 2 * math.sin(2 * a) / (math.sqrt(3) / 4)
    assert verdict.valid and verdict.reward == pytest.approx(by_hand, rel=1e-12) and by_hand < TASK.best_known
    assert verdict.reward == pytest.approx(float(brute_force(STARTER)) / (math.sqrt(3) / 4), rel=1e-12)
    assert exact_check(STARTER).status == "exact"


def test_outside_beyond_the_tolerance_is_refused_naming_the_edge():
    pts = [list(p) for p in STARTER]
    pts[3] = [0.5, H + 1e-6]  # above the apex: beyond both slanted edges by 1e-6 * cos(30 deg) ... = 5e-7
    verdict = TASK.verify(pts)
    assert not verdict.valid and "point 3" in verdict.feedback and "edge" in verdict.feedback
    pts[3] = [0.3, -1e-6]
    assert "point 3 = (0.3, -1e-06) is beyond its bottom edge y >= 0 by 1e-06" in TASK.verify(pts).feedback


def test_the_tolerance_is_charged_and_check_exact_names_the_nudge():
    """A point nudged 5e-10 below the bottom edge passes the verifier (tolerance 1e-9) but the area is then
    divided by the enlarged triangle's (height + 5e-10), so nothing is gained; check_exact, at zero
    tolerance, reports it. A 1e-12 nudge, likewise."""
    for nudge in (5e-10, 1e-12):
        pts = [list(p) for p in STARTER]
        low = min(range(11), key=lambda i: pts[i][1])
        pts[low][1] = -nudge
        verdict = TASK.verify(pts)
        area = float(brute_force(pts))
        assert verdict.valid
        assert verdict.reward == pytest.approx(area / ((H + nudge) ** 2 / math.sqrt(3)), rel=1e-12)
        assert verdict.reward < area / (math.sqrt(3) / 4)
        check = exact_check(pts)
        assert check.status == "tolerance_only" and f"point {low} is below the bottom edge by {nudge:.3g}" in check.detail


def test_sqrt3_comparison_is_exact():
    """sqrt(3) a >= b for rationals, against 60-digit decimals, including pairs a hair apart."""
    rng = random.Random(4)
    with localcontext() as ctx:
        ctx.prec = 60
        root3 = Decimal(3).sqrt()
        cases = [(Fraction(rng.randint(-99, 99), rng.randint(1, 99)), Fraction(rng.randint(-99, 99), rng.randint(1, 99)))
                 for _ in range(300)]
        cases += [(Fraction(780), Fraction(1351)), (Fraction(-780), Fraction(-1351)), (Fraction(0), Fraction(0)),
                  (Fraction(1), Fraction(1.7320508075688772)), (Fraction(1), Fraction(1.7320508075688774))]
        for a, b in cases:  # 1351/780 = 1.7320512...: just above sqrt(3)
            want = root3 * Decimal(a.numerator) / Decimal(a.denominator) >= Decimal(b.numerator) / Decimal(b.denominator)
            assert sqrt3_times_at_least(a, b) == want, (a, b)


@pytest.mark.parametrize("returned, words", [
    ([[0.5, 0.2]] * 10, "shape (11, 2)"), ("points", "got str"), ({"pts": STARTER}, "lacks 'points'"),
    ([[0.5, float("nan")]] + STARTER[1:], "NaN"), ([[True, 0.2]] + STARTER[1:], "booleans"),
])
def test_malformed_returns_get_one_line(returned, words):
    verdict = TASK.verify(returned)
    assert not verdict.valid and words in verdict.feedback and "\n" not in verdict.feedback
