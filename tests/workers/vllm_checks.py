"""vLLM engine checks in their own process (vLLM binds OpenMP threads and sets process-wide
state we keep out of the pytest process). Each rank prints one JSON line; tests/rollout/test_vllm_engine.py
asserts. Under torchrun the learner is FSDP2 and every rank's engine uses external_launcher.

    python tests/workers/vllm_checks.py MODEL_DIR WORKSPACE
    torchrun --standalone --nproc_per_node 2 tests/workers/vllm_checks.py MODEL_DIR WORKSPACE [STRATEGY [TP]]

STRATEGY is the learner's under torchrun (fsdp2 by default, or deepspeed: ZeRO-3), TP the
engine's tensor-parallel size (1: one engine per rank; 2: both ranks serve one engine).
"""

import json
import sys


def trainer_logprobs(model, prompt, group):
    import torch

    from train.learner.learner import Sample, pack, response_logprobs

    batch = pack([Sample(prompt, c.token_ids, 0.0, 0) for c in group], pad_id=0)
    with torch.no_grad():
        logp, _ = response_logprobs(model, batch, 1.0)
    return [logp[i, : len(c.token_ids)].tolist() for i, c in enumerate(group)]


def max_gap(model, prompt, group) -> float:
    ours = trainer_logprobs(model, prompt, group)
    return max(abs(a - b) for c, row in zip(group, ours) for a, b in zip(c.logprobs, row))


def main() -> None:
    import torch

    from rollout.config import RolloutConfig, VLLMConfig
    from rollout.engines import SamplingParams, build_engine
    from train.learner.config import TrainerConfig
    from train.learner.distributed import init_distributed
    from train.learner.learner import Learner, Sample
    from train.learner.models import load_policy

    info = init_distributed()
    model_dir, workspace = sys.argv[1], sys.argv[2]
    rollout = RolloutConfig(engine="vllm", vllm=VLLMConfig(workspace=workspace), max_prompt_tokens=128, max_new_tokens=12)
    strategy = (sys.argv[3] if len(sys.argv) > 3 else "fsdp2") if info.world > 1 else "none"
    rollout.vllm.tp = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    model, tok = load_policy(model_dir, "float32")
    engine = build_engine("vllm", rollout, model=model, tokenizer=tok, info=info, model_path=model_dir, dtype="float32")
    out = {"rank": info.rank, "world": info.world, "needs_sync": engine.needs_sync, "startup_s": engine.startup_s,
           "strategy": strategy, "tp": rollout.vllm.tp}
    check, _ = load_policy(model_dir, "float32")  # a plain copy of the trainer's weights to score tokens with

    prompts = [tok("def f(x):")["input_ids"], tok(f"rank {info.rank}: a longer prompt, with more words")["input_ids"]]
    params = SamplingParams(n=3, max_new_tokens=12, seed=7)
    first = engine.generate(prompts, params)
    again = engine.generate(prompts, params)
    out["groups"] = [len(g) for g in first]
    out["same_seed_same_tokens"] = [[c.token_ids for c in g] for g in first] == [[c.token_ids for c in g] for g in again]
    # One prompt per LLM.generate call, handed over as each finishes: each request is seeded by its
    # prompt's index, so the samples are those of the single call.
    engine.batch_size, seen = 1, []
    batched = engine.generate(prompts, params, on_batch=lambda start, groups: seen.append((start, len(groups))))
    engine.batch_size = 0
    out["batches"] = seen
    out["batched_same_tokens"] = [[c.token_ids for c in g] for g in batched] == [[c.token_ids for c in g] for g in first]
    out["lengths"] = [len(c.token_ids) for g in first for c in g]
    out["truncated"] = [c.truncated for g in first for c in g]
    out["eos_id"] = tok.eos_token_id
    out["last_tokens"] = [c.token_ids[-1] for g in first for c in g]
    out["logprobs_lengths_ok"] = all(len(c.logprobs) == len(c.token_ids) for g in first for c in g)
    out["gap_initial"] = max(max_gap(check, p, g) for p, g in zip(prompts, first))

    # One real GRPO step on the trainer side (mixed rewards, so the weights move); FSDP2 under torchrun.
    learner = Learner(model, TrainerConfig(lr=5e-2, grad_clip=1e9, strategy=strategy), group_size=3, temperature=1.0,
                      pad_id=tok.pad_token_id, info=info)
    batch = [Sample(p, c.token_ids, float(i), j) for j, (p, g) in enumerate(zip(prompts, first)) for i, c in enumerate(g)]
    learner.step(batch)
    weights = learner.full_state_dict()  # collective: the gathered FSDP2 shards, on every rank
    check.load_state_dict(weights)
    stale = engine.generate(prompts, params)  # prompts are in the prefix cache from before the step
    out["gap_before_sync"] = max(max_gap(check, p, g) for p, g in zip(prompts, stale))
    out["sent_lm_head"] = "lm_head.weight" in weights
    engine.sync_weights(weights)
    synced = engine.generate(prompts, params)
    out["gap_after_sync"] = max(max_gap(check, p, g) for p, g in zip(prompts, synced))

    # A tied model synced WITHOUT lm_head.weight: the engine must still update its (separate) head.
    with torch.no_grad():
        check.model.embed_tokens.weight.mul_(1.5)
    no_head = {k: v for k, v in check.state_dict().items() if k != "lm_head.weight"}
    engine.sync_weights(no_head)
    tied = engine.generate(prompts, params)
    out["gap_after_sync_without_head"] = max(max_gap(check, p, g) for p, g in zip(prompts, tied))
    sys.stdout.write(json.dumps(out) + "\n")  # one write: the two ranks share the pipe (print writes the newline apart)
    sys.stdout.flush()


if __name__ == "__main__":  # vLLM starts worker machinery: keep it behind the guard
    main()
