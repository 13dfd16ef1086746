"""population.archive.ReadOnlyArchive, the one reader of a run's archive (reports, inspect, ablation
tables, the run browser): its whole-run reads against rows written here, the bytes of the file
untouched, a reader beside a live writer, and a clear error for a file that is not an archive."""

import sqlite3

import numpy as np
import pytest

from population.archive import Archive, ArchiveError, ReadOnlyArchive


def write(path):
    """root (epoch 0) -> a (valid), b (invalid, an edit that failed); a -> c; only root and a embedded."""
    with Archive(path) as arch:
        (root,) = arch.add_many([dict(parent_id=None, epoch=0, code="x = 1", reward=1.0, valid=True, feedback="f")])
        a, b = arch.add_many([dict(parent_id=root, epoch=1, code="x = 2", reward=2.5, valid=True, feedback="f"),
                              dict(parent_id=root, epoch=1, code="x = ", reward=0.0, valid=False, feedback="f",
                                   metrics={"edit_failed": 1.0})])
        (c,) = arch.add_many([dict(parent_id=a, epoch=2, code="x = 3", reward=3.0, valid=True, feedback="f")])
        arch.put_embeddings([root, a], np.eye(2, dtype=np.float32), ["h-root", "h-a"])
    return root, a, b, c


def test_whole_run_reads_return_what_was_written(tmp_path):
    path = tmp_path / "archive.sqlite"
    root, a, b, c = write(path)
    before = path.read_bytes()
    with ReadOnlyArchive(path) as arch:
        assert arch.scores() == [(root, None, 0, 1.0, True), (a, root, 1, 2.5, True), (b, root, 1, 0.0, False),
                                 (c, a, 2, 3.0, True)]
        ids, epochs = arch.program_epochs()
        assert ids.tolist() == [root, a] and epochs.tolist() == [0, 1]
        rows = list(arch.solutions_with_hash())
        assert [(s.id, s.code, h) for s, h in rows] == [(root, "x = 1", "h-root"), (a, "x = 2", "h-a"), (b, "x = ", None),
                                                        (c, "x = 3", None)]
        assert rows[2][0].metrics == {"edit_failed": 1.0} and rows[3][0] == arch.get(c)
        assert arch.best().id == c and [s.id for s in arch.lineage(c)] == [root, a, c]
        assert arch.population_epochs() == [] and "diversity" in arch.population_columns()
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            arch.db.execute("DELETE FROM solutions")
    assert path.read_bytes() == before


def test_a_reader_sees_a_live_writers_commits(tmp_path):
    path = tmp_path / "archive.sqlite"
    root, *_ = write(path)
    with Archive(path) as writer, ReadOnlyArchive(path) as reader:
        assert reader.count() == 4
        (d,) = writer.add_many([dict(parent_id=root, epoch=3, code="x = 4", reward=0.5, valid=True, feedback="f")])
        writer.set_population(3, [root, d])
        assert reader.scores()[-1] == (d, root, 3, 0.5, True) and reader.population_epochs() == [3]


def test_a_file_that_is_no_archive_is_one_clear_error(tmp_path):
    with pytest.raises(ArchiveError, match="no archive at"):
        ReadOnlyArchive(tmp_path / "missing.sqlite")
    notes = tmp_path / "notes.sqlite"
    notes.write_text("not a database\n" * 100)
    with pytest.raises(ArchiveError, match="not a readable SQLite archive"):
        ReadOnlyArchive(notes)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    with pytest.raises(ArchiveError, match="no 'solutions' table"):
        ReadOnlyArchive(other)
