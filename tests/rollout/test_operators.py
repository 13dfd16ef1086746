"""Evolution operators (rollout/operators.py): prompts, answer parsing, feedback for malformed
answers, and a scripted policy driving every operator through the real loop."""

import ast
import json
import re
import sqlite3
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from population.archive import Archive, ReadOnlyArchive
from rollout.edits import EditError
from rollout.engines import ENGINES, Completion, HFEngine
from rollout.operators import OPERATORS, Operator, function_source, make_operator, register_operator
from rollout.prompts import PromptBuilder
from tasks import load_task
from train.config.config import ConfigError, load_config

PARENT = '''import numpy as np


def helper(x):
    return 2 * x


def priority(item, bins):
    """Higher is better."""
    return -(bins - item)
'''


class Sol:
    def __init__(self, code, reward, feedback="", valid=True, id=0):
        self.code, self.reward, self.feedback, self.valid, self.id = code, reward, feedback, valid, id


def fenced(code):
    return f"<think>ok</think><answer>\n```python\n{code}```\n</answer>"


def defines(code, name):
    return any(isinstance(n, ast.FunctionDef) and n.name == name for n in ast.parse(code).body)


# ---- parsing -------------------------------------------------------------------------------
def test_rewrite_takes_the_whole_fenced_program():
    new = PARENT.replace("bins - item", "bins - item - 1")
    assert make_operator("rewrite", "priority").child(PARENT, fenced(new)) == new


@pytest.mark.parametrize("answer, words", [
    (fenced("def other(item, bins):\n    return 0\n"), "does not define priority() at the top level"),
    (fenced("def priority(item, bins)\n    return 0\n"), "does not parse as Python: line 1"),
    ("<answer>   </answer>", "The answer is empty"),
    (fenced("class A:\n    def priority(self):\n        return 0\n"), "does not define priority()"),
])
@pytest.mark.parametrize("name", ["rewrite", "crossover"])
def test_whole_program_answers_without_the_entry_function_get_clear_feedback(name, answer, words):
    with pytest.raises(EditError, match=re.escape(words)):
        make_operator(name, "priority").child(PARENT, answer)


def test_whole_program_prefers_the_block_that_defines_the_entry_function():
    answer = "<answer>\n```python\nx = 1\n```\nand\n```python\ndef priority(i, b):\n    return b\n```\n</answer>"
    assert make_operator("crossover", "priority").child(PARENT, answer) == "def priority(i, b):\n    return b\n"


def test_best_shot_renames_the_new_version_and_puts_it_in_place_of_the_parents_function():
    answer = fenced("import math\n\n\ndef priority_v1(item, bins):\n    return -(bins - item)\n\n\n"
                    "def priority_v2(item, bins):\n    \"\"\"Tighter.\"\"\"\n"
                    "    return -math.sqrt(abs(bins - item)) + priority_v2_bonus(item)\n\n\n"
                    "def priority_v2_bonus(item):\n    return 0.1 * item\n")
    child = make_operator("best_shot", "priority").child(PARENT, answer, version=2)
    assert "priority_v1" not in child and "priority_v2(" not in child  # the shown version is not copied back
    assert defines(child, "priority") and defines(child, "helper") and "import math" in child
    assert "def priority(item, bins):\n    \"\"\"Tighter.\"\"\"" in child
    # the parent's other code is kept, in place
    assert child.startswith("import numpy as np\n\n\ndef helper(x):\n    return 2 * x\n")
    scope = {}
    exec(compile(child, "child", "exec"), scope)
    assert scope["priority"](3.0, 7.0) == pytest.approx(-2.0 + 0.3)


def test_best_shot_accepts_the_entry_name_and_refuses_an_answer_without_the_function():
    op = make_operator("best_shot", "priority")
    child = op.child(PARENT, fenced("def priority(item, bins):\n    return 1.0\n"), version=2)
    assert "return 1.0" in child and child.count("def priority") == 1
    with pytest.raises(EditError, match=r"defines no function priority_v2\(\)"):
        op.child(PARENT, fenced("def scorer(item, bins):\n    return 1.0\n"), version=2)


def test_edit_is_the_papers_search_replace_operator():
    answer = "<answer>\n<<<<<<< SEARCH\n    return -(bins - item)\n=======\n    return item - bins\n>>>>>>> REPLACE\n</answer>"
    assert make_operator("edit", "priority").child(PARENT, answer) == PARENT.replace("-(bins - item)", "item - bins")


