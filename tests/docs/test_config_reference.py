"""docs/configuration.md's key reference is generated from the config dataclasses
(train/commands/config_reference.py): it names every setting with its default, bound and source
comment, and this test fails when the page is stale."""

import dataclasses
from typing import Annotated, Literal, Optional

from train.commands import config_reference as ref
from train.config.config import HelixConfig
from train.config.schema import flatten


def test_the_reference_in_the_docs_is_fresh():
    text = ref.DOC.read_text(encoding="utf-8")
    assert ref.updated(text) == text, f"docs/configuration.md's config reference is stale: run `{ref.COMMAND}`"


def test_the_reference_names_every_setting_once():
    block = ref.render()
    rows = [line.split("|")[1].strip().strip("`") for line in block.splitlines() if line.startswith("| `")]
    settings = set(flatten(HelixConfig()))
    assert {r for r in rows if r in settings} == settings
    pointers = {r for r in rows if f"| `{r}` | section |" in block}  # rows that point at a nested section below
    assert pointers == {"rollout.vllm", "rollout.openai", "trainer.lora", "trainer.dynamic_sampling"}
    assert len(rows) == len(set(rows)) == len(settings) + len(pointers)
    for key in ("trainer.weight_decay", "trainer.grad_clip", "trainer.rollout_is_threshold", "rollout.vllm.kv_cache_gb"):
        assert f"| `{key}` |" in block, key


@dataclasses.dataclass
class _Section:
    """``demo``: a section made up for this test."""

    # the first line above
    # and the second
    size: Annotated[int, ">= 2 (a pair at least)"] = 4  # and beside it
    mode: Literal["a", "b"] = "a"
    limit: Annotated[Optional[float], "> 0"] = None  # None: the task's own | with a bar and a </tag>
    plain: bool = True


def test_a_fields_comments_bound_type_and_default_make_its_row():
    assert ref.field_comments(_Section) == {"size": "the first line above and the second and beside it", "mode": "",
                                           "limit": "None: the task's own | with a bar and a </tag>", "plain": ""}
    rows = ref.section_tables(_Section, "demo")
    assert rows[:3] == ["### `demo`", "", "`demo`: a section made up for this test."]
    assert "| `demo.size` | int | `4` | >= 2 (a pair at least) | the first line above and the second and beside it |" in rows
    assert '| `demo.mode` | one of `"a"`, `"b"` | `"a"` |  |  |' in rows
    assert "| `demo.limit` | float or null | `null` | > 0 | None: the task's own \\| with a bar and a &lt;/tag> |" in rows
    assert "| `demo.plain` | bool | `true` |  |  |" in rows


def test_the_check_fails_on_a_stale_page_and_the_rewrite_fixes_it(tmp_path, capsys):
    page = tmp_path / "configuration.md"
    page.write_text(f"# Configuration\n\n{ref.BEGIN}\n| `trainer.lr` | old |\n{ref.END}\n\nAfter.\n")
    assert ref.main(["--check", "--doc", str(page)]) == 1
    assert ref.COMMAND in capsys.readouterr().err
    assert ref.main(["--doc", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("# Configuration\n\n") and text.endswith(f"{ref.END}\n\nAfter.\n") and "| old |" not in text
    assert ref.main(["--check", "--doc", str(page)]) == 0
