"""scripts/bench/bench_cpu_limits.py counts FLOPs right on tiny-random (against a count made
by hand from the config), and its report runs end to end. No timing is asserted."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from benchlib import flops as bench

from train.learner.models import load_policy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = load_policy("tiny-random")
    return model, tokenizer


def by_hand(config):
    """Non-embedding parameters of a Llama body, from its config (no module inspection)."""
    d, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    head = d // config.num_attention_heads
    q_out, kv_out = config.num_attention_heads * head, config.num_key_value_heads * head
    per_layer = d * q_out + 2 * d * kv_out + q_out * d + 3 * d * inter + 2 * d  # q, k, v, o, MLP, two norms
    return layers * per_layer + d  # + the final norm


def test_shapes_match_the_config(tiny):
    model, _ = tiny
    c = model.config
    shapes = bench.Shapes.of(model)
    assert shapes.body == by_hand(c)
    assert (shapes.d, shapes.vocab, shapes.layers, shapes.d_attn) == (64, c.vocab_size, 2, 64)


def test_counter_counts_a_forward_a_backward_and_a_cached_step(tiny):
    model, _ = tiny
    c = model.config
    counter = bench.Counter(bench.Shapes.of(model))
    hooks = counter.attach(model)
    try:
        rows, width = 3, 10
        ids = torch.randint(100, 1000, (rows, width))
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True)
        n = rows * width
        pairs = rows * width * (width + 1) // 2  # causal: query t sees t + 1 keys
        want = 2 * by_hand(c) * n + 4 * 2 * 64 * pairs + 2 * 64 * c.vocab_size * n
        assert counter.flops == pytest.approx(want, rel=1e-12)
        assert counter.calls == [(rows, width, 0, 1)]

        counter.reset()  # one cached decode step: 1 query per row over 10 + 1 keys
        with torch.no_grad():
            model(input_ids=ids[:, :1], past_key_values=out.past_key_values, use_cache=True)
        want = 2 * by_hand(c) * rows + 4 * 2 * 64 * rows * (width + 1) + 2 * 64 * c.vocab_size * rows
        assert counter.flops == pytest.approx(want, rel=1e-12)

        counter.reset()  # with gradient: forward + a backward of twice its cost
        model(input_ids=ids, logits_to_keep=4).logits.sum().backward()
        want = 3 * (2 * by_hand(c) * n + 4 * 2 * 64 * pairs + 2 * 64 * c.vocab_size * rows * 4)
        assert counter.flops == pytest.approx(want, rel=1e-12)
    finally:
        for h in hooks:
            h.remove()
        model.zero_grad(set_to_none=True)


def test_useful_grpo_flops_count_each_prompt_once():
    shapes = bench.Shapes(body=1000, d=8, vocab=50, layers=2, d_attn=8)
    args = type("A", (), {"prompt_len": 10, "answer_len": 5, "group_size": 2, "prompts": 3})()
    answers = bench.answer_lengths(args)
    assert answers == [4, 6]  # 70% and 130% of 5
    fwd = (2 * 1000 * (10 + 10) + 4 * 2 * 8 * (55 + (4 * 10 + 10) + (6 * 10 + 21)) + 2 * 8 * 50 * 10)
    assert bench.grpo_useful(shapes, args) == 3 * 4 * fwd


def test_report_fractions_and_the_load_warning():
    peak = bench.Peak(100e9, 50e9)  # 2 threads: half the wall rate per CPU second
    quiet = [bench.Row("GRPO step", 2.0, 3.0, 120e9, 150e9, peak, "float32", 0.5)]
    text = bench.report(quiet, {"float32": peak}, 2)
    # 60 GFLOP/s of 100; per CPU second 40 of 50 = 80%
    assert "| GRPO step | 2.00 | 3.00 | 120.0 | 150.0 | 60.0 | float32 | 60% | 80% | 0.50 |" in text
    assert "float32 100 GFLOP/s (50 per CPU second)" in text
    assert "rerun on a quiet box" not in text
    busy = quiet + [bench.Row("decode", 1.0, 2.0, 1e9, None, peak, "float32", 3.1)]
    text = bench.report(busy, {"float32": peak}, 2)
    assert "| decode | 1.00 | 2.00 | 1.0 | - | 1.0 | float32 | 1% | 1% | 3.10 |" in text
    assert "rerun on a quiet box" in text


def test_a_phase_of_a_few_milliseconds_prints_its_figures_not_zero():
    # tiny-random's GRPO step on a fast CPU: 4.2 ms wall, 8.1 ms CPU, 0.0316 GFLOP useful
    peak = bench.Peak(100e9, 50e9)
    text = bench.report([bench.Row("GRPO step", 0.0042, 0.0081, 0.0316e9, None, peak, "float32", 0.5)], {"float32": peak}, 2)
    assert "| GRPO step | 0.0042 | 0.0081 | 0.032 | - | 7.5 | float32 | 8% | 8% | 0.50 |" in text


@pytest.mark.slow
def test_bench_runs_every_phase_on_tiny_random():
    cmd = [sys.executable, str(ROOT / "scripts" / "bench" / "bench_cpu_limits.py"), "--model", "tiny-random",
           "--prompt-len", "32", "--answer-len", "6", "--decode-len", "3", "--ws-steps", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    main_table, _, ceiling_table = proc.stdout.partition("Each phase's own matmul")
    rows = [line for line in main_table.splitlines() if line.startswith("| GRPO") or line.startswith("| generation")
            or line.startswith("| warm start")]
    assert len(rows) == 4, proc.stdout
    ceiling = [line for line in ceiling_table.splitlines() if line.startswith("| GRPO") or line.startswith("| warm start")]
    assert len(ceiling) == 2, proc.stdout  # GRPO and the warm start; generation is not logged
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[1]) > 0 and float(cells[3]) > 0 and cells[7].endswith("%") and cells[8].endswith("%")
