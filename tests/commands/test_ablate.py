"""scripts/ablate.py: the summary statistics, the runs it launches for any task config, and a real (tiny)
ablation end to end."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from population.archive import Archive
from train.commands import ablate
from train.runs import ablation


def test_summary_is_mean_and_sample_std_per_variant():
    results = [ablation.RunResult("helix", 0, 2.0, 0.5, 1.0, 8, 10.0), ablation.RunResult("helix", 1, 2.5, 0.1, 0.5, 8, 12.0),
               ablation.RunResult("random", 0, 1.0, 0.2, 0.0, 8, 9.0)]
    helix, rnd = ablation.summarize(results)
    assert helix["variant"] == "helix" and helix["seeds"] == 2
    assert helix["best_mean"] == pytest.approx(2.25) and helix["best_std"] == pytest.approx(np.sqrt(0.125))
    assert helix["best_max"] == 2.5 and helix["reward_mean"] == pytest.approx(0.3)
    assert helix["reward_std"] == pytest.approx(np.std([0.5, 0.1], ddof=1)) and helix["valid_frac"] == 0.75
    assert helix["wall_s"] == 11.0 and rnd["best_std"] == 0.0  # one seed: no spread to report
    table = ablation.markdown([helix, rnd], "t")
    assert "| helix | 2 | 2.25 ± 0.35 | 2.5 |" in table


def test_unknown_variant_is_a_clear_error(capsys):
    with pytest.raises(SystemExit):
        ablate.main(["--task", "circle_packing_26", "--variants", "helx", "--evaluations", "4"])
    assert "unknown variant(s) ['helx']" in capsys.readouterr().err


def test_unknown_task_is_a_clear_error(capsys):
    with pytest.raises(SystemExit):
        ablate.main(["--task", "keane_bump_21", "--evaluations", "4"])
    err = capsys.readouterr().err
    assert "no task 'keane_bump_21' under tasks/ or in HELIX_TASKS's folders. Did you mean keane_bump_20" in err


def _fake_helix(calls):
    """Stands in for ablate._run_measured of train/helix.py: records the command, leaves a one-row archive."""
    def run(cmd, quiet):
        calls.append(cmd)
        run_dir = Path(next(a for a in cmd if a.startswith("run.output_dir=")).split("=", 1)[1]) / next(
            a for a in cmd if a.startswith("run.name=")).split("=", 1)[1]
        run_dir.mkdir(parents=True)
        with Archive(run_dir / "archive.sqlite") as arch:
            (root,) = arch.add_many([dict(parent_id=None, epoch=0, code="s", reward=1.0, valid=True, feedback="")])
            arch.add_many([dict(parent_id=root, epoch=1, code="c", reward=2.0, valid=True, feedback="")])
        return 0, "", 123_456  # exit code, stderr, peak resident set in kB
    return run


def test_any_task_config_gets_every_variant_with_no_files_of_its_own(tmp_path, monkeypatch, capsys):
    """keane_bump_20 has no config file and nothing under configs/ablations/: each run is the CPU base with
    task.name=keane_bump_20 (first, so --set can still change it), then the variant's setting(s) as dotted overrides
    (last, so they hold), and resolves to exactly that, with the task's own CPU-scale time limit (30 s). Every
    variant but iterate, which a construct-form task cannot run: skipped with the reason."""
    from train.config.config import load_config
    from train.config.schema import flatten

    calls = []
    monkeypatch.setattr(ablate, "_run_measured", _fake_helix(calls))
    assert ablate.main(["--task", "keane_bump_20", "--seeds", "0", "--evaluations", "4", "--out", str(tmp_path),
                        "--set", "rollout.max_new_tokens=64"]) == 0
    assert "[ablate] skipping variant iterate on keane_bump_20: evolution.operators = {'iterate': 1.0} (the iterate " \
        "baseline) reruns each parent's program on the parent's construction, but keane_bump_20 is a construct-form " \
        "task" in capsys.readouterr().out
    variants = [v for v in ablate.available_variants() if v != "iterate"]
    cpu = ablate.CONFIGS / "base" / "cpu.yaml"
    assert [c[c.index("--config") + 1: c.index("--config") + 3] for c in calls] == [[str(cpu), "run.seed=0"]] * len(variants)
    assert all(c[c.index("run.progress=false") + 3:][:2] == ["task.name=keane_bump_20", "rollout.max_new_tokens=64"]
               for c in calls)  # after the budget (run.max_evaluations, trainer.epochs)
    base = flatten(load_config(cpu, ["task.name=keane_bump_20", "rollout.max_new_tokens=64"]))
    assert base["task.timeout_s"] == 30.0
    for cmd in calls:
        variant = next(a for a in cmd if a.startswith("run.name=")).split("=", 1)[1].removesuffix("-s0")
        extra = ablate.variant_overrides(variant)
        assert cmd[len(cmd) - len(extra):] == extra, cmd
        resolved = flatten(load_config(cpu, cmd[cmd.index("--config") + 2:]))
        assert resolved["task.name"] == "keane_bump_20" and resolved["rollout.max_new_tokens"] == 64
        # every setting by its dotted name, nested sections too (trainer.lora.enabled)
        changed = {k for k in base if base[k] != resolved[k] and not k.startswith("run.")} - {"trainer.epochs"}
        assert changed == set(ablate.variant_settings(variant)), (variant, changed)  # less the budget and run directory
    report = json.loads((tmp_path / "ablation.json").read_text())
    assert report["title"] == "keane_bump_20: 4 evaluated programs per run"
    assert [r["variant"] for r in report["rows"]] == ["helix"] + [v for v in variants if v != "helix"]
    assert {r["peak_rss_kb"] for r in report["rows"]} == {123_456}


def test_config_option_and_variants_that_change_nothing(tmp_path, monkeypatch, capsys):
    """--config takes any config file; a variant whose setting the config already has would repeat helix: skipped
    with a note by default, refused when asked for by name."""
    config = tmp_path / "random_pop.yaml"
    config.write_text(f"# test\nbase: {ablate.CONFIGS / 'base' / 'cpu.yaml'}\nselection: {{strategy: random}}\n")
    calls = []
    monkeypatch.setattr(ablate, "_run_measured", _fake_helix(calls))
    out = tmp_path / "out"
    assert ablate.main(["--config", str(config), "--seeds", "0", "--evaluations", "4", "--out", str(out)]) == 0
    assert "skipping variant random (selection.strategy=random) leaves random_pop unchanged" in capsys.readouterr().out
    ran = [next(a for a in c if a.startswith("run.name=")) for c in calls]
    assert "run.name=random-s0" not in ran and "run.name=top_score-s0" in ran and len(ran) == len(ablate.available_variants()) - 2
    with pytest.raises(SystemExit):
        ablate.main(["--config", str(config), "--variants", "helix", "random", "--evaluations", "4", "--out", str(out)])
    assert "it would repeat helix" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # named, a variant the task cannot run is refused (skipped above: iterate)
        ablate.main(["--config", str(config), "--variants", "helix", "iterate", "--evaluations", "4", "--out", str(out)])
    assert "variant iterate: evolution.operators = {'iterate': 1.0} (the iterate baseline)" in capsys.readouterr().err


def test_a_variant_that_sets_one_nested_key_names_that_key(tmp_path, monkeypatch):
    """An overlay may set a key of a nested section (rollout.vllm): the variant is that one setting, by its
    full dotted name, and its override leaves the rest of the section as the config has it."""
    (tmp_path / "bigger_kv.yaml").write_text("rollout: {vllm: {kv_cache_gb: 8}, engine: vllm}\nevolution: {operators: {rewrite: 1}}\n")
    from train.config import variants

    monkeypatch.setattr(variants, "ABLATIONS", tmp_path)  # the overlays the runner and the run name read
    assert ablate.variant_settings("bigger_kv") == {"rollout.vllm.kv_cache_gb": 8, "rollout.engine": "vllm",
                                                   "evolution.operators": {"rewrite": 1}}
    assert ablate.variant_overrides("bigger_kv") == ["rollout.vllm.kv_cache_gb=8", "rollout.engine=vllm",
                                                     'evolution.operators={"rewrite": 1}']
    from train.config.config import load_config

    cfg = load_config(ablate.CONFIGS / "quickstart.yaml", ablate.variant_overrides("bigger_kv"))
    assert (cfg.rollout.vllm.kv_cache_gb, cfg.rollout.vllm.dtype, cfg.evolution.operators) == (8.0, "auto", {"rewrite": 1})
    from train.config.run_name import variant_of

    assert variant_of(cfg) == "bigger_kv"  # a run of that variant is named after it, nested key and all
    assert variant_of(load_config(ablate.CONFIGS / "quickstart.yaml", ["rollout.engine=vllm", "evolution.operators={rewrite: 1}"])) \
        == "helix"  # without the nested setting it is not that variant


@pytest.mark.slow
def test_tiny_ablation_runs_every_variant_under_the_same_budget(tmp_path):
    tiny = ["model.policy=tiny-random", "rollout.max_new_tokens=8", "rollout.group_size=2", "trainer.prompts_per_epoch=2",
            "population.size=4", "task.eval_workers=2"]
    args = ["--task", "circle_packing_26", "--variants", "helix", "evo_only", "train_only", "best_of_n", "--seeds", "0",
            "--evaluations", "6", "--out", str(tmp_path), "--quiet", "--set", *tiny]
    assert ablate.main(args) == 0
    report = json.loads((tmp_path / "ablation.json").read_text())
    assert [r["variant"] for r in report["rows"]] == ["helix", "evo_only", "train_only", "best_of_n"]
    for variant, trainer, population in [("helix", True, True), ("evo_only", False, True), ("best_of_n", False, False)]:
        saved = yaml.safe_load((tmp_path / f"{variant}-s0" / "config.yaml").read_text())  # the resolved config
        assert saved["task"]["name"] == "circle_packing_26" and saved["model"]["policy"] == "tiny-random"
        assert saved["trainer"]["enabled"] is trainer and saved["population"]["enabled"] is population
    for run in report["runs"]:
        assert run["children"] == 8  # budget 6 reached after the second epoch of 2 x 2 children
        assert run["best_reward"] > 1.8  # at least the starter program's 1.8365
    # A finished run is not redone: the second call reads the stored results.
    before = (tmp_path / "helix-s0" / "archive.sqlite").stat().st_mtime
    assert ablate.main(args) == 0
    assert (tmp_path / "helix-s0" / "archive.sqlite").stat().st_mtime == before
    assert "best reward (mean ± std)" in (tmp_path / "ablation.md").read_text()
    # That a run made with other settings runs again (the finished one kept aside) is
    # test_finished_runs_are_found_from_another_checkout_and_never_deleted's, on a stand-in helix.py.


def test_finished_runs_are_found_from_another_checkout_and_never_deleted(tmp_path, monkeypatch, capsys):
    """A recorded command holds absolute paths (train/helix.py, the config): a second clone given the same
    ablation must reuse the finished runs, not run them again. A run made with other settings is run again,
    and the finished one is moved aside, files and all, instead of being deleted."""
    calls = []
    monkeypatch.setattr(ablate, "_run_measured", _fake_helix(calls))
    out = tmp_path / "out"
    args = ["--task", "keane_bump_20", "--variants", "helix", "--seeds", "0", "--evaluations", "4", "--out", str(out)]
    assert ablate.main([*args, "--set", "rollout.max_new_tokens=64"]) == 0 and len(calls) == 1
    done = out / "helix-s0" / ablate.DONE
    record = json.loads(done.read_text())
    elsewhere = "/home/someone/old-clone"
    record["command"] = [a.replace(str(ablate.ROOT), elsewhere) for a in record["command"]]
    assert record["command"][:3] == [f"{elsewhere}/train/helix.py", "--config", f"{elsewhere}/configs/base/cpu.yaml"]
    record["command"] = [f"run.output_dir=../{out.name}" if a.startswith("run.output_dir=") else a
                         for a in record["command"]]  # the same folder, named from where that clone stood
    done.write_text(json.dumps(record))
    assert ablate.main([*args, "--set", "rollout.max_new_tokens=64"]) == 0
    assert len(calls) == 1, "a finished run was run again only because the checkout moved"

    assert ablate.main([*args, "--set", "rollout.max_new_tokens=32"]) == 0 and len(calls) == 2
    kept = out / "helix-s0.replaced-1"
    assert f"kept as {kept}" in capsys.readouterr().out
    assert json.loads((kept / ablate.DONE).read_text()) == record and (kept / "archive.sqlite").is_file()
    assert "rollout.max_new_tokens=32" in json.loads(done.read_text())["command"]
    assert ablate.main([*args, "--set", "rollout.max_new_tokens=16"]) == 0
    assert (out / "helix-s0.replaced-2" / ablate.DONE).is_file() and kept.is_dir()
    assert [r["variant"] for r in json.loads((out / "ablation.json").read_text())["rows"]] == ["helix"]


def test_settings_ignore_where_the_checkout_and_the_output_folder_are():
    a = ["/a/repo/train/helix.py", "--config", "/a/repo/configs/x.yaml", "run.seed=0", "run.output_dir=runs/q"]
    b = ["/b/clone/train/helix.py", "--config", "/b/clone/configs/x.yaml", "run.seed=0", "run.output_dir=/b/clone/runs/q"]
    assert ablate.settings(a) == ablate.settings(b) == ["--config", "configs/x.yaml", "run.seed=0"]
    outside = ["/a/repo/train/helix.py", "--config", "/etc/helix/x.yaml", "run.seed=0"]
    assert ablate.settings(outside) == ["--config", "/etc/helix/x.yaml", "run.seed=0"]  # not the checkout's: kept whole
    assert ablate.settings(a) != ablate.settings([*a[:3], "run.seed=1"])
    assert ablate.settings([]) == []


def test_a_run_is_measured_by_its_largest_resident_set_including_its_children(tmp_path):
    """The peak counts the run's own children (the sandboxed programs): a parent that stays small and a child that
    touches 200 MB reads as at least 200 MB; a failing run gives its exit code and stderr."""
    child = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096])"
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}], check=True)"
    code, err, peak_kb = ablate._run_measured([sys.executable, "-c", parent], quiet=True)
    assert (code, err) == (0, "") and peak_kb >= 200 * 1024
    code, err, _ = ablate._run_measured([sys.executable, "-c", "import sys; sys.exit('broken: 7')"], quiet=True)
    assert code == 1 and "broken: 7" in err
