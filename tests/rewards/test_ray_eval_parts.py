"""The parts of task.eval_backend=ray that need no cluster: the reaper's rule for what a dead owner
left, the resume line, the start-up check's reading of the command line, the handshake against
bad addresses, and a lost cluster through the evaluator (tests/rewards/test_ray_eval_cluster.py runs the
whole on a real cluster)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rewards import Evaluator, cgroup, reaper
from rewards.ray_eval import ClusterLost
from rewards.ray_gcs import RayUnreachable, handshake
from rewards.ray_worker import package_digest
from tasks.base import Verdict
from train.loop.run_dir import stop_line

ROOT = Path(__file__).resolve().parents[2]


def _finished_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_reaper_removes_what_dead_owners_left_and_never_a_live_owners(tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        live = reaper.start_ticks(sleeper.pid)
        dead = _finished_pid()
        names = {
            "mine": f"helix-ray-worker-0a-{os.getpid()}-{reaper.start_ticks(os.getpid())}",
            "live": f"helix-ray-worker-0a-{sleeper.pid}-{live}",
            "live other job": f"helix-ray-worker-0b-{sleeper.pid}-{live}",
            "dead": f"helix-ray-worker-0a-{dead}-12345",
            "reused pid": f"helix-ray-worker-0b-{sleeper.pid}-{live - 1}",  # same pid, another start: its owner died
            "not ours": "helix-ray-worker-notes",
        }
        for name in names.values():
            (tmp_path / name / "helix-sandbox-x").mkdir(parents=True)
        removed = reaper.reap(str(tmp_path), groups=())
        assert removed == {"folders": 2, "cgroups": 0}
        left = {key for key, name in names.items() if (tmp_path / name).exists()}
        assert left == {"mine", "live", "live other job", "not ours"}
        # the end of job 0a: its live workers' folders go too, another job's stay
        assert reaper.reap(str(tmp_path), groups=(), job="0a") == {"folders": 1, "cgroups": 0}
        assert {key for key, name in names.items() if (tmp_path / name).exists()} == {"mine", "live other job", "not ours"}
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_group_is_its_owners_until_the_pid_names_a_process_that_started_after_it(tmp_path):
    made = tmp_path / "group"
    made.mkdir()
    assert not reaper._owner_gone(os.getpid(), str(made))  # started before the group: the owner
    assert reaper._owner_gone(_finished_pid(), str(made))  # gone
    time.sleep(1.2)
    later = subprocess.Popen(["sleep", "60"])  # a process the pid could be reused for, started after the group
    try:
        time.sleep(0.2)
        assert reaper._owner_gone(later.pid, str(made))
    finally:
        later.kill()
        later.wait()


def test_an_owner_that_has_exited_but_is_not_collected_yet_is_gone(tmp_path):
    """A killed Ray worker stays a zombie until its raylet waits for it (CI: the next program ran in
    that window and kept the worker's folders); what it left is an orphan already."""
    made = tmp_path / "group"
    made.mkdir()
    child = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.2)
        assert not reaper._owner_gone(child.pid, str(made))  # alive (started within the slack of the group)
        folder = tmp_path / f"helix-ray-worker-0a-{child.pid}-{reaper.start_ticks(child.pid)}"
        folder.mkdir()
        assert reaper.reap(str(tmp_path), groups=()) == {"folders": 0, "cgroups": 0}  # its owner runs
        child.kill()
        deadline = time.monotonic() + 5
        while Path(f"/proc/{child.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z":
            assert time.monotonic() < deadline, "the killed child never became a zombie"
            time.sleep(0.02)
        assert reaper._owner_gone(child.pid, str(made))  # not waited for yet: a zombie
        assert reaper.reap(str(tmp_path), groups=()) == {"folders": 1, "cgroups": 0} and not folder.exists()
    finally:
        child.kill()
        child.wait()


def _cgroups_writable() -> bool:
    group = cgroup.create(4)
    if group is not None:
        group.remove()
    return group is not None


@pytest.mark.skipif(not _cgroups_writable(), reason="no writable pids cgroup here")
def test_the_reaper_kills_what_is_left_in_a_dead_owners_cgroup_and_removes_it():
    mine = cgroup.create(4)  # this live process's group: it stays
    parent = os.path.dirname(mine.path)
    orphan_group = cgroup.PidsCgroup(os.path.join(parent, f"{cgroup.PREFIX}{_finished_pid()}-{os.urandom(6).hex()}"))
    os.mkdir(orphan_group.path)
    orphan = subprocess.Popen(["sleep", "60"])
    try:
        with open(orphan_group.procs, "w") as fh:
            fh.write(str(orphan.pid))  # an escaped grandchild of the dead owner
        removed = reaper.reap("/nonexistent", groups=(parent,))
        assert removed["cgroups"] >= 1 and not os.path.exists(orphan_group.path)
        assert orphan.wait(timeout=10) == -9
        assert os.path.isdir(mine.path)
    finally:
        orphan.kill()
        for group in (mine, orphan_group):
            group.kill_all()
            group.remove()


def test_the_digest_of_a_package_changes_with_any_of_its_files(tmp_path):
    package = tmp_path / "rewards"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sandbox.py").write_text("X = 1\n")
    (package / "notes.txt").write_text("not code")
    first = package_digest(str(package))
    (package / "notes.txt").write_text("still not code")
    assert package_digest(str(package)) == first
    (package / "sandbox.py").write_text("X = 2\n")
    assert package_digest(str(package)) != first
    assert package_digest(str(ROOT / "rewards")) != first


def test_the_stop_line_names_the_epoch_the_checkpoint_and_the_resume_command(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints" / "epoch-000002").mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e}) + "\n" for e in (1, 2)))
    assert stop_line(run, "interrupted") == "interrupted in epoch 3; no complete checkpoint yet: start the run again"
    (run / "checkpoints" / "epoch-000002" / "state.json").write_text("{}")
    (run / "checkpoints" / ".tmp-epoch-000003").mkdir()  # an unfinished one does not count
    assert stop_line(run, "the Ray cluster at h:1 was lost", "its head has not answered") == (
        f"the Ray cluster at h:1 was lost in epoch 3 (its head has not answered); last complete checkpoint: epoch 2 "
        f"({run / 'checkpoints' / 'epoch-000002'}); resume with: python train/helix.py --resume {run}")


def test_the_early_check_reads_the_address_as_load_config_composes_it(tmp_path, monkeypatch):
    """The start's Ray handshake (train.api.start.check, before torch) takes task.ray_address from the loaded
    config: its base chain, its overrides, a resumed run's own config.yaml. No second reader of the YAML."""
    from types import SimpleNamespace

    import rewards.ray_eval as ray_eval
    import train.commands.task_check as task_check
    from train.api import start
    from train.config.config import dump_config, load_config

    asked = []
    monkeypatch.setattr(ray_eval, "check_reachable", asked.append)
    monkeypatch.setattr(task_check, "check_task", lambda *args: SimpleNamespace(line=lambda: "task: ok"))

    def address(config=None, overrides=(), resume=None):
        asked.clear()
        start.check(start.load(config, overrides, resume))
        return asked

    quick = str(ROOT / "configs" / "quickstart.yaml")
    assert address(quick) == []  # the local backend: no handshake
    assert address(quick, ["task.eval_backend=ray"]) == [""]  # a private cluster: the handshake has nothing to reach
    assert address(quick, ["task.eval_backend=ray", "task.ray_address=10.0.0.5:6379"]) == ["10.0.0.5:6379"]
    assert address(quick, ["task.ray_address='h:1'", "task.eval_backend=ray"]) == ["h:1"]
    base = tmp_path / "base.yaml"
    base.write_text("base: " + quick + "\ntask:\n  eval_backend: ray\n  ray_address: head:6379\n")
    child = tmp_path / "child.yaml"
    child.write_text("base: base.yaml\ntask:\n  timeout_s: 5\n")
    assert address(str(child)) == ["head:6379"]
    assert address(str(child), ["task.eval_backend=local"]) == []
    run = tmp_path / "run"
    (run / "checkpoints" / "epoch-000001").mkdir(parents=True)
    (run / "checkpoints" / "epoch-000001" / "state.json").write_text("{}")
    dump_config(load_config(quick, ["task.eval_backend=ray", "task.ray_address=old:1"]), run / "config.yaml")
    assert address(resume=run) == ["old:1"]
    assert address(resume=run / "checkpoints" / "epoch-000001", overrides=["task.ray_address=new:2"]) == ["new:2"]


@pytest.mark.slow  # end to end through a subprocess (5-9 s): kept out of the -m 'not slow' tier
def test_the_handshake_fails_fast_and_says_what_to_check_for_each_bad_address():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    try:
        for address, what, limit in [(f"127.0.0.1:{silent.getsockname()[1]}", "does not answer as a Ray head", 7),
                                     (f"127.0.0.1:{closed_port}", "nothing listens on port", 2),
                                     ("no-such-head.invalid:6379", "is unknown here", 2),
                                     ("head-without-port", "is not HOST:PORT", 1)]:
            start = time.monotonic()
            with pytest.raises(RayUnreachable) as info:
                handshake(address, timeout_s=5.0)
            assert what in str(info.value) and time.monotonic() - start < limit, (address, str(info.value))
    finally:
        silent.close()


class _LosingRunner:
    """An elastic runner whose cluster is lost while programs wait: every call raises ClusterLost
    after a moment, except the first, which is an ordinary infrastructure failure."""

    elastic = True

    def __init__(self):
        self.calls = 0
        self.lock = threading.Lock()

    def cpus(self):
        return 2

    def __call__(self, code, entry, timeout_s, memory_mb, harness=None, files=()):
        from rewards import InfraError

        with self.lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            raise InfraError("the program was lost twice on the Ray cluster (WorkerCrashedError)")
        time.sleep(0.2)
        raise ClusterLost("the Ray cluster at h:1 was lost", "its head has not answered for 20 s: unavailable")


def test_a_lost_cluster_stops_the_batch_it_is_never_an_infra_child():
    task = SimpleNamespace(name="t", timeout_s=5.0, memory_mb=256, cascade_entry=None, harness=None, data_files=(),
                           run_entry="main", entry_function="main", verify=lambda v: Verdict(1.0, True, "", {}))
    runner = _LosingRunner()
    evaluator = Evaluator(task, runner=runner)
    assert evaluator.evaluate("x").status == "infra"  # one child lost: infra, not scored
    with pytest.raises(ClusterLost, match="was lost: its head"):
        evaluator.evaluate_many([f"# {k}" for k in range(50)])
