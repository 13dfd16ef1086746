"""Write a self-contained HTML report of a HELIX run, with its plots also saved as PNG files.

    .venv/bin/python scripts/report.py runs/latest                 # -> runs/latest/report/report.html
    .venv/bin/python scripts/report.py runs/my-run --out /tmp/r/index.html
    .venv/bin/python scripts/report.py runs/latest --lineage 57     # also the lineage of solution 57
    .venv/bin/python scripts/report.py runs/quality-ws runs/q-keane --out q.html   # ablation folders

Given scripts/ablate.py output folders instead of a run directory, it writes the ablation report
(train/runs/ablation_report.py): best so far against children evaluated per variant, per folder.

Sections: reward curves, the Pareto front of each epoch's population, the lineage tree of the
best solution, the task's own drawing of the best solution (what its program returned when the
run evaluated it, recorded in the archive; needs tasks/<task>/render.py; nothing is re-run), and
the time per phase. Images are embedded as
base64, so the HTML file works offline and can be mailed around; nothing needs a display or a
network. The archive is only read, so reporting on a run that is still going is safe.
Exit status: 0 written, 2 RUN_DIR is neither a run directory nor ablation folders.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from population.archive import ArchiveError, ReadOnlyArchive
from tasks.base import exact_label
from train.runs import plots
from train.runs import run_data as rd
from train.runs.ablation import is_ablation_dir
from train.runs.ablation_report import build_ablation_report
from train.runs.drawing import rendering
from train.runs.page import Section, render_html, save_png


class Sections(list):
    """The report's sections in order; a figure is saved as a PNG beside the HTML as it is added."""

    def __init__(self, folder: Path):
        super().__init__()
        self.folder = folder

    def add(self, title: str, png: str, fig, notes: list[str]) -> None:
        data = save_png(fig, self.folder / png) if fig is not None else b""
        self.append(Section(title, png if fig is not None else None, data, notes))


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def _header(run: rd.RunData, best, archive_size, epochs_done, wall_s, best_known, heldout=None) -> list[tuple[str, str]]:
    rows = [("run directory", str(run.path.resolve()))]
    if best is not None:
        ratio = f" ({best.reward / best_known:.4f} of best known {best_known:.10g})" if best_known else ""
        rows += [("best reward", f"{best.reward:.10g}{ratio}"), ("exact check", exact_label(best.exact)),
                 ("best solution", f"#{best.id}, epoch {best.epoch}")]
        if heldout is not None and heldout["solution_id"] == best.id:
            held = f"{heldout['reward']:.10g}" if heldout["valid"] else f"0 ({heldout['status']})"
            rows.append(("held-out reward", f"{held} on {heldout['about']} (the run's own instances: {best.reward:.10g})"))
    elif run.metrics and run.metrics[-1].get("best_reward") is not None:
        rows.append(("best reward", _fmt(float(run.metrics[-1]["best_reward"]))))
    else:
        rows.append(("best reward", "none (no valid solution yet)"))
    rows.append(("archive size", "unknown (no archive)" if archive_size is None else f"{archive_size} solutions"))
    rows.append(("epochs", "none logged" if epochs_done is None else str(epochs_done)))
    if wall_s:
        rows.append(("logged epoch time", f"{wall_s:.1f} s"))
    rows += [(k, _fmt(v)) for k, v in rd.config_summary(run.config)]
    return rows


def _best_known(run: rd.RunData) -> float | None:
    name = rd.cfg_get(run.config, "task", "name")
    if name is None:
        return None
    from tasks import available_tasks, load_task

    try:  # a user's task not on this process's search path (HELIX_TASKS), or a broken one: no value to compare with
        return load_task(name).best_known if name in available_tasks() else None
    except ValueError:
        return None


def _population_section(sections: Sections, arch: ReadOnlyArchive, run: rd.RunData) -> None:
    """Each epoch's selected population in (Div, reward), with its Pareto front."""
    k = int(rd.cfg_get(run.config, "population", "knn_k", rd.DEFAULT_KNN_K))
    pops = rd.populations(arch, k)
    if not pops:
        sections.append(Section("Pareto front per epoch", notes=["the archive holds no population yet"]))
        return
    notes = []
    sources = sorted({p.source for p in pops})
    if "recomputed" in sources:
        notes.append(f"some epochs have no stored Div: recomputed from the archived embeddings (eq. 6, k={k})")
    if "unavailable" in sources:
        notes.append("some populations have neither stored Div nor embeddings: "
                     + ("only their rewards are plotted" if sources == ["unavailable"] else "they are left out"))
    fronts = ", ".join(f"{p.epoch}: {len(p.front)}" for p in pops if p.source != "unavailable")
    if fronts:
        notes.append(f"Pareto front size per epoch: {fronts}")
    sections.add("Pareto front per epoch", "pareto.png", plots.plot_pareto([p for p in pops if p.source != "unavailable"] or pops),
                 notes)


