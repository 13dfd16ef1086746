"""What the GRPO update applied to each child, kept with the child in the archive (the run browser and the
report show it)."""

from __future__ import annotations

from population.child import Child
from train.config.config import HelixConfig
from train.loop.dynamic_sampling import DROPPED


def record_advantages(children: list[Child], advantages: dict, rewards: list[list[float]], cfg: HelixConfig) -> None:
    """Each child's advantage as the GRPO update applied it, and what the estimator saw (its reward, its
    token count in the update, the estimator): archived with the child for the run browser and report."""
    for k, child in enumerate(children):
        j, g = divmod(k, cfg.rollout.group_size)
        reward = rewards[j][g]
        inputs = dict(estimator=cfg.trainer.adv_estimator, norm_by_std=cfg.trainer.norm_adv_by_std,
                      reward=None if reward != reward else reward)
        if (j, g) in advantages:
            child.advantage, inputs["tokens"] = advantages[(j, g)]
        else:  # dynamic sampling left the group out of the update
            child.advantage = None
            inputs.update(tokens=0, dropped=DROPPED)
        child.advantage_inputs = inputs
