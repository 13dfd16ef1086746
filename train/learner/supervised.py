"""The supervised step, beside the GRPO step (train.learner.learner): AdamW on the negative log-likelihood of
target answers, one optimizer step per prompt. The warm start's fine-tune (train.warm_start) is this step over
its synthetic edits; a run's own rollouts go through the GRPO step.

A prompt is computed once for all its answers, as in the GRPO step: answers are grouped by prompt with the
same ``shared_prefix.rows``, and each group's prompt runs once. What differs is where the gradient goes. The
GRPO step must be exact, so its group is one packed row under a 4D mask (train.learner.shared_prefix) and the
gradient reaches the prompt's activations; here the prompt runs once WITHOUT gradient and its key/value cache
is read by every answer (``prompt_cache``): an approximation a supervised warm start can afford, at about a
third of the packed pass's cost on a CPU, whose attention has no fast kernel for a custom 4D mask.

Memory is what shapes the rest. On a CPU the fine-tune's peak is its activations (one decoder layer
of two 240-token answers against a 1,200-token prompt holds ~30 MB, thirty layers ~0.9 GB) on top of
the weights, gradients and AdamW moments (~2 GB for SmolLM2-135M). So:

- the answers go through forward and backward ``per_pass`` at a time, summing gradients;
- the prompt's cache is read-only (``SharedPrompt``): every pass reads the same keys and values,
  with no copy of the cache per pass;
- each decoder layer can be checkpointed (recomputed in backward), which a read-only cache allows:
  the recompute reads the very keys the forward read. HF drops the cache of a checkpointed layer
  because its own caches are written by the forward; this one is not.
- free heap pages go back to the system while it works (train.learner.memory), as in a run.

Checkpointing changes no value: the recompute runs the same kernels on the same inputs, and the
warm-started weights are bitwise the same with it on or off (BENCHMARKS.md "Memory")."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
from transformers.cache_utils import DynamicLayer
from transformers.modeling_layers import GradientCheckpointingLayer

from train.learner import shared_prefix
from train.learner.memory import releasing_free_memory


@dataclass(frozen=True)
class Answer:
    """One target answer to one prompt: the supervised step's sample, as ``learner.Sample`` is the GRPO step's."""

    prompt_ids: list[int]
    response_ids: list[int]  # the answer's tokens, its closing EOS included
    group: int  # the prompt's: the answers of one group share one prompt and one optimizer step


@dataclass(frozen=True)
class Recipe:
    """How the supervised step runs: AdamW at ``lr`` for ``epochs`` passes over the prompts (in an order drawn
    from ``seed``), ``answers_per_pass`` answers through forward and backward at a time, each decoder layer
    recomputed in backward when ``gradient_checkpointing``, under CPU autocast to ``autocast`` ("bfloat16") or
    none ("float32"); free heap pages handed back every ``release_memory_every_s`` seconds (0: never)."""

    lr: float
    epochs: int
    seed: int = 0
    answers_per_pass: int = 2
    gradient_checkpointing: bool = True
    autocast: str = "float32"
    release_memory_every_s: float = 1.0


class SharedPrompt(DynamicLayer):
    """One layer of a prompt's cache, shared by k answers: ``update`` returns the prompt's keys and
    values (broadcast over the answers) followed by the answers' own, and stores nothing, so every
    pass, and a checkpointed layer's recompute, reads the prompt alone."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        k = key_states.shape[0]
        return (torch.cat([self.keys.expand(k, -1, -1, -1), key_states], dim=-2),
                torch.cat([self.values.expand(k, -1, -1, -1), value_states], dim=-2))


def prompt_cache(model, prompt_ids: list[int]):
    """The read-only key/value cache of all but the last prompt token, without gradient (see the module's
    docstring for why). Computed in eval mode: nothing here is differentiated, so there is nothing to
    checkpoint or drop out."""
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            # Only the cache is used: logits for the last position alone, not the prompt's ~1,300 x 49k
            # (a quarter of a GB and 7% of the step's FLOPs on SmolLM2, for nothing).
            cache = model(input_ids=torch.tensor([prompt_ids[:-1]]), use_cache=True, logits_to_keep=1).past_key_values
    finally:
        model.train(training)
    for layer in cache.layers:
        layer.__class__ = SharedPrompt  # the same fields; only update() differs
    return cache


