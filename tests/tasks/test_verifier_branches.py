"""Verifier branches that decide a reward and that neither the shipped data nor the rest of the
suite reached (issue 31, item 5). Each was found by replacing the branch with its simpler twin
(a dropped constraint, a tolerance of 0, a plain sum for math.fsum, one block for many) and
running the task's tests: they all still passed. Each test here fails on that twin; the list,
branch -> test, is in docs/best_known.md ("Verifier branches")."""

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import minimize

import tasks.families.cap_set.verify
from rewards import Evaluator
from rewards.sandbox import run_program
from tasks import load_task
from tasks.families.bin_packing.verify import Instances, verify_packing
from tasks.families.cap_set.verify import find_line, powers, verify_cap_set
from tasks.families.symreg.verify import REWARD_CAP, verify_predictions

# ---- circle packing: the bottom and top edges of the square, the disk's tolerance -------------


def grid_26():
    """5 x 5 circles of r = 0.1 on a 0.2 grid plus one in the hole at (0.2, 0.2): valid, sum 2.5414."""
    centers = [[0.1 + 0.2 * i, 0.1 + 0.2 * j] for i in range(5) for j in range(5)] + [[0.2, 0.2]]
    return centers, [0.1] * 25 + [0.1 * math.sqrt(2) - 0.1]


@pytest.mark.parametrize("k, y, edge", [(0, 0.05, "bottom edge (y - r < 0)"), (4, 0.95, "top edge (y + r > 1)")])
def test_a_circle_crossing_only_the_bottom_or_top_edge_is_rejected(k, y, edge):
    """Circle 0 sits at (0.1, 0.1), circle 4 at (0.1, 0.9); moved 0.05 outward, each crosses one
    edge and moves away from every neighbour. The left and right edges had tests; these two did not."""
    task = load_task("circle_packing_26")
    centers, radii = grid_26()
    assert task.verify([centers, radii]).valid
    centers[k] = [0.1, y]
    verdict = task.verify([centers, radii])
    assert not verdict.valid and verdict.reward == 0.0
    assert f"circle {k}" in verdict.feedback and edge in verdict.feedback and "by 0.05" in verdict.feedback
    assert "overlap" not in verdict.feedback


def tight_ring_26(push: float):
    """26 touching circles on the largest ring that fits the unit disk (|c| + r = 1), with circle 5
    pushed radially outward by ``push``."""
    s = math.sin(math.pi / 26)
    r = s / (1 + s)
    angles = 2 * np.pi * np.arange(26) / 26
    centers = (1 - r) * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    centers[5] *= (1 - r + push) / (1 - r)
    return centers.tolist(), [r] * 26


def test_the_disk_allows_1e_9_like_the_square():
    """|c| + r <= 1 + 1e-9: 5e-10 outside passes, 2e-9 fails (the disk's tolerance had no test)."""
    task = load_task("circle_packing_26_disk")
    inside = task.verify(list(tight_ring_26(5e-10)))
    assert inside.valid and inside.reward == pytest.approx(26 * math.sin(math.pi / 26) / (1 + math.sin(math.pi / 26)))
    outside = task.verify(list(tight_ring_26(2e-9)))
    assert not outside.valid and "circle 5" in outside.feedback and "leave the unit disk" in outside.feedback


# ---- function minimisation: Keane's sum and upper bound, Mishra's box, the box tolerance ------


def test_keane_rejects_a_sum_above_7_5_d():
    """Every other constraint holds (x_i in (0, 10], prod = 1e6); only sum(x) = 80.2 > 75 fails."""
    verdict = load_task("keane_bump_10").verify([10.0] * 8 + [0.1, 0.1])
    assert not verdict.valid and verdict.reward == 0
    assert verdict.feedback == "infeasible point: sum(x) = 80.2 must be <= 7.5 d = 75 (violated by 5.2)"


