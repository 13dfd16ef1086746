"""The run browser's data (train/runs/ui): runs under a folder, a run's curves, pages of its
solutions, lineage subtrees, one solution with its diffs, prompt and GRPO group, one epoch's
population, several runs' curves. Plain dicts of JSON types, each bounded (LIMIT, paging, a
capped tree) so a page of a 10^5-solution run stays cheap. Everything is read through
``run_data.load_run`` and ``ReadOnlyArchive``: nothing here writes to a run.
"""

from __future__ import annotations

import difflib
import math
import re
import sqlite3
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

from population.archive import ReadOnlyArchive
from population.objectives import archived_values, oriented
from tasks.base import exact_label
from train.runs import ablation
from train.runs import run_data as rd

CURVES = ("best_reward", "reward_mean", "reward_max", "valid_frac", "edit_fail_frac", "unchanged_frac", "repeat_frac",
          "zero_std_frac", "kl", "entropy", "diversity_mean", "archive_size") + tuple(k for k, _ in rd.PHASES)
SKIP_DIRS = {"checkpoints", "export", "wandb", "report", "__pycache__"}
PROMPT_ID = re.compile(r"^e(\d+)-p(\d+)-g(\d+)$")
MAX_CHAIN = 400  # ancestors drawn per lineage; older ones are one click (expand) away
MAX_RUN_NAME = 1024  # a run name in a URL: longer is no path under the browsed folder (PATH_MAX is 4096)


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and ((path / "archive.sqlite").is_file() or (path / "metrics.jsonl").is_file())


def discover(root: Path, depth: int = 3) -> list[Path]:
    """Run directories at or under ``root`` (a run, a folder of runs, an ablation folder, a folder of
    those), ``depth`` levels down at most, in name order; a run's own subfolders are not searched."""
    if is_run_dir(root):
        return [root]
    found = []
    if depth > 0 and root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir() and not child.is_symlink() and child.name not in SKIP_DIRS and not child.name.startswith("."):
                found += discover(child, depth - 1)
    return found


def resolve_run(root: Path, rel: str) -> Path:
    """The run directory ``rel`` names under ``root``; RunDirError for anything that leaves ``root``
    (``..``, an absolute path, a symlink out) or is not a run directory."""
    root = root.resolve()
    if len(rel) > MAX_RUN_NAME or "\x00" in rel:
        raise rd.RunDirError(f"run {rel[:60]!r}…: not a run name (at most {MAX_RUN_NAME} characters, no NUL)")
    if rel in ("", "."):
        path = root
    else:
        if rel.startswith(("/", "\\")) or any(part in ("..", "") for part in rel.split("/")) or "\\" in rel:
            raise rd.RunDirError(f"run {rel!r}: a path inside the browsed folder, with no '..'")
        try:
            path = (root / rel).resolve()
        except OSError as exc:  # a name the file system refuses (too long a component, ...)
            raise rd.RunDirError(f"run {rel[:60]!r}: {exc.strerror or exc}") from None
    if path != root and root not in path.parents:
        raise rd.RunDirError(f"run {rel!r} is outside the browsed folder")
    try:
        found = is_run_dir(path)
    except OSError as exc:
        raise rd.RunDirError(f"run {rel[:60]!r}: {exc.strerror or exc}") from None
    if not found:
        raise rd.RunDirError(f"run {rel!r}: not a run directory (no metrics.jsonl or archive.sqlite)")
    return path


def rel_name(root: Path, path: Path) -> str:
    rel = path.resolve().relative_to(root.resolve()).as_posix()
    return "" if rel == "." else rel


def _num(v):
    """A JSON-safe number: NaN and infinities become None."""
    if v is None or isinstance(v, bool):
        return v
    v = float(v)
    return v if math.isfinite(v) else None


@lru_cache(maxsize=64)
def best_known(task: str | None) -> float | None:
    if not task:
        return None
    from tasks import available_tasks, load_task

    try:  # a user's task not on this process's search path (HELIX_TASKS), or a broken one: no value to compare with
        return load_task(task).best_known if task in available_tasks() else None
    except ValueError:
        return None


