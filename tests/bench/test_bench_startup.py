"""scripts/bench/bench_startup.py times the start-up cases in fresh interpreters and says what they imported
(figures: BENCHMARKS.md "Start-up"): here none of them imports torch, and a config error exits with code 2."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # three fresh interpreters
def test_bench_startup_reports_each_case_and_what_it_imported():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_startup.py"), "--repeats", "1"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {m.group(1): (float(m.group(2)), int(m.group(3)), m.group(4))
            for m in re.finditer(r"^\| (load_config|--help|config error) \| ([\d.]+) \| (\d+) \| (.+) \|$", proc.stdout, re.M)}
    assert sorted(rows) == ["--help", "config error", "load_config"], proc.stdout
    assert [rows[k][1] for k in ("load_config", "--help", "config error")] == [0, 0, 2]
    assert all(r[2] == "none" and r[0] > 0 for r in rows.values()), proc.stdout  # no torch, transformers, verl or vllm
