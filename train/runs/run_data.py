"""The data behind the run report and the run browser: pure extraction from a run directory, no
plotting, so every number a report shows can be tested exactly. The archive is read through
``population.archive.ReadOnlyArchive`` (SQLite ``mode=ro``): a report on a run that is still going
never writes to it, never changes its schema and never holds a write lock.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from population.archive import Archive, ReadOnlyArchive

PHASES = (("gen_time_s", "generate"), ("eval_time_s", "evaluate"), ("train_time_s", "train"),
          ("weight_sync_time_s", "weight sync"), ("embed_select_time_s", "embed + select"), ("checkpoint_time_s", "checkpoint"))
# (config section, key) shown in the report's header table, in order.
SUMMARY_KEYS = (("task", "name"), ("model", "policy"), ("rollout", "engine"), ("rollout", "group_size"),
                ("rollout", "temperature"), ("trainer", "enabled"), ("trainer", "epochs"),
                ("trainer", "prompts_per_epoch"), ("trainer", "lr"), ("trainer", "kl_coef"),
                ("population", "enabled"), ("population", "size"), ("population", "knn_k"),
                ("selection", "strategy"), ("run", "name"), ("run", "seed"))
DEFAULT_KNN_K = 5  # population.config.PopulationConfig's default, for a run without config.yaml


class RunDirError(ValueError):
    """RUN_DIR is not a HELIX run directory (the CLI turns this into exit code 2)."""


@dataclass
class RunData:
    path: Path
    config: dict | None
    metrics: list[dict]
    archive_path: Path | None
    notes: list[str] = field(default_factory=list)  # what was missing or unreadable


def read_metrics(path: Path) -> tuple[list[dict], int]:
    """Rows of metrics.jsonl in file order, and how many lines were skipped (torn by a kill, or not objects)."""
    rows, skipped = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if isinstance(row, dict) and isinstance(row.get("epoch"), int):
            rows.append(row)
        else:
            skipped += 1
    return rows, skipped


def load_run(run_dir: str | Path) -> RunData:
    """What the run directory holds; RunDirError when it is not a run directory at all."""
    path = Path(run_dir)
    if not path.is_dir():
        raise RunDirError(f"{path} is not a directory (expected a HELIX run directory, e.g. runs/latest)")
    metrics_path, archive_path, config_path = path / "metrics.jsonl", path / "archive.sqlite", path / "config.yaml"
    if not metrics_path.is_file() and not archive_path.is_file():
        raise RunDirError(f"{path} holds neither metrics.jsonl nor archive.sqlite: not a HELIX run directory")
    notes = []
    config = None
    if config_path.is_file():
        try:
            config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            notes.append(f"config.yaml is not valid YAML ({exc}); the config summary is omitted")
        if config is not None and not isinstance(config, dict):
            notes.append("config.yaml is not a mapping; the config summary is omitted")
            config = None
    else:
        notes.append("no config.yaml: the config summary and the task rendering are omitted")
    metrics = []
    if metrics_path.is_file():
        metrics, skipped = read_metrics(metrics_path)
        if skipped:
            notes.append(f"metrics.jsonl: {skipped} unreadable line(s) skipped")
        if not metrics:
            notes.append("metrics.jsonl holds no epoch yet: the reward and phase-time plots are omitted")
    else:
        notes.append("no metrics.jsonl: the reward and phase-time plots are omitted")
    if not archive_path.is_file():
        notes.append("no archive.sqlite: the Pareto fronts, the lineage and the best solution are omitted")
        archive_path = None
    return RunData(path, config, metrics, archive_path, notes)


def cfg_get(config: dict | None, section: str, key: str, default=None):
    if not isinstance(config, dict) or not isinstance(config.get(section), dict):
        return default
    value = config[section].get(key, default)
    return default if value is None else value


def heldout(arch) -> dict | None:
    """The run's best program on its task's held-out instances, as the loop stored it at the end of the run
    (archive meta ``heldout``, train/loop/records.py); None for a task without them, a run not finished, or an
    unreadable entry."""
    try:
        entry = json.loads(arch.get_meta("heldout") or "null")
    except (json.JSONDecodeError, sqlite3.DatabaseError):
        return None
    return entry if isinstance(entry, dict) and {"reward", "valid", "about", "solution_id"} <= set(entry) else None


def config_summary(config: dict | None) -> list[tuple[str, object]]:
    """("section.key", value) for the header table, in SUMMARY_KEYS order; absent keys are left out."""
    out = []
    for section, key in SUMMARY_KEYS:
        if isinstance(config, dict) and isinstance(config.get(section), dict) and key in config[section]:
            out.append((f"{section}.{key}", config[section][key]))
    return out


def _column(metrics: list[dict], key: str) -> np.ndarray:
    """One metric per epoch as float; absent or null entries become NaN (a gap in the plot)."""
    vals = []
    for row in metrics:
        v = row.get(key)
        vals.append(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan)
    return np.array(vals, dtype=np.float64)


OPERATOR_STATS = ("children", "program_frac", "valid_frac", "reward_mean", "reward_max", "new_best_frac")


def operator_table(metrics: list[dict]) -> list[dict]:
    """Per epoch and operator (metrics.jsonl ``op_<name>_*``), then one "all" row per operator over
    the run: children, the shares that became programs, were valid and beat the best so far, and
    the mean and max reward. What tells a user whether an operator pays."""
    rows, totals = [], {}
    for r in sorted(metrics, key=lambda r: r["epoch"]):
        names = sorted({k[3:-len("_children")] for k in r if k.startswith("op_") and k.endswith("_children")})
        for name in names:
            row = {"epoch": r["epoch"], "operator": name, **{s: r.get(f"op_{name}_{s}") for s in OPERATOR_STATS}}
            rows.append(row)
            totals.setdefault(name, []).append(row)
    for name, part in sorted(totals.items()):
        n = sum(p["children"] for p in part)
        mean = {s: sum(p[s] * p["children"] for p in part) / n
                for s in ("program_frac", "valid_frac", "reward_mean", "new_best_frac")}
        rows.append({"epoch": "all", "operator": name, "children": n, **mean,
                     "reward_max": max(p["reward_max"] for p in part)})
    return rows


def reward_curves(metrics: list[dict]) -> dict[str, np.ndarray]:
    """Per epoch (sorted): reward mean, max, best-so-far and valid fraction.

    best-so-far is the logged ``best_reward`` (which includes the starter program); where that
    is absent, the running maximum of ``reward_max``."""
    rows = sorted(metrics, key=lambda r: r["epoch"])
    curves = {"epoch": np.array([r["epoch"] for r in rows], dtype=np.int64)}
    for key in ("reward_mean", "reward_max", "best_reward", "valid_frac"):
        curves[key] = _column(rows, key)
    best = curves["best_reward"]
    if np.isnan(best).any():
        running = np.fmax.accumulate(curves["reward_max"]) if len(rows) else best
        curves["best_reward"] = np.where(np.isnan(best), running, best)
    return curves


def phase_times(metrics: list[dict]) -> tuple[np.ndarray, dict[str, np.ndarray], list[str]]:
    """(epochs, {phase label: seconds per epoch}, missing keys). A key absent from every row is
    left out and named; one absent from some rows counts 0 s there."""
    rows = sorted(metrics, key=lambda r: r["epoch"])
    epochs = np.array([r["epoch"] for r in rows], dtype=np.int64)
    phases, missing = {}, []
    for key, label in PHASES:
        if not any(isinstance(r.get(key), (int, float)) for r in rows):
            missing.append(key)
            continue
        phases[label] = np.nan_to_num(_column(rows, key), nan=0.0)
    return epochs, phases, missing


def pareto_front(rewards: np.ndarray, diversity: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated points of (reward, Div), both maximised (NaN Div: excluded)."""
    from population.selection import nondominated_fronts  # pymoo and scipy: ~1 s, paid by the pages that draw fronts

    rewards, diversity = np.asarray(rewards, np.float64), np.asarray(diversity, np.float64)
    ok = np.flatnonzero(np.isfinite(rewards) & np.isfinite(diversity))
    if not len(ok):
        return np.zeros(0, dtype=np.int64)
    return np.sort(ok[nondominated_fronts(rewards[ok], diversity[ok])[0]])


