"""scripts/ablate.py: the summary statistics, and a real (tiny) ablation end to end."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import ablate  # noqa: E402


def test_summary_is_mean_and_sample_std_per_variant():
    results = [ablate.RunResult("helix", 0, 2.0, 0.5, 1.0, 8, 10.0), ablate.RunResult("helix", 1, 2.5, 0.1, 0.5, 8, 12.0),
               ablate.RunResult("random", 0, 1.0, 0.2, 0.0, 8, 9.0)]
    helix, rnd = ablate.summarize(results)
    assert helix["variant"] == "helix" and helix["seeds"] == 2
    assert helix["best_mean"] == pytest.approx(2.25) and helix["best_std"] == pytest.approx(np.sqrt(0.125))
    assert helix["best_max"] == 2.5 and helix["reward_mean"] == pytest.approx(0.3)
    assert helix["reward_std"] == pytest.approx(np.std([0.5, 0.1], ddof=1)) and helix["valid_frac"] == 0.75
    assert helix["wall_s"] == 11.0 and rnd["best_std"] == 0.0  # one seed: no spread to report
    table = ablate.markdown([helix, rnd], "t")
    assert "| helix | 2 | 2.25 ± 0.35 | 2.5 |" in table


def test_unknown_variant_is_a_clear_error(capsys):
    with pytest.raises(SystemExit):
        ablate.main(["--task", "circle_packing_26", "--variants", "helx", "--evaluations", "4"])
    assert "unknown variant(s) ['helx']" in capsys.readouterr().err


@pytest.mark.slow
def test_tiny_ablation_runs_every_variant_under_the_same_budget(tmp_path):
    tiny = ["model.policy=tiny-random", "rollout.max_new_tokens=8", "rollout.group_size=2", "trainer.prompts_per_epoch=2",
            "population.size=4", "task.eval_workers=2"]
    args = ["--task", "circle_packing_26", "--variants", "helix", "evo_only", "train_only", "best_of_n", "--seeds", "0",
            "--evaluations", "6", "--out", str(tmp_path), "--quiet", "--set", *tiny]
    assert ablate.main(args) == 0
    report = json.loads((tmp_path / "ablation.json").read_text())
    assert [r["variant"] for r in report["rows"]] == ["helix", "evo_only", "train_only", "best_of_n"]
    for run in report["runs"]:
        assert run["children"] == 8  # budget 6 reached after the second epoch of 2 x 2 children
        assert run["best_reward"] > 1.8  # at least the starter program's 1.8365
    # A finished run is not redone: the second call reads the stored results.
    before = (tmp_path / "helix-s0" / "archive.sqlite").stat().st_mtime
    assert ablate.main(args) == 0
    assert (tmp_path / "helix-s0" / "archive.sqlite").stat().st_mtime == before
    assert "best reward (mean ± std)" in (tmp_path / "ablation.md").read_text()
    # Other settings (here a larger budget) are not mistaken for the finished run: it runs again.
    bigger = [a if a != "6" else "10" for a in args]
    assert ablate.main(bigger[:4] + bigger[7:]) == 0  # helix only
    assert (tmp_path / "helix-s0" / "archive.sqlite").stat().st_mtime != before
    rerun = json.loads((tmp_path / "ablation.json").read_text())["runs"]
    assert [r["children"] for r in rerun] == [12]  # 3 epochs of 2 x 2 children reach 10
