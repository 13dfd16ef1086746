"""``helix warm-start --config CONFIG [--rebuild] [section.key=value ...]`` (also ``python -m train.warm_start``):
build (or find) the warm-started model a run with this config would start from, and print its summary and path.

A run resolves its warm start in its start routine (train.api.start.resolve_policy), with the run's own evaluator
and prompt builder; this command makes the same two (train.loop.task_tools) for the time of the build."""

from __future__ import annotations

import argparse
import json
import sys

from train.config.config import ConfigError, load_config, warm_start_inputs
from train.warm_start import build


def main(argv: list[str] | None = None, prog: str = "helix warm-start") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=build.__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="the run config whose model, task(s) and prompt settings to use")
    parser.add_argument("--rebuild", action="store_true", help="build again even if cached")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. warm_start.epochs=3")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config, list(args.overrides) + ["warm_start.enabled=true"])
    except ConfigError as err:
        print(f"warm_start: config error: {err}", file=sys.stderr)
        return 2
    from train.learner.memory import releasing_free_memory
    from train.learner.models import load_tokenizer
    from train.loop.task_tools import tools_for

    with releasing_free_memory(cfg.run.release_memory_every_s):
        lend = tools_for(cfg, load_tokenizer(cfg.model.policy, cfg.model.cache_dir))
        out = build.ensure_warm_start(warm_start_inputs(cfg), lend, rebuild=args.rebuild)
    summary = json.loads((out / "warm_start.json").read_text())
    print(json.dumps({k: v for k, v in summary.items() if k != "losses"}, indent=1))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