def answers_nll(model, cache, batch_examples: list[Answer], pad_id: int) -> torch.Tensor:
    """Summed negative log-likelihood of the answer tokens of some of one prompt's answers, on ``cache``
    (``prompt_cache`` of their prompt, read only)."""
    prompt = batch_examples[0].prompt_ids
    k, p = len(batch_examples), len(prompt) - 1  # the cache holds all but the last prompt token
    width = max(len(e.response_ids) for e in batch_examples)
    # Each row: the last prompt token (it predicts answer token 0), then the answer, right-padded.
    ids = torch.full((k, width + 1), pad_id, dtype=torch.long)
    ids[:, 0] = prompt[-1]
    valid = torch.zeros((k, width), dtype=torch.bool)
    for i, e in enumerate(batch_examples):
        ids[i, 1 : 1 + len(e.response_ids)] = torch.tensor(e.response_ids)
        valid[i, : len(e.response_ids)] = True
    attention = torch.cat([torch.ones((k, p + 1), dtype=torch.long), valid.long()], dim=1)
    positions = torch.arange(p, p + width + 1).expand(k, width + 1)
    # use_cache=False: the layers read ``cache`` all the same; nothing asks the model to build or return one
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, past_key_values=cache,
                   use_cache=False).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return -(logp * valid.float()).sum()


def accumulate_prompt(model, group: list[Answer], pad_id: int, per_pass: int, autocast=None) -> float:
    """Backward of the mean negative log-likelihood of the answer tokens of one prompt's answers, in
    passes of ``per_pass`` answers on one shared prompt cache: the activations of ``per_pass`` answers are
    alive at a time, not of all of them (8 answers of 240 tokens held ~6 GB on SmolLM2), and the gradient
    is the one pass's (``per_pass`` >= len(group)) up to float rounding. Returns the loss."""
    autocast = autocast or contextlib.nullcontext()
    total = sum(len(e.response_ids) for e in group)
    with autocast:
        cache = prompt_cache(model, group[0].prompt_ids)
    loss = 0.0
    for i in range(0, len(group), per_pass):
        with autocast:
            nll = answers_nll(model, cache, group[i : i + per_pass], pad_id) / total
        nll.backward()
        loss += nll.item()
    return loss


def checkpoint_layers(model) -> None:
    """Recompute each decoder layer in backward instead of keeping its activations (torch's
    non-reentrant checkpoint), with the prompt's read-only cache kept: the ~0.9 GB of a pass's
    activations become one layer's."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    for layer in model.modules():
        if isinstance(layer, GradientCheckpointingLayer):
            # HF's switch for "this layer's cache is only read": SharedPrompt stores nothing, so the
            # backward's recompute reads the keys the forward read.
            layer._can_checkpoint_with_cache = True


def fine_tune(model, answers: list[Answer], recipe: Recipe, pad_id: int, progress: bool = True) -> list[float]:
    """The supervised step over ``answers``: AdamW, one optimizer step per prompt (its answers share its
    cache, ``accumulate_prompt``), the gradient norm clipped to 1, for ``recipe.epochs`` passes over the
    prompts in a seeded order. Trains the parameters that require gradients. Returns each step's loss."""
    groups = [[answers[i] for i in row] for row in shared_prefix.rows(answers)]
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=recipe.lr, weight_decay=0.0)
    rng = np.random.default_rng(recipe.seed)
    steps = [groups[i] for _ in range(recipe.epochs) for i in rng.permutation(len(groups))]
    losses = []
    model.train()
    if recipe.gradient_checkpointing:
        checkpoint_layers(model)
    bar = steps
    if progress:
        from tqdm import tqdm

        bar = tqdm(steps, desc="warm start", leave=False, unit="step",  # elapsed<remaining: the ETA
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]")
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if recipe.autocast == "bfloat16" else contextlib.nullcontext()
    with releasing_free_memory(recipe.release_memory_every_s):
        for group in bar:
            losses.append(accumulate_prompt(model, group, pad_id, recipe.answers_per_pass, autocast))
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if progress:
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
    if recipe.gradient_checkpointing:
        model.gradient_checkpointing_disable()
    model.eval()
    return losses
