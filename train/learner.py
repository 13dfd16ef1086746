"""The GRPO learner: policy + frozen reference, one optimizer step per epoch over the rollouts.

Orchestration only; the loss math lives in ``train.grpo``. Sequences are laid out as
[left pad | prompt | response | right pad] so every response starts at the same column and
logits are computed for response positions only. Micro-batches accumulate gradients; under
torchrun the policy is wrapped in DDP and the loss is normalised over the global batch.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from train.config import TrainerConfig
from train.distributed import DistInfo, all_reduce_sum
from train.grpo import LossSettings, actor_config, compute_advantages, grpo_loss, zero_std_fraction


@dataclass(frozen=True)
class Sample:
    """One rollout: the prompt and response tokens, its trusted reward, and its group (prompt)."""

    prompt_ids: list[int]
    response_ids: list[int]
    reward: float
    group: int
    truncated: bool = False


def pack(samples: list[Sample], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-pad prompts and right-pad responses so all responses start at column S."""
    s = max(len(x.prompt_ids) for x in samples)
    r = max(max(len(x.response_ids) for x in samples), 1)
    n = len(samples)
    input_ids = torch.full((n, s + r), pad_id, dtype=torch.long)
    attention = torch.zeros((n, s + r), dtype=torch.long)
    response_mask = torch.zeros((n, r), dtype=torch.float32)
    for i, x in enumerate(samples):
        p, q = len(x.prompt_ids), len(x.response_ids)
        input_ids[i, s - p : s] = torch.tensor(x.prompt_ids)
        input_ids[i, s : s + q] = torch.tensor(x.response_ids, dtype=torch.long)
        attention[i, s - p : s + q] = 1
        response_mask[i, :q] = 1
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    return {"input_ids": input_ids, "attention_mask": attention, "position_ids": position_ids,
            "response_mask": response_mask, "prompt_width": torch.tensor(s)}


def response_logprobs(model: torch.nn.Module, batch: dict[str, torch.Tensor], temperature: float = 1.0,
                      with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log pi(a_k | q, a_<k) for the response tokens, shape (n, R)."""
    r = batch["response_mask"].shape[1]
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                position_ids=batch["position_ids"], use_cache=False, logits_to_keep=r + 1)
    logits = out.logits[:, :-1, :].float() / temperature  # position t predicts token t+1
    targets = batch["input_ids"][:, -r:]
    logp_all = F.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


class Learner:
    def __init__(self, model: torch.nn.Module, cfg: TrainerConfig, group_size: int, temperature: float,
                 pad_id: int, info: DistInfo):
        self.cfg = cfg
        self.info = info
        self.pad_id = pad_id
        self.temperature = temperature
        self.settings = LossSettings(cfg.policy_loss, cfg.clip_ratio_low, cfg.clip_ratio_high, cfg.loss_agg_mode,
                                     cfg.kl_coef, cfg.kl_type, cfg.entropy_coeff, group_size)
        self.ref = None
        if cfg.kl_coef > 0:
            self.ref = copy.deepcopy(model).eval()
            self.ref.requires_grad_(False)
        self.module = model
        self.model = model
        if info.enabled:
            self.model = torch.nn.parallel.DistributedDataParallel(model)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    def step(self, samples: list[Sample]) -> dict[str, float]:
        """One GRPO optimizer step on this rank's rollouts (all ranks must call it together)."""
        start = time.perf_counter()
        rewards = torch.tensor([s.reward for s in samples], dtype=torch.float32)
        groups = np.array([s.group for s in samples])
        full = pack(samples, self.pad_id)
        mask = full["response_mask"]
        if self.cfg.mask_truncated:
            mask = mask * torch.tensor([0.0 if s.truncated else 1.0 for s in samples]).unsqueeze(1)
        advantages = compute_advantages(rewards, groups, mask, self.cfg.adv_estimator, self.cfg.norm_adv_by_std)
        tokens, seqs, zero_groups, n_groups = all_reduce_sum(
            [mask.sum().item(), (mask.sum(-1) > 0).sum().item(), zero_std_fraction(rewards, groups) * len(set(groups.tolist())),
             len(set(groups.tolist()))], self.info)
        metrics = {"zero_std_frac": zero_groups / max(n_groups, 1), "loss": 0.0, "pg_loss": 0.0, "kl": 0.0,
                   "entropy": 0.0, "clip_frac": 0.0, "grad_norm": 0.0}
        if tokens == 0:  # every completion masked: nothing to learn from, on any rank
            return metrics
        cfg = actor_config(self.settings, self.info.world, int(tokens), int(seqs))
        self.model.train()
        mb = self.cfg.micro_batch_size
        chunks = [list(range(i, min(i + mb, len(samples)))) for i in range(0, len(samples), mb)]
        for n, idx in enumerate(chunks):
            sub = [samples[i] for i in idx]
            batch = pack(sub, self.pad_id)
            r = batch["response_mask"].shape[1]
            sub_mask, sub_adv = mask[idx, :r], advantages[idx, :r]
            ref_logp = None
            if self.ref is not None:
                with torch.no_grad():
                    ref_logp, _ = response_logprobs(self.ref, batch, self.temperature)
            sync = n == len(chunks) - 1 or not self.info.enabled
            ctx = self.model.no_sync() if not sync else _nullcontext()
            with ctx:
                logp, entropy = response_logprobs(self.model, batch, self.temperature, with_entropy=True)
                if self.cfg.entropy_coeff == 0:
                    entropy = entropy.detach()
                # One update per batch of fresh rollouts: pi_old is the current policy (ratio 1).
                loss, parts = grpo_loss(logp, logp.detach(), ref_logp, sub_adv, sub_mask, entropy, cfg)
                loss.backward()
            metrics["loss"] += loss.item()
            for key in ("pg_loss", "kl", "entropy"):
                metrics[key] += parts.get(key, 0.0)
            metrics["clip_frac"] += parts["clip_frac"] * len(idx) / len(samples)
        metrics["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.cfg.grad_clip))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        summed = all_reduce_sum([metrics[k] for k in ("loss", "pg_loss", "kl", "entropy", "clip_frac")], self.info)
        for key, value in zip(("loss", "pg_loss", "kl", "entropy", "clip_frac"), summed):
            metrics[key] = value / self.info.world
        metrics["train_tokens"] = tokens
        metrics["train_time_s"] = time.perf_counter() - start
        return metrics


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
