"""The HTML report of one or more ablations (scripts/ablate.py output folders), one part per folder.

    .venv/bin/python scripts/report.py runs/quality-ws                       # -> runs/quality-ws/report/report.html
    .venv/bin/python scripts/report.py runs/q-circles runs/q-keane --out reports/quality.html

Per folder: best reward so far against children evaluated (one curve per variant, mean over seeds with
the min-max band) with best-so-far at fixed budgets, the valid fraction of each epoch's children,
the top-10 mean and the area under the curves at the shortest run's length, ablate.py's own summary
table when the folder has its ablation.json, and per run what the children came to (train/runs/outcomes.py:
outcomes, distinct valid programs, the most written one). Archives are only read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from population.archive import ReadOnlyArchive
from train.runs import ablation, plots
from train.runs import outcomes as co
from train.runs import run_data as rd
from train.runs.page import Section, render_html, save_png


def _task_of(folder: Path) -> str | None:
    for run in sorted(folder.iterdir()):
        config = run / "config.yaml"
        if ablation.RUN.match(run.name) and config.is_file():
            return rd.cfg_get(yaml.safe_load(config.read_text(encoding="utf-8")), "task", "name")
    return None


def _summary_table(folder: Path) -> tuple[list[list[str]], list[str]]:
    """ablate.py's table (ablation.json), as rows, and its reproduce command as a note."""
    path = folder / "ablation.json"
    if not path.is_file():
        return [], ["no ablation.json: the summary table is written when scripts/ablate.py finishes"]
    data = json.loads(path.read_text(encoding="utf-8"))
    head = ["variant", "seeds", "best reward (mean ± std)", "best (max)", "child reward (mean ± std)", "valid",
            "children", "wall s"]
    rows = [[r["variant"], str(r["seeds"]), f"{r['best_mean']:.6g} ± {r['best_std']:.2g}", f"{r['best_max']:.6g}",
             f"{r['reward_mean']:.4g} ± {r['reward_std']:.2g}", f"{r['valid_frac']:.2f}", f"{r['children']:.0f}",
             f"{r['wall_s']:.0f}"] for r in data["rows"]]
    return [head] + rows, [f"{data['title']}; reproduce: {data['command']}"]


def _runs_table(folder: Path) -> list[list[str]]:
    """One row per run: its best and when it was found, its children by outcome, and how many
    distinct valid programs they were (a run that found one safe edit and repeated it shows here)."""
    head = ["run", "children", "best", "found in epoch"] + [label for _, label in co.OUTCOMES] + [
        "distinct valid programs", "most copies (reward)"]
    rows = [head]
    for _, run in ablation.runs(folder):
        with ReadOnlyArchive(run / "archive.sqlite") as arch:
            out = co.child_outcomes(arch, k=1)
        top = out.most_written[0] if out.most_written else None
        rows.append([run.name, str(out.children), "-" if out.best is None else f"{out.best:.6g}",
                     "-" if out.best_epoch is None else str(out.best_epoch)]
                    + [f"{out.frac(key):.2f}" for key, _ in co.OUTCOMES]
                    + [str(out.distinct_valid), f"{top.count} ({top.reward:.6g})" if top else "-"])
    return rows


def _slug(folder: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", folder.resolve().name)


def build_ablation_report(folders: list[Path], out: Path) -> Path:
    """Write the HTML and its PNGs beside it; returns the HTML path. RunDirError for a folder with no runs."""
    for folder in folders:
        if not ablation.is_ablation_dir(folder):
            raise rd.RunDirError(f"{folder} holds no <variant>-s<seed>/archive.sqlite runs: not an ablation folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    sections, header = [], []
    for folder in folders:
        curves, valid = ablation.collect(folder), ablation.collect_valid(folder)
        task, slug = _task_of(folder) or "unknown task", _slug(folder)
        runs = sum(len(v) for v in curves.values())
        header.append((str(folder.resolve()), f"{task}: {len(curves)} variants, {runs} runs"))
        budgets = ablation.default_budgets(curves)
        png = f"best_so_far-{slug}.png"
        sections.append(Section(
            f"{task}: best so far against children ({folder.name})", png,
            save_png(plots.best_so_far_figure(curves, f"{task}: best valid reward so far"), out.parent / png),
            ["mean over seeds, band from min to max; every child counts, failed edits included; "
             "the table: best so far after each budget, mean ± sample std over seeds"],
            ablation.table_rows(curves, budgets) if budgets else []))
        png = f"valid_per_epoch-{slug}.png"
        sections.append(Section(f"{task}: valid children per epoch ({folder.name})", png,
                                save_png(plots.valid_figure(valid, f"{task}: valid fraction per epoch"), out.parent / png)))
        full = ablation.collect_curves(folder)
        n = min(len(c["best"]) for seeds in full.values() for c in seeds)
        if n > 0:
            sections.append(Section(
                f"{task}: top-{ablation.TOP_K} mean and area under the curve after {n} children ({folder.name})",
                notes=[f"top-{ablation.TOP_K} mean: the mean of the {ablation.TOP_K} best valid rewards so far; area: "
                       "the curve's mean over the first n children (n = the shortest run); both separate variants "
                       "with less seed noise than best-ever. Mean ± sample std over seeds."],
                table=ablation.budget_rows(full, n)))
        table, notes = _summary_table(folder)
        sections.append(Section(f"{task}: summary ({folder.name})", notes=notes, table=table))
        sections.append(Section(f"{task}: what each run's children came to ({folder.name})", notes=[
            "outcomes as fractions of the run's children; programs equal up to layout and comments count once"],
            table=_runs_table(folder)))
    title = "HELIX ablation report: " + ", ".join(f.resolve().name for f in folders)
    out.write_text(render_html(title, header, sections, [], None), encoding="utf-8")
    return out
