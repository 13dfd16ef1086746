"""GRPO math (paper eq. 4), delegated to verl's ``core_algos`` registries.

Pure tensors in, tensors out: no models, no distributed state. The config names verl's
advantage estimator and policy-loss mode, so every variant verl registers (grpo, rloo,
gspo, clip_cov, kl_cov, ...) is one config line away. One estimator is HELIX's own:
``entropic_adaptive_beta`` (TTT-Discover's max-seeking advantage, ``train.learner.entropic``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import numpy as np
import torch
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo import core_algos
from verl.workers.config import ActorConfig
from verl.workers.config.actor import PolicyLossConfig

from train.learner import entropic
from train.learner.config import GROUP_RELATIVE

# What an outcome-reward estimator may require: verl's critic (gae) and baseline-model (remax) or
# log-prob-based (optimal_token_baseline) estimators need inputs a HELIX step does not have.
_OUTCOME_INPUTS = {"token_level_rewards", "response_mask", "index", "config"}


def known_estimators() -> list[str]:
    """verl's registered advantage estimators that work from outcome rewards and groups alone,
    plus HELIX's entropic one."""
    import inspect

    names = []
    for key, fn in core_algos.ADV_ESTIMATOR_REGISTRY.items():
        required = {n for n, p in inspect.signature(fn).parameters.items()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if required <= _OUTCOME_INPUTS:
            names.append(str(getattr(key, "value", key)))
    return sorted(names + [entropic.NAME])


def known_policy_losses() -> list[str]:
    return sorted(core_algos.POLICY_LOSS_REGISTRY)


def outcome_token_rewards(rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Place each sequence's scalar reward on its last response token, as verl expects (float64)."""
    token_rewards = torch.zeros_like(response_mask, dtype=torch.float64)
    last = (response_mask.sum(-1) - 1).clamp(min=0).long()
    token_rewards[torch.arange(len(rewards)), last] = rewards.to(torch.float64)
    return token_rewards


def tied_groups(rewards: torch.Tensor, group_ids: np.ndarray) -> np.ndarray:
    """Per sample: is its group's reward exactly equal across the group (max == min, in float64)?
    Such a group carries no signal, whatever rounding the mean and std would add."""
    r = torch.as_tensor(rewards, dtype=torch.float64).detach().cpu().numpy()
    groups = np.asarray(list(group_ids), dtype=object)
    tied = np.zeros(len(r), dtype=bool)
    for g in dict.fromkeys(groups.tolist()):
        members = groups == g
        tied[members] = r[members].max() == r[members].min()
    return tied


def compute_advantages(rewards: torch.Tensor, group_ids: np.ndarray, response_mask: torch.Tensor,
                       estimator: str = "grpo", norm_by_std: bool = True) -> torch.Tensor:
    """Group-relative advantages, one per token, from verl's estimator run in float64.

    float64 because rewards that differ in their 7th digit (2.6359830849 vs 2.6359831849) are one
    float32 ulp apart: in float32 the mean lands an ulp off and the std is an ulp, so the group
    either reads as ties with a spurious +-0.19 or loses its order. A group whose rewards are all
    exactly equal gets exactly 0 (verl's (r - mean) / (std + eps) would leave rounding residue)."""
    rewards64 = torch.as_tensor(rewards, dtype=torch.float64)
    mask64 = response_mask.to(torch.float64)
    if estimator == entropic.NAME:  # one scalar per sample, on every response token (as verl's outcome estimators)
        return (entropic.entropic_advantages(rewards64, group_ids).unsqueeze(-1) * mask64).to(torch.float32)
    token_rewards = outcome_token_rewards(rewards64, mask64)
    fn = core_algos.get_adv_estimator_fn(estimator)
    kwargs = dict(token_level_rewards=token_rewards, response_mask=mask64, index=np.asarray(group_ids, dtype=object))
    if estimator == "grpo":
        kwargs["norm_adv_by_std_in_grpo"] = norm_by_std
    else:
        kwargs["config"] = AlgoConfig(adv_estimator=estimator, norm_adv_by_std_in_grpo=norm_by_std)
    advantages, _ = fn(**kwargs)
    advantages = advantages.to(torch.float64)
    if estimator in GROUP_RELATIVE:
        advantages[torch.from_numpy(tied_groups(rewards64, group_ids))] = 0.0
    return advantages.to(torch.float32)


def zero_std_fraction(rewards: torch.Tensor, group_ids: np.ndarray) -> float:
    """Fraction of groups whose rewards are all exactly equal: they carry no GRPO signal (their
    advantages are exactly 0), and no other group is counted."""
    groups = list(group_ids)
    if not groups:
        return 0.0
    tied = {g for g, t in zip(groups, tied_groups(rewards, groups)) if t}
    return len(tied) / len(set(groups))


def groups_with_spread(rewards: list[list[float]], estimator: str = "grpo", norm_by_std: bool = True,
                       tolerance: float = 1e-6) -> list[bool]:
    """Per group: does the update learn from it, i.e. is one of its advantages, as ``estimator`` computes
    them, above ``tolerance`` in absolute value? Measured on the advantage, not on the rewards, so the
    answer is the estimator's own (dynamic sampling, train.loop.dynamic_sampling). NaN rewards (children
    the infrastructure lost) are left out as the learner leaves them out; fewer than two left: no spread."""
    out = []
    for group in rewards:
        scored = torch.tensor([r for r in group if r == r], dtype=torch.float64)
        if len(scored) < 2:
            out.append(False)
            continue
        advantages = compute_advantages(scored, np.zeros(len(scored), dtype=np.int64),
                                        torch.ones((len(scored), 1)), estimator, norm_by_std)
        out.append(bool(advantages.abs().max() > tolerance))
    return out


@dataclass(frozen=True)
class LossSettings:
    policy_loss: str = "vanilla"
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    loss_agg_mode: str = "seq-mean-token-mean"  # eq. 4: 1/G sum_j 1/|a_j| sum_k
    kl_coef: float = 1e-3
    kl_type: str = "low_var_kl"
    entropy_coeff: float = 0.0
    group_size: int = 16


def actor_config(settings: LossSettings, dp_size: int, batch_num_tokens: int, global_batch_size: int) -> ActorConfig:
    """verl's ActorConfig carrying the clip settings and the *global* batch size, so a
    micro-batch loss is normalised over the whole (all-rank) batch and sums exactly."""
    cfg = ActorConfig(
        strategy="fsdp",
        rollout_n=settings.group_size,
        clip_ratio=settings.clip_ratio_low,
        clip_ratio_low=settings.clip_ratio_low,
        clip_ratio_high=settings.clip_ratio_high,
        loss_agg_mode=settings.loss_agg_mode,
        entropy_coeff=settings.entropy_coeff,
        use_kl_loss=settings.kl_coef > 0,
        kl_loss_coef=settings.kl_coef,
        kl_loss_type=settings.kl_type,
        ppo_micro_batch_size_per_gpu=1,
        policy_loss=PolicyLossConfig(loss_mode=settings.policy_loss),
        global_batch_info=dict(dp_size=dp_size, batch_num_tokens=batch_num_tokens, global_batch_size=global_batch_size),
    )
    return cfg


def grpo_loss(log_prob: torch.Tensor, old_log_prob: torch.Tensor, ref_log_prob: torch.Tensor | None,
              advantages: torch.Tensor, response_mask: torch.Tensor, entropy: torch.Tensor | None,
              cfg: ActorConfig, rollout_is_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """Eq. 4 as a loss to minimise: clipped policy-gradient term + beta * KL - entropy bonus.
    ``rollout_is_weights`` (verl's rollout correction) reweights the policy-gradient term per token."""
    mask = response_mask.float()
    policy_fn = core_algos.get_policy_loss_fn(cfg.policy_loss.loss_mode)
    pg_loss, pg_metrics = policy_fn(
        old_log_prob=old_log_prob, log_prob=log_prob, advantages=advantages, response_mask=mask,
        loss_agg_mode=cfg.loss_agg_mode, config=cfg, rollout_is_weights=rollout_is_weights,
    )
    loss = pg_loss
    metrics = {"pg_loss": pg_loss.item(), "clip_frac": pg_metrics.get("actor/pg_clipfrac", 0.0)}
    if ref_log_prob is not None and cfg.kl_loss_coef > 0:
        kl_mat = core_algos.kl_penalty(log_prob, ref_log_prob, cfg.kl_loss_type)
        kl = core_algos.agg_loss(kl_mat, mask, cfg.loss_agg_mode, **cfg.global_batch_info)
        loss = loss + cfg.kl_loss_coef * kl
        metrics["kl"] = kl.item()
    if entropy is not None:
        ent = core_algos.agg_loss(entropy, mask, cfg.loss_agg_mode, **cfg.global_batch_info)
        if cfg.entropy_coeff > 0:
            loss = loss - cfg.entropy_coeff * ent
        metrics["entropy"] = ent.item()
    return loss, metrics