def _lineage_sections(sections: Sections, arch: ReadOnlyArchive, best, lineages: tuple[int, ...]) -> None:
    """The best solution's lineage, then that of each solution asked for with --lineage."""
    if best is not None:
        tree = rd.lineage_tree(arch, best.id)
        hidden = sum(tree.hidden.values())
        notes = [f"ancestor chain of {sum(n.on_chain for n in tree.nodes)} solution(s), root to #{best.id}; "
                 f"{len(tree.nodes)} nodes drawn" + (f", {hidden} more siblings not drawn" if hidden else "")]
        sections.add("Lineage of the best solution", "lineage.png", plots.plot_lineage(tree), notes)
    else:
        sections.append(Section("Lineage of the best solution", notes=["no valid solution yet"]))
    for sid in lineages:
        try:
            sol = arch.get(sid)
        except KeyError:
            raise rd.RunDirError(f"--lineage {sid}: the archive holds no solution {sid}") from None
        tree = rd.lineage_tree(arch, sid)
        sections.add(f"Lineage of solution #{sid}", f"lineage-{sid}.png", plots.plot_lineage(tree, "solution"),
                     [f"made by {sol.operator} in epoch {sol.epoch}, reward {sol.reward:.6g}"
                      + (f"; second parent #{sol.second_parent_id} (dashed)" if sol.second_parent_id is not None else "")])


def _operators_section(sections: Sections, metrics: list[dict]) -> None:
    table = rd.operator_table(metrics)
    if not table:
        return
    head = ["epoch", "operator", "children", "became programs", "valid", "mean reward", "max reward", "new best"]
    cells = [[str(r["epoch"]), r["operator"], str(r["children"]), f"{r['program_frac']:.0%}", f"{r['valid_frac']:.0%}",
              f"{r['reward_mean']:.6g}", f"{r['reward_max']:.6g}", f"{r['new_best_frac']:.0%}"] for r in table]
    sections.append(Section("Operators", table=[head] + cells, notes=[
        "per epoch, then over the run ('all'); new best: valid children that beat the best reward held before "
        "their epoch by more than the task's improvement_tolerance (task.yaml, default 1e-9 relative)"]))


def _phases_section(sections: Sections, metrics: list[dict]) -> None:
    if not metrics:
        return
    epochs, phases, missing = rd.phase_times(metrics)
    notes = [f"not logged: {', '.join(missing)}"] if missing else []
    if phases:
        sections.add("Time per phase", "phases.png", plots.plot_phases(epochs, phases), notes)
    else:
        sections.append(Section("Time per phase", notes=notes))


def build_report(run_dir: str | Path, out: str | Path | None = None, draw: bool = True,
                 lineages: tuple[int, ...] = ()) -> Path:
    """Write the HTML (default RUN_DIR/report/report.html) and its PNGs beside it; returns the HTML path.
    ``draw``: the best solution's recorded artefact through the task's render.py; ``lineages``: solution
    ids whose lineage trees are drawn too (a crossover child, say)."""
    run = rd.load_run(run_dir)
    out = Path(out) if out is not None else run.path / "report" / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    sections = Sections(out.parent)
    best_known = _best_known(run)
    if run.metrics:
        sections.add("Rewards", "rewards.png", plots.plot_rewards(rd.reward_curves(run.metrics), best_known), [])
    best = archive_size = code = heldout = None
    if run.archive_path is not None:
        with ReadOnlyArchive(run.archive_path) as arch:
            archive_size, best, heldout = arch.count(), arch.best(), rd.heldout(arch)
            _population_section(sections, arch, run)
            _lineage_sections(sections, arch, best, lineages)
            drawn = rendering(run, arch, best) if draw else (None, ["--no-exec: the task's render.py was not run"])
        code = best.code if best is not None else None
        sections.add("Best solution", "best_solution.png", *drawn)
    _operators_section(sections, run.metrics)
    _phases_section(sections, run.metrics)
    epochs_done = max(r["epoch"] for r in run.metrics) if run.metrics else None
    wall = sum(float(r.get("epoch_time_s") or 0.0) for r in run.metrics)
    header = _header(run, best, archive_size, epochs_done, wall, best_known, heldout)
    out.write_text(render_html(f"HELIX run report: {run.path.resolve().name}", header, sections, run.notes, code),
                   encoding="utf-8")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="+", help="a run directory (e.g. runs/latest), or scripts/ablate.py output folder(s)")
    parser.add_argument("--out", default=None, help="the HTML file to write; PNGs go beside it (default RUN_DIR/report/report.html)")
    parser.add_argument("--no-exec", action="store_true",
                        help="do not run the task's render.py on the best solution's recorded artefact (no drawing)")
    parser.add_argument("--lineage", type=int, action="append", default=[], metavar="ID",
                        help="also draw the lineage of solution ID (repeatable), e.g. a crossover child")
    args = parser.parse_args(argv)
    folders = [Path(p) for p in args.run_dir]
    try:
        if len(folders) > 1 or is_ablation_dir(folders[0]):
            if args.lineage:
                raise rd.RunDirError("--lineage is for a run directory, not ablation folders")
            path = build_ablation_report(folders, Path(args.out) if args.out else folders[0] / "report" / "report.html")
        else:
            path = build_report(folders[0], args.out, draw=not args.no_exec, lineages=tuple(args.lineage))
    except (rd.RunDirError, ArchiveError) as exc:
        print(f"report: error: {exc}", file=sys.stderr)
        return 2
    print(f"report: wrote {path} (PNGs in {path.parent})")
    return 0
