"""Issue 31, item 3: bad values get a clear verdict, never an overflow, for every shipped task.

Every task's verifier is run, through ``Task.verify`` (the path the evaluator takes), over hostile
values planted in a real artefact: its starter's own result, taken once through the real sandbox
(harness and all), so each hostile value sits where the verifier looks. Whatever the artefact
holds, no exception escapes, nothing is printed (no numpy warning, nothing on stderr), and the
verdict is invalid or has a finite reward, with finite float metrics only; where the verifier accepts
the value, the task's exact check (issue 53) runs on it too, in one line, without a warning. The guard in
``Task.verify`` is also shown to bite on a verifier that lets overflow, NaN and inf out."""

import dataclasses
import json
import math
import sqlite3
import threading
from functools import cache

import numpy as np
import pytest

from population.archive import Archive
from rewards import Evaluator
from rewards.sandbox import RunResult, run_program
from tasks import Verdict, load_task, shipped_tasks
from tests.helpers.hostile_cases import HOSTILE, hostile_variants
from tests.helpers.hostile_verdicts import with_warnings

# The families whose verifiers this red team owns: they must handle every hostile value themselves
# (one line of feedback, no "could not check the result"), not only through the guard.
OWN = ("circle_packing_26", "circle_packing_26_disk", "circle_packing_32", "circle_packing_rect_21", "spherical_code_30",
       "eggholder", "mishra_bird", "keane_bump_10", "keane_bump_20", "keane_bump_30", "boston_housing",
       "first_autocorrelation", "erdos_minimum_overlap", "heilbronn_triangle_11", "kissing_number_11")


@cache
def starter_artefact(name: str):
    """What the task's verifier receives for its starter: the JSON the sandbox returned."""
    task = load_task(name)
    driven = {"driver": task.driver} if task.driver is not None else {}  # bin packing: the items stay out here
    if task.form == "search":  # the first call of a run: no construction yet, no time to search
        driven["search"] = (None, 0.0, 0)
    run = run_program(task.initial_program, task.run_entry, max(task.timeout_s, 60), task.memory_mb,
                      harness=task.harness, files=task.data_files, **driven)
    assert run.status == "ok", (name, run.status, run.error)
    return run.value


def problems_with(task, label, verdict, caught) -> list[str]:
    out = [f"{label}: warning {w.category.__name__}: {w.message}" for w in caught]
    if not isinstance(verdict, Verdict):
        return out + [f"{label}: not a Verdict: {verdict!r}"]
    if verdict.valid and not (type(verdict.reward) is float and math.isfinite(verdict.reward)):
        out.append(f"{label}: valid with reward {verdict.reward!r}")
    if not verdict.valid and verdict.reward != 0.0:
        out.append(f"{label}: invalid with reward {verdict.reward!r}")
    bad = {k: v for k, v in verdict.metrics.items() if not (type(v) is float and math.isfinite(v))}
    if bad:
        out.append(f"{label}: metrics {bad}")
    if task.name in OWN:
        if "could not check the result" in verdict.feedback:
            out.append(f"{label}: the verifier raised: {verdict.feedback}")
        if "\n" in verdict.feedback.strip() and not verdict.valid:
            out.append(f"{label}: feedback of more than one line: {verdict.feedback!r}")
    return out


@pytest.mark.parametrize("name", shipped_tasks())
def test_hostile_values_get_a_clear_verdict_never_an_overflow(name, capfd):
    task = load_task(name)
    template = starter_artefact(name)
    capfd.readouterr()
    problems, count = [], 0
    for label, artefact in hostile_variants(template):
        verdict, caught = with_warnings(lambda: task.verify(artefact))
        problems += problems_with(task, label, verdict, caught)
        count += 1
        if verdict.valid:  # a record candidate: its exact check must run on whatever the verifier accepted
            check, caught = with_warnings(lambda: task.check_exact(artefact))
            if caught or check.detail.startswith("the exact check could not run") or "\n" in check.detail:
                problems.append(f"{label}: exact check {check} (warnings: {[str(w.message) for w in caught]})")
    out, err = capfd.readouterr()
    assert not problems, f"{len(problems)} problem(s) in {count} hostile artefacts: " + "\n".join(problems[:12])
    assert (out, err) == ("", ""), f"the verifier printed: {(out + err)[:500]}"
    assert count >= 2 * len(HOSTILE)
    # the template itself is accepted: the hostile values above were planted where the verifier reads
    honest, caught = with_warnings(lambda: task.verify(template))
    assert honest.valid and not caught, honest.feedback


