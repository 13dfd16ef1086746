"""Two AlphaResearch / AlphaEvolve geometry problems (issue 13, item 4, part A):

* spherical_code_30: 30 points on S^2, reward the minimum pairwise angle in radians
  (AlphaResearch appendix D.1). Checked against the Platonic solids, whose minimum angles are
  known in closed form, and against a brute-force pairwise loop.
* circle_packing_rect_21: 21 circles in a rectangle [0, w] x [0, h] with w + h <= 2, reward the
  sum of radii (AlphaEvolve B.13, BES G.2). Checked against hand-built grids and AlphaEvolve's
  published 21-circle construction (sum 2.3658322).

Starters and hostile programs go through the real sandbox."""

import itertools
import math
import runpy

import numpy as np
import pytest

from rewards import Evaluator
from tasks import load_task
from tasks.families.spherical_code.verify import min_angle, verify_code
from tests.helpers.hostile_cases import brute_force_certified_sum

SPHERE = load_task("spherical_code_30")
RECT = load_task("circle_packing_rect_21")
PHI = (1 + math.sqrt(5)) / 2


# ---------------------------------------------------------------- spherical code: references

def brute_min_angle(points) -> float:
    """theta_min by a plain double loop: normalise with math.hypot, angle with math.acos."""
    unit = [[c / math.hypot(*p) for c in p] for p in points]
    best = math.pi
    for p, q in itertools.combinations(unit, 2):
        best = min(best, math.acos(max(-1.0, min(1.0, sum(a * b for a, b in zip(p, q))))))
    return best


