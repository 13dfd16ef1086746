"""Quality benchmark: HELIX against EvoOnly, TrainOnly and BestOfN on the embedded SmolLM2, on CPU.

    python scripts/bench/bench_quality.py                                  # the BENCHMARKS.md table
    python scripts/bench/bench_quality.py --tasks keane_bump_10 --seeds 0 --evaluations 8   # a quick look

Every (task, variant, seed) is one `scripts/ablate.py` run with the same number of evaluated
programs, so the comparison is fair in the one currency that is the same for all four: how many
programs were tried. Results (best and mean reward, with their spread over seeds) go to
OUT/quality.md; each row's exact reproduction command is printed under its table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from train.commands import ablate

VARIANTS = ["helix", "evo_only", "train_only", "best_of_n"]
# Smaller than the paper on purpose: 2 cores must finish 2 tasks x 4 variants x 3 seeds.
# Generation with the in-process vllm engine (bf16), about 6x the hf engine's tokens/s on CPU.
CPU_SCALE = ["rollout.max_new_tokens=128", "rollout.group_size=4", "trainer.prompts_per_epoch=2",
             "rollout.engine=vllm", "rollout.vllm.dtype=bfloat16"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["keane_bump_10", "circle_packing_26"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--evaluations", type=int, default=32, help="evaluated programs per run")
    parser.add_argument("--out", type=Path, default=ablate.ROOT / "runs" / "bench_quality")
    parser.add_argument("--set", nargs="+", default=[], dest="overrides", metavar="KEY=VALUE",
                        help="extra overrides for every run (after the CPU-scale defaults)")
    args = parser.parse_args(argv)
    sections = []
    for task in args.tasks:
        ablate_args = ["--task", task, "--variants", *VARIANTS, "--seeds", *map(str, args.seeds),
                       "--evaluations", str(args.evaluations), "--out", str(args.out / task), "--quiet",
                       "--set", *CPU_SCALE, *args.overrides]
        ablate.main(ablate_args)
        table = (args.out / task / "ablation.md").read_text().split("\nReproduce:")[0]
        sections.append(table + f"\nReproduce: `python scripts/ablate.py {' '.join(ablate_args)}`\n")
    (args.out / "quality.md").write_text("\n".join(sections))
    print("\n".join(sections))
    print(f"[bench_quality] wrote {args.out / 'quality.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
