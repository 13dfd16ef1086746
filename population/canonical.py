"""Canonical code for embedding (paper: "normalize each solution into a canonical code format").

Choice: drop comments and docstrings, strip trailing whitespace, drop blank lines. Names,
literals and indentation stay: they carry meaning. Code that does not tokenize falls back
to dropping whole-line comments and blank lines only.
"""

from __future__ import annotations

import io
import tokenize


def _strip_tokens(code: str) -> str:
    out = []
    prev_type = tokenize.INDENT
    last_line, last_col = -1, 0
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        ttype, text, (sl, sc), (el, ec), _ = tok
        if sl > last_line:
            last_col = 0
        if ttype == tokenize.COMMENT:
            pass
        elif ttype == tokenize.STRING and prev_type in (tokenize.INDENT, tokenize.NEWLINE, tokenize.DEDENT, tokenize.NL):
            pass  # a statement that is only a string: a docstring
        else:
            if sc > last_col:
                out.append(" " * (sc - last_col))
            out.append(text)
        if ttype not in (tokenize.COMMENT, tokenize.NL):
            prev_type = ttype
        last_line, last_col = el, ec
    return "".join(out)


def canonicalize(code: str) -> str:
    code = code.replace("\r\n", "\n").expandtabs(4)
    try:
        code = _strip_tokens(code)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        code = "\n".join(line for line in code.split("\n") if not line.lstrip().startswith("#"))
    return "\n".join(line.rstrip() for line in code.split("\n") if line.strip())
