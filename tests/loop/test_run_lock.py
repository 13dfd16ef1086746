"""One live run per run directory (train/loop/run_lock.py): a second process is refused before it changes a file,
the lock dies with its process, and an ablation started twice over one --out no longer deletes the run the first
one is in the middle of (it did: evo_only-s1 of a 20-minute benchmark was wiped and rewritten under its run)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.env import child_env
from train.commands import ablate
from train.loop import run_lock

ROOT = Path(__file__).resolve().parents[2]
HOLD = ("import sys, time; from pathlib import Path; from train.loop import run_lock; "
        "run_lock.hold(Path(sys.argv[1])); print('held', flush=True); time.sleep(120)")


@pytest.fixture()
def other_process():
    """Start a process that holds a directory; yields (hold(dir) -> Popen), kills what it started."""
    procs = []

    def start(run_dir: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True,
                                env=child_env(), cwd=ROOT)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_directory_another_live_process_holds_is_refused_and_freed_when_it_is_killed(tmp_path, other_process):
    run_dir = tmp_path / "helix-s0"
    run_dir.mkdir()
    proc = other_process(run_dir)
    assert run_lock.holder(run_dir) == str(proc.pid)
    with pytest.raises(run_lock.RunDirInUse, match=rf"helix-s0 is in use by a run that is still going \(pid {proc.pid}\)"):
        run_lock.hold(run_dir)
    with pytest.raises(run_lock.RunDirInUse, match="give this run another run.name"):
        run_lock.refuse_if_held(run_dir)
    os.kill(proc.pid, signal.SIGKILL)  # a run killed outright leaves no stale lock
    proc.wait()
    assert run_lock.holder(run_dir) is None
    run_lock.hold(run_dir)
    try:
        run_lock.hold(run_dir)  # held once per process: a retry from Python reuses its hold
        assert run_lock.holder(run_dir) is None  # nobody else holds it
        assert (run_dir / run_lock.LOCK_NAME).read_text().strip() == str(os.getpid())
    finally:
        run_lock.release(run_dir)
    proc = other_process(run_dir)  # released: another process takes it
    assert run_lock.holder(run_dir) == str(proc.pid)


def test_an_ablation_started_twice_refuses_instead_of_deleting_the_run_in_progress(tmp_path, other_process, capsys):
    out = tmp_path / "ablate"
    run_dir = out / "evo_only-s1"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text('{"epoch": 1}\n' * 19)  # 19 epochs of a run still going
    other_process(run_dir)
    with pytest.raises(run_lock.RunDirInUse):
        ablate.run_one(ROOT / "configs" / "search.yaml", "evo_only", 1, out, ["run.time_budget_s=60"], [], True)
    assert (run_dir / "metrics.jsonl").read_text().count("\n") == 19  # untouched
    code = ablate.main(["--config", str(ROOT / "configs" / "search.yaml"), "--variants", "evo_only", "--seeds", "1",
                        "--wall-s", "60", "--out", str(out), "--quiet"])
    assert code == 2 and "evo_only-s1 is in use by a run that is still going" in capsys.readouterr().err
    assert (run_dir / "metrics.jsonl").read_text().count("\n") == 19


def test_the_command_line_refuses_a_run_name_in_use_before_writing_anything(tmp_path, other_process):
    run_dir = tmp_path / "busy"
    run_dir.mkdir()
    (run_dir / "library.log").write_text("the live run's\n")
    proc = other_process(run_dir)
    cmd = [sys.executable, str(ROOT / "train" / "helix.py"), "--config", str(ROOT / "configs" / "quickstart.yaml"),
           f"run.output_dir={tmp_path}", "run.name=busy"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"busy is in use by a run that is still going (pid {proc.pid})" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == [run_lock.LOCK_NAME, "library.log"]
    assert (run_dir / "library.log").read_text() == "the live run's\n"


def test_a_file_system_without_flock_runs_unguarded_with_one_line(tmp_path, monkeypatch, capsys):
    def no_locks(fd, op):
        raise OSError(37, "No locks available")  # ENOLCK, as an NFS mount without a lock daemon says

    monkeypatch.setattr(run_lock.fcntl, "flock", no_locks)
    run_lock.hold(tmp_path)
    assert "cannot be locked (No locks available)" in capsys.readouterr().out
    assert run_lock.holder(tmp_path) is None
    run_lock.release(tmp_path)  # nothing held: a no-op


LOCK_ONLY = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
             "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)")


def test_a_holder_that_has_not_written_its_pid_yet_is_named_as_another_process(tmp_path):
    """The window between flock and the pid write: still refused, with no empty 'pid ' in the line."""
    run_dir = tmp_path / "helix-s2"
    run_dir.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", LOCK_ONLY, str(run_dir / run_lock.LOCK_NAME)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        assert run_lock.holder(run_dir) == ""
        with pytest.raises(run_lock.RunDirInUse, match=r"still going \(another process\)"):
            run_lock.refuse_if_held(run_dir)
    finally:
        proc.kill()
        proc.wait()
