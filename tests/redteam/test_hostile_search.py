"""Hostile search-form programs (task.yaml form: search, docs/search_form.md): each gets one clear verdict through
the real sandbox and evaluator, the trainer's copy of the construction it was handed is intact, and nothing is
left behind. The task is tests/helpers/search_task.py's (eight numbers in [0, 1], reward the mean of 4x(1-x));
the construction a program is handed scores GIVEN_REWARD, computed here by hand."""

import copy
import os
import sqlite3
import textwrap
import threading
import time

import pytest

import tests.helpers.sandbox_cases as cases
from rewards import Evaluator, isolation, run_program
from rewards.search_channel import MAX_CONSTRUCTION_BYTES
from tasks import load_task
from tests.helpers import search_task

pytestmark = pytest.mark.xdist_group("sandbox_forks")
GIVEN = {"x": [0.3, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]}
GIVEN_REWARD = (4 * 0.3 * 0.7 + 7) / 8  # 0.98
LIMIT = 6.0  # the limit of the programs that return (generous: a loaded box stalls one for seconds); budget: BUDGET
HANG = 2.5  # the limit of those that never return: what they do is done within the first second
BUDGET = 0.5


@pytest.fixture(autouse=True)
def nothing_left_behind(monkeypatch, tmp_path_factory):
    yield from cases.nothing_left_behind(monkeypatch, tmp_path_factory)


@pytest.fixture()
def task(tmp_path, monkeypatch):
    search_task.install(tmp_path, monkeypatch)
    return load_task(search_task.NAME)


def evaluate(task, body: str, construction=GIVEN, seed: int = 5, limit: float = LIMIT):
    """Evaluate ``body`` (defining improve(construction, budget_s, seed)) on a copy of ``construction``, and check
    the copy the trainer handed in came back untouched and the verdict is one bounded text."""
    handed = copy.deepcopy(construction)
    start = time.perf_counter()
    result = Evaluator(task, timeout_s=limit, budget_s=BUDGET).evaluate(textwrap.dedent(body), handed, seed=seed)
    assert time.perf_counter() - start < limit + 3, "the time limit did not hold"
    assert handed == construction, "the trainer's copy of the construction changed"
    assert len(result.feedback) <= 2000 and (result.valid or (result.reward, result.construction) == (0.0, None))
    return result


def test_a_program_that_returns_its_input_unchanged_counts_as_same(task):
    result = evaluate(task, """
        def improve(construction, budget_s, seed):
            return construction
    """)
    assert (result.status, result.valid, result.reward) == ("ok", True, pytest.approx(GIVEN_REWARD, abs=1e-15))
    assert result.metrics["same_construction"] == 1.0 and "reported" not in result.metrics
    assert result.feedback.startswith("It returned the construction it was given")
    assert result.construction == '{"x":[0.3,0.5,0.5,0.5,0.5,0.5,0.5,0.5]}'


def test_an_improved_construction_is_not_same_and_is_verified_from_scratch(task):
    """The program claims a score in its return value: only the verifier's recomputation counts."""
    result = evaluate(task, """
        def improve(construction, budget_s, seed):
            return {"x": [0.5] * 8, "score": 1e9, "reward": 1e9}
    """)
    assert (result.status, result.reward, result.metrics) == ("ok", 1.0, {"x_min": 0.5})


@pytest.mark.parametrize("returned, status, line", [
    ("{'x': [0.5] * 3}", "invalid", "expected {'x': [8 numbers in [0, 1]]}"),
    ("[0.5] * 8", "invalid", "expected {'x': [8 numbers in [0, 1]]}"),
    ("{'x': [0.5] * 7 + [float('nan')]}", "bad_output",
     "bad output: improve() returned something that: the construction holds NaN or infinity (at [\"x\"][7])"),
    ("{'x': [float('inf')] * 8}", "bad_output", "the construction holds NaN or infinity (at [\"x\"][0])"),
    ("{'x': [0.5] * 8, 'pad': 'x' * 1100000}", "bad_output", "over the 1,048,576 bytes a construction may hold"),
])
def test_a_construction_of_the_wrong_shape_nan_inf_or_too_large_gets_one_line(task, returned, status, line):
    result = evaluate(task, f"""
        def improve(construction, budget_s, seed):
            return {returned}
    """)
    assert (result.status, result.valid) == (status, False) and line in result.feedback.splitlines()[0]


