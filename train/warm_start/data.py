"""Synthetic edits for the warm start: small random mutations of a task's starter program, written as
the answers the policy must learn to give.

Pure text in, text out (no model, no sandbox): ``mutate`` changes one or two numeric literals, or
swaps or drops a statement line, inside the program's EVOLVE block when it has one; a task may opt
into more kinds in its task.yaml (``warm_start_mutations``, see ``EXTRA``); ``answer_for`` writes the
``<think>``/``<answer>`` completion in an operator's format (SEARCH/REPLACE blocks by
``rollout.edits.make_diff`` for ``edit``, one fenced program for ``rewrite`` and ``crossover``) and
checks that the operator turns it back into the child exactly, as a policy answer would be turned.
``combine`` makes crossover targets: one parent with the other's change applied.
"""

from __future__ import annotations

import ast
import copy
import io
import re
import tokenize
from dataclasses import dataclass

import numpy as np

from rollout.edits import EditError, apply_edits, make_diff, parse_edits
from rollout.operators import make_operator

_EVOLVE = re.compile(r"#\s*EVOLVE-BLOCK-START\s*\n(.*?)#\s*EVOLVE-BLOCK-END", re.DOTALL)


@dataclass(frozen=True)
class Mutation:
    code: str  # the mutated program
    reason: str  # one line for <think>: what changed


def _editable_span(code: str) -> tuple[int, int]:
    """Character range the mutations may touch: the EVOLVE block, else the whole program."""
    match = _EVOLVE.search(code)
    return (match.start(1), match.end(1)) if match else (0, len(code))


def _rows_in_span(code: str) -> set[int]:
    """0-based indices of the lines wholly inside the editable span."""
    lo, hi = _editable_span(code)
    ends = np.cumsum([0] + [len(x) for x in code.splitlines(keepends=True)])
    return {i for i in range(len(ends) - 1) if lo <= ends[i] and ends[i + 1] <= hi}


def _tokens(code: str) -> list[tuple[tokenize.TokenInfo, int]]:
    """Every token of ``code`` with its character offset; [] when the code does not tokenize."""
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    try:
        return [(tok, starts[tok.start[0] - 1] + tok.start[1])
                for tok in tokenize.generate_tokens(io.StringIO(code).readline)]
    except (tokenize.TokenError, SyntaxError):
        return []