def test_keane_rejects_a_coordinate_above_10():
    verdict = load_task("keane_bump_20").verify([10.5] + [1.0] * 19)  # prod 10.5, sum 29.5
    assert not verdict.valid and verdict.feedback == "infeasible point: x[0] = 10.5 must be > 0 and <= 10"


def test_mishra_rejects_x2_below_minus_6_5_inside_the_disk():
    """The disk (x1 + 5)^2 + (x2 + 5)^2 < 25 reaches x2 = -10; the box cuts it at -6.5."""
    task = load_task("mishra_bird")
    assert task.verify([-5.0, -6.5]).valid
    verdict = task.verify([-5.0, -8.0])  # inside the disk: 0 + 9 < 25
    assert not verdict.valid and verdict.feedback == "infeasible point: x[1] = -8 must be >= -6.5 and <= 0"


@pytest.mark.parametrize("x", [[-512 - 5e-10, 0.0], [0.0, 512 + 5e-10]])
def test_the_box_allows_1e_9_on_both_sides(x):
    task = load_task("eggholder")
    assert task.verify(x).valid
    beyond = [v + math.copysign(1.5e-9, v) for v in x]
    assert not task.verify(beyond).valid


# ---- symbolic regression: NMSE below 1e-12 is capped ------------------------------------------


def test_a_near_exact_fit_is_capped_at_12_not_above():
    """NMSE 1e-16 (predictions off by 1e-8 of the spread) scores the cap, as an exact fit does;
    without the floor it would score 16."""
    rng = np.random.default_rng(0)
    heldout = [rng.normal(size=50) for _ in range(3)]
    for offset in (0.0, 1e-8):
        preds = [(y + offset * y.std()).tolist() for y in heldout]
        verdict = verify_predictions(heldout, {"predictions": preds})
        assert verdict.valid and verdict.reward == math.log10(1 + 1e12) == pytest.approx(REWARD_CAP, abs=1e-12)
    assert verdict.metrics["nmse_median"] == pytest.approx(1e-16, rel=1e-3)
    assert verdict.metrics["neg_log10_nmse"] == 12.0


# ---- cap sets: find_line over several blocks of rows ----------------------------------------

def codes(vectors, n):
    return np.array(vectors, dtype=np.int64) @ powers(n)


# A 15-cap in Z_3^4 followed by one line: the only line of the 18 vectors is the last three (found
# by a random greedy search, checked below by brute force).
CAP_15 = [(2, 1, 1, 2), (0, 0, 1, 1), (0, 1, 0, 2), (0, 0, 0, 2), (1, 2, 0, 1), (1, 0, 1, 2), (2, 1, 2, 2),
          (0, 2, 2, 2), (0, 0, 2, 1), (1, 2, 2, 1), (2, 2, 2, 1), (1, 1, 1, 1), (1, 2, 0, 2), (0, 1, 1, 1),
          (1, 0, 0, 0)]
LINE = [(0, 1, 2, 2), (2, 2, 0, 0), (1, 0, 1, 1)]


def lines_by_brute_force(vectors):
    return {frozenset((a, b, c)) for a, b, c in itertools.combinations(vectors, 3)
            if all((x + y + z) % 3 == 0 for x, y, z in zip(a, b, c))}


@pytest.mark.parametrize("block", [1 << 20, 64, 7])
def test_find_line_scans_every_block_of_rows(monkeypatch, block):
    """The set is cut into blocks of rows of at most PAIRS_PER_BLOCK pairs; the shipped tasks never
    need a second block (a cap in Z_3^8 has far fewer than 1024 vectors), so small blocks (3 rows,
    1 row) stand in for large sets. A cap stays a cap at every block size (the (v, v) diagonal is
    masked in the block's own columns), and a line among the last rows only is found (every block
    is scanned, and its row indices are offset by the block's start)."""
    assert lines_by_brute_force(CAP_15) == set() and lines_by_brute_force(CAP_15 + LINE) == {frozenset(LINE)}
    monkeypatch.setattr(tasks.families.cap_set.verify, "PAIRS_PER_BLOCK", block)
    assert find_line(codes(CAP_15, 4), 4) is None
    assert verify_cap_set([list(v) for v in CAP_15], 4).valid
    assert sorted(find_line(codes(CAP_15 + LINE, 4), 4)) == [15, 16, 17]
    verdict = verify_cap_set([list(v) for v in CAP_15 + LINE], 4)
    assert not verdict.valid and "vectors 15 (0, 1, 2, 2), 16 (2, 2, 0, 0) and 17 (1, 0, 1, 1)" in verdict.feedback


