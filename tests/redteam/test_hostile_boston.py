"""Red team of Boston Housing: run_model's predictions for 102 held-out houses, scored in the parent
against targets the sandbox never holds.

The program runs in the same process as the harness that converts its predictions, and as the
runner that writes them out, so it can forge what leaves the sandbox: the verifier is the only
line. What a cheat can try, and what this file checks: values numpy would quietly turn into
numbers (True -> 1.0 scored 0.6535, "22.5" -> 22.5), absurd numbers that overflow (1e200 came
back valid with inf metrics and overflow warnings), a forged result record, and the trainer's
memory, where the held-out targets live. Every test runs the real path (the sandboxed Evaluator,
or load_task(...).verify) and shows that, with the one check taken out, the cheat would have paid."""

import dataclasses
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tasks.families.boston.verify as boston_verify
from rewards import Evaluator, run_program
from tasks import load_task
from tests.helpers.hostile_verdicts import with_warnings

TASK = load_task("boston_housing")
with np.load(TASK.folder / "heldout.npz", allow_pickle=False) as _held:
    Y_TEST = _held["y_test"].astype(float)
# The conversion the harness made before the red team (main 9816832): every prediction through float().
OLD_HARNESS = TASK.harness + textwrap.dedent("""

    def _helix_predictions(out):
        try:
            pred = _helix_np.asarray(out, dtype=float)
        except (TypeError, ValueError):
            raise TypeError("run_model must return one number per row of X_test (a numpy array, list or pandas "
                            f"Series); it returned {type(out).__name__}") from None
        if pred.ndim == 2 and pred.shape[1] == 1:
            pred = pred[:, 0]
        return pred.tolist()
""")
CONSTANT_22_5 = 2 - math.log10(math.sqrt(np.mean((Y_TEST - 22.5) ** 2)))


def program(body: str) -> str:
    return "import numpy as np\nimport pandas as pd\n\ndef run_model(X_train, y_train, X_test):\n    " + body + "\n"


def evaluate(code: str, harness: str | None = None):
    task = TASK if harness is None else dataclasses.replace(TASK, harness=harness)
    return Evaluator(task, workers=1).evaluate(code)


def first_line(feedback: str) -> str:
    """The verdict; the second line is only the evaluator's timing note."""
    lines = feedback.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("(ran "), feedback
    return lines[0]


@pytest.mark.parametrize("body, words, old_reward", [
    ("return [True] * len(X_test)", "run_model returned booleans (102 of 102, first at row 0)", 0.6535),
    ("return np.ones(len(X_test), dtype=bool)", "run_model returned booleans", 0.6535),
    ("return pd.Series([22.5] * 101 + [True])", "booleans (1 of 102, first at row 101)", None),
    ("return [[True]] * len(X_test)", "run_model returned booleans", 0.6535),
    ("return ['22.5'] * len(X_test)", "102 prediction(s) are not numbers (first at row 0: str)", CONSTANT_22_5),
    ("return np.full(len(X_test), '22.5')", "are not numbers (first at row 0: str)", CONSTANT_22_5),
])
def test_values_a_float_conversion_would_accept_are_rejected(body, words, old_reward):
    result = evaluate(program(body))
    assert not result.valid and result.reward == 0.0 and result.status == "invalid"
    assert words in first_line(result.feedback)
    weakened = evaluate(program(body), harness=OLD_HARNESS)
    if old_reward is None:  # pandas makes the mixed Series an object array: float() turned True into 1.0
        assert weakened.valid, weakened.feedback
    else:
        assert weakened.valid and weakened.reward == pytest.approx(old_reward, abs=1e-4), weakened.feedback


@pytest.mark.parametrize("body, words", [
    ("return [None] * len(X_test)", "102 prediction(s) are not numbers (first at row 0: None)"),
    ("return [22.5] * 101 + [None]", "1 prediction(s) are not numbers (first at row 101: None)"),
    ("return [10 ** 400] * len(X_test)", "102 of 102 predictions are absurd"),
    ("return np.full(len(X_test), 22.5 + 1j)", "cannot return a value of type complex"),
])
def test_other_non_numbers_get_one_line_naming_them(body, words):
    result = evaluate(program(body))
    assert not result.valid and result.reward == 0.0 and words in first_line(result.feedback)
    old = evaluate(program(body), harness=OLD_HARNESS)  # before: NaN, an OverflowError, or the imaginary part dropped
    assert words not in old.feedback and (old.valid or "NaN" in old.feedback or "OverflowError" in old.feedback)


FORGER = textwrap.dedent("""
    import sys

    import numpy as np

    # The program runs inside the runner's process: it can replace what the runner writes out.
    _runner = sys.modules["__main__"]
    _runner.to_jsonable = lambda value, depth=0: {"predictions": {forged}}

    def run_model(X_train, y_train, X_test):
        return np.zeros(len(X_test))
""")


def old_predictions(preds, n):
    """The verifier's check before the red team: booleans out, then float() on the rest."""
    if any(isinstance(v, bool) for v in preds):
        return None, "booleans"
    arr = np.asarray(preds, dtype=float)
    return (arr, None) if arr.shape == (n,) and np.isfinite(arr).all() else (None, "shape or NaN")