def test_a_program_over_its_memory_limit_loses_nothing(task):
    result = evaluate(task, """
        def improve(construction, budget_s, seed):
            hog = [bytearray(64 << 20) for _ in range(1000)]
            return construction
    """)
    assert result.status in ("error", "crash") and not result.valid
    assert "MemoryError" in result.feedback or "memory limit" in result.feedback


def test_a_program_cannot_write_into_the_construction_it_was_given(task):
    """The runner read and closed the sealed input before the program's first line: no descriptor the program
    holds is it (nor any memory at all), and rewriting its own copy in place changes nothing outside."""
    result = evaluate(task, """
        import os
        seen = []
        for n in sorted(int(f) for f in os.listdir("/proc/self/fd")):
            try:
                seen.append((n, os.readlink(f"/proc/self/fd/{n}")))
            except OSError:
                pass

        def improve(construction, budget_s, seed):
            construction["x"][0] = 0.0  # its own copy
            found = [(n, target) for n, target in seen if "memfd" in target]
            if found:
                raise RuntimeError(f"the program holds {found}")
            for n in range(3, 64):
                try:
                    os.pwrite(n, b'{"x": [0.0]}', 0) if n != 3 else None  # 3 is its own result file
                except OSError:
                    pass
            return construction
    """)
    assert (result.status, result.valid) == ("ok", True), result.feedback
    assert result.reward == pytest.approx((7 * 1.0 + 0.0) / 8)  # its own edit, scored on what it returned


@pytest.mark.parametrize("call, line", [
    ("report('x' * 2000000)", f"ValueError: report(): the construction is 2,000,002 bytes as JSON, over the "
                              f"{MAX_CONSTRUCTION_BYTES:,} bytes"),
    ("report({1, 2})", "TypeError: report(): cannot return a value of type set"),
    ("report(nested)", "TypeError: report(): the result is nested more than 32 levels deep"),
    ("report({'x': [float('nan')] * 8})", "ValueError: report(): the construction cannot be handed on: it holds NaN"),
])
def test_a_report_that_cannot_be_handed_on_raises_in_the_program(task, call, line):
    """report() refuses what it could not send, where the program made the mistake: uncaught, that is the
    program's error (with its traceback), scored like any other."""
    result = evaluate(task, f"""
        nested = []
        for _ in range(100):
            nested = [nested]

        def improve(construction, budget_s, seed):
            {call}
            return construction
    """)
    assert (result.status, result.valid) == ("error", False)
    assert f"error: improve() raised {line}" in result.feedback and 'File "program.py", line 7' in result.feedback


def test_reports_then_a_crash_scores_the_crash_and_says_the_reports_went_unused(task):
    result = evaluate(task, """
        def improve(construction, budget_s, seed):
            report({"x": [0.5] * 8})
            raise RuntimeError("lost my way")
    """)
    assert (result.status, result.valid) == ("error", False)
    assert "RuntimeError: lost my way" in result.feedback
    assert "Its 1 report(s) were not used: a report counts only when the time limit stops the program." in result.feedback


def test_reports_then_a_hang_scores_the_last_report_at_the_limit(task):
    result = evaluate(task, """
        import time
        def improve(construction, budget_s, seed):
            report({"x": [0.4] * 8})
            report({"x": [0.5] * 7 + [0.45]})
            while True:
                time.sleep(0.01)
    """, limit=HANG)
    assert (result.status, result.valid, result.from_report) == ("ok", True, True)
    assert result.reward == pytest.approx((7 + 4 * 0.45 * 0.55) / 8) and result.metrics["reported"] == 1.0
    assert result.construction == '{"x":[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.45]}'
    assert result.feedback.startswith(f"Stopped at the {HANG:g} s time limit: its last report (of 2) was scored.")


@pytest.mark.slow
def test_a_flood_of_reports_is_taken_to_the_limit_and_the_last_one_counts(task):
    """Reports as fast as the program can make them, each larger than the last: the trainer reads every byte
    without parsing more than the last frame, and is still on time."""
    result = evaluate(task, """
        def improve(construction, budget_s, seed):
            k = 0
            while True:
                k += 1
                report({"x": [0.5] * 8, "k": k, "pad": [0.0] * (k % 5000)})
    """, limit=HANG)
    assert (result.status, result.valid, result.from_report) == ("ok", True, True), result.feedback
    assert result.reward == 1.0 and '"k":' in result.construction
    reports = int(result.feedback.split("(of ")[1].split(")")[0])
    assert reports > 1000 and f'"k":{reports},' in result.construction  # the last one, nothing later or earlier


