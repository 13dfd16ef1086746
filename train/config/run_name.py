"""A new run's folder name: ``<task>-<variant>-<timestamp>``, e.g. ``spread_points_12-helix-20261201-101500``.

The variant is the ablation variant the config amounts to: the overlay in configs/ablations/ (what
scripts/ablate.py applies and its report names, train/commands/ablate.py) whose every setting the config
holds, the one with most settings when several do (best_of_n = evo_only + no population); ``helix``
when none does. So ``trainer.enabled=false`` names the run ``...-evo_only-...`` whichever config it
came from, and a quickstart run on another task is named after that task, not after the config.
"""

from __future__ import annotations

import time

from train.config.config import HelixConfig, to_dict
from train.config.variants import available_variants, variant_settings


def _holds(config: dict, dotted: str, value) -> bool:
    have = config
    for part in dotted.split("."):  # as deep as the setting's name goes (rollout.vllm.tp)
        have = have.get(part, object()) if isinstance(have, dict) else object()
    if isinstance(value, dict) and isinstance(have, dict):
        return {k: float(v) for k, v in value.items()} == {k: float(v) for k, v in have.items()}
    return have == value


def variant_of(cfg: HelixConfig) -> str:
    config = to_dict(cfg)
    best, size = "helix", 0
    for variant in available_variants():  # sorted: a tie goes to the first name
        settings = variant_settings(variant)
        if len(settings) > size and all(_holds(config, k, v) for k, v in settings.items()):
            best, size = variant, len(settings)
    return best


def default_run_name(cfg: HelixConfig) -> str:
    return f"{cfg.task.name}-{variant_of(cfg)}-{time.strftime('%Y%m%d-%H%M%S')}"
