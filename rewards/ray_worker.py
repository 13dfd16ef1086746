"""What runs inside a Ray worker for ``rewards.ray_eval``: a program's attempt, and the end-of-run sweep.

Shipped by value, not imported. Ray puts the driver's working directory (and its script's) ahead
of the job's ``py_modules`` on every worker's ``sys.path``, and a worker machine may have its own
checkout or install of ``rewards``: importing ``rewards.ray_eval`` there would run whatever copy
comes first. So ``rewards.ray_eval`` pickles this module's functions by value
(``cloudpickle.register_pickle_by_value``); on the worker they import nothing of HELIX until
``_shipped`` has found, among the folders on ``sys.path``, the ``rewards`` package whose ``*.py``
files hash to what the driver sent, and put that folder first. No such copy is an error (the
worker raises; the driver reports an infrastructure failure), never a silent substitute.

An attempt is a generator task: it yields where it runs the moment a worker takes it, again once
its set-up is done, then the ``RunResult``. The driver's deadlines count from those items, so time
spent queued behind other programs never counts against a program.
"""

from __future__ import annotations

import hashlib
import os


def package_digest(folder: str) -> str:
    """SHA-256 of a package's top-level ``*.py`` files (names and bytes), the same on both ends."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as fh:
                h.update(name.encode() + b"\0" + fh.read() + b"\0")
    return h.hexdigest()


def _shipped(digest: str):
    """The ``rewards`` package the driver shipped, imported from its own folder."""
    import importlib
    import sys

    loaded = sys.modules.get("rewards")
    if loaded is not None and getattr(loaded, "_helix_shipped", None) == digest:
        return loaded
    for entry in list(sys.path):
        folder = os.path.join(entry or os.getcwd(), "rewards")
        try:
            if os.path.isfile(os.path.join(folder, "__init__.py")) and package_digest(folder) == digest:
                break
        except OSError:
            continue
    else:
        raise RuntimeError(f"this Ray worker (pid {os.getpid()}) has no copy of the rewards package the trainer "
                           f"shipped (sha256 {digest[:12]}) on its import path: the job's runtime_env py_modules "
                           "did not reach it")
    for name in [n for n in sys.modules if n == "rewards" or n.startswith("rewards.")]:
        del sys.modules[name]  # a copy imported from elsewhere before
    sys.path.insert(0, entry)
    importlib.invalidate_caches()
    package = importlib.import_module("rewards")
    package._helix_shipped = digest
    return package


def _local_files(work: str, data_digest: str, blobs: dict) -> list[str]:
    """The task's data files as paths on this worker, written once per worker into its folder."""
    folder = os.path.join(work, f"data-{data_digest[:16]}")
    if not os.path.isdir(folder):
        import tempfile

        partial = tempfile.mkdtemp(prefix=".data-", dir=work)
        for name, data in blobs.items():
            with open(os.path.join(partial, name), "wb") as fh:
                fh.write(data)
        os.chmod(partial, 0o755)
        os.rename(partial, folder)
    return [os.path.join(folder, name) for name in sorted(blobs)]


def attempt(digest: str, job: str, code: str, entry: str, timeout_s: float, memory_mb: int, harness,
            blobs: dict, data_digest: str, options: dict):
    """One try at one program. Yields (node id, pid) the moment a worker takes it off Ray's queue,
    then the sandbox module it uses once the set-up is done (the program's clock starts), then the
    ``RunResult``."""
    import tempfile

    import ray

    yield ray.get_runtime_context().get_node_id(), os.getpid()
    _shipped(digest)
    from rewards import reaper, sandbox

    reaper.reap()  # what killed workers left on this machine
    work = reaper.work_dir(job)
    saved, tempfile.tempdir = tempfile.tempdir, work  # the sandboxes' directories: in the folder reaped if we die
    try:
        files = _local_files(work, data_digest, blobs) if blobs else ()
        sandbox.isolation()  # probed once per worker (it runs programs), before the program's clock starts
        yield sandbox.__file__
        result = sandbox.run_program(code, entry, timeout_s, memory_mb, harness=harness, files=files, **options)
    finally:
        tempfile.tempdir = saved
    yield result


def shipped(digest: str) -> str:
    """Where this worker finds the shipped package (an error when it has none)."""
    return _shipped(digest).__file__


def sweep(digest: str, job: str) -> tuple[str, int, dict]:
    """The end of a run, on one node: remove this job's worker folders and what dead owners left."""
    import ray

    _shipped(digest)
    from rewards import reaper

    return ray.get_runtime_context().get_node_id(), os.getpid(), reaper.sweep(job)
