"""README's "Adding your own task" recipe, performed as written on a small task: the commands are read
from the README block after the ``new-task-recipe`` marker and run in order, with only the model made
tiny (tiny-random, a small warm start, one short epoch; the paper-scale line, for a GPU node, is
only loaded as a config). Step 2 (fill in) writes a problem of the test's own. The check command is
then run on each broken folder of issue 33 and must fail with one line and exit code 2."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.base import TASKS_DIR
from tests.helpers.env import child_env
from tests.helpers.small_task import VERIFIER
from train.config.config import load_config

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- new-task-recipe"
SMALL = ["model.policy=tiny-random", "warm_start.parents=2", "warm_start.answers_per_parent=2", "warm_start.epochs=1",
         "warm_start.dtype=float32", "task.eval_workers=2"]
RUN = ["rollout.engine=hf", "rollout.max_new_tokens=12", "rollout.group_size=2", "trainer.prompts_per_epoch=2",
       "trainer.epochs=1", "run.progress=false", "population.size=4", "run.wandb=disabled", "run.export=false"]

STARTER = '''import numpy as np


# EVOLVE-BLOCK-START
def solve():
    """A point in [0, 1] that makes x * (1 - x) large."""
    x = 0.3
    return [float(np.clip(x, 0.0, 1.0))]
# EVOLVE-BLOCK-END
'''
BROKEN = [  # (file, old, new, what the one line says)
    ("verifier.py", "def verify(returned):", "def verify(returned)", "syntax error"),
    ("task.yaml", "entry_function: solve", "#entry_function: solve", "missing key 'entry_function'"),
    ("task.yaml", "entry_function: solve", "entry_function: maximise", "does not define the entry function maximise()"),
    ("verifier.py", "    return Verdict(", "    len(5)\n    return Verdict(", "verify() on the starter's result raised TypeError"),
    ("initial_program.py", "    return [float(", "    return [0.5, float(", "the starter fails its own verifier: expected [x]"),
    ("verifier.py", "return Verdict(x * (1 - x),", "return Verdict(0.0,", "the starter scores 0"),
]


def recipe() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text[text.index(MARKER):]
    block = block[block.index("```bash\n") + 8:]
    return [line for line in block[: block.index("```")].splitlines() if line.strip()]


def fill_in(folder: Path) -> None:
    (folder / "description.md").write_text("Return [x] with x in [0, 1] maximising x * (1 - x).\n")
    (folder / "brief.md").write_text("Return [x], x in [0, 1], maximising x * (1 - x).\n")
    (folder / "initial_program.py").write_text(STARTER)
    (folder / "verifier.py").write_text(VERIFIER)
    spec = (folder / "task.yaml").read_text()
    spec = re.sub(r"best_known: .*", "best_known: 0.25", spec)
    spec = re.sub(r"best_known_source: .*", 'best_known_source: "the maximum of x (1 - x), at x = 1/2"', spec)
    (folder / "task.yaml").write_text(spec)


@pytest.mark.slow
def test_the_readme_recipe_runs_as_written(tmp_path):
    name = f"recipe_{os.getpid()}"
    folder, env = TASKS_DIR / name, child_env()
    lines = recipe()
    assert len(lines) == 6 and "new-task my_task" in lines[0] and lines[1].lstrip().startswith("#")
    done = []
    try:
        for line in lines:
            code = line.split("#", 1)[0].strip()
            if not code:  # step 2: fill in the files
                fill_in(folder)
                done.append("fill in")
                continue
            argv = shlex.split(code.replace("my_task", name))
            if argv[0].endswith("torchrun"):  # paper scale: a GPU node; here, the config must load
                config = argv[argv.index("--config") + 1]
                cfg = load_config(str(ROOT / config), [a for a in argv if "=" in a and not a.startswith("--")])
                assert cfg.task.name == name and not cfg.warm_start.enabled
                done.append("paper config")
                continue
            assert argv[0] == ".venv/bin/python", line
            argv[0] = sys.executable
            if "--config" in argv:  # the warm start and the CPU run: the tiny model and its own cache
                argv += SMALL + [f"model.cache_dir={tmp_path / 'cache'}"]
            if argv[1] == "train/helix.py" and "--config" in argv:
                argv += RUN + [f"run.output_dir={tmp_path / 'runs'}"]
            proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, (line, proc.stdout[-2000:], proc.stderr[-2000:])
            done.append(argv[2] if argv[1] == "train/helix.py" else argv[1:3])
        runs = [p for p in (tmp_path / "runs").iterdir() if p.name != "latest"]
        assert len(runs) == 1 and runs[0].name.startswith(f"{name}-lora-")
        assert (tmp_path / "runs" / "latest").resolve() == runs[0].resolve()
        assert '"epoch": 1' in (runs[0] / "metrics.jsonl").read_text()
        assert len(done) == 6
        check = [sys.executable, "train/helix.py", "check-task", name]
        for file, old, new, says in BROKEN:  # each mistake: one line, exit code 2
            original = (folder / file).read_text()
            assert old in original, (file, old)
            (folder / file).write_text(original.replace(old, new))
            proc = subprocess.run(check, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
            (folder / file).write_text(original)
            err = proc.stderr.strip().splitlines()
            assert proc.returncode == 2 and len(err) == 1 and says in err[0] and f"tasks/{name}/" in err[0], (says, err)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
