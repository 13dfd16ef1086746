"""The search form in the loop (docs/search_form.md): each valid child's construction is archived (a column old
archives gain, moved aside whole by a resume's rewind), a child is handed its first parent's construction (an invalid
parent's nearest valid ancestor's) with a seed of its own, and the iterate baseline reruns the parent's program
unchanged with no model; it is refused on a construct-form task. The task is tests/helpers/search_task.py's, whose
starter is deterministic, so what each child returned can be recomputed here from what it was handed."""

import json
import sqlite3

import numpy as np
import pytest

from population.archive import Archive, ReadOnlyArchive
from rewards.evaluator import Evaluation
from rollout.engine_api import Completion
from tasks import load_task
from tests.helpers import search_task
from train.config.config import ConfigError, check_form, load_config
from train.loop.children import ChildRules, Job, child_seed, evaluate_children

GIVEN = '{"x":[0.3,0.5,0.5,0.5,0.5,0.5,0.5,0.5]}'


def row(parent=None, valid=True, construction=None, **kw):
    return dict(parent_id=parent, epoch=0 if parent is None else 1, code="c", reward=1.0 if valid else 0.0, valid=valid,
                feedback="fb", construction=construction, **kw)


def test_a_child_is_handed_its_parents_construction_or_its_nearest_valid_ancestors(tmp_path):
    with Archive(tmp_path / "a.sqlite") as arch:
        (root,) = arch.add_many([row(construction='{"x":[0.1]}')])
        (bad,) = arch.add_many([row(root, valid=False)])
        (worse,) = arch.add_many([row(bad, valid=False)])  # selection.include_invalid may pick it
        (good,) = arch.add_many([row(worse, construction='{"x":[0.2]}')])
        assert arch.construction_for(root) == (root, '{"x":[0.1]}')
        assert arch.construction_for(worse) == (root, '{"x":[0.1]}') == arch.construction_for(bad)
        assert arch.construction_for(good) == (good, '{"x":[0.2]}')
        (orphan,) = arch.add_many([row(valid=False)])  # a run whose starter was invalid: its children start afresh
        assert arch.construction_for(orphan) is None
        with pytest.raises(KeyError):
            arch.construction_for(999)
        with pytest.raises(ValueError, match="an invalid child has no construction"):
            arch.add_many([row(root, valid=False, construction="[1]")])


def test_an_older_archive_gains_the_column_and_a_rewind_moves_constructions_aside_whole(tmp_path):
    path = tmp_path / "a.sqlite"
    with Archive(path) as arch:
        ids = arch.add_many([row(construction=GIVEN), row()])
    db = sqlite3.connect(path)  # as an archive from before the search form
    for table in ("solutions", "discarded_solutions"):
        db.execute(f"ALTER TABLE {table} DROP COLUMN construction")
    db.commit()
    db.close()
    with ReadOnlyArchive(path) as arch:  # read as it is: no construction anywhere, the child starts afresh
        assert arch.construction_for(ids[0]) is None
    with Archive(path) as arch:  # a writer migrates: old rows have none, new rows keep theirs
        (new,) = arch.add_many([row(ids[0], construction='{"x":[0.5]}')])
        assert arch.construction_for(ids[0]) is None and arch.construction_for(new) == (new, '{"x":[0.5]}')
        assert arch.rewind(ids[1], 0) == 1
        moved = arch.db.execute("SELECT construction FROM discarded_solutions").fetchall()
        assert moved == [('{"x":[0.5]}',)]
        cols = {t: [r[1] for r in arch.db.execute(f"PRAGMA table_info({t})")] for t in ("solutions", "discarded_solutions")}
        assert cols["solutions"] == cols["discarded_solutions"] and cols["solutions"][-1] == "construction"


def test_the_seed_of_a_child_is_fresh_for_every_child_and_the_same_on_a_resume():
    seeds = {(e, p, g): child_seed(7, e, p, g) for e in range(4) for p in range(4) for g in range(4)}
    assert len(set(seeds.values())) == len(seeds) and child_seed(7, 1, 2, 3) == seeds[(1, 2, 3)]
    assert child_seed(8, 1, 2, 3) != seeds[(1, 2, 3)] and all(0 <= s < 2**32 for s in seeds.values())
    assert child_seed(7, 1, 2, 3) == int(np.random.SeedSequence([7, 1, 2, 3]).generate_state(1)[0])


class _Recording:
    """Answers as the sandbox would for the fixture's starter, by running it here (our own code), and records
    what each program was called with."""

    def __init__(self):
        self.calls = []

    def evaluate_many(self, codes, progress=False, constructions=None, seeds=None):
        out = []
        for code, given, seed in zip(codes, constructions, seeds):
            self.calls.append((code, given, seed))
            space: dict = {}
            exec(compile(code, "program", "exec"), space)
            value = space["improve"](given, 60.0, seed)
            out.append(Evaluation(search_task.score(value["x"]), True, "fb", {}, 0.1, "ok",
                                  construction=json.dumps(value, separators=(",", ":"))))
        return out


