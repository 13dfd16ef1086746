"""The solution archive D: every program ever generated, with its lineage, in SQLite (WAL).

Why SQLite: one file, atomic transactions (a SIGKILL mid-write loses at most the batch whose
commit had not returned; a committed batch is never torn), and an index on parent_id so the
recursive ancestor query stays cheap at 10^6 rows. Embeddings live beside their row as
float32 BLOBs, keyed also by the hash of the canonical code so identical code is embedded once.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from population.child import Child

_SCHEMA = """
CREATE TABLE IF NOT EXISTS solutions (
    id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES solutions(id), epoch INTEGER NOT NULL,
    code TEXT NOT NULL, reward REAL NOT NULL, valid INTEGER NOT NULL, feedback TEXT NOT NULL,
    metrics TEXT NOT NULL, eval_time_s REAL NOT NULL, prompt_id TEXT, completion TEXT,
    embedding BLOB, code_hash TEXT, second_parent_id INTEGER REFERENCES solutions(id),
    operator TEXT NOT NULL DEFAULT 'edit');
CREATE INDEX IF NOT EXISTS solutions_hash ON solutions(code_hash);
CREATE TABLE IF NOT EXISTS populations (epoch INTEGER NOT NULL, position INTEGER NOT NULL,
    solution_id INTEGER NOT NULL REFERENCES solutions(id), tag INTEGER NOT NULL DEFAULT -1, diversity REAL,
    PRIMARY KEY (epoch, position));
-- Rows of an epoch that was cut short by a crash, moved aside on --resume (never deleted).
CREATE TABLE IF NOT EXISTS discarded_solutions AS SELECT * FROM solutions WHERE 0;
-- What a run records about itself outside any one solution (the held-out score of its best: train.loop.records).
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
# Columns added since the first archives, in order: (name, declaration). Archives written before
# them get them on open (``_migrate``), in solutions and discarded_solutions alike, so both keep
# one column order (``rewind`` copies rows with SELECT *).
# advantage: what the GRPO update applied to the child's response tokens; advantage_inputs: what the
# estimator saw (JSON); artefact: what a valid child's program returned, for tasks with a render.py (JSON,
# bounded: rewards.evaluator.ARTEFACT_LIMIT). The run browser and the report read these, never re-run anything.
# exact: the task's exact check of a record candidate (JSON {"status", "detail", "value"}, status first;
# NULL: no check ran, the child was below every record threshold or the archive predates the checks).
# construction: a search-form task's verified construction of a valid child (compact JSON, at most
# rewards.search_channel.MAX_CONSTRUCTION_BYTES), which its children are handed (``construction_for``).
_ADDED = (("second_parent_id", "INTEGER REFERENCES solutions(id)"), ("operator", "TEXT NOT NULL DEFAULT 'edit'"),
          ("advantage", "REAL"), ("advantage_inputs", "TEXT"), ("artefact", "TEXT"), ("exact", "TEXT"),
          ("construction", "TEXT"))
_INDEXES = """
CREATE INDEX IF NOT EXISTS solutions_parent ON solutions(parent_id);
CREATE INDEX IF NOT EXISTS solutions_second_parent ON solutions(second_parent_id);
"""
_FIELDS = ("id", "parent_id", "epoch", "code", "reward", "valid", "feedback", "metrics", "eval_time_s", "prompt_id", "completion",
           "second_parent_id", "operator", "advantage", "advantage_inputs", "exact")
# What an archive without the column means (advantage, advantage_inputs, exact: not recorded).
_LEGACY = {"second_parent_id": "NULL", "operator": "'edit'", "advantage": "NULL", "advantage_inputs": "NULL", "exact": "NULL"}
_REQUIRED = ("parent_id", "epoch", "code", "reward", "valid", "feedback")
_OPTIONAL = {"metrics": {}, "eval_time_s": 0.0, "prompt_id": None, "completion": None, "second_parent_id": None,
             "operator": "edit", "advantage": None, "advantage_inputs": None, "artefact": None, "exact": None,
             "construction": None}
