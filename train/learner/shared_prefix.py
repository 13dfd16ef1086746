"""Shared-prefix layout: a GRPO group's prompt is computed once for all its responses.

All G completions of a group share one prompt (~1,300 tokens) while the answers are short
(~120), so the per-sample layout spends most of a step recomputing that prompt G times. Here a
micro-batch becomes one row per group, [left pad | prompt | resp_1 | ... | resp_k | right pad],
with a 4D mask and position ids that make every response see exactly what it saw alone: the whole
prompt, then its own tokens causally (never a sibling, never padding), at positions P, P+1, ...
The log-probs are then exact, not approximate. Prompts are left-padded to end at the same column
S, as in ``learner.pack``, so all responses start at S and the LM head runs on one contiguous tail
of columns (an int ``logits_to_keep``, which every HF causal LM and FSDP2/DeepSpeed wrapping take).
``gather`` maps the results back to the per-sample (n, R) layout the loss code uses.

Pure tensor layout: no models, no distributed state.
"""

from __future__ import annotations

import torch

# Attention implementations that take a custom 4D mask as-is (transformers' masking_utils passes a
# 4D mask through); flash_attention_* and flex_attention build their own and cannot express it.
# SPLIT_SDPA is sdpa that skips the prompt's masked-out pairs (train.learner.prefix_attention registers it
# under this name; the name lives here so this layout module imports no model code).
SPLIT_SDPA = "helix_sdpa"
MASK_KINDS = {"sdpa": "bool", SPLIT_SDPA: "bool", "eager": "float"}


def mask_kind(model: torch.nn.Module) -> tuple[str | None, str]:
    """("bool" | "float", "") when the model's attention takes a custom 4D mask, else (None, why)."""
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if impl in MASK_KINDS:
        return MASK_KINDS[impl], ""
    return None, f"attention implementation {impl!r} takes no custom 4D mask (only {sorted(MASK_KINDS)} do)"


def rows(samples) -> list[list[int]]:
    """Sample indices per row: one row per (group, prompt), in first-seen order. Keying on the
    prompt too keeps two prompts that share a group id apart instead of trusting the id."""
    out: dict[tuple, list[int]] = {}
    for i, s in enumerate(samples):
        out.setdefault((s.group, tuple(s.prompt_ids)), []).append(i)
    return list(out.values())


def row_tokens(samples, members: list[int]) -> int:
    """Tokens of one packed row: the prompt once plus every response (empty ones count 1, as in pack)."""
    return len(samples[members[0]].prompt_ids) + sum(max(len(samples[i].response_ids), 1) for i in members)


def padded_tokens(samples) -> int:
    """Size of the packed micro-batch: rows x (longest prompt + longest row of responses)."""
    packed = rows(samples)
    s = max(len(samples[m[0]].prompt_ids) for m in packed)
    return len(packed) * (s + max(row_tokens(samples, m) - len(samples[m[0]].prompt_ids) for m in packed))


def group_chunks(samples, micro_batch_size: int, max_tokens: int) -> list[list[int]]:
    """Micro-batches of sample indices that keep a group's samples together, so its prompt is
    computed once per micro-batch. ``micro_batch_size`` still caps the samples (responses) of a
    micro-batch; a group larger than that, or whose packed row exceeds ``max_tokens``, is cut into
    consecutive pieces (each piece gets its own copy of the prompt: still exact). With a token
    budget, pieces go longest first and a micro-batch grows while its packed, padded size (see
    ``padded_tokens``) fits; a piece of one sample longer than the budget runs alone."""
    pieces = []
    for members in rows(samples):
        piece: list[int] = []
        for i in members:
            if piece and (len(piece) >= micro_batch_size
                          or (max_tokens > 0 and row_tokens(samples, piece + [i]) > max_tokens)):
                pieces.append(piece)
                piece = []
            piece.append(i)
        pieces.append(piece)
    if max_tokens > 0:
        pieces.sort(key=lambda p: -row_tokens(samples, p))
    chunks: list[list[int]] = []
    current: list[int] = []
    for piece in pieces:
        grown = current + piece
        if current and (len(grown) > micro_batch_size
                        or (max_tokens > 0 and padded_tokens([samples[i] for i in grown]) > max_tokens)):
            chunks.append(current)
            grown = list(piece)
        current = grown
    if current:
        chunks.append(current)
    return chunks


