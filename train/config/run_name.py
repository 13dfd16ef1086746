"""A new run's folder name: ``<task>-<variant>-<timestamp>``, e.g. ``spread_points_12-helix-20261201-101500``.

The variant is the ablation variant the config amounts to: the overlays in configs/ablations/ (what
scripts/ablate.py applies and its report names, train/commands/ablate.py) whose every setting the config
holds, leaving out one held inside a larger one (best_of_n = evo_only + no population: best_of_n), joined
with ``+`` when several remain (the quickstart trains LoRA adapters, so its top_score run is
``lora+top_score``); ``helix`` when none does. So ``trainer.enabled=false`` names the run
``...-evo_only-...`` on the CPU base, and a quickstart run on another task is named after that task, not after the config.
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
    held = {v: variant_settings(v).items() for v in available_variants()}
    held = {v: items for v, items in held.items() if items and all(_holds(config, k, x) for k, x in items)}
    kept = [v for v, items in held.items() if not any(w != v and items < other for w, other in held.items())]
    return "+".join(sorted(kept)) or "helix"


def default_run_name(cfg: HelixConfig) -> str:
    return f"{cfg.task.name}-{variant_of(cfg)}-{time.strftime('%Y%m%d-%H%M%S')}"
