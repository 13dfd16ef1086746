"""The warm start's fine-tune alone: peak memory, seconds a step, and which weights it made.

Makes the config's warm-start data (the sandboxed mutants, ~10 s, with the evaluator and prompt builder a run
makes), then runs the supervised step (``train.learner.supervised.fine_tune``) in this process with the heap
trimmed every ``run.release_memory_every_s`` as a build's child does, and prints one line: the process's
high-water mark (VmHWM, before and after the fine-tune), seconds per step, the last loss, and a sha256 over
every tensor of the result (equal digests: bitwise the same model). One configuration per process, so each
peak is its own; compare recipes by overrides, and the oneDNN kernel cache by its environment variable:

    .venv/bin/python scripts/bench/bench_warm_start.py --config configs/quickstart.yaml
    .venv/bin/python scripts/bench/bench_warm_start.py --config configs/quickstart.yaml warm_start.gradient_checkpointing=false
    ONEDNN_PRIMITIVE_CACHE_CAPACITY=64 .venv/bin/python scripts/bench/bench_warm_start.py --config configs/quickstart.yaml

Results: BENCHMARKS.md "Memory" (the warm start).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def digest(model) -> str:
    h = hashlib.sha256()
    for _, tensor in sorted(model.state_dict().items()):
        h.update(tensor.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args, overrides = parser.parse_known_args(argv)
    import numpy as np
    import torch

    from train.config.config import load_config, warm_start_inputs
    from train.learner.models import load_policy
    from train.learner.supervised import Answer, Recipe, fine_tune
    from train.loop.task_tools import tools_for
    from train.warm_start.build import autocast_dtype, make_examples
    from train.warm_start.build_child import peak_rss_mib

    cfg = load_config(args.config, overrides)
    inputs, ws = warm_start_inputs(cfg), cfg.warm_start
    torch.manual_seed(ws.seed)
    model, tokenizer = load_policy(inputs.base, "float32", inputs.cache_dir)
    examples, _ = make_examples(inputs, tools_for(cfg, tokenizer), np.random.default_rng(ws.seed))
    recipe = Recipe(lr=ws.lr, epochs=ws.epochs, seed=ws.seed, answers_per_pass=ws.answers_per_pass,
                    gradient_checkpointing=ws.gradient_checkpointing, autocast=autocast_dtype(ws.dtype),
                    release_memory_every_s=cfg.run.release_memory_every_s)
    before = peak_rss_mib()
    start = time.perf_counter()
    losses = fine_tune(model, [Answer(e.prompt_ids, e.answer_ids, e.parent) for e in examples], recipe,
                       tokenizer.pad_token_id, progress=False)
    seconds = time.perf_counter() - start
    result = {"config": args.config, "overrides": overrides, "autocast": recipe.autocast,
              "onednn_cache": os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "default"),
              "steps": len(losses), "s_per_step": round(seconds / len(losses), 2), "loss_last": losses[-1],
              "vmhwm_mib_before": before, "vmhwm_mib": peak_rss_mib(), "sha256": digest(model)}
    print(json.dumps(result), flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
