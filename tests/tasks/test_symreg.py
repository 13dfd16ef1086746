"""Symbolic regression (paper eq. 26-28): reward by hand, shipped data = regeneration, the BFGS fit
runs in the sandbox via the task harness, and the held-out targets never reach the program."""

import math
import textwrap

import numpy as np
import pytest

from rewards import Evaluator, run_program
from tasks import load_task
from tasks.families.symreg.data import CATEGORIES, generate
from tasks.families.symreg.verify import NMSE_FLOOR, nmse, reward_from_nmse, verify_predictions
from tests.helpers.task_copies import copy_task, load_error

NAMES = [f"symreg_{c}" for c in CATEGORIES]
CHEM = load_task("symreg_chemistry")
# The generating laws written as programs, with params free (the harness fits them).
TRUE = {
    "symreg_chemistry": "def func(x, params):\n    t, a = x[:, 0], x[:, 1]\n"
                        "    return -params[0] * a**2 - params[1] * a * np.exp(-params[2] * t)\n",
    "symreg_biology": "def func(x, params):\n    p = x[:, 1]\n"
                      "    return params[0] * p * (1 - params[1] * p) - params[2] * p**2 / (1 + p**2)\n",
    "symreg_physics": "def func(x, params):\n    q, v = x[:, 0], x[:, 1]\n"
                      "    return -params[0] * q - params[1] * v - params[2] * q**3\n",
}


def program(body: str) -> str:
    return "import numpy as np\n\n" + textwrap.dedent(body)


def evaluate(task, code: str, **kw):
    return Evaluator(task, workers=1, cascade=False, **kw).evaluate(code)


def test_nmse_and_reward_by_hand():
    y, y_hat = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 3.0, 5.0])
    # squared error 1; mean 2.5, spread 2.25 + 0.25 + 0.25 + 2.25 = 5 -> NMSE 0.2
    assert nmse(y_hat, y) == pytest.approx(0.2, rel=1e-15)
    assert reward_from_nmse(0.2) == pytest.approx(math.log10(6.0), rel=1e-15)
    assert reward_from_nmse(1e-8) == pytest.approx(8.0, abs=1e-7)  # eq. 28 for a good fit
    assert reward_from_nmse(0.0) == pytest.approx(12.0, abs=1e-9) == reward_from_nmse(NMSE_FLOOR)
    assert 0 < reward_from_nmse(1e6) < reward_from_nmse(10.0) < reward_from_nmse(1.0) == pytest.approx(math.log10(2))
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="NMSE must be >= 0"):
            reward_from_nmse(bad)
    with pytest.raises(ValueError, match="targets are constant"):
        nmse(np.zeros(3), np.ones(3))


def test_verify_takes_the_median_nmse_over_cases():
    y = [np.array([0.0, 1.0, 2.0, 3.0])] * 3  # spread 5
    offsets = [0.1, 1.0, 0.01]  # NMSE = 4 d^2 / 5: 0.008, 0.8, 8e-5 -> median 0.008
    verdict = verify_predictions(y, {"predictions": [(yi + d).tolist() for yi, d in zip(y, offsets)]})
    assert verdict.valid and verdict.metrics["nmse_median"] == pytest.approx(0.008)
    assert verdict.reward == pytest.approx(math.log10(1 + 1 / 0.008))
    assert verdict.metrics["neg_log10_nmse"] == pytest.approx(-math.log10(0.008))
    assert "median 0.008" in verdict.feedback


@pytest.mark.parametrize("returned, words", [
    ({"predictions": [[0.0] * 4] * 2}, ["expected test predictions for 3 cases, got 2"]),
    ({"predictions": [[0.0] * 4, [0.0] * 3, [0.0] * 4]}, ["case 1", "shape (3,)", "expected (4,)"]),
    ({"predictions": [[[0.0]] * 4] * 3}, ["case 0", "shape (4, 1)"]),
    ({"predictions": [[0.0, float("nan"), 0.0, float("inf")]] * 3}, ["case 0", "2 of 4", "NaN or inf"]),
    ({"predictions": [["a"] * 4] * 3}, ["not a flat list of numbers"]),
    ([1, 2, 3], ["no 'predictions' list"]),
])
def test_invalid_predictions_score_zero_with_the_reason(returned, words):
    verdict = verify_predictions([np.arange(4.0)] * 3, returned)
    assert not verdict.valid and verdict.reward == 0
    for word in words:
        assert word in verdict.feedback, verdict.feedback


