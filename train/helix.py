"""HELIX's command line: its arguments and exit codes over the library's start routine (train.api.start), which
``train.api.run`` calls too. No torch is imported until a run starts, so ``--help``, a config error, a task that
fails its check and every subcommand but export and warm-start answer in seconds.

    python train/helix.py --config configs/quickstart.yaml [section.key=value ...]
    torchrun --nproc_per_node 2 train/helix.py --config configs/quickstart.yaml
    python train/helix.py --resume runs/circle_packing_26-helix-20261122-101500 [trainer.epochs=8]
    python train/helix.py export runs/circle_packing_26-helix-20261122-101500 my-model/
    python train/helix.py ui runs/                  # the run browser (train/runs/ui)
    python train/helix.py new-task my_task        # tasks/my_task/ (or --dir DIR: DIR/my_task/) from a template (tasks/scaffold.py)
    python train/helix.py check-task my_task      # the task check every run starts with (train/commands/task_check.py)
    python train/helix.py warm-start --config configs/quickstart.yaml  # the warm-started policy (train/commands/warm_start.py)

Per epoch: sample B parents -> build eq.-5 prompts -> G rollouts each -> apply SEARCH/REPLACE
edits -> evaluate children in the sandbox -> GRPO step -> embed + kNN diversity (eq. 6) ->
NSGA-II selection of the next population (train.loop.epoch_loop). Rank 0 owns the archive, the sandbox
and the embedder; every rank generates for its share of the prompts and takes part in the GRPO step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import this checkout's packages, not an installed copy's
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SUBCOMMANDS = ("export", "ui", "new-task", "check-task", "warm-start")  # helix SUBCOMMAND ...: each its own command line


def _subcommand(name: str, args: list[str]) -> int:
    """helix export / ui / new-task / check-task / warm-start: each its own small command line."""
    if name == "export":  # a run's policy as a Hugging Face model directory
        from train.commands.export_cli import main
    elif name == "warm-start":  # build (or find) the warm-started policy a run with this config starts from
        from train.commands.warm_start import main
    elif name == "ui":  # the read-only run browser
        from train.runs.ui.server import main
    elif name == "new-task":
        from tasks.scaffold import main
    else:
        from train.commands.task_check import main
    return main(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="helix", description="HELIX: GRPO + NSGA-II evolutionary program search. "
        "Also: 'helix export RUN_DIR OUT_DIR' writes a run's policy as a Hugging Face model directory; "
        "'helix ui PATH' opens the run browser on a run or a folder of runs; "
        "'helix new-task NAME [--dir DIR]' writes tasks/NAME/ (or DIR/NAME/) from a template; "
        "'helix check-task NAME' checks a task folder; "
        "'helix warm-start --config CONFIG' builds (or finds) the warm-started policy a run with that config starts from.")
    parser.add_argument("--config", help="YAML file under configs/ (a new run)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its newest complete checkpoint, "
                        "with the run's own config.yaml (overrides still apply, e.g. trainer.epochs=120)")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. trainer.lr=2e-6 selection.strategy=top_score")
    return parser


def _error(message: str, code: int) -> int:
    print(f"helix: {message}", file=sys.stderr)
    return code


def _train(begun, command_line: bool) -> int:
    """The run itself (``begun``: a train.api.start.Start), every way it can end as one line and an exit code
    (0, 1, 2 or 130)."""
    from rewards.ray_eval import ClusterLost, RayUnreachable
    from rollout.openai_engine import EndpointError
    from train.api import start
    from train.config.config import ConfigError
    from train.warm_start.isolated import WarmStartFailed

    try:
        start.execute(begun, command_line)
    except KeyboardInterrupt:  # the stop line is out (start.execute); no traceback
        return 130
    except ConfigError as err:
        return _error(f"config error: {err}", 2)
    except FileNotFoundError as err:  # a model that is not on this machine (ModelNotFoundError)
        return _error(f"error: {err}", 2)
    except WarmStartFailed as err:  # its process was killed (out of memory?): nothing cached, nothing of the run begun
        return _error(f"error: {err}", 1)
    except (EndpointError, RayUnreachable) as err:  # rollout.engine=openai without its server; no Ray cluster there
        return _error(f"error: {err}", 1)
    except ClusterLost as err:  # task.eval_backend=ray: the cluster went away mid-run (archive, run dir closed)
        return _error(f"error: {start.stop_message(begun.cfg, err.event, err.detail, before_run=str(err))}", 1)
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
    from rewards.ray_eval import RayUnreachable
    from train.api import start
    from train.commands.task_check import TaskCheckError
    from train.config.config import ConfigError

    try:
        begun = start.load(args.config, args.overrides, args.resume)
        start.check(begun)  # before the model, vLLM, wandb or a run directory: seconds, one line
    except ConfigError as err:
        return _error(f"config error: {err}", 2)
    except RayUnreachable as err:  # a wrong task.ray_address
        return _error(f"error: {err}", 1)
    except TaskCheckError as err:
        return _error(f"task check failed: {err} (details: helix check-task {begun.cfg.task.name} --verbose)", 2)
    return _train(begun, command_line)


if __name__ == "__main__":
    sys.exit(main())