def status(run: rd.RunData, now: float | None = None) -> str:
    """finished (the last configured epoch is logged), running (written lately: within twice the
    last epoch's time, at least 2 min), else stopped (failed or killed; --resume continues it)."""
    epochs = rd.cfg_get(run.config, "trainer", "epochs")
    last = max((m["epoch"] for m in run.metrics), default=0)
    if epochs and last >= int(epochs):
        return "finished"
    files = [run.path / n for n in ("metrics.jsonl", "archive.sqlite", "archive.sqlite-wal") if (run.path / n).exists()]
    newest = max((f.stat().st_mtime for f in files), default=0.0)
    epoch_s = (run.metrics[-1].get("epoch_time_s") or 0) if run.metrics else 0
    window = max(120.0, 2 * float(epoch_s))
    return "running" if (now or time.time()) - newest <= window else "stopped"


def run_rows(root: Path) -> list[dict]:
    """The runs view: one row per run; a run that cannot be read (a truncated archive, an unreadable
    folder) is a row with its ``error``, so one broken run never hides the others."""
    rows = []
    for path in discover(root):
        try:
            rows.append(run_row(root, path))
        except (ValueError, OSError, sqlite3.DatabaseError) as exc:  # RunDirError and ArchiveError are ValueErrors
            rows.append(dict(run=rel_name(root, path), name=path.name, error=f"{type(exc).__name__}: {exc}"))
    return rows


def run_row(root: Path, path: Path) -> dict:
    """One line of the runs view."""
    run = rd.load_run(path)
    task = rd.cfg_get(run.config, "task", "name")
    match = ablation.RUN.match(path.name)
    row = dict(run=rel_name(root, path), name=path.name, task=task, status=status(run),
               variant=match["variant"] if match else None, seed=int(match["seed"]) if match else None,
               epochs=max((m["epoch"] for m in run.metrics), default=None),
               epochs_planned=rd.cfg_get(run.config, "trainer", "epochs"), solutions=None, best=None, ratio=None)
    if run.archive_path:
        with ReadOnlyArchive(run.archive_path) as arch:
            best = arch.best()
            row["solutions"] = arch.count()
        row["best"] = None if best is None else _num(best.reward)
        row["best_exact"] = None if best is None else exact_label(best.exact)
    elif run.metrics:
        row["best"] = _num(run.metrics[-1].get("best_reward"))
    known = best_known(task)
    if known and row["best"] is not None:
        row["ratio"] = row["best"] / known
    row["best_known"] = known
    return row


def overview(path: Path) -> dict:
    """The per-epoch curves of metrics.jsonl (CURVES present in some row; None for gaps), the
    operator table and the header numbers."""
    run = rd.load_run(path)
    rows = sorted(run.metrics, key=lambda r: r["epoch"])
    series = {k: [_num(r.get(k)) if isinstance(r.get(k), (int, float)) else None for r in rows]
              for k in CURVES if any(isinstance(r.get(k), (int, float)) for r in rows)}
    out = dict(epoch=[r["epoch"] for r in rows], series=series, notes=run.notes,
               config=[[k, str(v)] for k, v in rd.config_summary(run.config)],
               operators=[{k: (_num(v) if isinstance(v, float) else v) for k, v in r.items()}
                          for r in rd.operator_table(run.metrics)],
               status=status(run), solutions=0, best=None, best_exact=None, heldout=None)
    if run.archive_path:
        with ReadOnlyArchive(run.archive_path) as arch:
            out["solutions"] = arch.count()
            best, exact, out["heldout"] = arch.best(), arch.best_exact(), rd.heldout(arch)
        out["best"] = None if best is None else dict(id=best.id, reward=_num(best.reward), epoch=best.epoch,
                                                     exact=exact_label(best.exact))
        # the best that may be called a record, when the best reward holds only within the tolerance
        out["best_exact"] = None if exact is None or best is None or exact.id == best.id else \
            dict(id=exact.id, reward=_num(exact.reward), epoch=exact.epoch)
    return out


def _archive(path: Path) -> ReadOnlyArchive:
    run_archive = path / "archive.sqlite"
    if not run_archive.is_file():
        raise rd.RunDirError(f"{path.name} has no archive.sqlite yet")
    return ReadOnlyArchive(run_archive)


