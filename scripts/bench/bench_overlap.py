"""Overlap benchmark: generate + evaluate time per epoch through the real loop, with evaluation
after generation (``rollout.batch_size=0``, the default) next to evaluation overlapped with it
(``rollout.batch_size=1``), in one run.

    .venv/bin/python scripts/bench/bench_overlap.py
    .venv/bin/python scripts/bench/bench_overlap.py --gen-s 2 --work-s 1 --prompts 4 --group 4

Generation is simulated: an engine that sleeps ``--gen-s`` per prompt and uses no CPU, standing
in for a GPU or a remote server (on this CPU box a real engine would fight the sandbox for the
same cores). Its answers are real SEARCH/REPLACE edits of the circle-packing starter whose
children busy the CPU for ``--work-s`` each in the sandbox, then score the starter's reward.
Everything else is the loop as users run it (EvoOnly, so no training step muddies the times).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from rollout.engines import ENGINES, Completion  # noqa: E402
from tasks import load_task  # noqa: E402
from train.helix import main as helix  # noqa: E402


class SleepingEngine:
    """Sleeps like a busy accelerator, then answers with the same scripted edit for every sample."""

    needs_sync = False
    gen_s = 1.0
    text = ""

    def __init__(self, tokenizer):
        self.ids = tokenizer(self.text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    def sync_weights(self, weights) -> None:
        pass

    def generate(self, prompts, params, on_batch=None):
        out = []
        for i, _ in enumerate(prompts):
            time.sleep(self.gen_s)
            group = [Completion(list(self.ids), self.text, False) for _ in range(params.n)]
            if on_batch is not None:
                on_batch(i, [group])
            out.append(group)
        return out


def busy_edit(work_s: float) -> str:
    """An edit that makes the program spend ``work_s`` of CPU when the sandbox imports it."""
    first = next(line for line in load_task("circle_packing_26").initial_program.splitlines() if line.strip())
    busy = (f"{first}\nimport time as _time\n_until = _time.process_time() + {work_s}\n"
            "while _time.process_time() < _until:\n    pass")
    return f"<answer>\n<<<<<<< SEARCH\n{first}\n=======\n{busy}\n>>>>>>> REPLACE\n</answer>"


def epoch_times(out: Path, batch_size: int, args) -> list[dict]:
    overrides = ["model.policy=tiny-random", "warm_start.enabled=false", "rollout.engine=sleeping", "trainer.enabled=false",
                 f"rollout.batch_size={batch_size}", f"trainer.prompts_per_epoch={args.prompts}",
                 f"rollout.group_size={args.group}", f"trainer.epochs={args.epochs}", "run.progress=false",
                 f"task.eval_workers={args.workers}", "population.size=4", "run.checkpoint_every=0",
                 "run.export=false", f"run.output_dir={out}", f"run.name=b{batch_size}"]
    if helix(["--config", str(ROOT / "configs" / "quickstart.yaml"), *overrides]) != 0:
        raise SystemExit(f"the run with rollout.batch_size={batch_size} failed")
    return [json.loads(line) for line in (out / f"b{batch_size}" / "metrics.jsonl").read_text().splitlines()]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gen-s", type=float, default=1.0, help="simulated generation seconds per prompt")
    parser.add_argument("--work-s", type=float, default=0.5, help="CPU seconds each child program spends")
    parser.add_argument("--prompts", type=int, default=4, help="B: prompts per epoch")
    parser.add_argument("--group", type=int, default=4, help="G: completions per prompt")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="sandbox pool size (task.eval_workers)")
    args = parser.parse_args(argv)
    SleepingEngine.gen_s, SleepingEngine.text = args.gen_s, busy_edit(args.work_s)
    ENGINES["sleeping"] = SleepingEngine
    rows = {}
    with tempfile.TemporaryDirectory(prefix="helix-bench-overlap-") as tmp:
        for batch_size in (0, 1):
            rows[batch_size] = epoch_times(Path(tmp), batch_size, args)
    for metrics in rows.values():  # every child ran and scored: the timings are of real evaluations
        assert all(m["valid_frac"] == 1.0 for m in metrics), "a child failed: the benchmark would time a failure path"

    def median(batch_size, key):
        return statistics.median(m[key] for m in rows[batch_size])

    cmd = " ".join(["scripts/bench/bench_overlap.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"Command: `.venv/bin/python {cmd}`")
    print(f"B={args.prompts} prompts x G={args.group}, generation {args.gen_s:g} s per prompt (simulated, no CPU), "
          f"{args.work_s:g} CPU s per child, {args.workers} sandbox workers; median of {args.epochs} epochs\n")
    print("| rollout.batch_size | generate s | evaluate s, exposed | evaluate s, busy | generate + exposed s | vs after |")
    print("|---|---|---|---|---|---|")
    base = median(0, "gen_time_s") + median(0, "eval_time_s")
    for batch_size, label in ((0, "0 (evaluate after)"), (1, "1 (overlapped)")):
        total = median(batch_size, "gen_time_s") + median(batch_size, "eval_time_s")
        print(f"| {label} | {median(batch_size, 'gen_time_s'):.2f} | {median(batch_size, 'eval_time_s'):.2f} | "
              f"{median(batch_size, 'eval_busy_s'):.2f} | {total:.2f} | {total / base:.2f}x |")


if __name__ == "__main__":
    main()
