"""scripts/bench/bench_overlap.py runs the real loop twice and prints its table (timings are not asserted)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_overlap_reports_both_modes():
    cmd = [sys.executable, str(ROOT / "scripts" / "bench" / "bench_overlap.py"), "--epochs", "1", "--prompts", "2", "--group", "2",
           "--gen-s", "0.2", "--work-s", "0.05"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith("| 0 (") or line.startswith("| 1 (")]
    assert [r[0].strip() for r in rows] == ["0 (evaluate after)", "1 (overlapped)"]
    for cells in rows:
        generate, exposed, busy, total = (float(c) for c in cells[1:5])
        assert generate >= 0.4 - 1e-6  # 2 prompts x 0.2 s of simulated generation
        assert busy > 0 and total == pytest.approx(generate + exposed, abs=0.011)
    assert rows[0][5].strip() == "1.00x"
