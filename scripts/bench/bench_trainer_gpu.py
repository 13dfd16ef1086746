"""GRPO step throughput at scale: ``Learner.step`` on a random-init Qwen2-shaped model under FSDP2 or
DeepSpeed ZeRO, reporting tokens/s, MFU and peak memory. Why: the CPU benchmark
(``scripts/bench/bench_trainer.py``) checks that our step matches TRL's on a 135M model; this one tells
how well the same step uses a GPU node at the 1.5B scale the paper trains.

    torchrun --standalone --nproc_per_node 8 scripts/bench/bench_trainer_gpu.py --strategy fsdp2 --bf16
    torchrun --standalone --nproc_per_node 8 scripts/bench/bench_trainer_gpu.py --strategy deepspeed --bf16
    .venv/bin/python scripts/bench/bench_trainer_gpu.py --strategy fsdp2 --bf16   # one GPU (a process group of one)
    .venv/bin/python scripts/bench/bench_trainer_gpu.py --shape tiny --strategy fsdp2 --prompt-len 16 --response-len 8

Nothing is downloaded: the model is built from a ``Qwen2Config`` with seeded random weights, and
the batch is random tokens (fixed seed) with rewards that differ within every group, so no step
is skipped. One process asking for fsdp2/deepspeed runs it in a process group of one, as
a run's start does (``train.api.start``), so bf16 mixed precision and offload are measured on a one-GPU machine too.

MFU = model FLOP/s / peak FLOP/s, model FLOPs per step = (6 + 2) x N x T: 6N per token for the
policy forward + backward and 2N for the frozen reference's forward (no reference when
kl_coef = 0), PaLM-style, with N = all parameters (embeddings included, tied ones once) and T =
all ranks' prompt + response tokens. Attention's quadratic term and gradient-checkpointing
recompute are not counted (model FLOPs, not hardware FLOPs). Peak FLOP/s: ``--peak-tflops``,
by default 989 (H100/H200 bf16 dense) on such a GPU, else none and MFU is omitted. Peak memory:
``torch.cuda.max_memory_allocated`` during the timed steps (max over ranks) on a GPU, peak RSS
(max over ranks) on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from benchlib.flops import FLOPS_FORMULA, mfu, model_flops  # scripts/bench/ is first on sys.path: this is run as a script

SHAPES = {
    # Qwen2.5-1.5B's shape.
    "qwen2-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                       num_key_value_heads=2, vocab_size=151936),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=4096),  # CPU smoke tests
}
def default_peak_tflops() -> float | None:
    if torch.cuda.is_available() and any(g in torch.cuda.get_device_name() for g in ("H100", "H200")):
        return 989.0  # dense bf16 tensor-core peak (SXM); the same for H200
    return None


def build_model(shape: str, seed: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**SHAPES[shape], tie_word_embeddings=True, max_position_embeddings=32768,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e6}, rms_norm_eps=1e-6)
    torch.manual_seed(seed)  # every rank builds the same weights
    return Qwen2ForCausalLM(config)


def random_batch(args, vocab: int, rank: int):
    """This rank's sequences: random tokens, groups of ``group_size`` with two different rewards each."""
    from train.learner.learner import Sample

    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    per_rank = args.sequences_per_rank // args.group_size
    return [Sample(torch.randint(0, vocab, (args.prompt_len,), generator=gen).tolist(),
                   torch.randint(0, vocab, (args.response_len,), generator=gen).tolist(),
                   reward=float(i % 2), group=rank * per_rank + i // args.group_size)
            for i in range(args.sequences_per_rank)]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--strategy", choices=["fsdp2", "deepspeed", "ddp", "none"], default="fsdp2")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen2-1.5b")
    ap.add_argument("--bf16", action="store_true", help="bf16 compute, fp32 master weights (fsdp2/deepspeed)")
    ap.add_argument("--offload", action="store_true", help="parameters, gradients and optimizer state on the CPU")
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--zero-stage", type=int, choices=[1, 2, 3], default=3, help="deepspeed only")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--response-len", type=int, default=512)
    ap.add_argument("--sequences-per-rank", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--micro-batch-size", type=int, default=4)
    ap.add_argument("--kl-coef", type=float, default=1e-3, help="0: no reference model (and no reference forward)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--peak-tflops", type=float, default=None, help="default: 989 on H100/H200, else MFU omitted")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="also write the JSON result here (rank 0)")
    args = ap.parse_args(argv)
    if args.sequences_per_rank % args.group_size:
        ap.error(f"--sequences-per-rank ({args.sequences_per_rank}) must be a multiple of --group-size ({args.group_size})")
    if min(args.group_size, args.prompt_len, args.response_len, args.micro_batch_size, args.steps) < 1 or args.warmup < 0:
        ap.error("lengths, sizes and --steps must be >= 1, --warmup >= 0")
    if args.group_size < 2:
        ap.error("--group-size must be >= 2 (one sample per group has no advantage to learn from)")
    return args


