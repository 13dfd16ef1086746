"""Canonical code for embedding (paper line 249: "normalize each solution into a canonical code format").

Why: Div should measure what a program does, not how it is commented or laid out, and the
embedding cache keys on the canonical text, so cosmetic edits must map to the same string.

What it does (deterministic and idempotent: canonicalize(canonicalize(c)) == canonicalize(c)):
- drops comments, docstrings and any other bare string statement (a no-op like a docstring),
  found with ``ast``; other string literals are kept byte for byte (a body that held only a
  docstring is left empty: the canonical text is for embedding and need not parse);
- re-lays whitespace from the token stream: indentation becomes 4 spaces per block level
  (continuation lines inside brackets one level deeper), any run of spaces between two tokens
  becomes one space (no space stays no space: ``x=1`` and ``x = 1`` still differ), backslash
  continuations are joined, and blank lines go (inside string literals nothing changes);
- code that ``ast`` cannot parse still goes through the tokenizer, with docstrings guessed as
  a string that alone makes up a logical line; code that does not even tokenize (e.g. an
  unterminated triple quote) only loses whole-line comments, trailing whitespace and blank lines.
"""

from __future__ import annotations

import ast
import bisect
import io
import tokenize
import warnings

_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python >= 3.12 splits f-strings into parts
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)
_LAYOUT = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT, tokenize.ENDMARKER}


def _char_col(line: str, byte_col: int) -> int:
    """ast columns count UTF-8 bytes; tokenize columns count characters."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def _bare_strings(code: str, lines: list[str]) -> list[tuple[tuple[int, int], tuple[int, int]]] | None:
    """(start, end) positions of every statement that is only a string; None if it does not parse."""
    try:
        with warnings.catch_warnings():  # broken model output must not spam the log
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            start = (node.lineno, _char_col(lines[node.lineno - 1], node.col_offset))
            end = (node.end_lineno, _char_col(lines[node.end_lineno - 1], node.end_col_offset))
            spans.append((start, end))
    return spans


def _group_fstrings(tokens: list) -> list:
    """Merge each (possibly nested) 3.12+ f-string into one pseudo STRING token spanning its source."""
    if _FSTRING_START is None:
        return tokens
    out, depth, start = [], 0, None
    for tok in tokens:
        if tok.type == _FSTRING_START:
            depth += 1
            if depth == 1:
                start = tok
            continue
        if depth:
            if tok.type == _FSTRING_END:
                depth -= 1
                if depth == 0:
                    out.append(tokenize.TokenInfo(tokenize.STRING, "", start.start, tok.end, start.line))
            continue
        out.append(tok)
    return out


def _guessed_docstrings(tokens: list) -> set[int]:
    """Without an AST: a STRING that alone makes up a logical line."""
    drop = set()
    significant = [i for i, t in enumerate(tokens) if t.type not in (tokenize.NL, tokenize.COMMENT)]
    for n, i in enumerate(significant):
        prev = tokens[significant[n - 1]].type if n else tokenize.NEWLINE
        nxt = tokens[significant[n + 1]].type if n + 1 < len(significant) else tokenize.ENDMARKER
        if tokens[i].type == tokenize.STRING and prev in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) \
                and nxt in (tokenize.NEWLINE, tokenize.ENDMARKER):
            drop.add(i)
    return drop


def _relayout(code: str) -> str:
    lines = [line + "\n" for line in code.split("\n")]  # tokenize's rows: split on \n only, not \f etc.
    tokens = _group_fstrings(list(tokenize.generate_tokens(io.StringIO(code).readline)))
    spans = _bare_strings(code, lines)
    if spans is None:
        drop = _guessed_docstrings(tokens)
    else:
        spans.sort()  # bare string statements never nest: the candidate span is the last start <= token
        starts = [s for s, _ in spans]
        drop = {i for i, t in enumerate(tokens)
                if (j := bisect.bisect_right(starts, t.start) - 1) >= 0 and t.start < spans[j][1]}
        drop |= {i + 1 for i in drop if i + 1 < len(tokens) and tokens[i + 1].string == ";"}  # '"doc"; x = 1'

    def text(tok) -> str:  # the token's own source text (exact even where tokenize rewrites it)
        (sr, sc), (er, ec) = tok.start, tok.end
        if sr == er:
            return lines[sr - 1][sc:ec]
        return lines[sr - 1][sc:] + "".join(lines[sr : er - 1]) + lines[er - 1][:ec]

    out: list[str] = []
    depth, line_start, logical_start, last_end = 0, True, True, None
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        elif tok.type in (tokenize.NEWLINE, tokenize.NL):
            if not line_start:
                out.append("\n")
            line_start = True
            logical_start = logical_start or tok.type == tokenize.NEWLINE
        elif tok.type in _LAYOUT or i in drop or (tok.type == tokenize.ERRORTOKEN and not tok.string.strip()):
            continue
        else:
            if line_start:
                out.append("    " * (depth + (0 if logical_start else 1)))
            elif last_end is not None and tok.start != last_end:
                out.append(" ")
            out.append(text(tok))
            line_start = logical_start = False
            last_end = tok.end
    return "".join(out)


def _strip_lines(code: str) -> str:
    """Last resort for text that does not tokenize: whole-line comments, trailing spaces, blank lines."""
    return "\n".join(line.rstrip() for line in code.split("\n") if line.strip() and not line.lstrip().startswith("#"))


def _once(code: str) -> str:
    try:
        return _relayout(code).rstrip("\n")  # no blank lines or trailing spaces outside string literals
    except (tokenize.TokenError, SyntaxError, ValueError):  # IndentationError is a SyntaxError
        return _strip_lines(code)


def canonicalize(code: str) -> str:
    """Canonical text of ``code`` (see the module docstring)."""
    out = code.replace("\r\n", "\n").replace("\r", "\n")
    for _ in range(4):  # broken code can change path between passes (a stray backslash becomes a
        nxt = _once(out)  # continuation once its trailing spaces go): iterate to the fixed point
        if nxt == out:
            break
        out = nxt
    return out