def _summary(s: dict) -> dict:
    return {**s, "reward": _num(s["reward"]), "valid": bool(s["valid"]), "eval_time_s": _num(s["eval_time_s"])}


_BY_REWARD: dict = {}  # (archive, newest id, count) -> ids by reward, best first; sorted once per archive state


def _by_reward(arch: ReadOnlyArchive, valid_only: bool) -> np.ndarray:
    """Every solution id, best reward first (ties: oldest first), cached until the archive grows:
    SQLite has no reward index, and sorting 10^5 rows on every page of the table costs seconds."""
    key = (str(arch.path), arch.max_id(), arch.count(), valid_only)
    if key not in _BY_REWARD:
        rows = np.array([(i, r, v) for i, _, _, r, v in arch.scores()], dtype=np.float64).reshape(-1, 3)
        if valid_only:
            rows = rows[rows[:, 2] > 0]
        _BY_REWARD.clear()
        _BY_REWARD[key] = rows[np.lexsort((rows[:, 0], -rows[:, 1])), 0].astype(np.int64)
    return _BY_REWARD[key]


def solutions(path: Path, offset: int, limit: int, order: str, valid_only: bool = False) -> dict:
    """One page of the solutions table and the archive's size (for the pager)."""
    limit = min(max(limit, 1), 500)
    with _archive(path) as arch:
        if order in ("-reward", "reward"):
            ids = _by_reward(arch, valid_only)
            ids = ids if order == "-reward" else ids[::-1]
            page = ids[offset : offset + limit].tolist()
            by_id = {s["id"]: s for s in arch.summaries_of(page)}
            rows = [by_id[i] for i in page]
        else:
            rows = arch.summaries(offset, limit, order, valid_only)
        return dict(total=arch.count(), offset=offset, rows=[_summary(r) for r in rows])


def _with_counts(arch: ReadOnlyArchive, nodes: list[dict]) -> list[dict]:
    """Each node with how many children it has (for 'expand' on the tree)."""
    counts = arch.child_counts([n["id"] for n in nodes])
    for n in nodes:
        n["n_children"] = counts[n["id"]]
    return nodes


def lineage(path: Path, n_best: int = 5) -> dict:
    """The best ``n_best`` valid solutions' ancestor chains (best first, at most MAX_CHAIN ancestors
    each) and each crossover child's second parent: what the tree draws first; the rest is
    ``expand``ed on demand. Edges: ``parent`` and ``second`` (crossover's other parent)."""
    with _archive(path) as arch:
        tops = arch.summaries(0, n_best, "-reward", valid_only=True) or arch.summaries(0, 1, "id")
        rank, chains = {}, set()
        for k, top in enumerate(tops):
            rank[top["id"]] = k + 1
            chains.update([top["id"], *arch.ancestor_ids(top["id"], MAX_CHAIN)])
        full = {s["id"]: s for s in arch.summaries_of(chains)}
        mates = {s["second_parent_id"] for s in full.values()} - set(full) - {None}
        full.update({m["id"]: m for m in arch.summaries_of(mates)})
        out = _with_counts(arch, [_summary(s) for s in full.values()])
        for n in out:
            n["rank"] = rank.get(n["id"])
        return dict(nodes=sorted(out, key=lambda n: n["id"]), best=[t["id"] for t in tops], total=arch.count())


def expand(path: Path, sid: int, limit: int = 30) -> dict:
    """The best ``limit`` children of one node and how many there are."""
    with _archive(path) as arch:
        arch.get(sid)
        rows, total = arch.child_summaries(sid, min(max(limit, 1), 200))
        return dict(id=sid, total=total, nodes=_with_counts(arch, [_summary(r) for r in rows]))


def diff(a: str, b: str, a_name: str, b_name: str) -> str:
    return "".join(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True), a_name, b_name))


