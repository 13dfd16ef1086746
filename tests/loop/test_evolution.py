"""train/loop/evolution.py: which children join the selection pool (its structured rows, the kNN index),
what selection may choose, and a checkpoint round trip that selects exactly as before."""

import numpy as np
import pytest

from population.child import Child
from tests.helpers.evolution import STARTER, make
from train.loop.evolution import POOL


def child(code, reward, valid, is_program, tag, root):
    return Child(parent_id=root, epoch=1, prompt_id="e1-p0-g0", completion="<answer>", code=code, reward=reward,
                 valid=valid, feedback="f", is_program=is_program, tag=tag)


def children(root, starter_code):
    return [child(starter_code.replace("0.1", "0.11"), 1.8414, True, True, 3, root),  # a program
            child(starter_code, STARTER, True, False, 3, root),  # a no-op edit: archived only
            child(starter_code, 0.0, False, False, 4, root),  # an edit that did not apply
            child(starter_code + "\nraise SystemExit\n", 0.0, False, True, 4, root),  # a program that fails
            child(starter_code.replace("0.1", "0.12"), 1.8452, True, True, 4, root)]


def test_only_programs_join_the_pool_and_the_index(tmp_path):
    evo = make(tmp_path)
    root = int(evo.pool["id"][0])
    assert evo.pool.tolist() == [(root, STARTER, True, -1)] and evo.population.tolist() == [(root, -1)]
    ids = evo.add_children(children(root, evo.task.initial_program))
    assert len(ids) == 5 and evo.archive.count() == 6  # every child archived, with its lineage
    expected = np.array([(root, STARTER, True, -1), (ids[0], 1.8414, True, 3), (ids[3], 0.0, False, 4),
                         (ids[4], 1.8452, True, 4)], POOL)
    assert evo.pool.dtype == POOL and evo.pool.tolist() == expected.tolist()
    assert len(evo.index) == 4  # pool row i is kNN row i


def test_selection_never_picks_an_invalid_program_and_records_the_population(tmp_path):
    evo = make(tmp_path)
    root = int(evo.pool["id"][0])
    ids = evo.add_children(children(root, evo.task.initial_program))
    for seed in range(5):
        diversity, chosen = evo.select(1, np.random.default_rng(seed))
        assert len(diversity) == 4 and len(chosen) == 2
        assert ids[3] not in evo.population["id"].tolist()  # the failing program
        assert set(evo.population["id"].tolist()) <= {root, ids[0], ids[4]}
    assert evo.archive.get_population(1) == (1, evo.population["id"].tolist())
    tags = evo.archive.db.execute("SELECT tag FROM populations WHERE epoch = 1 ORDER BY position").fetchall()
    assert [t for (t,) in tags] == evo.population["tag"].tolist()
    evo_all = make(tmp_path / "b", "selection.include_invalid=true")
    root = int(evo_all.pool["id"][0])
    evo_all.add_children(children(root, evo_all.task.initial_program))
    _, chosen = evo_all.select(1, np.random.default_rng(0))
    assert chosen.max() < 4 and len(chosen) == 2


def test_without_a_population_every_prompt_starts_from_the_starter(tmp_path):
    evo = make(tmp_path, "population.enabled=false")
    root = int(evo.pool["id"][0])
    evo.add_children(children(root, evo.task.initial_program))
    evo.select(1, np.random.default_rng(0))
    assert evo.population.tolist() == [(root, -1)]
    parents = evo.sample_parents(np.random.default_rng(0))
    assert [p.solution.id for p in parents] == [root] * evo.cfg.trainer.prompts_per_epoch


def test_a_checkpointed_state_resumes_to_the_same_selection(tmp_path):
    evo = make(tmp_path)
    root = int(evo.pool["id"][0])
    evo.add_children(children(root, evo.task.initial_program))
    evo.select(1, np.random.default_rng(7))
    state = evo.state_dict() | {"archive/epoch": np.asarray(1)}
    pool, population, diversity = evo.pool.tolist(), evo.population.tolist(), evo.index.diversity()
    # the run goes on one more epoch (a child and a selection), then dies; resume rewinds to the checkpoint
    evo.add_children(children(int(evo.pool["id"][0]), evo.task.initial_program)[:1])
    evo.select(2, np.random.default_rng(3))
    evo.archive.close()

    back = make(tmp_path, resume=state)
    assert back.pool.tolist() == pool and back.population.tolist() == population
    assert back.archive.count() == 6 and back.archive.get_population() == (1, [row[0] for row in population])
    np.testing.assert_array_equal(back.index.diversity(), diversity)
    again = make(tmp_path / "again")  # the same run, uninterrupted
    again.add_children(children(int(again.pool["id"][0]), again.task.initial_program))
    again.select(1, np.random.default_rng(7))
    np.testing.assert_array_equal(back.select(2, np.random.default_rng(11))[1], again.select(2, np.random.default_rng(11))[1])


def test_a_second_run_in_the_same_archive_is_refused(tmp_path):
    make(tmp_path).archive.close()
    with pytest.raises(RuntimeError, match="already holds a run"):
        make(tmp_path)