# ---- property: no operator lets a program drop its entry function unnoticed ----------------
LINES = st.sampled_from([
    "def priority(item, bins):\n    return item\n", "def helper(x):\n    return x\n", "x = 1\n", "import math\n",
    "def priority_v1(item, bins):\n    return 0\n", "def priority_v2(item, bins):\n    return 2\n", "class C:\n    pass\n",
    "def broken(:\n", "    return 3\n", "priority = lambda item, bins: 0\n", "if True:\n    def priority(i, b):\n        return 1\n",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=6), st.sampled_from(["rewrite", "crossover", "best_shot"]), st.booleans())
def test_every_program_an_operator_returns_parses_and_binds_the_entry_function(parts, name, fence):
    body = "".join(parts)
    answer = fenced(body) if fence else f"<answer>{body}</answer>"
    try:
        child = make_operator(name, "priority").child(PARENT, answer, version=2)
    except EditError as err:
        assert str(err)  # a reason the policy can read
        return
    tree = ast.parse(child)
    bound = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    bound |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert "priority" in bound


# ---- prompts ---------------------------------------------------------------------------
def builder(tokenizer, budget=4096):
    return PromptBuilder(tokenizer, "Pack items.", "priority", 30.0, budget, 2)


class _NoRun:
    def evaluate_many(self, codes, progress=False):
        assert not codes, "a copy of a parent must not be run"
        return []


def test_a_crossover_that_copies_either_parent_is_no_new_program():
    from train.loop.children import SAME, Job, evaluate_children

    task = SimpleNamespace(entry_function="priority")
    mate = PARENT.replace("-(bins - item)", "-(bins - item) ** 2")
    job = Job(0, 4, PARENT, [1], tag=1, operator="crossover", mate_id=9, version=1, mate_code=mate)
    answers = [fenced(mate), fenced("# B again, with comments and fewer blank lines\n" + mate.replace("\n\n\n", "\n# helper\n")),
               fenced(PARENT)]
    kids = evaluate_children(task, _NoRun(), [job], [[Completion([1], a, False) for a in answers]], epoch=2, progress=False)
    assert [(k.is_program, k.feedback, k.second_parent_id, k.operator) for k in kids] == [(False, SAME, 9, "crossover")] * 3


def test_crossover_prompt_shows_both_parents_with_reward_and_feedback(tokenizer):
    a = Sol(PARENT, 1.25, "A's own feedback", id=4)
    b = Sol(PARENT.replace("helper", "assist"), 0.75, "B's own feedback", valid=False, id=9)
    op = make_operator("crossover", "priority")
    text = builder(tokenizer).build(a, [], 4, layout=op.layout(), others=[b]).text
    assert "## Program A\nStatus: reward 1.25 (valid). Feedback: A's own feedback" in text
    assert "## Program B\nStatus: reward 0.75 (invalid). Feedback: B's own feedback" in text
    assert "def assist(x)" in text and "def helper(x)" in text and "Combine them" in text
    assert "SEARCH/REPLACE" not in text  # the edit contract is not shown


def test_best_shot_prompt_shows_versions_worst_first_and_asks_for_the_next(tokenizer):
    shots = [Sol(PARENT, 0.5, id=1), Sol(PARENT.replace("-(bins - item)", "item / bins"), 0.9, id=2)]
    op = make_operator("best_shot", "priority")
    text = builder(tokenizer).build(shots[0], [Sol("x", 0)], 1, layout=op.layout(), others=shots).text
    v0, v1 = text.index("def priority_v0(item, bins):"), text.index("def priority_v1(item, bins):")
    assert v0 < v1 and "return item / bins" in text[v1:] and "# priority_v0: reward 0.5" in text
    assert "Write\npriority_v2" in text or "Write priority_v2" in text
    assert "# def priority(...): the function you write goes here" in text and "def helper(x)" in text
    assert "Previous attempts" not in text  # no lineage: the versions are the context


def test_the_budget_cuts_every_shown_program_and_says_so(tokenizer):
    long = PARENT + "".join(f"\n\ndef filler_{i}(x):\n    return x + {i}\n" for i in range(60))
    op = make_operator("crossover", "priority")
    prompt = builder(tokenizer, budget=900).build(Sol(long, 1.0), [], 1, layout=op.layout(), others=[Sol(long, 2.0)])
    assert len(prompt.token_ids) <= 900
    assert prompt.text.count("lines omitted to fit the prompt budget") == 2
    assert any("program lines in each of 2 programs" in d for d in prompt.dropped)


def test_the_edit_prompt_is_unchanged_by_the_operator_layer(tokenizer):
    parent = Sol(PARENT, 1.0, "fine")
    b = builder(tokenizer)
    assert b.build(parent, [], 1).text == b.build(parent, [], 1, layout=make_operator("edit", "priority").layout()).text


