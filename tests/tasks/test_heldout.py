"""Held-out evaluation (issue 53, item 5): task.yaml ``heldout`` validated strictly, the bin-packing tasks'
held-out instances regenerated from their documented seeds, and the best program scored on them through the
same trusted driver in the sandbox. Evolved online heuristics are known not to generalise beyond their
instances (Sim, Renau, Hart, arXiv 2501.11411), so the run reports both figures."""

import numpy as np
import pytest

from rewards import Evaluator
from tasks import load_task
from tasks.families.bin_packing.data import HELDOUT_FILE, generate, read
from tasks.families.bin_packing.verify import l2_bound
from tests.helpers.task_copies import copy_task, load_error
from tests.tasks.test_task_bin_packing import best_fit

TASKS = ("bin_packing_or", "bin_packing_weibull")


@pytest.mark.parametrize("name", TASKS)
def test_heldout_instances_regenerate_from_their_seeds_and_share_none_with_the_run(name):
    task = load_task(name)
    fresh = generate(name, heldout=True)
    with np.load(task.folder / HELDOUT_FILE, allow_pickle=False) as shipped:
        assert sorted(shipped.files) == sorted(fresh)
        for key in fresh:
            np.testing.assert_array_equal(shipped[key], fresh[key])
    _, run_sets = read(task.folder / "data.npz")
    capacity, held = read(task.folder / HELDOUT_FILE)
    assert list(held) == list(run_sets)  # the same data sets, so the score means the same thing
    for name_, instances in held.items():
        assert [len(a) for a in instances] == [len(a) for a in run_sets[name_]][:len(instances)]
        seen = {a.tobytes() for a in run_sets[name_]}
        assert not any(a.tobytes() in seen for a in instances)
    assert task.heldout is not None and "seed" in task.heldout.about
    assert task.data_files == () and HELDOUT_FILE not in {p.name for p in task.data_files}  # never in the sandbox


def test_the_held_out_task_scores_on_the_held_out_instances_only():
    task = load_task("bin_packing_or")
    held = task.held_out()
    assert held.heldout is None and held.driver is task.heldout.driver and held.name == task.name
    capacity, sets = read(task.folder / HELDOUT_FILE)
    packing = {name: [best_fit(inst, capacity) for inst in insts] for name, insts in sets.items()}
    excess = [(sum(len(set(p)) for p in packing[n]) - sum(l2_bound(i, capacity) for i in insts))
              / sum(l2_bound(i, capacity) for i in insts) for n, insts in sets.items()]
    verdict = held.verify(packing)
    assert verdict.valid and verdict.reward == pytest.approx(100 / (1 + np.mean(excess)), rel=1e-12)
    assert not task.verify(packing).valid  # the run's verifier knows other instances (OR1 has a sixth)
    with pytest.raises(ValueError, match="task circle_packing_26 has no held-out evaluation"):
        load_task("circle_packing_26").held_out()


def test_the_starter_runs_on_the_held_out_instances_in_the_sandbox():
    """Best fit (the starter) through the sandbox and the held-out driver: what best fit scores there by hand."""
    task = load_task("bin_packing_or")
    capacity, sets = read(task.folder / HELDOUT_FILE)
    packing = {name: [best_fit(inst, capacity) for inst in insts] for name, insts in sets.items()}
    result = Evaluator(task.held_out(), workers=1, timeout_s=60).evaluate(task.initial_program)
    assert result.valid, result.feedback
    assert result.reward == pytest.approx(task.held_out().verify(packing).reward, rel=1e-12)
    assert result.reward != pytest.approx(Evaluator(task, workers=1, timeout_s=60).evaluate(task.initial_program).reward)


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    return copy_task(load_task("bin_packing_or"), "bin_packing", tmp_path, monkeypatch)


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("  driver: HELDOUT_DRIVER", "  drivr: HELDOUT_DRIVER"), ["heldout: unknown key 'drivr'", "'driver'"]),
    (lambda t: t.replace("  verify: verify_heldout", "  verify: verify heldout"), ["heldout: 'verify' must be a Python identifier"]),
    (lambda t: t.replace("  verify: verify_heldout", ""), ["heldout: missing key 'verify'"]),
    (lambda t: t.replace("  about: \"20 fresh", "  about: \"fresh\"\n  #"), ["'about' must be a sentence (5 words or more)"]),
    (lambda t: t[:t.index("heldout:")] + "heldout: [HELDOUT_DRIVER, verify_heldout]\n", ["'heldout' must be a mapping"]),
    (lambda t: t.replace("  verify: verify_heldout", "  verify: score_heldout"),
     ["does not define the callable score_heldout named as heldout 'verify'"]),
    (lambda t: t.replace("driver: DRIVER", ""), ["heldout: a held-out evaluation drives the harness", "needs 'driver'"]),
])
def test_heldout_is_validated_strictly(folder, edit, words):
    error = load_error(folder, edit)
    for word in words:
        assert word in error, error
