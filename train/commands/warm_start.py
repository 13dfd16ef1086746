"""``helix warm-start --config CONFIG [--rebuild] [section.key=value ...]`` (also ``python -m train.warm_start``):
build (or find) the warm-started model a run with this config would start from, and print its summary and path.

A run resolves its warm start here too, before the run is built (``resolve_policy``, called by
train/helix.py): HelixRun receives the model path and never fine-tunes in its constructor."""

from __future__ import annotations

import argparse
import gc
import json
import sys

from train.config.config import ConfigError, HelixConfig, load_config, warm_start_inputs
from train.learner.memory import release_free_memory, releasing_free_memory
from train.warm_start import build


def resolve_policy(cfg: HelixConfig, is_main: bool) -> str:
    """The policy the run loads: ``model.policy``, or its warm-started copy (built once, cached). Every
    rank calls it: one builds under the file lock (train.warm_start.build.ensure_warm_start), the others
    wait on it and find the same directory. EvoOnly with an engine that holds its own policy (openai:
    the server's) needs the tokenizer alone: nothing is warm-started."""
    from rollout.engines import engine_needs_weights
    from rollout.operators import uses_policy

    if not uses_policy(cfg.evolution.operators):  # iterate: no model is loaded at all
        if cfg.warm_start.enabled and is_main:
            print("[helix] warm_start skipped: the iterate baseline asks the policy nothing", flush=True)
        return cfg.model.policy
    if not (cfg.trainer.enabled or engine_needs_weights(cfg.rollout.engine)):
        if cfg.warm_start.enabled and is_main:
            print(f"[helix] warm_start skipped: rollout.engine={cfg.rollout.engine} samples from its own model", flush=True)
        return cfg.model.policy
    policy = build.policy_source(warm_start_inputs(cfg))
    gc.collect()  # anything the fine-tune left in reference cycles, freed before its pages are handed back
    release_free_memory()  # a fine-tune just built here freed its model and optimizer: hand that back before the run loads
    return policy


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
    with releasing_free_memory(cfg.run.release_memory_every_s):
        out = build.ensure_warm_start(warm_start_inputs(cfg), rebuild=args.rebuild)
    summary = json.loads((out / "warm_start.json").read_text())
    print(json.dumps({k: v for k, v in summary.items() if k != "losses"}, indent=1))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