def _numbers(code: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of every numeric literal inside the editable span."""
    lo, hi = _editable_span(code)
    return [(start, start + len(tok.string), tok.string) for tok, start in _tokens(code)
            if tok.type == tokenize.NUMBER and "j" not in tok.string.lower() and "_" not in tok.string
            and lo <= start and start + len(tok.string) <= hi]


def _perturb(text: str, rng: np.random.Generator) -> str:
    """A nearby value written like the original: ints move by a small step, floats by a few percent."""
    if re.fullmatch(r"\d+", text):
        value = int(text)
        step = int(rng.choice([-2, -1, 1, 2])) if value > 2 else int(rng.choice([1, 2]))
        return str(max(value + step, 0))
    value = float(text)
    decimals = len(text.split(".")[1]) if "." in text and "e" not in text.lower() else 3
    decimals = min(max(decimals, 2), 4)
    factor = float(rng.choice([0.8, 0.9, 0.95, 0.97, 1.03, 1.05, 1.1, 1.2]))
    new = round(value * factor, decimals) if value else round(float(rng.uniform(0.01, 0.1)), decimals)
    if new == value:
        new = round(value + 10 ** -decimals * (1 if factor > 1 else -1), decimals)
    return f"{new:.{decimals}f}"


def _statement_lines(code: str) -> set[int]:
    """0-based indices of the lines that begin with code: not blank, not a comment, and not the inside
    or start of a string (dropping a docstring line changes nothing the program computes)."""
    layout = (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    first: dict[int, int] = {}
    for tok, _ in _tokens(code):
        if tok.type not in layout:
            first.setdefault(tok.start[0], tok.type)  # the first real token that starts on each line
    return {row - 1 for row, kind in first.items() if kind not in (tokenize.STRING, tokenize.COMMENT)}


def _line_mutation(code: str, rng: np.random.Generator) -> Mutation | None:
    """Swap two adjacent statements of equal indentation, or drop one (the sandbox decides if it still runs)."""
    lines = code.splitlines(keepends=True)
    editable = _statement_lines(code) & _rows_in_span(code)
    body = [i for i, line in enumerate(lines) if i in editable and not line.strip().startswith(("def ", "return"))]
    if len(body) < 2:
        return None
    i = int(rng.choice(body))
    indent = len(lines[i]) - len(lines[i].lstrip())
    if rng.random() < 0.5 and i + 1 in body and len(lines[i + 1]) - len(lines[i + 1].lstrip()) == indent \
            and not lines[i].rstrip().endswith(":") and not lines[i + 1].rstrip().endswith(":"):
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
        return Mutation("".join(lines), "Swap two lines.")
    if lines[i].rstrip().endswith(":"):
        return None
    lines.pop(i)
    return Mutation("".join(lines), "Remove a line.")


def _coefficient(node: ast.AST) -> tuple[str, int] | None:
    """(array, index) when ``node`` is a fitted coefficient such as ``params[2]``: a name indexed by one int."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int:
        return node.value.id, node.slice.value
    return None


def _split(node: ast.AST, ops: tuple[type, ...]) -> list[ast.AST]:
    """The operands of a chain of ``ops`` (``a + b - c`` -> [a, b, c] for Add/Sub)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ops):
        return _split(node.left, ops) + _split(node.right, ops)
    return [node]


_TIGHTER = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)  # "expr + term" keeps expr whole


def _term_mutation(code: str, rng: np.random.Generator) -> Mutation | None:
    """Grow a sum of fitted terms by one: a copy of one of its simplest terms (fewest factors) times one of
    the line's variables, with fresh coefficients (``x[:, 0] * params[0] + ...`` gains
    ``+ x[:, 0] * params[2] * x[:, 1]``). Copying only the simplest terms keeps repeated growth from
    multiplying up: the data shows the edit, not the result of a search (two growths of a grown term can
    already reach symreg_physics' cubic law).

    Why: numeric and line mutations only re-weigh or drop what a program has; a model class such as
    symbolic regression's ``func(x, params)`` improves by gaining a term, an edit those never show. The
    new coefficients take the next unused indices; the sandbox rejects one past the array's end."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    lines, editable = code.splitlines(keepends=True), _rows_in_span(code)
    used: dict[str, set[int]] = {}
    for node in ast.walk(tree):
        if (coef := _coefficient(node)) is not None:
            used.setdefault(coef[0], set()).add(coef[1])
    sites = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Assign, ast.Return)) or node.value is None or node.lineno != node.end_lineno:
            continue
        if node.lineno - 1 not in editable or not (isinstance(node.value, ast.Subscript) or (
                isinstance(node.value, ast.BinOp) and isinstance(node.value.op, _TIGHTER))):
            continue
        terms = _split(node.value, (ast.Add, ast.Sub))
        fitted = [t for t in terms if any(_coefficient(n) for n in ast.walk(t))]
        factors = [f for t in terms for f in _split(t, (ast.Mult,))]
        variables = [f for f in factors if not isinstance(f, ast.Constant) and not any(_coefficient(n) for n in ast.walk(f))]
        if fitted and variables:
            sites.append((node, fitted, variables))
    if not sites:
        return None
    node, fitted, variables = sites[int(rng.integers(len(sites)))]
    sizes = [len(_split(t, (ast.Mult,))) for t in fitted]
    simplest = [t for t, n in zip(fitted, sizes) if n == min(sizes)]  # so growing twice never multiplies up
    term = copy.deepcopy(simplest[int(rng.integers(len(simplest)))])
    fresh: dict[tuple[str, int], int] = {}
    for sub in sorted(ast.walk(term), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
        if (coef := _coefficient(sub)) is not None:  # numbered left to right
            if coef not in fresh:
                fresh[coef] = max(used[coef[0]]) + 1
                used[coef[0]].add(fresh[coef])
            sub.slice = ast.Constant(fresh[coef])
    new = ast.unparse(ast.BinOp(term, ast.Mult(), copy.deepcopy(variables[int(rng.integers(len(variables)))])))
    row, line = node.lineno - 1, lines[node.lineno - 1].encode()  # ast's columns count UTF-8 bytes
    end = node.value.end_col_offset
    lines[row] = (line[:end] + f" + {new}".encode() + line[end:]).decode()
    return Mutation("".join(lines), f"Add a term: {new}.")


EXTRA = {"terms": (_term_mutation, 0.5)}  # task.yaml's warm_start_mutations: name -> (mutation, share of draws)


def mutate(code: str, rng: np.random.Generator, line_prob: float = 0.15, extra: tuple[str, ...] = ()) -> Mutation | None:
    """One random small change of ``code``, or None when the draw found nothing to change. ``extra``
    names further kinds from ``EXTRA`` (a task's ``warm_start_mutations``); with none, the draws are
    exactly those of a run without them, so tasks that do not opt in keep their warm start."""
    for name in extra:
        kind, share = EXTRA[name]
        if rng.random() < share:
            return kind(code, rng)
    if rng.random() < line_prob:
        return _line_mutation(code, rng)
    numbers = _numbers(code)
    if not numbers:
        return None
    k = min(len(numbers), int(rng.choice([1, 1, 1, 2])))
    picks = sorted(rng.choice(len(numbers), size=k, replace=False).tolist(), reverse=True)
    reasons = []
    for p in picks:  # right to left, so earlier offsets stay valid
        start, end, old = numbers[p]
        new = _perturb(old, rng)
        code = code[:start] + new + code[end:]
        reasons.append(f"{old} -> {new}")
    return Mutation(code, "Try " + ", ".join(reversed(reasons)) + ".")


def answer_for(parent: str, child: Mutation, operator: str = "edit", entry_function: str = "") -> str:
    """The completion a policy should give to turn ``parent`` into ``child.code`` under ``operator``;
    checked to rebuild the child through the operator itself, so no target is one the loop would reject."""
    if operator == "edit":
        body = make_diff(parent, child.code)
        if apply_edits(parent, parse_edits(body)) != child.code:  # make_diff's contract
            raise ValueError("make_diff produced blocks that do not rebuild the child")
    elif operator in ("rewrite", "crossover"):
        body = f"```python\n{child.code.rstrip()}\n```\n"
        if make_operator(operator, entry_function).child(parent, body) != child.code.rstrip() + "\n":
            raise ValueError(f"the {operator} answer does not rebuild the child")
    else:
        raise ValueError(f"no warm-start answers for operator {operator!r} (edit, rewrite, crossover)")
    return f"<think>\n{child.reason}\n</think>\n<answer>\n{body}</answer>"


def combine(root: str, first: str, second: str) -> Mutation | None:
    """Crossover's target: ``first`` with ``second``'s change (both mutants of ``root``) applied too;
    None when the two changes touch the same lines."""
    try:
        code = apply_edits(first, parse_edits(make_diff(root, second)))
    except EditError:
        return None
    if code in (first, second):
        return None
    return Mutation(code, "Keep A's change and add B's.")
