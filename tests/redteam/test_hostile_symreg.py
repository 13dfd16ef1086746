"""Hostile programs and artefacts against the symbolic-regression reward (issue 31, items 2-3;
docs/reward_threats.md). Each test runs the real path and then a deliberately weakened one, to
show that the check it relies on is what stops the attack."""

import contextlib
import dataclasses
import math
import os
import statistics
import textwrap

import numpy as np
import pytest

import tasks.families.symreg.verify as sv
from rewards import Evaluator, run_program
from tasks import load_task
from tasks.base import Verdict
from tests.helpers.hostile_verdicts import evaluate_quietly, verify_quietly

TASK = load_task("symreg_physics")
HELDOUT = TASK.folder / "heldout.npz"

# Looks for the held-out targets everywhere a program might reach them, and predicts them exactly
# on the test inputs when it finds them; otherwise it is the linear starter.
CHEAT = textwrap.dedent('''
    import os
    import numpy as np

    TARGET = {target!r}

    def _candidates():
        yield "heldout.npz"
        yield TARGET
        yield "/proc/self/root" + TARGET
        inside = "tasks/" + TARGET.split("/tasks/", 1)[1]
        for up in range(1, 8):
            yield "../" * up + inside
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                yield f"/proc/{{pid}}/root" + TARGET
                yield f"/proc/{{pid}}/cwd/heldout.npz"
        for top in ("/work", "/root", "/home", "/tmp", "/srv", "/opt", os.path.dirname(TARGET)):
            for seen, (folder, _, files) in enumerate(os.walk(top)):
                if seen > 300:
                    break
                if "heldout.npz" in files:
                    yield os.path.join(folder, "heldout.npz")

    FOUND = None
    for _path in _candidates():
        try:
            with np.load(_path, allow_pickle=False) as _d:
                FOUND = [_d[f"y_test_{{i}}"] for i in range(3)]
            break
        except Exception:
            pass
    with np.load("data.npz", allow_pickle=False) as _d:
        X_TEST = [_d[f"x_test_{{i}}"] for i in range(3)]

    def func(x, params):
        if FOUND is not None:
            for x_test, y_test in zip(X_TEST, FOUND):
                if x.shape == x_test.shape and np.array_equal(x, x_test):
                    return y_test.copy()
        return x[:, 0] * params[0] + x[:, 1] * params[1]
    ''').format(target=str(HELDOUT))

# Rewrites the harness's report through its frames: a perfect fit with made-up params. The test
# predictions stay the honest linear model's.
FORGED_REPORT = textwrap.dedent('''
    import sys

    class _Perfect(list):
        def append(self, value):
            super().append(0.0)

    class _Params(list):
        def append(self, value):
            super().append([1.0] * 10)

    def func(x, params):
        frame = sys._getframe(1)
        while frame is not None:
            out = frame.f_locals.get("out")
            if isinstance(out, dict) and "train_nmse" in out and not isinstance(out["train_nmse"], _Perfect):
                out["train_nmse"], out["params"] = _Perfect(), _Params()
            frame = frame.f_back
        return x[:, 0] * params[0] + x[:, 1] * params[1]
    ''')

# Fine on the training inputs (x <= 2), 1e200 on the held-out ones (x > 2): an overflow in all but name.
OVERFLOW = textwrap.dedent('''
    import numpy as np

    def func(x, params):
        return x[:, 0] * params[0] + x[:, 1] * params[1] + np.where(x[:, 0] > 2.0, 1e200, 0.0)
    ''')


def pre_fix_case_problem(i, p, shape):
    """The per-case check as it was before this red team (np.asarray, shape, NaN/inf): the weakened
    verifier, which took booleans and strings for numbers and let 1e200 overflow to an inf NMSE."""
    arr = np.asarray(p, dtype=float)
    if arr.shape != shape:
        return f"case {i}: shape {arr.shape}"
    if not np.all(np.isfinite(arr)):
        return f"case {i}: NaN or inf"
    return None


@pytest.fixture(scope="module")
def starter():
    return Evaluator(TASK, workers=1, cascade=False).evaluate(TASK.initial_program)


def test_held_out_targets_are_out_of_reach(starter, capfd, caplog):
    """Every route to heldout.npz fails in the sandbox, so the cheat is the linear starter; with the
    file copied into the sandbox (the protection removed) the same program scores the cap, 12."""
    assert starter.valid and 0 < starter.reward < 1
    real = evaluate_quietly(TASK, CHEAT, capfd, caplog, cascade=False)
    assert real.valid and real.reward == pytest.approx(starter.reward, rel=1e-12), real.feedback
    exposed = dataclasses.replace(TASK, data_files=TASK.data_files + (HELDOUT,))
    cheated = evaluate_quietly(exposed, CHEAT, capfd, caplog, cascade=False)
    assert cheated.valid and cheated.reward == pytest.approx(sv.REWARD_CAP), cheated.feedback


def test_the_trainer_process_is_out_of_reach():
    """The trainer (this process) holds the targets in memory: its /proc entries that ptrace access
    guards (mem, root, cwd, environ) are refused to the program; cmdline is world-readable."""
    probe = textwrap.dedent(f'''
        def probe():
            out = {{}}
            for entry in ("mem", "root/{HELDOUT}", "cwd/tasks/symreg_physics/heldout.npz", "environ", "cmdline"):
                try:
                    with open("/proc/{os.getpid()}/" + entry, "rb") as fh:
                        fh.read(1)
                    out[entry.split("/")[0]] = "read"
                except OSError as exc:
                    out[entry.split("/")[0]] = type(exc).__name__
            return out
        ''')
    got = run_program(probe, "probe", 20, 1024)
    assert got.status == "ok", got.error
    assert got.value["cmdline"] == "read", got.value  # the probe does reach this process's /proc entries
    assert all(got.value[k] != "read" for k in ("mem", "root", "cwd", "environ")), got.value


