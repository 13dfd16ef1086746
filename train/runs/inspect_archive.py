"""Inspect a HELIX archive: the best solutions, one solution's lineage with the diffs between
generations, the Pareto front (reward, Div) of an epoch's population, and what the children came to.

    .venv/bin/python scripts/inspect_archive.py runs/latest top -k 10
    .venv/bin/python scripts/inspect_archive.py runs/latest lineage 42
    .venv/bin/python scripts/inspect_archive.py runs/latest front --epoch 3
    .venv/bin/python scripts/inspect_archive.py runs/latest children -k 5

RUN is a run directory (its archive.sqlite and config.yaml are used) or an archive file. The archive
is opened read-only, so a run that is still going can be inspected and is never written to.
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

import numpy as np
import yaml

from population.archive import Archive, ArchiveError, ReadOnlyArchive
from population.diversity import knn_diversity
from train.runs.outcomes import OUTCOMES, child_outcomes
from train.runs.run_data import DEFAULT_KNN_K, cfg_get, pareto_front


def _paths(run: str) -> tuple[Path, int]:
    """The archive of RUN (a run directory or the file itself) and the run's knn_k."""
    path = Path(run)
    archive = path / "archive.sqlite" if path.is_dir() else path
    if not archive.is_file():
        raise SystemExit(f"inspect_archive: no archive at {archive}")
    config = archive.parent / "config.yaml"
    k = cfg_get(yaml.safe_load(config.read_text()), "population", "knn_k", DEFAULT_KNN_K) if config.is_file() else DEFAULT_KNN_K
    return archive, int(k)


def _line(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


# A solution's exact check in the top table (docs/tasks.md, "Record claims are checked exactly"); "-": none ran.
EXACT_SHORT = {"exact": "exact", "tolerance_only": "tolerance", "unchecked": "unchecked"}


def cmd_top(arch: Archive, args) -> None:
    print(f"{'id':>6} {'epoch':>5} {'parent':>6} {'reward':>12} valid {'exact':>9}  feedback")
    for s in arch.top(args.k):
        exact = EXACT_SHORT.get(s.exact.get("status"), "?") if s.exact else "-"
        print(f"{s.id:>6} {s.epoch:>5} {s.parent_id if s.parent_id is not None else '-':>6} {s.reward:>12.8g} "
              f"{'yes' if s.valid else 'no ':>5} {exact:>9}  {_line(s.feedback)}")


def cmd_lineage(arch: Archive, args) -> None:
    chain = arch.lineage(args.id)
    for depth, s in enumerate(chain):
        made = "" if depth == 0 else f", by {s.operator}"
        print(f"=== generation {depth}: solution {s.id} (epoch {s.epoch}{made}), reward {s.reward:.8g}, "
              f"{'valid' if s.valid else 'invalid'}\n    feedback: {_line(s.feedback, 200)}")
        if s.second_parent_id is not None:
            mate = arch.get(s.second_parent_id)
            print(f"    second parent: solution {mate.id} (epoch {mate.epoch}), reward {mate.reward:.8g}; "
                  f"the diff below is from the first parent, solution {s.parent_id}")
        if depth == 0:
            print("\n".join("    " + line for line in s.code.splitlines()) if args.code else "    (root program; --code shows it)")
        else:
            diff = difflib.unified_diff(chain[depth - 1].code.splitlines(), s.code.splitlines(),
                                        f"solution {chain[depth - 1].id}", f"solution {s.id}", lineterm="")
            print("\n".join("    " + line for line in diff) or "    (no code change)")


def cmd_front(arch: Archive, args, k: int) -> None:
    epoch, ids = arch.get_population(args.epoch)
    if not ids:
        raise SystemExit("inspect_archive: the archive has no population yet")
    programs = arch.program_ids(epoch)
    row_of = {int(i): r for r, i in enumerate(programs)}
    members = sorted(set(ids) & set(row_of))
    emb = arch.get_embeddings(programs)
    div = knn_diversity(arch.get_embeddings(members), emb, k, np.array([row_of[i] for i in members]))
    rewards = arch.rewards(members)
    front = pareto_front(rewards, div).tolist()
    print(f"epoch {epoch}: population of {len(ids)} slots, {len(front)} on the Pareto front of (reward, Div), k={k}, "
          f"Div over {len(programs)} programs")
    print(f"{'id':>6} {'reward':>12} {'Div':>8}")
    for i in sorted(front, key=lambda i: -rewards[i]):
        print(f"{members[i]:>6} {rewards[i]:>12.8g} {div[i]:>8.4f}")


def cmd_children(arch: Archive, args) -> None:
    out = child_outcomes(arch, args.k)
    print(f"{out.children} children: " + ", ".join(f"{label} {out.counts[key]} ({out.frac(key):.2f})" for key, label in OUTCOMES))
    best = "none valid" if out.best is None else f"{out.best:.8g}, first reached in epoch {out.best_epoch}"
    print(f"best: {best}")
    print(f"{out.distinct_valid} distinct valid programs among {out.counts['valid']} valid children; the most written:")
    print(f"{'copies':>6} {'first':>6} {'epoch':>5} {'reward':>12}  change from its parent")
    for c in out.most_written:
        print(f"{c.count:>6} {c.first_id:>6} {c.epoch:>5} {c.reward:>12.8g}  {c.change}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="inspect_archive.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="run directory or archive.sqlite")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("top", help="the best solutions")
    p.add_argument("-k", type=int, default=10)
    p = sub.add_parser("lineage", help="a solution's ancestors and the diffs between generations")
    p.add_argument("id", type=int)
    p.add_argument("--code", action="store_true", help="print the root program in full")
    p = sub.add_parser("front", help="the Pareto front of an epoch's population")
    p.add_argument("--epoch", type=int, default=None, help="default: the latest")
    p = sub.add_parser("children", help="children by outcome, distinct valid programs, the most written ones")
    p.add_argument("-k", type=int, default=5)
    args = parser.parse_args(argv)
    archive, k = _paths(args.run)
    try:
        arch = ReadOnlyArchive(archive)
    except ArchiveError as exc:
        raise SystemExit(f"inspect_archive: {exc}") from None
    with arch:
        if args.command == "front":
            cmd_front(arch, args, k)
        else:
            {"top": cmd_top, "lineage": cmd_lineage, "children": cmd_children}[args.command](arch, args)
    return 0