# ---- config and registry ---------------------------------------------------------------
def test_operator_mix_is_validated_with_the_nearest_name():
    cfg = load_config(None, ["evolution.operators={edit: 0.7, rewrite: 0.2, crossover: 0.1}"])
    assert cfg.evolution.operators == {"edit": 0.7, "rewrite": 0.2, "crossover": 0.1}
    assert load_config(None).evolution.operators == {"edit": 1.0}
    with pytest.raises(ConfigError, match="'crosover'.*Did you mean 'crossover'"):
        load_config(None, ["evolution.operators={crosover: 1.0}"])
    with pytest.raises(ConfigError, match="evolution.operators = .* must give every operator a weight >= 0"):
        load_config(None, ["evolution.operators={edit: -1.0, rewrite: 1.0}"])
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(None, ["evolution.operators=edit"])


def test_register_operator_checks_its_argument():
    with pytest.raises(TypeError, match="Operator subclass"):
        register_operator("bad", dict)

    class Odd(Operator):
        extra_parents = "three"

        def current(self, parent, codes, others, feedback_limit):
            return codes[0]

        def contract(self, entry_function, timeout, others):
            return "answer"

        def child(self, parent_code, completion, version=0):
            return parent_code

    with pytest.raises(ValueError, match="extra_parents"):
        register_operator("odd", Odd)
    assert "odd" not in OPERATORS and make_operator("rewrite", "f").name == "rewrite"


# ---- archive: the second parent, and archives written before it ------------------------
OLD_SCHEMA = """
CREATE TABLE solutions (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES solutions(id), epoch INTEGER NOT NULL,
    code TEXT NOT NULL, reward REAL NOT NULL, valid INTEGER NOT NULL, feedback TEXT NOT NULL,
    metrics TEXT NOT NULL, eval_time_s REAL NOT NULL, prompt_id TEXT, completion TEXT, embedding BLOB, code_hash TEXT);
CREATE TABLE discarded_solutions AS SELECT * FROM solutions WHERE 0;
INSERT INTO solutions (parent_id, epoch, code, reward, valid, feedback, metrics, eval_time_s)
    VALUES (NULL, 0, 'def f(): pass', 1.5, 1, 'ok', '{}', 0.1), (1, 1, 'def f(): return 1', 2.5, 1, 'ok', '{}', 0.1);
"""


def test_an_archive_from_before_the_second_parent_column_is_migrated(tmp_path):
    path = tmp_path / "archive.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
    with Archive(path) as arch:
        old = arch.get(2)
        assert (old.parent_id, old.second_parent_id, old.operator, old.parents) == (1, None, "edit", (1,))
        (new,) = arch.add_many([dict(parent_id=2, second_parent_id=1, operator="crossover", epoch=2, code="c",
                                     reward=3.0, valid=True, feedback="")])
        got = arch.get(new)
        assert (got.parents, got.operator) == ((2, 1), "crossover")
        assert [s.id for s in arch.children(1)] == [2, new]  # both edges lead to the crossover child
        assert arch.rewind(2, 1) == 1  # SELECT * into discarded_solutions: the same column order
        moved = arch.db.execute("SELECT second_parent_id, operator FROM discarded_solutions").fetchall()
        assert moved == [(1, "crossover")]
    with Archive(path) as arch:  # opening again migrates nothing twice
        assert arch.count() == 2


# ---- a scripted policy through the real loop -------------------------------------------
class OperatorEngine(HFEngine):
    """Answers each prompt in its operator's format: in each group one usable answer and one malformed."""

    def __init__(self, model, tokenizer, batch_size=0, progress=False):
        super().__init__(model, tokenizer, batch_size, progress)
        task = load_task("circle_packing_26")
        self.program, self.first = task.initial_program, next(ln for ln in task.initial_program.splitlines() if ln.strip())
        self.function = function_source(task.initial_program, "run_packing")
        self.count = 0  # makes every usable answer a new program

    def answers(self, prompt: str, n: int) -> list[str]:
        self.count += 1
        if "## Program B" in prompt:  # crossover
            good, bad = fenced(self.program + f"\nCROSSED = {self.count}\n"), fenced("def run_packing(:\n")
        elif "Versions of run_packing" in prompt:  # best_shot
            k = int(re.search(r"Write\s+run_packing_v(\d+)", prompt).group(1))
            body = self.function.replace("def run_packing(", f"def run_packing_v{k}(", 1)
            good = fenced(body.replace(":\n", f":\n    shot = {self.count}\n", 1))
            bad = fenced("def scorer():\n    return 1\n")
        elif "replaces the current program whole" in prompt:  # rewrite
            good, bad = fenced(self.program + f"\nREWRITTEN = {self.count}\n"), fenced("def not_the_entry():\n    return 0\n")
        else:  # edit
            block = "<answer>\n<<<<<<< SEARCH\n{}\n=======\n{}\n>>>>>>> REPLACE\n</answer>"
            good, bad = block.format(self.first, self.first + f"\nEDITED = {self.count}"), "no edit here"
        return [(good, bad)[g % 2] for g in range(n)]

    def generate(self, prompts, params):
        out = []
        for ids in prompts:
            texts = self.answers(self.tokenizer.decode(ids), params.n)
            out.append([Completion(self.tokenizer(t, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id],
                                   t, False) for t in texts])
        return out