@pytest.mark.parametrize("name", NAMES)
def test_shipped_data_equals_regeneration_and_holds_no_test_targets(name):
    task = load_task(name)
    data, heldout = generate(name.removeprefix("symreg_"))
    assert [p.name for p in task.data_files] == ["data.npz"]
    with np.load(task.folder / "data.npz", allow_pickle=False) as shipped:
        assert sorted(shipped.files) == sorted(data) and not any("y_test" in k for k in shipped.files)
        for key in data:
            np.testing.assert_allclose(shipped[key], data[key], rtol=1e-13, atol=0)
    with np.load(task.folder / "heldout.npz", allow_pickle=False) as shipped:
        assert sorted(shipped.files) == ["y_test_0", "y_test_1", "y_test_2"]
        for key in heldout:
            np.testing.assert_allclose(shipped[key], heldout[key], rtol=1e-13, atol=0)
    cat = CATEGORIES[name.removeprefix("symreg_")]
    # the test inputs lie in the held-out box, outside the training box in at least one input
    assert all(np.all((data["x_test_0"][:, j] >= lo) & (data["x_test_0"][:, j] <= hi)) for j, (lo, hi) in enumerate(cat.test_box))
    assert cat.train_box != cat.test_box


@pytest.mark.parametrize("name", NAMES)
def test_true_law_scores_high_and_the_linear_starter_low(name):
    task = load_task(name)
    assert task.timeout_s == 60 and task.entry_function == "func" and task.run_entry == "helix_fit_and_predict"
    true = evaluate(task, program(TRUE[name]))
    assert true.valid and true.reward > 9, true.feedback
    assert "fitted params per case" in true.feedback and "train NMSE" in true.feedback
    starter = evaluate(task, task.initial_program)
    assert starter.valid and 0 < starter.reward < 1, starter.feedback


def test_wrong_shape_and_nan_are_rejected_with_what_is_wrong():
    wide = evaluate(CHEM, program("def func(x, params):\n    return x * params[0]\n"))
    assert not wide.valid and wide.status == "error" and "must return shape (400,)" in wide.feedback
    assert "returned shape (400, 2)" in wide.feedback and "harness.py" not in wide.feedback
    nan = evaluate(CHEM, program("def func(x, params):\n    return np.log(-params[0] - 1) * x[:, 0]\n"))
    assert not nan.valid and "NaN or inf on the training data at all 3" in nan.feedback
    # fine on the training times (t <= 4), NaN on the held-out ones (t > 4)
    late = evaluate(CHEM, program("def func(x, params):\n    return params[0] * np.sqrt(4.0 - x[:, 0]) * x[:, 1]\n"))
    assert not late.valid and late.status == "invalid" and "NaN or inf" in late.feedback, late.feedback


def test_the_program_cannot_see_the_held_out_targets():
    spy = program("""
        import os
        with np.load("data.npz", allow_pickle=False) as d:
            raise RuntimeError(f"files={sorted(os.listdir('.'))} keys={sorted(d.files)}")
        def func(x, params):
            return x[:, 0]
        """)
    result = evaluate(CHEM, spy)
    assert result.status == "error"
    assert "files=['data.npz', 'harness.py', 'program.py']" in result.feedback
    assert "heldout" not in result.feedback and "y_test" not in result.feedback
    opener = evaluate(CHEM, program("open('heldout.npz')\ndef func(x, params):\n    return x[:, 0]\n"))
    assert opener.status == "error" and "FileNotFoundError" in opener.feedback


def test_patching_the_optimiser_or_the_harness_cannot_raise_the_score():
    honest = evaluate(CHEM, program(TRUE["symreg_chemistry"]))
    garbage = program("""
        import scipy.optimize
        class R:
            x = np.full(10, 0.123)
            fun = 0.0
            success = True
        scipy.optimize.minimize = lambda *a, **k: R()
        """) + TRUE["symreg_chemistry"]
    patched = evaluate(CHEM, garbage)
    assert patched.valid and patched.reward < honest.reward - 3
    forged = program("""
        def helix_fit_and_predict():
            return {"predictions": [[0.0] * 200] * 3}
        """) + TRUE["symreg_chemistry"]
    assert evaluate(CHEM, forged).reward == pytest.approx(honest.reward)  # the harness's definition wins


def test_sandbox_copies_data_files_and_rejects_reserved_names(tmp_path):
    (tmp_path / "table.npz").write_bytes(b"abc")
    got = run_program("def main():\n    return open('table.npz', 'rb').read().decode()\n", "main", 20, 1024,
                      files=[tmp_path / "table.npz"])
    assert got.status == "ok" and got.value == "abc"
    (tmp_path / "program.py").write_text("")
    with pytest.raises(ValueError, match="reserved"):
        run_program("", "main", 5, 512, files=[tmp_path / "program.py"])


