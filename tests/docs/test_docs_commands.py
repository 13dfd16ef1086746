"""The docs' commands still work when pasted (issue 32, item 4).

Every fenced shell block (```bash, ```sh, ```console) of README.md, BENCHMARKS.md and docs/*.md is read
as the shell would read it, and each script, config and file path it names must exist, each
`python -m` module must be a file here (or an installed package), and each `--config` must name a
file. Every markdown link to a local file must resolve, and so must its #anchor, as GitHub writes
heading anchors. Every repository path the prose or a diagram names (`train/learner/grpo.py`,
tasks/families/symreg/data.py) must exist, and so must each module a layout table row names under its
folder. A file renamed in the code and not in the docs fails here, naming the page and line."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHELL_LANGS = {"bash", "sh", "console", "shell"}
# Relative paths that name what a command writes, never what the repository holds.
OUTPUT_ROOTS = {"runs", ".venv", "OUT", "my-model"}
# What a page tells the reader to create ("Make `tasks/my_task/`"): named, never shipped.
READER_MADE = {"my_task", "my-model"}
# An inline code span that starts like this is a command to paste, and is checked as one.
INLINE_COMMAND = re.compile(r"^(\.venv/bin/|bash scripts/|python3? |torchrun )")
CHECKED_SUFFIXES = {".py", ".sh", ".yaml", ".yml", ".md", ".toml", ".cfg", ".txt", ".npz", ".png"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1)[^\n]|\n(?![ \t]*\n))+?\1")  # a code span ends at its paragraph


def doc_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]


def split_fences(text: str):
    """Yield (lang, first_line_no, lines) per fenced block (lang '' where the fence names none), then
    (None, 1, [prose]): the page with every fenced line blanked, so that a line number is still the
    page's and no link or heading is read inside a code block."""
    lines = text.splitlines()
    prose = list(lines)
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m["fence"], (m["info"].strip().split() or [""])[0].lower()
        body, start = [], i + 2
        prose[i] = ""
        i += 1
        while i < len(lines):
            close = FENCE.match(lines[i])
            prose[i] = ""
            if close and close["fence"][0] == fence[0] and len(close["fence"]) >= len(fence) and not close["info"].strip():
                break
            body.append(lines[i])
            i += 1
        i += 1  # past the closing fence (or the end of an unclosed block)
        yield lang, start, body
    yield None, 1, ["\n".join(prose)]


def shell_commands(lang: str, start: int, body: list[str]):
    """(line_no, command) for each command of a shell block; a trailing backslash joins lines, and a
    console block's commands are its `$ ` lines (the rest is output)."""
    command, first = "", start
    for offset, line in enumerate(body):
        text = line.strip()
        if lang == "console":
            if not text.startswith("$ "):
                continue
            text = text[2:]
        if not command:
            first = start + offset
        if text.endswith("\\"):
            command += text[:-1] + " "
            continue
        command += text
        if command.strip():
            yield first, command
        command = ""
    if command.strip():
        yield first, command


def expand_braces(token: str) -> list[str]:
    m = re.search(r"\{([^{}]*,[^{}]*)\}", token)
    if not m:
        return [token]
    return [x for part in m[1].split(",") for x in expand_braces(token[:m.start()] + part + token[m.end():])]


def names_a_repo_file(token: str) -> bool:
    """Whether a command token is a path into this repository (not an output, URL, option or override)."""
    if not token or token[0] in "/~$-<" or "://" in token or "=" in token or "*" in token:
        return False
    first = token.split("/", 1)[0]
    if first in OUTPUT_ROOTS or first.startswith("runs") or READER_MADE & set(re.split(r"[/.]", token)):
        return False
    if "/" in token and (ROOT / first).exists():
        return True
    return Path(token).suffix in CHECKED_SUFFIXES


def module_problem(name: str) -> str | None:
    top = name.split(".", 1)[0]
    if (ROOT / top).is_dir() or (ROOT / f"{top}.py").is_file():
        base = ROOT / name.replace(".", "/")
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file() or (base / "__main__.py").is_file():
            return None
        return f"`python -m {name}`: no {name.replace('.', '/')}.py in the repository"
    if importlib.util.find_spec(top) is None:
        return f"`python -m {name}`: no module {top!r} installed"
    return None


