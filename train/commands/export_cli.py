"""``helix export RUN_DIR OUT_DIR`` (= ``python scripts/export.py RUN_DIR OUT_DIR``): a run's
trained policy as a Hugging Face model directory.

The weights come from the run's newest complete checkpoint (``--checkpoint`` picks another),
reassembled in one process whatever strategy and world size wrote it; the architecture and
tokenizer come from the run's ``model.policy``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from train.config.config import ConfigError, load_config, warm_start_inputs
    from train.learner.export import export_checkpoint
    from train.loop.run_dir import latest_checkpoint
    from train.warm_start.build import built_policy_source

    parser = argparse.ArgumentParser(prog="helix export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--checkpoint", type=Path, help="a checkpoints/epoch-NNNNNN directory (default: the newest)")
    args = parser.parse_args(argv)
    try:
        # Export needs only the model section; the engine may be a plugin not importable here.
        cfg = load_config(args.run_dir / "config.yaml", ["rollout.engine=hf"])
    except ConfigError as err:
        print(f"helix export: {args.run_dir} is not a usable run directory: {err}", file=sys.stderr)
        return 2
    ckpt = args.checkpoint or latest_checkpoint(args.run_dir)
    if ckpt is None:
        print(f"helix export: no complete checkpoint in {args.run_dir / 'checkpoints'}", file=sys.stderr)
        return 2
    try:
        # LoRA checkpoints hold adapters alone: they merge into the base the run trained (its warm start, if any).
        base = built_policy_source(warm_start_inputs(cfg)) if cfg.trainer.lora.enabled else cfg.model.policy
        out = export_checkpoint(Path(ckpt) / "learner", base, args.out_dir, cfg.model.dtype, cfg.model.cache_dir,
                                cfg.trainer.lora)
    except FileNotFoundError as err:
        print(f"helix export: {err}", file=sys.stderr)
        return 2
    print(f"[helix] exported {ckpt} to {out}", flush=True)
    return 0