@pytest.fixture()
def tasks_dir(tmp_path, monkeypatch):
    """A private tasks/ folder: symreg_chemistry copied as `copy`, with the shared harness."""
    return copy_task(CHEM, "symreg", tmp_path, monkeypatch)


# What the harness path may not be, by form, before it is joined to tasks/: each climbs out of tasks/ or
# names it ambiguously. The old form, relative to the task folder, is refused too.
CLIMBING = ["/etc/passwd.py", "../families/symreg/harness.py", "../../x.py", "families/../families/symreg/harness.py",
            "./families/symreg/harness.py", "families//symreg/harness.py", "families\\symreg\\harness.py",
            "C:\\families\\symreg\\harness.py"]


@pytest.mark.parametrize("path", CLIMBING)
def test_a_harness_path_that_climbs_or_is_not_plain_is_refused_by_its_form(tasks_dir, path):
    spec = tasks_dir / "task.yaml"
    spec.write_text(spec.read_text().replace("harness: families/symreg/harness.py", f"harness: '{path}'"))
    with pytest.raises(ValueError) as info:
        load_task("copy")
    message = str(info.value)
    assert "'harness' must be a .py file path relative to tasks/ (e.g. families/symreg/harness.py)" in message
    assert repr(path) in message and "\n" not in message


def test_a_harness_that_resolves_outside_tasks_is_refused(tasks_dir, tmp_path_factory):
    """A symlink inside tasks/ that points out: the form is plain, where it resolves is not."""
    outside = tmp_path_factory.mktemp("outside") / "harness.py"
    outside.write_text((tasks_dir.parent / "families" / "symreg" / "harness.py").read_text())
    (tasks_dir.parent / "families" / "symreg" / "link.py").symlink_to(outside)
    spec = tasks_dir / "task.yaml"
    spec.write_text(spec.read_text().replace("harness: families/symreg/harness.py", "harness: families/symreg/link.py"))
    with pytest.raises(ValueError, match="harness 'families/symreg/link.py' must be a file inside"):
        load_task("copy")


def test_a_task_may_keep_its_own_harness_in_its_folder(tasks_dir):
    """The path is relative to tasks/, so a harness only one task uses lives in that task's folder."""
    shared = load_task("copy").harness
    own = shared.replace("def helix_fit_and_predict(", "def helix_own_marker():\n    return 1\n\n\ndef helix_fit_and_predict(")
    (tasks_dir / "harness.py").write_text(own)
    spec = tasks_dir / "task.yaml"
    spec.write_text(spec.read_text().replace("harness: families/symreg/harness.py", "harness: copy/harness.py"))
    assert load_task("copy").harness == own != shared


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("harness: families/symreg/harness.py", "harness: families/symreg/missing.py"),
     ["harness 'families/symreg/missing.py' must be a file inside", "relative to tasks/, not to the task folder"]),
    (lambda t: t.replace("harness: families/symreg/harness.py", "harness: families/symreg"), ["must be a .py file path"]),
    (lambda t: t.replace("harness_entry: helix_fit_and_predict", "harness_entry: fit"), ["does not define fit()"]),
    (lambda t: t.replace("harness_entry: helix_fit_and_predict", ""), ["'harness' needs 'harness_entry'"]),
    (lambda t: t.replace("data_files: [data.npz]", "data_files: [../heldout.npz]"), ["plain file names"]),
    (lambda t: t.replace("data_files: [data.npz]", "data_files: [missing.npz]"), ["'missing.npz' is not a file"]),
    (lambda t: t.replace("data_files: [data.npz]", "data_files: [data.npz, data.npz]"), ["lists a name twice"]),
    (lambda t: t.replace("harness:", "harnes:"), ["unknown key 'harnes'", "Did you mean 'harness'"]),
    (lambda t: t.replace("warm_start_mutations: [terms]", "warm_start_mutations: [term]"), ["distinct names from: terms"]),
    (lambda t: t.replace("warm_start_mutations: [terms]", "warm_start_mutations: [terms, terms]"), ["distinct names"]),
    (lambda t: t.replace("warm_start_mutations: [terms]", "warm_start_mutations: terms"), ["'warm_start_mutations' must be"]),
])
def test_harness_and_data_keys_are_validated(tasks_dir, edit, words):
    error = load_error(tasks_dir, edit)
    for word in words:
        assert word in error
