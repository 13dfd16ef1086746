from dataclasses import dataclass

import pytest

from rollout.prompts import PromptBuilder
from tasks.template import check_template


@dataclass
class Sol:
    code: str
    reward: float
    valid: bool
    feedback: str


ROOT = Sol("def run_packing():\n    return 1\n", 0.5, True, "valid packing: sum 0.5")
MID = Sol("def run_packing():\n    return 2\n", 0.0, False, "ValueError at line 2")
PARENT = Sol("def run_packing():\n    return 3\n", 1.5, True, "valid packing: sum 1.5")


# A task's own prompt.md: another order, {timeout} and literal braces in its text, {ancestors} its own paragraph.
CUSTOM = """Improve {entry_function}() within {timeout} s; literal {{braces}} stay.

{parent}

{ancestors}

Problem, restated last: {description}

{contract}"""


def builder(tokenizer, budget=4096, n=2, template=None, timeout=60, form="construct"):
    return PromptBuilder(tokenizer, "Pack 26 circles.", "run_packing", timeout, budget, n, template=template, form=form)


def user_message(text):
    return text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>\n<|im_start|>assistant", 1)[0]


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


# The default template's prompt, captured before templates became per task: it must not change.
GOLDEN_HEAD = """<|im_start|>system
You are an expert software developer tasked with iteratively improving a codebase.
Your job is to analyze the current program and suggest improvements based on feedback from previous attempts.
Focus on making targeted changes that will increase the program's performance metrics.
Respond in the following format: <think>
...
</think>
<answer>
...
</answer>.<|im_end|>
<|im_start|>user
# Problem Description

Pack 26 circles.

"""
GOLDEN_LINEAGE = """## Previous attempts in this lineage (oldest first)

### Attempt 1: reward 0.5 (valid). Feedback: valid packing: sum 0.5
Change it led to:
```diff
--- before
+++ after
@@ -1,2 +1,2 @@
 def run_packing():
-    return 1
+    return 2
```

### Attempt 2: reward 0 (invalid). Feedback: ValueError at line 2
Change it led to:
```diff
--- before
+++ after
@@ -1,2 +1,2 @@
 def run_packing():
-    return 2
+    return 3
```"""
GOLDEN_CURRENT = """## Current Program
Status: reward 1.5 (valid). Feedback: valid packing: sum 1.5
```python
def run_packing():
    return 3

```"""
GOLDEN_CONTRACT = """## Task
Suggest improvements to the program that will lead to better performance on the specified metrics.

You MUST use the exact SEARCH/REPLACE diff format shown below inside <answer> to indicate changes:

<<<<<<< SEARCH
# Original code to find and replace (must match exactly)
=======
# New replacement code
>>>>>>> REPLACE

You can suggest multiple changes. Each SEARCH section must exactly match code in the current program.
Make sure your program still contains the run_packing() function and returns the same kind of result.
If your program runs longer than 60 seconds it receives 0 reward."""
GOLDEN_TAIL = "<|im_end|>\n<|im_start|>assistant\n"


def test_default_template_gives_the_same_prompt_as_before(tokenizer):
    b = builder(tokenizer)
    assert b.build(PARENT, [MID, ROOT]).text == (
        GOLDEN_HEAD + GOLDEN_LINEAGE + "\n\n" + GOLDEN_CURRENT + "\n\n" + GOLDEN_CONTRACT + GOLDEN_TAIL)
    assert b.build(PARENT, []).text == GOLDEN_HEAD + GOLDEN_CURRENT + "\n\n" + GOLDEN_CONTRACT + GOLDEN_TAIL


def test_a_task_template_sets_the_whole_user_message(tokenizer):
    b = builder(tokenizer, template=CUSTOM, timeout=20)
    contract = GOLDEN_CONTRACT.replace("60 seconds", "20 seconds")
    head = "Improve run_packing() within 20 s; literal {braces} stay."
    tail = "Problem, restated last: Pack 26 circles.\n\n" + contract
    p = b.build(PARENT, [MID, ROOT])
    assert user_message(p.text) == "\n\n".join([head, GOLDEN_CURRENT, GOLDEN_LINEAGE, tail])
    assert p.text.startswith(GOLDEN_HEAD.split("<|im_start|>user")[0])  # the system prompt stays
    assert p.token_ids == tokenizer(p.text, add_special_tokens=False)["input_ids"]
    # no ancestors: the {ancestors} paragraph goes, with its blank line
    assert user_message(b.build(PARENT, []).text) == "\n\n".join([head, GOLDEN_CURRENT, tail])


