import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def tokenizer():
    """SmolLM2's tokenizer (the embedded model is converted once and cached)."""
    from train.models import load_tokenizer

    return load_tokenizer("tiny-random")


@pytest.fixture()
def tiny_model(tokenizer):
    from train.models import load_policy

    model, _ = load_policy("tiny-random", seed=0)
    return model
