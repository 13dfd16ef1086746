import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from train.config.config import ConfigError, HelixConfig, check_learner_names, config_source, dump_config, load_config
from train.config.schema import bounds, parse_bound, parse_override

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def write(tmp_path, data) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_every_config_file_loads():
    files = sorted(CONFIGS.glob("*.yaml")) + sorted((CONFIGS / "base").glob("*.yaml"))
    assert len(files) >= 5, "configs/ has no YAML files"
    for path in files:
        assert isinstance(load_config(path), HelixConfig)


def test_defaults_follow_the_paper():
    cfg = load_config(None)
    assert cfg.trainer.lr == 1e-6 and cfg.trainer.kl_coef == 1e-3 and cfg.trainer.kl_type == "low_var_kl"
    assert cfg.rollout.group_size == 16 and cfg.rollout.temperature == 1.0 and cfg.rollout.top_p == 0.95
    assert cfg.trainer.epochs == 80 and cfg.population.knn_k == 5 and cfg.selection.strategy == "nsga2"
    # eq. 4: 1/G sum_j 1/|a_j| sum_k, i.e. verl's seq-mean-token-mean, not verl's token-mean default
    assert cfg.trainer.loss_agg_mode == "seq-mean-token-mean"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_configs_aggregate_the_loss_as_eq4(path):
    assert load_config(path).trainer.loss_agg_mode == "seq-mean-token-mean"


def test_unknown_key_names_key_file_and_nearest(tmp_path):
    path = write(tmp_path, {"trainer": {"kl_coeff": 0.1}})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert "trainer.kl_coeff" in msg and str(path) in msg and "Did you mean 'kl_coef'" in msg


def test_unknown_section_names_nearest(tmp_path):
    with pytest.raises(ConfigError, match="Did you mean 'trainer'"):
        load_config(write(tmp_path, {"trainr": {"lr": 1.0}}))


@pytest.mark.parametrize("override, fragment", [
    ("rollout.group_size=1", "rollout.group_size = 1 must be >= 2"),
    ("population.knn_k=0", "population.knn_k = 0 must be >= 1"),
    ("trainer.lr=-1e-6", "trainer.lr = -1e-06 must be >= 0"),
    ("rollout.group_size=4.5", "expected an integer"),
    ("trainer.lr=fast", "expected a number"),
    ("trainer.enabled=3", "expected true or false"),
    ("trainer.loss_agg_mode=token_mean", "Did you mean 'token-mean'"),
    ("selection.strategy=nsga", "Did you mean 'nsga2'"),
    ("rollout.engine=hff", "Did you mean 'hf'"),
    ("task.name=circle_packing26", "Did you mean 'circle_packing_26'"),
    ("run.stop_at_reward=bestknown", "is neither a number nor one of ['best_known'] (nor null). Did you mean 'best_known'?"),
    ("run.stop_at_reward=true", "run.stop_at_reward: True is neither a number nor one of ['best_known']"),
    ("run.stop_at_reward=.inf", "run.stop_at_reward = inf must be a finite number, best_known or null"),
])
def test_bad_values_fail_at_start_up(override, fragment):
    with pytest.raises(ConfigError) as err:
        load_config(CONFIGS / "quickstart.yaml", [override])
    assert fragment in str(err.value)
    assert "quickstart.yaml" in str(err.value)


@pytest.mark.parametrize("override, fragment", [
    ("trainer.adv_estimator=grpoo", "Did you mean 'grpo'"),
    ("trainer.policy_loss=gspoo", "Did you mean 'gspo'"),
])
def test_verls_names_are_checked_where_a_run_starts(override, fragment):
    """Only verl knows its estimators and losses, and importing it imports torch: loading leaves them to
    check_learner_names, which the run's start calls before the warm start (train.api.start.execute)."""
    cfg = load_config(CONFIGS / "quickstart.yaml", [override])
    with pytest.raises(ConfigError) as err:
        check_learner_names(cfg, config_source(CONFIGS / "quickstart.yaml", [override]))
    assert fragment in str(err.value) and "quickstart.yaml" in str(err.value) and override in str(err.value)
    check_learner_names(load_config(CONFIGS / "quickstart.yaml", [override, "trainer.enabled=false"]))  # EvoOnly: unused