def command_problems(command: str) -> tuple[list[str], int]:
    """What is wrong with one shell command, and how many names it checked."""
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError as e:
        return [f"cannot be parsed as the shell would ({e}): {command!r}"], 0
    problems, checked = [], 0
    venv_bin = Path(sys.executable).parent
    for k, token in enumerate(tokens):
        prev = tokens[k - 1] if k else ""
        if prev == "-m" and Path(tokens[k - 2] if k > 1 else "").name.startswith("python"):
            checked += 1
            if problem := module_problem(token):
                problems.append(problem)
            continue
        if prev == "--config" or token.startswith("--config="):
            path = token.split("=", 1)[1] if token.startswith("--config=") else token
            if READER_MADE & set(re.split(r"[/.]", path)):
                continue
            checked += 1
            if not (ROOT / path).is_file():
                problems.append(f"--config {path}: no such file")
            continue
        if token.startswith(".venv/bin/"):
            # The venv's own tools: check them in the venv running the tests, where there is one.
            if sys.prefix != sys.base_prefix:
                checked += 1
                if not (venv_bin / token.removeprefix(".venv/bin/")).exists():
                    problems.append(f"{token}: not in the virtual environment ({venv_bin})")
            continue
        for path in expand_braces(token.rstrip(",;")):
            if names_a_repo_file(path):
                checked += 1
                if not (ROOT / path).exists():
                    problems.append(f"{path}: no such file or directory")
    return problems, checked


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to hyphens,
    and -1, -2, ... on repeats."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for lang, _, lines in split_fences(text):
        if lang is not None:
            continue
        for line in lines[0].splitlines():
            m = HEADING.match(line)
            if not m:
                continue
            title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m[2])
            slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def link_problems(page: Path, text: str, prose: str) -> tuple[list[str], int]:
    """Every local link and image of the prose (which may wrap over lines) must name a file that
    exists, and an #anchor into a markdown page must be one of its headings'."""
    problems, checked = [], 0
    # Code spans are blanked (newlines kept), so a link written as code is not read as one.
    prose = INLINE_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), prose)
    for m in LINK.finditer(prose):
        target = m[1]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        checked += 1
        where = f"{page.relative_to(ROOT)}:{prose.count(chr(10), 0, m.start()) + 1}: link {target}"
        if path and not dest.exists():
            problems.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in github_anchors(dest.read_text() if path else text):
            problems.append(f"{where}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
    return problems, checked


def inline_command_problems(page: Path, prose: str) -> tuple[list[str], int]:
    """The commands written inline (`.venv/bin/python scripts/x.py ...`) are checked as the fenced ones."""
    problems, checked = [], 0
    for m in INLINE_CODE.finditer(prose):
        command = " ".join(m[0].strip("`").split())
        if INLINE_COMMAND.match(command):
            found, n = command_problems(command)
            line_no = prose.count("\n", 0, m.start()) + 1
            problems += [f"{page.relative_to(ROOT)}:{line_no}: {x}" for x in found]
            checked += n
    return problems, checked


# A repository path written in prose or in a code span (`train/learner/grpo.py`, tasks/families/symreg/data.py):
# it starts at one of the project's top-level folders and is not the tail of a longer path or a URL.
TOP_FOLDERS = ("train", "rollout", "population", "rewards", "tasks", "scripts", "configs", "tests", "docs")
PROSE_PATH = re.compile(r"(?<![\w./~$-])((?:%s)/[\w./-]*)" % "|".join(TOP_FOLDERS))


def prose_path_problems(page: Path, prose: str) -> tuple[list[str], int]:
    """Each file or folder the prose names must exist, so that a module moved in the code and not in
    the docs is caught wherever a page mentions it, not only in its commands."""
    problems, checked = [], 0
    prose = re.sub(r"\]\([^)]*\)", lambda m: re.sub(r"[^\n]", " ", m[0]), prose)  # link targets: checked as links
    for m in PROSE_PATH.finditer(prose):
        path = m[1].rstrip(".")
        follows = prose[m.end():m.end() + 1]
        parts = set(re.split(r"[/.]", path))
        if follows and follows in "<{*[" or READER_MADE & parts or any(re.fullmatch(r"[A-Z]", x) for x in parts):
            continue  # a pattern (`tasks/<task>/`, `paper_{14b,32b}`, `test_x*.py`, `configs/T.yaml`) or the reader's own
        checked += 1
        if not (ROOT / path).exists():
            line_no = prose.count("\n", 0, m.start()) + 1
            problems.append(f"{page.relative_to(ROOT)}:{line_no}: {path}: no such file or directory")
    return problems, checked


LAYOUT_ROW = re.compile(r"^\|\s*((?:`[\w]+/`,?\s*)+)\|(.*)\|\s*$")


def layout_table_problems(page: Path, text: str) -> tuple[list[str], int]:
    """A layout table row (| `train/` | `helix.py` (...), `runs/`: `report.py` ... |) names its modules
    bare: each `name.py` must be somewhere under the row's folders, so a module renamed or removed
    and not in the table is caught."""
    problems, checked = [], 0
    for line_no, line in enumerate(text.splitlines(), 1):
        m = LAYOUT_ROW.match(line)
        if not m:
            continue
        folders = [ROOT / f for f in re.findall(r"`(\w+)/`", m[1])]
        for name in re.findall(r"`([\w]+\.(?:py|sh|yaml))`", m[2]):
            checked += 1
            if not any(next(f.rglob(name), None) for f in folders if f.is_dir()):
                where = " or ".join(f"{f.name}/" for f in folders)
                problems.append(f"{page.relative_to(ROOT)}:{line_no}: {name}: no such file under {where}")
    return problems, checked


def page_problems(page: Path, text: str | None = None) -> tuple[list[str], int]:
    """Every problem of one markdown page, each naming its line, and the number of names checked."""
    text = page.read_text() if text is None else text
    problems, checked = [], 0
    for lang, start, lines in split_fences(text):
        if lang is None:
            found, n = link_problems(page, text, lines[0])
            inline, m = inline_command_problems(page, lines[0])
            named, k = prose_path_problems(page, lines[0])
            found, n = found + inline + [x for x in named if x not in inline], n + m + k
        elif lang in SHELL_LANGS:
            found, n = [], 0
            for line_no, command in shell_commands(lang, start, lines):
                p, c = command_problems(command)
                found += [f"{page.relative_to(ROOT)}:{line_no}: {x}" for x in p]
                n += c
        else:  # a diagram, a template, output: the files it names must exist all the same
            found, n = prose_path_problems(page, "\n" * (start - 1) + "\n".join(lines))
        problems += found
        checked += n
    found, n = layout_table_problems(page, text)
    return problems + found, checked + n


@pytest.mark.parametrize("page", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_and_link_of_the_docs_names_what_exists(page):
    problems, _ = page_problems(page)
    assert not problems, "\n".join(problems)


def test_the_pages_commands_and_links_are_read_at_all():
    """A reader that found nothing would pass the test above: the docs name hundreds of files."""
    counts = {str(page.relative_to(ROOT)): page_problems(page)[1] for page in doc_files()}
    assert counts["README.md"] >= 30 and counts["BENCHMARKS.md"] >= 60, counts
    assert sum(counts.values()) >= 300, counts


def test_the_readme_opens_with_the_two_commands():
    first_block = next(body for lang, _, body in split_fences((ROOT / "README.md").read_text()) if lang is not None)
    assert [line.split("#")[0].strip() for line in first_block] == ["bash scripts/quickstart.sh", "bash scripts/test.sh"]


SYNTHETIC = """# A page

## Running it

```bash
bash scripts/quickstart.sh trainer.epochs=2          # exists
bash scripts/quickstrat.sh                           # a typo
.venv/bin/python train/helix.py --config configs/quickstart.yaml rollout.engine=hf
.venv/bin/python train/helix.py --config configs/no_such_task.yaml
.venv/bin/python -m train.warm_start --config configs/quickstart.yaml
.venv/bin/python -m train.warm_stort
.venv/bin/python scripts/plot_ablation.py runs/x --out docs/images/{bench_quality_circle_packing_26,no_such_plot}.png
.venv/bin/python scripts/report.py runs/latest --out /tmp/report.html   # outputs are not checked
echo "unbalanced
```

```console
$ .venv/bin/python tasks/no_such_data.py
configs/this_is_output_not_a_command.yaml
```

```
a diagram: scripts/named_in_a_diagram.py -> train/helix.py
```

See [the sandbox](docs/sandbox.md), [a heading](#running-it), [the README](README.md#tests),
[a lost page](docs/threats_redteam1.md), [a lost heading](README.md#no-such-heading), [not
here](#no-such-heading-here) and, in code, `[inline](docs/nowhere.md)`.
Inline, `.venv/bin/python scripts/report.py runs/latest --out runs/r.html` works,
`.venv/bin/python train/helix.py --config configs/my_task.yaml` will once you make it, and
`bash scripts/tset.sh -k config` has a typo. Prose names files too: `train/helix.py` exists,
`train/no_such_room/epoch_loop.py::HelixRun` and tasks/families/nowhere/verify.py do not, while
`tasks/<task>/verifier.py`, `configs/T.yaml`, `tasks/my_task/` and /elsewhere/train/x.py are no paths here.

| folder | job |
|---|---|
| `train/` | `helix.py` (the entry point), `epoch_lop.py` (a typo), `runs/`: `run_data.py` |
| `scripts/`, `tests/` | `report.py`, `test_docs_commands.py`, `bench_quality.py`, `bench_nothing.py` |
"""


def test_a_wrong_path_in_a_synthetic_page_is_caught_and_named():
    problems, checked = page_problems(ROOT / "synthetic.md", SYNTHETIC)
    assert sorted(problems) == sorted([
        "synthetic.md:7: scripts/quickstrat.sh: no such file or directory",
        "synthetic.md:9: --config configs/no_such_task.yaml: no such file",
        "synthetic.md:11: `python -m train.warm_stort`: no train/warm_stort.py in the repository",
        "synthetic.md:12: docs/images/no_such_plot.png: no such file or directory",
        "synthetic.md:14: cannot be parsed as the shell would (No closing quotation): 'echo \"unbalanced'",
        "synthetic.md:18: tasks/no_such_data.py: no such file or directory",
        "synthetic.md:23: scripts/named_in_a_diagram.py: no such file or directory",
        "synthetic.md:27: link docs/threats_redteam1.md: no such file",
        "synthetic.md:27: link README.md#no-such-heading: no heading with anchor #no-such-heading in README.md",
        "synthetic.md:27: link #no-such-heading-here: no heading with anchor #no-such-heading-here in synthetic.md",
        "synthetic.md:31: scripts/tset.sh: no such file or directory",
        "synthetic.md:32: train/no_such_room/epoch_loop.py: no such file or directory",
        "synthetic.md:32: tasks/families/nowhere/verify.py: no such file or directory",
        "synthetic.md:37: epoch_lop.py: no such file under train/",
        "synthetic.md:38: bench_nothing.py: no such file under scripts/ or tests/",
    ]), "\n".join(problems)
    # 14 names in the shell blocks, 2 in the diagram, 6 links, 2 inline, 5 in prose, 7 in the table,
    # and the venv's tools where the tests run in one
    assert checked >= 36, checked


def test_the_anchors_follow_githubs_rules():
    text = "# HELIX\n## Evaluation on a Ray cluster (`task.eval_backend: ray`)\n## Tests\n## Tests\n```bash\n# not a heading\n```\n"
    assert github_anchors(text) == {"helix", "evaluation-on-a-ray-cluster-taskeval_backend-ray", "tests", "tests-1"}


BENCH_SCRIPT = re.compile(r"scripts/bench/([\w-]+\.py)")


def benchmark_sections(text: str) -> dict[str, str]:
    """BENCHMARKS.md's `## ` sections (fenced blocks included), by heading: the text up to the next `## `."""
    sections, heading = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
            sections[heading] = ""
        elif heading is not None:
            sections[heading] += line + "\n"
    return sections


def benchmark_problems(text: str) -> list[str]:
    """BENCHMARKS.md is a reference, not a log (issue 38 item 5): at most 1,000 lines; every `## ` entry
    names the `scripts/bench/` script that produced it; and every `--flag` a command passes to such a script
    is one that script defines, so a renamed flag fails here."""
    problems = []
    if len(text.splitlines()) > 1000:
        problems.append(f"{len(text.splitlines())} lines: over 1,000 (projections go to docs/scale.md, history to git)")
    for heading, body in benchmark_sections(text).items():
        names = BENCH_SCRIPT.findall(body)
        if not names:
            problems.append(f"'## {heading}' names no scripts/bench/ command")
        problems += [f"'## {heading}': scripts/bench/{n} does not exist" for n in names
                     if not (ROOT / "scripts" / "bench" / n).is_file()]
    for lang, start, body in split_fences(text):
        if lang not in SHELL_LANGS:
            continue
        for line_no, command in shell_commands(lang, start, body):
            tokens = shlex.split(command, comments=True)
            script = next((t for t in tokens if BENCH_SCRIPT.fullmatch(t)), None)
            if script is None or not (ROOT / script).is_file():
                continue
            source = (ROOT / script).read_text()
            for flag in (t.split("=", 1)[0] for t in tokens[tokens.index(script) + 1:] if t.startswith("--")):
                if f'"{flag}"' not in source and f"'{flag}'" not in source:
                    problems.append(f"BENCHMARKS.md:{line_no}: {script} defines no {flag}")
    return problems


def test_benchmarks_is_a_short_reference_with_a_bench_command_per_entry():
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert len(benchmark_sections(text)) >= 10
    problems = benchmark_problems(text)
    assert not problems, "\n".join(problems)


def test_a_benchmarks_page_that_drifted_is_caught():
    page = ("# Benchmarks\n\n## Sandbox\n\n```bash\n.venv/bin/python scripts/bench/bench_sandbox.py --repeats 3 --no-such-flag\n"
            "```\n\n## Quality\n\n`scripts/ablate.py` only.\n\n## Gone\n\n`scripts/bench/bench_gone.py`\n" + "x\n" * 1000)
    problems = benchmark_problems(page)
    assert problems[0].startswith("1015 lines: over 1,000")
    assert sorted(problems[1:]) == sorted([
        "'## Quality' names no scripts/bench/ command",
        "'## Gone': scripts/bench/bench_gone.py does not exist",
        "BENCHMARKS.md:6: scripts/bench/bench_sandbox.py defines no --no-such-flag",
    ]), problems