def timed_steps(learner, samples, args) -> tuple[list[float], dict, int]:
    """(seconds of each timed step, the last step's metrics, this rank's peak memory in bytes)."""
    cuda = learner.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    times = []
    for i in range(args.warmup + args.steps):
        if i == args.warmup and cuda:
            torch.cuda.reset_peak_memory_stats()
        sync()
        start = time.perf_counter()
        metrics = learner.step(samples)
        sync()
        if metrics["skipped_step"]:
            raise RuntimeError("Learner skipped the step (all rewards equal in every group?)")
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return times, metrics, int(peak)


def result_of(args, learner, info, n_params: int, times: list[float], metrics: dict, peak: int) -> dict:
    cuda = learner.device.type == "cuda"
    tokens = info.world * args.sequences_per_rank * (args.prompt_len + args.response_len)
    step_s = statistics.median(times)
    peak_tflops = args.peak_tflops if args.peak_tflops is not None else default_peak_tflops()
    with_ref = args.kl_coef > 0
    return {
        "shape": args.shape, "n_params": n_params, "strategy_requested": args.strategy, "strategy": learner.strategy,
        "world": info.world, "device": torch.cuda.get_device_name() if cuda else "cpu",
        "bf16": args.bf16 and learner.backend.honours_bf16, "offload": args.offload,
        "gradient_checkpointing": args.gradient_checkpointing,
        "zero_stage": getattr(learner.backend, "zero_stage", None),
        "prompt_len": args.prompt_len, "response_len": args.response_len, "sequences_per_rank": args.sequences_per_rank,
        "group_size": args.group_size, "micro_batch_size": args.micro_batch_size, "reference_model": with_ref,
        "tokens_per_step": tokens, "step_s_median": step_s, "step_s": times, "tokens_per_s": tokens / step_s,
        "flops_formula": FLOPS_FORMULA, "model_flops_per_step": model_flops(n_params, tokens, with_ref),
        "peak_tflops": peak_tflops, "mfu": mfu(n_params, tokens, step_s, peak_tflops, with_ref),
        "peak_memory_bytes": peak, "peak_memory_kind": "cuda_max_allocated" if cuda else "rss",
        "loss": metrics["loss"], "torch": torch.__version__,
    }


def print_row(result: dict) -> None:
    mfu_text = f"{result['mfu']:.1%}" if result["mfu"] is not None else "-"
    print("| shape | strategy | ranks | bf16 | offload | grad ckpt | tokens/step | median step (s) | tokens/s | MFU "
          "| peak mem (GiB) |\n" + "|---" * 11 + "|")
    print(f"| {result['shape']} | {result['strategy']} | {result['world']} | {result['bf16']} | {result['offload']} | "
          f"{result['gradient_checkpointing']} | {result['tokens_per_step']} | {result['step_s_median']:.3f} | "
          f"{result['tokens_per_s']:.0f} | {mfu_text} | {result['peak_memory_bytes'] / 2**30:.2f} ({result['peak_memory_kind']}) |")


def main(argv=None) -> dict:
    args = parse_args(argv)
    from train.learner.backends import needs_process_group
    from train.learner.config import TrainerConfig
    from train.learner.distributed import all_reduce_max, init_distributed, shutdown
    from train.learner.learner import Learner

    info = init_distributed(single_process_group=needs_process_group(args.strategy))
    model = build_model(args.shape, args.seed)
    n_params = sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    cfg = TrainerConfig(strategy=args.strategy, bf16=args.bf16, offload_params=args.offload,
                        offload_optimizer=args.offload, zero_stage=args.zero_stage, kl_coef=args.kl_coef,
                        micro_batch_size=args.micro_batch_size, lr=1e-6)
    learner = Learner(model, cfg, group_size=args.group_size, temperature=1.0, pad_id=0, info=info)
    if not learner.backend.honours_bf16 and args.bf16 and info.is_main:
        print(f"[bench] --bf16 applies to fsdp2/deepspeed only; {learner.strategy} runs in fp32", file=sys.stderr)
    times, metrics, peak = timed_steps(learner, random_batch(args, SHAPES[args.shape]["vocab_size"], info.rank), args)
    result = result_of(args, learner, info, n_params, times, metrics, all_reduce_max(peak, info))
    if info.is_main:
        print(json.dumps(result))
        print_row(result)
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    shutdown(info)
    return result


if __name__ == "__main__":
    main()