def test_a_template_without_ancestors_never_shows_or_drops_them(tokenizer):
    p = builder(tokenizer, template="{parent}\n\n{contract}").build(PARENT, [MID, ROOT])
    assert user_message(p.text) == GOLDEN_CURRENT + "\n\n" + GOLDEN_CONTRACT and p.dropped == []


@pytest.mark.parametrize("template, words", [
    ("{parent}\n{contract}\n{parnet}", ["unknown placeholder {parnet}", "Did you mean {parent}?", "{ancestors}"]),
    ("{parent} {contract} {task.name}", ["unknown placeholder {task.name}"]),
    ("{parent} {contract} {}", ["unknown placeholder {}"]),
    ("{description}\n\n{contract}", ["missing the required placeholder {parent}"]),
    ("{description}\n\n{parent}", ["missing the required placeholder {contract}"]),
    ("{parent} {contract} {timeout:g}", ["placeholder {timeout} takes no format spec"]),
    ("{parent} {contract} {parent!r}", ["placeholder {parent} takes no format spec or conversion"]),
    ("{parent} {contract} a dict {'a': 1}", ["unknown placeholder {'a'}", "{{"]),
    ("{parent} {contract} {", ["Single '{'", "{{"]),
])
def test_bad_templates_name_the_file_and_the_placeholder(tokenizer, template, words):
    with pytest.raises(ValueError) as info:
        check_template(template, "tasks/x/prompt.md")
    assert str(info.value).startswith("tasks/x/prompt.md: ")
    for word in words:
        assert word in str(info.value), str(info.value)
    with pytest.raises(ValueError, match="prompt template"):
        builder(tokenizer, template=template)


def test_n_ancestors_caps_the_lineage(tokenizer):
    t = builder(tokenizer, n=1).build(PARENT, [MID, ROOT]).text
    assert "ValueError at line 2" in t and "Attempt 2" not in t


@pytest.mark.parametrize("template", [None, CUSTOM])
def test_budget_drops_oldest_ancestor_first_and_records_it(tokenizer, template):
    full = builder(tokenizer, template=template).build(PARENT, [MID, ROOT])
    without_root = builder(tokenizer, n=1, template=template).build(PARENT, [MID])
    budget = len(without_root.token_ids)
    assert budget < len(full.token_ids)
    p = builder(tokenizer, budget=budget, template=template).build(PARENT, [MID, ROOT])
    assert len(p.token_ids) <= budget and p.dropped == ["oldest ancestor"]
    assert "ValueError at line 2" in p.text


@pytest.mark.parametrize("template", [None, CUSTOM, "{parent}\n\n{contract}"])
def test_budget_never_silently_exceeded_for_a_long_program(tokenizer, template):
    long = Sol("def run_packing():\n" + "".join(f"    x{i} = {i} * {i}\n" for i in range(300)) + "    return 0\n",
               1.0, True, "ok " * 200)
    p = builder(tokenizer, budget=700, template=template).build(long, [MID, ROOT])
    assert len(p.token_ids) <= 700
    assert ("oldest ancestor" in p.dropped) == (template != "{parent}\n\n{contract}")  # only what was shown
    assert "parent feedback shortened" in p.dropped and any("program lines" in d for d in p.dropped)
    assert "lines omitted to fit the prompt budget" in p.text


def test_impossible_budget_is_a_clear_error(tokenizer):
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        builder(tokenizer, budget=64).build(PARENT, [])


def test_a_search_form_contract_says_the_last_report_counts(tokenizer):
    """A search-form program keeps what it reported before the limit (docs/search_form.md): the contract's
    last sentence says so for every operator that prompts, and every other word stays the constructor's."""
    from rollout.operators import make_operator

    b = builder(tokenizer, form="search")
    search_tail = ("Your program is stopped after 60 seconds; the last construction it passed to report() then counts "
                   "(none reported: 0 reward).")
    want = GOLDEN_CONTRACT.replace("If your program runs longer than 60 seconds it receives 0 reward.", search_tail)
    assert b.build(PARENT, []).text == GOLDEN_HEAD + GOLDEN_CURRENT + "\n\n" + want + GOLDEN_TAIL
    for name in ("rewrite", "crossover"):
        op = make_operator(name, "run_packing")
        construct, search = op.contract("run_packing", "60", [PARENT]), op.contract("run_packing", "60", [PARENT], "search")
        assert construct.endswith("If your program runs longer than 60 seconds it receives 0 reward.")
        assert search == construct.replace("If your program runs longer than 60 seconds it receives 0 reward.", search_tail)
    shots = make_operator("best_shot", "run_packing").contract("run_packing", "60", [PARENT, MID], "search")
    assert shots.endswith("The program is stopped after 60 seconds; the last construction it passed to report() then "
                          "counts (none reported: 0 reward).")