@pytest.mark.slow
@pytest.mark.parametrize("garbage, why", [
    (b"\x05\x00\x00\x00[1, 2", "report 1 is not valid JSON"),  # a frame its header says is complete
    (b"\x04\x00\x00\x00[NaN]", "report 1 is not valid JSON"),
    (b"\xff\xff\xff\x7f", "report 1 is 2,147,483,647 bytes long, over the 1,048,576 bytes"),
])
def test_garbage_written_straight_to_the_report_pipe_is_refused_at_the_limit(task, garbage, why):
    result = evaluate(task, f"""
        import os, time
        def improve(construction, budget_s, seed):
            argv = open("/proc/self/cmdline").read().split(chr(0))
            search = argv[[i for i, a in enumerate(argv) if a.endswith("child_runner.py")][0] + 6]
            os.write(int(search.split(",")[1]), {garbage!r})  # the report pipe, past report()
            while True:
                time.sleep(0.01)
    """, limit=HANG)
    assert (result.status, result.valid) == ("bad_output", False)
    assert result.feedback.startswith(f"bad output: stopped at the time limit of {HANG:g} s, and its last report "
                                      f"cannot be used: {why}")


@pytest.mark.slow
def test_a_program_that_defines_its_own_report_reports_nothing(task):
    """Its own ``report`` replaces the sandbox's: its calls go nowhere, and stopped at the limit it has nothing."""
    result = evaluate(task, """
        import time
        def report(construction):
            pass

        def improve(construction, budget_s, seed):
            report({"x": [0.5] * 8})
            time.sleep(60)
    """, limit=HANG)
    assert (result.status, result.valid) == ("timeout", False)
    assert "had reported nothing" in result.feedback


def test_a_starter_that_falls_back_to_its_own_report_outside_the_sandbox_reports_inside_it(task):
    """The guarded definition the starters use (``try: report / except NameError``) keeps the sandbox's."""
    result = evaluate(task, """
        import time
        try:
            report
        except NameError:
            def report(construction):
                raise AssertionError("the sandbox gave no report")

        def improve(construction, budget_s, seed):
            report({"x": [0.5] * 8})
            return {"x": [0.5] * 7 + [0.4]}
    """)
    assert (result.status, result.reward, result.from_report) == ("ok", pytest.approx((7 + 0.96) / 8), False)


@pytest.mark.slow
def test_a_program_finds_no_other_construction_and_nothing_of_the_archive(task, tmp_path):
    """A run's archive (the constructions of every lineage) and a sibling program's input and report pipe: not in
    its filesystem, not through the trainer's or the sibling's /proc/<pid>/fd."""
    if not (isolation().filesystem and isolation().processes):
        pytest.skip("no mount or user namespaces here: the uid's permissions are the only fence")
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    db = sqlite3.connect(run / "archive.sqlite")
    db.execute("CREATE TABLE solutions (construction TEXT)")
    db.execute("INSERT INTO solutions VALUES ('{\"x\": [0.5, 0.5]}')")
    db.commit()
    held = []
    for n in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{n}"))
        except OSError:  # the listing's own descriptor, closed by now
            pass
    assert str(run / "archive.sqlite") in held  # the scan below has the trainer's open archive to find
    sibling = threading.Thread(target=lambda: run_program(
        "import time\ndef improve(c, b, s):\n    report(c)\n    time.sleep(3)\n    return c\n", "improve", 10, 512,
        search=({"x": [0.25] * 8}, 1.0, 0)))
    sibling.start()
    time.sleep(0.5)
    try:
        result = evaluate(task, f"""
            import glob, os
            def improve(construction, budget_s, seed):
                found = []
                for path in ({str(run / "archive.sqlite")!r}, {str(run)!r}, {str(tmp_path)!r}):
                    if os.path.exists(path):
                        found.append(path)
                for fd_dir in glob.glob("/proc/[0-9]*/fd"):  # the host's /proc: every process is listed
                    try:
                        targets = [os.readlink(os.path.join(fd_dir, n)) for n in os.listdir(fd_dir)]
                    except OSError:
                        continue
                    found += [f"{{fd_dir}}: {{t}}" for t in targets if "memfd" in t or "sqlite" in t]
                if found:
                    raise RuntimeError(f"found {{found[:5]}}")
                return construction
        """)
    finally:
        sibling.join()
        db.close()
    assert (result.status, result.valid) == ("ok", True), result.feedback
