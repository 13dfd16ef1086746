"""FLOP accounting of a causal LM step against the machine's measured matmul rate.

The counts that scripts/bench/bench_cpu_limits.py reports, in the benchmarks' package so tests check them by name:
``Shapes`` (a model's sizes from its config), the standard count (a forward is 2 x non-embedding
parameters per token, plus 2 x d x vocab per token whose logits are computed, plus causal attention;
a backward is twice its forward), ``Counter`` (what the code actually ran, from hooks), the peak
matmul rate, and the report's rows; and a GRPO step's model FLOPs, which scripts/bench/bench_trainer_gpu.py
reports as MFU. Torch only; no other HELIX package."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

# The GRPO step's model FLOPs (PaLM-style): scripts/bench/bench_trainer_gpu.py's MFU, and the unit of
# train.commands.scale_plan.train_passes.
FLOPS_FORMULA = "(6 + 2 if reference else 6) * N_params(all, tied once) * tokens(prompt+response, all ranks)"


def model_flops(n_params: int, tokens: int, with_reference: bool = True) -> float:
    """Model FLOPs of one GRPO step: 6N per token for policy forward + backward, 2N for the reference forward."""
    return (6 + (2 if with_reference else 0)) * n_params * tokens


def mfu(n_params: int, tokens: int, seconds: float, peak_tflops: float | None, with_reference: bool = True):
    """Achieved model FLOP/s over the peak; None without a peak."""
    if not peak_tflops:
        return None
    return model_flops(n_params, tokens, with_reference) / seconds / (peak_tflops * 1e12)


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
    ceiling: object = None  # kernel_ceiling.Ceiling: the phase's own kernels timed alone, when measured


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



def gflops(rate: float) -> str:
    """GFLOP/s for a table: whole numbers, with two decimals below 10 (emulated bf16 is not 0)."""
    g = rate / 1e9
    return f"{g:.0f}" if g >= 10 else f"{g:.2f}"


def fixed(x: float, decimals: int) -> str:
    """A table figure with `decimals` places, or two significant digits where those places would print 0
    (a tiny-random phase can take 4 ms: "0.00" would read as nothing measured)."""
    return f"{x:.{decimals}f}" if x == 0 or abs(x) >= 10 ** -decimals else f"{x:.2g}"


def report(rows: list[Row], peaks: dict, threads: int) -> str:
    lines = [f"Peak matmul (2048^3, {threads} threads): " + ", ".join(
                 f"{k} {gflops(v.flops_per_s)} GFLOP/s ({gflops(v.flops_per_cpu_s)} per CPU second)" for k, v in peaks.items()),
             "", "| phase | seconds | CPU s | useful GFLOP | processed GFLOP | useful GFLOP/s | dtype | % of peak | "
             "% of peak per CPU s | load | note |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rate = r.useful / r.seconds
        cpu_share = (r.useful / r.cpu_seconds) / r.peak.flops_per_cpu_s
        proc = fixed(r.processed / 1e9, 1) if r.processed is not None else "-"
        lines.append(f"| {r.phase} | {fixed(r.seconds, 2)} | {fixed(r.cpu_seconds, 2)} | {fixed(r.useful / 1e9, 1)} | {proc} | "
                     f"{fixed(rate / 1e9, 1)} | "
                     f"{r.dtype} | {100 * rate / r.peak.flops_per_s:.0f}% | {100 * cpu_share:.0f}% | {r.load:.2f} | {r.note} |")
    measured = [r for r in rows if r.ceiling is not None]
    if measured:
        lines += ["", "Each phase's own matmul and attention kernels timed alone (the shapes it dispatched, hot in cache). "
                  "\"Ceiling\": the phase's useful rate were everything else free:", "",
                  "| phase | matmuls alone s | GFLOP/s | % of peak | attention alone s | GFLOP/s | % of peak | "
                  "kernels' share of the phase | ceiling, % of peak |", "|---|---|---|---|---|---|---|---|---|"]
        for r in measured:
            c, top = r.ceiling, r.peak.flops_per_s
            cells = [f"{fixed(c.seconds[k], 2)} | {fixed(c.rate(k) / 1e9, 1)} | {100 * c.rate(k) / top:.0f}%" if c.calls[k]
                     else "- | - | -"
                     for k in ("matmul", "attention")]
            lines.append(f"| {r.phase} | {cells[0]} | {cells[1]} | {100 * c.total_seconds / r.seconds:.0f}% | "
                         f"{100 * r.useful / c.total_seconds / top:.0f}% |")
    if max(r.load for r in rows) > 2:
        lines.append("\nLoad average above 2: the box was shared; rerun on a quiet box for figures to quote.")
    return "\n".join(lines)
