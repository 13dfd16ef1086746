"""CPU bf16 versus fp32: whether this CPU computes bf16 natively, and what a bf16 matmul and a
warm-start training step cost next to fp32, in one run.

    .venv/bin/python scripts/bench/bench_cpu_dtype.py
    .venv/bin/python scripts/bench/bench_cpu_dtype.py --tokens 512 --repeats 5   # minutes on a CPU without native bf16

Why: ``warm_start.dtype: auto`` and the quickstart's fp32 generation rest on these ratios. On a CPU
without AVX512-BF16/AMX, torch emulates bf16 matmuls, and they are far slower than fp32.
The matmul has SmolLM2-135M's MLP shape (hidden 576 -> 1536); the step is a forward and backward
pass of a randomly initialised model of SmolLM2-135M's shape over one sequence, under
``torch.autocast`` as the warm start runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from train.warm_start import cpu_has_native_bf16


def _median_s(fn, repeats: int) -> float:
    fn()  # warm-up: oneDNN picks its kernels on the first call
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_s(dtype: torch.dtype, tokens: int, repeats: int) -> float:
    x, w = torch.randn(tokens, 576).to(dtype), torch.randn(576, 1536).to(dtype)
    return _median_s(lambda: x @ w, repeats)


def step_s(autocast: bool, tokens: int, repeats: int) -> float:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    shape = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                        num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True)
    model = LlamaForCausalLM(shape)
    ids = torch.randint(0, shape.vocab_size, (1, tokens))

    def step():
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        with ctx:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        model.zero_grad(set_to_none=True)

    return _median_s(step, repeats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=128, help="rows of the matmul; sequence length of the step")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    native = cpu_has_native_bf16()  # what warm_start.dtype: auto decides on
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, native bf16 (oneDNN): {native}")
    rows = [("matmul 576x1536", matmul_s(torch.float32, args.tokens, args.repeats),
             matmul_s(torch.bfloat16, args.tokens, args.repeats)),
            ("135M forward+backward", step_s(False, args.tokens, args.repeats), step_s(True, args.tokens, args.repeats))]
    print(f"\n{args.tokens} tokens, median of {args.repeats}\n")
    print("| work | fp32 s | bf16 s | bf16 / fp32 |\n|---|---|---|---|")
    for name, fp32, bf16 in rows:
        print(f"| {name} | {fp32:.4f} | {bf16:.4f} | {bf16 / fp32:.1f}x |")


if __name__ == "__main__":
    main()
