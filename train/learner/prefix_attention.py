"""Attention for the shared-prefix layout that skips the pairs its mask rules out.

A packed row is [prompt | resp_1 | ... | resp_k] (``train.learner.shared_prefix``): under its 4D mask
a prompt token sees only earlier prompt tokens, and nothing sees a later column. Torch's CPU flash
kernel skips the blocks above the diagonal only for ``is_causal`` and computes every (query, key)
pair of a T x T custom mask, about twice the pairs the row needs; attention was 39% of the
quickstart's GRPO step (BENCHMARKS.md "CPU limits"). So the row is cut at S, the column where the
responses start:

- the prompt's queries against the prompt's keys alone, with ``is_causal`` (no mask at all) when no
  row is left-padded, else with the mask's S x S corner;
- the responses' queries against every key, with the mask's last T - S rows.

Each query row is computed by the same kernel over the same keys (a masked key adds exactly 0 to the
online softmax): at the quickstart's shapes the forward is bit for bit the dense one, and on short rows,
whose shorter key range the kernel blocks differently, it differs by round-off (~1e-7). The prompt's
key/value gradients sum two partial sums instead of one, which rounds differently.

The split only happens when the forward gets ``helix_prefix_len`` (``learner.response_logprobs``
passes it with a batch the Learner laid out for a switched model); any other call, e.g. generation,
is plain sdpa.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from train.learner import shared_prefix

NAME = shared_prefix.SPLIT_SDPA


def shared_prefix_sdpa(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                       helix_prefix_len: int | None = None, helix_prefix_padded: bool = True,
                       **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention-function contract: (batch, heads, T, dim) in, (batch, T, heads, dim) out."""
    s, t = helix_prefix_len, query.shape[2]
    if (s is None or attention_mask is None or attention_mask.dim() != 4 or key.shape[2] != t or not 0 < s < t
            or kwargs.get("position_bias") is not None or kwargs.get("cache") is not None):  # what sdpa's own path adds
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    head = _sdpa(module, query[:, :, :s], key[:, :, :s], value[:, :, :s],
                 attention_mask[:, :, :s, :s] if helix_prefix_padded else None, dropout, scaling)
    tail = _sdpa(module, query[:, :, s:], key, value, attention_mask[:, :, s:], dropout, scaling)
    return torch.cat([head, tail], dim=2).transpose(1, 2).contiguous(), None


def _sdpa(module, query, key, value, mask, dropout, scaling) -> torch.Tensor:
    """Torch's sdpa; causal without a mask. Grouped-query heads go to the kernel as they are where it takes
    them with a mask (CPU: sdpa_attention_forward would copy them, and the copy's backward sums them again),
    and are repeated otherwise (CUDA's fused kernels take no mask with GQA: it would fall back to math)."""
    groups = getattr(module, "num_key_value_groups", 1)
    gqa = groups > 1 and (mask is None or query.device.type == "cpu")
    if groups > 1 and not gqa:
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout,
                                          is_causal=mask is None, scale=scaling, enable_gqa=gqa)


AttentionInterface.register(NAME, shared_prefix_sdpa)
AttentionMaskInterface.register(NAME, sdpa_mask)  # masks built for it (generation) are sdpa's


def enable(model: torch.nn.Module) -> bool:
    """Switch a model on sdpa to ``NAME`` (before it is copied or wrapped); True if it now uses it.
    Other implementations are left alone: eager takes the dense float mask, and flash/flex no custom mask."""
    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    if impl == "sdpa":
        model.set_attn_implementation(NAME)
    return getattr(config, "_attn_implementation", None) == NAME