def _ancestors_shown(run: rd.RunData, arch: ReadOnlyArchive, sol, epoch: int, prompt: int | None) -> dict:
    """What the prompt of ``sol`` showed. Recorded (prompts/epoch-N.jsonl, train.loop.run_dir.RunDir.log_prompts):
    its text, the ancestors and other programs it showed, what the budget dropped. Older runs,
    reconstructed: rollout.n_ancestors of the parent's ancestors less one per 'oldest ancestor' the
    budget dropped (metrics.jsonl prompt_dropped); an operator without lineage (best_shot) showed none."""
    out = dict(parent_id=sol.parent_id, second_parent_id=sol.second_parent_id, operator=sol.operator,
               ancestors=[], others=[], dropped=None, text=None, prompt_index=prompt, source="reconstructed")
    if sol.parent_id is None:
        return out
    recorded = run.path / "prompts" / f"epoch-{epoch}.jsonl"
    if recorded.is_file() and prompt is not None:
        for r in rd.read_metrics(recorded)[0]:  # the same per-epoch JSONL rows as metrics.jsonl (torn lines skipped)
            if r["epoch"] == epoch and r.get("prompt") == prompt:
                by_id = {s["id"]: s for s in arch.summaries_of(list(r.get("ancestors", [])) + list(r.get("others", [])))}
                out.update(text=r.get("text"), dropped=r.get("dropped"), source="recorded",
                           ancestors=[_brief(by_id[i]) for i in r.get("ancestors", []) if i in by_id],
                           others=[_brief(by_id[i]) for i in r.get("others", []) if i in by_id])
                return out
    n = int(rd.cfg_get(run.config, "rollout", "n_ancestors", 2))
    row = next((m for m in run.metrics if m["epoch"] == epoch), None)
    if row is not None and "prompt_dropped" in row and prompt is not None:
        out["dropped"] = next((d["dropped"] for d in row["prompt_dropped"]
                               if d.get("prompt") == prompt and d.get("parent_id") == sol.parent_id), [])
    shown = n - sum(1 for d in out["dropped"] or [] if d == "oldest ancestor")
    chain = arch.ancestor_ids(sol.parent_id, max(shown, 0))  # the parent's parent first
    by_id = {s["id"]: s for s in arch.summaries_of(chain)}
    out["ancestors"] = [_brief(by_id[i]) for i in chain]
    return out


def _brief(s: dict) -> dict:
    return dict(id=s["id"], reward=_num(s["reward"]), valid=bool(s["valid"]), epoch=s["epoch"])


ADVANTAGES_MISSING = ("this run did not record advantages (runs archive each child's advantage as the update applied "
                      "it since the run browser stopped recomputing them); the group's rewards are shown without them")


def group(run: rd.RunData, arch: ReadOnlyArchive, sol) -> dict:
    """The GRPO group that ``sol`` was sampled in: its siblings' rewards and the advantages the update
    applied, as the loop archived them (``advantage``, ``advantage_inputs``); nothing is recomputed. A
    member with no advantage put no token in the update (lost by the evaluation infrastructure, or
    truncated under trainer.mask_truncated); an older run without the records says so."""
    match = PROMPT_ID.match(sol.prompt_id or "")
    if match is None or sol.parent_id is None:
        return dict(members=[], note="no GRPO group: not a sampled child (no prompt id)", recorded=False)
    prefix = f"e{match[1]}-p{match[2]}-g"
    members = arch.siblings(sol.parent_id, sol.epoch, prefix)
    inputs = [m.advantage_inputs or {} for m in members]
    rows = [dict(id=m.id, g=int(m.prompt_id[len(prefix):]), reward=_num(m.reward), valid=m.valid, operator=m.operator,
                 advantage=_num(m.advantage), tokens=i.get("tokens"), scored=not m.metrics.get("infra_error"))
            for m, i in zip(members, inputs)]
    recorded = any(inputs)
    estimator = next((dict(name=i.get("estimator"), norm_by_std=i.get("norm_by_std")) for i in inputs if i), None)
    note = None
    if rd.cfg_get(run.config, "trainer", "enabled", True) is False:
        note = "trainer.enabled is false: no GRPO step used these rewards"
    elif not recorded:
        note = ADVANTAGES_MISSING
    elif any(i.get("dropped") for i in inputs):  # trainer.dynamic_sampling: archived, not trained on
        note = next(i["dropped"] for i in inputs if i.get("dropped"))
    return dict(members=rows, note=note, prompt=prefix[:-2], recorded=recorded, estimator=estimator)


