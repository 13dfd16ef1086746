"""Turn a policy answer into a child program: parse ``<answer>`` SEARCH/REPLACE blocks and apply them.

Forgiving where it is safe (chevron counts, CRLF, trailing whitespace, a block copied at the wrong
indentation depth as a whole, a full fenced program),
strict where it must be: a SEARCH text that is missing or ambiguous fails with a message that
names the block, because that message becomes feedback in the next prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BLOCK = re.compile(
    r"^[ \t]*<{5,9}[ \t]*SEARCH[ \t]*\n(.*?)^[ \t]*={5,9}[ \t]*\n(.*?)^[ \t]*>{5,9}[ \t]*REPLACE[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL)


class EditError(ValueError):
    """The answer could not be turned into a program; ``str(err)`` is feedback for the policy."""


@dataclass(frozen=True)
class Edit:
    search: str
    replace: str


def extract_answer(completion: str) -> str:
    """The text inside ``<answer>``; without one, whatever follows ``</think>`` (or everything)."""
    text = completion.replace("\r\n", "\n").replace("\r", "\n")
    match = _ANSWER.search(text)
    if match:
        return match.group(1)
    if "</think>" in text:
        return text.split("</think>", 1)[1]
    return text


def parse_edits(answer: str) -> list[Edit]:
    text = answer.replace("\r\n", "\n").replace("\r", "\n")
    if not text.endswith("\n"):
        text += "\n"
    return [Edit(m.group(1), m.group(2)) for m in _BLOCK.finditer(text)]


def _line_starts(code: str, text: str) -> list[int]:
    """Where ``text`` starts at the start of a line, overlaps included ("x\nx\n" is in "x\nx\nx\n" twice,
    str.count says once). Line-anchored so SEARCH "x = 1" cannot land on the tail of "max = 1"."""
    hits, start = [], code.find(text)
    while start != -1:
        if start == 0 or code[start - 1] == "\n":
            hits.append(start)
        start = code.find(text, start + 1)
    return hits


def _occurrences(code: str, text: str) -> int:
    return len(_line_starts(code, text))


def _strip_trailing(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.split("\n"))


def _ambiguous(number: int, count: int, first: str) -> EditError:
    return EditError(f"SEARCH/REPLACE block {number}: the SEARCH text occurs {count} times in the current program "
                     f"(first line: {first!r}); include more surrounding lines so it is unique.")


def _apply_one(code: str, edit: Edit, number: int) -> str:
    search = edit.search
    if not search.strip():
        raise EditError(f"SEARCH/REPLACE block {number}: the SEARCH section is empty; copy the exact lines to replace.")
    first = next(line for line in search.split("\n") if line.strip()).strip()[:80]
    hits = _line_starts(code, search)
    if len(hits) == 1:
        return code[: hits[0]] + edit.replace + code[hits[0] + len(search) :]
    if len(hits) > 1:
        raise _ambiguous(number, len(hits), first)
    # Forgiving passes, line-wise: trailing whitespace ignored; then, only where that finds nothing, the SEARCH
    # lines at another depth, all shifted by one indentation prefix (a small model copies a nested block with the
    # outer function's indentation). Relative indentation must match exactly, so the block's structure is the
    # program's; REPLACE moves by the same prefix.
    code_lines = code.split("\n")
    norm_code = [line.rstrip() for line in code_lines]
    norm_search = _strip_trailing(search).split("\n")
    if search.endswith("\n"):  # the line break ending the last line, not a blank line to match
        norm_search.pop()
    width = len(norm_search)
    lines_ = len(code_lines) - code.endswith("\n")  # the "" after a final line break is not a line
    matches = [(i, shift) for i in range(lines_ - width + 1)
               if (shift := _uniform_shift(norm_code[i : i + width], norm_search)) is not None]
    for hits in ([m for m in matches if m[1] == ("", "")], [m for m in matches if m[1] != ("", "")]):
        if len(hits) == 1:
            (i, (add, remove)), = hits
            return _splice(code_lines, i, width, _reindent(edit.replace, add, remove, number))
        if len(hits) > 1:
            raise _ambiguous(number, len(hits), first)
    raise EditError(
        f"SEARCH/REPLACE block {number}: the SEARCH text was not found in the current program "
        f"(first line: {first!r}). SEARCH must copy existing lines exactly."
    )


def _splice(code_lines: list[str], i: int, width: int, replace: str) -> str:
    """The program with its lines i .. i + width replaced by ``replace`` (whose final line break is the one the
    replaced lines' last line had)."""
    middle = [replace[:-1] if replace.endswith("\n") else replace] if replace else []
    return "\n".join(code_lines[:i] + middle + code_lines[i + width :])


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _uniform_shift(code: list[str], search: list[str]) -> tuple[str, str] | None:
    """(add, remove) when every non-blank SEARCH line is its code line with the prefix ``add`` put on or
    ``remove`` taken off its indentation (one of them empty, the same for every line), blank lines matching blank
    lines; else None."""
    shift = None
    for have, want in zip(code, search):
        if not want.strip() or not have.strip():
            if want.strip() or have.strip():
                return None
            continue
        if have.lstrip() != want.lstrip():
            return None
        a, b = _indent(have), _indent(want)
        if a.endswith(b):
            line_shift = (a[: len(a) - len(b)], "")
        elif b.endswith(a):
            line_shift = ("", b[: len(b) - len(a)])
        else:
            return None
        if shift is None:
            shift = line_shift
        elif line_shift != shift:
            return None
    return shift


def _reindent(text: str, add: str, remove: str, number: int) -> str:
    """REPLACE moved by the shift its SEARCH needed; a line that cannot move (less indented than ``remove``)
    is an error, not a guess."""
    out = []
    for line in text.split("\n"):
        if not line.strip():
            out.append(line)
        elif not line.startswith(remove):
            raise EditError(f"SEARCH/REPLACE block {number}: the SEARCH text is indented {len(remove)} characters "
                            f"deeper than the program, and the REPLACE line {line.strip()[:80]!r} is not; "
                            "copy the lines at their indentation in the program.")
        else:
            out.append(add + line[len(remove):])
    return "\n".join(out)


def apply_edits(code: str, edits: list[Edit]) -> str:
    code = code.replace("\r\n", "\n")
    for number, edit in enumerate(edits, start=1):
        code = _apply_one(code, edit, number)
    return code


_SEARCH_MARK = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH[ \t]*$", re.MULTILINE)


def _check_complete(answer: str, parsed: int) -> None:
    """A block opened with SEARCH but never closed would be silently dropped; say which one."""
    text = answer.replace("\r\n", "\n").replace("\r", "\n")
    opened = len(_SEARCH_MARK.findall(text))
    if opened > parsed:
        raise EditError(
            f"incomplete SEARCH/REPLACE block: the answer has {opened} <<<<<<< SEARCH line(s) but only {parsed} "
            "complete block(s). Every block needs a ======= line between the lines to find and the new lines, "
            "and must end with a >>>>>>> REPLACE line.")


def child_program(parent_code: str, completion: str, entry_function: str) -> str:
    """The child program a completion describes, or EditError saying why there is none."""
    answer = extract_answer(completion)
    if not answer.strip():
        raise EditError("The answer is empty: put SEARCH/REPLACE blocks (or the full program in a ```python fence) "
                        "inside <answer>...</answer>.")
    edits = parse_edits(answer)
    _check_complete(answer, len(edits))
    if edits:
        return apply_edits(parent_code, edits)
    for fenced in _FENCE.findall(answer):
        if f"def {entry_function}" in fenced:
            return fenced
    raise EditError(
        "No SEARCH/REPLACE block found in <answer>. Use:\n<<<<<<< SEARCH\n(exact lines)\n=======\n(new lines)\n>>>>>>> REPLACE"
    )


_MARKER_LINE = re.compile(r"^[ \t]*(?:={5,9}|<{5,9}[ \t]*SEARCH|>{5,9}[ \t]*REPLACE)[ \t]*$", re.MULTILINE)


def make_diff(parent: str, child: str) -> str:
    """SEARCH/REPLACE blocks that turn ``parent`` into ``child`` under ``apply_edits``.

    One block per changed hunk (``difflib`` line opcodes), each grown by context lines until its
    SEARCH text is not blank and occurs exactly once in the program as it stands when the block applies (earlier
    blocks already applied), so ``apply_edits(parent, parse_edits(make_diff(parent, child)))``
    is ``child``. Both texts must end in a newline, and no line may look like a block marker
    (``=======``, ``<<<<<<< SEARCH``, ``>>>>>>> REPLACE``: the block format cannot carry it).
    """
    import difflib

    for name, text in (("parent", parent), ("child", child)):
        if text and not text.endswith("\n"):
            raise ValueError(f"make_diff: the {name} must end in a newline")
        marker = _MARKER_LINE.search(text)
        if marker:
            raise ValueError(f"make_diff: the {name} has the line {marker.group(0).strip()!r}, which the block "
                             "format reads as a marker; send a full program")
    a, b = parent.splitlines(keepends=True), child.splitlines(keepends=True)
    if not a:
        raise ValueError("make_diff: an empty parent has no lines to SEARCH for; send the child as a full program")
    current, offset, blocks = list(a), 0, []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        lo, hi = i1 + offset, i2 + offset
        whole = "".join(current)
        grow_up = True
        while not "".join(current[lo:hi]).strip() or _occurrences(whole, "".join(current[lo:hi])) != 1:
            if lo == 0 and hi >= len(current):  # earlier blocks left nothing to anchor on: one whole-program block
                if not parent.strip():
                    raise ValueError("make_diff: a parent of blank lines has nothing to SEARCH for; send a full program")
                return f"<<<<<<< SEARCH\n{parent}=======\n{child}>>>>>>> REPLACE\n"
            if (grow_up and lo > 0) or hi >= len(current):
                lo -= 1
            else:
                hi += 1
            grow_up = not grow_up
        replacement = current[lo : i1 + offset] + b[j1:j2] + current[i2 + offset : hi]
        blocks.append(f"<<<<<<< SEARCH\n{''.join(current[lo:hi])}=======\n{''.join(replacement)}>>>>>>> REPLACE\n")
        current[lo:hi] = replacement
        offset += (j2 - j1) - (i2 - i1)
    return "".join(blocks)
