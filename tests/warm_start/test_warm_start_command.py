"""The warm start is resolved before the run is built (train/commands/warm_start.py, called by
train/helix.py on every rank), and built on its own by `helix warm-start` or `python -m train.warm_start`."""

import json
import runpy
import sys
from pathlib import Path

import pytest

import train.warm_start.build as build
from train.commands.warm_start import resolve_policy
from train.config.config import load_config

QUICK = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")


@pytest.fixture
def built(monkeypatch, tmp_path):
    """build.ensure_warm_start and policy_source recorded, not run: what each was given."""
    seen = []
    out = tmp_path / "tiny-random-warm-abc"
    out.mkdir()
    (out / "warm_start.json").write_text(json.dumps({"key": out.name, "examples": 6, "losses": [1.0, 0.5]}))

    def ensure(inputs, rebuild=False, progress=True):
        seen.append(("ensure", inputs, rebuild))
        return out

    monkeypatch.setattr(build, "ensure_warm_start", ensure)
    return seen, out


def test_the_run_gets_the_warm_started_path_only_when_it_loads_weights(built, capsys):
    seen, out = built
    cfg = load_config(QUICK, ["model.policy=tiny-random", "rollout.engine=hf", "warm_start.parents=3"])
    assert resolve_policy(cfg, is_main=True) == str(out)
    ((_, inputs, rebuild),) = seen
    assert (inputs.base, inputs.tasks, inputs.recipe.parents, rebuild) == ("tiny-random", ("circle_packing_26",), 3, False)
    off = load_config(QUICK, ["model.policy=tiny-random", "rollout.engine=hf", "warm_start.enabled=false"])
    assert resolve_policy(off, is_main=True) == "tiny-random" and len(seen) == 1
    frozen = load_config(QUICK, ["model.policy=tiny-random", "rollout.engine=openai", "trainer.enabled=false"])
    capsys.readouterr()
    assert resolve_policy(frozen, is_main=False) == "tiny-random" and capsys.readouterr().out == ""
    assert resolve_policy(frozen, is_main=True) == "tiny-random" and len(seen) == 1  # the server holds the weights
    assert capsys.readouterr().out.startswith("[helix] warm_start skipped: rollout.engine=openai")


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