@pytest.mark.slow
def test_a_scripted_policy_drives_every_operator_through_the_loop(tmp_path):
    from tests.helpers.scripted import run_helix

    ENGINES["operators"] = OperatorEngine
    try:
        run = run_helix(tmp_path, "rollout.engine=operators", "trainer.prompts_per_epoch=8", "trainer.epochs=2",
                        "evolution.operators={edit: 1, rewrite: 1, crossover: 1, best_shot: 1}", "evolution.best_shot_k=2",
                        "rollout.max_prompt_tokens=8192")
    finally:
        del ENGINES["operators"]
    with Archive(run / "archive.sqlite") as arch:
        children = [arch.get(s[0]) for s in arch.scores()[1:]]
        seen = {c.operator for c in children}
        assert seen == {"edit", "rewrite", "crossover", "best_shot"}, seen
        for c in children:
            usable = c.prompt_id.endswith("g0")
            if c.operator == "crossover":
                assert c.second_parent_id is not None and c.second_parent_id != c.parent_id
                assert {c.parent_id, c.second_parent_id} <= {s[0] for s in arch.scores()}
                assert ("CROSSED = " in c.code) if usable else "Answer not used: The program in the answer does not parse" in c.feedback
            else:
                assert c.second_parent_id is None
            if c.operator == "rewrite":
                assert ("REWRITTEN = " in c.code) if usable else "does not define run_packing() at the top level" in c.feedback
            if c.operator == "best_shot":
                made = "    shot = " in c.code and "run_packing_v" not in c.code
                assert made if usable else "defines no function run_packing_v" in c.feedback
            if usable:
                assert c.valid and c.reward > 0, (c.operator, c.feedback)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        ops = {k.split("_")[1] if not k.startswith("op_best_shot") else "best_shot" for k in row if k.startswith("op_")}
        for name in ops:
            assert row[f"op_{name}_program_frac"] == pytest.approx(0.5) and row[f"op_{name}_valid_frac"] == pytest.approx(0.5)
        assert sum(row[f"op_{n}_children"] for n in ops) == 8 * 2


def test_a_read_only_reader_of_an_old_archive_sees_edit_children(tmp_path):
    path = tmp_path / "archive.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
    with ReadOnlyArchive(path) as arch:  # no migration: the file stays as it is
        assert (arch.get(2).operator, arch.get(2).second_parent_id) == ("edit", None)
        assert [s.id for s in arch.children(1)] == [2] and arch.best().id == 2
    with sqlite3.connect(path) as db:
        assert "operator" not in {r[1] for r in db.execute("PRAGMA table_info(solutions)")}


def test_the_operator_table_weighs_epochs_by_their_children():
    from train.runs import run_data as rd

    rows = [{"epoch": 1, "op_edit_children": 6, "op_edit_program_frac": 0.5, "op_edit_valid_frac": 0.5,
             "op_edit_reward_mean": 0.9, "op_edit_reward_max": 1.8, "op_edit_new_best_frac": 0.0,
             "op_best_shot_children": 2, "op_best_shot_program_frac": 1.0, "op_best_shot_valid_frac": 1.0,
             "op_best_shot_reward_mean": 1.84, "op_best_shot_reward_max": 1.85, "op_best_shot_new_best_frac": 0.5},
            {"epoch": 2, "op_edit_children": 2, "op_edit_program_frac": 1.0, "op_edit_valid_frac": 0.5,
             "op_edit_reward_mean": 0.5, "op_edit_reward_max": 1.9, "op_edit_new_best_frac": 0.5}]
    table = rd.operator_table(rows)
    assert [(r["epoch"], r["operator"]) for r in table] == [(1, "best_shot"), (1, "edit"), (2, "edit"), ("all", "best_shot"),
                                                           ("all", "edit")]
    edit = table[-1]
    assert edit["children"] == 8 and edit["program_frac"] == pytest.approx((6 * 0.5 + 2 * 1.0) / 8)
    assert edit["reward_mean"] == pytest.approx((6 * 0.9 + 2 * 0.5) / 8) and edit["reward_max"] == 1.9
    assert edit["new_best_frac"] == pytest.approx(1 / 8)
