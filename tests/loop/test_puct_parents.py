"""population.parent_sampling: puct in train/loop/evolution.py: the lineage statistics follow the archive
as children arrive, a resumed run picks the parents and counts the visits of the uninterrupted one, and the
default (rank) draws exactly what population.sampling draws from the same generator."""

import hashlib
import typing

import numpy as np
import pytest

from population.child import Child
from population.config import PopulationConfig
from population.embedding import Embedder
from population.lineage_stats import VALUES, LineageStats
from population.sampling import PARENT_SAMPLING, sample_parents
from tests.helpers.evolution import make
from train.config.config import load_config
from train.config.schema import ConfigError

G = 3  # children per prompt
PUCT = ("population.parent_sampling=puct", "population.size=4", "trainer.prompts_per_epoch=3", f"rollout.group_size={G}")


@pytest.fixture(autouse=True)
def hashed_embedder(monkeypatch):
    """A unit vector per program from its hash: selection needs embeddings, not a language model."""
    def embed(self, codes):
        rows = [np.random.default_rng(int(hashlib.sha256(c.encode()).hexdigest()[:8], 16)).normal(size=8) for c in codes]
        rows = np.array(rows, np.float32).reshape(len(codes), 8)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)
    monkeypatch.setattr(Embedder, "embed", embed)


def epoch(evo, number: int) -> list[int]:
    """One epoch as the loop runs it: B parents, G children each (a reward that depends on the parent's
    line, one invalid child in three), archive, select. Returns the parents' ids."""
    rng = np.random.default_rng([0, number])
    parents = evo.sample_parents(rng)
    kids = []
    for j, parent in enumerate(parents):
        for g in range(G):
            sid = parent.solution.id
            reward = parent.solution.reward + (0.01 * (sid % 3) - 0.005)
            kids.append(Child(parent_id=sid, epoch=number, prompt_id=f"e{number}-p{j}-g{g}", completion="<answer>",
                              code=f"{parent.solution.code}\n# {number} {j} {g}\n", reward=reward, valid=g != 2,
                              feedback="f", is_program=True, tag=parent.tag))
    evo.add_children(kids)
    evo.select(number, rng)
    return [p.solution.id for p in parents]


def recount(evo) -> LineageStats:
    ids, parents, _, rewards, valid = zip(*evo.archive.scores())
    return LineageStats.from_rows(ids, parents, rewards, valid)


def test_visits_after_a_resume_equal_the_uninterrupted_runs(tmp_path):
    evo = make(tmp_path, *PUCT)
    picked = [epoch(evo, n) for n in (1, 2)]
    assert picked[0] == [evo.archive.scores()[0][0]] * 3  # P_0 is the starter alone: every prompt from it
    state = evo.state_dict() | {"archive/epoch": np.asarray(2)}
    assert {"lineage/parent", "lineage/visits", "lineage/total"} <= set(state)
    later = [epoch(evo, n) for n in (3, 4)]
    lineage = evo.lineage.state_dict()
    assert evo.lineage.total == evo.archive.count() - 1 == 4 * 3 * G  # every child is one visit
    for key, value in recount(evo).state_dict().items():  # incremental = recounted from the archive
        np.testing.assert_array_equal(lineage[key], value, err_msg=key)
    evo.archive.close()

    for saved in (state, {k: v for k, v in state.items() if not k.startswith("lineage/")}):  # the second: recounted
        back = make(tmp_path, *PUCT, resume=saved)
        assert [epoch(back, n) for n in (3, 4)] == later
        for key, value in back.lineage.state_dict().items():
            np.testing.assert_array_equal(lineage[key], value, err_msg=key)
        back.archive.close()


def test_a_dynamic_sampling_round_sees_the_visits_of_the_epochs_first_picks(tmp_path):
    evo = make(tmp_path, *PUCT)
    epoch(evo, 1)
    root = evo.archive.scores()[0][0]
    first = evo.sample_parents(np.random.default_rng(5))
    assert evo.lineage.pending_total == 3 * G and evo.lineage.pending[root] == 3 * G  # reserved up the line
    evo.sample_parents(np.random.default_rng(5), count=2)
    assert evo.lineage.pending_total == 5 * G
    kids = [Child(parent_id=p.solution.id, epoch=2, prompt_id=f"e2-p{j}-g0", completion="", code=f"x = {j}",
                  reward=0.0, valid=False) for j, p in enumerate(first)]
    evo.add_children(kids)
    assert evo.lineage.pending_total == 0 and evo.lineage.total == 3 * G + 3  # reserved replaced by archived


def test_rank_sampling_is_unchanged_and_keeps_no_lineage(tmp_path):
    evo = make(tmp_path, "population.size=4", "trainer.prompts_per_epoch=3", f"rollout.group_size={G}")
    for n in (1, 2):
        epoch(evo, n)
    assert evo.lineage is None and not any(k.startswith("lineage/") for k in evo.state_dict())
    ours, theirs = np.random.default_rng(8), np.random.default_rng(8)
    ids = evo.population["id"].tolist()
    parents = evo.sample_parents(ours)
    slots = sample_parents(evo.archive.rewards(ids), 3, theirs, mode="rank")
    assert [p.solution.id for p in parents] == [ids[s] for s in slots]
    assert ours.random() == theirs.random()  # the same draws, so the operator draws after them are the same


@pytest.mark.parametrize("override, fragment", [
    ("population.parent_sampling=pcut", "population.parent_sampling: 'pcut' is not one of ['rank', 'uniform', 'puct']. "
                                        "Did you mean 'puct'?"),
    ("population.puct_value=subtrees", "Did you mean 'subtree'?"),
    ("population.puct_cc=2", "unknown key 'population.puct_cc'. Did you mean 'puct_c'?"),
    ("population.puct_c=-0.5", "population.puct_c = -0.5 must be >= 0"),
])
def test_a_bad_puct_setting_names_the_nearest_valid_one(override, fragment):
    with pytest.raises(ConfigError) as err:
        load_config(None, ["task.name=circle_packing_26", override])
    assert fragment in str(err.value)


def test_the_config_offers_every_parent_sampling_mode():
    assert typing.get_args(typing.get_type_hints(PopulationConfig)["parent_sampling"]) == PARENT_SAMPLING
    assert typing.get_args(typing.get_type_hints(PopulationConfig)["puct_value"]) == VALUES