# ---- third autocorrelation: sums that need math.fsum -----------------------------------------


def test_heights_whose_float_sum_cancels_are_scored_with_the_exact_sum():
    """[2^53, 1, -2^53]: numpy's sum rounds 2^53 + 1 to 2^53 and returns 0, so the function would
    be rejected ("heights sum to 0") or divide by zero; the exact sum is 1, so C is finite."""
    task = load_task("autocorrelation_third")
    heights = [2.0**53, 1.0, -(2.0**53)]
    assert float(np.sum(heights)) == 0.0 and math.fsum(heights) == 1.0
    verdict = task.verify(heights)
    peak = max(abs(v) for v in np.convolve(heights, heights))  # 2^106, at the ends
    assert verdict.valid and verdict.metrics["C"] == pytest.approx(2 * 3 * peak / 1.0**2, rel=1e-12)


# ---- bin packing: the capacity check at the boundary -------------------------------------------


@pytest.fixture()
def tiny(tmp_path):
    """One data set of one instance, items 100, 50 and 51, capacity 150, in the task's format."""
    np.savez_compressed(tmp_path / "data.npz", capacity=np.array(150), names=np.array(["T"]),
                        items_T=np.array([100, 50, 51], dtype=np.int16), lengths_T=np.array([3]))
    return Instances(tmp_path)


def test_a_bin_filled_exactly_is_valid_and_one_over_is_not(tiny):
    exact = verify_packing(tiny, {"T": [[0, 0, 1]]})  # 100 + 50 = 150 | 51
    assert exact.valid and exact.metrics["bins_T"] == 2
    over = verify_packing(tiny, {"T": [[0, 1, 0]]})  # 100 + 51 = 151 | 50
    assert not over.valid and "bin 0 holds 151 > capacity 150 (over by 1" in over.feedback


# ---- the harnesses (trusted code in the sandbox): rules that decide what the verifier gets ----

def run(name: str, code: str, timeout_s: float = 60):
    task = load_task(name)
    return Evaluator(task, workers=1, timeout_s=timeout_s).evaluate(code)


def greedy_reference(priority, n: int) -> list[tuple]:
    """The cap-set skeleton spelled out: repeatedly add the highest-priority vector that completes
    no line with two chosen ones, ties to the first in itertools.product order (FunSearch's released
    solve() takes np.argmax); a vector scored -inf is never added."""
    vectors = list(itertools.product(range(3), repeat=n))
    score = {v: priority(v, n) for v in vectors}
    chosen: list[tuple] = []
    while True:
        blocked = {tuple(-(a + b) % 3 for a, b in zip(u, w)) for u, w in itertools.combinations(chosen, 2)}
        free = [v for v in vectors if v not in chosen and v not in blocked and score[v] != -math.inf]
        if not free:
            return chosen
        chosen.append(max(free, key=lambda v: score[v]))  # max() keeps the first of equal keys


@pytest.mark.parametrize("body, size", [
    ("1.0 if element.count(0) == 2 else 0.0", 18),  # ties to the last vector give 16 (the paper's Fig. 2a sort)
    ("float(element[3])", 16),  # an unstable sort of the ties gives 18
    ("1.0 if element in ((0, 0, 0, 0), (1, 1, 1, 1)) else -math.inf", 2),  # -inf vectors added would give more
])
def test_the_cap_set_harness_breaks_ties_in_product_order_and_never_adds_minus_inf(body, size):
    priority = eval(f"lambda element, n: {body}", {"math": math})
    assert len(greedy_reference(priority, 4)) == size
    code = f"import math\n\ndef priority(element, n):\n    return {body}\n"
    out = run_program(code, "helix_cap_set_4", 30, 2048, harness=load_task("cap_set_4").harness)
    assert out.status == "ok" and [tuple(v) for v in out.value] == greedy_reference(priority, 4)
    result = run("cap_set_4", code)
    assert result.valid and result.reward == size, result.feedback