@pytest.mark.parametrize("forged, words", [
    ("['22.5'] * 102", "102 prediction(s) are not numbers (first at row 0: str)"),
    ("[22.5] * 101 + ['1e1']", "first at row 101: str"),
])
def test_a_forged_result_record_is_judged_by_the_verifier(forged, words, monkeypatch):
    code = FORGER.replace("{forged}", forged)
    result = evaluate(code)
    assert not result.valid and words in first_line(result.feedback)
    monkeypatch.setattr(boston_verify, "_as_predictions", old_predictions)
    weakened = evaluate(code)
    assert weakened.valid and weakened.reward > 0.9, weakened.feedback


@pytest.mark.parametrize("value", ["1e200", "-1e200", "1e308", "1.5e6"])
def test_absurd_predictions_are_rejected_without_an_overflow(value, capfd, monkeypatch):
    code = program(f"p = np.full(len(X_test), 22.5); p[7] = {value}; return p")
    capfd.readouterr()
    result, caught = with_warnings(lambda: evaluate(code))
    assert not caught and capfd.readouterr().err == ""
    assert not result.valid and result.metrics == {}
    assert first_line(result.feedback) == (f"1 of 102 predictions are absurd (|y| > 1e+06 thousand dollars; first at "
                                           f"row 7: {float(value):.3g}); house prices here are 5 to 50")
    monkeypatch.setattr(boston_verify, "MAX_ABS_PREDICTION", math.inf)
    weakened = evaluate(code)
    assert weakened.valid and weakened.reward == 0.0  # accepted as a valid (if worthless) model...
    forged = [22.5] * 102
    forged[7] = float(value)
    raw, caught = with_warnings(lambda: boston_verify.verify_predictions(Y_TEST, {"predictions": forged}))  # ...and, unguarded:
    if abs(float(value)) > 1e154:  # its square overflows
        assert any("overflow" in str(w.message) for w in caught) and math.isinf(raw.metrics["rmse"])


def test_the_bound_changes_no_reward():
    """One prediction 1060 away from the other, perfect ones already scores 0: RMSE = 1010 / sqrt(102) > 100."""
    for far in (1060.0, -1010.0 + Y_TEST[0]):
        preds = Y_TEST.tolist()
        preds[0] = far
        verdict = TASK.verify({"predictions": preds})
        assert verdict.valid and verdict.reward == 0.0 and verdict.metrics["rmse"] >= 100


HOLDER = textwrap.dedent("""
    import ctypes, sys, time
    import numpy as np
    with np.load(sys.argv[1], allow_pickle=False) as data:
        y_test = data["y_test"].astype(float).copy()
    prctl = ctypes.CDLL(None).prctl
    prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    prctl(0x59616D61, ctypes.c_ulong(-1).value, 0, 0, 0)  # PR_SET_PTRACER_ANY: under Yama, anyone may trace us
    print("ready", flush=True)
    time.sleep(60)
""")
MEMORY_HUNTER = textwrap.dedent("""
    NEEDLE = bytes.fromhex({needle!r})

    def hunt(pids={pids!r}):
        found, refused = [], {{}}
        for pid in pids:
            try:
                with open(f"/proc/{{pid}}/maps") as fh:
                    regions = [line.split()[:2] for line in fh]
                mem = open(f"/proc/{{pid}}/mem", "rb", buffering=0)
            except OSError as exc:
                refused[pid] = type(exc).__name__
                continue
            with mem:
                for span, perms in regions:
                    lo, hi = (int(x, 16) for x in span.split("-"))
                    if "r" not in perms or hi - lo > 1 << 30:
                        continue
                    try:
                        mem.seek(lo)
                        if NEEDLE in mem.read(hi - lo):
                            found.append(pid)
                            break
                    except (OSError, OverflowError, ValueError):
                        continue
        return {{"found": found, "refused": refused}}
""")


def test_the_trainers_memory_is_out_of_reach():
    """The held-out targets sit in the trainer's memory (the verifier loaded them) and in a holder
    process that invites any tracer. Outside the sandbox, a process of the same user reads them
    from the holder's /proc/<pid>/mem; from inside, neither the holder nor the trainer opens."""
    import os

    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(TASK.folder / "heldout.npz")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        needle = Y_TEST.tobytes().hex()
        control = subprocess.run([sys.executable, "-c", MEMORY_HUNTER.format(needle=needle, pids=[holder.pid])
                                  + "\nprint(hunt())"], capture_output=True, text=True, timeout=120)
        assert control.returncode == 0 and f"'found': [{holder.pid}]" in control.stdout, control
        run = run_program(MEMORY_HUNTER.format(needle=needle, pids=[holder.pid, os.getpid()]), "hunt", 60,
                          TASK.memory_mb)
        assert run.status == "ok", (run.status, run.error, run.output_tail)
        assert run.value["found"] == [], f"the sandbox read held-out targets from {run.value['found']}"
        assert set(run.value["refused"]) == {str(holder.pid), str(os.getpid())}
    finally:
        holder.kill()
        holder.wait()
