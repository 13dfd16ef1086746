"""GRPO optimizer-step benchmark: our ``Learner.step`` next to TRL's ``GRPOTrainer`` loss step,
on the same model and the same fixed batch, in the same run.

    .venv/bin/python scripts/bench/bench_trainer.py                     # prints a markdown table
    .venv/bin/python scripts/bench/bench_trainer.py --seqs 8 --prompt-len 512 --completion-len 256
    .venv/bin/python scripts/bench/bench_trainer.py --impl prefix   # Learner.step, trainer.shared_prefix off vs on

One step = what each trainer does per batch of fresh rollouts once rewards are known: the frozen
reference forward (KL term), group-normalised advantages, the policy forward/backward over
micro-batches with gradient accumulation, gradient clipping and an AdamW step. Settings match:
eps = 0.2, beta = 1e-3 with the k3 ("low_var_kl") estimator, loss averaged over all completion
tokens of the batch (ours: verl ``token-mean``; TRL: ``loss_type="dapo"``, which normalises by the
batch's token count), same micro-batch size, lr, grad clip, fp32, torch AdamW. TRL's generation is
bypassed: its ``compute_loss`` gets the inputs dict its own ``_generate_and_score_completions``
would build. Its fused, chunked LM head (which TRL installs on the model) is part of what is
measured.

Memory is the resident set size (RSS), not torch allocator statistics (CPU torch has none, and
tracemalloc does not see tensor memory). Each trainer runs in its own child process so the two
peaks do not mix: "peak RSS" is the child's ``resource.getrusage`` maximum (model, reference,
optimizer state and activations), "step RSS" is the peak above the pre-step baseline sampled from
/proc/self/statm every millisecond during the timed steps. On a shared machine the minimum step
time is the steadier figure (contention only ever adds time); both are printed.

``--impl prefix`` times our step twice on the same batch instead, with ``trainer.shared_prefix``
off (one row per sample) and on (a group's prompt computed once per micro-batch), each in its own
process; ``--max-tokens`` sets ``trainer.max_tokens_per_micro_batch`` for both, so they can be
held to the same activation budget. The G samples of a group share one prompt in every mode.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch


def fixed_batch(args, vocab: int):
    """Deterministic prompt/completion token ids and rewards (rewards vary within every group); the
    G samples of a group share their prompt, as in GRPO."""
    gen = torch.Generator().manual_seed(args.seed)
    prompts = torch.randint(100, vocab, (args.seqs // args.group_size, args.prompt_len), generator=gen)
    prompts = prompts.repeat_interleave(args.group_size, dim=0)
    completions = torch.randint(100, vocab, (args.seqs, args.completion_len), generator=gen)
    rewards = torch.rand(args.seqs, generator=gen)
    groups = torch.arange(args.seqs) // args.group_size
    return prompts, completions, rewards, groups


class RssSampler:
    """Peak RSS above the value at start, polled from /proc/self/statm in a background thread."""

    def __init__(self, interval_s: float = 0.001):
        self.interval_s, self.page = interval_s, os.sysconf("SC_PAGE_SIZE")
        self.base = self.peak = self.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())
        return False


def ours(args, model, tokenizer, batch, shared_prefix: bool = True):
    """Returns a step function giving (loss, grad norm); ``shared_prefix`` is trainer.shared_prefix."""
    from train.config import TrainerConfig
    from train.distributed import DistInfo
    from train.learner import Learner, Sample

    prompts, completions, rewards, groups = batch
    samples = [Sample(p.tolist(), c.tolist(), float(r), int(g)) for p, c, r, g in zip(prompts, completions, rewards, groups)]
    cfg = TrainerConfig(lr=args.lr, grad_clip=1.0, kl_coef=1e-3, kl_type="low_var_kl", clip_ratio_low=0.2,
                        clip_ratio_high=0.2, loss_agg_mode="token-mean", micro_batch_size=args.micro_batch, strategy="none",
                        max_tokens_per_micro_batch=args.max_tokens, shared_prefix=shared_prefix)
    learner = Learner(model, cfg, group_size=args.group_size, temperature=1.0, pad_id=tokenizer.pad_token_id, info=DistInfo())

    def step():
        m = learner.step(samples)
        return m["loss"], m["grad_norm"], m["micro_batches"]

    return step


def trl(args, model, tokenizer, batch):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    prompts, completions, rewards, groups = batch
    n_micro = args.seqs // args.micro_batch
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench_trl_"), report_to=[], use_cpu=True, bf16=False, seed=args.seed,
        per_device_train_batch_size=args.micro_batch, gradient_accumulation_steps=n_micro, steps_per_generation=n_micro,
        num_generations=args.group_size, max_completion_length=args.completion_len, temperature=1.0,
        beta=1e-3, epsilon=0.2, loss_type="dapo", scale_rewards="group", learning_rate=args.lr, max_grad_norm=1.0,
        optim="adamw_torch", weight_decay=0.0, lr_scheduler_type="constant", warmup_steps=0, disable_dropout=True,
    )
    dataset = Dataset.from_dict({"prompt": ["unused"] * args.seqs})
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions), args=config,
                          train_dataset=dataset, processing_class=tokenizer)
    trainer.create_optimizer()
    trainer.current_gradient_accumulation_steps = n_micro  # set by Trainer's own loop, which we bypass
    policy, optimizer = trainer.model, trainer.optimizer
    ones_p, ones_c = torch.ones_like(prompts), torch.ones_like(completions)
    n_tokens = torch.tensor(float(ones_c.sum()))

    def step():
        policy.train()
        grouped = rewards.view(-1, args.group_size)  # what _generate_and_score_completions computes
        adv = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).view(-1)
        total = 0.0
        for k in range(n_micro):
            rows = slice(k * args.micro_batch, (k + 1) * args.micro_batch)
            ids = torch.cat([prompts[rows], completions[rows]], 1)
            mask = torch.cat([ones_p[rows], ones_c[rows]], 1)
            with torch.no_grad():
                ref, _, _ = trainer._get_per_token_logps_and_entropies(trainer.ref_model, ids, mask, args.completion_len)
            inputs = {"prompt_ids": prompts[rows], "prompt_mask": ones_p[rows], "completion_ids": completions[rows],
                      "completion_mask": ones_c[rows], "advantages": adv[rows], "ref_per_token_logps": ref,
                      "num_items_in_batch": n_tokens}
            loss = trainer.compute_loss(policy, inputs)
            trainer.accelerator.backward(loss)
            total += loss.item()
        norm = trainer.accelerator.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return total, float(norm)

    return step


def child(args) -> dict:
    """Run one implementation: warm up, then time ``repeats`` steps on the same batch."""
    from train.models import load_policy

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model, tokenizer = load_policy(args.model, "float32")
    if not model.name_or_path:  # tiny-random lives in memory; TRL builds its reference model from a path
        path = tempfile.mkdtemp(prefix="bench_model_")
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        model, tokenizer = load_policy(path, "float32")
    batch = fixed_batch(args, model.config.vocab_size)
    impls = {"ours": ours, "trl": trl, "plain": lambda *a: ours(*a, shared_prefix=False),
             "shared": lambda *a: ours(*a, shared_prefix=True)}
    step = impls[args.child](args, model, tokenizer, batch)
    first = [step() for _ in range(args.warmup)][0]
    times = []
    with RssSampler() as rss:
        for _ in range(args.repeats):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
    return {"times": times, "first_loss": first[0], "first_grad_norm": first[1], "micro_batches": first[2:3],
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "step_rss": rss.peak - rss.base}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--seqs", type=int, default=8, help="sequences per step (all groups together)")
    ap.add_argument("--group-size", type=int, default=4, help="G completions per prompt")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--completion-len", type=int, default=64)
    ap.add_argument("--micro-batch", type=int, default=4, help="sequences per forward/backward (both trainers)")
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=0, help="trainer.max_tokens_per_micro_batch (ours only)")
    ap.add_argument("--impl", choices=["both", "ours", "trl", "prefix"], default="both",
                    help="both: ours vs TRL; prefix: ours with trainer.shared_prefix off vs on")
    ap.add_argument("--child", choices=["ours", "trl", "plain", "shared"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.seqs % args.group_size or args.seqs % args.micro_batch:
        ap.error(f"--seqs ({args.seqs}) must be a multiple of --group-size and --micro-batch")
    if args.warmup < 1 or args.repeats < 1:
        ap.error("--warmup and --repeats must be >= 1")
    if args.child:
        print(json.dumps(child(args)))
        return

    impls = {"both": ["ours", "trl"], "prefix": ["plain", "shared"]}.get(args.impl, [args.impl])
    results = {}
    for impl in impls:  # a fresh process each, so the RSS peaks are separate
        cmd = [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]), "--child", impl]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{impl} failed:\n{out.stderr[-4000:]}")
        results[impl] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"[bench] {impl}: {results[impl]}", file=sys.stderr, flush=True)

    tokens = args.seqs * (args.prompt_len + args.completion_len)
    mib = 1 / 2**20
    print(f"\nCommand: `.venv/bin/python scripts/bench/bench_trainer.py {' '.join(argv if argv is not None else sys.argv[1:])}`")
    print(f"Model {args.model}, fp32, {args.seqs} seqs x ({args.prompt_len} prompt + {args.completion_len} completion) tokens, "
          f"G={args.group_size}, micro-batch {args.micro_batch}"
          f"{f', token budget {args.max_tokens}' if args.max_tokens else ''}, {args.threads} torch threads, "
          f"median of {args.repeats} steps after {args.warmup} warm-up.\n")
    if args.impl == "prefix":
        print_prefix_table(results, tokens)
        return
    print("| trainer | median step (s) | min step (s) | tokens/s (median) | peak RSS (MiB) | step RSS above baseline (MiB) "
          "| first-step loss | first-step grad norm |")
    print("|---|---|---|---|---|---|---|---|")
    for impl, r in results.items():
        med = statistics.median(r["times"])
        name = "HELIX Learner.step (verl loss)" if impl == "ours" else "TRL GRPOTrainer loss step"
        print(f"| {name} | {med:.2f} | {min(r['times']):.2f} | {tokens / med:.0f} | {r['peak_rss'] * mib:.0f} | {r['step_rss'] * mib:.0f} "
              f"| {r['first_loss']:.2e} | {r['first_grad_norm']:.4f} |")
    if len(results) == 2:
        o, t = results["ours"], results["trl"]
        print(f"\nours/TRL: median step time {statistics.median(o['times']) / statistics.median(t['times']):.2f}x, "
              f"min step time {min(o['times']) / min(t['times']):.2f}x, "
              f"peak RSS {o['peak_rss'] / t['peak_rss']:.2f}x, step RSS {o['step_rss'] / max(t['step_rss'], 1):.2f}x")


def print_prefix_table(results: dict, tokens: int) -> None:
    """Rows for trainer.shared_prefix off and on, and their ratios."""
    mib = 1 / 2**20
    print("| trainer.shared_prefix | micro-batches | median step (s) | min step (s) | tokens/s (min) | peak RSS (MiB) "
          "| step RSS above baseline (MiB) | first-step loss | first-step grad norm |")
    print("|---|---|---|---|---|---|---|---|---|")
    for impl, r in results.items():
        print(f"| {'off' if impl == 'plain' else 'on'} | {r['micro_batches'][0]} | {statistics.median(r['times']):.2f} "
              f"| {min(r['times']):.2f} | {tokens / min(r['times']):.0f} | {r['peak_rss'] * mib:.0f} "
              f"| {r['step_rss'] * mib:.0f} | {r['first_loss']:.6e} | {r['first_grad_norm']:.6f} |")
    on, off = results["shared"], results["plain"]
    print(f"\non/off: min step time {min(on['times']) / min(off['times']):.2f}x, median step time "
          f"{statistics.median(on['times']) / statistics.median(off['times']):.2f}x, peak RSS "
          f"{on['peak_rss'] / off['peak_rss']:.2f}x, step RSS {on['step_rss'] / max(off['step_rss'], 1):.2f}x")


if __name__ == "__main__":
    main()
