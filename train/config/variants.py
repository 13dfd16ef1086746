"""The ablation variants' settings: configs/ablations/<variant>.yaml, each the setting(s) it changes
(helix: none). Read by the run's name (train.config.run_name: which variant a config amounts to) and
by the ablation runner (train.commands.ablate), so naming a run needs no runner."""

from __future__ import annotations

from pathlib import Path

import yaml

# The checkout (configs/): as many folders up as this module is deep in train/.
ROOT = Path(__file__).resolve().parents[__name__.count(".")]
CONFIGS = ROOT / "configs"
ABLATIONS = CONFIGS / "ablations"


def available_variants() -> list[str]:
    return sorted(p.stem for p in ABLATIONS.glob("*.yaml"))


def _leaves(data: dict) -> dict:
    """{"section.key": value}, nested sections too ("rollout.vllm.tp"); a mapping-valued setting
    (evolution.operators) stays one setting."""
    from train.config.config import HelixConfig
    from train.config.schema import leaves

    for section, value in data.items():
        if not isinstance(value, dict):
            raise ValueError(f"'{section}' must be a section (a mapping of settings), got {value!r}")
    return leaves(data, HelixConfig)


def variant_settings(variant: str) -> dict:
    """A variant overlay's settings as {"section.key": value} (helix: {})."""
    path = ABLATIONS / f"{variant}.yaml"
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict) or "base" in data:
        raise ValueError(f"{path}: a variant overlay is a mapping of the setting(s) it changes, with no 'base'")
    return _leaves(data)
