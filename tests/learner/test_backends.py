"""The learner-backend registry: every strategy is one registered Backend, names resolve in one
place, and the Learner drives training only through the Backend interface."""

import pytest
import torch

from train.learner.backend_torch import LocalBackend
from train.learner.backends import BACKENDS, Backend, backend_class, make_backend, needs_process_group, register_backend, resolve_strategy
from train.learner.config import TrainerConfig
from train.learner.distributed import DistInfo
from train.learner.learner import Learner, Sample

BUILT_IN = ("none", "ddp", "fsdp2", "deepspeed")


def _samples():
    """Two groups of three with unequal rewards: a real update."""
    gen = torch.Generator().manual_seed(0)
    return [Sample(torch.randint(10, 1000, (4 + g,), generator=gen).tolist(),
                   torch.randint(10, 1000, (2 + j,), generator=gen).tolist(), reward=float(j), group=g)
            for g in range(2) for j in range(3)]


def test_every_strategy_is_a_registered_backend():
    assert set(BUILT_IN) <= set(BACKENDS)
    for name in BUILT_IN:
        cls = BACKENDS[name]
        assert issubclass(cls, Backend) and cls.name == name and backend_class(name) is cls and cls.checkpoint_dir
    assert {n for n in BUILT_IN if BACKENDS[n].sharded} == {"fsdp2", "deepspeed"}
    assert {n for n in BUILT_IN if BACKENDS[n].needs_process_group} == {"fsdp2", "deepspeed"}


@pytest.mark.parametrize("lookup", [lambda n: backend_class(n), lambda n: resolve_strategy(n, DistInfo()),
                                    lambda n: make_backend(n, TrainerConfig(), DistInfo())])
def test_unknown_name_names_the_valid_ones(lookup):
    with pytest.raises(ValueError, match="unknown trainer.strategy 'fsdp3'") as err:
        lookup("fsdp3")
    for name in ("auto", *BUILT_IN):
        assert name in str(err.value)


def test_resolve_strategy_maps_config_to_a_backend():
    one = DistInfo()
    assert resolve_strategy("auto", one) == "none" and resolve_strategy("ddp", one) == "none"
    assert resolve_strategy("none", one) == "none"
    if not torch.distributed.is_initialized():
        for name in ("fsdp2", "deepspeed"):
            with pytest.raises(ValueError, match="needs a process group"):
                resolve_strategy(name, one)
    assert isinstance(make_backend("auto", TrainerConfig(), one), LocalBackend)


def test_needs_process_group():
    for name in ("auto", *BUILT_IN, "unknown"):
        want = name in ("fsdp2", "deepspeed")
        assert needs_process_group(name) is want
        assert needs_process_group(name, trainer_enabled=False) is False


def test_checkpoints_resume_where_the_format_allows():
    cfg = TrainerConfig()
    local = BACKENDS["none"](cfg, DistInfo())
    assert local.can_resume("fsdp2", 8) and local.can_resume("ddp", 2) and local.can_resume("none", 1)
    assert not local.can_resume("deepspeed", 1) and not local.can_resume("gone", 1)
    ds = BACKENDS["deepspeed"](cfg, DistInfo())  # not wrapped: no process group needed to ask
    assert ds.can_resume("deepspeed", 1) and not ds.can_resume("deepspeed", 2) and not ds.can_resume("fsdp2", 1)


def test_register_backend_checks_its_argument():
    with pytest.raises(TypeError, match="Backend subclass"):
        register_backend("not_a_backend_test")(object)
    assert "not_a_backend_test" not in BACKENDS


def test_learner_trains_through_the_backend_interface(tiny_model, tokenizer):
    """A plugin backend gets every call: one gradient_sync per micro-batch (only the last one
    syncs), one backward each, one clip_and_step, and the checkpoint metadata names it."""
    calls = []

    @register_backend("recording_test")
    class Recording(LocalBackend):
        def gradient_sync(self, last):
            calls.append(("sync", last))
            return super().gradient_sync(last)

        def backward(self, loss):
            calls.append("backward")
            super().backward(loss)

        def clip_and_step(self):
            calls.append("step")
            return super().clip_and_step()

    try:
        cfg = TrainerConfig(strategy="recording_test", lr=1e-3, micro_batch_size=2, grad_clip=1e9)
        learner = Learner(tiny_model, cfg, group_size=3, temperature=1.0, pad_id=tokenizer.pad_token_id,
                          info=DistInfo())
        assert isinstance(learner.backend, Recording) and learner.strategy == "recording_test"
        metrics = learner.step(_samples())
        assert metrics["micro_batches"] == 3 and metrics["grad_norm"] > 0
        assert calls == [("sync", False), "backward", ("sync", False), "backward", ("sync", True), "backward", "step"]
    finally:
        BACKENDS.pop("recording_test")
