"""An ablation's runs as numbers: OUT/<variant>-s<seed>/archive.sqlite (what ``scripts/ablate.py``
writes), read-only.

Curves: the x axis is the one currency every variant spends alike, children, in the order the
archive stored them (failed and unchanged edits count; the starter does not), and the curve is
the best *valid* reward so far, starting from the starter's. Tables: best-so-far at fixed budgets
(mean ± sample std over seeds), and ablate.py's summary of each variant's finished runs.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from population.archive import ReadOnlyArchive
from train.runs.run_data import RunDirError

RUN = re.compile(r"^(?P<variant>.+)-s(?P<seed>\d+)$")


def runs(folder: Path) -> Iterator[tuple[str, Path]]:
    """(variant, run directory) of every <variant>-s<seed> folder with an archive, in name order."""
    if not folder.is_dir():
        raise RunDirError(f"{folder} is not a directory")
    for run in sorted(folder.iterdir()):
        match = RUN.match(run.name)
        if match and (run / "archive.sqlite").is_file():
            yield match["variant"], run


def is_ablation_dir(path: Path) -> bool:
    """A folder of <variant>-s<seed>/archive.sqlite runs that is not itself a run directory."""
    if not path.is_dir() or (path / "archive.sqlite").is_file() or (path / "metrics.jsonl").is_file():
        return False
    return any(True for _ in runs(path))


TOP_K = 10  # the top-k mean: EvoTune (arXiv 2504.05108) reports top-50; our runs are shorter


def curves_of(rows: list[tuple], k: int = TOP_K, name: str = "archive") -> dict[str, np.ndarray]:
    """From ``Archive.scores()`` rows, entry n - 1 after n children: ``best`` (the best valid reward
    so far, the starter's before any child, 0 if it is invalid), ``topk`` (the mean of the k best
    valid rewards so far, the starter's included; the mean of those there are while fewer than k
    are valid, 0 while none is), ``valid`` (the valid fraction of the children so far) and ``ranked``
    (how many valid rewards the top-k mean holds: min(k, valid so far); the run browser starts its top-k
    curve where this reaches k, so the curve it draws never falls)."""
    if not rows or rows[0][2] != 0:
        raise RunDirError(f"{name} has no starter row (epoch 0) first")
    top = [float(rows[0][3])] if rows[0][4] else []  # min-heap of the k best valid rewards
    total, n_valid = sum(top), 0
    best, topk, valid, ranked = [], [], [], []
    for n, (_, _, _, reward, ok) in enumerate(rows[1:], start=1):
        if ok:
            n_valid += 1
            if len(top) < k:
                heapq.heappush(top, float(reward))
                total += float(reward)
            elif reward > top[0]:
                total += float(reward) - heapq.heapreplace(top, float(reward))
        best.append(max(top) if top else 0.0)
        topk.append(total / len(top) if top else 0.0)
        valid.append(n_valid / n)
        ranked.append(len(top))
    return {"best": np.array(best), "topk": np.array(topk), "valid": np.array(valid), "ranked": np.array(ranked, np.int64)}


def run_curves(archive: Path, k: int = TOP_K) -> dict[str, np.ndarray]:
    with ReadOnlyArchive(archive) as arch:
        return curves_of(arch.scores(), k, str(archive))


def best_so_far(archive: Path) -> np.ndarray:
    """Entry k: the best valid reward after k + 1 children (the starter's before any child)."""
    return run_curves(archive)["best"]


def area(curve: np.ndarray, budget: int) -> float:
    """The area under a curve over its first ``budget`` children, per child (the curve's mean
    there): a variant that gets good early scores higher than one that gets there late."""
    if budget < 1 or len(curve) < budget:
        raise ValueError(f"area over {budget} children of a curve of {len(curve)}")
    return float(np.mean(curve[:budget]))


def collect_curves(out_dir: Path, k: int = TOP_K) -> dict[str, list[dict[str, np.ndarray]]]:
    """Per variant, each seed's ``curves_of`` (the runs ``runs`` finds)."""
    out: dict[str, list[dict[str, np.ndarray]]] = {}
    for variant, run in runs(out_dir):
        out.setdefault(variant, []).append(run_curves(run / "archive.sqlite", k))
    if not out:
        raise RunDirError(f"no <variant>-s<seed>/archive.sqlite under {out_dir}")
    return out


def budget_rows(curves: dict[str, list[dict[str, np.ndarray]]], budget: int, k: int = TOP_K) -> list[list[str]]:
    """Header, then per variant at one budget (mean ± sample std over seeds): best so far, the top-k
    mean, the valid fraction, and the area under the best and top-k curves."""
    head = ["variant", "seeds", f"best @{budget}", f"top-{k} mean @{budget}", f"valid @{budget}",
            f"area best /{budget}", f"area top-{k} /{budget}"]
    rows = [head]
    for variant, seeds in curves.items():
        mine = [c for c in seeds if len(c["best"]) >= budget]
        cols = [[c["best"][budget - 1] for c in mine], [c["topk"][budget - 1] for c in mine],
                [c["valid"][budget - 1] for c in mine], [area(c["best"], budget) for c in mine],
                [area(c["topk"], budget) for c in mine]]
        rows.append([variant, str(len(mine))] + [f"{np.mean(v):.4f} ± {np.std(v, ddof=1) if len(v) > 1 else 0:.4f}"
                                                 if v else "-" for v in cols])
    return rows


def collect(out_dir: Path) -> dict[str, list[np.ndarray]]:
    """Per variant, each seed's best-so-far curve; RunDirError when the folder holds no run."""
    curves: dict[str, list[np.ndarray]] = {}
    for variant, run in runs(out_dir):
        curves.setdefault(variant, []).append(best_so_far(run / "archive.sqlite"))
    if not curves:
        raise RunDirError(f"no <variant>-s<seed>/archive.sqlite under {out_dir}")
    return curves


def table_rows(curves: dict[str, list[np.ndarray]], budgets: list[int]) -> list[list[str]]:
    """Header row, then per variant: seeds and best-so-far (mean ± sample std over seeds) at each budget."""
    rows = [["variant", "seeds"] + [f"best after {b} children" for b in budgets]]
    for variant, curves_of in curves.items():
        cells = []
        for b in budgets:
            values = [c[b - 1] for c in curves_of if len(c) >= b]
            cells.append(f"{np.mean(values):.4f} ± {np.std(values, ddof=1) if len(values) > 1 else 0:.4f} "
                         f"(n={len(values)})" if values else "-")
        rows.append([variant, str(len(curves_of))] + cells)
    return rows


def table(curves: dict[str, list[np.ndarray]], budgets: list[int]) -> str:
    head, *body = table_rows(curves, budgets)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])


