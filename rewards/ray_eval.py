"""Run sandboxed programs on a Ray cluster (``task.eval_backend: ray``) instead of this machine's cores.

Each program is one Ray task that calls the same ``rewards.sandbox.run_program`` as the local pool,
on whichever node has a free CPU: same limits, namespaces, pids cgroup and kill on timeout. Ray
ships what a worker needs: this ``rewards`` package through the job's ``runtime_env``
(``py_modules``), imported on the worker from that copy whatever else its import path holds
(``rewards.ray_worker``), and the task's data files through the object store. No shared filesystem
is assumed. A worker sends back only the ``RunResult``; the trainer's verifier computes the reward.

Time: a program's attempt reports when a worker takes it (its set-up then has ``SETUP_S``) and when
the program starts; its deadline (the limit plus ``RESULT_MARGIN_S``) counts from then, so waiting
in Ray's queue behind other programs is never a failure. Programs are submitted as CPUs free up: at most the cluster's CPUs at once (or
``limit``), following nodes that join or leave (``Watch``).

Faults, from Ray's own signals: a worker or node that dies mid-program fails the attempt, and it is
run once more (``RETRIES``) on a live worker; a second loss, or a started program whose result
does not come (a hung node), raises ``InfraError``: the child gets status ``infra``, is not scored
and stays out of its GRPO group and of selection (train.loop.children). A head that stops answering
for ``LOST_AFTER_S`` (or no node with CPUs left for ``NO_CPUS_AFTER_S``) raises ``ClusterLost``
from every waiting call: the run ends with a HELIX error naming the checkpoint to resume from
(train/helix.py). Each lost node is one ``[helix]`` line; Ray's own reports about it go to the
run's library.log (``library_log``). What killed workers leave on a machine is removed by the next
program there, and at ``close`` by a sweep of every node (rewards.reaper).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import threading
import time
from pathlib import Path

from rewards import ray_worker
from rewards.ray_gcs import HANDSHAKE_TIMEOUT_S, Gcs, RayUnreachable, handshake
from rewards.sandbox import InfraError, RunResult

__all__ = ["RayRunner", "RayUnreachable", "ClusterLost", "check_reachable"]
RETRIES = 1  # a program whose worker or node died is run once more; a second loss is an infra failure
RESULT_MARGIN_S = 30.0  # after a started program's limit: the sandbox's own start-up and clean-up
SETUP_S = 120.0  # from a worker taking the program to its start: imports, data files, the sandbox probe
WATCH_PERIOD_S = 2.0  # how often the GCS's node list is read
LOST_AFTER_S = 20.0  # the head unanswered this long: the cluster is lost
NO_CPUS_AFTER_S = 60.0  # no alive node with CPUs this long: nothing can run, the cluster is lost
SWEEP_TIMEOUT_S = 30.0
POLL_S = 0.5  # how often a waiting call looks for a lost cluster
PACKAGE = Path(__file__).resolve().parent  # this rewards/ package, shipped to the workers
log = logging.getLogger(__name__)


class ClusterLost(InfraError):
    """The Ray cluster is gone (its head stopped answering, or no machine with CPUs is left): no
    program can be evaluated any more. Not one child's failure: the run stops (train/helix.py)."""

    def __init__(self, event: str, detail: str):
        super().__init__(f"{event}: {detail}")
        self.event, self.detail = event, detail


