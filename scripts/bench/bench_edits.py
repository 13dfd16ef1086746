"""How often the policy's answers become children that run: the cold embedded model vs its warm start.

    .venv/bin/python scripts/bench/bench_edits.py --config configs/quickstart.yaml            # markdown table
    .venv/bin/python scripts/bench/bench_edits.py --config configs/quickstart.yaml --samples 16 --temperatures 1.0,0.7
    .venv/bin/python scripts/bench/bench_edits.py --models DIR_A,DIR_B --samples 32 --temperatures 0.7 --seeds 1,2

Two of the loop's own prompts (the starter, and a valid mutant of it shown with the starter as its
ancestor), ``--samples`` completions each through the vllm engine, per policy and temperature. Each
completion is counted as: has a SEARCH/REPLACE block; its edits apply; the child differs from its
parent (canonically); the child runs and is valid in the sandbox; it beats its parent. Per group:
the number of distinct rewards and the reward std, i.e. whether GRPO gets a signal.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def prompts_and_parents(cfg, tokenizer, evaluator, task):
    """The starter's prompt and a mutant's (with the starter as ancestor), as the loop builds them."""
    import numpy as np

    from rollout.prompts import PromptBuilder
    from train.warm_start.build import Program
    from train.warm_start.data import mutate

    builder = PromptBuilder(tokenizer, task.prompt_description(cfg.rollout.description), task.entry_function,
                            evaluator.timeout_s, cfg.rollout.max_prompt_tokens, cfg.rollout.n_ancestors,
                            template=task.prompt_template)
    (seed,) = evaluator.evaluate_many([task.initial_program])
    root = Program(task.initial_program, seed.reward, seed.valid, seed.feedback)
    rng = np.random.default_rng(12345)  # not the warm start's seed: a parent it did not train on
    while True:
        m = mutate(root.code, rng)
        if m is None or m.code == root.code:
            continue
        (r,) = evaluator.evaluate_many([m.code])
        if r.valid:
            child = Program(m.code, r.reward, r.valid, r.feedback)
            break
    return [(builder.build(root, []), root), (builder.build(child, [root]), child)]


def score(groups, parents, evaluator, task) -> dict:
    """Counts over all completions, and the reward spread per group, classified by the loop's own
    ``evaluate_children`` (failed edit, unchanged child, sandboxed program)."""
    import numpy as np

    from rollout.edits import extract_answer, parse_edits
    from train.loop.children import Job, evaluate_children

    jobs = [Job(i, i, p.code, []) for i, p in enumerate(parents)]
    rows = evaluate_children(task, evaluator, jobs, groups, epoch=0, progress=False)
    completions = [c for group in groups for c in group]
    owners = [parents[i] for i, group in enumerate(groups) for _ in group]
    applied = [not r.metrics.get("edit_failed") for r in rows]
    changed = [a and not r.metrics.get("unchanged") for a, r in zip(applied, rows)]
    counts = dict(n=len(rows), block=sum(bool(parse_edits(extract_answer(c.text))) for c in completions),
                  applies=sum(applied), changed=sum(changed), valid=sum(r.valid for r in rows),
                  better=sum(r.valid and r.reward > p.reward for r, p in zip(rows, owners)))
    per_group = [[r.reward for r, p in zip(rows, owners) if p is parent] for parent in parents]
    return dict(counts, distinct=[len(set(g)) for g in per_group], std=[float(np.std(g)) for g in per_group],
                len_mean=float(np.mean([len(c.token_ids) for c in completions])))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "configs" / "quickstart.yaml"))
    parser.add_argument("--samples", type=int, default=16, help="completions per prompt")
    parser.add_argument("--temperatures", default="1.0,0.7")
    parser.add_argument("--max-new-tokens", type=int, default=0, help="0: the config's rollout.max_new_tokens")
    parser.add_argument("--policies", default="cold,warm", help="which of cold,warm to measure")
    parser.add_argument("--models", default="", help="model directories to measure instead (comma-separated), "
                                                    "e.g. two warm starts built with different settings")
    parser.add_argument("--seeds", default="1", help="sampling seeds, comma-separated: one row per seed")
    args = parser.parse_args(argv)

    from rewards import Evaluator
    from rollout.engine_api import SamplingParams
    from rollout.vllm_engine import VLLMEngine
    from tasks import load_task
    from train.config.config import load_config, warm_start_inputs
    from train.learner.models import load_policy, load_tokenizer, resolve_policy_path
    from train.loop.task_tools import tools_for
    from train.warm_start.build import ensure_warm_start

    cfg = load_config(args.config, ["warm_start.enabled=true"])
    task = load_task(cfg.task.name)
    evaluator = Evaluator(task, workers=None, timeout_s=cfg.task.timeout_s, memory_mb=cfg.task.memory_mb)
    wants_warm = not args.models and "warm" in args.policies.split(",")
    lend = tools_for(cfg, load_tokenizer(cfg.model.policy, cfg.model.cache_dir)) if wants_warm else None
    warm_dir = ensure_warm_start(warm_start_inputs(cfg), lend) if wants_warm else None
    cold, tokenizer = load_policy(cfg.model.policy, "float32", cfg.model.cache_dir)
    built = prompts_and_parents(cfg, tokenizer, evaluator, task)
    prompts, parents = [p.token_ids for p, _ in built], [q for _, q in built]
    max_new = args.max_new_tokens or cfg.rollout.max_new_tokens
    engine = VLLMEngine(resolve_policy_path(cfg.model.policy, cfg.model.cache_dir), dtype="bfloat16",
                        max_model_len=cfg.rollout.max_prompt_tokens + max_new, stop=("</answer>",))
    if args.models:
        policies = [(Path(d).name, d) for d in args.models.split(",") if d.strip()]
    else:
        named = {"cold": ("SmolLM2-135M cold", None), "warm": ("warm-started", str(warm_dir))}
        policies = [named[k] for k in args.policies.split(",")]
    print(f"prompt tokens: {[len(p) for p in prompts]}; {args.samples} samples each; max_new_tokens {max_new}\n")
    print("| policy | temperature | seed | has a block | applies | changed | runs and valid | beats its parent "
          "| distinct rewards per group | reward std per group | answer tokens | s per sample |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, directory in policies:
        model = cold if directory is None else load_policy(directory, "float32")[0]
        engine.sync_weights(model.state_dict())
        for temp in (float(t) for t in args.temperatures.split(",")):
            for seed in (int(x) for x in args.seeds.split(",")):
                t0 = time.perf_counter()
                groups = engine.generate(prompts, SamplingParams(n=args.samples, temperature=temp, top_p=0.95,
                                                                 max_new_tokens=max_new, seed=seed))
                per = (time.perf_counter() - t0) / (len(prompts) * args.samples)
                s = score(groups, parents, evaluator, task)
                pct = {k: f"{100 * s[k] / s['n']:.0f}%" for k in ("block", "applies", "changed", "valid", "better")}
                print(f"| {name} | {temp:g} | {seed} | {pct['block']} | {pct['applies']} | {pct['changed']} | "
                      f"{pct['valid']} | {pct['better']} | {s['distinct']} | {[round(x, 3) for x in s['std']]} | "
                      f"{s['len_mean']:.0f} | {per:.2f} |", flush=True)


if __name__ == "__main__":
    main()
