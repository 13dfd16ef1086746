"""task.eval_backend=ray under real faults, on a real two-node cluster: `ray start --head` and a second
`ray start --address` as separate processes on this machine (tests/helpers/ray_cluster.py), each with one CPU.

Covered (issue 34): a queue longer than a program's limit is not a failure and at most the
cluster's CPUs run at once, following nodes that leave and join; the workers run the rewards
package the driver ships, not a decoy in its working directory; a SIGKILLed worker, a hung
(SIGSTOPped) worker, a time-out and a lost node lose no child and leave nothing behind once the
next program runs; the end of a run leaves nothing on any node; a lost node is one HELIX line and
Ray's report goes to the library log; a lost head ends the run with a HELIX error, the archive
intact, and the run resumes exactly on a new cluster.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rewards import Evaluator, make_runner, ray_eval
from tasks import load_task
from tests.helpers.ray_cluster import LoopbackCluster, pids_with, sandbox_owner, sleepy

ROOT = Path(__file__).resolve().parents[2]
# One worker of scripts/test.sh's pytest-xdist runs every test with a Ray cluster, one cluster at a time.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


class Tracked:
    """The cluster, and every pid its nodes ever had (sandbox cgroups are named after their owner's pid)."""

    def __init__(self, cluster: LoopbackCluster):
        self.cluster, self.pids, self._halt = cluster, set(), threading.Event()
        self._thread = threading.Thread(target=self._track, daemon=True)
        self._thread.start()

    def _track(self) -> None:
        while not self._halt.is_set():
            for node in list(self.cluster.nodes):
                self.pids.update(node.pids())
            time.sleep(0.05)

    def leftovers(self, dead_only: bool = False) -> dict[str, int]:
        """What the workers and sandboxes of this cluster left: directories under the nodes' TMPDIR
        (at any depth) and pids cgroups whose owner was one of its processes. ``dead_only``: only what
        belongs to processes that no longer exist (a live worker keeps its folder until the run ends)."""
        tmp = str(self.cluster.tmp)
        found = {"sandbox dirs": 0, "worker folders": 0, "data folders": 0, "cgroups": 0}
        for path in glob.glob(f"{tmp}/**/helix-*", recursive=True) + glob.glob(f"{tmp}/helix-*/data-*"):
            name, folder = os.path.basename(path), Path(path).relative_to(tmp).parts[0]
            if dead_only and folder.startswith("helix-ray-worker-") and Path(f"/proc/{folder.split('-')[4]}").exists() \
                    and not name.startswith("helix-sandbox-"):
                continue  # a live worker's folder and data files: kept until the run ends
            kind = "sandbox dirs" if name.startswith("helix-sandbox-") else \
                "worker folders" if name.startswith("helix-ray-worker-") else "data folders"
            found[kind] += 1
        for group in glob.glob("/sys/fs/cgroup/pids/helix-sandbox-*") + glob.glob("/sys/fs/cgroup/helix-sandbox-*"):
            owner = int(os.path.basename(group).split("-")[2])
            if owner in self.pids and not (dead_only and Path(f"/proc/{owner}").exists()):
                found["cgroups"] += 1
        return found


NOTHING = {"sandbox dirs": 0, "worker folders": 0, "data folders": 0, "cgroups": 0}


@pytest.fixture(scope="module")
def cluster():
    cluster = LoopbackCluster(head_cpus=1)
    tracked = Tracked(cluster)
    try:
        cluster.add_node(1)
        yield tracked
    finally:
        cluster.stop()
        tracked._halt.set()
        subprocess.run(["rm", "-rf", str(cluster.root)], check=False)


@pytest.fixture()
def runners():
    """Make RayRunners; each is closed at the end of the test, whatever happened."""
    made = []

    def make(task, address, **kwargs):
        made.append(make_runner("ray", task, address, **kwargs))
        return made[-1]

    yield make
    for runner in made:
        runner.close()
    import ray

    if ray.is_initialized():
        ray.shutdown()


def worker_running(tracked: Tracked, text: str = "program.py main", timeout_s: float = 60.0) -> int:
    """The pid of a Ray worker of the cluster whose sandbox runs a program (not the sandbox's probe)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for runner_pid in pids_with(text):
            try:
                worker = sandbox_owner(runner_pid)
            except (OSError, ValueError, IndexError):
                continue
            if worker in tracked.pids:
                return worker
        time.sleep(0.05)
    raise AssertionError("no Ray worker of the cluster was seen running a program")


def test_a_queue_longer_than_the_limit_is_not_a_failure_and_at_most_the_cpus_run(cluster, runners, monkeypatch):
    """16 programs of 1 s under a 4 s limit on 2 CPUs, 1 s of margin: the last ones wait longer than
    4 + 1 s before they start. Counted from the submission (main 9816832: 2 x limit + 60 s), they
    would be infra failures; counted from the start, all come back ok. With the default limit the
    runner submits as many as the cluster has CPUs; with task.eval_workers=16 Ray queues the rest."""
    monkeypatch.setattr(ray_eval, "RESULT_MARGIN_S", 1.0)
    task = sleepy(1, 4.0)
    runner = runners(task, cluster.cluster.address)
    assert runner.cpus() == 2
    for limit in (None, 16):  # the default, then task.eval_workers=16 (make_runner's workers)
        runner.limit, runner.peak_in_flight, runner.waited_s = limit, 0, []
        results = Evaluator(task, workers=16, timeout_s=4.0, runner=runner).evaluate_many([task.code(k) for k in range(16)])
        assert [(r.status, r.reward) for r in results] == [("ok", k + 0.5) for k in range(16)]
        assert runner.peak_in_flight == (limit or 2)
        assert max(runner.waited_s) > 4.0 + 1.0  # a deadline from the submission would have failed these


def test_the_workers_run_the_code_the_driver_ships_not_a_decoy_in_its_working_directory(cluster, tmp_path):
    """Ray puts the driver's working directory first on every worker's import path. A driver run from
    a folder holding a stale rewards/ (it scores everything 999) gets the real rewards all the same,
    from the shipped copy, even on a worker that imported the decoy before."""
    decoy = tmp_path / "decoy"
    (decoy / "rewards").mkdir(parents=True)
    (decoy / "rewards" / "__init__.py").write_text('"""A stale copy."""\nDECOY = True\n')
    (decoy / "rewards" / "sandbox.py").write_text("def run_program(*args, **kwargs):\n    raise SystemExit('decoy')\n")
    (decoy / "rewards" / "reaper.py").write_text("def reap(*a, **k):\n    return {}\n")
    driver = tmp_path / "driver.py"
    driver.write_text(f"""
import json, sys
import ray
sys.path.insert(0, {str(ROOT)!r})
from tests.helpers.ray_cluster import sleepy
from rewards import Evaluator, make_runner
task = sleepy(0.1, 10.0)
runner = make_runner("ray", task, {cluster.cluster.address!r}, workers=1)

@ray.remote(num_cpus=1)
def what_a_plain_task_imports():
    import rewards
    return rewards.__file__

plain = ray.get([what_a_plain_task_imports.remote() for _ in range(2)])
results = Evaluator(task, runner=runner).evaluate_many([task.code(k) for k in range(3)])
print(json.dumps(dict(plain=plain, results=[(r.status, r.reward) for r in results],
                      modules=[m for _, _, m in runner.started_on])))
runner.close()
""")
    proc = subprocess.run([sys.executable, str(driver)], cwd=decoy, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(p == str(decoy / "rewards" / "__init__.py") for p in seen["plain"])  # the trap is real
    assert seen["results"] == [["ok", 0.5], ["ok", 1.5], ["ok", 2.5]]
    assert len(seen["modules"]) == 3
    for module in seen["modules"]:
        assert "/runtime_resources/py_modules_files/" in module and module.endswith("/rewards/sandbox.py")
        assert Path(module).read_bytes() == (ROOT / "rewards" / "sandbox.py").read_bytes()


def test_a_killed_worker_is_run_again_and_what_it_left_is_reaped(cluster, runners):
    task = sleepy(3, 20.0)
    runner = runners(task, cluster.cluster.address)
    killed = []

    def kill_one():
        killed.append(worker_running(cluster))
        os.kill(killed[0], signal.SIGKILL)  # mid-program: its sandbox's directories and cgroup stay behind

    killer = threading.Thread(target=kill_one)
    killer.start()
    results = Evaluator(task, timeout_s=20.0, runner=runner).evaluate_many([task.code(k) for k in range(3)])
    killer.join()
    assert [(r.status, r.reward) for r in results] == [("ok", k + 0.5) for k in range(3)]
    assert killed and killed[0] in {pid for _, pid, _ in runner.started_on}
    assert cluster.leftovers(dead_only=True) == NOTHING  # the next program on the machine reaped them
    runner.close()
    assert cluster.leftovers() == NOTHING


def _wait_until_exited(pid: int, limit_s: float = 10.0) -> None:
    """SIGKILL is delivered asynchronously: wait until ``pid`` is gone or a zombie (what the reaper
    counts as dead) before the next program looks for what it left."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            return
        if state in (b"Z", b"X"):
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} still runs {limit_s} s after SIGKILL")


