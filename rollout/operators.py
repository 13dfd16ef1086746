"""Evolution operators: the ways a prompt asks for a child, and how its answer becomes one.

* ``edit`` (HELIX, the default): SEARCH/REPLACE blocks on one parent (rollout.edits).
* ``rewrite`` (HELIX's symbolic-regression prompts; BES's "full" patches): one fenced program
  that replaces the parent whole.
* ``crossover`` (BES): two parents from different lineages, shown with their rewards and
  feedback; the answer is one program that combines them. The trainer picks the second parent
  (train.loop.evolution.Evolution.mate); the archive records both.
* ``best_shot`` (FunSearch): the best programs of the parent's island, their entry functions
  shown as versions ``{entry}_v0 .. {entry}_v{k-1}`` sorted by score; the answer is
  ``{entry}_v{k}``, renamed back to the entry function and put in place of the parent's.
* ``iterate`` (the no-LLM baseline of search-form tasks): no prompt and no answer; the child is its
  parent's program unchanged, rerun on the parent's construction with a fresh seed. It asks
  nothing of the policy (``needs_policy``), so a run of it alone loads no model.

Each operator shows its programs through PromptBuilder (``layout``: the token budget applies
and what it drops is recorded, as for edits), names the answer format it expects, and turns a
completion into a child program or an EditError whose message becomes the child's feedback.
Every program an operator returns parses and defines the entry function at the top level.
"""

from __future__ import annotations

import abc
import ast
import re
from dataclasses import dataclass

from rollout.edits import EditError, child_program, extract_answer
from rollout.prompts import CONTRACT, Candidate, current_program, limit_sentence, status_line

_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def _fenced(completion: str) -> list[str]:
    """The code blocks of the answer; a bare answer (no fence) is one block."""
    answer = extract_answer(completion)
    if not answer.strip():
        raise EditError("The answer is empty: put the program in one ```python block inside <answer>...</answer>.")
    blocks = _FENCE.findall(answer)
    return blocks or [answer]


