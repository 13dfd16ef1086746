"""The whole HELIX loop end to end, on a tiny random policy (fast enough for CI)."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import yaml

from rollout.engines import ENGINES
from tests.helpers.scripted import QUICK, TINY, ScriptedEngine, metrics, run_helix, run_scripted
from train.helix import main

ROOT = Path(__file__).resolve().parents[2]
@pytest.mark.slow
def test_quickstart_loop_writes_a_complete_run_directory(tmp_path):
    from transformers import AutoModelForCausalLM

    from population.archive import Archive

    run = run_helix(tmp_path)
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert resolved["model"]["policy"] == "tiny-random" and resolved["trainer"]["epochs"] == 2
    rows = metrics(run)
    assert [r["epoch"] for r in rows] == [1, 2]
    for key in ("reward_mean", "reward_max", "best_reward", "valid_frac", "diversity_mean", "kl", "loss", "gen_tokens_per_s"):
        assert all(r[key] is not None for r in rows), key
    with Archive(run / "archive.sqlite") as arch:
        assert arch.count() == 1 + 2 * 2 * 2  # the seed + epochs * B * G children
        root = arch.get(arch.scores()[0][0])
        assert root.parent_id is None and root.valid and root.reward > 0
        for sid, *_ in arch.scores()[1:]:
            child = arch.get(int(sid))
            assert child.parent_id is not None and child.epoch in (1, 2) and child.feedback
        assert arch.get_population()[0] == 2
    assert (run / "best_program.py").read_text().startswith("# HELIX best program")
    for r in rows:  # the logged metric set is consistent with itself
        shares = [v for k, v in r.items() if k.startswith("share_")]
        assert len(shares) >= 5 and all(0 <= v <= 1 for v in shares) and sum(shares) <= 1 + 1e-9
        assert 1 <= r["pareto_front_size"] <= r["pool_size"] and r["archive_size"] == 1 + 4 * r["epoch"]
        assert 0 <= r["diversity_p10"] <= r["diversity_p50"] <= r["diversity_p90"] <= 2
        assert r["evals_per_s"] == pytest.approx(r["n_programs"] / (r["eval_busy_s"] or r["eval_time_s"]))
        assert 0 <= r["zero_std_frac"] <= 1 and r["clip_frac"] == 0.0
    offline = list((run / "wandb").glob("offline-run-*"))  # wandb is offline by default: files, no network
    assert len(offline) == 1 and list(offline[0].glob("*.wandb"))
    model = AutoModelForCausalLM.from_pretrained(run / "export")
    assert model.config.num_hidden_layers == 2
    assert (run / "export" / "tokenizer.json").is_file() and (run / "export" / "generation_config.json").is_file()


class OverlappingScriptedEngine(ScriptedEngine):
    """The scripted answers one prompt at a time, handed over as each is done. Before the second
    prompt it waits (up to 30 s) for the evaluator to start on the first: the overlap, observed."""

    evaluating = threading.Event()
    overlapped: list = []

    def generate(self, prompts, params, on_batch=None):
        out = []
        for i, prompt in enumerate(prompts):
            if i:
                OverlappingScriptedEngine.overlapped.append(self.evaluating.wait(30))
            group = super().generate([prompt], params)
            if on_batch is not None:
                on_batch(i, group)
            out += group
        return out


@pytest.mark.slow
@pytest.mark.parametrize("overlap", [False, True], ids=["after-generation", "overlapped"])
def test_children_are_evaluated_and_kept_with_lineage(tmp_path, overlap, monkeypatch):
    """Also with rollout.batch_size=1: the first prompt's children are evaluated while the second
    prompt generates, and the archive ends up the same, in the same order."""
    import train.loop.children
    from population.archive import Archive

    extra = []
    ENGINES["scripted"] = ScriptedEngine
    if overlap:
        ENGINES["scripted"] = OverlappingScriptedEngine
        OverlappingScriptedEngine.evaluating.clear()
        OverlappingScriptedEngine.overlapped.clear()
        evaluate = train.loop.children.evaluate_children

        def noted(*args, **kwargs):
            OverlappingScriptedEngine.evaluating.set()
            return evaluate(*args, **kwargs)

        monkeypatch.setattr(train.loop.children, "evaluate_children", noted)
        extra = ["rollout.batch_size=1"]
    try:
        run = run_helix(tmp_path, "rollout.engine=scripted", "rollout.group_size=4", "trainer.epochs=1", *extra)
    finally:
        del ENGINES["scripted"]
    if overlap:
        assert OverlappingScriptedEngine.overlapped == [True]
    with Archive(run / "archive.sqlite") as arch:
        ids = [s[0] for s in arch.scores()]
        root = arch.get(ids[0])
        children = [arch.get(i) for i in ids[1:]]
    assert len(children) == 8
    for k, child in enumerate(children):
        assert child.parent_id == root.id and child.epoch == 1
        kind = k % 4
        if kind == 0:
            assert child.valid and child.reward == pytest.approx(root.reward) and "import math" in child.code
        elif kind == 1:
            assert not child.valid and child.reward == 0.0 and "RuntimeError" in child.feedback
        elif kind == 2:
            assert child.reward == 0.0 and "No SEARCH/REPLACE block" in child.feedback
        else:
            assert child.reward == 0.0 and "block 1: the SEARCH text was not found" in child.feedback
    row = metrics(run)[0]
    assert row["valid_frac"] == pytest.approx(0.25) and row["edit_fail_frac"] == pytest.approx(0.5)
    assert row["zero_std_frac"] == 0.0  # each group mixes rewards, so GRPO has signal
    assert row["eval_busy_s"] > 0 and row["evals_per_s"] == pytest.approx(4 / row["eval_busy_s"])


class SyncingScriptedEngine(ScriptedEngine):
    """The scripted answers from an engine that holds its own weights, like vllm: records every sync."""

    synced: list = []

    def __init__(self, model, tokenizer, batch_size=0, progress=False):
        super().__init__(model, tokenizer, batch_size, progress)
        self.shares_trainer_module = False

    def sync_weights(self, weights):
        SyncingScriptedEngine.synced.append({k: v.clone() for k, v in weights.items()})


@pytest.mark.slow
def test_an_engine_with_its_own_weights_gets_the_full_state_after_every_step(tmp_path):
    from transformers import AutoModelForCausalLM

    ENGINES["syncing"] = SyncingScriptedEngine
    SyncingScriptedEngine.synced.clear()
    try:
        run = run_helix(tmp_path, "rollout.engine=syncing", "rollout.group_size=4", "trainer.lr=1e-3")
    finally:
        del ENGINES["syncing"]
    rows = metrics(run)
    assert [r["skipped_step"] for r in rows] == [0.0, 0.0]  # mixed rewards: both steps train
    assert len(SyncingScriptedEngine.synced) == 2 and all(r["weight_sync_time_s"] > 0 for r in rows)
    first, last = SyncingScriptedEngine.synced
    final = AutoModelForCausalLM.from_pretrained(run / "export").state_dict()
    assert last.keys() == final.keys()  # full HF names, lm_head included
    for name in final:
        torch.testing.assert_close(last[name], final[name], atol=0, rtol=0)
    assert any(not torch.equal(first[k], last[k]) for k in last)  # the second sync carries the second step
    # Resumed, the engine (built from the base model) first gets the checkpoint's weights.
    ENGINES["syncing"] = SyncingScriptedEngine
    SyncingScriptedEngine.synced.clear()
    try:
        assert main(["--resume", str(run), "trainer.epochs=3"]) == 0
    finally:
        del ENGINES["syncing"]
    at_resume = SyncingScriptedEngine.synced[0]
    for name in final:
        torch.testing.assert_close(at_resume[name], final[name], atol=0, rtol=0)
    assert len(SyncingScriptedEngine.synced) == 2  # at resume, then after epoch 3's step


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["auto", "fsdp2", "deepspeed"])
def test_torchrun_two_ranks(tmp_path, strategy):
    torchrun = Path(sys.executable).with_name("torchrun")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [str(torchrun), "--standalone", "--nproc_per_node", "2", str(ROOT / "train" / "helix.py"), "--config", QUICK,
           *TINY, f"run.output_dir={tmp_path}", "run.name=dist", f"trainer.strategy={strategy}",
           "trainer.entropy_coeff=0.01", "trainer.lr=1e-3"]  # a step runs (and moves weights) even at equal rewards
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = metrics(tmp_path / "dist")
    assert [r["epoch"] for r in rows] == [1, 2]
    assert all(r["gen_tokens"] > 0 for r in rows)
    from population.archive import ReadOnlyArchive

    with ReadOnlyArchive(tmp_path / "dist" / "archive.sqlite") as arch:  # both ranks' advantages, archived by rank 0
        kids = [arch.get(s[0]) for s in arch.scores()[1:]]
    assert len(kids) == 2 * 2 * 2 and all(k.advantage_inputs is not None and k.advantage_inputs["tokens"] > 0 for k in kids)
    for prompt in {k.prompt_id.rsplit("-g", 1)[0] for k in kids}:
        group = [k for k in kids if k.prompt_id.startswith(prompt + "-g")]
        r = [k.reward for k in group]
        want = [0.0, 0.0] if r[0] == r[1] else [(x - sum(r) / 2) / (abs(r[0] - r[1]) / 2**0.5 + 1e-6) for x in r]
        assert [k.advantage for k in group] == pytest.approx(want, abs=1e-6)
    # The end-of-run export holds the whole trained weights, not one rank's shard (ZeRO-3 and FSDP2
    # partition them): it equals the last checkpoint exported offline, and differs from the start.
    from safetensors.torch import load_file

    from train.learner.export import export_checkpoint
    from train.learner.models import load_policy
    from train.loop.run_dir import latest_checkpoint

    exported = {}
    for shard in (tmp_path / "dist" / "export").glob("*.safetensors"):
        exported.update(load_file(shard))
    from train.config.config import load_config

    lora_cfg = load_config(str(tmp_path / "dist" / "config.yaml")).trainer.lora  # the quickstart's adapters, merged
    assert lora_cfg.enabled
    offline = export_checkpoint(latest_checkpoint(tmp_path / "dist") / "learner", "tiny-random", tmp_path / "offline",
                                lora_cfg=lora_cfg)
    reference = {}
    for shard in offline.glob("*.safetensors"):
        reference.update(load_file(shard))
    initial = load_policy("tiny-random", "float32", None, seed=0)[0].state_dict()
    assert exported.keys() == reference.keys()
    for name, tensor in exported.items():
        assert tensor.shape == initial[name].shape, name
        torch.testing.assert_close(tensor, reference[name], rtol=0, atol=1e-6, msg=name)
    assert any(not torch.equal(t, initial[n]) for n, t in exported.items()), "training never moved the weights"


@pytest.mark.slow
def test_what_the_prompt_budget_dropped_is_logged(tmp_path):
    """With the full description the starter's prompt is ~1200 tokens: at 900 the parent's feedback is
    shortened, then program lines cut; each prompt's record lands in metrics.jsonl
    (tests/rollout/test_prompts.py checks the budget itself)."""
    from population.archive import Archive

    run = run_helix(tmp_path, "rollout.description=full", "rollout.max_prompt_tokens=900", "trainer.epochs=1")
    (row,) = metrics(run)
    assert [d["prompt"] for d in row["prompt_dropped"]] == [0, 1]
    for record in row["prompt_dropped"]:
        assert record["parent_id"] == 1 and record["dropped"][0] == "parent feedback shortened"
        assert record["dropped"][-1].endswith("program lines")
    assert row["prompt_items_dropped"] == sum(len(d["dropped"]) for d in row["prompt_dropped"])
    with Archive(run / "archive.sqlite") as arch:
        assert arch.count() == 1 + 2 * 2
    # prompts/epoch-1.jsonl: each prompt's text and what it showed, which the run browser shows per child
    from train.runs import browse

    shown = [json.loads(line) for line in (run / "prompts" / "epoch-1.jsonl").read_text().splitlines()]
    assert [(p["prompt"], p["parent_id"], p["dropped"]) for p in shown] == [(d["prompt"], 1, d["dropped"]) for d in row["prompt_dropped"]]
    assert all("## Current Program" in p["text"] and "(lines omitted to fit the prompt budget)" in p["text"] for p in shown)
    assert browse.solution(run, 2)["prompt"]["text"] == shown[0]["text"]


@pytest.mark.slow
def test_evo_only_builds_no_learner(tmp_path, monkeypatch):
    """EvoOnly (trainer.enabled: false): no optimizer and no reference model exist at all."""
    import train.loop.epoch_loop

    def refuse(*args, **kwargs):
        raise AssertionError("EvoOnly built a Learner (optimizer + reference model)")

    monkeypatch.setattr(train.loop.epoch_loop, "Learner", refuse)  # the name the loop calls
    run = run_helix(tmp_path, "trainer.enabled=false", "trainer.epochs=1", "run.export=false")
    (row,) = metrics(run)
    assert "loss" not in row and "kl" not in row and row["archive_size"] == 5


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["true", "false"], ids=["train_only", "best_of_n"])
def test_without_a_population_every_prompt_is_the_starter(tmp_path, trainer):
    """TrainOnly / BestOfN: valid children exist (the scripted harmless edit) but never become
    parents, so every child's parent is the seed and no prompt shows ancestors."""
    from population.archive import Archive

    run = run_scripted(tmp_path, "population.enabled=false", f"trainer.enabled={trainer}", "run.export=false")
    with Archive(run / "archive.sqlite") as arch:
        ids = [s[0] for s in arch.scores()]
        children = [arch.get(i) for i in ids[1:]]
        assert len(children) == 2 * 2 * 4 and any(c.valid for c in children)
        assert {c.parent_id for c in children} == {ids[0]}
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and {s["parent_id"] for s in samples} == {ids[0]}


