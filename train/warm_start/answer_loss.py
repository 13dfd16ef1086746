"""The warm start's loss on one prompt's answers: the prompt runs once, without gradient, and every
answer is scored on its key/value cache.

Memory is what shapes this file. On a CPU the fine-tune's peak is its activations (one decoder layer
of two 240-token answers against a 1,200-token prompt holds ~30 MB, thirty layers ~0.9 GB) on top of
the weights, gradients and AdamW moments (~2 GB for SmolLM2-135M). So:

- the answers go through forward and backward ``per_pass`` at a time, summing gradients;
- the prompt's cache is read-only (``SharedPrompt``): every pass reads the same keys and values,
  with no copy of the cache per pass;
- each decoder layer can be checkpointed (recomputed in backward), which a read-only cache allows:
  the recompute reads the very keys the forward read. HF drops the cache of a checkpointed layer
  because its own caches are written by the forward; this one is not.

Checkpointing changes no value: the recompute runs the same kernels on the same inputs, and the
warm-started weights are bitwise the same with it on or off (BENCHMARKS.md "Memory")."""

from __future__ import annotations

import contextlib

import torch
from transformers.cache_utils import DynamicLayer
from transformers.modeling_layers import GradientCheckpointingLayer


class SharedPrompt(DynamicLayer):
    """One layer of a prompt's cache, shared by k answers: ``update`` returns the prompt's keys and
    values (broadcast over the answers) followed by the answers' own, and stores nothing, so every
    pass, and a checkpointed layer's recompute, reads the prompt alone."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        k = key_states.shape[0]
        return (torch.cat([self.keys.expand(k, -1, -1, -1), key_states], dim=-2),
                torch.cat([self.values.expand(k, -1, -1, -1), value_states], dim=-2))


def prompt_cache(model, prompt_ids: list[int]):
    """The read-only key/value cache of all but the last prompt token, without gradient: the proof of
    concept's recipe. Gradients flow through the answers' own computation, not back into the prompt's;
    that is an approximation a supervised warm start can afford (the GRPO step, which must be exact,
    uses train.learner.shared_prefix instead), and it costs about a third of the exact packed pass on a
    CPU, whose attention has no fast kernel for a custom 4D mask. Computed in eval mode: nothing here
    is differentiated, so there is nothing to checkpoint or drop out."""
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


def answers_nll(model, cache, batch_examples: list, pad_id: int) -> torch.Tensor:
    """Summed negative log-likelihood of the answer tokens of some of one prompt's examples (build.Example), on
    ``cache`` (``prompt_cache`` of their prompt, read only)."""
    prompt = batch_examples[0].prompt_ids
    k, p = len(batch_examples), len(prompt) - 1  # the cache holds all but the last prompt token
    width = max(len(e.answer_ids) for e in batch_examples)
    # Each row: the last prompt token (it predicts answer token 0), then the answer, right-padded.
    ids = torch.full((k, width + 1), pad_id, dtype=torch.long)
    ids[:, 0] = prompt[-1]
    valid = torch.zeros((k, width), dtype=torch.bool)
    for i, e in enumerate(batch_examples):
        ids[i, 1 : 1 + len(e.answer_ids)] = torch.tensor(e.answer_ids)
        valid[i, : len(e.answer_ids)] = True
    attention = torch.cat([torch.ones((k, p + 1), dtype=torch.long), valid.long()], dim=1)
    positions = torch.arange(p, p + width + 1).expand(k, width + 1)
    # use_cache=False: the layers read ``cache`` all the same; nothing asks the model to build or return one
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, past_key_values=cache,
                   use_cache=False).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return -(logp * valid.float()).sum()


def accumulate_prompt(model, group: list, pad_id: int, per_pass: int, autocast=None) -> float:
    """Backward of the mean negative log-likelihood of the answer tokens of one prompt's examples, in
    passes of ``per_pass`` answers on one shared prompt cache: the activations of ``per_pass`` answers are
    alive at a time, not of all of them (8 answers of 240 tokens held ~6 GB on SmolLM2), and the gradient
    is the one pass's (``per_pass`` >= len(group)) up to float rounding. Returns the loss."""
    autocast = autocast or contextlib.nullcontext()
    total = sum(len(e.answer_ids) for e in group)
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
