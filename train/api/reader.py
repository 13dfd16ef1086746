"""``open_run``: a run directory, read from Python (a notebook, a script), finished or still running.

The reader is the run browser's own data layer (train.runs.browse over train.runs.run_data and
population.archive.ReadOnlyArchive, SQLite ``mode=ro``): the same numbers the browser and the report
show, and nothing here can write to the run. Every call reads the files again, so a running run's
new epochs appear without reopening it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from population.archive import ReadOnlyArchive
from train.runs import browse
from train.runs import run_data as rd

ORDERS = ("-reward", "reward", "-id", "id")


@dataclass(frozen=True)
class SolutionView:
    """One archived program with what the run knows about it."""

    id: int
    epoch: int
    reward: float | None
    valid: bool
    code: str
    feedback: str
    metrics: dict
    operator: str
    parents: tuple[int, ...]  # (parent,) or (parent, second parent) for a crossover; () for the starter
    children: list[int]  # the best children first (at most 20; ``n_children`` counts them all)
    n_children: int
    completion: str | None  # the policy's answer that made it (None for the starter)
    lineage: list[int]  # its ancestors' ids, nearest first, back to the starter (at most 50)
    prompt: dict = field(repr=False, default_factory=dict)  # what the prompt showed, where the run recorded it
    group: dict = field(repr=False, default_factory=dict)  # its GRPO group: siblings' rewards, advantages applied
    exact: dict | None = None  # its exact check {status, detail, value} (record candidates only); None: none ran
    exact_label: str = "not checked"  # how HELIX states it: "exact", "within tolerance only: ...", "unchecked: ..."


class Run:
    """Read-only view of one run directory (``open_run``)."""

    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()
        rd.load_run(self.path)  # RunDirError now, not at the first call, for a folder that is not a run

    def __repr__(self) -> str:
        return f"helix run {self.path.name} ({browse.status(rd.load_run(self.path))}, {len(self.metrics())} epochs)"

    @property
    def config(self) -> dict | None:
        """The run's resolved config.yaml as a mapping (None where it is missing)."""
        return rd.load_run(self.path).config

    def metrics(self) -> list[dict]:
        """metrics.jsonl, one row per epoch in epoch order (lines torn by a kill are skipped)."""
        return sorted(rd.load_run(self.path).metrics, key=lambda r: r["epoch"])

    def solutions(self, offset: int = 0, limit: int = 50, order: str = "-reward", valid_only: bool = False) -> list[dict]:
        """A page of solution summaries (id, parent, epoch, reward, valid, operator, eval time), ``order``
        one of -reward (best first), reward, -id (newest first), id; at most 500 a page."""
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
        if offset < 0 or limit < 1:
            raise ValueError(f"offset must be >= 0 and limit >= 1; got offset={offset}, limit={limit}")
        return browse.solutions(self.path, offset, limit, order, valid_only)["rows"]

    def count(self) -> int:
        """Solutions archived so far (the starter included)."""
        return browse.solutions(self.path, 0, 1, "id")["total"]

    def solution(self, sid: int) -> SolutionView:
        """Everything about one solution: code, feedback, metrics, parents, children, prompt, GRPO group."""
        s = browse.solution(self.path, int(sid))
        return SolutionView(s["id"], s["epoch"], s["reward"], s["valid"], s["code"], s["feedback"], s["metrics"],
                            s["operator"], tuple(p for p in (s["parent_id"], s["second_parent_id"]) if p is not None),
                            [c["id"] for c in s["children"]], s["n_children"], s["completion"], self.lineage(s["id"]),
                            s["prompt"], s["group"], s["exact"], s["exact_label"])

    def best(self) -> SolutionView | None:
        """The best valid solution (None before the archive holds one)."""
        with ReadOnlyArchive(self.path / "archive.sqlite") as arch:
            best = arch.best()
        return None if best is None else self.solution(best.id)

    def best_exact(self) -> SolutionView | None:
        """The best solution whose exact check said "exact": the best that may be called a record (None: none)."""
        with ReadOnlyArchive(self.path / "archive.sqlite") as arch:
            best = arch.best_exact()
        return None if best is None else self.solution(best.id)

    def heldout(self) -> dict | None:
        """The best program's score on its task's held-out instances (task.yaml ``heldout``), stored at the end of
        the run: solution_id, reward, valid, status, feedback, about (what the instances are) and run_reward (its
        reward on the run's own instances); None for a task without them or a run that has not finished."""
        with ReadOnlyArchive(self.path / "archive.sqlite") as arch:
            return rd.heldout(arch)

    def lineage(self, sid: int, n: int = 50) -> list[int]:
        """Ancestor ids of ``sid``, nearest first (at most ``n``)."""
        with ReadOnlyArchive(self.path / "archive.sqlite") as arch:
            arch.get(int(sid))  # KeyError naming the archive for an id it does not hold
            return arch.ancestor_ids(int(sid), n)

    def population(self, epoch: int | None = None) -> dict:
        """P_t after ``epoch``'s selection (default the newest): each member's id, reward, Div, whether it is on
        the Pareto front and whether the next epoch prompted from it; and the epochs there are."""
        out = browse.population(self.path, epoch)
        if epoch is not None and out["epoch"] != epoch:  # the browser falls back to the newest; a caller is told
            raise KeyError(f"epoch {epoch} has no population in {self.path.name} (epochs: {out['epochs']})")
        return out

    def to_pandas(self, what: str = "metrics"):
        """``metrics`` (one row per epoch) or ``solutions`` (every summary, best first) as a pandas DataFrame."""
        try:
            import pandas as pd
        except ImportError as err:  # optional: the rest of the reader needs only the standard library
            raise ImportError("to_pandas needs pandas (pip install pandas)") from err
        if what == "metrics":
            return pd.DataFrame(self.metrics())
        if what == "solutions":
            total = self.count()
            rows = [r for offset in range(0, total, 500) for r in self.solutions(offset, 500, "-reward")]
            return pd.DataFrame(rows)
        raise ValueError(f"to_pandas: what must be 'metrics' or 'solutions'; got {what!r}")


def open_run(path: str | Path) -> Run:
    """A run directory (``runs/<name>``, or ``runs/latest``) for reading; RunDirError if it is not one."""
    return Run(path)