def solution(path: Path, sid: int) -> dict:
    """Everything about one solution: fields, code, diffs against its parents, the prompt, its GRPO
    group (recorded advantages), its best children, and whether a picture of it was recorded."""
    run = rd.load_run(path)
    with _archive(path) as arch:
        sol = arch.get(sid)
        out = dict(id=sol.id, parent_id=sol.parent_id, second_parent_id=sol.second_parent_id, epoch=sol.epoch,
                   reward=_num(sol.reward), valid=sol.valid, feedback=sol.feedback, metrics=sol.metrics,
                   eval_time_s=_num(sol.eval_time_s), operator=sol.operator, prompt_id=sol.prompt_id,
                   completion=sol.completion, code=sol.code, diffs=[], exact=sol.exact, exact_label=exact_label(sol.exact))
        for pid, label in ((sol.parent_id, "parent"), (sol.second_parent_id, "second parent")):
            if pid is not None:
                parent = arch.get(pid)
                out["diffs"].append(dict(label=label, id=pid, reward=_num(parent.reward),
                                         diff=diff(parent.code, sol.code, f"#{pid} ({label})", f"#{sol.id}")))
        match = PROMPT_ID.match(sol.prompt_id or "")
        out["prompt"] = _ancestors_shown(run, arch, sol, sol.epoch, int(match[2]) if match else None)
        children, n_children = arch.child_summaries(sid, 20)
        out["children"], out["n_children"] = [_summary(c) for c in children], n_children
        out["group"] = group(run, arch, sol)
        out["task"] = rd.cfg_get(run.config, "task", "name")
        out["picture"] = picture_status(arch, sol, out["task"])
    return out


def picture_status(arch: ReadOnlyArchive, sol, task: str | None) -> dict:
    """Whether /api/render can draw ``sol`` (its artefact was recorded and the task has a render.py), and
    if not, why: the page says what is missing instead of asking."""
    if not (task and has_renderer(task)):
        return dict(available=False, note=None)
    if not sol.valid:
        return dict(available=False, note="an invalid solution has no picture")
    if "artefact" not in arch.columns:
        return dict(available=False, note="this run predates recorded artefacts: no picture (the browser never "
                                          "re-runs a program; runs since record what each valid program returned)")
    if not arch.has_artefact(sol.id):
        return dict(available=False, note="the run recorded no artefact for this solution (over the 64 KB limit)")
    return dict(available=True, note=None)


@lru_cache(maxsize=64)
def has_renderer(task: str) -> bool:
    from tasks import available_tasks, load_task

    try:
        return task in available_tasks() and (load_task(task).folder / "render.py").is_file()
    except ValueError:  # as best_known: the task is not found here, so nothing to draw with
        return False


BUILTIN_OBJECTIVES = [dict(name="reward", goal="max", label="reward"), dict(name="diversity", goal="max", label="Div (eq. 6)")]


def declared_objectives(task: str | None) -> list[dict]:
    """The objectives the run's task declares in its task.yaml as it is now (none for a task that is
    gone or whose task.yaml does not load: the population view then offers reward and Div)."""
    from tasks.base import task_objectives

    try:
        return [dict(name=o.metric, goal=o.goal, label=f"{o.metric} ({o.goal})") for o in task_objectives(task)] if task else []
    except ValueError:
        return []