EDIT = "<answer>\n<<<<<<< SEARCH\nSTEPS = 40\n=======\nSTEPS = 41\n>>>>>>> REPLACE\n</answer>"
NO_OP = "<answer>\n<<<<<<< SEARCH\nSTEPS = 40\n=======\nSTEPS = 40  # the same\n>>>>>>> REPLACE\n</answer>"


def test_children_get_their_jobs_construction_and_seeds_and_iterate_reruns_the_parent(tmp_path, monkeypatch):
    search_task.install(tmp_path, monkeypatch)
    task = load_task(search_task.NAME)
    evaluator = _Recording()
    parent = task.initial_program
    jobs = [Job(0, 11, parent, [1], construction=GIVEN), Job(1, 12, parent, [], operator="iterate"),
            Job(2, 13, parent, [], operator="iterate", construction=GIVEN)]
    outputs = [[Completion([1], EDIT, False), Completion([1], NO_OP, False)], [Completion([], "", False)] * 2,
               [Completion([], "", False)] * 2]
    children = evaluate_children(task, evaluator, jobs, outputs, epoch=3, progress=False, rules=ChildRules(run_seed=5))
    edited, unchanged, *reruns = children
    assert unchanged.metrics == {"unchanged": 1.0} and not unchanged.is_program  # an LLM's no-op is never run
    assert [c.code for c in reruns] == [parent] * 4 and all(c.is_program and c.operator == "iterate" for c in reruns)
    assert edited.code == parent.replace("STEPS = 40", "STEPS = 41")
    seeds = [child_seed(5, 3, 0, 0), child_seed(5, 3, 1, 0), child_seed(5, 3, 1, 1), child_seed(5, 3, 2, 0),
             child_seed(5, 3, 2, 1)]
    given = json.loads(GIVEN)
    assert evaluator.calls == [(edited.code, given, seeds[0]), (parent, None, seeds[1]), (parent, None, seeds[2]),
                               (parent, given, seeds[3]), (parent, given, seeds[4])]
    for child, (_, handed, seed) in zip([edited, *reruns], evaluator.calls):
        expected = search_task.replay(handed, seed) if child.code == parent else None
        if expected is not None:
            assert json.loads(child.construction) == expected and child.reward == search_task.score(expected["x"])
    assert reruns[2].construction != reruns[3].construction  # same program, same construction, a fresh seed each


class _ReturnsItsInput:
    """Every program hands back the construction it was given: its search found nothing better."""

    def evaluate_many(self, codes, progress=False, constructions=None, seeds=None):
        return [Evaluation(2.6359830849, True, "fb", {"same_construction": 1.0}, 0.1, "ok", construction=GIVEN)
                for _ in codes]


@pytest.mark.parametrize("no_gain", ["pool", "archive"])
def test_a_changed_program_that_returns_its_input_joins_the_pool_only_under_no_gain_pool(tmp_path, monkeypatch,
                                                                                         no_gain):
    search_task.install(tmp_path, monkeypatch)
    task = load_task(search_task.NAME)
    parent = task.initial_program
    jobs = [Job(0, 11, parent, [1], construction=GIVEN), Job(1, 12, parent, [], operator="iterate", construction=GIVEN)]
    outputs = [[Completion([1], EDIT, False)], [Completion([], "", False)]]
    edited, rerun = evaluate_children(task, _ReturnsItsInput(), jobs, outputs, epoch=3, progress=False,
                                      rules=ChildRules(no_gain=no_gain))
    for child in (edited, rerun):  # scored either way: its input's score, valid, its construction archived
        assert child.valid and child.reward == 2.6359830849 and child.construction == GIVEN
        assert child.metrics["same_construction"] == 1.0
    assert edited.is_program == (no_gain == "pool")
    assert rerun.is_program  # a rerun is its parent's program by design: it always joins


