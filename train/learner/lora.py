"""LoRA (``trainer.lora``): the policy trains low-rank adapters on a frozen base, with peft.

The adapters are injected into the HF model itself (transformers' peft integration,
``add_adapter``), so the model keeps its class and ``model.layers`` for FSDP2/DeepSpeed, and its
state dict keeps HF names plus ``.base_layer.`` / ``.lora_A.default.`` / ``.lora_B.default.``.
Three things follow:

* the frozen reference is the base itself, adapters switched off (``AdaptersOff``): no second copy;
* optimizer state and checkpoints hold only the adapters (the base never changes);
* every consumer of full weights (engine sync, export) gets the merged ones under the plain HF
  names, W + (alpha / rank) B A (``merged_state``), so vLLM and transformers load them as-is.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping

import torch

from train.learner.config import LoraConfig

ADAPTER = "default"  # the one adapter's name (peft's default)
_LORA_KEY = re.compile(r"\.lora_(A|B)\." + ADAPTER + r"\.weight$")


def target_modules(cfg: LoraConfig) -> str | list[str]:
    """``all-linear`` (peft: every linear layer but the output head) or the comma-separated names."""
    names = [n.strip() for n in cfg.target_modules.split(",") if n.strip()]
    return "all-linear" if names == ["all-linear"] else names


def apply(model: torch.nn.Module, cfg: LoraConfig) -> torch.nn.Module:
    """Inject fresh adapters (B = 0: the policy starts as the base) and freeze everything else, in place."""
    from peft import LoraConfig as PeftLoraConfig
    from peft.tuners.lora import Linear as LoraLinear
    from peft.tuners.tuners_utils import BaseTunerLayer

    peft_cfg = PeftLoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                              target_modules=target_modules(cfg), bias="none")
    try:
        model.add_adapter(peft_cfg, adapter_name=ADAPTER)
    except ValueError as exc:  # peft: "Target modules {...} not found in the base model"
        raise ValueError(f"trainer.lora.target_modules = {cfg.target_modules!r}: {exc}".splitlines()[0]) from None
    layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
    odd = sorted({type(m.get_base_layer()).__name__ for m in layers if not isinstance(m, LoraLinear)})
    if odd:
        raise ValueError(f"trainer.lora.target_modules = {cfg.target_modules!r} reaches {odd} layers; "
                         "only linear layers are supported (their merge is W + (alpha/rank) B A)")
    for name, param in model.named_parameters():
        param.requires_grad_(bool(_LORA_KEY.search(name)))
    if getattr(model, "is_gradient_checkpointing", False):
        model.enable_input_require_grads()  # a frozen embedding would leave checkpointed blocks without gradients
    return model


def has_adapters(model: torch.nn.Module) -> bool:
    """Does ``model`` carry LoRA adapters (by parameter name: no peft import for plain models)?"""
    return any(_LORA_KEY.search(name) for name, _ in model.named_parameters())


def nonzero_b_factors(module: torch.nn.Module) -> int:
    """How many B factors in this rank's part of the adapters hold a nonzero value (0: the policy is its base).
    A sharded parameter is counted by its local shard (FSDP2's DTensor, DeepSpeed ZeRO-3's ``ds_tensor``)."""
    count = 0
    for name, param in module.named_parameters():
        if _LORA_KEY.search(name) and ".lora_B." in name:
            local = param.to_local() if hasattr(param, "to_local") else getattr(param, "ds_tensor", param)
            count += int(bool(local.detach().any()))
    return count


@contextlib.contextmanager
def adapters_off(module: torch.nn.Module):
    """The base model: every LoRA layer computes its frozen base layer alone, in eval mode (no
    dropout), as a separate reference copy would; the adapters and the mode come back after."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    layers = [m for m in module.modules() if isinstance(m, BaseTunerLayer)]
    training = module.training
    for m in layers:
        m._disable_adapters = True  # what peft's enable_adapters(False) sets, without touching requires_grad
    module.eval()
    try:
        yield module
    finally:
        for m in layers:
            m._disable_adapters = False
        module.train(training)


class AdaptersOff:
    """The frozen reference for a LoRA policy: calls ``module`` (the policy's own HF module,
    sharded or not) with the adapters off. Stands where a reference model is called."""

    def __init__(self, module: torch.nn.Module):
        self.module = module

    def __call__(self, *args, **kwargs):
        with torch.no_grad(), adapters_off(self.module):
            return self.module(*args, **kwargs)


class MergedView(Mapping):
    """``merged_state`` as a read-only mapping whose adapted weights are merged when read. An engine's weight
    sync reads each tensor once and copies it in, so only one merged weight is alive at a time, not a second
    set of every adapted weight (+0.4 GiB on the quickstart's 135M in fp32: its memory peak). It is a Mapping,
    so an engine written for the full state dict takes it as it is."""

    def __init__(self, state: dict[str, torch.Tensor], cfg: LoraConfig):
        self.state, self.scale = state, cfg.alpha / cfg.rank
        self.sources = {name.replace(".base_layer.", "."): name for name in state if not _LORA_KEY.search(name)}

    def __getitem__(self, name: str) -> torch.Tensor:
        source = self.sources[name]
        value = self.state[source]
        if source.endswith(".base_layer.weight"):
            stem = source.split(".base_layer.")[0]
            a = self.state[f"{stem}.lora_A.{ADAPTER}.weight"].to(torch.float32)
            b = self.state[f"{stem}.lora_B.{ADAPTER}.weight"].to(torch.float32)
            value = (value.to(torch.float32) + self.scale * (b @ a)).to(value.dtype)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.sources)

    def __len__(self) -> int:
        return len(self.sources)


def merged_state(state: dict[str, torch.Tensor], cfg: LoraConfig) -> dict[str, torch.Tensor]:
    """A full state dict with adapters (HF names + ``base_layer``/``lora_A``/``lora_B``) as the
    plain HF model's: each adapted weight merged, W + (alpha / rank) B A, in its own dtype."""
    return dict(MergedView(state, cfg))