def layout(samples, pad_id: int, kind: str = "bool") -> dict[str, torch.Tensor]:
    """Model inputs and gather indices for ``samples`` (one micro-batch, any groups, any order).

    Returns ``input_ids``/``position_ids`` (rows, T), ``attention_mask`` (rows, 1, T, T): bool
    (True = attend; what sdpa takes) or additive float32 (0 / -inf-like; what eager adds to its
    scores), ``logits_to_keep`` (the tail columns S-1 .. T-1), ``prefix_len`` (S) and ``prefix_padded``
    (does any row's prompt start after column 0), ``segments`` (rows, T: -1 pad,
    0 prompt, j the j-th response of the row) and the gather indices ``gather_row``,
    ``gather_col`` (into the kept columns), ``targets`` and ``valid``, each (n, R) and aligned
    with ``pack(samples)["response_mask"]``.
    """
    packed = rows(samples)
    s = max(len(samples[m[0]].prompt_ids) for m in packed)
    width = max(max(row_tokens(samples, m) - len(samples[m[0]].prompt_ids) for m in packed), 1)
    n, t = len(samples), s + width
    r = max(max(len(x.response_ids) for x in samples), 1)
    input_ids = torch.full((len(packed), t), pad_id, dtype=torch.long)
    position_ids = torch.zeros((len(packed), t), dtype=torch.long)
    segments = torch.full((len(packed), t), -1, dtype=torch.long)
    gather_row = torch.zeros((n, r), dtype=torch.long)
    gather_col = torch.zeros((n, r), dtype=torch.long)
    targets = torch.full((n, r), pad_id, dtype=torch.long)
    valid = torch.zeros((n, r), dtype=torch.bool)
    for row, members in enumerate(packed):
        prompt = samples[members[0]].prompt_ids
        p = len(prompt)
        input_ids[row, s - p : s] = torch.tensor(prompt, dtype=torch.long)
        position_ids[row, s - p : s] = torch.arange(p)
        segments[row, s - p : s] = 0
        start = s
        for j, i in enumerate(members, start=1):
            q = len(samples[i].response_ids)
            if q:
                input_ids[row, start : start + q] = torch.tensor(samples[i].response_ids, dtype=torch.long)
                targets[i, :q] = input_ids[row, start : start + q]
            position_ids[row, start : start + q] = torch.arange(p, p + q)  # from P, as if alone
            segments[row, start : start + q] = j
            gather_row[i] = row
            # Token k>0 is predicted at the column before it, token 0 at the last prompt column S-1
            # (not at the sibling before it); kept column c is sequence column S-1+c.
            cols = torch.arange(start - 1, start + q - 1)
            cols[:1] = s - 1
            gather_col[i, :q] = cols - (s - 1)
            valid[i, :q] = True
            start += q
    allowed = attention_mask(segments)
    if kind == "float":
        allowed = torch.zeros(allowed.shape, dtype=torch.float32).masked_fill_(~allowed, torch.finfo(torch.float32).min)
    elif kind != "bool":
        raise ValueError(f"mask kind must be 'bool' or 'float', got {kind!r}")
    return {"input_ids": input_ids, "position_ids": position_ids, "attention_mask": allowed,
            "logits_to_keep": torch.tensor(width + 1), "prefix_len": torch.tensor(s),
            "prefix_padded": torch.tensor(any(len(samples[m[0]].prompt_ids) < s for m in packed)),
            "segments": segments, "gather_row": gather_row, "gather_col": gather_col, "targets": targets, "valid": valid}


def attention_mask(segments: torch.Tensor) -> torch.Tensor:
    """(rows, 1, T, T) bool from segment ids: causal, a prompt token sees the prompt, a response
    token the prompt and its own response; padding is seen by no one and sees only itself (a row
    with nothing to attend to would give NaN in sdpa, and 0 x NaN still poisons the others)."""
    t = segments.shape[1]
    q, k = segments.unsqueeze(2), segments.unsqueeze(1)  # (rows, T, 1) queries, (rows, 1, T) keys
    causal = torch.ones((t, t), dtype=torch.bool).tril_()
    allowed = causal & (q >= 0) & ((k == 0) | (k == q))
    return (allowed | torch.eye(t, dtype=torch.bool)).unsqueeze(1)


def gather(values: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(rows, K) per-kept-column values -> (n, R) per-sample response layout; 0 where padded."""
    out = values[batch["gather_row"], batch["gather_col"]]
    return out.masked_fill(~batch["valid"], 0.0)


def token_logprobs(logp_all: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """log pi of each sample's own response tokens from (rows, K, V) log-softmaxed logits -> (n, R)."""
    out = logp_all[batch["gather_row"], batch["gather_col"], batch["targets"]]
    return out.masked_fill(~batch["valid"], 0.0)