def check_reachable(address: str, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
    """The start-up check of task.ray_address: a Ray handshake (rewards.ray_gcs), RayUnreachable if it fails."""
    handshake(address, timeout_s)


def _digest(blobs: dict[str, bytes]) -> str:
    return hashlib.sha256(b"".join(name.encode() + b"\0" + data for name, data in sorted(blobs.items()))).hexdigest()


def _print(message: str) -> None:
    print(message, flush=True)


def ship_by_value(driver) -> None:
    """Have Ray pickle the driver's module by value when it is task code (tasks/...), so that workers
    without the repository can run it; such a module may import only numpy and the standard library."""
    import ray.cloudpickle

    module = sys.modules.get(getattr(driver, "__module__", None) or "")
    if module is not None and module.__name__.split(".")[0] == "tasks":  # task code, not a library's
        ray.cloudpickle.register_pickle_by_value(module)


class RayRunner:
    """``run(code, entry, timeout_s, memory_mb, harness, files, **options)`` like ``run_program``, on a Ray cluster."""

    elastic = True  # admits programs as the cluster's CPUs allow: the evaluator submits a whole batch at once

    def __init__(self, address: str = "", data_files=(), num_cpus: int | None = None, limit: int | None = None,
                 library_log: Path | None = None, say=_print):
        """``address``: HOST:PORT of a running head, 'auto' (the cluster started on this machine), or ''
        (start a private single-node cluster with ``num_cpus`` CPUs). ``data_files``: the task's files,
        put into the object store once. ``limit``: programs at once (default: the cluster's CPUs, as
        they change). ``library_log``: where Ray's reports go instead of the terminal; ``say``: how
        HELIX's own lines (one per lost node) are printed."""
        try:
            import ray
        except ImportError:
            raise ImportError("task.eval_backend=ray needs Ray: bash scripts/setup.sh --ray") from None
        info = handshake(address)
        self._ray, self.address, self.limit, self._say = ray, address or "this machine", limit, say
        self._cond = threading.Condition()
        self._in_flight, self._lost, self._closed = 0, None, threading.Event()
        self._running: dict = {}  # attempt generator -> node id once started (None before)
        self.started_on: list[tuple[str, int, str]] = []  # (node id, worker pid, sandbox module) of every start
        self.swept: list[dict] = []  # what close() removed, per node
        self.cancelled = 0  # attempts cancelled (force) after their deadline, or at close
        self.peak_in_flight = 0  # the most programs submitted at once
        self.waited_s: list[float] = []  # per started attempt: from the call to the program's start
        # HELIX decides when the head is lost (Watch) and ends the run cleanly; Ray's own default ends the
        # process 60 s after losing the GCS, in the middle of whatever it was doing. Read at ray.init.
        os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", "3600")
        self._owns_session = not ray.is_initialized()
        self._chatter = _Chatter(library_log)
        if self._owns_session:
            kwargs = dict(runtime_env={"py_modules": [str(PACKAGE)]}, log_to_driver=False, include_dashboard=False,
                          configure_logging=False)
            if info is None:  # "local": a new private cluster, never one found on the machine
                kwargs.update(address="local", num_cpus=num_cpus)
            else:
                kwargs["address"] = info.address
            try:
                with self._chatter.during_init():
                    ray.init(**kwargs)
            except ConnectionError as exc:
                self._chatter.stop()
                raise RayUnreachable(f"task.ray_address {address!r}: {exc}") from None
        self._chatter.start()
        context = ray.get_runtime_context()
        self._job, self._gcs = context.get_job_id(), Gcs(context.gcs_address)
        if not ray.cluster_resources().get("CPU"):
            self.close()
            raise RayUnreachable(f"the Ray cluster at {self.address} has no CPUs for programs; join CPU machines first "
                                 "(`.venv/bin/ray start --address HEAD:PORT --num-cpus N`)")
        blobs = {Path(f).name: Path(f).read_bytes() for f in data_files}
        self._blobs, self._data_digest = ray.put(blobs), _digest(blobs)
        self._digest = ray_worker.package_digest(str(PACKAGE))
        # By value: a worker must not import any rewards package to unpickle them (see rewards.ray_worker).
        ray.cloudpickle.register_pickle_by_value(ray_worker)
        self._attempt = ray.remote(num_cpus=1, max_retries=0)(ray_worker.attempt)
        self._sweep = ray.remote(num_cpus=0, max_retries=0)(ray_worker.sweep)
        if not self._owns_session:  # a session started before (another runner's, or someone else's)
            self._check_shipped()
        try:
            self._watch = Watch(self, self._gcs)
        except Exception as exc:  # grpc.RpcError: the head stopped answering right after ray.init
            self.close()
            raise RayUnreachable(f"task.ray_address {address!r}: the head stopped answering after the connection "
                                 f"({type(exc).__name__}); check its machine and `ray status` there") from None
        self._watch.start()

    def _check_shipped(self) -> None:
        """A Ray session this runner did not start must ship this very package (its job's
        runtime_env): a task-level runtime_env cannot upload a folder. Checked once, on a worker."""
        ray = self._ray
        probe = ray.remote(num_cpus=0, max_retries=0)(ray_worker.shipped)
        try:
            ray.get(probe.remote(self._digest), timeout=SETUP_S)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            self.close()
            raise RayUnreachable(f"the Ray session already started in this process does not ship this rewards "
                                 f"package to its workers ({str(exc).strip().splitlines()[-1][:200]}); start it with "
                                 f"runtime_env={{'py_modules': ['{PACKAGE}']}}, or let HELIX start it") from None

    # ---- capacity -------------------------------------------------------------------------
    def cpus(self) -> int:
        """The CPUs of the cluster's alive nodes now: how many programs run at once by default."""
        return max(1, int(self._watch.cpus))

    def _allowed(self) -> int:
        return self.limit or max(1, int(self._watch.cpus))

    @contextlib.contextmanager
    def _slot(self):
        with self._cond:
            while self._lost is None and self._in_flight >= self._allowed() and not self._closed.is_set():
                self._cond.wait(POLL_S)
            self._check()
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify()

    def _check(self) -> None:
        if self._lost is not None:  # a fresh exception per thread: they are raised at once in many
            raise ClusterLost(self._lost.event, self._lost.detail)
        if self._closed.is_set():
            raise InfraError("the Ray evaluator was closed")

    def lose(self, why: str) -> None:
        """Every waiting and later call raises ClusterLost (called by Watch)."""
        with self._cond:
            if self._lost is None:
                self._lost = ClusterLost(f"the Ray cluster at {self.address} was lost", why)
            self._cond.notify_all()

    def capacity_changed(self) -> None:
        with self._cond:
            self._cond.notify_all()

    # ---- one program ---------------------------------------------------------------------
    def __call__(self, code: str, entry: str, timeout_s: float, memory_mb: int, harness: str | None = None,
                 files=(), **options) -> RunResult:
        """``files`` are the task's data files, shipped once at start; ``options`` go to run_program
        (a driven task's ``driver`` runs on the worker, next to the sandbox: see ship_by_value)."""
        if options.get("driver") is not None:
            ship_by_value(options["driver"])
        losses, called = [], time.monotonic()
        for _ in range(1 + RETRIES):
            with self._slot():
                outcome = self._try(code, entry, timeout_s, memory_mb, harness, options, called)
            if isinstance(outcome, RunResult):
                return outcome
            losses.append(outcome)
            self._await_head()
        raise InfraError(f"the program was lost twice on the Ray cluster ({'; then '.join(losses)})")

    def _try(self, code, entry, timeout_s, memory_mb, harness, options, called: float) -> RunResult | str:
        """The program's result, or why this attempt was lost (a worker or node died, a hung node)."""
        gen = self._attempt.remote(self._digest, self._job, code, entry, timeout_s, memory_mb, harness, self._blobs,
                                   self._data_digest, options)
        self._running[gen] = None
        try:
            taken = self._next(gen, None)  # queued: no deadline, however long the queue
            if not isinstance(taken, tuple):
                return self._lost_attempt(gen, taken, "")
            self._running[gen] = node = taken[0]
            where = self._watch.describe(node)
            module = self._next(gen, time.monotonic() + SETUP_S)
            if not isinstance(module, str) or module.startswith("lost: "):
                return self._lost_attempt(gen, module, f"its set-up on node {where} took over {SETUP_S:g} s")
            self.started_on.append((node, taken[1], module))
            self.waited_s.append(time.monotonic() - called)
            limit = timeout_s + RESULT_MARGIN_S
            result = self._next(gen, time.monotonic() + limit)
            if not isinstance(result, RunResult):
                return self._lost_attempt(gen, result, f"no result within {limit:g} s of its start on node {where} "
                                                       "(a hung node)")
            return result
        finally:
            self._running.pop(gen, None)

    def _await_head(self) -> None:
        """After a lost attempt: go on once the head answers; if it does not, wait for the watch's
        verdict (ClusterLost), so that children lost with the whole cluster are never scored infra."""
        while not self._watch.answers():
            with self._cond:
                self._check()
                self._cond.wait(POLL_S)
            self._check()

    def _lost_attempt(self, gen, outcome, why: str) -> str:
        """Why the attempt is lost: its worker or node died (``outcome`` "lost: ..."), or it passed its
        deadline (``outcome`` None): then it is cancelled in the background, since a stopped worker
        can hold ``ray.cancel`` for minutes."""
        if outcome is not None:
            return str(outcome).removeprefix("lost: ")
        threading.Thread(target=self._cancel, args=(gen,), daemon=True, name="helix-ray-cancel").start()
        return why

    def _cancel(self, gen) -> None:
        with contextlib.suppress(Exception):
            self._ray.cancel(gen, force=True)
        self.cancelled += 1

    def _next(self, gen, deadline: float | None):
        """The attempt's next item; None when ``deadline`` passes first; "lost: why" when the worker or
        its node died (Ray's system errors). ClusterLost when the watch lost the cluster meanwhile."""
        ray = self._ray
        while True:
            if self._lost is not None or self._closed.is_set():
                self._lost_attempt(gen, None, "")
                self._check()
            wait = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
            if wait <= 0:
                return None
            ready, _ = ray.wait([gen], timeout=wait)
            if not ready:
                continue
            try:
                return ray.get(next(gen))
            except ray.exceptions.RayTaskError as exc:  # the attempt raised: a worker-side fault, not the program
                raise InfraError(f"the Ray worker failed: {str(exc).strip().splitlines()[-1][:300]}") from None
            except ray.exceptions.RayError as exc:  # the worker or its node died, ...
                where = self._running.get(gen)
                return f"lost: {type(exc).__name__}" + (f" on node {self._watch.describe(where)}" if where else "")

    # ---- the end -------------------------------------------------------------------------
    def close(self) -> None:
        """Stop what is still running, sweep every node (this job's folders, dead owners' state), and
        end the Ray session if this runner started it. Quick when the cluster is lost."""
        if self._closed.is_set():
            return
        self._closed.set()
        ray = self._ray
        with self._cond:
            self._cond.notify_all()
        watch = getattr(self, "_watch", None)
        if watch is not None:
            watch.stop()
        if self._lost is None and ray.is_initialized() and hasattr(self, "_sweep"):
            running = list(self._running.copy())  # (a copy is atomic; other threads add and remove)
            for gen in running:  # what a Ctrl-C or an error left running: killed, then swept below
                self._lost_attempt(gen, None, "")
            if running:
                ray.wait(running, num_returns=len(running), timeout=10)
            if self._owns_session and watch is not None:
                self._sweep_nodes()
        if hasattr(self, "_gcs"):
            self._gcs.close()
        if self._owns_session and ray.is_initialized():
            ray.shutdown()
        self._chatter.stop()

    def _sweep_nodes(self) -> None:
        """On every alive node: remove this job's worker folders (its workers are idle now and Ray
        kills them without a chance to clean up) and what dead owners left."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray
        refs = [self._sweep.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
                .remote(self._digest, self._job) for node_id in self._watch.alive]
        ready, late = ray.wait(refs, num_returns=len(refs), timeout=SWEEP_TIMEOUT_S) if refs else ([], [])
        for ref in ready:
            try:
                node_id, pid, removed = ray.get(ref)
                self.swept.append(dict(node=node_id, pid=pid, **removed))
            except ray.exceptions.RayError as exc:
                log.warning("ray_eval: the sweep of a node failed: %s", str(exc).splitlines()[-1][:200])
        if late:
            log.warning("ray_eval: %d node(s) were not swept within %g s", len(late), SWEEP_TIMEOUT_S)


class Watch(threading.Thread):
    """Reads the GCS's node list every WATCH_PERIOD_S: the alive CPUs (the runner's capacity), one
    line per node that died, and the loss of the cluster (head silent, or no CPUs left)."""

    def __init__(self, runner: RayRunner, gcs: Gcs):
        super().__init__(daemon=True, name="helix-ray-watch")
        self.runner, self.gcs, self._halt = runner, gcs, threading.Event()
        nodes = gcs.nodes(HANDSHAKE_TIMEOUT_S)
        self.alive = {n.node_id: n for n in nodes if n.alive}
        self.known = {n.node_id: n for n in nodes}
        self.cpus = sum(n.cpus for n in self.alive.values())

    def describe(self, node_id: str) -> str:
        node = self.known.get(node_id)
        return f"{node.address} ({node_id[:8]})" if node else node_id[:8]

    def stop(self) -> None:
        self._halt.set()

    def answers(self) -> bool:
        """The head answers now (one GCS call, at most HANDSHAKE_TIMEOUT_S)."""
        try:
            self.gcs.nodes(HANDSHAKE_TIMEOUT_S)
        except Exception:  # grpc.RpcError mostly
            return False
        return True

    def run(self) -> None:
        silent_since = no_cpus_since = None
        while not self._halt.wait(WATCH_PERIOD_S):
            now = time.monotonic()
            try:
                nodes = self.gcs.nodes(HANDSHAKE_TIMEOUT_S)
            except Exception as exc:  # grpc.RpcError mostly; anything else means the same
                silent_since = silent_since or now
                if now - silent_since >= LOST_AFTER_S:
                    code = getattr(exc, "code", None)  # grpc.RpcError: UNAVAILABLE, DEADLINE_EXCEEDED...
                    why = code().name.lower() if callable(code) else type(exc).__name__
                    self.runner.lose(f"its head has not answered for {LOST_AFTER_S:g} s: {why}")
                    return
                continue
            silent_since = None
            self.known.update((n.node_id, n) for n in nodes)
            alive = {n.node_id: n for n in nodes if n.alive}
            for node_id, node in self.alive.items():
                if node_id not in alive:
                    why = self.known[node_id].death or "no longer alive"
                    self.runner._say(f"[helix] Ray node {node.address} ({node_id[:8]}, {node.cpus:g} CPUs) lost: "
                                     f"{why.rstrip('.')}; its programs run again elsewhere")
            self.alive, self.cpus = alive, sum(n.cpus for n in alive.values())
            self.runner.capacity_changed()
            no_cpus_since = (no_cpus_since or now) if self.cpus == 0 else None
            if no_cpus_since is not None and now - no_cpus_since >= NO_CPUS_AFTER_S:
                self.runner.lose(f"no node with CPUs has been alive for {NO_CPUS_AFTER_S:g} s")
                return


class _Chatter:
    """Ray's reports to the driver (a dead worker or node, with the tail of its raylet's log) go to
    ``path`` instead of the terminal. Ray prints them through ``ray._private.worker.print_to_stdstream``
    whatever ``log_to_driver`` says; that function is swapped while the runner lives. ``None``:
    nothing changes (run.library_logs: console)."""

    def __init__(self, path: Path | None):
        self.path, self._saved, self._handler = path, None, None

    def _write(self, data, ignore_prefix=False) -> None:
        with open(self.path, "a") as fh:
            for line in data.get("lines", []):
                fh.write(f"({data.get('pid', 'ray')}) {line}\n")

    @contextlib.contextmanager
    def during_init(self):
        """ray.init's own logging (Ray's loggers, not its C++ core) to the file too."""
        if self.path is not None and self._handler is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handler = logging.FileHandler(self.path)
            self._handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s [%(name)s] %(message)s"))
            ray_logger = logging.getLogger("ray")
            ray_logger.addHandler(self._handler)
            ray_logger.propagate = False
        yield

    def start(self) -> None:
        if self.path is None:
            return
        with self.during_init():
            pass
        import ray._private.worker as ray_worker_module

        if self._saved is None and hasattr(ray_worker_module, "print_to_stdstream"):
            self._saved = ray_worker_module.print_to_stdstream
            ray_worker_module.print_to_stdstream = self._write

    def stop(self) -> None:
        if self._saved is not None:
            import ray._private.worker as ray_worker_module

            ray_worker_module.print_to_stdstream, self._saved = self._saved, None
        if self._handler is not None:
            ray_logger = logging.getLogger("ray")
            ray_logger.removeHandler(self._handler)
            ray_logger.propagate = True
            self._handler.close()
            self._handler = None
