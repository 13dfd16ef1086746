"""Asynchronous checkpoints (run.async_checkpoint): the files hold the state of the moment the save
was called, not of later steps; the rename still comes last, so a kill while the background write
is in flight leaves the previous checkpoint whole; errors of the write surface in the loop."""

import copy
import json
import re
import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path

import pytest
import torch

from tests.helpers.env import child_env
from tests.helpers.learner import StubEvolution, make_learner, samples
from train.learner.distributed import DistInfo
from train.loop.checkpoint import load_checkpoint, save_checkpoint
from train.loop.run_dir import checkpoint_dirs, latest_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def test_an_async_checkpoint_holds_the_weights_of_the_moment_it_was_taken(tiny_model, tokenizer, tmp_path):
    learner = make_learner(copy.deepcopy(tiny_model), tokenizer)
    learner.step(samples(tokenizer, seed=0))
    at_save = {k: v.clone() for k, v in learner.full_state_dict().items()}
    moments = {id(p): {k: v.clone() for k, v in s.items() if torch.is_tensor(v)} for p, s in learner.optimizer.state.items()}
    pending = save_checkpoint(tmp_path, 1, learner, StubEvolution(), DistInfo(), keep=2, asynchronous=True)
    assert isinstance(pending, Future)
    learner.step(samples(tokenizer, seed=1))  # the policy moves on while the files are written
    assert any(not torch.equal(at_save[k], v) for k, v in learner.full_state_dict().items())
    final = pending.result()
    assert final == tmp_path / "checkpoints" / "epoch-000001" and latest_checkpoint(tmp_path) == final
    fresh = make_learner(copy.deepcopy(tiny_model), tokenizer)
    epoch, evo = load_checkpoint(final, fresh, DistInfo())
    assert epoch == 1 and evo["pool/reward"][0] == 1.8365015544609251
    for k, v in fresh.full_state_dict().items():
        torch.testing.assert_close(v, at_save[k], atol=0, rtol=0, msg=k)
    loaded = [{k: v for k, v in s.items() if torch.is_tensor(v)} for s in fresh.optimizer.state.values()]
    assert sorted(torch.cat([t.flatten() for s in loaded for t in s.values()]).tolist()) == \
        sorted(torch.cat([t.flatten() for s in moments.values() for t in s.values()]).tolist())


def test_async_and_sync_checkpoints_write_the_same_files(tiny_model, tokenizer, tmp_path):
    learner = make_learner(copy.deepcopy(tiny_model), tokenizer)
    learner.step(samples(tokenizer, seed=0))
    sync = save_checkpoint(tmp_path / "sync", 1, learner, StubEvolution(), DistInfo(), keep=2)
    done = save_checkpoint(tmp_path / "async", 1, learner, StubEvolution(), DistInfo(), keep=2, asynchronous=True).result()
    names = sorted(str(p.relative_to(sync)) for p in sync.rglob("*") if p.is_file())
    assert names == sorted(str(p.relative_to(done)) for p in done.rglob("*") if p.is_file())
    assert "learner/dcp/.metadata" in names and "evolution.npz" in names and "state.json" in names


def test_old_checkpoints_are_pruned_only_after_the_new_one_is_in_place(tiny_model, tokenizer, tmp_path):
    learner = make_learner(copy.deepcopy(tiny_model), tokenizer)
    for epoch in (1, 2, 3):
        save_checkpoint(tmp_path, epoch, learner, StubEvolution(), DistInfo(), keep=2, asynchronous=True).result()
    assert [p.name for p in checkpoint_dirs(tmp_path)] == ["epoch-000002", "epoch-000003"]
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".tmp-")]


def test_a_failed_background_write_raises_where_the_loop_waits(tiny_model, tokenizer, tmp_path, monkeypatch):
    learner = make_learner(copy.deepcopy(tiny_model), tokenizer)
    failed: Future = Future()
    failed.set_exception(OSError(28, "No space left on device"))
    monkeypatch.setattr(learner.backend, "save_async", lambda path, group=None: failed)
    pending = save_checkpoint(tmp_path, 1, learner, StubEvolution(), DistInfo(), keep=2, asynchronous=True)
    with pytest.raises(OSError, match="No space left"):
        pending.result()
    assert latest_checkpoint(tmp_path) is None  # nothing half-written was renamed into place