def test_a_hung_worker_is_cancelled_and_its_program_run_again(cluster, runners, monkeypatch):
    """A worker that stops answering mid-program (SIGSTOP: a hung node): no result within the limit
    plus the margin of its start, so the attempt is cancelled (force) and run again elsewhere."""
    monkeypatch.setattr(ray_eval, "RESULT_MARGIN_S", 2.0)
    task = sleepy(1, 6.0)
    runner = runners(task, cluster.cluster.address)
    stopped = []

    def stop_one():
        stopped.append(worker_running(cluster))
        os.kill(stopped[0], signal.SIGSTOP)

    stopper = threading.Thread(target=stop_one)
    stopper.start()
    start = time.monotonic()
    try:
        results = Evaluator(task, timeout_s=6.0, runner=runner).evaluate_many([task.code(k) for k in range(2)])
    finally:
        stopper.join()
        os.kill(stopped[0], signal.SIGKILL)  # a hung worker dies eventually; Ray's cancel cannot reach it
        _wait_until_exited(stopped[0])
    assert [(r.status, r.reward) for r in results] == [("ok", 0.5), ("ok", 1.5)]
    assert runner.cancelled >= 1 and time.monotonic() - start < 60
    results = Evaluator(task, timeout_s=6.0, runner=runner).evaluate_many([task.code(7)])  # the next program
    assert results[0].reward == 7.5
    time.sleep(0.5)
    assert cluster.leftovers(dead_only=True) == NOTHING
    runner.close()
    assert cluster.leftovers() == NOTHING


