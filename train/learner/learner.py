"""The GRPO learner: policy + frozen reference, one optimizer step per epoch over the rollouts.

Orchestration only; the loss math lives in ``train.learner.grpo``. Sequences are laid out as
[left pad | prompt | response | right pad] so every response starts at the same column and
logits are computed for response positions only; with ``trainer.shared_prefix`` a group's prompt
is instead computed once for all its responses (``train.learner.shared_prefix``, exact). Micro-batches accumulate gradients; under
torchrun the policy is replicated (DDP) or sharded (FSDP2, DeepSpeed ZeRO) by the backend that
``trainer.strategy`` names (``train.learner.backends``), and the loss is normalised over the global batch.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from train.learner import lora, prefix_attention, shared_prefix
from train.learner.config import TrainerConfig
from train.learner.distributed import DistInfo, all_reduce_max, all_reduce_sum
from train.learner.grpo import LossSettings, actor_config, compute_advantages, grpo_loss, zero_std_fraction


@dataclass(frozen=True)
class Sample:
    """One rollout: the prompt and response tokens, its trusted reward, and its group (prompt)."""

    prompt_ids: list[int]
    response_ids: list[int]
    reward: float
    group: int
    truncated: bool = False
    rollout_logprobs: list[float] | None = None  # the engine's log pi per response token (vllm), if it has them


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
    batch = {"input_ids": input_ids, "attention_mask": attention, "position_ids": position_ids,
             "response_mask": response_mask, "prompt_width": torch.tensor(s)}
    if all(x.rollout_logprobs is not None and len(x.rollout_logprobs) == len(x.response_ids) for x in samples):
        rollout = torch.zeros((n, r), dtype=torch.float32)
        for i, x in enumerate(samples):
            rollout[i, : len(x.rollout_logprobs)] = torch.tensor(x.rollout_logprobs, dtype=torch.float32)
        batch["rollout_logp"] = rollout
    return batch


def token_entropy(logp_all: torch.Tensor, rows: int = 64) -> torch.Tensor:
    """-sum_v p log p per position, without gradient, a few positions at a time: each position's sum
    is the same reduction as over the whole tensor (so the same values), but the two vocabulary-wide
    temporaries are (n, rows, V) instead of (n, R, V), about 0.4 GB less at R = 257 on SmolLM2."""
    with torch.no_grad():
        return torch.cat([-(part.exp() * part).sum(-1) for part in logp_all.split(rows, dim=1)], dim=1)


def sample_advantages(advantages: torch.Tensor, mask: torch.Tensor) -> list[tuple[float | None, int]]:
    """Per row: (the advantage on its first response token, its response-token count in ``mask``);
    (None, 0) for a row with no token. An outcome estimator gives every token of a response the same
    advantage, so the first one is the response's."""
    counts = mask.sum(-1).round().long().tolist()
    first = (mask > 0).float().argmax(-1)
    values = advantages[torch.arange(len(counts)), first].tolist()
    return [(float(v), n) if n > 0 else (None, 0) for v, n in zip(values, counts)]


