"""Write a self-contained HTML report of a HELIX run, with its plots also saved as PNG files.

    .venv/bin/python scripts/report.py runs/latest                 # -> runs/latest/report/report.html
    .venv/bin/python scripts/report.py runs/my-run --out /tmp/r/index.html
    .venv/bin/python scripts/report.py runs/latest --lineage 57     # also the lineage of solution 57
    .venv/bin/python scripts/report.py runs/quality-ws runs/q-keane --out q.html   # ablation folders

Given scripts/ablate.py output folders instead of a run directory, it writes the ablation report
(scripts/report_ablation.py): best so far against children evaluated per variant, per folder.

Sections: reward curves, the Pareto front of each epoch's population, the lineage tree of the
best solution, the task's own drawing of the best solution (re-run in the sandbox, checked by
the verifier; needs tasks/<task>/render.py), and the time per phase. Images are embedded as
base64, so the HTML file works offline and can be mailed around; nothing needs a display or a
network. The archive is only read, so reporting on a run that is still going is safe.
Exit status: 0 written, 2 RUN_DIR is neither a run directory nor ablation folders.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import report_data as rd
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from report_ablation import build_ablation_report, is_ablation_dir
from report_data import LineageTree, PopulationPoints, pick_epochs
from report_html import Section, new_figure, render_html, save_png


def plot_rewards(curves: dict[str, np.ndarray], best_known: float | None = None) -> Figure:
    """Reward mean / max / best-so-far per epoch on top, the valid fraction below."""
    fig = new_figure(8, 5.5)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    x = curves["epoch"]
    top.plot(x, curves["reward_mean"], "o-", label="mean reward (children)")
    top.plot(x, curves["reward_max"], "s-", label="max reward (children)")
    top.step(x, curves["best_reward"], where="post", color="black", lw=2, label="best so far (archive)")
    if best_known is not None and math.isfinite(best_known):
        top.axhline(best_known, color="tab:red", ls="--", lw=1, label=f"best known ({best_known:.6g})")
    top.set_ylabel("reward")
    top.set_title("Rewards per epoch")
    top.grid(alpha=0.3)
    top.legend(loc="best", fontsize=8)
    bottom.plot(x, curves["valid_frac"], "o-", color="tab:green")  # a line, so 0 shows as points too
    bottom.set_ylim(-0.05, 1.05)
    bottom.set_ylabel("valid fraction")
    bottom.set_xlabel("epoch")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.grid(alpha=0.3)
    return fig


def plot_pareto(pops: list[PopulationPoints], max_panels: int = 12) -> Figure:
    """One panel per epoch (at most ``max_panels``, evenly spread): the selected population in
    (Div, reward), its Pareto front joined in red. Without any Div: rewards per epoch only."""
    if all(p.source == "unavailable" for p in pops):
        fig = new_figure(8, 4)
        ax = fig.subplots()
        for p in pops:
            ax.scatter(np.full(len(p.rewards), p.epoch), p.rewards, s=18, color="tab:blue", alpha=0.7)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("reward")
        ax.set_title("Population rewards per epoch (no diversity available)")
        ax.grid(alpha=0.3)
        return fig
    by_epoch = {p.epoch: p for p in pops}
    shown = [by_epoch[e] for e in pick_epochs(sorted(by_epoch), max_panels)]
    cols = min(4, len(shown))
    rows = math.ceil(len(shown) / cols)
    fig = new_figure(3.2 * cols, 2.9 * rows)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, p in zip(axes, shown):
        ax.scatter(p.diversity, p.rewards, s=22, color="tab:blue", alpha=0.6, label="population")
        if len(p.front):
            order = p.front[np.argsort(p.diversity[p.front])]
            ax.plot(p.diversity[order], p.rewards[order], "o-", color="tab:red", ms=5, label="Pareto front")
        ax.set_title(f"epoch {p.epoch} ({len(p.ids)} members, Div {p.source})", fontsize=9)
        ax.set_xlabel("diversity (Div)", fontsize=8)
        ax.set_ylabel("reward", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle("Selected population and its Pareto front (reward vs diversity)")
    return fig


def lineage_layout(tree: LineageTree) -> dict[int, tuple[float, float]]:
    """id -> (x, y): generation on x, the ancestor chain on y = 0, siblings below it, the second
    parents of crossover children above it."""
    pos, below, above = {}, {}, {}
    for node in tree.nodes:
        if node.on_chain:
            pos[node.id] = (float(node.depth), 0.0)
        elif node.mate:
            above[node.depth] = above.get(node.depth, 0) + 1
            pos[node.id] = (float(node.depth), float(above[node.depth]))
        else:
            below[node.depth] = below.get(node.depth, 0) + 1
            pos[node.id] = (float(node.depth), -float(below[node.depth]))
    return pos


def plot_lineage(tree: LineageTree, what: str = "the best solution") -> Figure:
    """The best solution's ancestors (top row) and their siblings, coloured by reward;
    invalid solutions are grey crosses. Every node is labelled with its id and reward."""
    pos = lineage_layout(tree)
    depth = max(n.depth for n in tree.nodes)
    rows = 1 + max((-y for _, y in pos.values()), default=0)
    top = max((y for _, y in pos.values()), default=0)
    fig = new_figure(min(28.0, max(8.0, 1.5 * (depth + 1))), max(3.0, 1.1 * (rows + top + 1)))
    ax = fig.subplots()
    by_id = {n.id: n for n in tree.nodes}
    for n in tree.nodes:
        if n.parent_id in pos and not n.mate:
            (x0, y0), (x1, y1) = pos[n.parent_id], pos[n.id]
            ax.plot([x0, x1], [y0, y1], color="black" if n.on_chain else "0.7", lw=2 if n.on_chain else 1, zorder=1)
        if n.second_parent_id in pos:  # crossover: the edge from the second parent, dashed
            (x0, y0), (x1, y1) = pos[n.second_parent_id], pos[n.id]
            ax.plot([x0, x1], [y0, y1], color="tab:orange", lw=1.5, ls="--", zorder=1,
                    label="second parent (crossover)" if n.on_chain else None)
    valid = [n for n in tree.nodes if n.valid]
    invalid = [n for n in tree.nodes if not n.valid]
    rewards = [n.reward for n in valid]
    norm = Normalize(min(rewards), max(rewards) if max(rewards) > min(rewards) else min(rewards) + 1) if rewards else None
    if valid:
        sc = ax.scatter([pos[n.id][0] for n in valid], [pos[n.id][1] for n in valid], c=rewards, cmap="viridis",
                        norm=norm, s=[260 if n.id == tree.best_id else 120 for n in valid],
                        edgecolors=["red" if n.id == tree.best_id else "black" for n in valid], linewidths=1.5, zorder=2)
        fig.colorbar(sc, ax=ax, label="reward", shrink=0.8)
    if invalid:
        ax.scatter([pos[n.id][0] for n in invalid], [pos[n.id][1] for n in invalid], marker="X", color="0.55",
                   s=90, zorder=2, label="invalid")
    if invalid or top:
        ax.legend(fontsize=8, loc="lower right")
    label_every = max(1, math.ceil((depth + 1) / 30))  # long chains: label every k-th generation only
    for n in tree.nodes:
        if n.id == tree.best_id or n.depth % label_every == 0:
            x, y = pos[n.id]
            ax.annotate(f"#{n.id}\n{n.reward:.4g}", (x, y), textcoords="offset points", xytext=(0, 10),
                        ha="center", fontsize=7, weight="bold" if n.id == tree.best_id else "normal")
    for d, count in tree.hidden.items():
        low = min(y for i, (x, y) in pos.items() if x == d and not by_id[i].on_chain)
        ax.text(d, low - 0.6, f"+{count} more", ha="center", fontsize=7, color="0.4")
    ax.set_xlim(-0.6, depth + 0.6)
    ax.set_ylim(-(rows - 1) - (0.9 if tree.hidden else 0.5), top + 0.8)
    ax.set_xlabel("generation (0 = root)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yticks([])
    ax.set_title(f"Lineage of {what} #{tree.best_id}: ancestors (top row) and siblings", fontsize=10)
    return fig


def plot_phases(epochs: np.ndarray, phases: dict[str, np.ndarray]) -> Figure:
    """Seconds per epoch, stacked by phase."""
    fig = new_figure(8, 4)
    ax = fig.subplots()
    bottom = np.zeros(len(epochs))
    for (label, secs), color in zip(phases.items(), colormaps["tab10"].colors):
        ax.bar(epochs, secs, bottom=bottom, label=label, color=color)
        bottom = bottom + secs
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("seconds")
    ax.set_title("Time per epoch by phase")
    ax.legend(fontsize=8, loc="best")
    ax.grid(axis="y", alpha=0.3)
    return fig


def plot_artefact(render, artefact, title: str) -> Figure:
    """The task's own ``render(artefact, ax)`` on a square figure."""
    fig = new_figure(6, 6.3)
    ax = fig.subplots()
    render(artefact, ax)
    ax.set_title(title, fontsize=9)
    return fig


