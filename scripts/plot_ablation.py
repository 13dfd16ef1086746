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
import re
import sqlite3
import sys
from pathlib import Path

import numpy as np

RUN = re.compile(r"^(?P<variant>.+)-s(?P<seed>\d+)$")


def best_so_far(archive: Path) -> np.ndarray:
    """Entry k: the best valid reward after k + 1 children (the starter's before any child)."""
    db = sqlite3.connect(f"{archive.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT epoch, reward, valid FROM solutions ORDER BY id").fetchall()
    finally:
        db.close()
    if not rows or rows[0][0] != 0:
        raise SystemExit(f"plot_ablation: {archive} has no starter row (epoch 0) first")
    best, out = float(rows[0][1]) if rows[0][2] else 0.0, []
    for _, reward, valid in rows[1:]:
        if valid:
            best = max(best, float(reward))
        out.append(best)
    return np.array(out)


def collect(out_dir: Path) -> dict[str, list[np.ndarray]]:
    curves: dict[str, list[np.ndarray]] = {}
    for run in sorted(out_dir.iterdir()):
        match = RUN.match(run.name)
        if match and (run / "archive.sqlite").is_file():
            curves.setdefault(match["variant"], []).append(best_so_far(run / "archive.sqlite"))
    if not curves:
        raise SystemExit(f"plot_ablation: no <variant>-s<seed>/archive.sqlite under {out_dir}")
    return curves


def table(curves: dict[str, list[np.ndarray]], budgets: list[int]) -> str:
    lines = ["| variant | seeds | " + " | ".join(f"best after {b} children" for b in budgets) + " |",
             "|---|---|" + "---|" * len(budgets)]
    for variant, runs in curves.items():
        cells = []
        for b in budgets:
            values = [c[b - 1] for c in runs if len(c) >= b]
            cells.append(f"{np.mean(values):.4f} ± {np.std(values, ddof=1) if len(values) > 1 else 0:.4f} "
                         f"(n={len(values)})" if values else "-")
        lines.append(f"| {variant} | {len(runs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(curves: dict[str, list[np.ndarray]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for variant, runs in curves.items():
        n = min(len(c) for c in runs)
        stack = np.stack([c[:n] for c in runs])
        x = np.arange(1, n + 1)
        line, = ax.step(x, stack.mean(0), where="post", lw=2, label=f"{variant} ({len(runs)} seeds)")
        ax.fill_between(x, stack.min(0), stack.max(0), step="post", alpha=0.15, color=line.get_color())
    ax.set_xlabel("children evaluated")
    ax.set_ylabel("best valid reward so far")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="an ablation's output folder (scripts/ablate.py --out)")
    parser.add_argument("--budgets", nargs="+", type=int, default=[16, 32, 64])
    parser.add_argument("--out", type=Path, help="the PNG (default OUT_DIR/best_so_far.png)")
    args = parser.parse_args(argv)
    curves = collect(args.out_dir)
    path = args.out or args.out_dir / "best_so_far.png"
    plot(curves, path, f"best so far vs children: {args.out_dir.name}")
    print(table(curves, args.budgets))
    print(f"\nplot: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