def pareto_front_of(columns: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated rows of maximised columns: reward, Div, then the task's declared
    objectives as selection orients them (population.objectives.oriented: -inf = missing, the worst).
    Rows whose reward or Div is not finite are excluded, as in ``pareto_front``."""
    from population.objectives import finite_columns
    from population.selection import fronts_of_columns

    columns = np.asarray(columns, np.float64)
    ok = np.flatnonzero(np.isfinite(columns[:, :2]).all(axis=1))
    if not len(ok):
        return np.zeros(0, dtype=np.int64)
    return np.sort(ok[fronts_of_columns(finite_columns(columns[ok]))[0]])


@dataclass(frozen=True)
class PopulationPoints:
    epoch: int
    ids: list[int]
    rewards: np.ndarray
    diversity: np.ndarray  # NaN where unknown
    source: str  # "stored" | "recomputed" | "unavailable"
    front: np.ndarray  # indices into ids


def populations(arch: ReadOnlyArchive, knn_k: int) -> list[PopulationPoints]:
    """Each epoch's selected population with its members' (reward, Div) and Pareto front.

    Div is the value stored at selection time when the archive has it; otherwise it is recomputed
    (eq. 6) against every program (a solution with an embedding) of that epoch or earlier, which
    is the pool selection saw; without embeddings it is unavailable (reward only)."""
    programs: list = []  # (ids, epochs, embeddings) of every program, read once and only if some Div is missing
    return [population_at(arch, epoch, knn_k, programs) for epoch in arch.population_epochs()]


def population_at(arch: ReadOnlyArchive, epoch: int, knn_k: int, programs: list | None = None) -> PopulationPoints:
    """One epoch of ``populations``; ``programs``: a list that caches the programs' embeddings
    across calls (filled on first need)."""
    from population.diversity import knn_diversity

    programs = [] if programs is None else programs
    _, ids = arch.get_population(epoch)
    rewards = arch.rewards(ids)
    div = np.full(len(ids), math.nan)
    source = "unavailable"
    stored = arch.population_diversity(epoch) if "diversity" in arch.population_columns() else [None] * len(ids)
    if ids and all(d is not None for d in stored):
        div, source = np.array(stored, dtype=np.float64), "stored"
    else:
        if not programs:
            pids, epochs = arch.program_epochs()
            pids = pids.tolist()
            programs += [pids, epochs, arch.get_embeddings(pids) if pids else np.zeros((0, 0), np.float32)]
        pool = np.flatnonzero(programs[1] <= epoch)  # the pool selection saw at this epoch
        row_of = {programs[0][r]: k for k, r in enumerate(pool)}
        members = [k for k, i in enumerate(ids) if int(i) in row_of]
        if members:
            base = programs[2][pool]
            rows_in_base = np.array([row_of[int(ids[k])] for k in members])
            div[members] = knn_diversity(base[rows_in_base], base, knn_k, rows_in_base)
            source = "recomputed"
    return PopulationPoints(epoch, [int(i) for i in ids], rewards, div, source, pareto_front(rewards, div))


def pick_epochs(epochs: list[int], n: int) -> list[int]:
    """At most n epochs, evenly spread, always the first and the last (for small multiples)."""
    if n < 1:
        raise ValueError(f"need at least one panel, got n={n}")
    if len(epochs) <= n:
        return list(epochs)
    if n == 1:
        return [epochs[-1]]
    picks = np.unique(np.round(np.linspace(0, len(epochs) - 1, n)).astype(int))
    return [epochs[i] for i in picks]


@dataclass(frozen=True)
class LineageNode:
    id: int
    parent_id: int | None
    epoch: int
    reward: float
    valid: bool
    depth: int  # generations from the root
    on_chain: bool  # an ancestor of the best solution, or the best itself
    second_parent_id: int | None = None  # crossover children: the other parent
    operator: str = "edit"
    mate: bool = False  # shown as the second parent of a crossover child on the chain


@dataclass(frozen=True)
class LineageTree:
    best_id: int
    nodes: list[LineageNode]  # chain nodes root -> best, then siblings by depth
    hidden: dict[int, int]  # depth -> siblings left out by max_siblings


def lineage_tree(arch: Archive, best_id: int, max_siblings: int = 6) -> LineageTree:
    """The best solution's ancestor chain and, at each generation, the other children of the
    same parent (its siblings): the best ``max_siblings`` by reward, the rest only counted."""
    chain = arch.lineage(best_id)
    on_chain = {s.id for s in chain}
    nodes = [LineageNode(s.id, s.parent_id, s.epoch, s.reward, s.valid, d, True, s.second_parent_id, s.operator)
             for d, s in enumerate(chain)]
    for d, s in enumerate(chain):  # a crossover on the chain: its second parent too, beside the first
        if s.second_parent_id is not None and s.second_parent_id not in on_chain:
            mate = arch.get(s.second_parent_id)
            nodes.append(LineageNode(mate.id, mate.parent_id, mate.epoch, mate.reward, mate.valid, d - 1, False,
                                     mate.second_parent_id, mate.operator, mate=True))
    hidden, drawn = {}, {n.id for n in nodes}  # a second parent that is also a sibling is drawn once, as the mate
    for depth in range(1, len(chain)):
        others = [c for c in arch.children(chain[depth - 1].id) if c.id not in drawn]
        others.sort(key=lambda s: (-s.valid, -s.reward, s.id))
        nodes += [LineageNode(s.id, s.parent_id, s.epoch, s.reward, s.valid, depth, False, s.second_parent_id, s.operator)
                  for s in others[:max_siblings]]
        if len(others) > max_siblings:
            hidden[depth] = len(others) - max_siblings
    return LineageTree(best_id, nodes, hidden)