# ---- the report ------------------------------------------------------------------------------
def _load_render(path: Path):
    spec = importlib.util.spec_from_file_location(f"helix_render_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "render", None)):
        raise ValueError(f"{path} must define render(artefact, ax)")
    return module.render


def best_rendering(run: rd.RunData, best, execute: bool):
    """(Figure or None, notes): the best program re-run ONLY in the sandbox, checked by the task's
    verifier, and drawn by the task's render.py."""
    from rewards.sandbox import run_program
    from tasks import load_task

    name = rd.cfg_get(run.config, "task", "name")
    if best is None:
        return None, ["the archive holds no valid solution yet: nothing to draw"]
    if name is None:
        return None, ["the task is unknown (no task.name in config.yaml): the rendering is skipped"]
    try:
        task = load_task(name)
    except ValueError as exc:
        return None, [f"task {name!r} cannot be loaded ({exc}): the rendering is skipped"]
    render_path = task.folder / "render.py"
    if not render_path.is_file():
        return None, [f"task {name!r} has no render.py: the rendering is skipped (add "
                      f"{render_path.relative_to(task.folder.parent.parent)} with render(artefact, ax) to draw its solutions)"]
    if not execute:
        return None, ["--no-exec: the best program was not re-run, so it is not drawn"]
    timeout = float(rd.cfg_get(run.config, "task", "timeout_s", task.timeout_s))
    memory = int(rd.cfg_get(run.config, "task", "memory_mb", task.memory_mb))
    result = run_program(best.code, task.run_entry, timeout, memory, harness=task.harness, files=task.data_files)
    if result.status != "ok":
        return None, [f"re-running solution #{best.id} in the sandbox failed ({result.status}: {result.error[:300]}); "
                      "it is not drawn"]
    verdict = task.verify(result.value)
    notes = [f"solution #{best.id} re-run in the sandbox ({result.elapsed_s:.2f} s) and checked by the verifier: "
             f"reward {verdict.reward:.10g}, {'valid' if verdict.valid else 'INVALID'}; {verdict.feedback[:300]}"]
    if verdict.valid and not math.isclose(verdict.reward, best.reward, rel_tol=1e-9, abs_tol=1e-12):
        notes.append(f"the re-run reward differs from the archived {best.reward:.10g} (a non-deterministic program?)")
    try:
        fig = plot_artefact(_load_render(render_path), result.value,
                               f"best solution #{best.id} (epoch {best.epoch}): reward {verdict.reward:.8g}"
                               f"{'' if verdict.valid else ' (INVALID)'}")
    except Exception as exc:
        return None, notes + [f"{render_path} failed: {type(exc).__name__}: {exc}"]
    return fig, notes


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def _header(run: rd.RunData, best, archive_size, epochs_done, wall_s, best_known) -> list[tuple[str, str]]:
    rows = [("run directory", str(run.path.resolve()))]
    if best is not None:
        ratio = f" ({best.reward / best_known:.4f} of best known {best_known:.10g})" if best_known else ""
        rows += [("best reward", f"{best.reward:.10g}{ratio}"), ("best solution", f"#{best.id}, epoch {best.epoch}")]
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


def build_report(run_dir: str | Path, out: str | Path | None = None, execute: bool = True,
                 lineages: tuple[int, ...] = ()) -> Path:
    """Write the HTML (default RUN_DIR/report/report.html) and its PNGs beside it; returns the HTML path.
    ``lineages``: solution ids whose lineage trees are drawn too (a crossover child, say)."""
    run = rd.load_run(run_dir)
    out = Path(out) if out is not None else run.path / "report" / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    sections: list[Section] = []

    def add(title: str, png: str, fig, notes: list[str]) -> None:
        data = save_png(fig, out.parent / png) if fig is not None else b""
        sections.append(Section(title, png if fig is not None else None, data, notes))

    best_known = None
    name = rd.cfg_get(run.config, "task", "name")
    if name is not None:
        from tasks import available_tasks, load_task

        if name in available_tasks():
            best_known = load_task(name).best_known

    if run.metrics:
        add("Rewards", "rewards.png", plot_rewards(rd.reward_curves(run.metrics), best_known), [])
    best = archive_size = code = None
    epochs_done = max(r["epoch"] for r in run.metrics) if run.metrics else None
    if run.archive_path is not None:
        with rd.ReadOnlyArchive(run.archive_path) as arch:
            archive_size = arch.count()
            best = arch.best()
            k = int(rd.cfg_get(run.config, "population", "knn_k", rd.DEFAULT_KNN_K))
            pops = rd.populations(arch, k)
            if pops:
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
                add("Pareto front per epoch", "pareto.png",
                    plot_pareto([p for p in pops if p.source != "unavailable"] or pops), notes)
            else:
                sections.append(Section("Pareto front per epoch", notes=["the archive holds no population yet"]))
            if best is not None:
                tree = rd.lineage_tree(arch, best.id)
                hidden = sum(tree.hidden.values())
                notes = [f"ancestor chain of {sum(n.on_chain for n in tree.nodes)} solution(s), root to #{best.id}; "
                         f"{len(tree.nodes)} nodes drawn" + (f", {hidden} more siblings not drawn" if hidden else "")]
                add("Lineage of the best solution", "lineage.png", plot_lineage(tree), notes)
                code = best.code
            else:
                sections.append(Section("Lineage of the best solution", notes=["no valid solution yet"]))
            for sid in lineages:
                try:
                    sol = arch.get(sid)
                except KeyError:
                    raise rd.RunDirError(f"--lineage {sid}: the archive holds no solution {sid}") from None
                tree = rd.lineage_tree(arch, sid)
                add(f"Lineage of solution #{sid}", f"lineage-{sid}.png", plot_lineage(tree, "solution"),
                    [f"made by {sol.operator} in epoch {sol.epoch}, reward {sol.reward:.6g}"
                     + (f"; second parent #{sol.second_parent_id} (dashed)" if sol.second_parent_id is not None else "")])
        fig, notes = best_rendering(run, best, execute)
        add("Best solution", "best_solution.png", fig, notes)
    table = rd.operator_table(run.metrics)
    if table:
        head = ["epoch", "operator", "children", "became programs", "valid", "mean reward", "max reward", "new best"]
        cells = [[str(r["epoch"]), r["operator"], str(r["children"]), f"{r['program_frac']:.0%}", f"{r['valid_frac']:.0%}",
                  f"{r['reward_mean']:.6g}", f"{r['reward_max']:.6g}", f"{r['new_best_frac']:.0%}"] for r in table]
        sections.append(Section("Operators", table=[head] + cells, notes=[
            "per epoch, then over the run ('all'); new best: valid children that beat the best reward held before their epoch"]))
    if run.metrics:
        epochs, phases, missing = rd.phase_times(run.metrics)
        notes = [f"not logged: {', '.join(missing)}"] if missing else []
        if phases:
            add("Time per phase", "phases.png", plot_phases(epochs, phases), notes)
        else:
            sections.append(Section("Time per phase", notes=notes))
    wall = sum(float(r.get("epoch_time_s") or 0.0) for r in run.metrics)
    header = _header(run, best, archive_size, epochs_done, wall, best_known)
    out.write_text(render_html(f"HELIX run report: {run.path.resolve().name}", header, sections, run.notes, code),
                   encoding="utf-8")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="+", help="a run directory (e.g. runs/latest), or scripts/ablate.py output folder(s)")
    parser.add_argument("--out", default=None, help="the HTML file to write; PNGs go beside it (default RUN_DIR/report/report.html)")
    parser.add_argument("--no-exec", action="store_true", help="do not re-run the best program (no task rendering)")
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
            path = build_report(folders[0], args.out, execute=not args.no_exec, lineages=tuple(args.lineage))
    except rd.RunDirError as exc:
        print(f"report: error: {exc}", file=sys.stderr)
        return 2
    print(f"report: wrote {path} (PNGs in {path.parent})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
