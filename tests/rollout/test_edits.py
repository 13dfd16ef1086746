import pytest

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


def test_search_matches_whole_lines_only():
    """"x = 1" is the tail of "max = 1"; a SEARCH must start at a line start, or this edit would be
    called ambiguous (or land inside the wrong line)."""
    code = "max = 1\nx = 1\n"
    assert apply_edits(code, parse_edits(answer(("x = 1\n", "x = 2\n")))) == "max = 1\nx = 2\n"


def test_chevron_counts_may_differ_within_one_block():
    text = "<answer>\n<<<<< SEARCH\n    y = 2\n=========\n    y = 5\n>>>>>>>> REPLACE\n</answer>"
    assert child_program(PARENT, text, "run_packing") == PARENT.replace("y = 2", "y = 5")


def test_a_blank_first_search_line_is_not_what_the_feedback_quotes():
    with pytest.raises(EditError, match=r"block 1: the SEARCH text was not found.*first line: 'w = 0'"):
        child_program(PARENT, answer(("\n    w = 0\n", "")), "run_packing")


MALFORMED = {
    "missing SEARCH text": answer(("    x = 1\n", "    x = 2\n"), ("    z = 3\n", "    z = 4\n")),
    # Block 1 adds a second "x = 1" line, so block 2's SEARCH matches twice in the program as it then stands.
    "ambiguous SEARCH": answer(("    return x + y\n", "    x = 1\n    return x + y\n"), ("    x = 1\n", "")),
    "no block at all": "<think>I would try a bigger radius.</think>\n<answer>\nMake the circles bigger.\n</answer>",
    "unterminated block": "<answer>\n<<<<<<< SEARCH\n    x = 1\n=======\n    x = 2\n</answer>",
    "empty answer": "<think>out of ideas</think>\n<answer>\n</answer>",
}
EXPECTED = {
    "missing SEARCH text": "SEARCH/REPLACE block 2: the SEARCH text was not found in the current program "
                           "(first line: 'z = 3'). SEARCH must copy existing lines exactly.",
    "ambiguous SEARCH": "SEARCH/REPLACE block 2: the SEARCH text occurs 2 times in the current program "
                        "(first line: 'x = 1'); include more surrounding lines so it is unique.",
    "no block at all": "No SEARCH/REPLACE block found in <answer>. Use:\n<<<<<<< SEARCH\n(exact lines)\n=======\n"
                       "(new lines)\n>>>>>>> REPLACE",
    "unterminated block": "incomplete SEARCH/REPLACE block: the answer has 1 <<<<<<< SEARCH line(s) but only 0 "
                          "complete block(s). Every block needs a ======= line between the lines to find and the "
                          "new lines, and must end with a >>>>>>> REPLACE line.",
    "empty answer": "The answer is empty: put SEARCH/REPLACE blocks (or the full program in a ```python fence) "
                    "inside <answer>...</answer>.",
}


def test_feedback_for_malformed_answers():
    """These messages go back to the policy as feedback; print them (pytest -s) to read them."""
    for case, text in MALFORMED.items():
        with pytest.raises(EditError) as err:
            child_program(PARENT, text, "run_packing")
        print(f"--- {case}:\n{err.value}")
        assert str(err.value) == EXPECTED[case], case


def test_make_diff_refuses_marker_lines():
    from rollout.edits import make_diff

    with pytest.raises(ValueError, match=r"the child has the line '=======', which the block format reads as a marker"):
        make_diff("a = 1\n", "a = 1\n'''\n=======\n'''\n")


# The search starter's nested constraint function, as the 135M policy copied it in a 5-minute discovery run
# (BENCHMARKS.md "Discovery"): the right line at the enclosing function's depth, 4 spaces short of the program's 8.
SEARCH_STARTER_LINES = (
    "def polish(centers, radii):\n"
    "    def gaps(z):  # all >= 0 in a valid packing\n"
    "        x, y, r = z.reshape(3, N)\n"
    "        pairs = (x[P] - x[Q]) ** 2 + (y[P] - y[Q]) ** 2 - (r[P] + r[Q]) ** 2\n"
    "        return np.concatenate([x - r, 1 - x - r, y - r, 1 - y - r, pairs])\n"
    "\n"
    "    return gaps\n"
)


def test_a_block_copied_at_the_wrong_depth_applies_at_the_programs():
    text = answer(("    return np.concatenate([x - r, 1 - x - r, y - r, 1 - y - r, pairs])\n",
                   "    return np.concatenate([x - r, 1 - x - r, y - r, 1 - y - r, 2 * pairs])\n"))
    out = child_program(SEARCH_STARTER_LINES, text, "polish")
    assert out == SEARCH_STARTER_LINES.replace(
        "        return np.concatenate([x - r, 1 - x - r, y - r, 1 - y - r, pairs])\n",
        "        return np.concatenate([x - r, 1 - x - r, y - r, 1 - y - r, 2 * pairs])\n")


def test_a_shifted_block_keeps_its_relative_indentation_and_blank_lines():
    search = ("def gaps(z):  # all >= 0 in a valid packing\n"
              "    x, y, r = z.reshape(3, N)\n")
    replace = ("def gaps(z):  # all >= 0 in a valid packing\n"
               "\n"
               "    x, y, r = z.reshape(3, N)\n"
               "    assert r.min() > -1\n")
    out = child_program(SEARCH_STARTER_LINES, answer((search, replace)), "polish")
    assert out == SEARCH_STARTER_LINES.replace(
        "    def gaps(z):  # all >= 0 in a valid packing\n        x, y, r = z.reshape(3, N)\n",
        "    def gaps(z):  # all >= 0 in a valid packing\n\n        x, y, r = z.reshape(3, N)\n"
        "        assert r.min() > -1\n")


def test_a_block_copied_too_deep_moves_out():
    code = "def f():\n    x = 1\n\n    return x\n"
    out = child_program(code, answer(("        x = 1\n\n        return x\n", "        x = 2\n        return x\n")), "f")
    assert out == "def f():\n    x = 2\n    return x\n"


def test_a_replace_line_shallower_than_the_shift_is_refused():
    code = "def f():\n    x = 1\n"
    with pytest.raises(EditError, match=r"block 1: the SEARCH text is indented 4 characters deeper than the program, "
                                        r"and the REPLACE line 'y = 2' is not"):
        child_program(code, answer(("        x = 1\n", "        x = 2\ny = 2\n")), "f")


def test_a_shift_that_changes_relative_indentation_is_not_a_match():
    """The block's structure must be the program's: only one prefix for every line."""
    with pytest.raises(EditError, match=r"block 1: the SEARCH text was not found.*first line: 'def gaps"):
        child_program(SEARCH_STARTER_LINES, answer(("def gaps(z):  # all >= 0 in a valid packing\n"
                                                    "x, y, r = z.reshape(3, N)\n", "pass\n")), "polish")


def test_a_line_at_two_depths_is_ambiguous_when_shifted():
    code = "x = 1\ndef f():\n    x = 1\n        x = 1\n"
    # exact and trailing-whitespace passes find nothing at 2 spaces; the shift finds all three lines
    with pytest.raises(EditError, match="block 1: the SEARCH text occurs 3 times"):
        apply_edits(code, parse_edits(answer(("  x = 1\n", "  x = 2\n"))))


def test_an_exact_match_wins_over_a_shifted_one():
    code = "def f():\n    x = 1\nx = 1\n"
    assert apply_edits(code, parse_edits(answer(("x = 1\n", "x = 2\n")))) == "def f():\n    x = 1\nx = 2\n"
