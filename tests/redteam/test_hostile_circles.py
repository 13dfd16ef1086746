"""Red team of the circle-packing family (circle_packing_26, _26_disk, _32, circle_packing_rect_21).

What a cheat can try on a verifier that recomputes the sum of radii from centres and radii:
ride the 1e-9 tolerance (inflate every radius, or scale the whole packing, by just under it),
return more circles than asked, or return absurd numbers hoping for an overflow. Each test runs
the hostile artefact through the real path (``load_task(name).verify`` or the sandboxed
``Evaluator``), checks it gains nothing, and shows on a verifier with that one check taken out
(monkeypatched) that the same artefact would have gained."""

import math
import textwrap

import numpy as np
import pytest

import tasks.families.circles.verify as circles
import tasks.families.rect_packing.verify as rect_packing
from rewards import Evaluator
from tasks import load_task
from tests.helpers.hostile_cases import brute_force_certified_sum
from tests.helpers.hostile_verdicts import with_warnings

SMALL = 0.1 * math.sqrt(2) - 0.1  # the circle that fits between four touching circles of radius 0.1


def square_26():
    """25 touching circles of radius 0.1 filling the unit square, one more between four of them."""
    centers = [[0.1 + 0.2 * i, 0.1 + 0.2 * j] for i in range(5) for j in range(5)] + [[0.2, 0.2]]
    return {"centers": centers, "radii": [0.1] * 25 + [SMALL]}


def square_32():
    """4 rows x 8 columns of touching circles of radius 1/16: sum 2."""
    return {"centers": [[(i + 0.5) / 8, (j + 0.5) / 4] for j in range(4) for i in range(8)], "radii": [1 / 16] * 32}


def disk_26():
    """26 equal circles on a ring, each touching its neighbours and the unit circle."""
    s = math.sin(math.pi / 26)
    r = s / (1 + s)
    angles = 2 * np.pi * np.arange(26) / 26
    return {"centers": ((1 - r) * np.stack([np.cos(angles), np.sin(angles)], axis=1)).tolist(), "radii": [r] * 26}


