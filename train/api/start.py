"""The start of a run, written once for both doors: the command line (train/helix.py turns what goes wrong into
one line and an exit code) and ``train.api.run`` (which raises it). Three steps, in this order:

1. ``load``: the config and its overrides (a new run), or the run's own config.yaml and its newest complete
   checkpoint (a resume). No torch.
2. ``check``: what costs seconds and no torch: the Ray handshake (task.eval_backend=ray) and the task check
   (train.commands.task_check), whose line rank 0 prints.
3. ``execute``: torch from here on. verl's names in the config, the process group, the run's preflight
   (train.loop.epoch_loop.HelixRun.preflight), rank 0's evaluator and prompt builder (train.loop.task_tools),
   the warm start (rank 0 builds it with those two, the other ranks wait for its path), then the run itself
   (HelixRun) with Ctrl-C's handling: the checkpoint in flight is finished, output after it goes to
   library.log, one stop line says how to resume, and KeyboardInterrupt goes on up.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from train.config.config import ConfigError, HelixConfig, check_learner_names, config_source, load_config, warm_start_inputs
from train.loop.run_dir import latest_checkpoint, stop_line

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass(frozen=True)
class Start:
    """A run about to start: its config, the stem its name is made from (the config file's name; a resumed
    run keeps its own name), the checkpoint it continues from (None: a new run), and how errors name the config."""

    cfg: HelixConfig
    stem: str
    checkpoint: Path | None
    source: str


def load(config: str | Path | None = None, overrides: Sequence[str] = (), resume: str | Path | None = None) -> Start:
    """A new run from ``config`` with ``overrides``, or the run ``resume`` names (its folder, or one of its
    checkpoints) with its own config.yaml under ``overrides``. ConfigError for a bad config or folder."""
    if resume is None:
        return Start(load_config(config, list(overrides)), Path(config).stem, None, config_source(config, list(overrides)))
    run_path, checkpoint = resolve_resume(str(resume))
    overrides = [*overrides, f"run.output_dir={run_path.parent}", f"run.name={run_path.name}"]
    return Start(load_config(run_path / "config.yaml", overrides), run_path.name, checkpoint,
                 config_source(run_path / "config.yaml", overrides))


def resolve_resume(target: str) -> tuple[Path, Path]:
    """(run dir, its newest complete checkpoint) for a run directory or one of its checkpoint directories."""
    path = Path(target)
    if (path / "state.json").is_file() and path.parent.name == "checkpoints":
        return path.parent.parent, path
    if not (path / "config.yaml").is_file():
        raise ConfigError(f"--resume {target}: not a run directory (no config.yaml in it)")
    ckpt = latest_checkpoint(path)
    if ckpt is None:
        raise ConfigError(f"--resume {target}: no complete checkpoint in {path / 'checkpoints'} (the run stopped "
                          "before its first one, or run.checkpoint_every was 0); start a new run instead")
    return path, ckpt


def check(start: Start) -> None:
    """The checks that take seconds, before torch, a model or a run directory: a wrong task.ray_address is
    RayUnreachable, a broken task folder TaskCheckError, a run directory a live run holds RunDirInUse (each
    one line)."""
    from rewards.ray_eval import check_reachable
    from train.commands.task_check import check_task
    from train.loop.run_lock import refuse_if_held

    cfg = start.cfg
    if cfg.run.name:  # before its library.log or wandb files are touched; the run's own hold is in RunDir
        refuse_if_held(Path(cfg.run.output_dir) / cfg.run.name)
    if cfg.task.eval_backend == "ray":
        check_reachable(cfg.task.ray_address)
    checked = check_task(cfg.task.name, cfg.task.timeout_s, cfg.task.memory_mb)
    if os.environ.get("RANK", "0") == "0":
        print(f"[helix] {checked.line()}", flush=True)


def execute(start: Start, command_line: bool = False) -> Path | None:
    """The run in its process group, as the module docstring says; errors propagate as they are. With
    ``command_line`` the output after a Ctrl-C stays diverted (the process ends next). Returns the run
    directory (rank 0; None elsewhere)."""
    import torch

    if "DS_ACCELERATOR" not in os.environ and not torch.cuda.is_available():
        os.environ["DS_ACCELERATOR"] = "cpu"  # what DeepSpeed picks here anyway, without its warning on every start
    from train.learner.backends import needs_process_group
    from train.learner.distributed import init_distributed, shutdown
    from train.loop.interrupt import InterruptGuard

    cfg = start.cfg
    check_learner_names(cfg, start.source)
    info = init_distributed(single_process_group=needs_process_group(cfg.trainer.strategy, cfg.trainer.enabled))
    guard = InterruptGuard(lambda: Path(cfg.run.output_dir) / cfg.run.name / "library.log" if cfg.run.name else None)
    try:
        with guard:
            return _run(start, info)
    except KeyboardInterrupt:
        guard.divert()
        if info.is_main:
            guard.say(f"helix: {stop_message(cfg, 'interrupted')}")
        if not command_line:
            guard.restore()
        raise
    finally:
        # What the run left in reference cycles (a DDP/FSDP/DeepSpeed model with hooks on the group)
        # is freed while the group exists, not by the interpreter's teardown after it is destroyed.
        gc.collect()
        shutdown(info)


def _run(start: Start, info) -> Path | None:
    """Preflight, rank 0's tools, the warm start, the run: the checks that cost seconds come first, and the run
    is built from a model path (its constructor fine-tunes nothing)."""
    from train.config.run_name import default_run_name
    from train.learner.distributed import broadcast
    from train.learner.memory import releasing_free_memory
    from train.loop.epoch_loop import HelixRun

    cfg = start.cfg
    HelixRun.preflight(cfg, info)
    cfg.run.name = broadcast(cfg.run.name or default_run_name(cfg), info)
    with releasing_free_memory(cfg.run.release_memory_every_s):
        tools = _run_tools(cfg) if info.is_main else None
        try:
            policy = resolve_policy(cfg, info, tools)
            run = HelixRun(cfg, start.stem, info, policy, resume=start.checkpoint, tools=tools)
        except BaseException:
            if tools is not None:
                tools.close()
            raise
        return run.train()


def _run_tools(cfg: HelixConfig):
    """Rank 0's evaluator and prompt builder for the run's task (the tokenizer is model.policy's, which a warm
    start keeps; a run that prompts nothing, the iterate baseline, loads none)."""
    from rollout.operators import uses_policy
    from tasks import load_task
    from train.learner.models import load_tokenizer
    from train.loop.run_dir import library_log
    from train.loop.task_tools import task_tools

    tokenizer = load_tokenizer(cfg.model.policy, cfg.model.cache_dir) if uses_policy(cfg.evolution.operators) else None
    return task_tools(cfg, load_task(cfg.task.name), tokenizer, library_log=library_log(cfg))


def resolve_policy(cfg: HelixConfig, info, tools) -> str:
    """The policy the run loads: ``model.policy``, or its warm-started copy (built once, cached). Rank 0 builds it
    with ``tools`` (the run's evaluator and prompt builder) under the cache's file lock; the other ranks get its
    path. Nothing is warm-started for the iterate baseline (it asks no policy anything) or for EvoOnly with an
    engine that holds its own policy (openai: the server's; the run needs the tokenizer alone)."""
    from rollout.engines import engine_needs_weights
    from rollout.operators import uses_policy
    from train.learner.distributed import broadcast
    from train.learner.memory import release_free_memory
    from train.loop.task_tools import tools_for
    from train.warm_start import build

    if not uses_policy(cfg.evolution.operators):  # iterate: no model is loaded at all
        if cfg.warm_start.enabled and info.is_main:
            print("[helix] warm_start skipped: the iterate baseline asks the policy nothing", flush=True)
        return cfg.model.policy
    if not (cfg.trainer.enabled or engine_needs_weights(cfg.rollout.engine)):
        if cfg.warm_start.enabled and info.is_main:
            print(f"[helix] warm_start skipped: rollout.engine={cfg.rollout.engine} samples from its own model", flush=True)
        return cfg.model.policy
    policy = None
    if info.is_main:
        policy = build.policy_source(warm_start_inputs(cfg), tools_for(cfg, tools.builder.tokenizer, tools))
    policy = broadcast(policy, info)
    gc.collect()  # anything the data step left in reference cycles, freed before its pages are handed back
    release_free_memory()
    return policy


def stop_message(cfg: HelixConfig, event: str, detail: str = "", before_run: str | None = None) -> str:
    """The stop line (train.loop.run_dir.stop_line) for a lost Ray cluster or a Ctrl-C; before the run
    directory exists, ``before_run`` or only what happened."""
    run_path = Path(cfg.run.output_dir) / (cfg.run.name or "")
    if cfg.run.name and (run_path / "config.yaml").is_file():
        return stop_line(run_path, event, detail)
    if before_run is not None:
        return before_run
    return f"{event} before the run began (no run directory yet)" + (f" ({detail})" if detail else "") + \
        "; nothing to resume: start it again"