def population(path: Path, epoch: int | None) -> dict:
    """One epoch's population: each member's reward and Div, the Pareto front, and which members
    the next epoch's prompts showed as parents; the epochs there are (for the slider). ``objectives``:
    what the view may plot, reward, Div and the task's declared ones; each member's ``values`` has one
    number (None: missing) per objective. With declared objectives the front is that of all of them,
    a missing value the worst (population/objectives.py), as selection ranks them."""
    run = rd.load_run(path)
    declared = declared_objectives(rd.cfg_get(run.config, "task", "name"))
    objectives = BUILTIN_OBJECTIVES + declared
    with _archive(path) as arch:
        epochs = arch.population_epochs()
        if not epochs:
            return dict(epochs=[], epoch=None, members=[], source="unavailable", objectives=objectives)
        epoch = epochs[-1] if epoch is None or epoch not in epochs else epoch
        pts = rd.population_at(arch, epoch, int(rd.cfg_get(run.config, "population", "knn_k", rd.DEFAULT_KNN_K)))
        parents = arch.parents_of_epoch(epoch + 1, pts.ids)
        valid = arch._many("valid", pts.ids) if pts.ids else {}
        extra = archived_values(arch, pts.ids, [o["name"] for o in declared])
        front = set(pts.front.tolist())
        if declared:

            columns = np.column_stack([pts.rewards, pts.diversity, oriented(extra, [o["goal"] for o in declared])])
            front = set(rd.pareto_front_of(columns).tolist())
        members = []
        for k, (i, r, d) in enumerate(zip(pts.ids, pts.rewards.tolist(), pts.diversity.tolist())):
            values = dict(reward=_num(r), diversity=_num(d)) | {o["name"]: _num(v) for o, v in zip(declared, extra[k].tolist())}
            members.append(dict(id=i, reward=_num(r), diversity=_num(d), front=k in front, parent=i in parents,
                                valid=bool(valid[i]), values=values))
        return dict(epochs=epochs, epoch=epoch, members=members, source=pts.source, next_epoch_logged=bool(parents),
                    objectives=objectives)


_CURVES: dict = {}  # (archive, newest id, count, k) -> ablation.curves_of, until the archive grows


def _curves(path: Path, k: int) -> dict[str, np.ndarray]:
    with _archive(path) as arch:
        key = (str(arch.path), arch.max_id(), arch.count(), k)
        if key not in _CURVES:
            if len(_CURVES) > 32:
                _CURVES.clear()
            _CURVES[key] = ablation.curves_of(arch.scores(), k, str(arch.path))
        return _CURVES[key]


def _thin(curve: np.ndarray, points: int) -> tuple[list[int], list]:
    """(children, values) at at most ``points`` evenly spread entries, the last one always kept."""
    n = len(curve)
    idx = np.unique(np.r_[np.linspace(0, n - 1, min(n, points)).astype(int), n - 1]) if n else np.zeros(0, int)
    return (idx + 1).tolist(), [_num(v) for v in curve[idx]]


def compare(root: Path, rels: list[str], k: int = ablation.TOP_K, points: int = 1500) -> dict:
    """Several runs against children evaluated: best so far, the top-k mean so far from the first
    child after which k valid solutions exist (the starter counts; ``topk_from``, None if never; before
    it the curve is empty, so it never falls), valid fraction so far (thinned to ``points`` each), and
    per group (the ablation variant, else the run) the fixed-budget table and the area table at the
    shortest run's length; ``errors``: runs whose archive could not be read."""
    runs, grouped, errors = [], {}, []
    for rel in rels:
        path = resolve_run(root, rel)
        if not (path / "archive.sqlite").is_file():
            continue
        try:
            curves = _curves(path, k)
        except (ValueError, sqlite3.DatabaseError) as exc:  # one unreadable archive: named, the others compared
            errors.append(dict(run=rel, error=f"{type(exc).__name__}: {exc}"))
            continue
        match = ablation.RUN.match(path.name)
        grouped.setdefault(match["variant"] if match else rel, []).append(curves)
        x, best = _thin(curves["best"], points)
        full = curves["ranked"] >= k  # the top-k mean of k rewards: drawn from the first child where k are valid
        runs.append(dict(run=rel, variant=match["variant"] if match else rel, x=x, best=best,
                         topk=_thin(np.where(full, curves["topk"], np.nan), points)[1],
                         topk_from=int(np.argmax(full)) + 1 if full.any() else None,
                         valid=_thin(curves["valid"], points)[1], children=len(curves["best"])))
    lengths = [len(c["best"]) for cs in grouped.values() for c in cs]
    n = min(lengths) if lengths else 0
    tables = {}
    if n > 0:
        tables["budget"] = ablation.table_rows({v: [c["best"] for c in cs] for v, cs in grouped.items()},
                                               ablation.default_budgets({v: [c["best"] for c in cs] for v, cs in grouped.items()}))
        tables["area"] = ablation.budget_rows(grouped, n, k)
    return dict(runs=runs, k=k, budget=n, tables=tables, errors=errors)
