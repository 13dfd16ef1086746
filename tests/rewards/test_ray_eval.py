"""task.eval_backend=ray: programs run in the sandbox on a real Ray cluster, started here on loopback
(a head with two worker CPUs, its own temp dir, stopped at the end), and the results equal the
local pool's; a worker SIGKILLed mid-evaluation loses no child and mis-scores none."""

import contextlib
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rewards import Evaluator, make_runner
from rewards.ray_eval import RayUnreachable, check_reachable
from tasks import load_task
from tasks.base import Verdict
from tests.helpers.ray_cluster import free_port, in_session, is_template, pids_with, sandbox_owner, session_of
from train.helix import main

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")
QUICK = str(ROOT / "configs" / "quickstart.yaml")
TINY = ["model.policy=tiny-random", "warm_start.enabled=false", "rollout.max_new_tokens=12", "rollout.group_size=4",
        "trainer.prompts_per_epoch=2", "trainer.epochs=1", "run.progress=false", "task.eval_workers=2",
        "population.size=4", "run.wandb=disabled", "run.export=false"]
# One worker of scripts/test.sh's pytest-xdist runs every test with a Ray cluster, one cluster at a time.
pytestmark = pytest.mark.xdist_group("ray")

_HEAD: dict[str, int] = {}


def _our_worker_running_a_sandbox() -> tuple[int, int] | None:
    """(Ray worker, its sandbox's runner) of this module's cluster, never another cluster's on the machine."""
    for runner_pid in pids_with("child_runner.py"):
        if is_template(runner_pid):
            continue
        try:
            worker = sandbox_owner(runner_pid)
        except (OSError, ValueError, IndexError):
            continue
        if session_of(worker) == _HEAD.get("sid"):
            return worker, runner_pid
    return None