def valid_by_epoch(archive: Path) -> np.ndarray:
    """Entry e - 1: the fraction of epoch e's children that are valid (edit failures count as invalid)."""
    with ReadOnlyArchive(archive) as arch:
        rows = arch.scores()
    by_epoch: dict[int, list[bool]] = {}
    for _, parent, epoch, _, valid in rows:
        if parent is not None:
            by_epoch.setdefault(epoch, []).append(valid)
    return np.array([float(np.mean(flags)) for _, flags in sorted(by_epoch.items())])


def collect_valid(out_dir: Path) -> dict[str, list[np.ndarray]]:
    """Per variant, each seed's valid fraction per epoch (the runs collect() finds)."""
    out: dict[str, list[np.ndarray]] = {}
    for variant, run in runs(out_dir):
        out.setdefault(variant, []).append(valid_by_epoch(run / "archive.sqlite"))
    return out


def default_budgets(curves: dict[str, list[np.ndarray]]) -> list[int]:
    """16, 32, 64, ... up to the shortest run's length, and that length itself."""
    n = min(len(c) for curves_of in curves.values() for c in curves_of)
    budgets = [b for b in (2 ** k for k in range(4, 20)) if b < n]
    return budgets + [n] if n > 0 else []


# ---- ablate.py's table: one row per variant over its seeds' finished runs -----------------------
@dataclass(frozen=True)
class RunResult:
    variant: str
    seed: int
    best_reward: float  # best valid reward in the archive (the starter counts: it is the floor)
    child_reward_mean: float  # mean trusted reward over every child
    child_valid_frac: float
    children: int  # evaluated programs = generated children, edit failures included
    wall_s: float
    peak_rss_kb: int = 0  # the largest resident set of the run's processes (0: not measured; older runs)


def run_result(run_dir: Path, variant: str, seed: int, wall_s: float, peak_rss_kb: int = 0) -> RunResult:
    """A finished run's outcome, read from its archive."""
    with ReadOnlyArchive(run_dir / "archive.sqlite") as arch:
        rows = arch.scores()
    best = max((reward for _, _, _, reward, valid in rows if valid), default=None)
    rewards = np.array([reward for _, parent, _, reward, _ in rows if parent is not None])
    valid = np.array([ok for _, parent, _, _, ok in rows if parent is not None])
    return RunResult(variant, seed, float(best if best is not None else 0.0),
                     float(rewards.mean()) if len(rewards) else 0.0,
                     float(valid.mean()) if len(valid) else 0.0, int(len(rewards)), wall_s, int(peak_rss_kb))


def summarize(results: list[RunResult]) -> list[dict]:
    """Per variant, in first-seen order: mean and sample std (ddof=1) over seeds."""
    def spread(x):
        return float(x.std(ddof=1)) if len(x) > 1 else 0.0

    rows = []
    for variant in dict.fromkeys(r.variant for r in results):
        mine = [r for r in results if r.variant == variant]
        best = np.array([r.best_reward for r in mine])
        mean = np.array([r.child_reward_mean for r in mine])
        rows.append(dict(variant=variant, seeds=len(mine), best_mean=float(best.mean()), best_std=spread(best),
                         best_max=float(best.max()), reward_mean=float(mean.mean()), reward_std=spread(mean),
                         valid_frac=float(np.mean([r.child_valid_frac for r in mine])),
                         children=float(np.mean([r.children for r in mine])),
                         wall_s=float(np.mean([r.wall_s for r in mine])),
                         peak_rss_kb=max(r.peak_rss_kb for r in mine)))
    return rows


def _mib(kb: int) -> str:
    return f"{kb / 1024:.0f}" if kb else "-"  # 0: not measured (a run from before the column)


def markdown(rows: list[dict], title: str) -> str:
    lines = [f"### {title}", "",
             "| variant | seeds | best reward (mean ± std) | best (max) | child reward (mean ± std) | valid | children | wall s | peak MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['seeds']} | {r['best_mean']:.6g} ± {r['best_std']:.2g} | {r['best_max']:.6g} | "
                     f"{r['reward_mean']:.4g} ± {r['reward_std']:.2g} | {r['valid_frac']:.2f} | {r['children']:.0f} | "
                     f"{r['wall_s']:.0f} | {_mib(r.get('peak_rss_kb', 0))} |")
    return "\n".join(lines) + "\n"
