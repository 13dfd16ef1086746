"""The loop's per-rank sampling seed: every sample of an epoch gets its own random stream."""

from train.learner.distributed import DistInfo, shard
from train.loop.seeding import sampling_seed


def _streams(world: int, prompts: int, g: int, epoch: int) -> list[int]:
    """The seed of every (prompt, sample) of an epoch, as the engines derive them from the loop's seed."""
    seeds = []
    for rank in range(world):
        mine = shard(list(range(prompts)), DistInfo(rank=rank, world=world))
        if not mine:
            continue
        base = sampling_seed(0, epoch, mine[0], g)
        seeds += [base + i * g + j for i in range(len(mine)) for j in range(g)]  # engine: prompt i, sample j
    return seeds


def test_no_two_samples_of_an_epoch_share_a_seed_on_any_number_of_ranks():
    for world in (1, 2, 3, 8):
        seeds = _streams(world, prompts=8, g=16, epoch=5)
        assert len(seeds) == 8 * 16 and len(set(seeds)) == len(seeds)
        assert seeds == _streams(1, prompts=8, g=16, epoch=5)  # the same samples, however the prompts are split


def test_epochs_get_unrelated_bases():
    bases = [sampling_seed(0, epoch, 0, 16) for epoch in range(1, 200)]
    assert len(set(bases)) == len(bases)
    assert sampling_seed(1, 3, 0, 16) != sampling_seed(0, 3, 0, 16)