def test_the_symreg_harness_keeps_the_best_start_not_the_last():
    """func = cos(5 p0) (1 + p0) x0 + p1 x1 on symreg_physics case 0: BFGS from the first two of the
    harness's three seeded starts ends at train NMSE 0.111, from the third at 0.674. The harness
    keeps the best point any run evaluated, so case 0 is fitted at 0.111."""
    task = load_task("symreg_physics")
    with np.load(task.folder / "data.npz") as data:
        x, y = data["x_train_0"], data["y_train_0"]

    def loss(p):
        return float(np.mean((np.cos(5 * p[0]) * (1 + p[0]) * x[:, 0] + p[1] * x[:, 1] - y) ** 2) / np.var(y))

    starts = np.random.default_rng(0).uniform(0.0, 1.0, (3, 10))  # the harness's seeded starts
    ends = [minimize(loss, s, method="BFGS", options={"maxiter": 1000}).fun for s in starts]
    assert ends[2] > 0.6 and min(ends[:2]) < 0.12
    code = ("import numpy as np\n\ndef func(x, params):\n"
            "    return np.cos(5 * params[0]) * (1 + params[0]) * x[:, 0] + params[1] * x[:, 1]\n")
    out = run_program(code, task.run_entry, 60, task.memory_mb, harness=task.harness, files=task.data_files)
    assert out.status == "ok", out.error
    assert out.value["train_nmse"][0] == pytest.approx(min(ends), rel=1e-6)


def test_the_boston_harness_accepts_a_column_of_predictions():
    """A model that returns an (n, 1) column, as Keras-style models do, is scored like the flat
    starter (RMSE 4.9286): the harness flattens it; the verifier would reject nested lists."""
    starter = load_task("boston_housing").initial_program
    column = starter.replace("return np.asarray(model.predict(X_test))", "return np.asarray(model.predict(X_test)).reshape(-1, 1)")
    assert column != starter
    flat, col = run("boston_housing", starter), run("boston_housing", column)
    assert flat.valid and col.valid and col.reward == flat.reward and col.metrics["rmse"] == pytest.approx(4.9286, abs=1e-4)


IDENTITY = "def dyck_to_perm(path):\n    n = len(path) // 2\n    return {}\n"


@pytest.mark.parametrize("expr", ["[np.int64(i) for i in range(1, n + 1)]", "tuple(range(1, n + 1))", "np.arange(1, n + 1)"])
def test_the_dyck_harness_reads_numpy_integers_and_tuples_as_lists(expr):
    """The identity written with numpy integers, as a tuple or as an array scores what the plain
    list does (the starter, 0.50525); a harness that took only lists of Python ints gave nothing."""
    starter = run("dyck_bijection", "import numpy as np\n\n" + IDENTITY.format("list(range(1, n + 1))"))
    other = run("dyck_bijection", "import numpy as np\n\n" + IDENTITY.format(expr))
    assert starter.valid and other.valid and other.reward == starter.reward == pytest.approx(0.50525189, abs=1e-8)


def test_the_dyck_harness_does_not_read_booleans_as_integers():
    """[True] would pass for the permutation [1] of semilength 1; the harness turns it into no
    output, so n = 1 scores 0 instead of 1 and the mean over n = 1..7 drops by 1/7."""
    code = IDENTITY.format("[True] if n == 1 else list(range(1, n + 1))")
    result = run("dyck_bijection", code)
    assert result.valid and result.reward == pytest.approx(0.50525189 - 1 / 7, abs=1e-8)
    assert "boolean" in result.feedback