@pytest.mark.slow
def test_a_wall_time_budget_stops_after_the_epoch_that_reaches_it(tmp_path, capsys):
    from train.loop.run_dir import latest_checkpoint

    run = run_helix(tmp_path, "trainer.epochs=3", "run.time_budget_s=0.001", "run.export=false", "trainer.enabled=false")
    assert [r["epoch"] for r in metrics(run)] == [1]
    assert "budget reached after epoch 1" in capsys.readouterr().out
    assert latest_checkpoint(run).name == "epoch-000001"  # the stopped run can be resumed


def test_config_error_exits_2_with_message(capsys):
    assert main(["--config", QUICK, "trainer.kl_coeff=1"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'trainer.kl_coeff'" in err and "Did you mean 'kl_coef'" in err


def test_missing_model_fails_fast_with_instructions(tmp_path, capsys):
    assert main(["--config", QUICK, f"model.policy={tmp_path / 'absent'}", f"run.output_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "helix: error:" in err and "local Hugging Face model directory" in err


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["nsga2", "top_score", "top_div", "random", "islands"])
def test_every_selection_strategy_runs_in_the_loop(tmp_path, strategy):
    from population.archive import Archive
    from population.selection import SELECTION_STRATEGIES

    assert strategy in SELECTION_STRATEGIES
    run = run_scripted(tmp_path, f"selection.strategy={strategy}", "selection.n_islands=2", "selection.reset_every=1",
                       "trainer.enabled=false")
    with Archive(run / "archive.sqlite") as arch:
        epoch, ids = arch.get_population()
        tags = [t for (t,) in arch.db.execute("SELECT tag FROM populations WHERE epoch = ? ORDER BY position", (epoch,))]
        assert epoch == 2 and 1 <= len(ids) <= 4
        if strategy == "islands":
            assert sorted(set(tags)) == [0, 1]
        for sid in ids:  # only programs compete: edit failures never enter the population
            assert not arch.get(sid).metrics.get("edit_failed")


@pytest.mark.slow
def test_invalid_programs_can_be_kept_out_of_selection(tmp_path):
    from population.archive import Archive

    run = run_scripted(tmp_path, "selection.include_invalid=false", "population.size=8", "trainer.enabled=false")
    with Archive(run / "archive.sqlite") as arch:
        _, ids = arch.get_population()
        assert ids and all(arch.get(i).valid for i in ids)
        assert any(not valid for *_, valid in arch.scores())  # the crashing children are still archived


@pytest.mark.slow  # end to end through a subprocess (5-9 s): kept out of the -m 'not slow' tier
def test_the_loop_records_advantages_and_artefacts_for_the_reading_room(tmp_path):
    """Each child is archived with the advantage the GRPO update applied to its tokens and what the estimator
    saw; each valid child of a task with a render.py with what its program returned. The run browser shows
    these (train/runs/browse.py) without recomputing or re-running anything."""
    import math

    import numpy as np

    from population.archive import ReadOnlyArchive
    from tasks import load_task
    from train.runs import browse

    run = run_scripted(tmp_path, "trainer.epochs=1", "run.export=false")
    task = load_task("circle_packing_26")
    with ReadOnlyArchive(run / "archive.sqlite") as arch:
        children = [arch.get(s[0]) for s in arch.scores()[1:]]
        assert len(children) == 2 * 4
        for p in (0, 1):
            group = [c for c in children if c.prompt_id.startswith(f"e1-p{p}-g")]
            rewards = np.array([c.reward for c in group])  # harmless edit (the parent's reward), crash, prose, bad SEARCH
            want = (rewards - rewards.mean()) / (rewards.std(ddof=1) + 1e-6)  # verl's grpo, norm by std
            for child, w in zip(group, want):
                assert child.advantage == pytest.approx(w, rel=1e-6)
                inputs = child.advantage_inputs
                assert (inputs["estimator"], inputs["norm_by_std"], inputs["reward"]) == ("grpo", True, child.reward)
                assert inputs["tokens"] > 0
        for child in children:
            if child.valid:
                value = json.loads(arch.artefact(child.id))
                assert math.isclose(task.verify(value).reward, child.reward, rel_tol=1e-12)
            else:
                assert arch.artefact(child.id) is None
        assert any(c.valid for c in children)
    shown = browse.solution(run, int(children[0].id))
    assert shown["group"]["recorded"] and shown["picture"]["available"] == children[0].valid
    assert [m["advantage"] for m in shown["group"]["members"]] == pytest.approx([c.advantage for c in children[:4]])
