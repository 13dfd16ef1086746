"""Checkpoints: everything a run needs to continue exactly where it stopped.

    RUN_DIR/checkpoints/epoch-000012/
        learner/         Learner.save_state: model, optimizer, LR scheduler (sharded per strategy)
        evolution.npz    pool, population, kNN index, strategy state, archive pointer (no pickle)
        rng-rank0.json   python, numpy and torch RNG states of each rank
        logs.json        this epoch's metrics row and sample rows (restored if the kill beat the log)
        state.json       epoch, world size, time

A checkpoint is written into a ``.tmp-`` directory and renamed into place only when every
rank has finished, so any ``epoch-*`` directory is complete; a kill at any moment leaves the
previous one intact. Under multi-node torchrun, RUN_DIR must be on storage all nodes share.

With ``asynchronous`` (``run.async_checkpoint``) the loop waits only while the learner state is
copied to CPU memory and the small files are written; the model and optimizer files, the fsync,
the rename and the pruning of old checkpoints happen in a background thread while the next epoch
runs. The rename still comes last, so the guarantee above is unchanged.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from train.learner.distributed import DistInfo, broadcast
from train.loop.run_dir import CHECKPOINTS, checkpoint_dirs, clean_row


def rng_state() -> dict:
    version, mt, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": [version, list(mt), gauss], "numpy": [name, keys.tolist(), pos, has_gauss, cached],
             "torch": torch.get_rng_state().tolist()}
    if torch.cuda.is_available():  # this rank's GPU generator (HF sampling on the GPU draws from it)
        state["cuda"] = torch.cuda.get_rng_state().tolist()
    return state


def set_rng_state(state: dict) -> None:
    version, mt, gauss = state["python"]
    random.setstate((version, tuple(mt), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(torch.tensor(state["cuda"], dtype=torch.uint8))


def _fsync_tree(path: Path) -> None:
    for sub, _, files in os.walk(path):
        for name in files:
            with open(os.path.join(sub, name), "rb") as fh:
                os.fsync(fh.fileno())


def save_checkpoint(run_dir: Path | None, epoch: int, learner, evolution, info: DistInfo, keep: int,
                    logs: dict | None = None, asynchronous: bool = False) -> Path | Future:
    """Collective: every rank calls it. Rank 0 owns ``run_dir``, ``evolution`` and ``logs``
    (``{"metrics": row, "samples": [rows]}``, the epoch's log rows). Returns the checkpoint's path
    (every rank), or with ``asynchronous`` a Future of it (None on ranks but 0) that completes once
    the files are written and renamed into place; wait for it before the next save and at exit."""
    tmp = None
    if info.is_main:
        root = Path(run_dir) / CHECKPOINTS
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".tmp-epoch-{epoch:06d}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    tmp = Path(broadcast(str(tmp) if tmp else None, info))
    writing = learner.save_state(tmp / "learner", asynchronous=asynchronous) if learner is not None else None
    (tmp / f"rng-rank{info.rank}.json").write_text(json.dumps(rng_state()))
    broadcast(None, info)  # every rank has written (or staged) its part
    if info.is_main:
        state = evolution.state_dict()
        with open(tmp / "evolution.npz", "wb") as fh:
            np.savez(fh, **state)
        if logs is not None:
            (tmp / "logs.json").write_text(json.dumps({"metrics": clean_row(logs["metrics"]),
                                                       "samples": [clean_row(r) for r in logs["samples"]]}))
        (tmp / "state.json").write_text(json.dumps({"epoch": epoch, "world_size": info.world, "time": time.time(),
                                                    "archive_max_id": int(state["archive/max_id"])}))

    def finish() -> Path | None:
        if writing is not None:
            writing.result()  # on rank 0, the coordinator: every rank's files are written
        if not info.is_main:
            return None
        _fsync_tree(tmp)
        final = tmp.parent / f"epoch-{epoch:06d}"
        if final.exists():  # a rerun of the same epoch after a resume: replace it
            shutil.rmtree(final)
        tmp.rename(final)
        for old in checkpoint_dirs(run_dir)[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
        return final

    if not asynchronous:
        final = finish()
        return Path(broadcast(str(final) if final else None, info))
    pool = ThreadPoolExecutor(1, thread_name_prefix="helix-checkpoint")
    pending = pool.submit(finish)
    pool.shutdown(wait=False)  # the thread ends with the write; interpreter exit still joins it
    return pending


def checkpoint_logs(path: Path) -> dict | None:
    """The epoch's log rows saved with the checkpoint (None for checkpoints written before them)."""
    path = Path(path) / "logs.json"
    return json.loads(path.read_text()) if path.is_file() else None


def load_checkpoint(path: Path, learner, info: DistInfo) -> tuple[int, dict | None]:
    """Collective. Restores the learner and this rank's RNG; returns (epoch, evolution state on rank 0)."""
    path = Path(path)
    meta = json.loads((path / "state.json").read_text())
    if learner is not None:
        if not (path / "learner").exists():
            raise RuntimeError(f"{path} holds no learner state (it was written with trainer.enabled: false)")
        learner.load_state(path / "learner")
    rng_file = path / f"rng-rank{info.rank}.json"
    if rng_file.is_file():
        set_rng_state(json.loads(rng_file.read_text()))
    elif info.is_main or meta["world_size"] != info.world:
        print(f"[helix] resume: {path} was written by {meta['world_size']} ranks; rank {info.rank} starts "
              "from fresh RNG state, so this continuation is not bit-identical", flush=True)
    evo_state = None
    if info.is_main:
        with np.load(path / "evolution.npz", allow_pickle=False) as data:
            evo_state = {k: data[k] for k in data.files}
        evo_state["archive/epoch"] = np.asarray(meta["epoch"])
    return int(meta["epoch"]), evo_state
