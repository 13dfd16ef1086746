"""GRPO step with and without ``trainer.lora``: peak memory and step time of ``Learner.step`` on the
real SmolLM2-135M with a quickstart-shaped batch (B = 2 prompts x G = 4 completions), each in its
own process so the RSS peaks do not mix.

    .venv/bin/python scripts/bench/bench_lora.py                   # prints a markdown table
    .venv/bin/python scripts/bench/bench_lora.py --prompt-len 1024 --completion-len 256 --rank 8

Full fine-tuning holds the policy, a deep-copied reference and AdamW's two moments per weight;
LoRA holds the policy (its base frozen) plus adapters and their moments, and its reference is the
base with the adapters off (no copy). "peak RSS" is the child's ``resource.getrusage`` maximum
(model load, learner construction and the steps), "step RSS" the peak above the pre-step baseline
(bench_trainer's sampler). The minimum step time is the steadier figure on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from bench_trainer import RssSampler, fixed_batch  # scripts/bench/ is first on sys.path: this is run as a script


def child(args) -> dict:
    from train.learner.config import LoraConfig, TrainerConfig
    from train.learner.distributed import DistInfo
    from train.learner.learner import Learner, Sample
    from train.learner.models import load_policy

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model, tokenizer = load_policy(args.model, "float32")
    prompts, completions, rewards, groups = fixed_batch(args, model.config.vocab_size)
    samples = [Sample(p.tolist(), c.tolist(), float(r), int(g)) for p, c, r, g in zip(prompts, completions, rewards, groups)]
    lora = LoraConfig(enabled=args.child == "lora", rank=args.rank, alpha=2.0 * args.rank, target_modules=args.targets)
    # the quickstart's trainer section (configs/quickstart.yaml over base/cpu.yaml), one process
    cfg = TrainerConfig(lr=args.lr, micro_batch_size=4, loss_agg_mode="seq-mean-token-mean", kl_coef=1e-3,
                        kl_type="low_var_kl", strategy="none", lora=lora)
    learner = Learner(model, cfg, group_size=args.group_size, temperature=1.0, pad_id=tokenizer.pad_token_id, info=DistInfo())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    for _ in range(args.warmup):
        learner.step(samples)
    optim_bytes = sum(t.numel() * t.element_size() for s in learner.optimizer.state.values() for t in s.values()
                      if torch.is_tensor(t))
    times = []
    with RssSampler() as rss:
        for _ in range(args.repeats):
            start = time.perf_counter()
            learner.step(samples)
            times.append(time.perf_counter() - start)
    start = time.perf_counter()
    learner.full_state_dict()  # what the engine's weight sync receives (merged, under LoRA)
    sync_s = time.perf_counter() - start
    return {"times": times, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "step_rss": rss.peak - rss.base, "trainable": trainable, "optim_bytes": optim_bytes, "sync_s": sync_s}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--seqs", type=int, default=8, help="B x G (quickstart: 2 x 4)")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=900, help="quickstart prompts: parent + one ancestor, <= 1280")
    ap.add_argument("--completion-len", type=int, default=128, help="warm-started answers take about 100 tokens")
    ap.add_argument("--rank", type=int, default=16, help="trainer.lora.rank (alpha = 2 x rank)")
    ap.add_argument("--targets", default="all-linear", help="trainer.lora.target_modules")
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", choices=["full", "lora"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return
    results = {}
    for impl in ("full", "lora"):  # a fresh process each, so the RSS peaks are separate
        cmd = [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]), "--child", impl]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{impl} failed:\n{out.stderr[-4000:]}")
        results[impl] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"[bench] {impl}: {results[impl]}", file=sys.stderr, flush=True)
    mib = 1 / 2**20
    print(f"\nCommand: `.venv/bin/python scripts/bench/bench_lora.py {' '.join(argv if argv is not None else sys.argv[1:])}`")
    print(f"Model {args.model}, fp32, {args.seqs} seqs x ({args.prompt_len} prompt + {args.completion_len} completion) tokens, "
          f"G={args.group_size}, micro-batch 4, LoRA rank {args.rank} alpha {2 * args.rank} on {args.targets}, "
          f"{args.threads} torch threads, {args.repeats} steps after {args.warmup} warm-up; load average "
          f"{open('/proc/loadavg').read().split()[0]}.\n")
    print("| trainer | trainable params | optimizer state (MiB) | peak RSS (MiB) | step RSS above baseline (MiB) "
          "| median step (s) | min step (s) | full_state_dict (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for impl, r in results.items():
        print(f"| {'full fine-tuning' if impl == 'full' else 'trainer.lora'} | {r['trainable'] / 1e6:.2f} M "
              f"| {r['optim_bytes'] * mib:.0f} | {r['peak_rss'] * mib:.0f} | {r['step_rss'] * mib:.0f} "
              f"| {statistics.median(r['times']):.2f} | {min(r['times']):.2f} | {r['sync_s']:.2f} |")
    f, lo = results["full"], results["lora"]
    print(f"\nlora/full: peak RSS {lo['peak_rss'] / f['peak_rss']:.2f}x, min step time {min(lo['times']) / min(f['times']):.2f}x, "
          f"median step time {statistics.median(lo['times']) / statistics.median(f['times']):.2f}x")


if __name__ == "__main__":
    main()
