"""What a phase's own heavy kernels reach when each runs alone: the ceiling its shapes allow.

The CPU-limits benchmark compares each phase with a 2048^3 matmul. A 135M model's matmuls are
far smaller (a 576-wide hidden state, 100-300-row answers), and small matmuls cannot reach the
big one's rate on any kernel library; so a phase "at 9% of the peak" may be at most of what its
shapes allow, or far below it. This module tells the two apart: ``KernelLog`` records every
matmul and attention kernel a step dispatches (operator, operand shapes, strides and dtype,
counted), and ``replay`` times each distinct call alone on random operands of the same layout,
hot in cache, best of a few. The sum is a lower bound on the phase's time in those kernels;
what the phase spends beyond it is elementwise work, casts, copies and Python.

Recording goes through a TorchDispatchMode, which costs Python time per operator: record an
untimed step, time another. Torch only; no other HELIX package."""

from __future__ import annotations

import time
from collections import Counter as Tally
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

MATMULS = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}
ATTENTION = {aten._scaled_dot_product_flash_attention_for_cpu.default,
             aten._scaled_dot_product_flash_attention_for_cpu_backward.default}


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype

    @classmethod
    def of(cls, t: torch.Tensor) -> "TensorSpec":
        return cls(tuple(t.shape), tuple(t.stride()), t.dtype)

    def make(self, gen: torch.Generator) -> torch.Tensor:
        """A tensor of this layout (expanded and transposed views included) over fresh storage."""
        size = 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride) if n > 0)
        if self.dtype.is_floating_point:
            base = torch.randn(size, generator=gen).to(self.dtype)
        elif self.dtype == torch.bool:
            base = torch.ones(size, dtype=torch.bool)  # a mask that hides nothing: rows without NaN, the same work
        else:
            base = torch.zeros(size, dtype=self.dtype)
        return base.as_strided(self.shape, self.stride)


@dataclass(frozen=True)
class Call:
    """One distinct kernel call: the operator and its arguments, tensors as layouts."""

    op: object
    args: tuple
    kwargs: tuple = ()  # (name, value) pairs: flash attention takes its mask by keyword

    def flops(self) -> float:
        """mm / addmm / bmm / baddbmm: 2 x the multiply-adds. Flash attention: 4 x heads x head_dim per
        (query, key) pair the kernel computes (every pair under a mask; the lower triangle under
        is_causal), its backward 2.5x that (it recomputes the scores: five matmuls to the forward's two)."""
        shapes = [a.shape for a in self.args if isinstance(a, TensorSpec)]
        if self.op in (aten.mm.default, aten.bmm.default):
            a, b = shapes[0], shapes[1]
        elif self.op in (aten.addmm.default, aten.baddbmm.default):
            a, b = shapes[1], shapes[2]
        else:
            return self._attention_flops()
        batch = a[0] if len(a) == 3 else 1
        return 2.0 * batch * a[-2] * a[-1] * b[-1]

    def _attention_flops(self) -> float:
        backward = self.op == aten._scaled_dot_product_flash_attention_for_cpu_backward.default
        q, k = (self.args[1], self.args[2]) if backward else (self.args[0], self.args[1])
        is_causal = self.args[7] if backward else (self.args[4] if len(self.args) > 4 else False)
        (b, h, lq, d), lk = q.shape, k.shape[2]
        pairs = sum(min(i + 1, lk) for i in range(lq)) if is_causal else lq * lk
        return 4.0 * b * h * d * pairs * (2.5 if backward else 1.0)

    @property
    def kind(self) -> str:
        return "matmul" if self.op in MATMULS else "attention"


class KernelLog(TorchDispatchMode):
    """Counts every matmul and CPU flash-attention call dispatched inside it, backward included (the
    CPU autograd engine runs backward on the calling thread, under this mode)."""

    def __init__(self):
        super().__init__()
        self.calls: Tally[Call] = Tally()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in MATMULS or func in ATTENTION:
            self.calls[Call(func, tuple(map(_spec, args)), tuple((k, _spec(v)) for k, v in sorted(kwargs.items())))] += 1
        return func(*args, **kwargs)


def _spec(a):
    return TensorSpec.of(a) if isinstance(a, torch.Tensor) else a


def _make(a, gen: torch.Generator):
    return a.make(gen) if isinstance(a, TensorSpec) else a


@dataclass
class Ceiling:
    """The recorded kernels timed alone, by kind: seconds, FLOPs, calls."""

    seconds: dict[str, float]
    flops: dict[str, float]
    calls: dict[str, int]

    def rate(self, kind: str) -> float:
        return self.flops[kind] / max(self.seconds[kind], 1e-12)

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())


def _time_one(call: Call, repeats: int, gen: torch.Generator) -> float:
    args = [_make(a, gen) for a in call.args]
    kwargs = {k: _make(v, gen) for k, v in call.kwargs}
    with torch.no_grad():
        call.op(*args, **kwargs)  # warm-up: kernel choice, packing
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            call.op(*args, **kwargs)
            best = min(best, time.perf_counter() - t)
    return best


def replay(calls: Tally, repeats: int = 3, per_step: int = 1, seed: int = 0) -> Ceiling:
    """Each distinct call timed alone (best of ``repeats``), times its count / ``per_step`` (the steps
    the log covered)."""
    gen = torch.Generator().manual_seed(seed)
    seconds, flops, count = {"matmul": 0.0, "attention": 0.0}, {"matmul": 0.0, "attention": 0.0}, {"matmul": 0, "attention": 0}
    for call, n in calls.items():
        share = n / per_step
        seconds[call.kind] += share * _time_one(call, repeats, gen)
        flops[call.kind] += share * call.flops()
        count[call.kind] += n // per_step
    return Ceiling(seconds, flops, count)
