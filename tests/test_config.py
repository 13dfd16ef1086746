from pathlib import Path

import pytest
import yaml

from train.config import ConfigError, HelixConfig, dump_config, load_config, parse_override

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def write(tmp_path, data) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_every_config_file_loads():
    files = sorted(CONFIGS.glob("*.yaml"))
    assert files, "configs/ has no YAML files"
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
    ("trainer.adv_estimator=grpoo", "Did you mean 'grpo'"),
    ("trainer.policy_loss=gspoo", "Did you mean 'gspo'"),
])
def test_bad_values_fail_at_start_up(override, fragment):
    with pytest.raises(ConfigError) as err:
        load_config(CONFIGS / "quickstart.yaml", [override])
    assert fragment in str(err.value)
    assert "quickstart.yaml" in str(err.value)


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


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