def test_loading_and_checking_a_config_imports_no_torch():
    """The config, every section's bounds and every registry name but verl's, without torch (seconds saved on
    every command that reads a config, and on every error in one)."""
    code = ("import sys; from train.config.config import load_config; "
            "cfg = load_config('configs/quickstart.yaml', ['trainer.dynamic_sampling.enabled=true']); "
            "print(cfg.task.name, sorted(m for m in ('torch', 'verl', 'transformers') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=CONFIGS.parent, timeout=300)
    assert proc.stdout.strip() == "circle_packing_26 []", proc.stderr


def test_dotted_overrides_and_yaml_scientific_notation(tmp_path):
    path = write(tmp_path, {"trainer": {"lr": "1e-6"}})  # PyYAML reads 1e-6 as a string
    cfg = load_config(path, ["trainer.lr=2e-6", "selection.strategy=top_score", "run.name=x"])
    assert cfg.trainer.lr == 2e-6 and isinstance(cfg.trainer.lr, float)
    assert cfg.selection.strategy == "top_score" and cfg.run.name == "x"


def test_override_syntax_error():
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_override("trainer.lr")


def test_resolved_config_round_trips(tmp_path):
    cfg = load_config(CONFIGS / "quickstart.yaml", ["trainer.lr=3e-6"])
    dump_config(cfg, tmp_path / "resolved.yaml")
    assert load_config(tmp_path / "resolved.yaml") == cfg


def test_the_tasks_own_time_limit_is_resolved_and_dumped(tmp_path):
    """task.timeout_s unset: the task's own limit from its task.yaml, per task.timeout_scale, is in the loaded
    config and in the dumped config.yaml (which then loads back to the same config); a number set wins."""
    from tasks.base import TASKS_DIR

    spec = yaml.safe_load((TASKS_DIR / "keane_bump_20" / "task.yaml").read_text())
    assert (spec["timeout_s"], spec["cpu_timeout_s"]) == (120, 30)  # the paper's two minutes; 30 s on a CPU box
    assert load_config(None, ["task.name=keane_bump_20"]).task.timeout_s == 120.0
    cfg = load_config(CONFIGS / "base" / "cpu.yaml", ["task.name=keane_bump_20"])
    assert (cfg.task.timeout_scale, cfg.task.timeout_s) == ("cpu", 30.0)
    dump_config(cfg, tmp_path / "config.yaml")
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["task"]["timeout_s"] == 30.0
    assert load_config(tmp_path / "config.yaml") == cfg
    assert load_config(CONFIGS / "base" / "cpu.yaml", ["task.name=keane_bump_20", "task.timeout_s=45"]).task.timeout_s == 45.0


def test_a_task_without_a_cpu_limit_runs_with_its_paper_limit_at_cpu_scale(tmp_path, monkeypatch):
    import shutil

    import tasks.base as base

    shutil.copytree(base.TASKS_DIR / "eggholder", tmp_path / "eggholder")
    spec = tmp_path / "eggholder" / "task.yaml"
    spec.write_text("\n".join(line for line in spec.read_text().splitlines() if not line.startswith("cpu_timeout_s")))
    monkeypatch.setattr(base, "TASKS_DIR", tmp_path)
    assert base.own_timeout_s("eggholder", "cpu") == base.own_timeout_s("eggholder", "paper") == 120.0


def test_an_unknown_timeout_scale_names_the_valid_ones():
    with pytest.raises(ConfigError, match="task.timeout_scale.*'gpu'.*'cpu'"):
        load_config(None, ["task.timeout_scale=gpu"])


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_an_overlay_that_sets_one_nested_key_keeps_the_rest_of_its_section(tmp_path):
    (tmp_path / "base.yaml").write_text("rollout:\n  engine: vllm\n  vllm: {dtype: bfloat16, kv_cache_gb: 16, sleep_level: 1}\n"
                                        "evolution: {operators: {edit: 1.0, rewrite: 1.0}}\n")
    (tmp_path / "child.yaml").write_text("base: base.yaml\nrollout: {vllm: {tp: 2}}\nevolution: {operators: {edit: 1.0}}\n")
    cfg = load_config(tmp_path / "child.yaml", ["rollout.vllm.sleep_level=2", "rollout.openai.timeout_s=30"])
    v = cfg.rollout.vllm
    assert (v.tp, v.dtype, v.kv_cache_gb, v.sleep_level, v.enforce_eager) == (2, "bfloat16", 16.0, 2, True)
    assert cfg.rollout.engine == "vllm" and cfg.rollout.openai.timeout_s == 30.0 and cfg.rollout.openai.max_retries == 4
    assert cfg.evolution.operators == {"edit": 1.0}  # a mapping-valued setting is replaced whole, not merged


OLD_FLAT_KEYS = ["vllm_tp", "vllm_dtype", "vllm_enforce_eager", "vllm_gpu_memory_utilization", "vllm_kv_cache_gb",
                 "vllm_max_model_len", "vllm_prefix_caching", "vllm_sleep_level", "vllm_workspace", "openai_base_url",
                 "openai_model", "openai_api_key_env", "openai_timeout_s", "openai_max_retries"]


@pytest.mark.parametrize("old", OLD_FLAT_KEYS)
def test_an_old_flat_key_names_its_new_place(tmp_path, old):
    section, key = old.split("_", 1)
    with pytest.raises(ConfigError) as err:
        load_config(CONFIGS / "quickstart.yaml", [f"rollout.{old}=1"])
    assert f"rollout.{old} is now rollout.{section}.{key}" in str(err.value)
    path = write(tmp_path, {"rollout": {old: 1}})
    with pytest.raises(ConfigError, match=rf"{path}: rollout.{old} is now rollout.{section}.{key}"):
        load_config(path)


def test_an_unknown_nested_key_names_the_nearest_one():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["rollout.vllm.kv_cache_gib=4"])
    assert "unknown key 'rollout.vllm.kv_cache_gib'. Did you mean 'kv_cache_gb'?" in str(err.value)
    with pytest.raises(ConfigError, match="rollout.vllm.tp: expected an integer"):
        load_config(None, ["rollout.vllm.tp=two"])
    with pytest.raises(ConfigError, match=r"rollout.vllm.gpu_memory_utilization = 0.0 must be in \(0, 1\]"):
        load_config(None, ["rollout.vllm.gpu_memory_utilization=0"])


