from dataclasses import dataclass

import pytest

from rollout.prompts import PromptBuilder


@dataclass
class Sol:
    code: str
    reward: float
    valid: bool
    feedback: str


ROOT = Sol("def run_packing():\n    return 1\n", 0.5, True, "valid packing: sum 0.5")
MID = Sol("def run_packing():\n    return 2\n", 0.0, False, "ValueError at line 2")
PARENT = Sol("def run_packing():\n    return 3\n", 1.5, True, "valid packing: sum 1.5")


def builder(tokenizer, budget=4096, n=2):
    return PromptBuilder(tokenizer, "Pack 26 circles.", "run_packing", 60, budget, n)


def test_prompt_holds_problem_parent_ancestors_and_contract(tokenizer):
    p = builder(tokenizer).build(PARENT, [MID, ROOT], parent_id=7)
    t = p.text
    assert t.startswith("<|im_start|>system") and t.rstrip().endswith("<|im_start|>assistant")
    assert "Pack 26 circles." in t and "return 3" in t and "reward 1.5 (valid)" in t
    assert "ValueError at line 2" in t and "reward 0 (invalid)" in t and "reward 0.5 (valid)" in t
    assert "-    return 1" in t and "+    return 2" in t  # ancestors as the diffs they led to
    assert t.index("Attempt 1: reward 0.5") < t.index("Attempt 2: reward 0")  # oldest first
    assert "<<<<<<< SEARCH" in t and "<think>" in t and "run_packing()" in t
    assert p.parent_id == 7 and p.dropped == []
    assert p.token_ids == tokenizer(t, add_special_tokens=False)["input_ids"]


def test_n_ancestors_caps_the_lineage(tokenizer):
    t = builder(tokenizer, n=1).build(PARENT, [MID, ROOT]).text
    assert "ValueError at line 2" in t and "Attempt 2" not in t


def test_budget_drops_oldest_ancestor_first_and_records_it(tokenizer):
    full = builder(tokenizer).build(PARENT, [MID, ROOT])
    without_root = builder(tokenizer, n=1).build(PARENT, [MID])
    budget = len(without_root.token_ids)
    assert budget < len(full.token_ids)
    p = builder(tokenizer, budget=budget).build(PARENT, [MID, ROOT])
    assert len(p.token_ids) <= budget and p.dropped == ["oldest ancestor"]
    assert "ValueError at line 2" in p.text


def test_budget_never_silently_exceeded_for_a_long_program(tokenizer):
    long = Sol("def run_packing():\n" + "".join(f"    x{i} = {i} * {i}\n" for i in range(300)) + "    return 0\n",
               1.0, True, "ok " * 200)
    p = builder(tokenizer, budget=700).build(long, [MID, ROOT])
    assert len(p.token_ids) <= 700
    assert "oldest ancestor" in p.dropped and any("program lines" in d for d in p.dropped)
    assert "lines omitted to fit the prompt budget" in p.text


def test_impossible_budget_is_a_clear_error(tokenizer):
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        builder(tokenizer, budget=64).build(PARENT, [])