def _parse(code: str, what: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as err:
        raise EditError(f"{what} does not parse as Python: line {err.lineno}: {err.msg}.") from None
    except ValueError as err:  # null bytes
        raise EditError(f"{what} does not parse as Python: {err}.") from None


def _binds(tree: ast.Module, name: str) -> bool:
    """The module defines ``name`` at its top level (def, class, assignment or import)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def checked_program(code: str, entry_function: str, what: str = "The program in the answer") -> str:
    """``code`` if it parses and defines ``entry_function`` at the top level; otherwise EditError."""
    tree = _parse(code, what)
    if not _binds(tree, entry_function):
        raise EditError(f"{what} does not define {entry_function}() at the top level; the harness calls it. "
                        f"Keep the function, with its name.")
    return code if code.endswith("\n") else code + "\n"


def _whole_program(completion: str, entry_function: str) -> str:
    """One fenced program: the block that defines the entry function, else the first block."""
    blocks = _fenced(completion)
    pick = next((b for b in blocks if re.search(rf"^\s*(async\s+)?def\s+{re.escape(entry_function)}\b", b, re.M)), blocks[0])
    return checked_program(pick, entry_function)


def _function_span(tree: ast.Module, name: str) -> tuple[int, int] | None:
    """1-based first and last line of the top-level ``def name`` (decorators included)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return first, node.end_lineno
    return None


def function_source(code: str, name: str) -> str | None:
    """The source of the top-level function ``name`` in ``code``, or None."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    span = _function_span(tree, name)
    return None if span is None else "\n".join(code.split("\n")[span[0] - 1 : span[1]])


def without_function(code: str, name: str) -> str:
    """``code`` with the top-level function ``name`` replaced by a one-line placeholder."""
    tree = ast.parse(code)
    first, last = _function_span(tree, name)
    lines = code.split("\n")
    return "\n".join(lines[: first - 1] + [f"# def {name}(...): the function you write goes here"] + lines[last:])


@dataclass(frozen=True)
class Operator(abc.ABC):
    """One way of making a child, for one task's entry function. Class attributes: what the
    answer must hold, in words; whether the prompt shows the parent's ancestors; which extra
    programs it shows ("": none, "mate": a second parent, "shots": the island's best)."""

    name: str
    entry: str
    answer_format = "SEARCH/REPLACE blocks inside <answer>"
    lineage = True
    extra_parents = ""
    needs_policy = True  # False: the child is made without a prompt or a completion (iterate)

    def layout(self):
        """What PromptBuilder.build takes as ``layout``."""
        return self

    @abc.abstractmethod
    def current(self, parent: Candidate, codes: list[str], others: list[Candidate], feedback_limit: int | None) -> str:
        """The prompt's {parent} section; ``codes``: the parent's and each other program's code, cut to budget."""

    @abc.abstractmethod
    def contract(self, entry_function: str, timeout: str, others: list[Candidate], form: str = "construct") -> str:
        """The prompt's {contract} section: what to answer, and in which format (``form``: the task's, for
        what the time limit costs: rollout.prompts.limit_sentence)."""

    @abc.abstractmethod
    def child(self, parent_code: str, completion: str, version: int = 0) -> str:
        """The child program, or EditError whose message is the child's feedback."""


class Edit(Operator):
    """The paper's prompt, exactly as PromptBuilder builds it without a layout."""

    def current(self, parent, codes, others, feedback_limit):
        return current_program(parent, codes[0], feedback_limit)

    def contract(self, entry_function, timeout, others, form="construct"):
        return CONTRACT.format(entry_function=entry_function, limit=limit_sentence(timeout, form))

    def child(self, parent_code: str, completion: str, version: int = 0) -> str:
        return child_program(parent_code, completion, self.entry)


_WHOLE = """## Task
Write an improved version of the program: the complete program, in one ```python block inside
<answer>. It replaces the current program whole, so include everything it needs (imports,
helpers). It must define {entry_function}() at the top level and return the same kind of result.
{limit}"""


class Rewrite(Operator):
    answer_format = "one ```python block holding the whole program"

    def current(self, parent, codes, others, feedback_limit):
        return current_program(parent, codes[0], feedback_limit)

    def contract(self, entry_function, timeout, others, form="construct"):
        return _WHOLE.format(entry_function=entry_function, limit=limit_sentence(timeout, form))

    def child(self, parent_code, completion, version=0):
        return _whole_program(completion, self.entry)


_CROSS = """## Task
Programs A and B come from different lineages. Combine them: take what works in each and write
one program that should score better than both. Answer with the complete program, in one
```python block inside <answer>. It must define {entry_function}() at the top level and return
the same kind of result. {limit}"""


class Crossover(Operator):
    answer_format = "one ```python block holding the whole program"
    extra_parents = "mate"

    def current(self, parent, codes, others, feedback_limit):
        mate = others[0]
        return (f"## Program A\nStatus: {status_line(parent, feedback_limit)}\n```python\n{codes[0]}\n```\n\n"
                f"## Program B\nStatus: {status_line(mate, feedback_limit)}\n```python\n{codes[1]}\n```")

    def contract(self, entry_function, timeout, others, form="construct"):
        return _CROSS.format(entry_function=entry_function, limit=limit_sentence(timeout, form))

    def child(self, parent_code, completion, version=0):
        return _whole_program(completion, self.entry)


_SHOTS = """## Task
Above are versions of {entry_function}, sorted by score: {entry_function}_v{last} scores best. Write
{entry_function}_v{k}, an improved version, in one ```python block inside <answer>: only the
function (and any helpers it needs). It replaces {entry_function} in the program.
{limit}"""


class BestShot(Operator):
    """``others``: the shown programs, worst first (the parent among them); ``codes[0]`` is the parent's."""

    answer_format = "one ```python block defining the entry function's next version"
    lineage = False
    extra_parents = "shots"

    def current(self, parent, codes, others, feedback_limit):
        entry, versions = self.entry, []
        for i, (sol, code) in enumerate(zip(others, codes[1:])):
            source = function_source(code, entry) or code
            renamed = re.sub(rf"\b{re.escape(entry)}\b", f"{entry}_v{i}", source)
            versions.append(f"# {entry}_v{i}: {status_line(sol, feedback_limit if feedback_limit is not None else 200)}\n"
                            f"{renamed}")
        try:
            rest = without_function(codes[0], entry)
        except (SyntaxError, ValueError, TypeError):
            rest = codes[0]
        return (f"## The rest of the program (kept as it is)\n```python\n{rest}\n```\n\n"
                f"## Versions of {entry}, worst to best\n```python\n" + "\n\n\n".join(versions) + "\n```")

    def contract(self, entry_function, timeout, others, form="construct"):
        k = len(others)
        return _SHOTS.format(entry_function=entry_function, last=k - 1, k=k, limit=limit_sentence(timeout, form, "the program"))

    def child(self, parent_code, completion, version=0):
        """The parent with its entry function replaced by the answer's ``{entry}_v{version}``, renamed."""
        entry_function = self.entry
        wanted = f"{entry_function}_v{version}"
        blocks = _fenced(completion)
        code = next((b for b in blocks if re.search(rf"\bdef\s+{re.escape(wanted)}\b", b)), blocks[0])
        tree = _parse(code, "The function in the answer")
        name = wanted if _function_span(tree, wanted) else entry_function
        if _function_span(tree, name) is None:
            raise EditError(f"The answer defines no function {wanted}(); write `def {wanted}(...)` in one ```python block.")
        lines = code.split("\n")
        keep = []  # helpers and imports of the answer; the shown versions are not copied back
        version_name = re.compile(rf"{re.escape(entry_function)}(_v\d+)?")
        for node in tree.body:
            is_def = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_def and node.name != name and version_name.fullmatch(node.name):
                continue
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            keep.append("\n".join(lines[first - 1 : node.end_lineno]))
        new = re.sub(rf"\b{re.escape(wanted)}\b", entry_function, "\n\n".join(keep))
        parent_tree = _parse(parent_code, "The parent program")
        first, last = _function_span(parent_tree, entry_function)
        parent_lines = parent_code.split("\n")
        program = "\n".join(parent_lines[: first - 1] + [new] + parent_lines[last:])
        return checked_program(program, entry_function, "The program with your function in it")


class Iterate(Operator):
    """The parent's program again, to be rerun on the parent's construction (search form): what a
    search-form result owes to the starter's own search, with no LLM edit at all. Nothing is prompted,
    so ``current`` and ``contract`` are never asked for; the loop checks the task's form before a run."""

    answer_format = "none: the parent's program is rerun as it is"
    lineage = False
    needs_policy = False

    def current(self, parent, codes, others, feedback_limit):
        raise TypeError("the iterate operator builds no prompt: its children are made without the policy")

    def contract(self, entry_function, timeout, others, form="search"):
        raise TypeError("the iterate operator builds no prompt: its children are made without the policy")

    def child(self, parent_code, completion, version=0):
        return parent_code


OPERATORS: dict[str, type[Operator]] = {}


def register_operator(name: str, cls: type[Operator]) -> None:
    """Add an operator that ``evolution.operators`` can name."""
    if not (isinstance(cls, type) and issubclass(cls, Operator)):
        raise TypeError(f"operator {name!r} must be an Operator subclass, not {cls!r}")
    if cls.extra_parents not in ("", "mate", "shots"):
        raise ValueError(f"{cls.__name__}.extra_parents must be '', 'mate' or 'shots', not {cls.extra_parents!r}")
    OPERATORS[name] = cls


register_operator("edit", Edit)
register_operator("rewrite", Rewrite)
register_operator("crossover", Crossover)
register_operator("best_shot", BestShot)
register_operator("iterate", Iterate)


def uses_policy(mix: dict[str, float]) -> bool:
    """Whether a run with this operator mix (evolution.operators) asks the policy for anything: False only
    for a mix of operators that make children without it (iterate), which then loads no model."""
    return any(OPERATORS[name].needs_policy for name, weight in mix.items() if weight > 0 and name in OPERATORS)


def make_operator(name: str, entry_function: str) -> Operator:
    if name not in OPERATORS:
        raise KeyError(f"unknown operator {name!r}; known: {sorted(OPERATORS)}")
    return OPERATORS[name](name, entry_function)
