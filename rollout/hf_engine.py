"""Transformers ``generate``, batched with left padding, sampling from the trainer's own module.

It shares the trainer's module object, so after an optimizer step it already has the new
weights: ``needs_sync`` is false and the loop skips the full-state gather. Built around a
separate copy (``shares_trainer_module=False``) it loads the synced state instead. torch is imported
where it is used: registering the engine (config loading reads the registry's names) imports none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rollout.engine_api import Completion, OnBatch, SamplingParams, Weights, parse_stop, register_engine, weight_items

if TYPE_CHECKING:
    import torch


@register_engine("hf")
class HFEngine:
    device: torch.device | None = None  # the rank's device (from_config); None: where the module's parameters are

    def __init__(self, model: torch.nn.Module, tokenizer, batch_size: int = 0, progress: bool = False,
                 stop: tuple[str, ...] = (), seeded: bool = True, shares_trainer_module: bool = True,
                 device: torch.device | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.progress = progress
        self.stop = tuple(stop)
        self.seeded = seeded
        self.shares_trainer_module = shares_trainer_module
        self.device = device

    @property
    def input_device(self) -> torch.device:
        """Where the prompt tensors go: the rank's device (sharded modules report their shards' place)."""
        if self.device is not None:
            return self.device
        param = next(self.model.parameters(), None)
        if param is not None:
            return param.device
        import torch

        return torch.device("cpu")

    @classmethod
    def from_config(cls, rollout, model=None, tokenizer=None, info=None, progress: bool = False, **_):
        if model is None or tokenizer is None:
            raise ValueError("the hf engine samples from the trainer's module: build_engine needs model= and tokenizer=")
        engine = cls(model, tokenizer, rollout.batch_size, progress)
        engine.device = info.device if info is not None else None
        engine.stop = parse_stop(rollout.stop)
        engine.seeded = rollout.seeded
        return engine

    @property
    def needs_sync(self) -> bool:
        return not self.shares_trainer_module

    def sync_weights(self, weights: Weights) -> None:
        """No-op when sampling from the trainer's module; otherwise copy the full state in."""
        if self.shares_trainer_module:
            return
        tied = bool(getattr(self.model.config, "tie_word_embeddings", False))
        self.model.load_state_dict(dict(weight_items(weights, tied)))

    def _finish(self, seq: list[int], stop: tuple[str, ...]) -> tuple[list[int], bool]:
        """Cut a generated row where it ended: at EOS (kept), after a stop string, or not at all.

        Rows that finished early are padded, and the pad id may equal EOS, so a row whose text
        before the first EOS/pad ends in a stop string stopped there (no EOS was sampled)."""
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id
        ends = [i for i, t in enumerate(seq) if t in (eos, pad)]
        cut = ends[0] if ends else len(seq)
        body = seq[:cut]
        if stop and body:
            tail = self.tokenizer.decode(body[-(max(map(len, stop)) + 2):], skip_special_tokens=True)
            if any(s in tail for s in stop):
                return body, False
        if cut < len(seq) and seq[cut] == eos:
            return body + [eos], False
        return body, True

    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams, stop: tuple[str, ...]) -> list[list[Completion]]:
        """One batch of prompts, under ``generate``'s no_grad."""
        import torch

        pad = self.tokenizer.pad_token_id
        eos = self.tokenizer.eos_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            attention[row, width - len(ids) :] = 1
        extra = dict(stop_strings=list(stop), tokenizer=self.tokenizer) if stop else {}
        out = self.model.generate(
            input_ids=input_ids.to(self.input_device),
            attention_mask=attention.to(self.input_device),
            do_sample=True,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=0,  # the paper samples with top_p only; HF's default top_k=50 would change the policy
            max_new_tokens=params.max_new_tokens,
            num_return_sequences=params.n,
            pad_token_id=pad,
            eos_token_id=eos,
            **extra,
        )
        responses = out[:, width:].tolist()
        grouped: list[list[Completion]] = []
        for p in range(len(prompts)):
            group = []
            for seq in responses[p * params.n : (p + 1) * params.n]:
                ids, truncated = self._finish(seq, stop)
                group.append(Completion(ids, self.tokenizer.decode(ids, skip_special_tokens=True), truncated))
            grouped.append(group)
        return grouped

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 on_batch: OnBatch | None = None) -> list[list[Completion]]:
        if not prompts:
            return []
        import torch

        stop = self.stop if params.stop is None else tuple(params.stop)
        was_training = self.model.training
        self.model.eval()
        if self.seeded and params.seed is not None:
            torch.manual_seed(params.seed)
        size = self.batch_size or len(prompts)
        batches = [prompts[i : i + size] for i in range(0, len(prompts), size)]
        if self.progress and len(batches) > 1:
            from tqdm import tqdm

            batches = tqdm(batches, desc="generate", leave=False)
        results: list[list[Completion]] = []
        try:
            for batch in batches:
                with torch.no_grad():
                    groups = self._generate_batch(batch, params, stop)
                if on_batch is not None:
                    on_batch(len(results), groups)
                results.extend(groups)
        finally:
            self.model.train(was_training)
        return results
