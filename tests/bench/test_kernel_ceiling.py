"""scripts/bench/benchlib/kernel_ceiling.py records the matmul and attention calls a step dispatches (backward
included), counts their FLOPs against counts made by hand, rebuilds their operand layouts, and
the CPU-limits report prints the ceiling table. No timing is asserted."""

import pytest
import torch
import torch.nn.functional as F
from benchlib import flops
from benchlib.kernel_ceiling import Call, Ceiling, KernelLog, TensorSpec, replay

aten = torch.ops.aten


def test_a_linear_forward_and_backward_are_three_matmuls_of_2mkn():
    lin = torch.nn.Linear(48, 80)
    x = torch.randn(3, 7, 48, requires_grad=True)
    with KernelLog() as log:
        lin(x).sum().backward()
    ops = sorted((str(c.op), n) for c, n in log.calls.items())
    assert ops == [("aten.addmm.default", 1), ("aten.mm.default", 1), ("aten.mm.default", 1)]  # forward; grads of x, weight
    m, k, n = 21, 48, 80
    assert sorted(c.flops() for c in log.calls) == [2.0 * m * k * n] * 3
    assert all(c.kind == "matmul" for c in log.calls)


def test_bmm_and_a_repeated_call_are_counted_once_per_layout():
    a, b = torch.randn(4, 5, 6), torch.randn(4, 6, 9)
    with KernelLog() as log:
        for _ in range(3):
            torch.bmm(a, b)
        torch.bmm(a, b.transpose(1, 2).contiguous().transpose(1, 2))  # same shape, another layout
    assert sorted(log.calls.values()) == [1, 3]
    assert {c.flops() for c in log.calls} == {2.0 * 4 * 5 * 6 * 9}


def brute_pairs(lq, lk, causal):
    """(query, key) pairs sdpa computes: top-left causal (query i sees keys 0..i) or every pair."""
    return sum(1 for i in range(lq) for j in range(lk) if not causal or j <= i)


@pytest.mark.parametrize("causal,lq,lk", [(True, 37, 37), (False, 11, 53)])
def test_attention_flops_count_the_pairs_the_kernel_computes(causal, lq, lk):
    b, h, d = 2, 3, 16
    q = torch.randn(b, h, lq, d, requires_grad=True)
    k, v = torch.randn(b, h, lk, d, requires_grad=True), torch.randn(b, h, lk, d, requires_grad=True)
    mask = None if causal else torch.ones(b, 1, lq, lk, dtype=torch.bool)
    with KernelLog() as log:
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal).sum().backward()
    by_op = {str(c.op).split(".")[1]: c for c in log.calls}
    assert set(by_op) == {"_scaled_dot_product_flash_attention_for_cpu",
                          "_scaled_dot_product_flash_attention_for_cpu_backward"}
    fwd = 4.0 * b * h * d * brute_pairs(lq, lk, causal)
    assert by_op["_scaled_dot_product_flash_attention_for_cpu"].flops() == fwd
    assert by_op["_scaled_dot_product_flash_attention_for_cpu_backward"].flops() == 2.5 * fwd
    if not causal:  # the mask is a keyword argument, kept with its layout
        assert [k for k, _ in by_op["_scaled_dot_product_flash_attention_for_cpu"].kwargs] == ["attn_mask"]


def test_tensor_spec_rebuilds_expanded_and_transposed_layouts():
    gen = torch.Generator().manual_seed(0)
    for t in (torch.randn(4, 1, 6).expand(4, 5, 6), torch.randn(6, 9).t(), torch.zeros(2, 3, dtype=torch.bool)):
        made = TensorSpec.of(t).make(gen)
        assert (made.shape, made.stride(), made.dtype) == (t.shape, t.stride(), t.dtype)
        if t.dtype == torch.bool:
            assert bool(made.all())  # a mask that hides nothing: no all-masked row, no NaN


def test_replay_scales_counts_by_steps_and_sums_flops_by_kind():
    a, b = torch.randn(30, 40), torch.randn(40, 50)
    q = torch.randn(1, 2, 16, 8)
    with KernelLog() as log:
        for _ in range(4):  # two "steps" of two matmuls and one attention forward each
            a @ b
        for _ in range(2):
            F.scaled_dot_product_attention(q, q, q, is_causal=True)
    ceiling = replay(log.calls, repeats=1, per_step=2)
    assert ceiling.calls == {"matmul": 2, "attention": 1}
    assert ceiling.flops["matmul"] == 2 * (2.0 * 30 * 40 * 50)
    assert ceiling.flops["attention"] == 4.0 * 2 * 8 * (16 * 17 // 2)
    assert ceiling.seconds["matmul"] > 0 and ceiling.seconds["attention"] > 0
    assert ceiling.total_seconds == ceiling.seconds["matmul"] + ceiling.seconds["attention"]


def test_report_prints_the_ceiling_against_the_phase():
    peak = flops.Peak(200e9, 100e9)
    ceiling = Ceiling({"matmul": 1.5, "attention": 0.5}, {"matmul": 150e9, "attention": 10e9}, {"matmul": 9, "attention": 2})
    rows = [flops.Row("warm start step", 4.0, 8.0, 300e9, 310e9, peak, "bfloat16", 0.4, "", ceiling),
            flops.Row("decode", 1.0, 2.0, 1e9, None, peak, "float32", 0.4)]
    text = flops.report(rows, {"bfloat16": peak}, 2)
    # 2.0 s of kernels in a 4.0 s step; matmuls 100 GFLOP/s = 50% of 200; attention 20 GFLOP/s = 10%;
    # 300 useful GFLOP in the kernels' 2.0 s = 150 GFLOP/s = 75% of the peak
    assert "| warm start step | 1.50 | 100.0 | 50% | 0.50 | 20.0 | 10% | 50% | 75% |" in text
    assert "| decode | 1.00 | 2.00 |" in text and text.count("| decode |") == 1  # no ceiling measured, no row
    no_attention = Ceiling({"matmul": 1.0, "attention": 0.0}, {"matmul": 50e9, "attention": 0.0}, {"matmul": 1, "attention": 0})
    text = flops.report([flops.Row("prefill", 2.0, 4.0, 40e9, None, peak, "float32", 0.4, "", no_attention)], {"float32": peak}, 2)
    assert "| prefill | 1.00 | 50.0 | 25% | - | - | - | 50% | 20% |" in text


def test_call_is_hashable_with_keyword_tensors():
    spec = TensorSpec((2, 3), (3, 1), torch.float32)
    one = Call(aten.mm.default, (spec, spec), (("x", spec),))
    assert one == Call(aten.mm.default, (spec, spec), (("x", spec),)) and len({one, one}) == 1


def test_peaks_below_10_gflops_keep_two_decimals():
    emulated = flops.Peak(0.37e9, 0.19e9)  # bf16 emulated on an AVX2 cap: not "0 GFLOP/s"
    text = flops.report([flops.Row("x", 1.0, 2.0, 1e9, None, emulated, "bfloat16", 0.4)], {"bfloat16 (emulated)": emulated}, 2)
    assert "bfloat16 (emulated) 0.37 GFLOP/s (0.19 per CPU second)" in text
    assert flops.gflops(309.4e9) == "309"