@pytest.mark.parametrize("text, inside, outside", [
    (">= 2 (GRPO needs a group)", [2, 3, 1e9], [1, 1.999, -2]),
    ("> 0", [1e-12, 5], [0, -1e-12]),
    ("<= 1", [1, -3], [1.0001]),
    ("< 1", [0.999], [1, 2]),
    ("in (0, 1]", [1e-9, 0.5, 1], [0, 1.0001, -1]),
    ("in [0, 1)", [0, 0.999], [1, -1e-9]),
    ("in [-2.5, 1e3]", [-2.5, 1000], [-2.51, 1000.1]),
])
def test_a_bound_holds_exactly_inside_its_range(text, inside, outside):
    holds = parse_bound(text)
    assert all(holds(v) for v in inside) and not any(holds(v) for v in outside)


@pytest.mark.parametrize("text", ["at least 2", ">=", "in (0, 1", "between 0 and 1", "=> 1", ">= 2x"])
def test_a_bound_that_states_no_range_is_refused(text):
    with pytest.raises(TypeError, match="states no range"):
        parse_bound(text)


def test_every_sections_bounds_parse_and_its_defaults_keep_them():
    checked = 0
    for section in dataclasses.fields(HelixConfig):
        default = getattr(HelixConfig(), section.name)
        for cls in {type(default)} | {type(v) for v in vars(default).values() if dataclasses.is_dataclass(v)}:
            for name, texts in bounds(cls).items():
                value = getattr(cls(), name)
                checked += 1
                assert all(value is None or parse_bound(t)(value) for t in texts), (cls.__name__, name, value)
    assert checked >= 40


def test_a_closed_set_of_numbers_takes_no_bool():
    with pytest.raises(ConfigError, match=r"trainer.zero_stage: True is not one of \[1, 2, 3\]"):
        load_config(None, ["trainer.zero_stage=true"])
    assert load_config(None, ["trainer.zero_stage=2"]).trainer.zero_stage == 2


@pytest.mark.parametrize("text, value", [("2.5", 2.5), ("3", 3.0), ("'1e-3'", 0.001), ("best_known", "best_known"),
                                         ("null", None)])
def test_stop_at_reward_takes_a_number_or_best_known(text, value):
    cfg = load_config(CONFIGS / "quickstart.yaml", [f"run.stop_at_reward={text}"])
    assert cfg.run.stop_at_reward == value and type(cfg.run.stop_at_reward) is type(value)
