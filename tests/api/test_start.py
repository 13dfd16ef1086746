"""The start routine (train.api.start) both doors take: the command line's early errors cost no torch, the warm
start is built by rank 0 with the run's own evaluator and prompt builder, and the run is handed those same two."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.helpers.scripted import QUICK, ROOT
from train.api import start
from train.config.config import load_config
from train.learner.distributed import DistInfo


def test_the_command_lines_early_errors_import_no_torch(tmp_path):
    """A config error and a folder that is no run answer with their one line and exit code 2 before torch is
    imported (torch is imported only once a run starts)."""
    code = (f"import sys; from train.helix import main; "
            f"codes = [main(['--config', {QUICK!r}, 'trainer.epoch=2']), main(['--resume', {str(tmp_path)!r}])]; "
            "print(codes, 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.stdout.strip() == "[2, 2] False", proc.stderr
    assert "helix: config error:" in proc.stderr and "Did you mean 'epochs'?" in proc.stderr
    assert "not a run directory" in proc.stderr


class _Tools:
    """A run's evaluator and prompt builder, as far as the start routine touches them."""

    def __init__(self):
        self.builder = SimpleNamespace(tokenizer="the run's tokenizer")
        self.closed = False

    def close(self):
        self.closed = True


@pytest.fixture
def lent(monkeypatch, tmp_path):
    """build.policy_source recorded, not run: the inputs, and the tools it was lent for each task it asks."""
    from train.warm_start import build

    seen = []

    def policy_source(inputs, tools_for):
        if not inputs.recipe.enabled:
            return inputs.base
        for name in inputs.tasks:
            with tools_for(name) as tools:
                seen.append((name, tools))
        return str(tmp_path / "warm")

    monkeypatch.setattr(build, "policy_source", policy_source)
    monkeypatch.setattr("train.loop.task_tools.task_tools", lambda cfg, task, tokenizer, **_: _Tools())
    return seen


def test_rank_0_builds_the_warm_start_with_the_runs_tools_and_only_when_the_run_loads_weights(lent, tmp_path, capsys):
    tools = _Tools()
    cfg = load_config(QUICK, ["model.policy=tiny-random", "rollout.engine=hf", "warm_start.tasks=circle_packing_26,mstd_30"])
    assert start.resolve_policy(cfg, DistInfo(), tools) == str(tmp_path / "warm")
    (own, mine), (other, made) = lent
    assert (own, other) == ("circle_packing_26", "mstd_30")
    assert mine is tools and not tools.closed  # the run's own, lent and left open for the loop
    assert made is not tools and made.closed  # another task's: made with the run's settings, closed after
    off = load_config(QUICK, ["model.policy=tiny-random", "rollout.engine=hf", "warm_start.enabled=false"])
    assert start.resolve_policy(off, DistInfo(), tools) == "tiny-random" and len(lent) == 2
    frozen = load_config(QUICK, ["model.policy=tiny-random", "rollout.engine=openai", "trainer.enabled=false"])
    capsys.readouterr()
    assert start.resolve_policy(frozen, DistInfo(rank=1, world=2), None) == "tiny-random"  # no collective: no weights
    assert capsys.readouterr().out == ""
    assert start.resolve_policy(frozen, DistInfo(), tools) == "tiny-random" and len(lent) == 2  # the server's weights
    assert capsys.readouterr().out.startswith("[helix] warm_start skipped: rollout.engine=openai")


def test_the_run_is_handed_the_tools_the_warm_start_used_and_they_close_if_it_cannot_be_built(lent, monkeypatch, tmp_path):
    from train.loop import epoch_loop

    made, runs = [], []
    monkeypatch.setattr(start, "_run_tools", lambda cfg: made.append(_Tools()) or made[-1])

    class Run:
        preflight = staticmethod(lambda cfg, info: None)

        def __init__(self, cfg, stem, info, policy, resume=None, tools=None):
            if cfg.run.seed == 13:
                raise RuntimeError("the model did not load")
            runs.append((stem, policy, tools))

        def train(self):
            return tmp_path / "run"

    monkeypatch.setattr(epoch_loop, "HelixRun", Run)
    begun = start.load(QUICK, ["model.policy=tiny-random", "rollout.engine=hf", f"run.output_dir={tmp_path}"])
    assert start._run(begun, DistInfo()) == tmp_path / "run"
    ((stem, policy, tools),) = runs
    assert (stem, policy) == ("quickstart", str(tmp_path / "warm"))
    assert tools is made[0] and lent == [("circle_packing_26", made[0])] and not tools.closed
    assert begun.cfg.run.name  # named before the warm start: the tools' Ray runner writes to the run's library.log
    failing = start.load(QUICK, ["model.policy=tiny-random", "rollout.engine=hf", "run.seed=13"])
    with pytest.raises(RuntimeError, match="did not load"):
        start._run(failing, DistInfo())
    assert made[1].closed  # no run took them over: the sandbox pool is not left behind


def test_a_resume_loads_the_runs_own_config_and_newest_checkpoint(tmp_path):
    from train.config.config import dump_config

    run = tmp_path / "runs" / "r"
    for epoch in (1, 2):
        (run / "checkpoints" / f"epoch-00000{epoch}").mkdir(parents=True)
        (run / "checkpoints" / f"epoch-00000{epoch}" / "state.json").write_text(json.dumps({"epoch": epoch}))
    (run / "checkpoints" / ".tmp-epoch-000003").mkdir()  # half written: never a checkpoint
    dump_config(load_config(QUICK, ["trainer.epochs=3", "run.name=r"]), run / "config.yaml")
    begun = start.load(resume=run, overrides=["trainer.epochs=5"])
    assert (begun.stem, begun.checkpoint.name) == ("r", "epoch-000002")
    assert (begun.cfg.trainer.epochs, begun.cfg.run.output_dir, begun.cfg.run.name) == (5, str(tmp_path / "runs"), "r")
    assert start.load(resume=run / "checkpoints" / "epoch-000001").checkpoint.name == "epoch-000001"
    assert str(run / "config.yaml") in begun.source and "trainer.epochs=5" in begun.source
