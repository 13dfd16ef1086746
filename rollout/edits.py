"""Turn a policy answer into a child program: parse ``<answer>`` SEARCH/REPLACE blocks and apply them.

Forgiving where it is safe (chevron counts, CRLF, trailing whitespace, a full fenced program),
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


def _strip_trailing(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.split("\n"))


def _apply_one(code: str, edit: Edit, number: int) -> str:
    search = edit.search
    if not search.strip():
        raise EditError(f"SEARCH/REPLACE block {number}: the SEARCH section is empty; copy the exact lines to replace.")
    count = code.count(search)
    if count == 1:
        return code.replace(search, edit.replace, 1)
    if count > 1:
        raise EditError(f"SEARCH/REPLACE block {number}: the SEARCH text occurs {count} times; include more surrounding lines so it is unique.")
    # Forgiving pass: ignore trailing whitespace on every line. Works line-wise so indentation stays exact.
    code_lines = code.split("\n")
    norm_code = [line.rstrip() for line in code_lines]
    norm_search = _strip_trailing(search).rstrip("\n").split("\n")
    width = len(norm_search)
    hits = [i for i in range(len(norm_code) - width + 1) if norm_code[i : i + width] == norm_search]
    if len(hits) == 1:
        i = hits[0]
        replacement = edit.replace[:-1] if edit.replace.endswith("\n") else edit.replace
        middle = [replacement] if edit.replace else []
        return "\n".join(code_lines[:i] + middle + code_lines[i + width :])
    if len(hits) > 1:
        raise EditError(f"SEARCH/REPLACE block {number}: the SEARCH text occurs {len(hits)} times; include more surrounding lines so it is unique.")
    first = norm_search[0].strip()[:80]
    raise EditError(
        f"SEARCH/REPLACE block {number}: the SEARCH text was not found in the current program "
        f"(first line: {first!r}). SEARCH must copy existing lines exactly."
    )


def apply_edits(code: str, edits: list[Edit]) -> str:
    code = code.replace("\r\n", "\n")
    for number, edit in enumerate(edits, start=1):
        code = _apply_one(code, edit, number)
    return code


def child_program(parent_code: str, completion: str, entry_function: str) -> str:
    """The child program a completion describes, or EditError saying why there is none."""
    answer = extract_answer(completion)
    edits = parse_edits(answer)
    if edits:
        return apply_edits(parent_code, edits)
    for fenced in _FENCE.findall(answer):
        if f"def {entry_function}" in fenced:
            return fenced
    raise EditError(
        "No SEARCH/REPLACE block found in <answer>. Use:\n<<<<<<< SEARCH\n(exact lines)\n=======\n(new lines)\n>>>>>>> REPLACE"
    )
