"""The report's figures: matplotlib Figure objects on the Agg canvas (``page.new_figure``: no pyplot,
no display), one function per figure, fed by ``run_data`` and ``ablation``. Nothing here reads a run."""

from __future__ import annotations

import math

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from train.runs.page import new_figure
from train.runs.run_data import LineageTree, PopulationPoints, pick_epochs


# ---- a run ------------------------------------------------------------------------------------
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


# ---- an ablation: one curve per variant, the mean over seeds with the min-max band -----------
def _new_axes(title: str, xlabel: str, ylabel: str):
    fig = new_figure(7, 4.2)
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


def best_so_far_figure(curves: dict[str, list[np.ndarray]], title: str) -> Figure:
    """Best-so-far against children, per variant: the mean over seeds with the min-max band."""
    fig, ax = _new_axes(title, "children evaluated", "best valid reward so far")
    for variant, runs in curves.items():
        _mean_and_band(ax, runs, variant)
    ax.legend()
    return fig


def valid_figure(valid: dict[str, list[np.ndarray]], title: str) -> Figure:
    """Valid fraction of each epoch's children, per variant (mean over seeds, min-max band)."""
    fig, ax = _new_axes(title, "epoch", "valid children")
    for variant, runs in valid.items():
        _mean_and_band(ax, runs, variant, step=False)
    ax.set_ylim(0, 1)
    ax.legend()
    return fig
