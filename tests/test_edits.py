import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout.edits import EditError, apply_edits, child_program, extract_answer, parse_edits

PARENT = "import numpy as np\n\ndef run_packing():\n    x = 1\n    y = 2\n    return x + y\n"


def answer(*blocks, chevrons=7):
    body = "".join(f"{'<' * chevrons} SEARCH\n{s}{'=' * chevrons}\n{r}{'>' * chevrons} REPLACE\n" for s, r in blocks)
    return f"<think>reasoning</think>\n<answer>\n{body}</answer>"


@pytest.mark.parametrize("chevrons", [5, 7, 9])
def test_chevron_counts(chevrons):
    out = child_program(PARENT, answer(("    x = 1\n", "    x = 10\n"), chevrons=chevrons), "run_packing")
    assert out == PARENT.replace("x = 1\n", "x = 10\n")


def test_several_blocks_apply_in_order():
    out = child_program(PARENT, answer(("    x = 1\n", "    x = 3\n"), ("    y = 2\n", "    y = 4\n")), "run_packing")
    assert "x = 3" in out and "y = 4" in out and "x = 1" not in out


def test_crlf_completion():
    text = answer(("    x = 1\n", "    x = 5\n")).replace("\n", "\r\n")
    assert "    x = 5\n" in child_program(PARENT, text, "run_packing")


def test_trailing_whitespace_in_search_is_forgiven():
    out = child_program(PARENT, answer(("    x = 1   \n    y = 2\t\n", "    x = 7\n    y = 8\n")), "run_packing")
    assert out == PARENT.replace("    x = 1\n    y = 2\n", "    x = 7\n    y = 8\n")


def test_fenced_full_program_instead_of_blocks():
    new = "def run_packing():\n    return 42\n"
    assert child_program(PARENT, f"<answer>\n```python\n{new}```\n</answer>", "run_packing") == new


def test_fenced_program_without_entry_function_is_rejected():
    with pytest.raises(EditError, match="No SEARCH/REPLACE block"):
        child_program(PARENT, "<answer>```python\nprint(1)\n```</answer>", "run_packing")


def test_missing_search_names_the_block():
    with pytest.raises(EditError, match=r"block 2: the SEARCH text was not found.*'z = 3'"):
        child_program(PARENT, answer(("    x = 1\n", "    x = 2\n"), ("    z = 3\n", "    z = 4\n")), "run_packing")


def test_ambiguous_search_names_the_block():
    code = "a = 1\nb = 2\na = 1\n"
    with pytest.raises(EditError, match="block 1: the SEARCH text occurs 2 times"):
        apply_edits(code, parse_edits(answer(("a = 1\n", "a = 3\n"))))


@pytest.mark.parametrize("tail", ["    x = 2\n</answer>", "=======\n    x = 2\n</answer>"])
def test_an_unterminated_block_is_named_not_dropped(tail):
    """A second block missing its ======= or >>>>>>> REPLACE line must not vanish silently while
    the first one applies: the policy is told which block is broken."""
    good = "<<<<<<< SEARCH\n    x = 1\n=======\n    x = 2\n>>>>>>> REPLACE\n"
    text = f"<answer>\n{good}<<<<<<< SEARCH\n    y = 1\n{tail}"
    with pytest.raises(EditError, match=r"incomplete SEARCH/REPLACE block: the answer has 2 <<<<<<< SEARCH line\(s\) "
                                        r"but only 1 complete block\(s\)"):
        child_program(PARENT, text, "run_packing")


def test_overlapping_matches_are_ambiguous():
    """str.count would call "a\na\n" unique in "a\na\na\n" and the edit would land on the wrong lines."""
    with pytest.raises(EditError, match="block 1: the SEARCH text occurs 2 times"):
        apply_edits("a\na\na\n", parse_edits(answer(("a\na\n", "b\n"))))


def test_empty_search_is_rejected():
    with pytest.raises(EditError, match="SEARCH section is empty"):
        apply_edits(PARENT, parse_edits(answer(("", "x\n"))))


def test_answer_extraction_variants():
    assert extract_answer("<think>t</think><answer>A</answer>") == "A"
    assert extract_answer("<think>t</think>tail") == "tail"
    assert extract_answer("<answer>unclosed") == "unclosed"
    assert extract_answer("plain") == "plain"


def test_blocks_outside_answer_are_ignored_when_answer_exists():
    text = "<think>\n<<<<<<< SEARCH\n    x = 1\n=======\n    x = 99\n>>>>>>> REPLACE\n</think><answer>\n</answer>"
    with pytest.raises(EditError):
        child_program(PARENT, text, "run_packing")


lines = st.lists(st.text(alphabet="abcdefghij (),=+", min_size=0, max_size=12), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(parent_lines=lines, child_lines=lines, start=st.integers(0, 11), length=st.integers(1, 4))
def test_property_apply_of_diff_gives_child(parent_lines, child_lines, start, length):
    # Number the lines so any contiguous run of them is unique in the program.
    parent = [f"l{i}: {s}" for i, s in enumerate(parent_lines)]
    start = min(start, len(parent) - 1)
    stop = min(len(parent), start + length)
    replacement = [f"n{i}: {s}" for i, s in enumerate(child_lines)]
    child = parent[:start] + replacement + parent[stop:]
    search = "".join(line + "\n" for line in parent[start:stop])
    replace = "".join(line + "\n" for line in replacement)
    parent_text = "\n".join(parent) + "\n"
    assert child_program(parent_text, answer((search, replace)), "f") == "\n".join(child) + "\n"
    # The whole-program block is the degenerate diff and must round-trip too.
    assert child_program(parent_text, answer((parent_text, "\n".join(child) + "\n")), "f") == "\n".join(child) + "\n"


# Few distinct lines, so programs repeat lines and hunks need context to be unique.
code_lines = st.lists(st.sampled_from(["x = 1", "y = 2", "return x", "", "    pass", "def f():", "# note", "\tz = x + y  "]),
                      min_size=1, max_size=14)


@settings(max_examples=300, deadline=None)
@given(parent_lines=code_lines, child_lines=code_lines)
def test_property_apply_of_make_diff_gives_child(parent_lines, child_lines):
    """apply(parent, diff(parent, child)) == child over random programs with repeated lines."""
    from rollout.edits import make_diff

    parent = "".join(line + "\n" for line in parent_lines)
    child = "".join(line + "\n" for line in child_lines)
    if not parent.strip() and parent != child:  # nothing to anchor a SEARCH on: refused (send a full program)
        with pytest.raises(ValueError, match="nothing to SEARCH"):
            make_diff(parent, child)
        return
    blocks = parse_edits(make_diff(parent, child))
    assert apply_edits(parent, blocks) == child
    if parent == child:
        assert blocks == []


def test_make_diff_keeps_blocks_small_and_refuses_what_it_cannot_express():
    from rollout.edits import make_diff

    parent = "".join(f"line {i}\n" for i in range(40))
    child = parent.replace("line 3\n", "line three\n").replace("line 30\n", "")
    diff = make_diff(parent, child)
    assert diff.count("<<<<<<< SEARCH") == 2 and len(diff) < 200  # two hunks, no whole-program copies
    with pytest.raises(ValueError, match="must end in a newline"):
        make_diff("a = 1", "a = 2\n")
    with pytest.raises(ValueError, match="empty parent"):
        make_diff("", "a = 2\n")