EXACT_STATUS = "exact"  # what a record needs: population.archive.Archive.best_exact
_IN_CHUNK = 500  # ids per "IN (...)" query, well under SQLite's bound-variable limit


@dataclass(frozen=True)
class Solution:
    id: int
    parent_id: int | None
    epoch: int
    code: str
    reward: float
    valid: bool
    feedback: str
    metrics: dict
    eval_time_s: float
    prompt_id: str | None
    completion: str | None
    second_parent_id: int | None = None  # crossover children: the other parent
    operator: str = "edit"  # how it was made (rollout.operators)
    advantage: float | None = None  # what the GRPO update applied to its tokens; None: not recorded or not trained
    advantage_inputs: dict | None = None  # what the estimator saw (estimator, norm_by_std, reward, tokens)
    exact: dict | None = None  # the task's exact check {status, detail, value}; None: no check ran

    @property
    def parents(self) -> tuple[int, ...]:
        return tuple(p for p in (self.parent_id, self.second_parent_id) if p is not None)


def _row(r) -> Solution:
    return Solution(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], json.loads(r[7]), r[8], r[9], r[10], r[11], r[12],
                    r[13], None if r[14] is None else json.loads(r[14]), None if r[15] is None else json.loads(r[15]))


def _json_default(obj):
    """Metrics often hold numpy scalars or arrays; store them as plain JSON numbers/lists."""
    if isinstance(obj, (np.generic, np.ndarray)):
        return obj.tolist()
    raise TypeError(f"metric value of type {type(obj).__name__} is not JSON serialisable")


def _params(i: int, row: dict) -> tuple:
    missing = [f for f in _REQUIRED if f not in row]
    unknown = sorted(set(row) - set(_REQUIRED) - set(_OPTIONAL))
    if missing or unknown:
        raise ValueError(f"archive row {i}: missing fields {missing}, unknown fields {unknown}; "
                         f"a row holds {list(_REQUIRED) + list(_OPTIONAL)}")
    row = {**_OPTIONAL, **row}
    reward, eval_time = float(row["reward"]), float(row["eval_time_s"])
    if math.isnan(reward) or math.isnan(eval_time):  # SQLite would store NULL and reject the whole batch
        raise ValueError(f"archive row {i} (prompt {row['prompt_id']!r}): reward {reward} / eval_time_s "
                         f"{eval_time} is NaN; the evaluator must map a NaN score to reward 0 with feedback")
    parent = None if row["parent_id"] is None else int(row["parent_id"])
    second = None if row["second_parent_id"] is None else int(row["second_parent_id"])
    advantage = None if row["advantage"] is None else float(row["advantage"])
    inputs = None if row["advantage_inputs"] is None else json.dumps(row["advantage_inputs"], default=_json_default)
    artefact = None if row["artefact"] is None else str(row["artefact"])
    exact = row["exact"]
    if exact is not None:  # status first: best_exact finds it by its text
        exact = json.dumps({"status": dict(exact).get("status"), **dict(exact)}, default=_json_default)
    construction = None if row["construction"] is None else str(row["construction"])
    if construction is not None and not bool(row["valid"]):
        raise ValueError(f"archive row {i} (prompt {row['prompt_id']!r}): an invalid child has no construction")
    return (parent, int(row["epoch"]), str(row["code"]), reward, int(bool(row["valid"])), str(row["feedback"]),
            json.dumps(row["metrics"] or {}, default=_json_default), eval_time, row["prompt_id"], row["completion"],
            second, str(row["operator"]), advantage, inputs, artefact, exact, construction)


