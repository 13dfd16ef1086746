"""scripts/bench/bench_sandbox.py runs and reports every row with its ratios (figures: BENCHMARKS.md), and records
its sandbox rates where scripts/plan_scale.py reads them (BENCHMARKS.json)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_sandbox_reports_both_programs_sequential_and_parallel(tmp_path):
    from train.commands.scale_plan import sandbox_rate

    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps({"rollout": {"rows": []}}))  # another benchmark's figures: kept
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_sandbox.py"), "--n", "2", "--repeats", "1",
                           "--workers", "2", "--binpack", "bin_packing_or", "--binpack-n", "1", "--record", str(measured)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\| (trivial|circle_packing_26 starter) \| [12] \|", line)]
    assert len(rows) == 4, proc.stdout
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert all(float(c) > 0 for c in cells[2:7]) and len(cells) == 9
        # the ratios are the sandboxed rates (template, launcher) over the bare `import numpy` rate
        floor = float(cells[6])
        for ratio, rate in ((cells[7], float(cells[2])), (cells[8], float(cells[3]))):  # printed to 0.1: bounds
            low, high = (rate - 0.05) / (floor + 0.05) - 0.005, (rate + 0.05) / max(floor - 0.05, 1e-9) + 0.005
            assert ratio.endswith("x") and low <= float(ratio[:-1]) <= high, row
    figures = json.loads(measured.read_text())
    assert figures["rollout"] == {"rows": []} and "--record" in figures["sandbox"]["command"]
    printed = [[c.strip() for c in row.strip("|").split("|")][:3] for row in rows]
    assert [[r["program"], str(r["workers"]), f"{r['sandbox_evals_per_s']:.1f}"] for r in figures["sandbox"]["rows"]] == printed
    rate, how = sandbox_rate(figures, "circle_packing_26 starter")
    assert rate == float(printed[3][2]) / 2 and "2 workers" in how  # the row with the most workers, per core
    # the online bin-packing starter before (harness + data in the sandbox) and after (the driver): same reward
    binpack = [line for line in proc.stdout.splitlines() if re.match(r"\| bin_packing_or \| [12] \|", line)]
    assert len(binpack) == 2, proc.stdout
    for row in binpack:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[2]) > 0 and float(cells[3]) > 0 and cells[4].endswith("x")
        assert float(cells[5]) == 94.811667  # the starter's reward, which both ways must give
