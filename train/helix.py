"""HELIX entry point: parse the command line, start the process group, run (train.loop.epoch_loop).

    python train/helix.py --config configs/quickstart.yaml [section.key=value ...]
    torchrun --nproc_per_node 2 train/helix.py --config configs/quickstart.yaml
    python train/helix.py --resume runs/circle_packing_26-helix-20261122-101500 [trainer.epochs=8]
    python train/helix.py export runs/circle_packing_26-helix-20261122-101500 my-model/
    python train/helix.py ui runs/                  # the run browser (train/runs/ui)
    python train/helix.py new-task my_task        # tasks/my_task/ from a template (tasks/scaffold.py)
    python train/helix.py check-task my_task      # the task check every run starts with (train/commands/task_check.py)
    python train/helix.py warm-start --config configs/quickstart.yaml  # the warm-started policy (train/commands/warm_start.py)

Per epoch: sample B parents -> build eq.-5 prompts -> G rollouts each -> apply SEARCH/REPLACE
edits -> evaluate children in the sandbox -> GRPO step -> embed + kNN diversity (eq. 6) ->
NSGA-II selection of the next population. Rank 0 owns the archive, the sandbox and the
embedder; every rank generates for its share of the prompts and takes part in the GRPO step.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import this checkout's packages, not an installed copy's
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if __name__ == "__main__" and sys.argv[1:2] in (["new-task"], ["check-task"]):  # seconds: no torch
        from tasks.scaffold import main as _new_task_main
        from train.commands.task_check import main as _check_main

        sys.exit((_new_task_main if sys.argv[1] == "new-task" else _check_main)(sys.argv[2:]))
    if __name__ == "__main__" and sys.argv[1:2] == ["ui"]:  # the browser reads files: under a second, no torch
        from train.runs.ui.server import main as _ui_main

        sys.exit(_ui_main(sys.argv[2:]))
    if __name__ == "__main__":  # a wrong task.ray_address: one line within seconds, before torch is imported
        from train.commands.ray_precheck import early_ray_check

        early_ray_check(sys.argv[1:])

import argparse
import gc
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

if "DS_ACCELERATOR" not in os.environ and not torch.cuda.is_available():
    os.environ["DS_ACCELERATOR"] = "cpu"  # what DeepSpeed picks here anyway, without its warning on every start

from rewards.ray_eval import ClusterLost, RayUnreachable
from rollout.openai_engine import EndpointError
from tasks.scaffold import main as new_task_main
from train.commands.export_cli import main as export_main
from train.commands.task_check import TaskCheckError, check_task
from train.commands.task_check import main as check_task_main
from train.commands.warm_start import main as warm_start_main
from train.commands.warm_start import resolve_policy
from train.config.config import ConfigError, HelixConfig, load_config
from train.learner.backends import needs_process_group
from train.learner.distributed import DistInfo, init_distributed, shutdown
from train.learner.memory import releasing_free_memory
from train.learner.models import ModelNotFoundError
from train.loop.checkpoint import latest_checkpoint, stop_line
from train.loop.epoch_loop import HelixRun
from train.loop.interrupt import InterruptGuard
from train.warm_start.isolated import WarmStartFailed


def run(cfg: HelixConfig, config_stem: str, info: DistInfo, resume: Path | None = None) -> Path | None:
    """The whole run (``train.loop.epoch_loop.HelixRun``); ``resume`` is a checkpoint directory to continue from.
    The checks that cost seconds come first, then the warm start (every rank: one builds, the others wait
    for it), so the run is built from a model path and its constructor fine-tunes nothing."""
    HelixRun.preflight(cfg, info)
    with releasing_free_memory(cfg.run.release_memory_every_s):
        policy = resolve_policy(cfg, info.is_main)
        return HelixRun(cfg, config_stem, info, policy, resume=resume).train()


def _resolve_resume(target: str) -> tuple[Path, Path]:
    """(run dir, its newest complete checkpoint) for ``--resume RUN_DIR`` (or a checkpoint dir)."""
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


def _load(args: argparse.Namespace) -> tuple[HelixConfig, str, Path | None]:
    """(config, run-name stem, checkpoint to resume from or None) for a new run or ``--resume``."""
    if not args.resume:
        return load_config(args.config, args.overrides), Path(args.config).stem, None
    run_path, resume = _resolve_resume(args.resume)
    cfg = load_config(str(run_path / "config.yaml"), list(args.overrides) + [
        f"run.output_dir={run_path.parent}", f"run.name={run_path.name}"])
    return cfg, run_path.name, resume


def _stop_message(cfg: HelixConfig, event: str, detail: str = "", before_run: str | None = None) -> str:
    """The stop line (train.loop.checkpoint.stop_line) for a lost Ray cluster or a Ctrl-C; before the run
    directory exists, ``before_run`` or only what happened."""
    run_path = Path(cfg.run.output_dir) / (cfg.run.name or "")
    if cfg.run.name and (run_path / "config.yaml").is_file():
        return stop_line(run_path, event, detail)
    if before_run is not None:
        return before_run
    return f"{event} before the run began (no run directory yet)" + (f" ({detail})" if detail else "") + \
        "; nothing to resume: start it again"


SUBCOMMANDS = ("export", "ui", "new-task", "check-task", "warm-start")  # helix SUBCOMMAND ...: each its own command line


def _subcommand(name: str, args: list[str]) -> int:
    """helix export / ui / new-task / check-task / warm-start: each its own small command line."""
    if name == "export":  # a run's policy as a Hugging Face model directory
        return export_main(args)
    if name == "warm-start":  # build (or find) the warm-started policy a run with this config starts from
        return warm_start_main(args)
    if name == "ui":  # the read-only run browser
        from train.runs.ui.server import main as ui_main

        return ui_main(args)
    return (new_task_main if name == "new-task" else check_task_main)(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="helix", description="HELIX: GRPO + NSGA-II evolutionary program search. "
        "Also: 'helix export RUN_DIR OUT_DIR' writes a run's policy as a Hugging Face model directory; "
        "'helix ui PATH' opens the run browser on a run or a folder of runs; "
        "'helix new-task NAME' writes tasks/NAME/ from a template; 'helix check-task NAME' checks a task folder; "
        "'helix warm-start --config CONFIG' builds (or finds) the warm-started policy a run with that config starts from.")
    parser.add_argument("--config", help="YAML file under configs/ (a new run)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its newest complete checkpoint, "
                        "with the run's own config.yaml (overrides still apply, e.g. trainer.epochs=120)")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. trainer.lr=2e-6 selection.strategy=top_score")
    return parser


def execute(cfg: HelixConfig, stem: str, resume: Path | None, command_line: bool = False) -> Path | None:
    """The run in its process group, with Ctrl-C's handling: the checkpoint in flight is finished, output after
    it goes to library.log, one stop line says how to resume, and KeyboardInterrupt goes on up. Errors propagate
    as they are: the Python API (train.api) raises them, ``main`` turns them into exit codes. Returns the run
    directory (rank 0; None elsewhere)."""
    info = init_distributed(single_process_group=needs_process_group(cfg.trainer.strategy, cfg.trainer.enabled))
    guard = InterruptGuard(lambda: Path(cfg.run.output_dir) / cfg.run.name / "library.log" if cfg.run.name else None)
    try:
        with guard:
            return run(cfg, stem, info, resume=resume)
    except KeyboardInterrupt:
        guard.divert()
        if info.is_main:
            guard.say(f"helix: {_stop_message(cfg, 'interrupted')}")
        if not command_line:
            guard.restore()
        raise
    finally:
        # What the run left in reference cycles (a DDP/FSDP/DeepSpeed model with hooks on the group)
        # is freed while the group exists, not by the interpreter's teardown after it is destroyed.
        gc.collect()
        shutdown(info)


def _train(cfg: HelixConfig, stem: str, resume: Path | None, command_line: bool) -> int:
    """The run itself, every way it can end as one line and an exit code (0, 1, 2 or 130)."""
    try:
        execute(cfg, stem, resume, command_line)
    except KeyboardInterrupt:  # the stop line is out (execute); no traceback
        return 130
    except ConfigError as err:
        print(f"helix: config error: {err}", file=sys.stderr)
        return 2
    except (ModelNotFoundError, FileNotFoundError) as err:  # a model that is not on this machine
        print(f"helix: error: {err}", file=sys.stderr)
        return 2
    except WarmStartFailed as err:  # its process was killed (out of memory?): nothing cached, nothing of the run begun
        print(f"helix: error: {err}", file=sys.stderr)
        return 1
    except (EndpointError, RayUnreachable) as err:  # rollout.engine=openai without its server; no Ray cluster there
        print(f"helix: error: {err}", file=sys.stderr)
        return 1
    except ClusterLost as err:  # task.eval_backend=ray: the cluster went away mid-run (archive, run dir closed)
        print(f"helix: error: {_stop_message(cfg, err.event, err.detail, before_run=str(err))}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    command_line = argv is None  # the process ends after main(): output after a Ctrl-C stays in library.log
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in SUBCOMMANDS:
        return _subcommand(argv[0], argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if bool(args.config) == bool(args.resume):
        parser.error("give exactly one of --config (a new run) or --resume RUN_DIR")
    try:
        cfg, stem, resume = _load(args)
    except ConfigError as err:
        print(f"helix: config error: {err}", file=sys.stderr)
        return 2
    try:  # before the model, vLLM, wandb or a run directory: a broken task folder is one line
        checked = check_task(cfg.task.name, cfg.task.timeout_s, cfg.task.memory_mb)
    except TaskCheckError as err:
        print(f"helix: task check failed: {err} (details: helix check-task {cfg.task.name} --verbose)", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":
        print(f"[helix] {checked.line()}", flush=True)
    return _train(cfg, stem, resume, command_line)

if __name__ == "__main__":
    sys.exit(main())
