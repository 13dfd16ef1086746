"""Run sandboxed programs on a Ray cluster (``task.eval_backend: ray``) instead of this machine's cores.

Each program is one Ray task that calls the same ``rewards.sandbox.run_program`` as the local pool,
on whichever node has a free CPU: same limits, namespaces, pids cgroup and kill on timeout. Ray
ships what a worker needs: this ``rewards`` package through the job's ``runtime_env``
(``py_modules``), and the task's data files through the object store (put once, written once per
worker process into a private temporary folder). No shared filesystem is assumed. A worker sends
back only the ``RunResult`` (the artefact); the trainer's verifier computes the reward, as with the
local pool.

Faults: a worker process that dies, or a node that is lost, mid-evaluation is a Ray system failure;
Ray runs the task once more (``max_retries=1``) on a live worker. If that fails too, or the result
does not arrive within twice the program's limit plus a margin (a hung node), ``run`` raises
``InfraError`` and the evaluator records the child with status ``infra``: not the program's fault,
so it is left out of its GRPO group and of selection (see train.loop.children).
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import tempfile
import threading
from pathlib import Path

from rewards.sandbox import InfraError, RunResult

RETRIES = 1  # Ray re-runs a task whose worker or node died once; a second loss is an infra failure
CONNECT_TIMEOUT_S = 5.0
RESULT_MARGIN_S = 60.0  # on top of 2x the program's limit before a missing result counts as lost
PACKAGE = Path(__file__).resolve().parent  # this rewards/ package, shipped to the workers


class RayUnreachable(ConnectionError):
    """No Ray cluster answers at the configured address; raised within seconds, before any work."""


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A TCP connect to the head's GCS port: ``ray.init`` itself retries an absent cluster for minutes."""
    if address in ("", "local"):
        return  # ray.init starts a single-node cluster here
    if address == "auto":
        return  # ray.init reads the running local cluster's address file and fails fast without one
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise RayUnreachable(f"task.ray_address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379), 'auto' or ''")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise RayUnreachable(
            f"task.ray_address {address}: no Ray cluster answers there within {timeout_s:g} s ({exc}). Start "
            f"one with `.venv/bin/ray start --head --port {port}` (README: Evaluation on a Ray cluster), "
            "or set task.eval_backend=local") from None


_files_lock = threading.Lock()
_files_dirs: dict[str, list[str]] = {}  # per worker process: data digest -> local paths


def _digest(blobs: dict[str, bytes]) -> str:
    return hashlib.sha256(b"".join(name.encode() + b"\0" + data for name, data in sorted(blobs.items()))).hexdigest()


def _local_files(digest: str, blobs: dict[str, bytes]) -> list[str]:
    """The task's data files as paths on this worker, written once per process into a private folder
    (``digest``: computed once by the driver, not per program)."""
    with _files_lock:
        if digest not in _files_dirs:
            folder = tempfile.mkdtemp(prefix=f"helix-ray-data-{digest[:12]}-")
            for name, data in blobs.items():
                with open(os.path.join(folder, name), "wb") as fh:
                    fh.write(data)
            _files_dirs[digest] = [os.path.join(folder, name) for name in sorted(blobs)]
        return _files_dirs[digest]


def _run_on_worker(code: str, entry: str, timeout_s: float, memory_mb: int, harness: str | None,
                   blobs: dict[str, bytes], digest: str, driver=None) -> RunResult:
    from rewards.sandbox import run_program  # the worker's copy, from the runtime_env's py_modules

    files = _local_files(digest, blobs) if blobs else ()
    return run_program(code, entry, timeout_s, memory_mb, harness=harness, files=files, driver=driver)


def ship_by_value(driver) -> None:
    """Have Ray pickle the driver's module by value when it is task code (tasks/...), so that workers
    without the repository can run it; such a module may import only numpy and the standard library."""
    import ray.cloudpickle

    module = sys.modules.get(getattr(driver, "__module__", None) or "")
    if module is not None and module.__name__.split(".")[0] == "tasks":  # task code, not a library's
        ray.cloudpickle.register_pickle_by_value(module)


class RayRunner:
    """``run(code, entry, timeout_s, memory_mb, harness, files)`` like ``run_program``, on a Ray cluster."""

    def __init__(self, address: str = "", data_files=(), num_cpus: int | None = None):
        """``address``: HOST:PORT of a running head, 'auto' (the cluster started on this machine), or ''
        (start a private single-node cluster with ``num_cpus`` CPUs). ``data_files``: the task's files,
        put into the object store once."""
        try:
            import ray
        except ImportError:
            raise ImportError("task.eval_backend=ray needs Ray: bash scripts/setup.sh --ray") from None
        check_reachable(address)
        self._ray = ray
        if not ray.is_initialized():
            kwargs = dict(runtime_env={"py_modules": [str(PACKAGE)]}, log_to_driver=False,
                          include_dashboard=False, configure_logging=False)
            if address in ("", "local"):  # "local": a new private cluster, never one found on the machine
                kwargs.update(address="local", num_cpus=num_cpus)
            else:
                kwargs["address"] = address
            try:
                ray.init(**kwargs)
            except ConnectionError as exc:
                raise RayUnreachable(f"task.ray_address {address!r}: {exc} (a cluster with token authentication "
                                     "needs the same RAY_AUTH_TOKEN here as on its nodes)") from None
            self._owns_session = True
        else:
            self._owns_session = False
        if not ray.cluster_resources().get("CPU"):
            raise RayUnreachable(f"the Ray cluster at {address or 'this machine'} has no CPUs for programs; join CPU "
                                 "machines first (`.venv/bin/ray start --address HEAD:PORT --num-cpus N`)")
        blobs = {Path(f).name: Path(f).read_bytes() for f in data_files}
        self._blobs, self._digest = ray.put(blobs), _digest(blobs)
        self._remote = ray.remote(num_cpus=1, max_retries=RETRIES, retry_exceptions=False)(_run_on_worker)

    def cpus(self) -> int:
        """The cluster's CPUs at start: how many programs can run at once (machines that join later
        take a share of the queue, but the evaluator's thread count is fixed: see task.eval_workers)."""
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def __call__(self, code: str, entry: str, timeout_s: float, memory_mb: int, harness: str | None = None,
                 files=(), driver=None) -> RunResult:
        """``driver`` (a driven task's, see rewards.channel) runs on the worker, next to the sandbox; its
        module travels by value, so the workers need not hold the repository."""
        ray = self._ray
        if driver is not None:
            ship_by_value(driver)
        ref = self._remote.remote(code, entry, timeout_s, memory_mb, harness, self._blobs, self._digest, driver)
        wait_s = 2 * timeout_s + RESULT_MARGIN_S  # queueing behind other programs is included in it
        try:
            return ray.get(ref, timeout=wait_s)
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref, force=True)
            raise InfraError(f"no result from the Ray cluster within {wait_s:g} s (a hung or lost node)") from None
        except ray.exceptions.RayTaskError as exc:  # run_program raised: a worker-side fault, not the program
            raise InfraError(f"the Ray worker failed: {str(exc).strip().splitlines()[-1][:300]}") from None
        except ray.exceptions.RayError as exc:  # worker or node died twice, object lost, ...
            raise InfraError(f"the Ray worker was lost twice ({type(exc).__name__})") from None

    def close(self) -> None:
        if self._owns_session and self._ray.is_initialized():
            self._ray.shutdown()
