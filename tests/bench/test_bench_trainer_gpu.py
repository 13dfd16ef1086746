"""scripts/bench/bench_trainer_gpu.py: the FLOP/MFU arithmetic by hand (train/commands/scale_plan.py), and a 2-rank
CPU smoke run of the tiny shape under FSDP2 and DeepSpeed (the GPU numbers themselves need a GPU node)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from benchlib.flops import mfu, model_flops

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench" / "bench_trainer_gpu.py"


def test_mfu_arithmetic_by_hand():
    # N = 1e9 parameters, 1000 tokens in 1 s: policy 6e12 + reference 2e12 = 8e12 FLOP/s; of 100 TFLOP/s: 8%.
    assert model_flops(10**9, 1000) == 8e12
    assert mfu(10**9, 1000, 1.0, 100.0) == pytest.approx(0.08)
    # Without a reference model only the policy's 6N per token counts; twice the time halves the MFU.
    assert mfu(10**9, 1000, 2.0, 100.0, with_reference=False) == pytest.approx(0.03)
    assert mfu(10**9, 1000, 1.0, None) is None and mfu(10**9, 1000, 1.0, 0.0) is None


def test_unknown_shape_is_an_argparse_error():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--shape", "qwen2-70b"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["fsdp2"])  # deepspeed: the same script path, tested in test_distributed_train
def test_two_rank_cpu_smoke_run(tmp_path, strategy):
    out = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(SCRIPT),
           "--shape", "tiny", "--strategy", strategy, "--steps", "1", "--warmup", "1", "--sequences-per-rank", "4",
           "--group-size", "2", "--prompt-len", "16", "--response-len", "8", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["strategy"] == strategy and result["world"] == 2
    assert result["tokens_per_step"] == 2 * 4 * (16 + 8)
    assert result["step_s_median"] > 0 and result["tokens_per_s"] > 0
    assert result["mfu"] is None and result["peak_tflops"] is None  # CPU: no peak to compare with
    assert result["peak_memory_kind"] == "rss" and result["peak_memory_bytes"] > 0
    assert result["n_params"] > 0 and result["loss"] == result["loss"]
