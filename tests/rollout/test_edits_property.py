"""Property tests for edit application: over random programs, the SEARCH/REPLACE blocks that
``make_diff`` writes turn the parent into the child, also after the reformatting a policy
tends to add (CRLF, trailing whitespace, other chevron counts)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout.edits import apply_edits, child_program, make_diff, parse_edits


def answer(*blocks):
    body = "".join(f"<<<<<<< SEARCH\n{s}=======\n{r}>>>>>>> REPLACE\n" for s, r in blocks)
    return f"<think>reasoning</think>\n<answer>\n{body}</answer>"


lines = st.lists(st.text(alphabet="abcdefghij (),=+", min_size=0, max_size=12), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(parent_lines=lines, child_lines=lines, start=st.integers(0, 11), length=st.integers(1, 4))
def test_property_one_hand_written_block_gives_child(parent_lines, child_lines, start, length):
    # Number the lines so any contiguous run of them is unique in the program.
    parent = [f"l{i}: {s}" for i, s in enumerate(parent_lines)]
    start = min(start, len(parent) - 1)
    stop = min(len(parent), start + length)
    replacement = [f"n{i}: {s}" for i, s in enumerate(child_lines)]
    child = "\n".join(parent[:start] + replacement + parent[stop:]) + "\n"
    search = "".join(line + "\n" for line in parent[start:stop])
    replace = "".join(line + "\n" for line in replacement)
    parent_text = "\n".join(parent) + "\n"
    assert child_program(parent_text, answer((search, replace)), "f") == child
    # The whole-program block is the degenerate diff and must round-trip too.
    assert child_program(parent_text, answer((parent_text, child)), "f") == child


# Few distinct lines, so programs repeat lines and hunks need context to be unique. "x = 1" is
# also the tail of "max = 1": a match must start at a line start.
CODE_LINES = ["x = 1", "max = 1", "y = 2", "return x", "", "    pass", "def f():", "# note", "\tz = x + y  "]
code_lines = st.lists(st.sampled_from(CODE_LINES), min_size=1, max_size=14)


def _program(lines_: list[str]) -> str:
    return "".join(line + "\n" for line in lines_)


@settings(max_examples=300, deadline=None)
@given(parent_lines=code_lines, child_lines=code_lines)
def test_property_apply_of_make_diff_gives_child(parent_lines, child_lines):
    """apply(parent, make_diff(parent, child)) == child over random programs with repeated lines."""
    parent, child = _program(parent_lines), _program(child_lines)
    if not parent.strip() and parent != child:  # nothing to anchor a SEARCH on: refused (send a full program)
        with pytest.raises(ValueError, match="nothing to SEARCH"):
            make_diff(parent, child)
        return
    blocks = parse_edits(make_diff(parent, child))
    assert apply_edits(parent, blocks) == child
    if parent == child:
        assert blocks == []


@settings(max_examples=200, deadline=None)
@given(parent_lines=code_lines, child_lines=code_lines, pad=st.sampled_from([" ", "  ", "\t", " \t"]),
       chevrons=st.integers(5, 9), crlf=st.booleans())
def test_property_policy_style_reformatting_is_forgiven(parent_lines, child_lines, pad, chevrons, crlf):
    """The same diff as a policy might write it: trailing whitespace on every SEARCH line, another
    chevron count, CRLF line endings, wrapped in <think>/<answer>; the child is the same."""
    parent, child = _program(parent_lines), _program(child_lines)
    if not parent.strip():
        return
    padded = []
    for block in parse_edits(make_diff(parent, child)):
        search = "".join(line + pad + "\n" for line in block.search.split("\n")[:-1])
        padded.append(f"{'<' * chevrons} SEARCH\n{search}{'=' * chevrons}\n{block.replace}{'>' * chevrons} REPLACE\n")
    text = f"<think>plan</think>\n<answer>\n{''.join(padded)}</answer>"
    if crlf:
        text = text.replace("\n", "\r\n")
    if not padded:  # parent == child: there is nothing to apply, and the policy must be told so
        return
    assert child_program(parent, text, "f") == child


@settings(max_examples=100, deadline=None)
@given(parent_lines=code_lines, child_lines=code_lines)
def test_property_every_block_has_a_unique_nonblank_search(parent_lines, child_lines):
    """What makes the diff useful in a prompt: each SEARCH is short context that names one place."""
    parent, child = _program(parent_lines), _program(child_lines)
    if not parent.strip():
        return
    current = parent
    for block in parse_edits(make_diff(parent, child)):
        assert block.search.strip()
        starts = [m.start() for m in re.finditer(f"(?m)^(?={re.escape(block.search)})", current)]
        assert len(starts) == 1
        current = apply_edits(current, [block])
    assert current == child


def _indented(text: str, prefix: str) -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(keepends=True))


@settings(max_examples=200, deadline=None)
@given(parent_lines=code_lines, child_lines=code_lines, prefix=st.sampled_from(["    ", "        ", "\t"]),
       deeper=st.booleans())
def test_property_a_diff_copied_at_another_depth_gives_the_child_at_the_programs(parent_lines, child_lines, prefix,
                                                                                  deeper):
    """The program one level in (a function body), the policy's diff one level out, or the other way round:
    every block moves by the same prefix and the child is the diff's child at the program's depth."""
    parent, child = _program(parent_lines), _program(child_lines)
    if not parent.strip() or parent == child:
        return
    diff = make_diff(parent, child)
    if deeper:  # the program as written, the diff indented one level too far
        program, want = parent, child
        diff = "".join(line if re.fullmatch(r"(<{7} SEARCH|={7}|>{7} REPLACE)\n", line) else _indented(line, prefix)
                       for line in diff.splitlines(keepends=True))
    else:  # the program one level in, the diff as make_diff wrote it (one level out)
        program, want = _indented(parent, prefix), _indented(child, prefix)
    assert child_program(program, f"<answer>\n{diff}</answer>", "f") == want
