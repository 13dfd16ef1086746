"""Best reward so far against children evaluated, one curve per variant, from an ablation's runs.

    .venv/bin/python scripts/plot_ablation.py runs/ablate-circle_packing_26
    .venv/bin/python scripts/plot_ablation.py runs/quality-ws --budgets 16 32 64 --out quality.png

Reads OUT/<variant>-s<seed>/archive.sqlite (what `scripts/ablate.py` writes), read-only. The x axis
is the one currency every variant spends alike: children, in the order the archive stored them
(failed and unchanged edits count; the starter does not). The curve is the best *valid* reward
so far, starting from the starter's. Per variant: the mean over seeds, with the min-max band.
Prints a markdown table of best-so-far (mean ± std over seeds) at the --budgets.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from population.archive import ArchiveError
from train.runs.ablation import collect, default_budgets, table
from train.runs.plots import best_so_far_figure
from train.runs.run_data import RunDirError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="plot_ablation.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="an ablation's output folder (scripts/ablate.py --out)")
    parser.add_argument("--budgets", nargs="+", type=int, help="default: 16, 32, 64, ... and the shortest run's length")
    parser.add_argument("--out", type=Path, help="the PNG (default OUT_DIR/best_so_far.png)")
    args = parser.parse_args(argv)
    try:
        curves = collect(args.out_dir)
    except (RunDirError, ArchiveError) as exc:
        raise SystemExit(f"plot_ablation: {exc}") from None
    path = args.out or args.out_dir / "best_so_far.png"
    best_so_far_figure(curves, f"best so far vs children: {args.out_dir.name}").savefig(path, dpi=120)
    print(table(curves, args.budgets or default_budgets(curves)))
    print(f"\nplot: {path}")
    return 0
