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
import sys
from pathlib import Path

import numpy as np
from report_data import ReadOnlyArchive, RunDirError

RUN = re.compile(r"^(?P<variant>.+)-s(?P<seed>\d+)$")


def best_so_far(archive: Path) -> np.ndarray:
    """Entry k: the best valid reward after k + 1 children (the starter's before any child)."""
    with ReadOnlyArchive(archive) as arch:
        rows = arch.db.execute("SELECT epoch, reward, valid FROM solutions ORDER BY id").fetchall()
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


def table_rows(curves: dict[str, list[np.ndarray]], budgets: list[int]) -> list[list[str]]:
    """Header row, then per variant: seeds and best-so-far (mean ± sample std over seeds) at each budget."""
    rows = [["variant", "seeds"] + [f"best after {b} children" for b in budgets]]
    for variant, runs in curves.items():
        cells = []
        for b in budgets:
            values = [c[b - 1] for c in runs if len(c) >= b]
            cells.append(f"{np.mean(values):.4f} ± {np.std(values, ddof=1) if len(values) > 1 else 0:.4f} "
                         f"(n={len(values)})" if values else "-")
        rows.append([variant, str(len(runs))] + cells)
    return rows


def table(curves: dict[str, list[np.ndarray]], budgets: list[int]) -> str:
    head, *body = table_rows(curves, budgets)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])


def valid_by_epoch(archive: Path) -> np.ndarray:
    """Entry e - 1: the fraction of epoch e's children that are valid (edit failures count as invalid)."""
    with ReadOnlyArchive(archive) as arch:
        rows = arch.db.execute("SELECT epoch, AVG(valid) FROM solutions WHERE parent_id IS NOT NULL "
                               "GROUP BY epoch ORDER BY epoch").fetchall()
    return np.array([float(frac) for _, frac in rows])


def collect_valid(out_dir: Path) -> dict[str, list[np.ndarray]]:
    """Per variant, each seed's valid fraction per epoch (the runs collect() finds)."""
    out: dict[str, list[np.ndarray]] = {}
    for run in sorted(out_dir.iterdir()):
        match = RUN.match(run.name)
        if match and (run / "archive.sqlite").is_file():
            out.setdefault(match["variant"], []).append(valid_by_epoch(run / "archive.sqlite"))
    return out


def default_budgets(curves: dict[str, list[np.ndarray]]) -> list[int]:
    """16, 32, 64, ... up to the shortest run's length, and that length itself."""
    n = min(len(c) for runs in curves.values() for c in runs)
    budgets = [b for b in (2 ** k for k in range(4, 20)) if b < n]
    return budgets + [n] if n > 0 else []


def _new_axes(title: str, xlabel: str, ylabel: str):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.2), layout="constrained")  # no pyplot: no display, no global state
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    return fig, ax


def _mean_and_band(ax, runs: list[np.ndarray], label: str, step: bool = True) -> None:
    """Over the seeds' common length; ``step``: a best-so-far staircase, else points joined by lines."""
    n = min(len(c) for c in runs)
    stack = np.stack([c[:n] for c in runs])
    x = np.arange(1, n + 1)
    label = f"{label} ({len(runs)} seed{'s' if len(runs) > 1 else ''})"
    if step:
        line, = ax.step(x, stack.mean(0), where="post", lw=2, label=label)
    else:
        line, = ax.plot(x, stack.mean(0), "o-", lw=2, label=label)
    ax.fill_between(x, stack.min(0), stack.max(0), step="post" if step else None, alpha=0.15, color=line.get_color())


def figure(curves: dict[str, list[np.ndarray]], title: str):
    """Best-so-far against children, per variant: the mean over seeds with the min-max band."""
    fig, ax = _new_axes(title, "children evaluated", "best valid reward so far")
    for variant, runs in curves.items():
        _mean_and_band(ax, runs, variant)
    ax.legend()
    return fig


def valid_figure(valid: dict[str, list[np.ndarray]], title: str):
    """Valid fraction of each epoch's children, per variant (mean over seeds, min-max band)."""
    fig, ax = _new_axes(title, "epoch", "valid children")
    for variant, runs in valid.items():
        _mean_and_band(ax, runs, variant, step=False)
    ax.set_ylim(0, 1)
    ax.legend()
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="an ablation's output folder (scripts/ablate.py --out)")
    parser.add_argument("--budgets", nargs="+", type=int, help="default: 16, 32, 64, ... and the shortest run's length")
    parser.add_argument("--out", type=Path, help="the PNG (default OUT_DIR/best_so_far.png)")
    args = parser.parse_args(argv)
    try:
        curves = collect(args.out_dir)
    except RunDirError as exc:
        raise SystemExit(f"plot_ablation: {exc}") from None
    path = args.out or args.out_dir / "best_so_far.png"
    figure(curves, f"best so far vs children: {args.out_dir.name}").savefig(path, dpi=120)
    print(table(curves, args.budgets or default_budgets(curves)))
    print(f"\nplot: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
