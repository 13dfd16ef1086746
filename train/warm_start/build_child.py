"""The warm start's fine-tune process (started by train.warm_start.isolated.build_in_child): reads its inputs and
data on stdin, fine-tunes the base model with the learner's supervised step, writes the model folder, and writes
back on the pipe it was given either nothing or the exception it raised."""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path


def fine_tune_and_save(inputs, examples: list, stats: dict, out: Path, progress: bool = True) -> Path:
    """``inputs.base`` fine-tuned on ``examples`` (build.Example: one optimizer step per parent prompt) and written
    to ``out`` atomically, with ``warm_start.json`` (what it is and how it went) and ``warm_start_data.jsonl``
    (every prompt's parent and target answer)."""
    import shutil

    import torch

    from train.learner.console import to_file
    from train.learner.models import load_policy
    from train.learner.supervised import Answer, Recipe, fine_tune
    from train.warm_start.build import RECIPE_VERSION, autocast_dtype

    start = time.perf_counter()
    ws = inputs.recipe
    torch.manual_seed(ws.seed)
    chatter = out.parent / f"{out.name}.log"  # transformers' load and save bars
    with to_file(chatter):
        model, tokenizer = load_policy(inputs.base, "float32", inputs.cache_dir)
    recipe = Recipe(lr=ws.lr, epochs=ws.epochs, seed=ws.seed, answers_per_pass=ws.answers_per_pass,
                    gradient_checkpointing=ws.gradient_checkpointing, autocast=autocast_dtype(ws.dtype),
                    release_memory_every_s=inputs.release_memory_every_s)
    answers = [Answer(e.prompt_ids, e.answer_ids, e.parent) for e in examples]
    losses = fine_tune(model, answers, recipe, tokenizer.pad_token_id, progress)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".tmp-", dir=out.parent))
    with to_file(chatter):
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    summary = {"key": out.name, "recipe_version": RECIPE_VERSION, "base": inputs.base, "tasks": list(inputs.tasks),
               "recipe": asdict(ws), "autocast": recipe.autocast, "examples": len(examples),
               "parents": len({(e.task, e.parent) for e in examples}), "mutations_drawn": stats["drawn"],
               "mutations_valid": stats["valid"], "prompts_by_operator": stats.get("operators", {}),
               "loss_first": losses[0], "loss_last": losses[-1], "losses": losses,
               "data_s": stats["data_s"], "total_s": round(stats["data_s"] + time.perf_counter() - start, 1),
               "peak_rss_mib": peak_rss_mib()}
    write_data(tmp, summary, examples)
    try:
        tmp.rename(out)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"[helix] warm start: {len(examples)} examples, loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
          f"{summary['total_s']:.0f} s -> {out}", flush=True)
    return out


def peak_rss_mib() -> int | None:
    """This process's resident high-water mark (VmHWM), where Linux tells it: the build's memory, on record."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def write_data(folder: Path, summary: dict, examples: list) -> None:
    """``warm_start.json`` (the summary) and ``warm_start_data.jsonl`` (every target answer) into the model folder."""
    (folder / "warm_start.json").write_text(json.dumps(summary, indent=1))
    with open(folder / "warm_start_data.jsonl", "w") as f:
        for e in examples:
            f.write(json.dumps({"task": e.task, "parent": e.parent, "prompt_tokens": len(e.prompt_ids),
                                "answer": e.answer}) + "\n")


def main(result_fd: int) -> int:
    import ctypes

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: a killed run takes its build along
    except (OSError, AttributeError):  # not Linux: the child may outlive a parent killed with -9
        pass
    inputs, examples, stats, out, progress = pickle.load(sys.stdin.buffer)
    with os.fdopen(result_fd, "wb") as result:
        try:
            fine_tune_and_save(inputs, examples, stats, Path(out), progress)
        except BaseException as e:  # everything goes back to the parent, Ctrl-C included
            text = "".join(traceback.format_exception(e))
            try:
                reply = pickle.dumps((e, text))
            except Exception:  # an exception that does not pickle: its type and message as a RuntimeError
                reply = pickle.dumps((RuntimeError(f"{type(e).__name__}: {e}"), text))
            result.write(reply)
            return 1
        result.write(pickle.dumps(None))
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
