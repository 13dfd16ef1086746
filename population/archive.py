"""The solution archive D: every program ever generated, with its lineage, in SQLite (WAL).

Why SQLite: one file, crash-safe transactions (a SIGKILL mid-write loses at most the
uncommitted batch), and indexed recursive queries for ancestors at 10^6 rows.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS solutions (
    id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES solutions(id), epoch INTEGER NOT NULL,
    code TEXT NOT NULL, reward REAL NOT NULL, valid INTEGER NOT NULL, feedback TEXT NOT NULL,
    metrics TEXT NOT NULL, eval_time_s REAL NOT NULL, prompt_id TEXT, completion TEXT,
    embedding BLOB, code_hash TEXT);
CREATE INDEX IF NOT EXISTS solutions_parent ON solutions(parent_id);
CREATE INDEX IF NOT EXISTS solutions_hash ON solutions(code_hash);
CREATE TABLE IF NOT EXISTS populations (epoch INTEGER NOT NULL, position INTEGER NOT NULL,
    solution_id INTEGER NOT NULL REFERENCES solutions(id), tag INTEGER NOT NULL DEFAULT -1,
    PRIMARY KEY (epoch, position));
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_FIELDS = ("id", "parent_id", "epoch", "code", "reward", "valid", "feedback", "metrics", "eval_time_s", "prompt_id", "completion")
_SELECT = "SELECT " + ", ".join(_FIELDS) + " FROM solutions"


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


def _row(r) -> Solution:
    return Solution(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], json.loads(r[7]), r[8], r[9], r[10])


class Archive:
    def __init__(self, path: str | Path):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(_SCHEMA)
        self.db.commit()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def add_many(self, rows: list[dict]) -> list[int]:
        """Insert a batch in one transaction: after a crash it is there entirely or not at all."""
        ids = []
        with self.db:
            for row in rows:
                cur = self.db.execute(
                    "INSERT INTO solutions (parent_id, epoch, code, reward, valid, feedback, metrics, eval_time_s, prompt_id, completion)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (row["parent_id"], row["epoch"], row["code"], float(row["reward"]), int(bool(row["valid"])), row["feedback"],
                     json.dumps(row.get("metrics", {})), float(row.get("eval_time_s", 0.0)), row.get("prompt_id"), row.get("completion")))
                ids.append(cur.lastrowid)
        return ids

    def get(self, sid: int) -> Solution:
        r = self.db.execute(_SELECT + " WHERE id = ?", (int(sid),)).fetchone()
        if r is None:
            raise KeyError(f"solution {sid} is not in the archive")
        return _row(r)

    def ancestors(self, sid: int, n: int) -> list[Solution]:
        """Parent first, then grandparent, ... at most n (one recursive query)."""
        if n <= 0:
            return []
        rows = self.db.execute(
            "WITH RECURSIVE up(id, depth) AS (SELECT parent_id, 1 FROM solutions WHERE id = ? "
            "UNION ALL SELECT s.parent_id, up.depth + 1 FROM solutions s JOIN up ON s.id = up.id WHERE up.depth < ?) "
            f"SELECT {', '.join('s.' + f for f in _FIELDS)} FROM up JOIN solutions s ON s.id = up.id ORDER BY up.depth",
            (int(sid), n)).fetchall()
        return [_row(r) for r in rows]

    def lineage(self, sid: int) -> list[Solution]:
        """Root ... sid."""
        return list(reversed(self.ancestors(sid, 1 << 30))) + [self.get(sid)]

    def children(self, sid: int) -> list[Solution]:
        return [_row(r) for r in self.db.execute(_SELECT + " WHERE parent_id = ? ORDER BY id", (int(sid),))]

    def count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM solutions").fetchone()[0]

    def best(self) -> Solution | None:
        r = self.db.execute(_SELECT + " WHERE valid = 1 ORDER BY reward DESC, id ASC LIMIT 1").fetchone()
        return _row(r) if r else None

    def all_ids(self) -> np.ndarray:
        return np.array([r[0] for r in self.db.execute("SELECT id FROM solutions ORDER BY id")], dtype=np.int64)

    def rewards(self, ids) -> np.ndarray:
        lookup = dict(self.db.execute("SELECT id, reward FROM solutions"))
        return np.array([lookup[int(i)] for i in ids], dtype=np.float64)

    def set_population(self, epoch: int, ids: list[int], tags: list[int] | None = None) -> None:
        """P_epoch as ordered slots; ``tags`` label each slot (the island, for the islands strategy)."""
        tags = [-1] * len(ids) if tags is None else list(tags)
        with self.db:
            self.db.execute("DELETE FROM populations WHERE epoch = ?", (epoch,))
            self.db.executemany("INSERT INTO populations VALUES (?,?,?,?)",
                                [(epoch, k, int(i), int(t)) for k, (i, t) in enumerate(zip(ids, tags))])

    def population_tags(self, epoch: int) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT tag FROM populations WHERE epoch = ? ORDER BY position", (epoch,))]

    def get_population(self, epoch: int | None = None) -> tuple[int, list[int]]:
        if epoch is None:
            r = self.db.execute("SELECT MAX(epoch) FROM populations").fetchone()
            if r[0] is None:
                return -1, []
            epoch = r[0]
        ids = [r[0] for r in self.db.execute("SELECT solution_id FROM populations WHERE epoch = ? ORDER BY position", (epoch,))]
        return epoch, ids

    def put_embeddings(self, ids, emb: np.ndarray, hashes: list[str] | None = None) -> None:
        emb = np.ascontiguousarray(emb, dtype=np.float32)
        hashes = hashes or [None] * len(emb)
        with self.db:
            self.db.executemany("UPDATE solutions SET embedding = ?, code_hash = ? WHERE id = ?",
                                [(e.tobytes(), h, int(i)) for i, e, h in zip(ids, emb, hashes)])

    def get_embeddings(self, ids) -> np.ndarray:
        out = []
        for i in ids:
            r = self.db.execute("SELECT embedding FROM solutions WHERE id = ?", (int(i),)).fetchone()
            if r is None or r[0] is None:
                raise KeyError(f"solution {i} has no stored embedding")
            out.append(np.frombuffer(r[0], dtype=np.float32))
        return np.stack(out) if out else np.zeros((0, 0), dtype=np.float32)

    def program_ids(self, max_epoch: int | None = None) -> np.ndarray:
        """Ids of the solutions that are programs (they have an embedding), up to an epoch."""
        bound = (1 << 62) if max_epoch is None else max_epoch
        rows = self.db.execute("SELECT id FROM solutions WHERE embedding IS NOT NULL AND epoch <= ? ORDER BY id", (bound,))
        return np.array([r[0] for r in rows], dtype=np.int64)

    def top(self, k: int) -> list[Solution]:
        return [_row(r) for r in self.db.execute(_SELECT + " ORDER BY reward DESC, id ASC LIMIT ?", (k,))]

    def cached_embedding(self, code_hash: str) -> np.ndarray | None:
        r = self.db.execute("SELECT embedding FROM solutions WHERE code_hash = ? AND embedding IS NOT NULL LIMIT 1", (code_hash,)).fetchone()
        return None if r is None else np.frombuffer(r[0], dtype=np.float32).copy()

    def set_meta(self, key: str, value: str) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def get_meta(self, key: str) -> str | None:
        r = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if r is None else r[0]
