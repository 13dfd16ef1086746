"""Rollout benchmark: the ``vllm`` engine next to ``hf`` and next to vLLM called directly, on the
same HELIX prompts with the same sampling, in one run; plus the weight-sync time per step.

    .venv/bin/python scripts/bench/bench_rollout.py                          # SmolLM2, 2 prompts x 4 samples x 128 tokens
    .venv/bin/python scripts/bench/bench_rollout.py --prompts 4 --n 8 --max-new-tokens 256

The prompts are real epoch-1 prompts: the task's starter program as the parent, rendered with
the chat template by ``rollout.prompts.PromptBuilder``. Sampling is the paper's (temperature 1,
top_p 0.95) with a fixed seed, and EOS ends a sample, so each engine generates a similar but not
identical number of tokens: the rate is generated tokens / wall seconds.

- ``vllm engine``: ``VLLMEngine.generate`` (what the loop calls).
- ``vLLM direct``: ``LLM.generate`` on the same engine object with the same requests: the
  difference is our overhead (request building, converting outputs, logprob extraction).
  Both reset the prefix cache first, so neither reuses the other's prompt KV.
- ``hf``: ``HFEngine.generate`` (transformers ``generate``, left padding), in a separate process
  so vLLM's thread binding does not slow it.
- ``weight sync``: ``VLLMEngine.sync_weights(full state dict)`` (reload in place + prefix-cache
  reset), what the loop does after every optimizer step.
Each figure is the median over ``--repeats``; the machine is shared, so compare ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def prompts(args, tokenizer) -> list[list[int]]:
    from rollout.prompts import PromptBuilder
    from tasks import load_task

    task = load_task(args.task)
    builder = PromptBuilder(tokenizer, task.description, task.entry_function, task.timeout_s, 4096, 2,
                            template=task.prompt_template)

    class Parent:  # the starter program as evaluated at epoch 0
        code, reward, valid, feedback = task.initial_program, 0.5, True, "valid; ran well within the time limit"

    ids = builder.build(Parent()).token_ids
    return [ids] * args.prompts


def sampling(args):
    from rollout.engine_api import SamplingParams

    return SamplingParams(n=args.n, temperature=1.0, top_p=0.95, max_new_tokens=args.max_new_tokens, seed=args.seed)


def tokens(groups) -> int:
    return sum(len(c.token_ids) for g in groups for c in g)


def timed(fn, repeats: int) -> tuple[float, int]:
    """Median seconds and median generated tokens over ``repeats`` calls."""
    times, counts = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        counts.append(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times), int(statistics.median(counts))


def run_vllm(args) -> dict:
    from rollout.vllm_engine import VLLMEngine
    from train.models import cache_root, load_policy, resolve_policy_path

    model_dir = resolve_policy_path(args.model)
    model, tokenizer = load_policy(args.model, "float32")
    engine = VLLMEngine(model_dir, dtype=args.dtype, kv_cache_gb=2.0, max_model_len=4096 + args.max_new_tokens,
                        seed=args.seed, workspace=cache_root() / "vllm-workspace")
    batch, params = prompts(args, tokenizer), sampling(args)
    requests = [{"prompt_token_ids": p} for p in batch]
    vparams = [engine.sampling_params(params, i) for i in range(len(batch))]

    def ours():
        engine.llm.reset_prefix_cache()
        return tokens(engine.generate(batch, params))

    def direct():
        engine.llm.reset_prefix_cache()
        outs = engine.llm.generate(requests, vparams, use_tqdm=False)
        return sum(len(c.token_ids) for o in outs for c in o.outputs)

    ours()  # warm-up (first-call allocations)
    result = {"startup_s": engine.startup_s, "prompt_tokens": len(batch[0])}
    # Interleaved, so drift on a shared machine hits both alike.
    rounds = [(timed(ours, 1), timed(direct, 1)) for _ in range(args.repeats)]
    result["engine"] = (statistics.median(r[0][0] for r in rounds), int(statistics.median(r[0][1] for r in rounds)))
    result["direct"] = (statistics.median(r[1][0] for r in rounds), int(statistics.median(r[1][1] for r in rounds)))
    state = model.state_dict()
    syncs = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        engine.sync_weights(state)
        syncs.append(time.perf_counter() - start)
    result["sync_s"] = statistics.median(syncs)
    result["n_params"] = sum(t.numel() for t in {t.data_ptr(): t for t in state.values()}.values())  # tied: once
    return result


def run_hf(args) -> dict:
    import torch

    from rollout.hf_engine import HFEngine
    from train.models import load_policy

    torch.set_num_threads(args.threads)
    model, tokenizer = load_policy(args.model, {"bfloat16": "bfloat16"}.get(args.dtype, "float32"))
    engine = HFEngine(model, tokenizer)
    batch, params = prompts(args, tokenizer), sampling(args)
    return {"engine": timed(lambda: tokens(engine.generate(batch, params)), args.repeats)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--task", default="circle_packing_26")
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--n", type=int, default=4, help="samples per prompt (G)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="torch threads for the hf engine")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", choices=["vllm", "hf"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps({"vllm": run_vllm, "hf": run_hf}[args.child](args)))
        return

    passed = argv if argv is not None else sys.argv[1:]
    results = {}
    for child in ("vllm", "hf"):
        out = subprocess.run([sys.executable, __file__, *passed, "--child", child], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{child} failed:\n{out.stderr[-4000:]}")
        results[child] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"[bench] {child}: {results[child]}", file=sys.stderr, flush=True)

    v, h = results["vllm"], results["hf"]
    rate = {name: n / s for name, (s, n) in (("engine", v["engine"]), ("direct", v["direct"]), ("hf", h["engine"]))}
    print(f"\nCommand: `.venv/bin/python scripts/bench/bench_rollout.py {' '.join(passed)}`")
    print(f"Model {args.model}, {args.dtype}, {args.prompts} prompts of {v['prompt_tokens']} tokens x {args.n} samples, "
          f"max {args.max_new_tokens} new tokens, temperature 1.0, top_p 0.95, median of {args.repeats}.\n")
    print("| path | seconds | generated tokens | tokens/s | vs vLLM direct |")
    print("|---|---|---|---|---|")
    for label, key, (secs, count) in (("vllm engine (ours)", "engine", v["engine"]), ("vLLM called directly", "direct", v["direct"]),
                                      ("hf engine (transformers generate)", "hf", h["engine"])):
        print(f"| {label} | {secs:.2f} | {count} | {rate[key]:.0f} | {rate[key] / rate['direct']:.2f}x |")
    print(f"\nvllm engine / hf: {rate['engine'] / rate['hf']:.2f}x tokens/s; our overhead over vLLM direct: "
          f"{(1 - rate['engine'] / rate['direct']) * 100:+.1f}% (goal: within 10%)")
    print(f"weight sync (reload {v['n_params'] / 1e6:.0f}M params in place + prefix-cache reset): {v['sync_s']:.3f} s per step; "
          f"engine start-up {v['startup_s']:.1f} s")


if __name__ == "__main__":
    main()
