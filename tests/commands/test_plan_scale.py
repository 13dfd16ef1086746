"""scripts/plan_scale.py (train/commands/scale_plan.py): the projection's arithmetic against hand-computed values, the sandbox
rate read from the measured figures (BENCHMARKS.json), and the command line end to end on a paper config."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from train.commands import scale_plan as ps

ROOT = Path(__file__).resolve().parents[2]

SANDBOX = {"sandbox": {"date": "2026-01-02", "machine": "test box", "rows": [
    {"program": "trivial", "workers": 1, "sandbox_evals_per_s": 10.2},
    {"program": "circle_packing_26 starter", "workers": 1, "sandbox_evals_per_s": 11.5},
    {"program": "circle_packing_26 starter", "workers": 4, "sandbox_evals_per_s": 37.6},
]}, "overlap": {"rows": [{"program": "circle_packing_26 starter", "workers": 16, "sandbox_evals_per_s": 999.0}]}}


def test_generation_and_train_time_match_hand_arithmetic():
    assert ps.children_per_epoch(16, 16) == 256
    # 256 answers x 3071.5 tokens = 786,304 tokens; 8 GPUs x 1843.7 tok/s = 14,749.6 tok/s
    assert ps.generation_s(256, 3071.5, 8, 1843.7) == pytest.approx(786304 / 14749.6) == pytest.approx(53.310191, rel=1e-7)
    # 256 x (1211 + 3071.5) = 1,096,320 tokens x 1.25 passes = 1,370,400; 8 x 977.3 = 7,818.4 tok/s
    assert ps.train_s(256, 1211, 3071.5, 8, 977.3, passes=1.25) == pytest.approx(175.278829, rel=1e-7)


def test_train_passes_count_policy_reference_and_old_logprob_forwards():
    assert ps.train_passes(1, 1, 1e-3) == 1.0  # the paper configs: exactly a bench_trainer_gpu step
    assert ps.train_passes(1, 1, 0.0) == 0.75  # no reference forward: 6N of 8N
    assert ps.train_passes(1, 4, 1e-3) == 1.25  # 4 optimizer steps: + the pi_old forward, (6 + 2 + 2) / 8
    assert ps.train_passes(2, 4, 1e-3) == 2.0  # two policy passes: (12 + 2 + 2) / 8


def test_evaluation_time_from_duration_rate_and_waves():
    assert ps.eval_s_from_duration(256, 7.3, 96) == pytest.approx(1868.8 / 96) == pytest.approx(19.466667, rel=1e-6)
    assert ps.eval_s_from_rate(256, 10.55, 96) == pytest.approx(256 / 1012.8) == pytest.approx(0.2527646, rel=1e-6)
    assert ps.eval_waves_s(192, 60, 96) == 120  # exactly two full waves
    assert ps.eval_waves_s(193, 60, 96) == 180  # one child more: a third wave
    assert ps.eval_waves_s(128, 60, 96) == 120


def test_cores_needed_at_an_exact_boundary_and_just_above():
    # 256 x 1.1 s = 281.6 core-seconds; 281.6 / 11.264 s = 25 exactly (25.000000000000004 in floats)
    assert 256 * 1.1 / 11.264 > 25  # the float noise the ceiling must not count
    assert ps.cores_needed(256, 1.1, 11.264) == 25
    assert ps.cores_needed(256, 1.1, 11.263) == 26  # 25.0022: one core more
    assert ps.cores_needed(256, 0.5, 64) == 2 and ps.cores_needed(256, 0.5, 63.9) == 3
    assert ps.cores_needed(128, 0.0948, 154.2) == 1  # never 0


def test_cores_needed_when_children_run_in_whole_waves():
    assert ps.cores_needed_waves(128, 60, 154.2) == 64  # 2 waves fit in 154.2 s: 128 / 2
    assert ps.cores_needed_waves(128, 60, 120.0) == 64  # exactly 2 waves
    assert ps.cores_needed_waves(128, 60, 119.9) == 128  # only 1 wave fits: every child at once
    assert ps.cores_needed_waves(128, 60, 59.9) is None  # one child outlasts generation


def test_checkpoint_size_follows_what_the_backends_save():
    assert ps.checkpoint_bytes_per_param("fsdp2", "bfloat16", True)[0] == 12  # fp32 master weights + fp32 AdamW m, v
    assert ps.checkpoint_bytes_per_param("fsdp2", "bfloat16", False)[0] == 6  # held as loaded: bf16 weights, m, v
    assert ps.checkpoint_bytes_per_param("none", "float32", False)[0] == 12
    assert ps.checkpoint_bytes_per_param("deepspeed", "bfloat16", True)[0] == 14  # + fp32 master, fp32 Adam
    # 14.77e9 x 12 B = 177.24 GB at 2 GB/s
    assert ps.checkpoint_s(14.77e9, 12, 2) == pytest.approx(88.62)


def test_adamw_state_takes_the_weights_dtype_as_the_checkpoint_size_assumes():
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))
    opt = torch.optim.AdamW([p], lr=1e-3)
    p.grad = torch.ones_like(p)
    opt.step()
    assert opt.state[p]["exp_avg"].dtype == opt.state[p]["exp_avg_sq"].dtype == torch.bfloat16


@pytest.mark.parametrize("shape", [
    # Qwen2.5-1.5B (tied embeddings, as bench_trainer_gpu builds it) and Qwen2.5-14B / 32B (untied)
    dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
         vocab_size=151936, tie_word_embeddings=True),
    dict(hidden_size=5120, intermediate_size=13824, num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8,
         vocab_size=152064, tie_word_embeddings=False),
    dict(hidden_size=5120, intermediate_size=27648, num_hidden_layers=64, num_attention_heads=40, num_key_value_heads=8,
         vocab_size=152064, tie_word_embeddings=False),
])
def test_parameter_count_equals_transformers_model(shape):
    torch = pytest.importorskip("torch")
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**shape)
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    expected = sum(p.numel() for p in model.parameters())
    assert ps.params_from_hf_config(config.to_dict()) == expected


def test_parameter_count_of_a_llama_without_attention_bias():
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=64, intermediate_size=176, num_hidden_layers=3, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=1000, tie_word_embeddings=False)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    assert ps.params_from_hf_config(config.to_dict()) == sum(p.numel() for p in model.parameters())


def test_sandbox_rate_is_read_from_the_sandbox_rows_only():
    rate, how = ps.sandbox_rate(SANDBOX, "circle_packing_26 starter")
    assert rate == pytest.approx(37.6 / 4)  # the most workers among the *sandbox* rows, per core
    assert "4 workers" in how and "BENCHMARKS.json sandbox (2026-01-02, test box)" in how
    assert ps.sandbox_rate(SANDBOX, "trivial")[0] == pytest.approx(10.2)
    with pytest.raises(ValueError, match="no row"):
        ps.sandbox_rate(SANDBOX, "eggholder starter")
    with pytest.raises(ValueError, match="no sandbox rates"):
        ps.sandbox_rate({"rollout": {"rows": []}}, "trivial")
    with pytest.raises(ValueError, match="without its program, workers"):
        ps.sandbox_rate({"sandbox": {"rows": [{"program": "trivial", "workers": 1}]}}, "trivial")


def test_the_measured_sandbox_rates_are_benchmarks_mds_sandbox_table():
    """BENCHMARKS.json holds, as data, the sandbox column of BENCHMARKS.md's Sandbox table (the first table of
    that section), so the prose and the figures the plan reads cannot drift apart."""
    text = (ROOT / "BENCHMARKS.md").read_text()
    section = re.search(r"^## Sandbox\b.*?(?=^## |\Z)", text, flags=re.M | re.S).group(0)
    table = re.search(r"^\| program \| workers \| sandbox evals/s \|.*?(?=^[^|])", section, flags=re.M | re.S).group(0)
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    measured = json.loads((ROOT / "BENCHMARKS.json").read_text())
    assert [(r["program"], r["workers"], r["sandbox_evals_per_s"]) for r in measured["sandbox"]["rows"]] == [
        (c[0], int(c[1]), float(c[2])) for c in cells]
    rate, how = ps.sandbox_rate(measured, "circle_packing_26 starter")
    assert 0 < rate < 1000 and "workers" in how


def test_make_plan_adds_the_phases_and_prefers_a_given_duration():
    plan = ps.make_plan(prompts_per_epoch=16, group_size=16, prompt_tokens=1211, answer_tokens=3071.5, gpus=8,
                        gen_tok_s_per_gpu=1843.7, train_tok_s_per_gpu=977.3, eval_cores=96, passes=1.25,
                        eval_s_per_child=7.3, evals_per_s_per_core=10.55, timeout_s=60, params=14.77e9,
                        bytes_per_param=6, disk_gb_s=2, checkpoint_every=5)
    seconds = {p.name.split(" (")[0]: p.seconds for p in plan.phases}
    assert seconds == pytest.approx({"generate": 53.310191, "evaluate": 19.466667, "train step": 175.278829,
                                     "checkpoint": 44.31 / 5}, rel=1e-6)
    assert plan.total_s == pytest.approx(53.310191 + 19.466667 + 175.278829 + 8.862, rel=1e-6)
    assert plan.eval_s_per_child == 7.3
    rated = ps.make_plan(prompts_per_epoch=16, group_size=16, prompt_tokens=1211, answer_tokens=3071.5, gpus=8,
                         gen_tok_s_per_gpu=1843.7, train_tok_s_per_gpu=977.3, eval_cores=96, evals_per_s_per_core=10.55)
    assert [p.name for p in rated.phases] == ["generate", "evaluate", "train step"]  # no disk rate: no checkpoint
    assert rated.phases[1].seconds == pytest.approx(0.2527646, rel=1e-6)
    assert rated.eval_s_per_child == pytest.approx(1 / 10.55)


def _run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "plan_scale.py"), *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.slow  # end to end through a subprocess (5-9 s): kept out of the -m 'not slow' tier
def test_end_to_end_on_the_14b_config_prints_every_phase(tmp_path):
    bench = tmp_path / "measured.json"
    bench.write_text(json.dumps(SANDBOX))
    proc = _run("--config", "configs/base/paper_14b.yaml", "task.name=circle_packing_26",
                "--gen-tok-s-per-gpu", "1843.7", "--train-tok-s-per-gpu",
                "977.3", "--node-cores", "112", "--params", "14.77e9", "--disk-gb-s", "2", "--prompt-tokens", "1211",
                "--measured", str(bench), "--source", "gen-tok-s-per-gpu=assumed for the test")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert out.startswith("PROJECTION, not a measurement")
    rows = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\| ([a-z ]+?)(?: \(.*?\))? \| ([\d.]+) \| [\d.]+%", out, re.M)}
    children = 8 * 16  # base/paper.yaml: B = 8, G = 16
    gen = children * 8192 / (8 * 1843.7)  # answers at rollout.max_new_tokens (8192)
    train = children * (1211 + 8192) / (8 * 977.3)
    evaluate = children / (37.6 / 4 * (112 - 16))
    checkpoint = 14.77e9 * 12 / 2e9 / 5  # fsdp2 bf16: fp32 master + AdamW m, v; run.checkpoint_every: 5
    assert rows["generate"] == pytest.approx(gen, abs=0.05)
    assert rows["train step"] == pytest.approx(train, abs=0.05)
    assert rows["evaluate"] == pytest.approx(evaluate, abs=0.05)
    assert rows["checkpoint"] == pytest.approx(checkpoint, abs=0.05)
    assert rows["epoch"] == pytest.approx(gen + train + evaluate + checkpoint, abs=0.1)
    assert "| gen-tok-s-per-gpu | 1843.7 | assumed for the test |" in out
    assert "| evals-per-s-per-core | 9.4 | measured: measured.json sandbox (2026-01-02, test box)" in out
    assert f"{math.ceil(children * 60 / gen)} cores by the work" in out  # worst case: task.timeout_s = 60


def test_a_missing_gpu_rate_is_a_clear_error_naming_the_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        ps.main(["--config", "configs/base/paper_14b.yaml", "task.name=circle_packing_26", "--train-tok-s-per-gpu", "977.3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "missing --gen-tok-s-per-gpu" in err and "bench_rollout.py" in err
    with pytest.raises(SystemExit) as exc:
        ps.main(["--config", "configs/base/paper_14b.yaml", "task.name=circle_packing_26",
                 "--gen-tok-s-per-gpu", "1843.7"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "missing --train-tok-s-per-gpu" in err and "bench_trainer_gpu.py" in err


@pytest.mark.slow  # end to end through a subprocess (5-9 s): kept out of the -m 'not slow' tier
def test_no_sandbox_rate_anywhere_is_an_error_naming_the_flag(tmp_path):
    bench = tmp_path / "measured.json"
    bench.write_text(json.dumps({"rollout": {"rows": []}}))
    proc = _run("--config", "configs/base/paper_14b.yaml", "task.name=circle_packing_26",
                "--gen-tok-s-per-gpu", "1843.7", "--train-tok-s-per-gpu",
                "977.3", "--measured", str(bench))
    assert proc.returncode == 2
    assert "missing --evals-per-s-per-core" in proc.stderr and "bench_sandbox.py" in proc.stderr
    assert "PROJECTION" not in proc.stdout


def test_an_unknown_source_name_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        ps.main(["--config", "configs/base/paper_14b.yaml", "task.name=circle_packing_26",
                 "--gen-tok-s-per-gpu", "1", "--train-tok-s-per-gpu", "1",
                 "--source", "gen-rate=typo"])
    assert exc.value.code == 2 and "--source 'gen-rate=typo'" in capsys.readouterr().err
