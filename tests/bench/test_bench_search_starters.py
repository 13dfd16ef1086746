"""scripts/bench/bench_search_starters.py: each call's outcome (returned, killed at the limit with its
last report scored, failed), the iterate loop handing each call the last valid construction, the
summary's marks and targets, and one real run of a search starter (slow)."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.base import Verdict, invalid

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench" / "bench_search_starters.py"
_spec = importlib.util.spec_from_file_location("bench_search_starters", SCRIPT)
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # dataclasses look their module up
_spec.loader.exec_module(bench)

# seed % 5 picks what the call does: 0 returns x + 1; 1 reports x + 1 and hangs; 2 hangs without a
# report; 3 raises; 4 returns an artefact the verifier below rejects. Importing numpy is skipped on
# purpose: each call is a fresh interpreter, and this keeps a call at tens of milliseconds.
PROGRAM = '''
import time

try:
    report
except NameError:
    def report(construction):
        pass


def search(construction, budget_s, seed):
    x = 0 if construction is None else construction["x"]
    kind = seed % 5
    if kind == 1:
        report({"x": x + 1})
        report({"x": x + 2})
        time.sleep(30)
    if kind == 2:
        time.sleep(30)
    if kind == 3:
        raise RuntimeError(f"no luck with {x}")
    if kind == 4:
        return {"x": -1}
    return {"x": x + 1, "budget": budget_s}
'''
LIMIT_S = 1.5  # the hanging calls cost this; a fresh interpreter that imports json needs ~0.05 s, more on a loaded box


def verify(returned) -> Verdict:
    if returned["x"] < 0:
        return invalid("x must be >= 0")
    return Verdict(float(returned["x"]), True, f"x = {returned['x']}")


@pytest.fixture()
def program(tmp_path):
    path = tmp_path / "program.py"
    path.write_text(PROGRAM)
    return path


def test_each_call_returns_or_counts_its_last_report_or_fails_with_the_reason(program):
    assert bench.run_call(program, "search", {"x": 4}, 0.25, LIMIT_S, 0) == ("returned", {"x": 5, "budget": 0.25}, "")
    status, value, note = bench.run_call(program, "search", {"x": 4}, 0.25, LIMIT_S, 1)
    assert (status, value) == ("report", {"x": 6}) and "last report counts" in note  # the last of two reports
    assert bench.run_call(program, "search", None, 0.25, LIMIT_S, 2)[:2] == ("failed", None)
    status, value, note = bench.run_call(program, "search", {"x": 4}, 0.25, LIMIT_S, 3)
    assert (status, value) == ("failed", None) and note.endswith("RuntimeError: no luck with 4")


def test_iterate_hands_each_call_the_last_valid_construction(program):
    lines: list[str] = []
    calls = bench.iterate(program, "search", verify, 0.1, LIMIT_S, 60.0, 0, show=lambda line, **_: lines.append(line),
                          max_calls=6)
    assert len(calls) == len(lines) == 6
    # call 0 returns 1; call 1 reports 2 then 3 and is killed: 3 counts; 2 and 3 fail; 4 is invalid;
    # call 5 starts from 3 (the last valid construction), not from the invalid one
    assert [(c.status, c.valid, c.reward) for c in calls[:6]] == [
        ("returned", True, 1.0), ("report", True, 3.0), ("failed", False, 0.0), ("failed", False, 0.0),
        ("returned", False, 0.0), ("returned", True, 4.0)]
    assert [c.best for c in calls[:6]] == [1.0, 3.0, 3.0, 3.0, 3.0, 4.0]
    assert [c.seed for c in calls] == list(range(6))
    assert "x must be >= 0" in calls[4].note and "invalid: x must be >= 0" in lines[4]


def test_the_summary_gives_the_best_at_each_mark_and_the_time_to_each_target():
    calls = [bench.Call(50.0, 0, 0, "returned", 2.5, True, 2.5, ""), bench.Call(70.0, 1, 1, "failed", 0.0, False, 2.5, ""),
             bench.Call(290.0, 2, 2, "report", 2.61, True, 2.61, ""), bench.Call(310.0, 3, 3, "returned", 2.6, True, 2.61, "")]
    assert [bench.best_at(calls, t) for t in (40, 60, 300, 400)] == [None, 2.5, 2.61, 2.61]
    assert [bench.time_to(calls, t) for t in (2.5, 2.6, 2.62)] == [50.0, 290.0, None]
    lines = bench.summary("demo", calls, 310.0, [60.0, 300.0, 600.0], [2.6, 2.62], 8.0, 10.0, (1.5, 2.25), 2.62)
    assert lines[0].startswith("demo: 4 calls in 310 s (budget 8 s, limit 10 s): 2 returned, 1 killed at the limit")
    assert "1 failed, 0 invalid; load average 1.50 at the start, 2.25 at the end" in lines[0]
    assert lines[1] == "best after 1 min: 2.5 | 5 min: 2.61 | the end (310 s): 2.61"
    assert lines[2] == "time to 2.6: 290 s | 2.62: not reached"
    assert lines[3] == "best known 2.62: not reached, the best is 0.01 below"
    at_record = calls + [bench.Call(320.0, 4, 4, "returned", 2.62 - 1e-10, True, 2.62 - 1e-10, "")]  # within 1e-9 relative
    assert bench.summary("demo", at_record, 320.0, [], [], 8.0, 10.0, (1, 1), 2.62)[-1] == \
        "best known 2.62: reached at 320 s (best 2.6199999999)"


@pytest.mark.slow
def test_a_real_search_starter_improves_on_the_constructor_start():
    proc = subprocess.run([sys.executable, str(SCRIPT), "circle_packing_26_search", "--minutes", "0.02", "--budget", "0.5",
                           "--limit", "20", "--targets", "2.5", "3"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\s+[\d.]+ s  call", line)]
    assert rows and " returned " in rows[0]
    first = float(re.search(r"returned  ([\d.]+)", rows[0])[1])
    assert 2.5 < first < 2.6359830849  # above the constructor's 1.8365 and the 2.5 target, below the record
    assert "time to 2.5: " in proc.stdout and "3.0: not reached" in proc.stdout
    assert "best known 2.6359830849: not reached, the best is " in proc.stdout
