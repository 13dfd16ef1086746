"""A tiny in-process HELIX run (run_helix), and ScriptedEngine: every prompt answered by the same four known
completions, so outcomes are exact (run_scripted; tests/workers/scripted_helix.py in a process of its own)."""

import json
from pathlib import Path

from rollout.engines import ENGINES, Completion, HFEngine
from train.helix import main

ROOT = Path(__file__).resolve().parents[2]
QUICK = str(ROOT / "configs" / "quickstart.yaml")
TINY = ["model.policy=tiny-random", "warm_start.enabled=false", "rollout.engine=hf", "rollout.max_new_tokens=12",
        "rollout.group_size=2", "trainer.prompts_per_epoch=2",
        "trainer.epochs=2", "run.progress=false", "task.eval_workers=2", "population.size=4"]


def run_helix(tmp_path, *extra):
    rc = main(["--config", QUICK, *TINY, f"run.output_dir={tmp_path}", "run.name=t", *extra])
    assert rc == 0
    return tmp_path / "t"


def metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


class ScriptedEngine(HFEngine):
    """Answers every prompt with the same four known completions, so outcomes are exact. The edits apply to
    TASK's starter (a subclass names another task)."""

    TASK = "circle_packing_26"

    def __init__(self, model, tokenizer, batch_size=0, progress=False):
        super().__init__(model, tokenizer, batch_size, progress)
        from tasks import load_task

        first = next(line for line in load_task(self.TASK).initial_program.splitlines() if line.strip())
        block = "<answer>\n<<<<<<< SEARCH\n{}\n=======\n{}\n>>>>>>> REPLACE\n</answer>"
        self.texts = [
            block.format(first, first + "\nimport math"),  # a harmless edit: same reward as the parent
            block.format(first, "raise RuntimeError('boom')\n" + first),  # the program crashes
            "<think>I will not use the format</think>Just make the circles bigger.",  # prose, no edit
            block.format("this line is not in the program", "x = 1"),  # SEARCH not found
        ]

    def generate(self, prompts, params):
        out = []
        for _ in prompts:
            group = []
            for g in range(params.n):
                text = self.texts[g % len(self.texts)]
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
                group.append(Completion(ids, text, False))
            out.append(group)
        return out


def run_scripted(tmp_path, *extra):
    """``run_helix`` with every prompt answered by ScriptedEngine's four completions (G = 4)."""
    ENGINES["scripted"] = ScriptedEngine
    try:
        return run_helix(tmp_path, "rollout.engine=scripted", "rollout.group_size=4", *extra)
    finally:
        del ENGINES["scripted"]