def test_a_program_over_its_limit_is_a_timeout_and_leaves_nothing(cluster, runners):
    task = sleepy(30, 1.5)
    runner = runners(task, cluster.cluster.address)
    result = Evaluator(task, timeout_s=1.5, runner=runner).evaluate(task.code(1))
    assert result.status == "timeout" and "1.5 s limit" in result.feedback
    assert cluster.leftovers(dead_only=True) == NOTHING
    runner.close()
    assert cluster.leftovers() == NOTHING


def test_a_lost_node_is_one_helix_line_its_programs_run_again_and_capacity_follows(cluster, runners, capfd, tmp_path):
    """The second node's raylet is SIGKILLed while a program runs there (as in the issue): every
    child comes back ok, the terminal shows one [helix] line and nothing of Ray's (its report, with
    the raylet's last log lines, is in the library log), at most 1 program runs while 1 CPU is left,
    and a node that joins brings the capacity back to 2."""
    lib = tmp_path / "library.log"
    task = sleepy(4, 20.0)
    lines = []
    runner = runners(task, cluster.cluster.address, library_log=lib, say=lines.append)
    second = cluster.cluster.nodes[-1]
    raylet = [p for p in second.pids() if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0].endswith(b"/raylet")]
    assert len(raylet) == 1

    def kill_raylet():
        while not any(node == _second_id(runner) for node, _, _ in runner.started_on):
            time.sleep(0.05)
        time.sleep(1)
        os.kill(raylet[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_raylet)
    killer.start()
    capfd.readouterr()
    results = Evaluator(task, timeout_s=20.0, runner=runner).evaluate_many([task.code(k) for k in range(4)])
    killer.join()
    assert [(r.status, r.reward) for r in results] == [("ok", k + 0.5) for k in range(4)]
    deadline = time.monotonic() + 60
    while runner.cpus() != 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert runner.cpus() == 1
    assert len(lines) == 1 and lines[0].startswith("[helix] Ray node ") and " lost: " in lines[0]
    out, err = capfd.readouterr()
    assert out.strip() == "" and "raylet" not in err.lower() and "state-dump" not in err, (out, err)
    assert "marked dead" in lib.read_text() or "raylet" in lib.read_text().lower()
    runner.peak_in_flight = 0
    assert [r.status for r in Evaluator(task, timeout_s=20.0, runner=runner).evaluate_many(
        [task.code(k) for k in range(2)])] == ["ok", "ok"]
    assert runner.peak_in_flight == 1
    second.kill()  # what is left of the node (its `ray start`, agents), then a new one joins
    cluster.cluster.nodes.remove(second)
    cluster.cluster.add_node(1)
    deadline = time.monotonic() + 30
    while runner.cpus() != 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert runner.cpus() == 2
    runner.peak_in_flight = 0
    assert [r.reward for r in Evaluator(task, timeout_s=20.0, runner=runner).evaluate_many(
        [task.code(k) for k in range(2)])] == [0.5, 1.5]
    assert runner.peak_in_flight == 2
    assert cluster.leftovers(dead_only=True) == NOTHING  # the lost node's worker folders too (same machine)
    runner.close()
    assert cluster.leftovers() == NOTHING and len(lines) == 1


def _second_id(runner) -> str | None:
    """The node id of the cluster's second node (the one that is not the head)."""
    import ray

    return next((n["NodeID"] for n in ray.nodes() if n["Alive"] and "node:__internal_head__" not in n["Resources"]), None)


def test_the_end_of_a_run_leaves_nothing_on_any_node(cluster, runners):
    """boston_housing's data.npz is a data file: written once per worker, kept until the run ends,
    then removed by close()'s sweep of every node, with the worker folders. (The online bin-packing
    tasks ship no data any more: their trusted driver holds the items.)"""
    task = load_task("boston_housing")
    runner = runners(task, cluster.cluster.address)
    results = Evaluator(task, timeout_s=10.0, runner=runner).evaluate_many([task.initial_program] * 4)
    assert [r.status for r in results] == ["ok"] * 4
    assert cluster.leftovers()["data folders"] >= 1
    runner.close()
    assert cluster.leftovers() == NOTHING
    assert len(runner.swept) == 2  # both nodes were swept


QUICK = str(ROOT / "configs" / "quickstart.yaml")
TINY = ["model.policy=tiny-random", "warm_start.enabled=false", "rollout.max_new_tokens=12", "rollout.group_size=4",
        "trainer.prompts_per_epoch=2", "run.progress=false", "task.eval_workers=2", "population.size=4",
        "run.wandb=disabled", "run.export=false", "rollout.engine=scripted", "trainer.epochs=2", "run.checkpoint_every=1"]


def _archive(run: Path) -> list[tuple]:
    from population.archive import Archive

    with Archive(run / "archive.sqlite") as arch:
        return [(s.parent_id, s.code, s.reward, s.valid, s.feedback, s.epoch) for s in (arch.get(row[0]) for row in arch.scores())]


def test_a_lost_head_is_a_helix_error_and_the_run_resumes_exactly_on_a_new_cluster(tmp_path, capsys):
    """The head (the only node) is SIGKILLed once epoch 1's checkpoint is written: the run notices
    within LOST_AFTER_S and a few seconds, closes the archive and the run directory, and prints one
    line naming the checkpoint and the --resume command; resumed against a new cluster, it ends
    with the archive of an uninterrupted run (the local pool's: tests/rewards/test_ray_eval.py shows they
    are equal)."""
    from rollout.engines import ENGINES
    from tests.helpers.scripted import ScriptedEngine
    from train.helix import main

    ENGINES["scripted"] = ScriptedEngine
    first = LoopbackCluster(head_cpus=2)
    second = None
    try:
        assert main(["--config", QUICK, *TINY, f"run.output_dir={tmp_path}", "run.name=local"]) == 0
        run = tmp_path / "ray"
        killed = []

        def kill_the_head_after_epoch_1():
            while not (run / "checkpoints" / "epoch-000001" / "state.json").is_file():
                time.sleep(0.05)
            first.nodes[0].kill()
            killed.append(time.monotonic())

        killer = threading.Thread(target=kill_the_head_after_epoch_1, daemon=True)
        killer.start()
        capsys.readouterr()
        rc = main(["--config", QUICK, *TINY, f"run.output_dir={tmp_path}", "run.name=ray", "task.eval_backend=ray",
                   f"task.ray_address={first.address}"])
        took = time.monotonic() - killed[0]
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 1 and took < ray_eval.LOST_AFTER_S + 40, took
        assert err[-1] == (f"helix: error: the Ray cluster at {first.address} was lost in epoch 2 (its head has not "
                           f"answered for {ray_eval.LOST_AFTER_S:g} s: unavailable); last complete checkpoint: epoch 1 "
                           f"({run / 'checkpoints' / 'epoch-000001'}); resume with: python train/helix.py --resume {run}")
        print(f"the run ended {took:.1f} s after the head was killed")
        assert "Traceback" not in "\n".join(err)
        assert [json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1]
        assert len(_archive(run)) == 1 + 8  # the seed and epoch 1's children: the archive was closed intact
        second = LoopbackCluster(head_cpus=2)
        assert main(["--resume", str(run), f"task.ray_address={second.address}"]) == 0
        assert _archive(run) == _archive(tmp_path / "local")
    finally:
        del ENGINES["scripted"]
        first.stop()
        if second is not None:
            second.stop()
        for cluster in (first, second):
            if cluster is not None:
                subprocess.run(["rm", "-rf", str(cluster.root)], check=False)