def careless_verify(returned):
    """A verifier that lets everything out: overflow, division by zero, NaN and inf metrics."""
    big = np.array([1e308]) * 10
    ratio = np.array([1.0]) / np.array([0.0])
    reward = {"inf": math.inf, "nan": math.nan, "bool": True, "text": "1.0", "huge": 10**400}.get(returned, 1.5)
    return Verdict(reward, True, "careless", {"overflow": big[0], "ratio": ratio[0], "nan": math.nan,
                                              "text": "1.0", "list": [1.0], "f32": np.float32(2.0), "int": 3,
                                              "flag": np.bool_(True), "huge": 10**400, "feedback": 4.0})


CARELESS = dataclasses.replace(load_task("eggholder"), name="careless", _verify=careless_verify)


def unguarded(returned):
    """The weakened path: the careless verifier called without Task.verify's guard (its warnings recorded)."""
    return with_warnings(lambda: careless_verify(returned))


def test_the_guard_silences_numpy_and_drops_non_finite_metrics():
    raw, caught = unguarded("ok")
    assert {str(w.message) for w in caught} >= {"overflow encountered in multiply", "divide by zero encountered in divide"}
    assert math.isinf(raw.metrics["overflow"]) and math.isnan(raw.metrics["nan"])
    verdict, caught = with_warnings(lambda: CARELESS.verify("ok"))
    assert not caught
    assert verdict.valid and verdict.reward == 1.5
    assert verdict.metrics == {"f32": 2.0, "int": 3.0, "flag": 1.0, "feedback": 4.0}
    assert all(type(v) is float for v in verdict.metrics.values())


@pytest.mark.parametrize("reward", ["inf", "nan", "bool", "text", "huge"])
def test_a_valid_verdict_needs_a_finite_real_reward(reward):
    assert unguarded(reward)[0].valid  # the weakened path accepts it
    verdict = CARELESS.verify(reward)
    assert not verdict.valid and verdict.reward == 0.0
    assert "a reward that is not a finite number" in verdict.feedback
    assert verdict.metrics == {"f32": 2.0, "int": 3.0, "flag": 1.0, "feedback": 4.0}


def test_the_guard_leaves_other_threads_numpy_settings_alone():
    """The evaluator verifies from several threads at once: np.errstate is per thread and context
    (numpy >= 2: a contextvar), so while one verdict is being computed with warnings off, another
    thread's overflow still warns. np.seterr, process-wide, would have silenced it."""
    inside, done = threading.Event(), threading.Event()
    seen = {}

    def slow_verify(returned):
        seen["inside"] = np.geterr()["over"]
        inside.set()
        done.wait(10)
        return Verdict(1.0, True, "ok")

    task = dataclasses.replace(CARELESS, _verify=slow_verify)
    worker = threading.Thread(target=lambda: seen.setdefault("verdict", task.verify(None)))
    worker.start()
    assert inside.wait(10)
    seen["outside"] = np.geterr()["over"]
    done.set()
    worker.join(10)
    assert seen["inside"] == "ignore" and seen["outside"] == "warn" and seen["verdict"].valid
    assert np.geterr()["over"] == "warn"


def test_the_archive_stores_only_finite_metrics(tmp_path):
    """Evaluator -> archive: the careless verifier's inf and NaN never reach the stored JSON,
    which parses as strict JSON (json.dumps would write Infinity and NaN, which is not JSON)."""
    def runner(code, entry, timeout_s, memory_mb, harness=None, files=()):
        return RunResult("ok", value="ok", elapsed_s=0.01)

    result = Evaluator(CARELESS, workers=1, runner=runner).evaluate("def minimize():\n    return [0, 0]\n")
    assert result.valid and result.metrics == {"f32": 2.0, "int": 3.0, "flag": 1.0, "feedback": 4.0}
    with Archive(tmp_path / "archive.sqlite") as archive:
        [sid] = archive.add_many([dict(parent_id=None, epoch=0, code="x", reward=result.reward, valid=result.valid,
                                       feedback=result.feedback, metrics=result.metrics)])
        assert archive.get(sid).metrics == result.metrics
    stored = sqlite3.connect(tmp_path / "archive.sqlite").execute("SELECT metrics FROM solutions").fetchone()[0]

    def not_json(constant):
        raise ValueError(f"not JSON: {constant}")

    assert json.loads(stored, parse_constant=not_json) == result.metrics
    with pytest.raises(ValueError, match="not JSON: Infinity"):  # the weakened path: raw metrics stored as they are
        json.loads(json.dumps(unguarded("ok")[0].metrics, default=lambda o: o.tolist()), parse_constant=not_json)


def test_a_verifier_that_raises_is_one_line_and_the_batch_goes_on():
    def raising(returned):
        return np.asarray([10**400], dtype=float)  # OverflowError: int too large to convert to float

    verdict = dataclasses.replace(CARELESS, _verify=raising).verify(None)
    assert not verdict.valid and verdict.feedback.startswith("the verifier could not check the result: OverflowError")