def response_logprobs(model: torch.nn.Module, batch: dict[str, torch.Tensor], temperature: float = 1.0,
                      with_entropy: bool = False, entropy_grad: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log pi(a_k | q, a_<k) for the response tokens, shape (n, R), from a ``pack`` batch
    or a ``shared_prefix.layout`` one (then 0 at padded positions). ``entropy_grad=False``: the
    entropy is only logged (trainer.entropy_coeff 0), so it is computed without a graph."""
    shared = "gather_row" in batch
    keep = int(batch["logits_to_keep"]) if shared else batch["response_mask"].shape[1] + 1
    # A shared-prefix row tells prefix_attention where its prompt ends (the learner keeps prefix_len only for a
    # model it switched to helix_sdpa, so a model whose forward takes no extra keywords never gets them).
    split = {"helix_prefix_len": int(batch["prefix_len"]), "helix_prefix_padded": bool(batch["prefix_padded"])} \
        if "prefix_len" in batch else {}
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   position_ids=batch["position_ids"], use_cache=False, logits_to_keep=keep, **split).logits
    # Position t predicts token t+1. Each (n, R, V) tensor is ~0.1 GB per micro-batch on SmolLM2's
    # 49k vocabulary: rebinding ``logits`` frees the model's copy as soon as the scaled one exists.
    logits = logits[:, :-1, :].float() / temperature
    logp_all = F.log_softmax(logits, dim=-1)
    del logits
    entropy = None
    if with_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1) if entropy_grad and torch.is_grad_enabled() else token_entropy(logp_all)
    if shared:
        return (shared_prefix.token_logprobs(logp_all, batch),
                shared_prefix.gather(entropy, batch) if with_entropy else None)
    targets = batch["input_ids"][:, -(keep - 1):]
    return logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1), entropy


def token_budget_chunks(samples: list[Sample], micro_batch_size: int, max_tokens: int) -> list[list[int]]:
    """Micro-batches of sample indices. With a token budget, samples are taken longest first and a
    micro-batch grows while its padded size (rows x longest prompt + longest response) fits; a
    sample longer than the budget runs alone. The loss is normalised over the global batch, so
    the gradient does not depend on how the batch is cut."""
    if max_tokens <= 0:
        return [list(range(i, min(i + micro_batch_size, len(samples)))) for i in range(0, len(samples), micro_batch_size)]
    order = sorted(range(len(samples)), key=lambda i: -(len(samples[i].prompt_ids) + len(samples[i].response_ids)))
    chunks, current, p_max, r_max = [], [], 0, 0
    for i in order:
        p, r = len(samples[i].prompt_ids), max(len(samples[i].response_ids), 1)
        grown = (len(current) + 1) * (max(p_max, p) + max(r_max, r))
        if current and (grown > max_tokens or len(current) >= micro_batch_size):
            chunks.append(current)
            current, p_max, r_max = [], 0, 0
        current.append(i)
        p_max, r_max = max(p_max, p), max(r_max, r)
    if current:
        chunks.append(current)
    return chunks


def mini_batches(groups, n: int, epochs: int = 1) -> list[list[int]]:
    """Sample indices of each optimizer step: ``epochs`` passes over ``n`` parts of whole groups (a
    group's advantages are relative to each other, so a group is never split). Groups are dealt
    round-robin: each rank holds a contiguous share of the prompts, so mini-batch u then holds the
    same groups on any number of ranks that divides the batch evenly. A rank with fewer than ``n``
    groups gets empty parts; every rank gets n x epochs."""
    groups = np.asarray(groups).tolist()
    position = {g: i for i, g in enumerate(dict.fromkeys(groups))}  # groups in first-seen order
    parts = [[i for i, g in enumerate(groups) if position[g] % n == u] for u in range(n)]
    return parts * epochs


class Learner:
    def __init__(self, model: torch.nn.Module, cfg: TrainerConfig, group_size: int, temperature: float,
                 pad_id: int, info: DistInfo):
        from train.learner.backends import make_backend  # torch.distributed.checkpoint et al. only when training

        self.cfg = cfg
        self.info = info
        self._ckpt_group = None  # the background checkpoint writer's process group (_checkpoint_group)
        self.pad_id = pad_id
        self.temperature = temperature
        self.settings = LossSettings(cfg.policy_loss, cfg.clip_ratio_low, cfg.clip_ratio_high, cfg.loss_agg_mode,
                                     cfg.kl_coef, cfg.kl_type, cfg.entropy_coeff, group_size)
        self.backend = make_backend(cfg.strategy, cfg, info)  # everything that depends on trainer.strategy
        self.device = info.device
        self.ref = None
        # before the reference copy and the wrapping, so every forward uses it
        self.split_prefix = cfg.shared_prefix and prefix_attention.enable(model)
        if cfg.lora.enabled:  # adapters on the frozen base, before wrapping: only they train
            lora.apply(model, cfg.lora)
        elif cfg.kl_coef > 0:  # copied before the policy is wrapped (sharding is in place)
            ref = copy.deepcopy(model).eval()
            ref.requires_grad_(False)
            self.ref = self.backend.wrap_reference(ref)
        self.backend.wrap_policy(model)
        if cfg.lora.enabled and cfg.kl_coef > 0:
            self.ref = lora.AdaptersOff(self.module)  # the reference is the base itself: no second copy
        self.mask_kind = None  # "bool"/"float": shared-prefix layout with that 4D mask; None: per-sample rows
        if cfg.shared_prefix:
            self.mask_kind, why = shared_prefix.mask_kind(self.module)
            if self.mask_kind is None and info.is_main:
                print(f"[helix] trainer.shared_prefix: {why}; using one row per sample", flush=True)
        self.moved = False  # has any optimizer step changed the policy away from the reference?
        self._ref_same = False  # this step's _ref_is_policy()
        # Per sample of the last ``step``, in its order: (the advantage its response tokens got, how many
        # tokens it put in the update). (None, 0): none (lost, or truncated under mask_truncated). The
        # epoch loop archives these, so a reader never recomputes them.
        self.last_advantages: list[tuple[float | None, int]] = []

    @property
    def strategy(self) -> str:
        """The resolved backend name (``auto`` -> none/ddp), for logs and checkpoint metadata."""
        return self.backend.name

    @property
    def model(self) -> torch.nn.Module:
        """What forward passes use: the HF model, its DDP wrapper, or the DeepSpeed engine."""
        return self.backend.model

    @property
    def module(self) -> torch.nn.Module:
        """The HF model whose parameters are the policy (the sharded root under fsdp2)."""
        return self.backend.module

    @property
    def optimizer(self):
        return self.backend.optimizer

    @optimizer.setter
    def optimizer(self, value) -> None:  # tests swap in SGD to read gradients off the weights
        self.backend.optimizer = value

    @property
    def scheduler(self):
        return self.backend.scheduler

    @scheduler.setter
    def scheduler(self, value) -> None:
        self.backend.scheduler = value

    def generation_context(self):
        """Where the HF engine may call ``generate`` on the trained module (held whole when sharded)."""
        return self.backend.generation_context()

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """Collective when the backend is sharded: the full policy weights, HF names, on every rank
        (engine sync, export); under ``trainer.lora`` the adapters merged into the base."""
        state = self.backend.full_state_dict()
        return lora.merged_state(state, self.cfg.lora) if self.cfg.lora.enabled else state

    def full_state_view(self) -> Mapping[str, torch.Tensor]:
        """``full_state_dict`` for an engine's weight sync, which reads each tensor once: under ``trainer.lora``
        a read-only mapping whose weights are merged when read (``lora.MergedView``), so no second set of merged
        weights is held. Collective when sharded (the gather happens at the call, before any read)."""
        state = self.backend.full_state_dict()
        return lora.MergedView(state, self.cfg.lora) if self.cfg.lora.enabled else state

    def save_state(self, path: Path, asynchronous: bool = False):
        """Collective: model + optimizer (the backend's own format: torch.distributed.checkpoint
        under ``dcp/``, each rank its shards, or DeepSpeed's under ``deepspeed/``) and the scheduler
        and step flags (rank 0). Writes only inside ``path``, a directory the caller renames when done.
        ``asynchronous``: return once the state is staged in CPU memory, with a Future for the
        write (None where the backend writes synchronously: deepspeed)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        future = None
        if asynchronous:
            future = self.backend.save_async(path, self._checkpoint_group())
        else:
            self.backend.save(path)
        if self.info.is_main:
            torch.save({"scheduler": self.scheduler.state_dict(), "moved": self.moved,
                        "strategy": self.strategy, "world": self.info.world}, path / "extra.pt")
        return future

    def _checkpoint_group(self):
        """A gloo group of its own for the background writer: its collectives must not interleave
        with the training thread's on the default group (created once, by every rank at its first
        asynchronous save, which is collective)."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or self.info.world == 1:
            return None
        if self._ckpt_group is None:
            self._ckpt_group = dist.new_group(backend="gloo")
        return self._ckpt_group

    def load_state(self, path: Path) -> None:
        path = Path(path)
        extra = torch.load(path / "extra.pt", weights_only=True)
        if not self.backend.can_resume(extra["strategy"], extra["world"]):
            raise ValueError(f"{path} was written under trainer.strategy={extra['strategy']} with {extra['world']} "
                             f"rank(s); this run is {self.strategy} with {self.info.world}. DeepSpeed checkpoints "
                             "resume only under deepspeed with the same number of ranks (DCP ones reshard to "
                             "none/ddp/fsdp2 at any size); `helix export` reads either kind.")
        self.backend.load(path)
        self.scheduler.load_state_dict(extra["scheduler"])
        self.moved = bool(extra["moved"])

    def _nothing_to_learn(self, zero_frac: float) -> bool:
        """Every group has equal rewards and the policy still is the reference: the policy-gradient
        and KL gradients are exactly 0, so the forward/backward passes can be skipped."""
        return (zero_frac >= 1.0 and not self.moved and self.cfg.entropy_coeff == 0 and self.cfg.weight_decay == 0)

    def _rollout_correction(self, logp: torch.Tensor, batch: dict, mask: torch.Tensor, metrics: dict):
        """Where the engine sent its own logprobs: accumulate the engine/trainer mismatch
        (mean |log pi_trainer - log pi_engine| per token: bf16 vLLM vs fp32 trainer, or a stale
        sync, shows here) and, with ``trainer.rollout_is``, verl's truncated importance weights
        pi_trainer / pi_engine that make the update unbiased for what was actually sampled."""
        if "rollout_logp" not in batch:
            return None
        log_ratio = (logp.detach() - batch["rollout_logp"]) * mask
        metrics["rollout_logprob_diff"] += float(log_ratio.abs().sum())
        if self.cfg.rollout_is == "none":
            return None
        from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights

        weights, _ = compute_rollout_correction_weights(log_ratio, mask, rollout_is=self.cfg.rollout_is,
                                                         rollout_is_threshold=self.cfg.rollout_is_threshold)
        return weights.detach()

    def step(self, samples: list[Sample]) -> dict[str, float]:
        """The GRPO update on this rank's rollouts (all ranks must call it together): one optimizer
        step, or ``ppo_epochs`` x ``ppo_mini_batches`` of them against the sampling policy."""
        start = time.perf_counter()
        rewards = torch.tensor([s.reward for s in samples], dtype=torch.float64)  # exact ties: train.learner.grpo
        groups = np.array([s.group for s in samples])
        mask = pack(samples, self.pad_id)["response_mask"]
        if self.cfg.mask_truncated:
            mask = mask * torch.tensor([0.0 if s.truncated else 1.0 for s in samples]).unsqueeze(1)
        # A NaN reward is a child the evaluation infrastructure lost (rewards.ray_eval): it is left out
        # of its group, so the others' mean and std are computed without it, and adds no tokens.
        scored = ~torch.isnan(rewards)
        mask = mask * scored.to(mask.dtype).unsqueeze(1)
        advantages = torch.zeros_like(mask, dtype=torch.float32)
        keep = scored.nonzero().flatten()
        kept_rewards, kept_groups = rewards[keep], groups[keep.numpy()]
        if len(keep):
            advantages[keep] = compute_advantages(kept_rewards, kept_groups, mask[keep],
                                                  self.cfg.adv_estimator, self.cfg.norm_adv_by_std)
        self.last_advantages = sample_advantages(advantages, mask)
        n_here = len(set(kept_groups.tolist()))
        tokens, zero_groups, n_groups = all_reduce_sum(
            [mask.sum().item(), zero_std_fraction(kept_rewards, kept_groups) * n_here, n_here], self.info)
        metrics = {"zero_std_frac": zero_groups / max(n_groups, 1), "loss": 0.0, "pg_loss": 0.0, "kl": 0.0,
                   "entropy": 0.0, "clip_frac": 0.0, "grad_norm": 0.0, "lr": self.scheduler.get_last_lr()[0],
                   "skipped_step": 0.0, "rollout_logprob_diff": 0.0, "micro_batches": 0, "optimizer_steps": 0}
        updates = mini_batches(groups, self.cfg.ppo_mini_batches, self.cfg.ppo_epochs)
        if tokens == 0 or self._nothing_to_learn(metrics["zero_std_frac"]):
            metrics["skipped_step"] = 1.0
            with warnings.catch_warnings():  # no optimizer step on purpose; the schedule still advances
                warnings.simplefilter("ignore", UserWarning)
                for _ in updates:
                    self.scheduler.step()
            metrics["train_time_s"] = time.perf_counter() - start
            return metrics
        self.model.train()
        self._ref_same = self.ref is not None and self._ref_is_policy()
        frozen = self._frozen_logprobs(samples, mask.shape[1]) if len(updates) > 1 else None
        for u, idx in enumerate(updates):
            self._update(samples, idx, mask, advantages, frozen, metrics, first_pass=u < self.cfg.ppo_mini_batches)
        steps = max(metrics["optimizer_steps"], 1)
        summed = all_reduce_sum([metrics[k] for k in ("loss", "pg_loss", "kl", "entropy", "clip_frac")], self.info)
        for key, value in zip(("loss", "pg_loss", "kl", "entropy", "clip_frac"), summed):
            metrics[key] = value / self.info.world / steps
        metrics["grad_norm"] /= steps
        metrics["rollout_logprob_diff"] = all_reduce_sum([metrics["rollout_logprob_diff"]], self.info)[0] / tokens
        metrics["train_tokens"] = tokens
        metrics["train_time_s"] = time.perf_counter() - start
        return metrics

    def _chunks(self, samples: list[Sample], idx: list[int]) -> list[tuple[list[int], float]]:
        """Micro-batches of ``idx`` as (sample indices, weight); shared-prefix ones keep groups
        together (``shared_prefix.group_chunks``). Every rank runs the same number of
        forward/backward passes (FSDP2/ZeRO-3/DDP collectives): a rank with fewer runs padding
        passes of weight 0 (same collectives, zero gradient)."""
        cut = shared_prefix.group_chunks if self.mask_kind else token_budget_chunks
        local = cut([samples[i] for i in idx], self.cfg.micro_batch_size,
                    self.cfg.max_tokens_per_micro_batch) if idx else []
        chunks = [([idx[i] for i in chunk], 1.0) for chunk in local]
        pad = chunks[-1][0][:1] if chunks else [0]
        return chunks + [(pad, 0.0)] * (all_reduce_max(len(chunks), self.info) - len(chunks))

    def _batch(self, samples: list[Sample], idx: list[int]) -> dict[str, torch.Tensor]:
        """Model inputs for ``idx``; ``response_mask`` (and ``rollout_logp``) always in pack's (n, R) layout."""
        chosen = [samples[i] for i in idx]
        batch = pack(chosen, self.pad_id)
        if self.mask_kind:
            batch = {k: batch[k] for k in ("response_mask", "rollout_logp") if k in batch}
            batch.update(shared_prefix.layout(chosen, self.pad_id, self.mask_kind))
            if not self.split_prefix:
                del batch["prefix_len"], batch["prefix_padded"]
        return {k: v.to(self.device) for k, v in batch.items()}

    @torch.no_grad()
    def _frozen_logprobs(self, samples: list[Sample], width: int) -> dict[str, torch.Tensor | None]:
        """log pi_old (the policy that sampled, before any update) and log pi_ref for every response
        token, computed once: with several updates per batch the ratio pi / pi_old is what eq. 4 clips."""
        old = torch.zeros((len(samples), width))
        ref = torch.zeros((len(samples), width)) if self.ref is not None else None
        for idx, _ in self._chunks(samples, list(range(len(samples)))):
            batch = self._batch(samples, idx)
            r = batch["response_mask"].shape[1]
            old[idx, :r] = response_logprobs(self.model, batch, self.temperature)[0].float().cpu()
            if ref is not None:
                ref[idx, :r] = old[idx, :r] if self._ref_same else \
                    response_logprobs(self.ref, batch, self.temperature)[0].float().cpu()
        return {"old": old, "ref": ref}

    def _ref_is_policy(self) -> bool:
        """Is the LoRA policy the base itself, every B factor exactly 0 (so until its first optimizer step)? Then its
        log-probs are the reference's bit for bit (base output + 0), and the reference's forward, a quarter of a
        quickstart GRPO step, is skipped. Counted over every rank's shard, so all ranks agree (and run the same
        collectives). A full fine-tune's reference is a separately wrapped copy: always computed."""
        if not self.cfg.lora.enabled or self.moved:
            return False
        return all_reduce_sum([lora.nonzero_b_factors(self.module)], self.info)[0] == 0

    def _update(self, samples: list[Sample], idx: list[int], mask: torch.Tensor, advantages: torch.Tensor,
                frozen: dict | None, metrics: dict, first_pass: bool) -> None:
        """One optimizer step on the samples ``idx``; the loss is normalised over their global token count."""
        tokens, seqs = all_reduce_sum([mask[idx].sum().item(), (mask[idx].sum(-1) > 0).sum().item()], self.info)
        if tokens == 0:  # every rank agrees (global count): nothing here to learn from
            return
        cfg = actor_config(self.settings, self.info.world, int(tokens), int(seqs))
        chunks = self._chunks(samples, idx)
        for n, (cidx, weight) in enumerate(chunks):
            batch = self._batch(samples, cidx)
            r = batch["response_mask"].shape[1]
            sub_mask = (mask[cidx, :r] * weight).to(self.device)
            sub_adv = advantages[cidx, :r].to(self.device)
            ref_logp = old_logp = None
            if frozen is not None:
                old_logp = frozen["old"][cidx, :r].to(self.device)
                ref_logp = frozen["ref"][cidx, :r].to(self.device) if frozen["ref"] is not None else None
            elif self.ref is not None and not self._ref_same:
                with torch.no_grad():
                    ref_logp, _ = response_logprobs(self.ref, batch, self.temperature)
            with self.backend.gradient_sync(last=n == len(chunks) - 1):
                logp, entropy = response_logprobs(self.model, batch, self.temperature, with_entropy=True,
                                                  entropy_grad=self.cfg.entropy_coeff > 0)
                # One update per batch: pi_old is the current policy (ratio 1, no extra forward).
                old_logp = logp.detach() if old_logp is None else old_logp
                if self.ref is not None and ref_logp is None:
                    ref_logp = logp.detach()  # _ref_is_policy: the reference's log-probs, bit for bit
                diff = metrics if first_pass else {"rollout_logprob_diff": 0.0}  # count each token once
                is_weights = self._rollout_correction(old_logp, batch, sub_mask, diff)
                loss, parts = grpo_loss(logp, old_logp, ref_logp, sub_adv, sub_mask, entropy, cfg, is_weights)
                self.backend.backward(loss)
            if weight:
                metrics["loss"] += loss.item()
                for key in ("pg_loss", "kl", "entropy"):
                    metrics[key] += parts.get(key, 0.0)
                metrics["clip_frac"] += parts["clip_frac"] * len(cidx) / len(idx)
        metrics["grad_norm"] += self.backend.clip_and_step()
        self.moved = True
        metrics["micro_batches"] += len(chunks)
        metrics["optimizer_steps"] += 1