def test_iterate_is_its_own_run_without_training_and_needs_a_search_form_task(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"iterate reruns the parent's program without the policy, so it is the only "
                                          r"operator of a run"):
        load_config(None, ["evolution.operators={iterate: 1, edit: 1}", "trainer.enabled=false"])
    with pytest.raises(ConfigError, match="trains nothing .* set trainer.enabled=false"):
        load_config(None, ["evolution.operators={iterate: 1}"])
    cfg = load_config(None, ["evolution.operators={iterate: 1}", "trainer.enabled=false"])  # circle_packing_26
    with pytest.raises(ConfigError) as info:
        check_form(cfg)
    assert str(info.value) == ("evolution.operators = {'iterate': 1.0} (the iterate baseline) reruns each parent's program "
                               "on the parent's construction, but circle_packing_26 is a construct-form task (its program "
                               "takes no construction, so a rerun builds the same answer); run it on a search-form task "
                               "(task.yaml form: search, docs/search_form.md)")
    check_form(load_config(None, ["trainer.enabled=false"]))  # construct-form tasks run every other mix as before
    search_task.install(tmp_path, monkeypatch)
    check_form(load_config(None, ["evolution.operators={iterate: 1}", "trainer.enabled=false",
                                  f"task.name={search_task.NAME}"]))  # no error


def test_a_run_refuses_iterate_on_a_construct_form_task_before_anything_loads():
    """HelixRun.preflight, the entry point's first step (train/helix.py): the same one line as check_form, before
    a model, the engine's preflight, or a run directory (rollout.engine=openai would ask a server first)."""
    from train.learner.distributed import DistInfo
    from train.loop.epoch_loop import HelixRun

    cfg = load_config(None, ["evolution.operators={iterate: 1}", "trainer.enabled=false", "rollout.engine=openai",
                             "rollout.openai.base_url=http://127.0.0.1:9/v1"])
    with pytest.raises(ConfigError, match=r"^evolution.operators = \{'iterate': 1.0\} \(the iterate baseline\)"):
        HelixRun.preflight(cfg, DistInfo())


@pytest.mark.slow  # a whole run in this process (12-20 s alone, mostly imports)
def test_an_iterate_run_loads_no_model_and_each_child_continues_its_parents_construction(tmp_path, monkeypatch):
    import train.loop.epoch_loop as epoch_loop
    from tests.helpers.scripted import run_helix

    def no_model(*args, **kwargs):
        raise AssertionError("the iterate baseline loaded a model or a tokenizer")

    monkeypatch.setattr(epoch_loop, "load_policy", no_model)
    monkeypatch.setattr(epoch_loop, "load_tokenizer", no_model)
    search_task.install(tmp_path, monkeypatch)
    run = run_helix(tmp_path, f"task.name={search_task.NAME}", "evolution.operators={iterate: 1}", "trainer.enabled=false",
                    "task.timeout_s=20", "model.policy=no-such-model", "warm_start.enabled=true")
    with ReadOnlyArchive(run / "archive.sqlite") as arch:
        rows = arch.db.execute("SELECT id, parent_id, epoch, prompt_id, code, reward, valid, construction, operator "
                               "FROM solutions ORDER BY id").fetchall()
    root = rows[0]
    assert root[2] == 0 and json.loads(root[7]) == search_task.replay(None, child_seed(0, 0, 0, 0))
    children = rows[1:]
    assert len(children) == 2 * 2 * 2 and all(c[8] == "iterate" and c[4] == root[4] and c[6] for c in children)
    constructions = {r[0]: json.loads(r[7]) for r in rows}
    for sid, parent, epoch, prompt_id, _, reward, _, construction, _ in children:
        p, g = (int(part[1:]) for part in prompt_id.split("-")[1:])
        expected = search_task.replay(constructions[parent], child_seed(0, epoch, p, g))
        assert json.loads(construction) == expected and reward == search_task.score(expected["x"])
    assert any(c[1] != root[0] for c in children if c[2] == 2)  # epoch 2 continued from an epoch-1 child
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["completion_len_mean"] for m in metrics] == [0.0, 0.0] and "same_construction_frac" in metrics[0]
    assert "op_iterate_children" in metrics[0] and not (run / "export").exists()


def _rows(run):
    with ReadOnlyArchive(run / "archive.sqlite") as arch:
        rows = arch.db.execute("SELECT id, parent_id, epoch, prompt_id, code, reward, valid, construction, operator "
                               "FROM solutions ORDER BY id").fetchall()
        pops = arch.db.execute("SELECT epoch, position, solution_id FROM populations ORDER BY epoch, position").fetchall()
        handed = {r[0]: arch.construction_for(r[0]) for r in rows}
    return rows, pops, handed


@pytest.mark.slow  # three short runs in this process (a few seconds each once torch is imported; 60 s alone)
def test_a_resumed_search_run_hands_on_the_same_constructions_as_one_that_never_stopped(tmp_path, monkeypatch):
    from tests.helpers.scripted import run_helix
    from train.helix import main

    search_task.install(tmp_path, monkeypatch)
    iterate = [f"task.name={search_task.NAME}", "evolution.operators={iterate: 1}", "trainer.enabled=false",
               "task.timeout_s=20"]
    whole = run_helix(tmp_path / "whole", *iterate)  # two epochs
    cut = run_helix(tmp_path / "cut", *iterate, "trainer.epochs=1")
    assert main(["--resume", str(cut), "trainer.epochs=2"]) == 0
    assert _rows(whole)[:2] == _rows(cut)[:2] and len(_rows(cut)[0]) == 1 + 2 * 2 * 2


