"""scripts/bench/bench_trainer.py runs end to end on tiny-random, and its two trainers agree: with the
same settings (eps 0.2, beta 1e-3 k3 KL, token-mean, same batch) the first step's gradient
norm of our verl-loss Learner equals TRL GRPOTrainer's, so the timing compares like with like."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_trainer_compares_like_with_like():
    cmd = [sys.executable, str(ROOT / "scripts" / "bench" / "bench_trainer.py"), "--model", "tiny-random", "--seqs", "4",
           "--group-size", "2", "--micro-batch", "2", "--prompt-len", "16", "--completion-len", "8", "--repeats", "1",
           "--threads", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| HELIX") or line.startswith("| TRL")]
    assert len(rows) == 2, proc.stdout
    norms = [float(row.strip("|").split("|")[-1]) for row in rows]
    assert norms[0] == pytest.approx(norms[1], rel=1e-2), rows
    assert re.search(r"ours/TRL: median step time [0-9.]+x", proc.stdout)


@pytest.mark.slow
def test_bench_trainer_prefix_mode_times_the_same_update():
    """--impl prefix: trainer.shared_prefix off and on take the same step (same first-step loss and
    gradient norm) in fewer micro-batches, and the ratio line is printed."""
    cmd = [sys.executable, str(ROOT / "scripts" / "bench" / "bench_trainer.py"), "--model", "tiny-random", "--impl", "prefix",
           "--seqs", "8", "--group-size", "4", "--micro-batch", "8", "--max-tokens", "300", "--prompt-len", "40",
           "--completion-len", "8", "--repeats", "1", "--threads", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
            for line in proc.stdout.splitlines() if line.startswith("| off") or line.startswith("| on")}
    assert set(rows) == {"off", "on"}, proc.stdout
    assert int(rows["on"][1]) < int(rows["off"][1])  # whole groups fit the budget packed, not as rows
    assert float(rows["on"][-1]) == pytest.approx(float(rows["off"][-1]), rel=1e-5)
    assert re.search(r"on/off: min step time [0-9.]+x", proc.stdout)
