"""Every shipped config loads and validates; every ablation is its base plus one setting."""

from pathlib import Path

import pytest
import yaml

from train.config import ConfigError, load_config, to_dict

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
ALL = sorted(CONFIGS.rglob("*.yaml"))
ABLATIONS = sorted((CONFIGS / "ablations").rglob("*.yaml"))


def _leaves(d: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def test_there_are_configs_to_check():
    assert len(ALL) >= 10 and len(ABLATIONS) >= 7


@pytest.mark.parametrize("path", ALL, ids=[str(p.relative_to(CONFIGS)) for p in ALL])
def test_config_loads_and_validates(path):
    cfg = load_config(path)
    assert cfg.trainer.epochs >= 1
    header = path.read_text().splitlines()[0]
    assert header.startswith("#"), f"{path} must open with a comment saying what it is for"


@pytest.mark.parametrize("path", ABLATIONS, ids=[str(p.relative_to(CONFIGS)) for p in ABLATIONS])
def test_ablation_changes_exactly_one_setting_of_its_base(path):
    base = path.parent / yaml.safe_load(path.read_text())["base"]
    diff = {k: v for k, v in _leaves(to_dict(load_config(path))).items() if _leaves(to_dict(load_config(base)))[k] != v}
    expected = {"helix": 0}.get(path.stem, 1)
    assert len(diff) == expected, f"{path.name} differs from {base.name} in {diff}"


def test_ablation_modes_mean_what_they_say():
    by_name = {p.stem: load_config(p) for p in (CONFIGS / "ablations" / "circle_packing_26").glob("*.yaml")}
    assert by_name["evo_only"].trainer.enabled is False and by_name["evo_only"].population.enabled is True
    assert by_name["train_only"].trainer.enabled is True and by_name["train_only"].population.enabled is False
    assert by_name["best_of_n"].trainer.enabled is False and by_name["best_of_n"].population.enabled is False
    assert {by_name[s].selection.strategy for s in ("top_score", "top_div", "random")} == {"top_score", "top_div", "random"}


def test_base_chain_errors_are_clear(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("base: missing.yaml\n")
    with pytest.raises(ConfigError, match="missing.yaml.*the base of"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("base: e.yaml\ntrainer: {lr: 2.0e-6}\n")
    (tmp_path / "e.yaml").write_text("trainer: {lr: 1.0e-6, epochs: 3}\n")
    cfg = load_config(tmp_path / "d.yaml")
    assert cfg.trainer.lr == 2e-6 and cfg.trainer.epochs == 3  # the child's value wins, the rest is inherited