def rect_21():
    """7 x 3 touching circles of radius 0.1 filling a 1.4 x 0.6 rectangle (perimeter 4): sum 2.1."""
    centers = [[0.1 + 0.2 * (k % 7), 0.1 + 0.2 * (k // 7)] for k in range(21)]
    return {"width": 1.4, "height": 0.6, "centers": centers, "radii": [0.1] * 21}


PACKINGS = {"circle_packing_26": (square_26, 2.5 + SMALL), "circle_packing_32": (square_32, 2.0),
            "circle_packing_26_disk": (disk_26, 26 * math.sin(math.pi / 26) / (1 + math.sin(math.pi / 26))),
            "circle_packing_rect_21": (rect_21, 2.1)}


def inflated(packing, by=4e-10):
    """Every radius grown by ``by``: circles overhang by ``by`` and touching pairs overlap by 2 by, under TOL."""
    return {**packing, "radii": [r + by for r in packing["radii"]]}


def scaled(name, packing):
    """The whole packing blown up about the container's centre, boundary circles overhanging by under TOL."""
    if name == "circle_packing_rect_21":  # the rectangle grows too: w + h = 2 + 8e-10
        s = 1 + 4e-10
        return {"width": packing["width"] * s, "height": packing["height"] * s,
                "centers": (np.array(packing["centers"]) * s).tolist(), "radii": [r * s for r in packing["radii"]]}
    s, middle = (1 + 9e-10, 0.0) if name == "circle_packing_26_disk" else (1 + 1.5e-9, 0.5)
    centers = middle + (np.array(packing["centers"]) - middle) * s
    return {"centers": centers.tolist(), "radii": [r * s for r in packing["radii"]]}


@pytest.mark.parametrize("cheat", ["inflate", "scale"])
@pytest.mark.parametrize("name", PACKINGS)
def test_riding_the_tolerance_buys_nothing(name, cheat, monkeypatch):
    task = load_task(name)
    make, honest_sum = PACKINGS[name]
    honest = task.verify(make())
    assert honest.valid and honest.reward == pytest.approx(honest_sum, abs=1e-12)
    hostile = inflated(make()) if cheat == "inflate" else scaled(name, make())
    verdict = task.verify(hostile)
    assert verdict.valid, verdict.feedback  # within the tolerance: accepted...
    assert verdict.reward <= honest.reward + 1e-15  # ...but charged: no gain
    width, height = (hostile["width"], hostile["height"]) if "width" in hostile else (1.0, 1.0)
    want = brute_force_certified_sum(width, height, hostile["centers"], hostile["radii"], disk="disk" in name)
    assert verdict.reward == pytest.approx(want, abs=1e-13)
    assert verdict.metrics["tolerance_charge"] > 1e-10 and "was charged for violations" in verdict.feedback

    monkeypatch.setattr(circles, "certified_radii", lambda radii, excess, centers: radii)
    monkeypatch.setattr(rect_packing, "certified_radii", lambda radii, excess, centers: radii)
    monkeypatch.setattr(rect_packing, "HALF_PERIMETER", 1e300)  # no rescaling of a rectangle too large by <= TOL
    weakened = task.verify(hostile)
    gain = len(hostile["radii"]) * 3.9e-10 if cheat == "inflate" else 3e-10  # 4e-10 a circle, or the scale
    assert weakened.valid and weakened.reward > honest.reward + gain, (weakened.reward - honest.reward)


def test_the_charge_makes_a_strictly_valid_packing():
    """The certified radii of a packing that rides the tolerance pass the checks with no tolerance at all."""
    hostile = inflated(square_26(), by=4.9e-10)
    centers, radii = np.array(hostile["centers"]), np.array(hostile["radii"])
    assert circles.overlap_problem(centers, radii) is None  # within the tolerance...
    strict = circles.certified_radii(radii, circles.EXCESS["square"](centers, radii), centers)
    x, y = centers[:, 0], centers[:, 1]
    assert (x - strict >= 0).all() and (1 - x - strict >= 0).all() and (y - strict >= 0).all()
    assert (1 - y - strict >= 0).all()
    iu, ju = np.triu_indices(26, 1)
    assert (np.hypot(x[iu] - x[ju], y[iu] - y[ju]) - strict[iu] - strict[ju] >= 0).all()


TOLERANCE_CHEAT = """
import math
def run_packing():
    centers = [[0.1 + 0.2 * i, 0.1 + 0.2 * j] for i in range(5) for j in range(5)] + [[0.2, 0.2]]
    radii = [0.1] * 25 + [0.1 * math.sqrt(2) - 0.1]
    return centers, [r + {by} for r in radii], 99.0
"""


def test_a_program_riding_the_tolerance_scores_no_more_through_the_sandbox(monkeypatch):
    task = load_task("circle_packing_26")
    evaluator = Evaluator(task, workers=1)
    honest = evaluator.evaluate(TOLERANCE_CHEAT.format(by=0.0))
    hostile = evaluator.evaluate(TOLERANCE_CHEAT.format(by=4e-10))
    assert honest.valid and hostile.valid, hostile.feedback
    assert honest.reward == pytest.approx(2.5 + SMALL, abs=1e-12) and hostile.reward <= honest.reward
    monkeypatch.setattr(circles, "certified_radii", lambda radii, excess, centers: radii)
    weakened = evaluator.evaluate(TOLERANCE_CHEAT.format(by=4e-10))
    assert weakened.reward > honest.reward + 1e-8  # 26 x 4e-10 = 1.04e-8 more, for nothing


def with_extra_circle(name):
    """One circle more than the task asks for, in a free gap: a larger sum if the count went unchecked."""
    packing = PACKINGS[name][0]()
    gap = {"circle_packing_26": ([0.4, 0.4], SMALL), "circle_packing_32": ([0.25, 0.25], 1 / 16 * (math.sqrt(2) - 1)),
           "circle_packing_26_disk": ([0.0, 0.0], 0.5), "circle_packing_rect_21": ([0.2, 0.2], SMALL)}[name]
    return {**packing, "centers": packing["centers"] + [gap[0]], "radii": packing["radii"] + [gap[1]]}


@pytest.mark.parametrize("name", PACKINGS)
def test_one_circle_too_many_is_rejected(name, monkeypatch):
    task = load_task(name)
    n = len(PACKINGS[name][0]()["radii"])
    verdict = task.verify(with_extra_circle(name))
    assert not verdict.valid and f"centers must have shape ({n}, 2), got shape ({n + 1}, 2)" in verdict.feedback
    assert "\n" not in verdict.feedback
    real_as_array = circles.as_array
    monkeypatch.setattr(circles, "as_array", lambda value, shape, name, usage: real_as_array(value, np.shape(value), name, usage))
    monkeypatch.setattr(rect_packing, "as_array", circles.as_array)
    weakened = task.verify(with_extra_circle(name))
    assert weakened.valid and weakened.reward > PACKINGS[name][1] + 0.01, weakened.feedback


ABSURD = {
    "centre 1e308, radius -1e308": lambda p: {**p, "centers": [[1e308, 1e308]] + p["centers"][1:],
                                              "radii": [-1e308] + p["radii"][1:]},
    "everything 1e308": lambda p: {**p, "centers": [[1e308, -1e308]] * len(p["radii"]), "radii": [1e308] * len(p["radii"])},
    "integer 10**400": lambda p: {**p, "radii": [10**400] + p["radii"][1:]},
}


@pytest.mark.parametrize("absurd", ABSURD)
@pytest.mark.parametrize("name", PACKINGS)
def test_absurd_numbers_get_one_line_and_no_overflow(name, absurd, monkeypatch):
    task = load_task(name)
    hostile = ABSURD[absurd](PACKINGS[name][0]())
    verdict, caught = with_warnings(lambda: task._verify(hostile))  # the verifier itself, without Task.verify's guard
    assert not caught and not verdict.valid and "\n" not in verdict.feedback
    assert all(math.isfinite(v) for v in verdict.metrics.values()) and "inf" not in verdict.feedback
    assert "absurd values" in verdict.feedback or "non-numeric entries" in verdict.feedback, verdict.feedback
    if absurd != "everything 1e308":
        return  # (10**400 makes an object array, rejected by type whatever the limit)
    monkeypatch.setattr(circles, "LIMIT", math.inf)
    weakened, caught = with_warnings(lambda: task._verify(hostile))
    assert any("overflow" in str(w.message) for w in caught) and not weakened.valid
    assert not all(math.isfinite(v) for v in weakened.metrics.values()) or "inf" in weakened.feedback


@pytest.mark.parametrize("side", [10**400, -(10**400), 1e308])
def test_an_absurd_rectangle_side_is_one_line(side, monkeypatch):
    task = load_task("circle_packing_rect_21")
    verdict, caught = with_warnings(lambda: task._verify({**rect_21(), "width": side, "height": side}))
    assert not caught and not verdict.valid and "width must be" in verdict.feedback and "\n" not in verdict.feedback
    monkeypatch.setattr(rect_packing, "LIMIT", math.inf)
    weakened = task.verify({**rect_21(), "width": side, "height": side})  # through the guard: still no crash...
    assert "could not check the result: OverflowError" in weakened.feedback or "inf" in weakened.feedback


def test_numpy_dtypes_from_the_sandbox_score_like_floats():
    """float32 arrays and an int64 'sum' come back as JSON numbers: scored like the float64 packing."""
    code = textwrap.dedent("""
        import numpy as np
        def run_packing():
            centers = np.array([[0.125 + 0.25 * i, 0.125 + 0.25 * j] for i in range(4) for j in range(4)]
                               + [[0.5, 0.5]] * 10, dtype=np.float32)
            radii = np.array([0.125] * 16 + [0] * 10, dtype=np.float32)
            return centers, radii, np.int64(7)
    """)
    result = Evaluator(load_task("circle_packing_26"), workers=1).evaluate(code)
    assert result.valid and result.reward == 2.0, result.feedback
