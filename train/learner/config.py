"""The ``model:`` and ``trainer:`` config sections, owned by the room that uses them. A field's range
sits in its annotation (``Annotated[int, ">= 1"]``: the bound, then why); train.config.config checks
every bound at load, so this room needs no validator of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal, Optional

ENTROPIC = "entropic_adaptive_beta"  # HELIX's own advantage estimator (train.learner.entropic)
# Estimators whose advantage is the reward minus its own group's baseline: a tied group is exactly 0 there (what
# trainer.dynamic_sampling drops); reinforce_plus_plus* whiten over the whole batch, where a tied group still
# carries signal. Named here, not in train.learner.grpo, so checking a config imports no torch.
GROUP_RELATIVE = frozenset({"grpo", "grpo_vectorized", "grpo_passk", "rloo", "rloo_vectorized", "opo", "gpg", ENTROPIC})


@dataclass
class ModelConfig:
    # "smollm2-135m-instruct" (embedded, converted once and cached), "tiny-random" (tests),
    # or a local Hugging Face model directory.
    policy: str = "smollm2-135m-instruct"
    dtype: Literal["float32", "bfloat16"] = "float32"
    cache_dir: Optional[str] = None  # where converted models live; default ~/.cache/helix
    gradient_checkpointing: bool = False


@dataclass
class LoraConfig:
    """``trainer.lora``: train low-rank adapters on the frozen base (peft) instead of every weight;
    the reference model is the base itself, engine sync and export get merged weights (docs/lora.md)."""

    enabled: bool = False
    rank: Annotated[int, ">= 1"] = 16
    alpha: Annotated[float, "> 0 (the update is scaled by alpha / rank)"] = 32.0
    dropout: Annotated[float, "in [0, 1)"] = 0.0
    # comma-separated module names (q_proj,v_proj) or all-linear: every linear layer but the output head
    target_modules: str = "all-linear"


@dataclass
class DynamicSamplingConfig:
    """``trainer.dynamic_sampling``: DAPO's dynamic sampling. Groups whose advantages are all 0 teach the
    update nothing; they are dropped and more parents are drawn, generated and evaluated until the step
    holds B groups with spread or ``max_rounds`` extra rounds are spent (docs/grpo.md)."""

    enabled: bool = False
    max_rounds: Annotated[int, ">= 1"] = 2  # extra rounds of prompts, generation and evaluation per epoch, at most
    # a group has spread when one of its advantages (as the estimator computes them) exceeds this in absolute value
    tolerance: Annotated[float, ">= 0"] = 1e-6


@dataclass
class TrainerConfig:
    enabled: bool = True  # False: EvoOnly (frozen policy, no optimizer, no reference model)
    epochs: Annotated[int, ">= 1"] = 80
    prompts_per_epoch: Annotated[int, ">= 1"] = 8  # B: parents sampled per epoch
    lr: Annotated[float, ">= 0"] = 1e-6
    weight_decay: Annotated[float, ">= 0"] = 0.0  # AdamW's decoupled weight decay (paper: none)
    grad_clip: Annotated[float, "> 0"] = 1.0  # the gradients' total norm is clipped to this before each optimizer step
    adv_estimator: str = "grpo"  # any name in verl's advantage-estimator registry
    norm_adv_by_std: bool = True
    policy_loss: str = "vanilla"  # any name in verl's policy-loss registry
    clip_ratio_low: Annotated[float, "in [0, 1)"] = 0.2
    clip_ratio_high: Annotated[float, ">= 0"] = 0.2
    # eq. 4 averages tokens within each answer, then answers over the group: verl's seq-mean-token-mean
    loss_agg_mode: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = \
        "seq-mean-token-mean"
    kl_coef: Annotated[float, ">= 0"] = 1e-3  # beta in eq. 4; 0 drops the reference model
    kl_type: Literal["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"] = "low_var_kl"
    entropy_coeff: Annotated[float, ">= 0"] = 0.0
    # sequences per forward/backward; gradients accumulate
    micro_batch_size: Annotated[int, ">= 1"] = 4
    # Optimizer steps per epoch: the rollouts are cut into ppo_mini_batches parts (whole groups),
    # passed over ppo_epochs times. 1 x 1 (default): one step, pi_old = pi, so the clip never binds;
    # more: pi_old is the sampling policy (one extra forward pass) and eq. 4's clip does its job.
    ppo_mini_batches: Annotated[int, ">= 1"] = 1
    ppo_epochs: Annotated[int, ">= 1"] = 1
    mask_truncated: bool = False  # drop completions cut at max_new_tokens from the loss
    # auto: none for one process, ddp under torchrun. fsdp2 shards parameters, gradients and
    # optimizer state per decoder layer (what 14B/32B need); deepspeed runs DeepSpeed ZeRO
    # (zero_stage); see docs/scale.md.
    strategy: Literal["auto", "none", "ddp", "fsdp2", "deepspeed"] = "auto"
    bf16: bool = False  # fsdp2/deepspeed: bf16 compute with fp32 master weights
    offload_params: bool = False  # fsdp2: params, grads and optimizer state on the CPU; deepspeed: ZeRO-3 offload_param
    offload_optimizer: bool = False  # deepspeed: ZeRO offload_optimizer; fsdp2: same as offload_params
    # deepspeed only: 1 optimizer state, 2 + gradients, 3 + parameters sharded
    zero_stage: Literal[1, 2, 3] = 3
    # >0: micro-batches by padded token count instead of micro_batch_size
    max_tokens_per_micro_batch: Annotated[int, ">= 0 (0: micro_batch_size sequences)"] = 0
    # Compute a group's prompt once for all its responses in a micro-batch (4D mask; exact, not an
    # approximation). Falls back to one row per sample if the attention implementation takes no
    # custom 4D mask (flash_attention_*, flex); only sdpa and eager do.
    shared_prefix: bool = True
    # With an engine that returns logprobs (vllm): none = only log the engine/trainer mismatch
    # (rollout_logprob_diff); token / sequence = verl's truncated importance sampling (TIS) weights
    # pi_trainer / pi_engine, capped at rollout_is_threshold. Needs rollout.temperature 1.0.
    rollout_is: Literal["none", "token", "sequence"] = "none"
    rollout_is_threshold: Annotated[float, ">= 1 (the cap on pi_trainer / pi_engine)"] = 2.0  # rollout_is's cap on each weight
    # linear warmup over this many optimizer steps, then constant (paper: constant)
    lr_warmup_steps: Annotated[int, ">= 0"] = 0
    lora: LoraConfig = field(default_factory=LoraConfig)
    dynamic_sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)
