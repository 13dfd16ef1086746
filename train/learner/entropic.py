"""TTT-Discover's entropic advantage with adaptive beta (Yuksekgonul et al., arXiv 2601.16175, sec. 3.2):
a max-seeking alternative to GRPO's mean-seeking advantage, ``trainer.adv_estimator: entropic_adaptive_beta``.

The objective per prompt is (1/beta) log E[exp(beta R)], which tends to max R as beta grows. Its
policy gradient weights each sample by w_i = exp(beta r_i) / E[exp(beta r)], baselined to w_i - 1.
Per group of K rewards (as the reference implementation, test-time-training/discover,
``ttt_discover/rl/train.py::compute_advantages``, branch ``entropic_adaptive_beta``, does):

* beta solves KL(q_beta || uniform) = ln 2 with q_beta(i) = softmax(beta r)_i: doubling from 1,
  then 60 bisection steps (KL grows with beta); if the target is out of reach (at least half the
  group tied at the top), beta is the search's upper end 2^20;
* E[exp(beta r)] is estimated leave-one-out: Z_i = mean_{j != i} exp(beta r_j); A_i = exp(beta r_i) / Z_i - 1.

Two departures, both where the reference's numbers break down (docs/grpo.md):
* the search runs on rewards divided by their spread (max - min), then beta is divided back, so
  it does not depend on the reward's units (the reference's bracket caps beta*spread at 2^20*spread);
* a group of two distinct rewards cannot reach the target (KL <= ln K = ln 2, only as beta -> inf),
  and its leave-one-out weight exp(beta (r_1 - r_2)) has no bound there; it gets that limit of the
  plain-mean weights w_i = K q_i instead: +1 for the better sample, -1 for the worse.

A group whose rewards are all equal (one sample included) gets exactly 0. Pure math, float64.
"""

from __future__ import annotations

import math

import torch

from train.learner.config import ENTROPIC

NAME = ENTROPIC  # named beside the config, which checks estimator names without torch

TARGET_KL = math.log(2.0)  # delta in the reference implementation
BETA_MAX = 2.0 ** 20  # the doubling stops at the first power of two >= 1e6, as in the reference
BISECTION_STEPS = 60


def kl_to_uniform(beta: float, rewards: torch.Tensor) -> float:
    """KL(softmax(beta r) || uniform) = sum_i q_i (log q_i + log K), via log-sum-exp."""
    logits = beta * (rewards - rewards.max())
    log_q = logits - torch.logsumexp(logits, dim=0)
    return float((log_q.exp() * (log_q + math.log(len(rewards)))).sum())


def adaptive_beta(rewards: torch.Tensor) -> float:
    """The beta at which KL(q_beta || uniform) = ln 2 for these (spread-normalised) rewards."""
    lo, hi = 0.0, 1.0
    if kl_to_uniform(hi, rewards) < TARGET_KL:
        while hi < BETA_MAX and kl_to_uniform(hi, rewards) < TARGET_KL:
            hi *= 2.0
        if kl_to_uniform(hi, rewards) < TARGET_KL:
            return hi  # out of reach: the search's upper end
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if kl_to_uniform(mid, rewards) < TARGET_KL:
            lo = mid
        else:
            hi = mid
    return hi


def group_advantages(rewards: torch.Tensor) -> tuple[torch.Tensor, float]:
    """One group's advantages and its beta (in the rewards' own units; 0 for a tied group, inf for a
    group of two distinct rewards)."""
    r = torch.as_tensor(rewards, dtype=torch.float64)
    k = len(r)
    spread = float(r.max() - r.min()) if k else 0.0
    if k < 2 or spread == 0.0:
        return torch.zeros(k, dtype=torch.float64), 0.0
    if k == 2:
        return torch.where(r == r.max(), 1.0, -1.0).to(torch.float64), math.inf
    scaled = (r - r.max()) / spread  # in [-1, 0]
    beta = adaptive_beta(scaled)
    logits = beta * scaled
    others = torch.stack([torch.cat([logits[:i], logits[i + 1:]]) for i in range(k)])  # (k, k-1)
    log_z = torch.logsumexp(others, dim=1) - math.log(k - 1)  # log of the leave-one-out mean
    return torch.exp(logits - log_z) - 1.0, beta / spread


def entropic_advantages(rewards: torch.Tensor, group_ids) -> torch.Tensor:
    """Per-sample advantages (float64) for rewards grouped by ``group_ids`` (each group on its own)."""
    r = torch.as_tensor(rewards, dtype=torch.float64)
    groups = list(group_ids)
    out = torch.zeros(len(r), dtype=torch.float64)
    for g in dict.fromkeys(groups):
        members = torch.tensor([i for i, x in enumerate(groups) if x == g])
        out[members] = group_advantages(r[members])[0]
    return out