class Archive:
    def __init__(self, path: str | Path):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, timeout=30.0)  # a reader (inspect CLI) may hold the lock briefly
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")  # a committed batch survives even power loss
        self.db.executescript(_SCHEMA)
        self._migrate()
        self.columns = set(_FIELDS) | {"artefact", "construction"}
        self.db.executescript(_INDEXES)
        self.db.commit()

    def _migrate(self) -> None:
        """Add the columns an archive from an earlier version lacks (see ``_ADDED``)."""
        with self.db:
            for table in ("solutions", "discarded_solutions"):
                have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
                for name, declaration in _ADDED:
                    if name not in have:
                        self.db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")

    def _fields(self, alias: str = "") -> str:
        """The select list of a Solution; a reader of an older archive (no migration: read-only)
        gets the missing columns as their meaning (no second parent, made by edit)."""
        return ", ".join(alias + f if f in self.columns else f"{_LEGACY[f]} AS {f}" for f in _FIELDS)

    @property
    def _select(self) -> str:
        return f"SELECT {self._fields()} FROM solutions"

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # ---- solutions -------------------------------------------------------------------
    def add_many(self, rows: list[Child | dict]) -> list[int]:
        """Insert a batch in one transaction: after a crash it is there entirely or not at all.

        A row is a Child, or a dict of the archive's columns (the seed, tools, tests); it may name
        a parent inserted earlier in the same batch."""
        # Validate everything before writing.
        params = [_params(i, row.archive_row() if isinstance(row, Child) else row) for i, row in enumerate(rows)]
        ids = []
        with self.db:
            for p in params:
                cur = self.db.execute(
                    "INSERT INTO solutions (parent_id, epoch, code, reward, valid, feedback, metrics, eval_time_s, "
                    "prompt_id, completion, second_parent_id, operator, advantage, advantage_inputs, artefact, exact, "
                    "construction) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", p)
                ids.append(cur.lastrowid)
        return ids

    def get(self, sid: int) -> Solution:
        r = self.db.execute(self._select + " WHERE id = ?", (int(sid),)).fetchone()
        if r is None:
            raise KeyError(f"solution {sid} is not in the archive ({self.path}, {self.count()} solutions)")
        return _row(r)

    def _many(self, column: str, ids) -> dict:
        """id -> column for the given ids, in chunked IN queries (O(len(ids)), not O(archive))."""
        ids = [int(i) for i in ids]
        out = {}
        for start in range(0, len(ids), _IN_CHUNK):
            part = ids[start : start + _IN_CHUNK]
            q = f"SELECT id, {column} FROM solutions WHERE id IN ({','.join('?' * len(part))})"
            out.update(self.db.execute(q, part).fetchall())
        missing = [i for i in ids if i not in out]
        if missing:
            raise KeyError(f"solutions {missing[:10]} are not in the archive ({self.path})")
        return out

    def ancestors(self, sid: int, n: int) -> list[Solution]:
        """Parent first, then grandparent, ... at most n (one recursive query over the parent index)."""
        self.get(sid)  # a missing id is an error, not an empty lineage
        if n <= 0:
            return []
        rows = self.db.execute(
            "WITH RECURSIVE up(id, depth) AS (SELECT parent_id, 1 FROM solutions WHERE id = ? "
            "UNION ALL SELECT s.parent_id, up.depth + 1 FROM solutions s JOIN up ON s.id = up.id WHERE up.depth < ?) "
            f"SELECT {self._fields('s.')} FROM up JOIN solutions s ON s.id = up.id ORDER BY up.depth",
            (int(sid), int(n))).fetchall()
        return [_row(r) for r in rows]

    def lineage(self, sid: int) -> list[Solution]:
        """Root ... sid."""
        return list(reversed(self.ancestors(sid, 1 << 62))) + [self.get(sid)]

    def children(self, sid: int) -> list[Solution]:
        """Every child of ``sid``, crossover children that have it as their second parent included."""
        second = " OR second_parent_id = :id" if "second_parent_id" in self.columns else ""
        return [_row(r) for r in self.db.execute(self._select + f" WHERE parent_id = :id{second} ORDER BY id", {"id": int(sid)})]

    def count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM solutions").fetchone()[0]

    def artefact(self, sid: int) -> str | None:
        """What solution ``sid``'s program returned (JSON text), as recorded at evaluation time; None when
        nothing was recorded (an invalid child, a task without render.py, an archive from before the column)."""
        if "artefact" not in self.columns:
            self.get(sid)  # a missing id is still a KeyError
            return None
        r = self.db.execute("SELECT artefact FROM solutions WHERE id = ?", (int(sid),)).fetchone()
        if r is None:
            raise KeyError(f"solution {sid} is not in the archive ({self.path}, {self.count()} solutions)")
        return r[0]

    def construction_for(self, sid: int) -> tuple[int, str] | None:
        """The construction a child of ``sid`` is handed (search form): ``sid``'s own, or where it has none
        (an invalid program, which selection may still pick under selection.include_invalid) its nearest
        ancestor's along first parents, as (that solution's id, the JSON text); None when no solution on the
        way up has one (the run's starter was invalid too: the child starts from None, as the first call did)."""
        self.get(sid)  # a missing id is a KeyError, not a fresh start
        if "construction" not in self.columns:
            return None
        row = self.db.execute(
            "WITH RECURSIVE up(id, parent_id, construction, depth) AS ("
            "SELECT id, parent_id, construction, 0 FROM solutions WHERE id = ? UNION ALL "
            "SELECT s.id, s.parent_id, s.construction, up.depth + 1 FROM solutions s JOIN up ON s.id = up.parent_id "
            "WHERE up.construction IS NULL) "
            "SELECT id, construction FROM up WHERE construction IS NOT NULL ORDER BY depth LIMIT 1", (int(sid),)).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def has_artefact(self, sid: int) -> bool:
        """Is an artefact recorded for ``sid`` (without reading it)?"""
        if "artefact" not in self.columns:
            return False
        r = self.db.execute("SELECT artefact IS NOT NULL FROM solutions WHERE id = ?", (int(sid),)).fetchone()
        return bool(r and r[0])

    def best(self) -> Solution | None:
        """Highest reward among valid solutions (earliest on ties); None if none is valid."""
        r = self.db.execute(self._select + " WHERE valid = 1 ORDER BY reward DESC, id ASC LIMIT 1").fetchone()
        return _row(r) if r else None

    def best_exact(self) -> Solution | None:
        """Highest reward among solutions whose exact check said "exact" (earliest on ties): the best that may be
        called a record; None if there is none (or the archive predates the checks)."""
        if "exact" not in self.columns:
            return None
        r = self.db.execute(self._select + " WHERE valid = 1 AND exact LIKE ? ORDER BY reward DESC, id ASC LIMIT 1",
                            (f'{{"status": "{EXACT_STATUS}",%',)).fetchone()
        return _row(r) if r else None

    def top(self, k: int) -> list[Solution]:
        return [_row(r) for r in self.db.execute(self._select + " ORDER BY reward DESC, id ASC LIMIT ?", (k,))]

    def rewards(self, ids) -> np.ndarray:
        lookup = self._many("reward", ids)
        return np.array([lookup[int(i)] for i in ids], dtype=np.float64)

    # ---- populations -----------------------------------------------------------------
    def set_population(self, epoch: int, ids: list[int], tags: list[int] | None = None,
                       diversity: list[float] | None = None) -> None:
        """P_epoch as ordered slots; ``tags`` label each slot (the island, for the islands strategy);
        ``diversity`` records each member's eq.-6 Div at selection time (for reports)."""
        tags = [-1] * len(ids) if tags is None else list(tags)
        divs = [None] * len(ids) if diversity is None else [float(d) for d in diversity]
        if len(tags) != len(ids) or len(divs) != len(ids):
            raise ValueError(f"{len(tags)} tags and {len(divs)} diversity values for {len(ids)} population slots")
        with self.db:
            self.db.execute("DELETE FROM populations WHERE epoch = ?", (int(epoch),))
            self.db.executemany("INSERT INTO populations VALUES (?,?,?,?,?)",
                                [(int(epoch), k, int(i), int(t), d) for k, (i, t, d) in enumerate(zip(ids, tags, divs))])

    def population_diversity(self, epoch: int) -> list[float | None]:
        return [r[0] for r in self.db.execute("SELECT diversity FROM populations WHERE epoch = ? ORDER BY position", (epoch,))]

    def max_id(self) -> int:
        """The newest solution id (0 for an empty archive): a checkpoint's pointer into the archive."""
        return self.db.execute("SELECT COALESCE(MAX(id), 0) FROM solutions").fetchone()[0]

    def rewind(self, max_id: int, epoch: int) -> int:
        """Return the archive to a checkpoint: solutions newer than ``max_id`` move to
        ``discarded_solutions`` (kept for inspection, out of the run) and populations after
        ``epoch`` are dropped. Returns how many solutions were moved."""
        with self.db:
            moved = self.db.execute("INSERT INTO discarded_solutions SELECT * FROM solutions WHERE id > ?", (int(max_id),)).rowcount
            self.db.execute("DELETE FROM solutions WHERE id > ?", (int(max_id),))
            self.db.execute("DELETE FROM populations WHERE epoch > ?", (int(epoch),))
        return moved

    def get_population(self, epoch: int | None = None) -> tuple[int, list[int]]:
        """(epoch, ids) for the given epoch, or the latest one if None; (-1, []) if none is stored."""
        if epoch is None:
            r = self.db.execute("SELECT MAX(epoch) FROM populations").fetchone()
            if r[0] is None:
                return -1, []
            epoch = r[0]
        ids = [r[0] for r in self.db.execute("SELECT solution_id FROM populations WHERE epoch = ? ORDER BY position", (epoch,))]
        return epoch, ids

    # ---- run metadata ------------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, str(value)))

    def get_meta(self, key: str) -> str | None:
        r = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if r is None else r[0]

    # ---- embeddings --------------------------------------------------------------------
    def put_embeddings(self, ids, emb: np.ndarray, hashes: list[str] | None = None) -> None:
        """Store each row's embedding (float32 BLOB) and, optionally, its canonical-code hash,
        which ``cached_embedding`` looks up so identical code is never embedded twice."""
        ids = [int(i) for i in ids]
        emb = np.ascontiguousarray(emb, dtype=np.float32)
        hashes = [None] * len(ids) if hashes is None else list(hashes)
        if (emb.ndim != 2 and len(ids)) or len(emb) != len(ids) or len(hashes) != len(ids):
            raise ValueError(f"put_embeddings: {len(ids)} ids, embeddings of shape {emb.shape}, {len(hashes)} hashes")
        with self.db:
            cur = self.db.executemany("UPDATE solutions SET embedding = ?, code_hash = ? WHERE id = ?",
                                      [(e.tobytes(), h, i) for i, e, h in zip(ids, emb, hashes)])
            if cur.rowcount != len(ids):
                self._many("id", ids)  # raises KeyError naming the missing ids; the transaction rolls back

    def get_embeddings(self, ids) -> np.ndarray:
        """(n, d) float32 in the order of ``ids``; KeyError if one has none stored."""
        blobs = self._many("embedding", ids)
        missing = [int(i) for i in ids if blobs[int(i)] is None]
        if missing:
            raise KeyError(f"solutions {missing[:10]} have no stored embedding")
        out = [np.frombuffer(blobs[int(i)], dtype=np.float32) for i in ids]
        return np.stack(out) if out else np.zeros((0, 0), dtype=np.float32)

    def cached_embedding(self, code_hash: str) -> np.ndarray | None:
        r = self.db.execute("SELECT embedding FROM solutions WHERE code_hash = ? AND embedding IS NOT NULL LIMIT 1",
                            (code_hash,)).fetchone()
        return None if r is None else np.frombuffer(r[0], dtype=np.float32).copy()

    def program_hashes(self) -> dict[str, int]:
        """Each stored code hash (``put_embeddings``), with the id of the first program that has it."""
        rows = self.db.execute("SELECT code_hash, MIN(id) FROM solutions WHERE code_hash IS NOT NULL GROUP BY code_hash")
        return {h: int(i) for h, i in rows}

    def program_ids(self, max_epoch: int | None = None) -> np.ndarray:
        """Ids of the solutions that are programs (they have an embedding), up to an epoch."""
        bound = (1 << 62) if max_epoch is None else max_epoch
        rows = self.db.execute("SELECT id FROM solutions WHERE embedding IS NOT NULL AND epoch <= ? ORDER BY id", (bound,))
        return np.array([r[0] for r in rows], dtype=np.int64)

    # ---- whole-run reads (reports, ablation tables, the run browser) -------------------
    def scores(self) -> list[tuple[int, int | None, int, float, bool]]:
        """(id, parent_id, epoch, reward, valid) of every solution in id order: what curves and
        tables of a run need, without reading code or embeddings."""
        rows = self.db.execute("SELECT id, parent_id, epoch, reward, valid FROM solutions ORDER BY id")
        return [(i, p, e, r, bool(v)) for i, p, e, r, v in rows]

    def program_epochs(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, epochs) of every program (a solution with an embedding), in id order."""
        rows = self.db.execute("SELECT id, epoch FROM solutions WHERE embedding IS NOT NULL ORDER BY id").fetchall()
        return np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.int64)

    def solutions_with_hash(self) -> Iterator[tuple[Solution, str | None]]:
        """Every solution in id order with its stored canonical-code hash (None before it was embedded)."""
        for r in self.db.execute(f"SELECT {self._fields()}, code_hash FROM solutions ORDER BY id"):
            yield _row(r), r[-1]


class ArchiveError(ValueError):
    """A file that is not a readable HELIX archive."""


class ReadOnlyArchive(Archive):
    """The archive's reader: the same queries over a read-only connection (SQLite ``mode=ro``), so
    a report, an inspection or a browser on a run that is still going never writes to it, never
    migrates its schema and never holds a write lock; a finished run's archive is opened ``immutable``, so
    not even SQLite's -wal and -shm sidecar files appear beside it. An older archive is read as it is (missing
    columns read as their meaning, see ``_fields``)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise ArchiveError(f"no archive at {self.path}")
        # No -wal beside it: no writer has it open (SQLite deletes the WAL when the last writer closes), so it
        # is read as immutable: a WAL-mode reader would otherwise create -wal and -shm files in the run folder.
        live = Path(f"{self.path}-wal").exists()
        query = "mode=ro" if live else "mode=ro&immutable=1"
        self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?{query}", uri=True, timeout=30.0)
        try:
            tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise ArchiveError(f"{self.path} is not a readable SQLite archive: {exc}") from None
        if "solutions" not in tables:
            self.db.close()
            raise ArchiveError(f"{self.path} has no 'solutions' table: not a HELIX archive")
        self.has_populations = "populations" in tables
        self.columns = {r[1] for r in self.db.execute("PRAGMA table_info(solutions)")}

    def population_columns(self) -> set[str]:
        return {r[1] for r in self.db.execute("PRAGMA table_info(populations)")} if self.has_populations else set()

    def population_epochs(self) -> list[int]:
        if not self.has_populations:
            return []
        return [r[0] for r in self.db.execute("SELECT DISTINCT epoch FROM populations ORDER BY epoch")]

    # ---- the run browser's pages: summaries without code, bounded by LIMIT ------------------
    SUMMARY = ("id", "parent_id", "second_parent_id", "epoch", "reward", "valid", "operator", "eval_time_s", "prompt_id")
    _ORDERS = {"id": "id ASC", "-id": "id DESC", "reward": "reward ASC, id ASC", "-reward": "reward DESC, id ASC"}

    def _summary_select(self) -> str:
        cols = ", ".join(f if f in self.columns else f"{_LEGACY[f]} AS {f}" for f in self.SUMMARY)
        return f"SELECT {cols} FROM solutions"

    def summaries(self, offset: int = 0, limit: int = 50, order: str = "-id", valid_only: bool = False) -> list[dict]:
        """One page of solutions as SUMMARY dicts (no code, completion or embedding)."""
        if order not in self._ORDERS:
            raise ValueError(f"order {order!r}: one of {sorted(self._ORDERS)}")
        where = " WHERE valid = 1" if valid_only else ""
        q = f"{self._summary_select()}{where} ORDER BY {self._ORDERS[order]} LIMIT ? OFFSET ?"
        return [dict(zip(self.SUMMARY, r)) for r in self.db.execute(q, (int(limit), int(offset)))]

    def child_summaries(self, sid: int, limit: int) -> tuple[list[dict], int]:
        """The best ``limit`` children of ``sid`` (second-parent children too) and how many it has."""
        second = " OR second_parent_id = :id" if "second_parent_id" in self.columns else ""
        where = f" WHERE parent_id = :id{second}"
        total = self.db.execute(f"SELECT COUNT(*) FROM solutions{where}", {"id": int(sid)}).fetchone()[0]
        q = f"{self._summary_select()}{where} ORDER BY valid DESC, reward DESC, id ASC LIMIT :n"
        return [dict(zip(self.SUMMARY, r)) for r in self.db.execute(q, {"id": int(sid), "n": int(limit)})], total

    def parents_of_epoch(self, epoch: int, candidates: list[int]) -> set[int]:
        """Which of ``candidates`` (the previous population) the epoch's prompts showed as a first or
        second parent (through the parent indexes, not a scan of the epoch)."""
        shown = set()
        for col in ("parent_id", "second_parent_id") if "second_parent_id" in self.columns else ("parent_id",):
            for start in range(0, len(candidates), _IN_CHUNK):
                part = [int(i) for i in candidates[start : start + _IN_CHUNK]]
                q = f"SELECT DISTINCT {col} FROM solutions WHERE {col} IN ({','.join('?' * len(part))}) AND epoch = ?"
                shown.update(r[0] for r in self.db.execute(q, part + [int(epoch)]))
        return shown

    def summaries_of(self, ids) -> list[dict]:
        """SUMMARY dicts of the given ids that exist, in id order (chunked IN queries)."""
        ids, out = [int(i) for i in ids], []
        for start in range(0, len(ids), _IN_CHUNK):
            part = ids[start : start + _IN_CHUNK]
            q = f"{self._summary_select()} WHERE id IN ({','.join('?' * len(part))})"
            out += [dict(zip(self.SUMMARY, r)) for r in self.db.execute(q, part)]
        return sorted(out, key=lambda s: s["id"])

    def child_counts(self, ids) -> dict[int, int]:
        """id -> how many children it has (as first or second parent), for the given ids."""
        ids, counts = [int(i) for i in ids], {}
        for col in ("parent_id", "second_parent_id") if "second_parent_id" in self.columns else ("parent_id",):
            for start in range(0, len(ids), _IN_CHUNK):
                part = ids[start : start + _IN_CHUNK]
                q = f"SELECT {col}, COUNT(*) FROM solutions WHERE {col} IN ({','.join('?' * len(part))}) GROUP BY {col}"
                for i, n in self.db.execute(q, part):
                    counts[i] = counts.get(i, 0) + n
        return {i: counts.get(i, 0) for i in ids}

    def ancestor_ids(self, sid: int, n: int) -> list[int]:
        """``ancestors`` without reading them: parent first, at most n."""
        rows = self.db.execute(
            "WITH RECURSIVE up(id, depth) AS (SELECT parent_id, 1 FROM solutions WHERE id = ? "
            "UNION ALL SELECT s.parent_id, up.depth + 1 FROM solutions s JOIN up ON s.id = up.id WHERE up.depth < ?) "
            "SELECT id FROM up WHERE id IS NOT NULL ORDER BY depth", (int(sid), int(n)))
        return [r[0] for r in rows]

    def siblings(self, parent_id: int, epoch: int, prompt_prefix: str) -> list[Solution]:
        """The solutions of one prompt (its GRPO group): same parent and epoch, prompt ids
        ``prompt_prefix`` + g (the parent index keeps this O(children of the parent))."""
        q = self._select + " WHERE parent_id = ? AND epoch = ? AND substr(prompt_id, 1, ?) = ? ORDER BY id"
        return [_row(r) for r in self.db.execute(q, (int(parent_id), int(epoch), len(prompt_prefix), prompt_prefix))]