def test_a_forged_fit_report_is_never_scored(starter, capfd, caplog):
    """The program rewrites the harness's report (train NMSE 0, params of its choice) through its
    frames: the reward is still the test predictions'. A verifier trusting the report would pay 12."""
    real = evaluate_quietly(TASK, FORGED_REPORT, capfd, caplog, cascade=False)
    assert real.valid and real.reward == pytest.approx(starter.reward, rel=1e-12)
    assert "train NMSE per case after the BFGS fit: 0, 0, 0" in real.feedback  # the claim is shown, not paid

    def trusting(returned):
        reward = sv.reward_from_nmse(statistics.median(returned["train_nmse"]))
        return Verdict(reward, True, "trusted the harness's report", {})

    naive = dataclasses.replace(TASK, _verify=trusting)
    fooled = evaluate_quietly(naive, FORGED_REPORT, capfd, caplog, cascade=False)
    assert fooled.reward == pytest.approx(sv.REWARD_CAP) and fooled.reward > real.reward


HOSTILE_VALUES = [
    ("1e200", [1e200] * 200, "exceed 1e+100 in magnitude (first: 1e+200)"),
    ("1e154", [1e154] * 200, "exceed 1e+100 in magnitude (first: 1e+154)"),  # 200 of them overflow the sum
    ("-1e308", [-1e308] * 200, "exceed 1e+100 in magnitude (first: -1e+308)"),
    ("int too large for a float", [10**400] * 200, "(first: a huge integer)"),
    ("booleans", [True, False] * 100, "test prediction 0 is True (bool), not a number"),
    ("numeric strings", ["1.5"] * 200, "test prediction 0 is '1.5' (str), not a number"),
    ("nulls", [None] * 200, "test prediction 0 is None (NoneType), not a number"),
    ("dicts", [{}] * 200, "test prediction 0 is {} (dict), not a number"),
    ("nested", [[0.0]] * 200, "returned shape (200, 1)"),
    ("ragged", [[0.0], 0.0] * 100, "a nested or ragged list"),
    ("empty", [], "returned shape (0,)"),
    ("NaN", [float("nan")] * 200, "200 of 200 test predictions are NaN or inf"),
    ("a string", "0" * 200, "not a flat list of numbers (got str)"),
]


@pytest.mark.parametrize("name, values, words", HOSTILE_VALUES, ids=[h[0] for h in HOSTILE_VALUES])
def test_bad_values_get_one_clear_line(name, values, words, capfd, caplog, monkeypatch):
    artefact = {"predictions": [values] * 3, "train_nmse": [10**400, "x", None], "params": [[1e308] * 10**4] * 3}
    verdict = verify_quietly(TASK, artefact, capfd, caplog)
    assert not verdict.valid and words in verdict.feedback, verdict.feedback
    if name in ("1e200", "1e154", "-1e308", "booleans", "numeric strings"):
        monkeypatch.setattr(sv, "case_problem", pre_fix_case_problem)
        huge = name.startswith(("1e", "-1e"))
        with pytest.warns(RuntimeWarning, match="overflow") if huge else contextlib.nullcontext():
            weak = TASK._verify(artefact)  # the verifier itself: Task.verify's guard would hide the warning
        assert weak.valid, weak.feedback  # accepted by the weakened verifier ...
        assert not huge or math.isinf(weak.metrics["nmse_median"])  # ... with an inf metric and numpy's warning


def test_negative_zero_and_exact_targets_are_scored_not_rejected(capfd, caplog):
    """-0.0 is a number; the exact targets reach the cap 12 and no more (NMSE floored at 1e-12)."""
    assert verify_quietly(TASK, {"predictions": [[-0.0] * 200] * 3}, capfd, caplog).valid
    exact = [y.tolist() for y in sv.load_heldout(TASK.folder)]
    verdict = verify_quietly(TASK, {"predictions": exact}, capfd, caplog)
    assert verdict.valid and verdict.reward == sv.reward_from_nmse(0.0) == pytest.approx(sv.REWARD_CAP, abs=1e-12)
    ints = verify_quietly(TASK, {"predictions": [[round(v) for v in y] for y in exact]}, capfd, caplog)
    assert ints.valid and 0 < ints.reward < sv.REWARD_CAP  # JSON integers are numbers


def test_overflowing_predictions_through_the_sandbox(capfd, caplog, monkeypatch):
    """Through the real path the program is rejected with the reason and no metric is inf; the
    pre-fix check let it through as valid, its inf metrics stopped only by Task.verify's central guard."""
    real = evaluate_quietly(TASK, OVERFLOW, capfd, caplog, cascade=False)
    assert not real.valid and real.status == "invalid" and real.metrics == {}
    assert "exceed 1e+100 in magnitude (first: 1e+200)" in real.feedback
    monkeypatch.setattr(sv, "case_problem", pre_fix_case_problem)
    weak = Evaluator(TASK, workers=1, cascade=False).evaluate(OVERFLOW)
    # accepted; only Task.verify's central guard (numpy quiet, non-finite metrics dropped) keeps inf out
    assert weak.valid and "nmse_median" not in weak.metrics