@pytest.fixture(scope="module")
def ray_cluster():
    """A Ray head on 127.0.0.1 with 2 CPUs (two worker processes), in a temp dir of its own."""
    port = free_port()
    temp = tempfile.mkdtemp(prefix="hr-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    # tests/conftest.py put Ray in single-node mode, so every Ray address stays on 127.0.0.1.
    assert os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    log = open(os.path.join(temp, "head.log"), "w")
    head = subprocess.Popen([RAY, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
                             "--num-cpus", "2", "--include-dashboard", "false", "--temp-dir", temp,
                             "--ray-client-server-port", str(free_port()),
                             "--disable-usage-stats"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                check_reachable(address, timeout_s=1)
                break
            except RayUnreachable:
                if head.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the Ray head did not start:\n" + Path(log.name).read_text()[-3000:])
                time.sleep(0.5)
        _HEAD["sid"] = head.pid  # its session: the raylet and the Ray workers (they leave its process group)
        yield address
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        for pid in in_session(head.pid):  # a throwaway cluster: no graceful stop (that takes 30 s)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        head.wait()
        for pid in pids_with(temp):  # anything of this cluster that left the process group
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()
        subprocess.run(["rm", "-rf", temp], check=False)  # its session's logs and sockets


def _bad_addresses():
    """A non-Ray listener (an HTTP server), a silent port (accepts, says nothing), an unknown host and
    a closed port; and what keeps the first two listening."""
    http_port = free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", http_port), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    return {"http": f"127.0.0.1:{http_port}", "silent": f"127.0.0.1:{silent.getsockname()[1]}",
            "unknown host": "no-such-head.invalid:6379", "closed": f"127.0.0.1:{free_port()}"}, (httpd, silent)


WHAT = {"http": "is not a Ray head", "silent": "does not answer as a Ray head within 5 s",
        "unknown host": "the host 'no-such-head.invalid' is unknown here", "closed": "nothing listens on port"}


@pytest.mark.slow  # end to end through a subprocess (5-9 s): kept out of the -m 'not slow' tier
def test_a_bad_ray_address_is_one_line_within_15_s_through_the_entry_point_and_no_run_dir(tmp_path):
    """`python train/helix.py --config configs/quickstart.yaml task.eval_backend=ray task.ray_address=...`
    against each bad address: exit code 1 and one `helix: error:` line naming the address and what to
    check, in under 15 s from the start of the process (the check runs before torch is imported,
    let alone a model loaded), and no run directory."""
    addresses, keep = _bad_addresses()
    try:
        for kind, address in addresses.items():
            start = time.monotonic()
            proc = subprocess.run([sys.executable, str(ROOT / "train" / "helix.py"), "--config", QUICK,
                                   "task.eval_backend=ray", f"task.ray_address={address}",
                                   f"run.output_dir={tmp_path / 'runs'}"], cwd=ROOT, capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=120)
            took = time.monotonic() - start
            err = [line for line in proc.stderr.splitlines() if line.strip()]
            assert proc.returncode == 1 and took < 15, (kind, proc.returncode, took, proc.stderr[-2000:])
            assert len(err) == 1 and err[0].startswith(f"helix: error: task.ray_address {address}: "), (kind, err)
            assert WHAT[kind] in err[0] and "Check" in err[0], (kind, err[0])
            assert not (tmp_path / "runs").exists()
    finally:
        keep[0].shutdown()
        keep[1].close()


def test_an_unreachable_cluster_is_a_one_line_error_in_process_too(tmp_path, capsys):
    """HelixRun checks again, before anything is loaded or written (main() called in-process)."""
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    start = time.monotonic()
    with pytest.raises(RayUnreachable, match="nothing listens on port"):
        check_reachable(address)
    assert time.monotonic() - start < 6
    rc = main(["--config", QUICK, *TINY, "rollout.engine=hf", f"run.output_dir={tmp_path}", "run.name=r",
               "task.eval_backend=ray", f"task.ray_address={address}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and err[-1].startswith(f"helix: error: task.ray_address {address}: nothing listens on port")
    assert "Traceback" not in "\n".join(err) and not (tmp_path / "r").exists() and not (tmp_path / "latest").exists()
    with pytest.raises(RayUnreachable, match="HOST:PORT"):
        check_reachable("head-without-port")


def _programs(task):
    """The starter (a valid artefact), then a load error, a timeout, an exit without a result and an
    entry function that returns something unusable: one of each status."""
    start = task.initial_program
    return [start, "raise ValueError('no')\n" + start, "import time\ntime.sleep(30)\n" + start,
            "import os\nos._exit(3)\n" + start,
            start + f"\n\ndef {task.entry_function}(*args, **kwargs):\n    return object\n"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bin_packing_or", "circle_packing_26"])
def test_ray_evaluations_equal_the_local_pools(ray_cluster, name):
    """Same programs, same Evaluations (reward, validity, status, feedback, metrics); bin packing's
    instances are data files, so they reached the workers through the object store."""
    task = load_task(name)
    programs = _programs(task)
    local = Evaluator(task, workers=2, timeout_s=3.0).evaluate_many(programs)
    runner = make_runner("ray", task, ray_cluster)
    remote = Evaluator(task, timeout_s=3.0, runner=runner)
    assert remote.workers == 2  # the cluster's CPUs
    got = remote.evaluate_many(programs)
    assert [e.status for e in got][:4] == ["ok", "error", "timeout", "crash"] and got[0].reward > 0
    assert got[4].status in ("bad_output", "error") and not got[4].valid
    for a, b in zip(local, got):
        assert (a.reward, a.valid, a.status, _untimed(a.feedback), a.metrics) == \
            (b.reward, b.valid, b.status, _untimed(b.feedback), b.metrics)


def _untimed(feedback: str) -> str:
    """Feedback without its timing line, which states the elapsed time once it passes a quarter of the
    limit, and so depends on how busy the machine is (a loaded CI box took 0.8 s of 3 s once)."""
    text, timing = feedback.rsplit("\n", 1)
    assert re.fullmatch(r"\(ran (well within the|in \d+\.\d s of the) 3 s time limit\)", timing), timing
    return text


def _sleepy_task(seconds: float):
    """A bare task: main() sleeps, then returns a number, which is the reward."""
    return SimpleNamespace(name="sleepy", timeout_s=30.0, memory_mb=1024, cascade_entry=None, harness=None,
                           data_files=(), run_entry="main", entry_function="main",
                           verify=lambda value: Verdict(float(value), True, f"returned {value}", {}),
                           code=lambda k: f"import time\ndef main():\n    time.sleep({seconds})\n    return {k}.5\n")


@pytest.mark.slow
def test_a_sigkilled_worker_is_retried_and_no_child_is_lost_or_misscored(ray_cluster):
    task = _sleepy_task(4)
    evaluator = Evaluator(task, runner=make_runner("ray", task, ray_cluster), workers=2)
    killed = []

    def kill_one_worker():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            found = _our_worker_running_a_sandbox()
            if found is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(found[0], signal.SIGKILL)
                    killed.append(found)
            time.sleep(0.2)

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    results = evaluator.evaluate_many([task.code(k) for k in range(4)])
    killer.join()
    assert killed, "no Ray worker was found running a sandbox"
    assert [(r.status, r.reward, r.valid) for r in results] == [("ok", k + 0.5, True) for k in range(4)]
    time.sleep(1)
    assert not Path(f"/proc/{killed[0][1]}").exists()  # its sandbox died with it (PR_SET_PDEATHSIG)


@pytest.mark.slow
def test_a_child_lost_twice_is_an_infra_failure_not_a_zero_reward(ray_cluster):
    task = _sleepy_task(3)
    evaluator = Evaluator(task, runner=make_runner("ray", task, ray_cluster), workers=1)
    stop = threading.Event()

    def kill_every_worker():  # every attempt dies: the first run and Ray's one retry
        while not stop.is_set():
            found = _our_worker_running_a_sandbox()
            if found is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(found[0], signal.SIGKILL)
            time.sleep(0.05)

    killer = threading.Thread(target=kill_every_worker)
    killer.start()
    try:
        result = evaluator.evaluate(task.code(1))
    finally:
        stop.set()
        killer.join()
    assert (result.status, result.valid, result.metrics) == ("infra", False, {"infra_error": 1.0})
    assert "infrastructure failure" in result.feedback and "was lost twice" in result.feedback
    assert evaluator.evaluate(task.code(2)).reward == 2.5  # the cluster still works afterwards


@pytest.mark.slow
def test_the_loop_on_ray_archives_exactly_what_the_local_loop_does(ray_cluster, tmp_path):
    from population.archive import Archive
    from rollout.engines import ENGINES
    from tests.helpers.scripted import ScriptedEngine

    ENGINES["scripted"] = ScriptedEngine
    try:
        runs = {}
        for backend in ("local", "ray"):
            extra = ["task.eval_backend=ray", f"task.ray_address={ray_cluster}"] if backend == "ray" else []
            assert main(["--config", QUICK, *TINY, "rollout.engine=scripted", f"run.output_dir={tmp_path}",
                         f"run.name={backend}", "trainer.epochs=2", *extra]) == 0
            with Archive(tmp_path / backend / "archive.sqlite") as arch:
                runs[backend] = [(s.parent_id, s.code, s.reward, s.valid, s.feedback, s.epoch)
                                 for s in (arch.get(row[0]) for row in arch.scores())]
    finally:
        del ENGINES["scripted"]
    assert len(runs["local"]) == 1 + 2 * 2 * 4 and runs["ray"] == runs["local"]
    assert {r[3] for r in runs["ray"]} == {True, False}


class _InfraEvaluator:
    """Loses the second program of every call (as RayRunner does after a failed retry)."""

    def evaluate_many(self, codes, progress=False):
        from rewards.evaluator import Evaluation

        return [Evaluation(0.0, False, "not evaluated: lost", {"infra_error": 1.0}, 0.0, "infra") if i == 1
                else Evaluation(1.25 + i, True, "ok", {}, 0.1, "ok") for i in range(len(codes))]


def test_an_infra_child_is_archived_but_not_a_program_nor_scored():
    from rollout.engine_api import Completion
    from train.loop.children import Job, evaluate_children

    task = load_task("circle_packing_26")
    first = next(line for line in task.initial_program.splitlines() if line.strip())
    block = "<<<<<<< SEARCH\n{}\n=======\n{}\n>>>>>>> REPLACE"
    texts = [block.format(first, first + f"\nX = {k}") for k in range(3)]
    job = Job(index=0, parent_id=1, parent_code=task.initial_program, token_ids=[1], tag=0)
    children = evaluate_children(task, _InfraEvaluator(), [job], [[Completion([1], t, False) for t in texts]], 1, False)
    assert [c.is_program for c in children] == [True, False, True]
    assert [c.scored for c in children] == [True, False, True]
    assert children[1].metrics["infra_error"] == 1.0 and children[1].feedback == "not evaluated: lost"


def test_the_learner_leaves_an_infra_sample_out_of_its_group(tiny_model, tokenizer, monkeypatch):
    """Advantages of the scored samples are those of the group without the lost one (checked
    against the GRPO formula by hand); the lost one adds no tokens and no reward."""
    from train.learner import learner as learner_mod
    from train.learner.config import TrainerConfig
    from train.learner.distributed import DistInfo
    from train.learner.grpo import compute_advantages
    from train.learner.learner import Learner, Sample

    rewards = [2.6359830849, 1.0, float("nan"), 0.5]
    r = np.array([2.6359830849, 1.0, 0.5])
    expected = (r - r.mean()) / (r.std(ddof=1) + 1e-6)
    seen = {}

    def spy(rw, gr, mk, *args, **kwargs):
        seen["rewards"], seen["groups"] = rw.clone(), list(gr)
        seen["advantages"] = compute_advantages(rw, gr, mk, *args, **kwargs)
        return seen["advantages"]

    monkeypatch.setattr(learner_mod, "compute_advantages", spy)
    learner = Learner(tiny_model, TrainerConfig(lr=1e-3), group_size=4, temperature=1.0,
                      pad_id=tokenizer.pad_token_id, info=DistInfo())
    out = learner.step([Sample([5, 6, 7], [8, 9], rw, 0) for rw in rewards])
    assert seen["rewards"].tolist() == r.tolist() and seen["groups"] == [0, 0, 0]
    assert np.allclose(seen["advantages"][:, 0].numpy(), expected, atol=1e-5)
    assert out["train_tokens"] == 3 * 2 and out["zero_std_frac"] == 0.0 and not out["skipped_step"]


@pytest.mark.slow
def test_a_cluster_without_cpus_for_programs_is_a_clear_error():
    """A head started with --num-cpus 0 and no CPU machine joined yet would run one program at a
    time forever; it is refused at start with what to do."""
    code = "from rewards.ray_eval import RayRunner\nRayRunner('', num_cpus=0)\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "RayUnreachable: the Ray cluster at this machine has no CPUs for programs" in proc.stderr


@pytest.mark.slow
def test_a_search_form_call_runs_on_ray_as_it_does_locally(ray_cluster, tmp_path, monkeypatch):
    """The construction, budget and seed travel to the worker with the program (plain JSON data), the sandbox
    there hands them in and takes the reports back; the verdicts equal the local pool's (docs/search_form.md)."""
    from tests.helpers import search_task

    search_task.install(tmp_path, monkeypatch)
    task = load_task(search_task.NAME)
    given = {"x": [0.3] * 8}
    hang = "import time\ndef improve(c, b, s):\n    report({'x': [0.45] * 8})\n    time.sleep(60)\n"
    nan = "def improve(c, b, s):\n    return {'x': [float('nan')] * 8}\n"
    programs = [task.initial_program, task.initial_program, hang, nan]
    calls = dict(constructions=[None, given, given, given], seeds=[0, 7, 7, 7])
    local = Evaluator(task, workers=2, timeout_s=3.0, budget_s=0.5).evaluate_many(programs, **calls)
    remote = Evaluator(task, timeout_s=3.0, budget_s=0.5, runner=make_runner("ray", task, ray_cluster))
    got = remote.evaluate_many(programs, **calls)
    assert [e.status for e in got] == ["ok", "ok", "ok", "bad_output"] and [e.from_report for e in got] == [0, 0, 1, 0]
    assert got[1].construction == json.dumps(search_task.replay(given, 7), separators=(",", ":"))
    for a, b in zip(local, got):
        assert (a.reward, a.valid, a.status, a.construction, a.metrics, a.from_report) == \
            (b.reward, b.valid, b.status, b.construction, b.metrics, b.from_report)
        assert a.feedback.rsplit("\n", 1)[0] == b.feedback.rsplit("\n", 1)[0]  # less the timing line
