"""Generation engines behind one interface, chosen by ``rollout.engine`` in the config.

An engine turns tokenised prompts into G sampled completions each. ``sync_weights`` is the hook
an engine with its own copy of the weights (vLLM) uses after every optimizer step; the HF
engine samples from the trainer's own module, so it has nothing to copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch


@dataclass(frozen=True)
class SamplingParams:
    n: int  # G completions per prompt
    temperature: float = 1.0
    top_p: float = 0.95
    max_new_tokens: int = 1024
    seed: int = 0


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]  # response tokens, the closing EOS included when the model emitted one
    text: str
    truncated: bool  # cut at max_new_tokens without an EOS


class Engine(Protocol):
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[list[Completion]]: ...

    def sync_weights(self, model: torch.nn.Module) -> None: ...


ENGINES: dict[str, Callable[..., Engine]] = {}


def register_engine(name: str):
    def wrap(factory):
        ENGINES[name] = factory
        return factory

    return wrap


def build_engine(name: str, **kwargs) -> Engine:
    if name not in ENGINES:
        raise ValueError(f"unknown rollout.engine {name!r}; registered: {sorted(ENGINES)}")
    return ENGINES[name](**kwargs)


@register_engine("hf")
class HFEngine:
    """Batched ``transformers.generate`` with left padding, sampling from the live policy."""

    def __init__(self, model: torch.nn.Module, tokenizer, batch_size: int = 0, progress: bool = False):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.progress = progress

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model = model

    @torch.no_grad()
    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams) -> list[list[Completion]]:
        pad = self.tokenizer.pad_token_id
        eos = self.tokenizer.eos_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            attention[row, width - len(ids) :] = 1
        out = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            do_sample=True,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=0,  # the paper samples with top_p only; HF's default top_k=50 would change the policy
            max_new_tokens=params.max_new_tokens,
            num_return_sequences=params.n,
            pad_token_id=pad,
            eos_token_id=eos,
        )
        responses = out[:, width:].tolist()
        grouped: list[list[Completion]] = []
        for p in range(len(prompts)):
            group = []
            for seq in responses[p * params.n : (p + 1) * params.n]:
                if eos in seq:
                    seq = seq[: seq.index(eos) + 1]
                    truncated = False
                else:
                    truncated = True
                group.append(Completion(seq, self.tokenizer.decode(seq, skip_special_tokens=True), truncated))
            grouped.append(group)
        return grouped

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[list[Completion]]:
        if not prompts:
            return []
        was_training = self.model.training
        self.model.eval()
        torch.manual_seed(params.seed)
        size = self.batch_size or len(prompts)
        batches = [prompts[i : i + size] for i in range(0, len(prompts), size)]
        if self.progress and len(batches) > 1:
            from tqdm import tqdm

            batches = tqdm(batches, desc="generate", leave=False)
        results: list[list[Completion]] = []
        try:
            for batch in batches:
                results.extend(self._generate_batch(batch, params))
        finally:
            self.model.train(was_training)
        return results