def _scripted_search():
    """An engine answering every prompt with the same four completions for the fixture's starter: a real edit
    (STEPS 40 -> 41), a no-op, a crash, and prose (tests.helpers.scripted.ScriptedEngine on these texts)."""
    from rollout.engines import HFEngine
    from tests.helpers.scripted import ScriptedEngine

    class ScriptedSearch(ScriptedEngine):
        def __init__(self, model, tokenizer, batch_size=0, progress=False):
            HFEngine.__init__(self, model, tokenizer, batch_size, progress)  # not ScriptedEngine's: no circle texts
            self.texts = [EDIT, NO_OP, "<answer>\n<<<<<<< SEARCH\n    rng = np.random.default_rng(seed)\n=======\n"
                          "    raise RuntimeError('boom')\n>>>>>>> REPLACE\n</answer>", "Make the numbers closer to 1/2."]

    return ScriptedSearch


@pytest.mark.slow  # a run with a (tiny) policy in this process (55 s alone, mostly imports)
def test_llm_children_run_on_their_parents_construction_and_unchanged_ones_do_not_run(tmp_path, monkeypatch):
    from rollout.engines import ENGINES
    from tests.helpers.scripted import run_helix

    search_task.install(tmp_path, monkeypatch)
    ENGINES["scripted_search"] = _scripted_search()
    try:
        run = run_helix(tmp_path, f"task.name={search_task.NAME}", "rollout.engine=scripted_search",
                        "rollout.group_size=4", "task.timeout_s=20", "trainer.enabled=false")  # no GRPO: not its concern
    finally:
        del ENGINES["scripted_search"]
    rows, _, handed = _rows(run)
    ran = 0
    for sid, parent, epoch, prompt_id, code, reward, valid, construction, operator in rows[1:]:
        p, g = (int(part[1:]) for part in prompt_id.split("-")[1:])
        if construction is None:  # no new program (the no-op, the prose, an edit that did not fit), or invalid
            assert not valid and handed[sid] == handed[parent]  # its children start where its own did
            continue
        space: dict = {}  # run here on what its parent hands on, with its own seed: the same construction
        exec(compile(code, "program", "exec"), space)
        given = None if handed[parent] is None else json.loads(handed[parent][1])
        expected = space["improve"](given, 60.0, child_seed(0, epoch, p, g))
        assert json.loads(construction) == expected and reward == search_task.score(expected["x"]) and valid
        ran += 1
    assert ran >= 2
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert sum(m["unchanged_frac"] for m in metrics) > 0 and all("same_construction_frac" in m for m in metrics)


@pytest.mark.slow  # about 30 sandbox runs (5-10 s)
def test_the_warm_start_runs_a_search_tasks_mutants_as_first_calls_with_the_checks_budget(tmp_path, monkeypatch, tokenizer):
    """A mutant only needs to run and come back valid: while the warm start makes its data, the run's own
    evaluator (lent to it) tells a search the task check's budget, not a whole search's, and has its own back after."""
    from rewards.search_channel import CHECK_BUDGET_S, search_budget
    from train.config.config import warm_start_inputs
    from train.loop import task_tools
    from train.warm_start.build import make_examples

    search_task.install(tmp_path, monkeypatch)
    budgets, calls = [], []

    class Spy(task_tools.Evaluator):
        def evaluate(self, code, construction=None, seed=None):
            budgets.append(self.budget_s)
            calls.append((construction, seed))
            return super().evaluate(code, construction, seed)

    monkeypatch.setattr(task_tools, "Evaluator", Spy)
    cfg = load_config(None, [
        f"task.name={search_task.NAME}", "model.policy=tiny-random", "warm_start.enabled=true", "warm_start.parents=2",
        "warm_start.answers_per_parent=2", "rollout.description=full", "task.eval_workers=2", "trainer.enabled=false"])
    run_tools = task_tools.task_tools(cfg, load_task(search_task.NAME), tokenizer)
    try:
        examples, stats = make_examples(warm_start_inputs(cfg), task_tools.tools_for(cfg, tokenizer, run_tools),
                                        np.random.default_rng(0), say=lambda _: None)
        assert run_tools.evaluator.budget_s == search_budget(run_tools.evaluator.timeout_s) > CHECK_BUDGET_S
    finally:
        run_tools.close()
    assert set(budgets) == {CHECK_BUDGET_S} and len(calls) > 5 and set(calls) == {(None, None)}
    assert examples and stats["valid"] > 0 and all("<<<<<<< SEARCH" in e.answer for e in examples)
