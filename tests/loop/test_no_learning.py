"""Issue 33's smaller pieces: the no-learning warning, run names, the improvement tolerance of a new
best, no unrelated name suggestion, the warm start's time estimate, and the Ctrl-C line."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from population.child import Child
from tasks import load_task
from tests.helpers.env import child_env
from train.config.config import ConfigError, load_config
from train.config.run_name import default_run_name, variant_of
from train.loop.epoch_metrics import operator_metrics
from train.loop.no_learning import LearningWatch
from train.warm_start.eta import estimate_s

ROOT = Path(__file__).resolve().parents[2]
QUICK = str(ROOT / "configs" / "quickstart.yaml")


def row(epoch, **m):
    base = dict(epoch=epoch, n_programs=0, edit_fail_frac=1.0, zero_std_frac=1.0, valid_frac=0.0, truncated_frac=0.0,
                unchanged_frac=0.0, repeat_frac=0.0, prompt_items_dropped=0)
    return {**base, **m}


def test_warns_once_after_the_configured_streak_with_the_likely_cause():
    cold = load_config(str(ROOT / "configs" / "base" / "cpu.yaml"), ["task.name=eggholder"])  # the old recipe: no warm start
    watch = LearningWatch(cold, 2)
    assert watch.update(row(1)) is None
    warning = watch.update(row(2))
    assert "not learning" in warning and "epochs 1-2" in warning and "warm start off" in warning
    assert "warm_start.enabled=true" in warning
    assert watch.update(row(3)) is None  # once per run


def test_a_healthy_epoch_resets_the_streak_and_zero_disables():
    cfg = load_config(QUICK)
    watch = LearningWatch(cfg, 2)
    assert watch.update(row(1)) is None
    assert watch.update(row(2, n_programs=3, edit_fail_frac=0.25, zero_std_frac=0.5)) is None
    assert watch.update(row(3)) is None  # the streak started again
    assert "epochs 3-4" in watch.update(row(4))
    never = LearningWatch(cfg, 0)
    assert all(never.update(row(e)) is None for e in range(1, 6))


@pytest.mark.parametrize("metrics, cause", [
    (dict(truncated_frac=0.9), "answers truncated (90% hit rollout.max_new_tokens = 256"),
    (dict(n_programs=8, edit_fail_frac=0.0, valid_frac=1.0, unchanged_frac=0.5), "the children ran but scored alike"),
    (dict(prompt_items_dropped=3), "the model too small for this prompt (smollm2-135m-instruct; 3.0 prompt items cut"),
])
def test_the_cause_follows_the_metrics_when_warm_started(metrics, cause):
    watch = LearningWatch(load_config(QUICK), 1)
    assert cause in watch.update(row(1, **metrics))


def test_run_names_follow_the_task_and_the_variant():
    name = default_run_name(load_config(QUICK, ["task.name=mishra_bird"]))  # the quickstart trains LoRA adapters
    assert name.startswith("mishra_bird-lora-") and len(name.rsplit("-", 2)[-2]) == 8
    assert default_run_name(load_config(QUICK, ["task.name=mishra_bird", "trainer.lora.enabled=false"])).startswith(
        "mishra_bird-helix-")
    full = ["trainer.lora.enabled=false"]  # the full fine-tune: the quickstart's other settings are no variant's
    assert variant_of(load_config(QUICK, full + ["trainer.enabled=false"])) == "evo_only"
    assert variant_of(load_config(QUICK, full + ["trainer.enabled=false", "population.enabled=false"])) == "best_of_n"
    assert variant_of(load_config(QUICK, full + ["selection.strategy=top_score"])) == "top_score"
    assert variant_of(load_config(QUICK, full + ["evolution.operators={edit: 0.7, rewrite: 0.3}"])) == "rewrite_30"
    assert variant_of(load_config(QUICK, ["selection.strategy=top_score"])) == "lora+top_score"  # both held: both named
    assert variant_of(load_config(QUICK, ["trainer.enabled=false", "population.enabled=false"])) == "best_of_n+lora"


def test_new_best_needs_more_than_the_tasks_tolerance():
    task = load_task("circle_packing_26")
    best = 1.8414
    def kid(reward, valid=True):
        return Child(0, 1, "e1-p0-g0", "", "", reward=reward, valid=valid, is_program=True)

    kids = [kid(best * (1 + 1e-13)), kid(best * (1 + 1e-6)), kid(best), kid(2.0, valid=False)]  # noise, real, tie, invalid
    assert operator_metrics(kids, best, task.improves)["op_edit_new_best_frac"] == 0.25
    assert operator_metrics(kids, best)["op_edit_new_best_frac"] == 0.5  # strict '>' counts the noise
    assert task.improvement_tolerance == 1e-9 and task.improves(1.0, None)


def test_a_name_with_no_close_match_gets_no_suggestion():
    with pytest.raises(ConfigError) as info:
        load_config(QUICK, ["task.name=zzzzqqq"])
    assert "Did you mean" not in str(info.value)
    with pytest.raises(ValueError) as info:
        load_task("zzzzqqq")
    assert "Did you mean" not in str(info.value)


def test_warm_start_estimate_matches_the_measured_default_builds():
    # 8 parents x 8 answers x 2 epochs: 7.3 min measured in fp32 (AVX2-only), 2 min 52 s with native bf16
    assert estimate_s(8, 8, 2, 1, "float32") / 60 == pytest.approx(7.3, rel=0.05)
    assert estimate_s(8, 8, 2, 1, "bfloat16") == pytest.approx(172, rel=0.1)
    assert estimate_s(16, 8, 2, 1, "float32") == pytest.approx(2 * estimate_s(8, 8, 2, 1, "float32"))


@pytest.mark.slow
def test_ctrl_c_is_one_line_and_the_run_resumes_with_the_printed_command(tmp_path):
    tiny = ["model.policy=tiny-random", "warm_start.enabled=false", "rollout.engine=hf", "rollout.max_new_tokens=12",
            "rollout.group_size=2", "trainer.prompts_per_epoch=2", "task.eval_workers=2", "population.size=4",
            "run.wandb=disabled", "run.export=false", "trainer.epochs=30", "run.progress=false", f"run.output_dir={tmp_path}", "run.name=r",
            "run.async_checkpoint=true"]  # the asynchronous writer's thread is running when the signal lands
    cmd = [sys.executable, str(ROOT / "train" / "helix.py"), "--config", QUICK, *tiny]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    metrics = tmp_path / "r" / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (metrics.is_file() and len(metrics.read_text().splitlines()) >= 2):
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground process group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in out + err, err
    assert lines[0].startswith("helix: interrupted in epoch ") and "; last complete checkpoint: epoch " in lines[0]
    assert "UserWarning" not in out + err  # library warnings go to library.log (tests/learner/test_console.py)
    assert "torch.distributed is disabled" not in (tmp_path / "r" / "library.log").read_text()  # filtered at the source
    resume = lines[0].split("resume with: ", 1)[1].split()
    assert resume[0] == "python" and resume[1].endswith("train/helix.py") and resume[2:] == ["--resume", str(tmp_path / "r")]
    done = int(lines[0].split("last complete checkpoint: epoch ", 1)[1].split()[0])
    again = subprocess.run([sys.executable, *resume[1:], f"trainer.epochs={done + 1}"], cwd=ROOT, env=child_env(),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"(epoch {done} of {done + 1})" in again.stdout
