"""The run's random streams: the global generators a run seeds once, and the seed of each generate call."""

from __future__ import annotations

import random

import numpy as np
import torch


def sampling_seed(run_seed: int, epoch: int, first_prompt: int, group_size: int) -> int:
    """The seed of this rank's generate call. Engines seed prompt i of a call with seed + i*G and its
    sample j with + j, so with ``first_prompt`` the epoch-wide index of the rank's first prompt, sample
    j of epoch prompt k uses base + k*G + j: distinct for every sample of the epoch, on any number of
    ranks. The base is hashed from (run seed, epoch), so epochs do not reuse each other's streams."""
    base = int(np.random.SeedSequence([run_seed, epoch]).generate_state(1)[0]) % 2**30
    return base + first_prompt * group_size


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
