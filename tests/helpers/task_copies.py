"""A shipped task copied as `copy` into a private tasks/ folder, with its family's harness, so a test
can break its task.yaml or verifier without touching the repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import tasks.base


def copy_task(task, family: str, tmp_path: Path, monkeypatch) -> Path:
    shutil.copytree(task.folder, tmp_path / "copy", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "families" / family).mkdir(parents=True)
    shutil.copy(task.folder.parent / "families" / family / "harness.py", tmp_path / "families" / family)
    spec = tmp_path / "copy" / "task.yaml"
    spec.write_text(spec.read_text().replace(f"name: {task.name}", "name: copy"))
    monkeypatch.setattr(tasks.base, "TASKS_DIR", tmp_path)
    return tmp_path / "copy"


def load_error(folder: Path, edit) -> str:
    """The one-line error load_task gives for the copy at ``folder`` once ``edit`` rewrote its task.yaml."""
    import pytest

    from tasks import load_task

    spec = folder / "task.yaml"
    spec.write_text(edit(spec.read_text()))
    with pytest.raises(ValueError) as info:
        load_task(folder.name)
    return str(info.value)
