"""The one interface every generation engine implements, and the registry config names pick from.

An engine turns tokenised prompts into G sampled completions each. Weight sync contract: after
every optimizer step the loop calls ``engine.sync_weights(weights)`` when ``engine.needs_sync``
is true, where ``weights`` is the FULL (unsharded) policy state with Hugging Face names, as a
mapping or an iterable of ``(name, tensor)`` pairs (``Learner.full_state_dict()`` gives it under
none/ddp/fsdp2/deepspeed alike). An engine that samples from the trainer's own module (hf) has
nothing to copy and says so with ``needs_sync = False``, so the loop skips the gather.

Two optional class attributes: ``needs_weights = False`` says the engine samples from a model the
loop does not hold (openai: the server's), so an EvoOnly run loads only the tokenizer and exports
nothing; a ``preflight(rollout, **context)`` classmethod checks what needs no model (is the server
up?) before the run loads or writes anything, and may pin ``rollout`` fields it resolves.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Mapping, Protocol, Union

from rollout.config import RolloutConfig

if TYPE_CHECKING:  # the registry's names are read by config loading, which imports no torch
    import torch

Weights = Union[Mapping[str, "torch.Tensor"], Iterable[tuple[str, "torch.Tensor"]]]


@dataclass(frozen=True)
class SamplingParams:
    n: int  # G completions per prompt
    temperature: float = 1.0
    top_p: float = 0.95
    max_new_tokens: int = 1024
    seed: int | None = 0  # None: unseeded
    stop: tuple[str, ...] | None = None  # None: the engine's configured rollout.stop

    def __post_init__(self):
        if self.n < 1 or self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams needs n >= 1 and max_new_tokens >= 1, got n={self.n}, "
                             f"max_new_tokens={self.max_new_tokens}")
        if not (self.temperature > 0 and 0 < self.top_p <= 1):
            raise ValueError(f"SamplingParams needs temperature > 0 and top_p in (0, 1], got "
                             f"temperature={self.temperature}, top_p={self.top_p}")
        if isinstance(self.stop, str):
            raise TypeError("SamplingParams.stop is a tuple of strings, not one string")

    @classmethod
    def from_config(cls, rollout: RolloutConfig, seed: int | None) -> "SamplingParams":
        """The loop's sampling settings from its ``rollout:`` section."""
        return cls(rollout.group_size, rollout.temperature, rollout.top_p, rollout.max_new_tokens,
                   seed=seed if rollout.seeded else None, stop=parse_stop(rollout.stop))


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]  # response tokens, the closing EOS included when the model emitted one
    text: str
    truncated: bool  # cut at max_new_tokens (not by EOS or a stop string); the trainer may mask it
    logprobs: list[float] | None = None  # per token of token_ids: log pi at temperature 1, when the engine has them


OnBatch = Callable[[int, list[list[Completion]]], None]


class Engine(Protocol):
    needs_sync: bool

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 on_batch: OnBatch | None = None) -> list[list[Completion]]:
        """G completions per prompt, in prompt order. ``on_batch(first, groups)``, when given, is
        called as each batch of prompts is done (batches in order, ``first`` = index of its first
        prompt), so the caller can start on them while the rest generate (``rollout.batch_size``)."""
        ...

    def sync_weights(self, weights: Weights) -> None: ...


ENGINES: dict[str, Callable[..., Engine]] = {}


def register_engine(name: str):
    def wrap(factory):
        ENGINES[name] = factory
        return factory

    return wrap


def generate_streaming(engine: Engine, prompts: list[list[int]], params: SamplingParams,
                       on_batch: OnBatch | None) -> list[list[Completion]]:
    """``engine.generate`` with ``on_batch``; an engine without the hook (a user's own) reports
    everything as one batch at the end."""
    if on_batch is None:
        return engine.generate(prompts, params)
    if "on_batch" in inspect.signature(engine.generate).parameters:
        return engine.generate(prompts, params, on_batch=on_batch)
    groups = engine.generate(prompts, params)
    if groups:
        on_batch(0, groups)
    return groups


def parse_stop(text: str) -> tuple[str, ...]:
    """``rollout.stop`` holds stop strings separated by ``|`` (the config has no lists)."""
    return tuple(s for s in text.split("|") if s)


def build_engine(name: str, rollout: RolloutConfig | None = None, **context) -> Engine:
    """Build the engine ``name`` from its ``rollout:`` section (defaults when None).

    ``context`` is what the loop resolved for it: ``model`` and ``tokenizer`` (the trainer's),
    ``info`` (the rank's DistInfo: rank, world, device), ``progress``, ``model_path`` (a local HF
    directory of the policy, or None when it exists only in memory, e.g. tiny-random),
    ``model_name`` (model.policy, as a server knows it), ``dtype`` (model.dtype), ``seed`` (run.seed)
    and ``cache_dir`` (the cache root for engine workspaces). An engine class with a
    ``from_config(rollout, **context)`` classmethod gets all of it; any other factory is called with
    the context keywords its signature names (so a test engine can take just ``model`` and ``tokenizer``).
    """
    if name not in ENGINES:
        raise ValueError(f"unknown rollout.engine {name!r}; registered: {sorted(ENGINES)}")
    factory = ENGINES[name]
    from_config = getattr(factory, "from_config", None)
    if from_config is not None:
        return from_config(rollout if rollout is not None else RolloutConfig(), **context)
    params = inspect.signature(factory).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        context = {k: v for k, v in context.items() if k in params}
    return factory(**context)


def engine_needs_weights(name: str) -> bool:
    """Whether engine ``name`` samples from the policy weights the loop loads (see the module docstring)."""
    return bool(getattr(ENGINES.get(name), "needs_weights", True))


def preflight_engine(name: str, rollout: RolloutConfig, **context) -> None:
    """Engine ``name``'s ``preflight(rollout, **context)``, when it has one; before anything loads."""
    preflight = getattr(ENGINES.get(name), "preflight", None)
    if preflight is not None:
        preflight(rollout, **context)


def weight_items(weights: Weights, tied_embeddings: bool) -> Iterator[tuple[str, torch.Tensor]]:
    """Full HF-named tensors, checked, with ``lm_head.weight`` present when it is tied.

    vLLM's in-place reload restores every layer it was not given from its old tensors, and a
    tied lm_head is its own layer there: skip it and the logits keep the pre-sync embedding.
    So a tied model sends the (new) embedding under the lm_head name too.
    """
    import torch

    items = weights.items() if isinstance(weights, Mapping) else weights
    embed = None
    sent_head = False
    for name, tensor in items:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"sync_weights: {name!r} is a {type(tensor).__name__}, not a tensor")
        if type(tensor) is not torch.Tensor and type(tensor).__name__ == "DTensor":
            raise TypeError(f"sync_weights: {name!r} is a sharded DTensor; pass the full state dict "
                            "(Learner.full_state_dict()), not the FSDP2 module's own state_dict()")
        if name.endswith("embed_tokens.weight"):
            embed = tensor
        sent_head = sent_head or name == "lm_head.weight"
        yield name, tensor.detach()
    if tied_embeddings and not sent_head:
        if embed is None:
            raise ValueError("sync_weights: the weights hold neither lm_head.weight nor the tied embed_tokens.weight")
        yield "lm_head.weight", embed.detach()
