"""`helix warm-start` and `python -m train.warm_start`: the warm start built (or found) on its own, outside a run
(a run resolves its own in its start: tests/api/test_start.py)."""

import json
import runpy
import sys
from pathlib import Path

import pytest

import train.warm_start.build as build

QUICK = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")


@pytest.fixture
def built(monkeypatch, tmp_path):
    """build.ensure_warm_start and policy_source recorded, not run: what each was given."""
    seen = []
    out = tmp_path / "tiny-random-warm-abc"
    out.mkdir()
    (out / "warm_start.json").write_text(json.dumps({"key": out.name, "examples": 6, "losses": [1.0, 0.5]}))

    def ensure(inputs, tools_for, rebuild=False, progress=True):
        seen.append(("ensure", inputs, rebuild))
        return out

    monkeypatch.setattr(build, "ensure_warm_start", ensure)
    return seen, out


@pytest.mark.parametrize("how", ["helix", "module"])
def test_helix_warm_start_and_the_module_are_one_command(built, capsys, monkeypatch, how):
    seen, out = built
    args = ["--config", QUICK, "--rebuild", "model.policy=tiny-random", "warm_start.enabled=false"]
    if how == "helix":
        from train.helix import main

        assert main(["warm-start", *args]) == 0
    else:
        monkeypatch.setattr(sys, "argv", ["python -m train.warm_start", *args])
        with pytest.raises(SystemExit) as stop:
            runpy.run_module("train.warm_start", run_name="__main__")
        assert stop.value.code == 0
    printed = capsys.readouterr().out.splitlines()
    shown = json.loads("\n".join(printed[:-1]))
    assert printed[-1] == str(out) and shown == {"key": out.name, "examples": 6}  # the summary less its losses
    ((_, inputs, rebuild),) = seen
    assert inputs.recipe.enabled and inputs.base == "tiny-random" and rebuild  # enabled whatever the config says