KILLED_MID_WRITE = """
import os, signal
from concurrent.futures import Future
os.environ["HF_HUB_OFFLINE"] = "1"
from train.loop.checkpoint import save_checkpoint
from train.learner.distributed import DistInfo
from train.learner.models import load_policy
from tests.helpers.learner import StubEvolution, make_learner, samples

model, tokenizer = load_policy("tiny-random", "float32", None, seed=0)
learner = make_learner(model, tokenizer)
learner.step(samples(tokenizer, seed=0))
save_checkpoint({run!r}, 1, learner, StubEvolution(), DistInfo(), keep=2, asynchronous=True).result()
learner.step(samples(tokenizer, seed=1))
real = learner.backend.save_async
def in_flight(path, group=None):
    real(path, group).result()  # the model files are written, but the write has not reported back
    return Future()  # ... and never will: the kill comes first
learner.backend.save_async = in_flight
save_checkpoint({run!r}, 2, learner, StubEvolution(), DistInfo(), keep=2, asynchronous=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
def test_a_kill_while_the_write_is_in_flight_leaves_the_previous_checkpoint_whole(tiny_model, tokenizer, tmp_path):
    run = tmp_path / "run"
    script = KILLED_MID_WRITE.format(run=str(run))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=child_env())
    assert proc.returncode == -9, proc.stderr[-3000:]
    assert [p.name for p in checkpoint_dirs(run)] == ["epoch-000001"]
    partial = [p for p in (run / "checkpoints").iterdir() if p.name.startswith(".tmp-epoch-000002")]
    assert len(partial) == 1 and (partial[0] / "learner" / "dcp" / ".metadata").is_file()  # written, never renamed
    fresh = make_learner(copy.deepcopy(tiny_model), tokenizer)
    epoch, evo = load_checkpoint(latest_checkpoint(run), fresh, DistInfo())
    assert epoch == 1 and json.loads((run / "checkpoints" / "epoch-000001" / "state.json").read_text())["epoch"] == 1


@pytest.mark.slow
def test_bench_checkpoint_runs_both_modes_through_the_loop():
    tiny = ["model.policy=tiny-random", "warm_start.enabled=false", "rollout.engine=hf", "rollout.max_new_tokens=8",
            "rollout.group_size=2", "trainer.prompts_per_epoch=1", "population.size=4", "task.eval_workers=1"]
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_checkpoint.py"), "--epochs", "2", *tiny],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    rows = [line for line in out.splitlines() if line.startswith(("| sync |", "| async |"))]
    assert len(rows) == 2 and all(" GB |" in r for r in rows)
    waited = re.search(r"async waits ([\d.]+)% of the synchronous time", out)
    assert waited and float(waited.group(1)) > 0


@pytest.mark.slow
def test_an_error_in_the_loop_lets_the_checkpoint_in_flight_finish(tmp_path, monkeypatch):
    """An exception (or Ctrl-C) right after an asynchronous checkpoint was started: the write is
    finished and renamed before the error leaves the loop, so --resume starts from that epoch."""
    from train.helix import main
    from train.loop import run_dir

    class Killed(Exception):
        pass

    def dies_at_epoch_2(self, metrics):
        if metrics["epoch"] == 2:
            raise Killed
        logged(self, metrics)

    logged = run_dir.RunDir.log_metrics
    monkeypatch.setattr(run_dir.RunDir, "log_metrics", dies_at_epoch_2)
    tiny = ["model.policy=tiny-random", "warm_start.enabled=false", "rollout.engine=hf", "rollout.max_new_tokens=8",
            "rollout.group_size=2", "trainer.prompts_per_epoch=1", "population.size=4", "task.eval_workers=1",
            "trainer.epochs=3", "run.export=false", "run.progress=false", f"run.output_dir={tmp_path}", "run.name=cut",
            "run.async_checkpoint=true"]  # the quickstart writes synchronously; this is about a write in flight
    with pytest.raises(Killed):
        main(["--config", str(ROOT / "configs" / "quickstart.yaml"), *tiny])
    assert [p.name for p in checkpoint_dirs(tmp_path / "cut")] == ["epoch-000001", "epoch-000002"]
    assert (tmp_path / "cut" / "checkpoints" / "epoch-000002" / "learner" / "dcp" / ".metadata").is_file()
    import wandb

    # The failed run's wandb run is finished, so the next run in this process gets its own (a live
    # one made the next wandb.init hand back this run, and the next run dir had no .wandb file).
    assert wandb.run is None
    assert list((tmp_path / "cut" / "wandb").glob("offline-run-*/*.wandb"))