OCTAHEDRON = [[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]]
ICOSAHEDRON = [v for s in (-1, 1) for t in (-1, 1) for v in ([0, s, t * PHI], [s, t * PHI, 0], [t * PHI, 0, s])]
CUBE = [[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]
TETRAHEDRON = [[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]

# (points, closed-form minimum angle): neighbours of the icosahedron subtend arctan(2) = 63.4349 deg
PLATONIC = {
    "octahedron": (OCTAHEDRON, math.pi / 2),
    "icosahedron": (ICOSAHEDRON, math.atan(2.0)),
    "cube": (CUBE, math.acos(1 / 3)),
    "tetrahedron": (TETRAHEDRON, math.acos(-1 / 3)),
    "antipodal pair": ([[0, 0, 1], [0, 0, -1]], math.pi),
}


def fibonacci_30():
    return runpy.run_path(str(SPHERE.folder / "initial_program.py"))["run_spherical_code"]()


@pytest.mark.parametrize("name", PLATONIC)
def test_platonic_solids_have_their_known_minimum_angle(name):
    points, want = PLATONIC[name]
    assert len(ICOSAHEDRON) == 12 and len({tuple(p) for p in ICOSAHEDRON}) == 12
    assert brute_min_angle(points) == pytest.approx(want, abs=1e-12)  # the reference itself
    assert min_angle(points) == pytest.approx(want, abs=1e-14)
    verdict = verify_code(points, len(points), 1.0)  # the core takes n
    assert verdict.valid and verdict.reward == pytest.approx(want, abs=1e-14)
    assert verdict.metrics["min_angle_deg"] == pytest.approx(math.degrees(want), abs=1e-12)


def test_icosahedron_is_63_435_degrees_and_octahedron_90():
    assert math.degrees(verify_code(ICOSAHEDRON, 12, 1.0).reward) == pytest.approx(63.43494882, abs=1e-8)
    assert math.degrees(verify_code(OCTAHEDRON, 6, 1.0).reward) == pytest.approx(90.0, abs=1e-12)


def test_the_task_is_n_30_and_refuses_other_counts():
    assert not SPHERE.verify(ICOSAHEDRON).valid  # a valid 12-point code is not a 30-point one
    for rows in (29, 31):
        pts = np.random.default_rng(rows).normal(size=(rows, 3)).tolist()
        verdict = SPHERE.verify(pts)
        assert not verdict.valid and verdict.reward == 0 and f"got shape ({rows}, 3)" in verdict.feedback
    verdict = SPHERE.verify(np.zeros((30, 2)).tolist())
    assert not verdict.valid and "got shape (30, 2)" in verdict.feedback


def test_fibonacci_starter_and_random_codes_agree_with_brute_force():
    pts = fibonacci_30()
    assert SPHERE.verify(pts.tolist()).reward == pytest.approx(brute_min_angle(pts.tolist()), abs=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(5):
        pts = rng.normal(size=(30, 3)) * rng.uniform(0.1, 10, size=(30, 1))
        assert SPHERE.verify(pts.tolist()).reward == pytest.approx(brute_min_angle(pts.tolist()), abs=1e-9)


def test_best_known_is_the_papers_reference_value():
    """AlphaResearch D.1: cos(theta*) = 0.7815518750949873 => theta* = 0.6736467551690225 rad = 38.5971 deg.
    The paper's headline 0.673651 is 38.5974 deg, above its own reference: a rounding slip."""
    assert SPHERE.best_known == pytest.approx(math.acos(0.7815518750949873), abs=1e-15)
    assert math.degrees(SPHERE.best_known) == pytest.approx(38.5971, abs=1e-4)
    assert abs(SPHERE.best_known - 0.673651) < 5e-6


def test_rows_are_normalised_so_scale_does_not_count():
    scales = [1e-5, 1e200, 3.0, 0.5, 7e-3, 2e-9]  # all above MIN_NORM = 1e-9
    scaled = [[c * scales[i] for c in p] for i, p in enumerate(OCTAHEDRON)]
    verdict = verify_code(scaled, 6, 1.0)
    assert verdict.valid and verdict.reward == pytest.approx(math.pi / 2, abs=1e-14)
    assert "rows were normalised" in verdict.feedback
    pts = fibonacci_30()
    assert SPHERE.verify((pts * 1000).tolist()).reward == pytest.approx(SPHERE.verify(pts.tolist()).reward, abs=1e-14)
    assert "normalised" not in SPHERE.verify(pts.tolist()).feedback


def test_small_angles_are_exact_not_arccos_rounded():
    """arccos(cos(1e-7)) = 9.996e-8, off by 4e-4 relative: the verifier must compute the angle another way."""
    pts = fibonacci_30()
    pts[0], pts[1] = [1.0, 0.0, 0.0], [math.cos(1e-7), math.sin(1e-7), 0.0]  # 1e-7 rad apart on the equator
    verdict = SPHERE.verify(pts.tolist())
    assert verdict.valid and verdict.reward == pytest.approx(1e-7, rel=1e-6)


@pytest.mark.parametrize("mutate, words", [
    (lambda p: p.__setitem__(4, [0.0, 0.0, 0.0]), "zero or nearly zero vectors"),
    (lambda p: p.__setitem__(4, [1e-10, 0.0, 0.0]), "point 4 has |p| = 1e-10"),
    (lambda p: p.__setitem__(7, list(p[3])), "duplicate points: 1 pair(s)"),
    (lambda p: p.__setitem__(7, [2 * c for c in p[3]]), "first: points 3 and 7"),  # same direction, other length
    (lambda p: p[2].__setitem__(1, float("nan")), "NaN or infinity (1 point(s), first: point 2)"),
    (lambda p: p[9].__setitem__(0, float("inf")), "NaN or infinity"),
    (lambda p: p[0].__setitem__(0, True), "booleans"),
    (lambda p: p[0].__setitem__(0, "1.0"), "non-numeric"),
    (lambda p: p[0].append(0.0), "rectangular array"),
])
def test_hostile_point_sets_are_rejected_with_the_reason(mutate, words):
    pts = fibonacci_30().tolist()
    mutate(pts)
    verdict = SPHERE.verify(pts)
    assert not verdict.valid and verdict.reward == 0.0
    assert words in verdict.feedback, verdict.feedback


@pytest.mark.parametrize("returned, words", [
    (None, "got NoneType"), (0.67, "got float"), ("points", "got str"), ({}, "lacks 'points'"),
    ([], "got shape (0,)"), ({"score": 3.14}, "lacks 'points'"),
])
def test_malformed_returns_are_rejected(returned, words):
    verdict = SPHERE.verify(returned)
    assert not verdict.valid and words in verdict.feedback


def test_a_reported_score_is_ignored():
    pts = fibonacci_30().tolist()
    verdict = SPHERE.verify({"points": pts, "score": 3.14, "min_angle": 3.14})
    assert verdict.valid and verdict.reward == pytest.approx(brute_min_angle(pts), abs=1e-12)


# ---------------------------------------------------------------- rectangle packing: references

def brute_force_valid(width, height, centers, radii, tol=1e-9):
    """The constraints written out one at a time."""
    if not (width > 0 and height > 0 and width + height <= 2 + tol):
        return False
    for i, ((x, y), r) in enumerate(zip(centers, radii)):
        if r < 0 or x - r < -tol or y - r < -tol or x + r > width + tol or y + r > height + tol:
            return False
        for (x2, y2), r2 in zip(centers[i + 1:], radii[i + 1:]):
            if math.hypot(x - x2, y - y2) < r + r2 - tol:
                return False
    return True


def grid(cols, rows, width, height, n=21):
    """The first n cells of a cols x rows grid of touching circles filling width x height (square cells)."""
    r = width / (2 * cols)
    assert math.isclose(height, 2 * r * rows)
    centers = [[r + 2 * r * (k % cols), r + 2 * r * (k // cols)] for k in range(n)]
    return {"width": width, "height": height, "centers": centers, "radii": [r] * n}


# AlphaEvolve's 21 circles (x, y, r), google-deepmind/alphaevolve_results, "Visualization of 21 Circle
# Packing" (Novikov et al. 2025, B.13); its check uses the bounding box, so we translate it to the origin.
ALPHAEVOLVE_21 = [
    [0.5802742936796795, 0.3984465473580798, 0.13882521515344715],
    [0.18156155272356161, 0.43652064487907954, 0.11292170430401849],
    [0.20571117563521127, 0.18769683629756662, 0.13707127960492216],
    [0.7999784154376184, 0.3488287602048943, 0.08641205067835192],
    [0.7827643894440595, 0.5465250863733603, 0.11203229938326592],
    [0.46121144602322633, 0.1696883947733613, 0.11906284958108318],
    [0.5802743126915707, 0.8999564216611383, 0.12740019460035393],
    [0.19260149781970107, 0.9033950007640802, 0.12396159400193699],
    [0.18372300046198145, 0.6645152241131472, 0.11508312024224436],
    [0.967947166948219, 0.9033949590982809, 0.12396160364412899],
    [0.7754366350452009, 0.9526151108548776, 0.07474151216459557],
    [0.5802743032771106, 0.6549139948297392, 0.11764223223100972],
    [0.9768256202938239, 0.6645151601528155, 0.11508313124448671],
    [0.7773824857710533, 0.7681879617308184, 0.10969590179745901],
    [0.38316613883650913, 0.7681879771929849, 0.10969589384897398],
    [0.37778419905713695, 0.546525102225111, 0.11203230781873637],
    [0.3605701631556298, 0.3488287597735352, 0.08641205932413132],
    [0.699337146134056, 0.16968839617678885, 0.11906285052901798],
    [0.9548374333711164, 0.18769685433053626, 0.1370712966337934],
    [0.38511201030764153, 0.952615094644837, 0.07474148866158556],
    [0.9789869570840519, 0.43652062911558004, 0.11292164405328059],
]


def alphaevolve_21():
    x0 = min(x - r for x, _, r in ALPHAEVOLVE_21)
    y0 = min(y - r for _, y, r in ALPHAEVOLVE_21)
    centers = [[x - x0, y - y0] for x, y, _ in ALPHAEVOLVE_21]
    radii = [r for _, _, r in ALPHAEVOLVE_21]
    width = max(x + r for (x, _), r in zip(centers, radii))
    height = max(y + r for (_, y), r in zip(centers, radii))
    return {"width": width, "height": height, "centers": centers, "radii": radii}


def test_alphaevolve_construction_is_valid_with_its_published_sum():
    packing = alphaevolve_21()
    assert brute_force_valid(packing["width"], packing["height"], packing["centers"], packing["radii"])
    assert packing["width"] + packing["height"] == pytest.approx(2.0, abs=1e-12)
    verdict = RECT.verify(packing)
    assert verdict.valid, verdict.feedback
    want = math.fsum(packing["radii"])
    assert want == pytest.approx(2.3658322, abs=1e-7)  # AlphaEvolve: 2.3658; the human record is 2.364
    # the first paper's packing; AlphaEvolve V2's (tests/tasks/references/) sets best_known 1.5e-7 higher
    assert verdict.reward == pytest.approx(want, abs=1e-14) and RECT.best_known - 2e-7 < verdict.reward < RECT.best_known
    assert verdict.metrics["perimeter"] == pytest.approx(4.0, abs=1e-12)


def test_alphaevolve_construction_fails_in_a_smaller_rectangle():
    packing = alphaevolve_21()
    packing["height"] -= 1e-6  # the top circles now stick out by 1e-6
    verdict = RECT.verify(packing)
    assert not verdict.valid and "top edge" in verdict.feedback and "by 1e-06" in verdict.feedback


@pytest.mark.parametrize("cols, rows, width, height, want", [
    (21, 1, 42 / 22, 2 / 22, 21 / 22),  # one row: w + h = 44 r = 2, r = 1/22
    (7, 3, 1.4, 0.6, 2.1),               # 7 x 3 touching circles of r = 0.1
    (5, 5, 1.0, 1.0, 2.1),               # the starter's grid: 21 of 25 cells of the unit square
])
def test_hand_built_grids_get_their_exact_sum_and_reported_sums_are_ignored(cols, rows, width, height, want):
    packing = grid(cols, rows, width, height)
    assert brute_force_valid(packing["width"], packing["height"], packing["centers"], packing["radii"])
    verdict = RECT.verify({**packing, "sum_radii": 100.0, "score": 100.0})
    assert verdict.valid and verdict.reward == pytest.approx(want, abs=1e-12), verdict.feedback


def test_tolerance_is_1e_9_absolute():
    packing = grid(7, 3, 1.4, 0.6)
    assert RECT.verify({**packing, "height": 0.6 + 5e-10}).valid  # w + h = 2 + 5e-10
    verdict = RECT.verify({**packing, "height": 0.6 + 2e-9})
    assert not verdict.valid and "perimeter too large" in verdict.feedback and "exceeds 2 by 2e-09" in verdict.feedback
    assert RECT.verify({**packing, "radii": [0.1 + 4e-10] * 21}).valid  # neighbours overlap by 8e-10
    verdict = RECT.verify({**packing, "radii": [0.1] * 20 + [0.1 + 2e-9]})  # the top-right corner circle
    assert not verdict.valid and "overlap: 2 pair(s)" in verdict.feedback and "circles 13 and 20" in verdict.feedback
    assert "1 circle(s) leave the rectangle" in verdict.feedback and "circle 20" in verdict.feedback


@pytest.mark.parametrize("change, words", [
    ({"width": 1.5, "height": 1.5}, "perimeter too large: 2(w + h) = 6 > 4"),
    ({"width": -1.0, "height": 3.0}, "width must be > 0"),
    ({"width": 0.0}, "width must be > 0"),
    ({"width": True}, "width must be a number, got bool"),
    ({"height": "0.6"}, "height must be a number, got str"),
    ({"height": float("nan")}, "height must be finite"),
    ({"width": float("inf")}, "width must be finite"),
    ({"width": [1.4]}, "width must be a number, got list"),
    ({"radii": [0.1] * 8 + [0.15] + [0.1] * 12}, "overlap: 4 pair(s) of circles overlap; worst: circles "),
    ({"radii": [0.1] * 20 + [-0.1]}, "negative radius: 1 circle(s)"),
    ({"radii": [0.1] * 20 + [float("nan")]}, "radii contains NaN"),
    ({"radii": [0.1] * 20}, "radii must have shape (21,)"),
    ({"centers": [[0.1, 0.1]] * 20}, "centers must have shape (21, 2)"),
    ({"centers": [[0.1, 0.1, 0.0]] * 21}, "centers must have shape (21, 2)"),
])
def test_hostile_packings_are_rejected_with_the_reason(change, words):
    verdict = RECT.verify({**grid(7, 3, 1.4, 0.6), **change})
    assert not verdict.valid and verdict.reward == 0.0
    assert words in verdict.feedback, verdict.feedback


@pytest.mark.parametrize("returned, words", [
    (None, "got NoneType"), ([1.4, 0.6, [[0, 0]] * 21, [0.1] * 21], "got list"),
    ({"centers": [[0.1, 0.1]] * 21, "radii": [0.0] * 21}, "lacks width, height"),
])
def test_malformed_returns_are_rejected_naming_the_format(returned, words):
    verdict = RECT.verify(returned)
    assert not verdict.valid and words in verdict.feedback and '"width": w' in verdict.feedback


def test_rect_verifier_agrees_with_brute_force_on_random_packings():
    rng = np.random.default_rng(1)
    outcomes, charged = set(), []
    for _ in range(150):
        width = rng.uniform(0.3, 1.7)
        height = 2 - width + rng.choice([0.0, -0.01, 3e-9])
        centers = rng.uniform(0, 1, size=(21, 2)) * [width, height]
        d = np.linalg.norm(centers[:, None] - centers[None], axis=2) + np.eye(21) * 9
        radii = np.minimum.reduce([centers[:, 0], centers[:, 1], width - centers[:, 0], height - centers[:, 1],
                                   d.min(axis=1) / 2])
        radii *= rng.choice([1.0, 1.0 + 1e-7, 1.3], size=21, p=[0.9, 0.05, 0.05])  # some overlap by ~1e-8 or more
        want = brute_force_valid(width, height, centers.tolist(), radii.tolist())
        verdict = RECT.verify({"width": width, "height": height, "centers": centers.tolist(), "radii": radii.tolist()})
        assert verdict.valid == want
        # violations within the tolerance are charged (tasks/families/circles/verify.py, certified_radii)
        certified = brute_force_certified_sum(width, height, centers.tolist(), radii.tolist())
        assert verdict.reward == (pytest.approx(certified, abs=1e-12) if want else 0.0)
        charged.append(want and math.fsum(radii) - certified > 1e-12)
        outcomes.add(want)
    assert outcomes == {True, False} and any(charged)  # some packings were accepted only within the tolerance


def test_render_draws_the_programs_rectangle():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    render = runpy.run_path(str(RECT.folder / "render.py"))["render"]
    fig, ax = plt.subplots()
    render(grid(7, 3, 1.4, 0.6), ax)
    rects = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert [(r.get_width(), r.get_height()) for r in rects] == [(1.4, 0.6)]
    assert "sum of radii 2.100000" in ax.get_xlabel()
    plt.close(fig)


# ---------------------------------------------------------------- both, through the real sandbox

def test_starters_score_through_the_sandbox():
    sphere = Evaluator(SPHERE, workers=1).evaluate(SPHERE.initial_program)
    assert sphere.valid, sphere.feedback
    assert sphere.reward == pytest.approx(brute_min_angle(fibonacci_30().tolist()), abs=1e-12)
    assert sphere.reward == pytest.approx(0.5714248, abs=1e-6)  # 32.74 deg, ratio 0.848 of 0.673647
    rect = Evaluator(RECT, workers=1).evaluate(RECT.initial_program)
    assert rect.valid and rect.reward == pytest.approx(2.1, abs=1e-12), rect.feedback


HOSTILE_SPHERE = {
    # claims a perfect score next to the Fibonacci points: scored on the points
    "reported": ("return {'points': fibonacci_sphere(30), 'score': 3.14, 'min_angle': 3.14}", True),
    "scaled": ("return fibonacci_sphere(30) * 1e6", True),  # same directions: same reward
    "zero": ("p = fibonacci_sphere(30); p[5] = 0; return p", False),
    "nan": ("p = fibonacci_sphere(30); p[5, 1] = np.nan; return p", False),
    "count": ("return fibonacci_sphere(31)", False),
    "duplicate": ("p = fibonacci_sphere(30); p[6] = 3 * p[5]; return p", False),
}


@pytest.mark.parametrize("name", HOSTILE_SPHERE)
def test_hostile_sphere_programs_do_not_lift_the_reward(name):
    body, valid = HOSTILE_SPHERE[name]
    code = SPHERE.initial_program.replace("    return fibonacci_sphere(30)", "    " + body)
    assert code != SPHERE.initial_program
    result = Evaluator(SPHERE, workers=1).evaluate(code)
    assert result.valid == valid, result.feedback
    assert result.reward == (pytest.approx(0.5714248302418636, abs=1e-12) if valid else 0.0)


HOSTILE_RECT = {
    "reported": ('return {"width": width, "height": height, "centers": centers, "radii": radii, "sum_radii": 99.0}',
                 True),
    "perimeter": ('return {"width": 1.2, "height": 1.2, "centers": centers * 1.2, "radii": radii * 1.2}', False),
    "overlap": ('return {"width": width, "height": height, "centers": centers, "radii": radii * 1.5}', False),
    "nan": ('return {"width": width, "height": float("nan"), "centers": centers, "radii": radii}', False),
    "negative_side": ('return {"width": -8.0, "height": 10.0, "centers": centers, "radii": radii}', False),
    "tuple": ("return width, height, centers, radii", False),
}


@pytest.mark.parametrize("name", HOSTILE_RECT)
def test_hostile_rect_programs_do_not_lift_the_reward(name):
    body, valid = HOSTILE_RECT[name]
    old = '    return {"width": width, "height": height, "centers": centers, "radii": radii}'
    code = RECT.initial_program.replace(old, "    " + body)
    assert code != RECT.initial_program
    result = Evaluator(RECT, workers=1).evaluate(code)
    assert result.valid == valid, result.feedback
    assert result.reward == (pytest.approx(2.1, abs=1e-12) if valid else 0.0)
