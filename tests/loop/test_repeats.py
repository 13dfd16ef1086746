"""A child that writes a program an earlier epoch already archived: recognised (Evolution.archived,
across a resume too), counted as a repeat, and under evolution.repeats=zero neither run nor rewarded."""

import numpy as np
import pytest

from population.canonical import canonicalize
from population.child import Child
from rewards.evaluator import Evaluation
from rollout.engine_api import Completion
from tasks import load_task
from tests.helpers.evolution import make
from train.config.config import ConfigError, load_config
from train.loop.children import ChildRules, Job, evaluate_children, repeat_feedback

BIGGER = ("<answer>\n<<<<<<< SEARCH\n    centers[0] = [0.5, 0.5]\n=======\n    centers[0] = [0.5, 0.51]\n"
          ">>>>>>> REPLACE\n</answer>")


def _program(code: str, root: int, epoch: int = 1) -> Child:
    return Child(parent_id=root, epoch=epoch, prompt_id=f"e{epoch}-p0-g0", completion="<answer>", code=code,
                 reward=1.8412, valid=True, feedback="valid packing", is_program=True)


class _Recording:
    """Scores every program 1.8412 and remembers what it ran."""

    def __init__(self):
        self.ran = []

    def evaluate_many(self, codes, progress=False):
        self.ran += codes
        return [Evaluation(1.8412, True, "valid packing", {"sum_radii": 1.8412}) for _ in codes]


def _job(parent: str) -> Job:
    return Job(index=0, parent_id=1, parent_code=parent, token_ids=[1], tag=0)


def test_the_archive_recognises_a_known_program_up_to_layout_and_comments(tmp_path):
    evo = make(tmp_path)
    root = int(evo.pool["id"][0])
    starter = evo.task.initial_program
    edited = starter.replace("centers[0] = [0.5, 0.5]", "centers[0] = [0.5, 0.51]")
    assert evo.archived(starter) == root
    assert evo.archived(edited) is None
    (sid,) = evo.add_children([_program(edited, root)])
    relaid = edited.replace("centers[0] = [0.5, 0.51]", "centers[0] = [0.5,   0.51]  # moved up")
    assert evo.archived(relaid) == sid and evo.archived(edited) == sid
    # a second copy keeps the first id: the feedback names where the program was first found
    evo.add_children([_program(edited, root, epoch=2)])
    assert evo.archived(edited) == sid
    # a non-program (an edit that did not apply) is no known program
    evo.add_children([Child(parent_id=root, epoch=2, prompt_id="e2-p0-g1", completion="x", code=starter + "\n#x\n")])
    assert evo.archived(starter + "\n#x\n") == root  # the starter itself, with a comment
    assert evo.archived(starter + "\nZ = 3\n") is None


def test_a_resumed_run_still_knows_every_program_before_its_checkpoint(tmp_path):
    evo = make(tmp_path)
    root = int(evo.pool["id"][0])
    starter = evo.task.initial_program
    kept, lost = starter + "\nZ = 3\n", starter + "\nZ = 4\n"
    (sid,) = evo.add_children([_program(kept, root)])
    evo.select(1, np.random.default_rng(0))
    state = evo.state_dict() | {"archive/epoch": np.asarray(1)}
    evo.add_children([_program(lost, root, epoch=2)])  # epoch 2 never reaches a checkpoint
    evo.archive.close()
    back = make(tmp_path, resume=state)
    assert back.archived(kept) == sid and back.archived(starter) == root
    assert back.archived(lost) is None  # its row was moved aside: writing it again is new


@pytest.mark.parametrize("repeats", ["score", "zero"])
def test_a_repeat_is_counted_and_under_zero_neither_run_nor_rewarded(repeats):
    task = load_task("circle_packing_26")
    evaluator = _Recording()
    new = "<answer>\n<<<<<<< SEARCH\n    n = 26\n=======\n    n = 26\n    scale = 1.0\n>>>>>>> REPLACE\n</answer>"
    known = {}  # canonical program -> archive id, as Evolution.archived answers

    def archived(code):
        return known.get(canonicalize(code))

    parent = task.initial_program
    bigger = parent.replace("centers[0] = [0.5, 0.5]", "centers[0] = [0.5, 0.51]")
    known[canonicalize(bigger)] = 17
    outputs = [[Completion([1], BIGGER, False), Completion([1], new, False)]]
    first, second = evaluate_children(task, evaluator, [_job(parent)], outputs, epoch=4, progress=False,
                                      rules=ChildRules(archived, repeats))
    assert second.is_program and second.metrics.get("repeat") is None and second.reward == 1.8412
    assert first.code == bigger and first.metrics.get("repeat") == 1.0
    if repeats == "zero":
        assert evaluator.ran == [second.code]  # the repeat was never run
        assert not first.is_program and not first.valid and first.reward == 0.0
        assert first.feedback == repeat_feedback(17) and "solution 17" in first.feedback
        assert first.metrics == {"repeat": 1.0}
    else:  # the paper: run and rewarded like any child; only counted
        assert evaluator.ran == [bigger, second.code]
        assert first.is_program and first.valid and first.reward == 1.8412
        assert first.metrics == {"sum_radii": 1.8412, "status_ok": 1.0, "repeat": 1.0}


def test_the_repeats_setting_is_checked():
    assert load_config(None, []).evolution.repeats == "score"
    assert load_config(None, ["evolution.repeats=zero"]).evolution.repeats == "zero"
    with pytest.raises(ConfigError, match="repeats"):
        load_config(None, ["evolution.repeats=skip"])


@pytest.mark.slow
@pytest.mark.parametrize("repeats", ["score", "zero"])
def test_the_loop_counts_a_program_written_again_in_a_later_epoch(tmp_path, capsys, repeats):
    """The scripted policy writes the same two programs in every group, a harmless edit of the starter
    and one that crashes: new in epoch 1 (siblings are no repeats of each other), repeats in epoch 2."""
    from population.archive import Archive
    from tests.helpers.scripted import metrics, run_scripted

    run = run_scripted(tmp_path, "population.enabled=false", f"evolution.repeats={repeats}", "run.export=false")
    rows = metrics(run)
    assert [r["repeat_frac"] for r in rows] == [0.0, 0.5]  # 2 + 2 of 8 children per epoch
    with Archive(run / "archive.sqlite") as arch:
        harmless = [arch.get(s[0]) for s in arch.scores() if "import math" in arch.get(s[0]).code]
    first, again = [s for s in harmless if s.epoch == 1], [s for s in harmless if s.epoch == 2]
    assert len(first) == len(again) == 2 and all(s.valid and s.reward > 1.8 for s in first)
    assert all("repeat" not in s.metrics for s in first) and all(s.metrics["repeat"] == 1.0 for s in again)
    if repeats == "zero":
        assert all(s.reward == 0.0 and not s.valid and s.feedback == repeat_feedback(first[0].id) for s in again)
        assert rows[1]["valid_frac"] == 0.0  # the harmless edit was epoch 2's only valid child
    else:
        assert all(s.reward == first[0].reward and s.valid for s in again)
        assert rows[1]["valid_frac"] == 0.25
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch"))
    assert header.split()[:8] == ["epoch", "R", "mean", "R", "max", "best", "valid", "nofit"]
    assert header.split()[8:10] == ["same", "rep"]
