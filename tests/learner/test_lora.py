"""trainer.lora: a LoRA step's gradients against an independent computation (forward hooks adding
(alpha/r) B A x to the plain model, the GRPO loss written out), the reference is the base exactly,
resume continues exactly, and the merged export loads with transformers and generates."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from tests.helpers.learner import samples
from train.learner import lora
from train.learner.config import LoraConfig, TrainerConfig
from train.learner.distributed import DistInfo
from train.learner.learner import Learner, pack, response_logprobs

LORA = LoraConfig(enabled=True, rank=4, alpha=8.0, target_modules="q_proj,v_proj,down_proj")
SCALE = LORA.alpha / LORA.rank


def _learner(model, tokenizer, **overrides) -> Learner:
    cfg = TrainerConfig(lr=1e-2, grad_clip=1e9, lr_warmup_steps=3, lora=LORA, **overrides)
    torch.manual_seed(0)  # peft draws A from the global generator (a run seeds it: seed_everything)
    return Learner(model, cfg, group_size=3, temperature=1.0, pad_id=tokenizer.pad_token_id, info=DistInfo())


def _randomise_b(model) -> None:
    """peft starts B at 0 (policy == base, and A's gradient is 0); give B values so both factors train."""
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)


def _factors(model) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{module name: (A, B)} of the learner's adapters, by the HF name of the adapted linear."""
    state = dict(model.named_parameters())
    return {n.split(".lora_A.")[0]: (state[n].detach().clone(), state[n.replace("lora_A", "lora_B")].detach().clone())
            for n in state if ".lora_A." in n}


def _manual_logprobs(base, factors, batch_samples) -> list[torch.Tensor]:
    """Each sample alone, unpadded, through ``base`` with forward hooks that add (alpha/r) B A x."""
    hooks = []
    for name, (a, b) in factors.items():
        module = base.get_submodule(name)
        hooks.append(module.register_forward_hook(lambda m, inp, out, a=a, b=b: out + SCALE * F.linear(F.linear(inp[0], a), b)))
    try:
        out = []
        for s in batch_samples:
            ids = torch.tensor([s.prompt_ids + s.response_ids])
            logp = torch.log_softmax(base(ids).logits[0].float(), -1)
            p = len(s.prompt_ids)
            out.append(torch.stack([logp[p - 1 + k, t] for k, t in enumerate(s.response_ids)]))
        return out
    finally:
        for h in hooks:
            h.remove()


def test_config_is_strict_and_off_by_default():
    from train.config.config import ConfigError, load_config

    assert TrainerConfig().lora.enabled is False
    cfg = load_config("configs/quickstart.yaml", ["trainer.lora.enabled=true", "trainer.lora.rank=8"])
    assert cfg.trainer.lora.rank == 8 and cfg.trainer.lora.target_modules == "all-linear"
    for override, fragment in [("trainer.lora.rnak=8", "Did you mean 'rank'"), ("trainer.lora.rank=0", "must be >= 1"),
                               ("trainer.lora.dropout=1.0", "must be in [0, 1)"), ("trainer.lora.alpha=0", "must be > 0")]:
        with pytest.raises(ConfigError, match=None) as err:
            load_config("configs/quickstart.yaml", [override])
        assert fragment in str(err.value), override


def test_only_the_adapters_train_and_a_bad_target_is_one_line(tiny_model, tokenizer):
    learner = _learner(tiny_model, tokenizer)
    trainable = [n for n, p in tiny_model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_" in n for n in trainable)
    assert len(trainable) == 2 * 3 * tiny_model.config.num_hidden_layers  # A and B of q, v, down per layer
    assert sum(len(g["params"]) for g in learner.optimizer.param_groups) == len(trainable)
    with pytest.raises(ValueError, match="trainer.lora.target_modules = 'qq_proj'") as err:
        lora.apply(copy.deepcopy(tiny_model), LoraConfig(enabled=True, target_modules="qq_proj"))
    assert "\n" not in str(err.value)


def test_lora_gradients_match_an_independent_computation(tiny_model, tokenizer):
    """SGD with lr 1 makes each adapter's change its negative gradient. By hand: GRPO advantages
    (r - mean) / (std + 1e-6) per group, pg loss -A * pi/pi_old (ratio 1, gradient -A grad log pi),
    low_var_kl to the base, each averaged over a sequence's tokens and then over the sequences."""
    base = copy.deepcopy(tiny_model)
    learner = _learner(tiny_model, tokenizer, kl_coef=0.05)
    _randomise_b(tiny_model)
    before = _factors(tiny_model)
    learner.optimizer = torch.optim.SGD([p for p in tiny_model.parameters() if p.requires_grad], lr=1.0)
    learner.scheduler = torch.optim.lr_scheduler.LambdaLR(learner.optimizer, lambda step: 1.0)
    batch = samples(tokenizer)
    learner.step(batch)
    after = _factors(tiny_model)

    leaves = {n: (a.clone().requires_grad_(True), b.clone().requires_grad_(True)) for n, (a, b) in before.items()}
    logps = _manual_logprobs(base, leaves, batch)
    with torch.no_grad():
        refs = _manual_logprobs(base, {}, batch)
    rewards = torch.tensor([s.reward for s in batch], dtype=torch.float64)
    groups = torch.tensor([s.group for s in batch])
    loss = 0.0
    for i, (logp, ref) in enumerate(zip(logps, refs)):
        peers = rewards[groups == groups[i]]
        adv = float((rewards[i] - peers.mean()) / (peers.std() + 1e-6))
        pg = -adv * torch.exp(logp - logp.detach())
        d = ref - logp
        kl = torch.clamp(torch.exp(d) - d - 1, -10, 10)
        loss = loss + (pg + 0.05 * kl).mean() / len(batch)
    loss.backward()
    moved = 0
    for name, (a, b) in leaves.items():
        torch.testing.assert_close(before[name][0] - after[name][0], a.grad, atol=2e-6, rtol=1e-4, msg=name)
        torch.testing.assert_close(before[name][1] - after[name][1], b.grad, atol=2e-6, rtol=1e-4, msg=name)
        moved += int(a.grad.abs().sum() > 0) + int(b.grad.abs().sum() > 0)
    assert moved == 2 * len(leaves)  # every factor had a gradient to match


def test_reference_is_the_base_exactly_and_no_copy(tiny_model, tokenizer):
    base = copy.deepcopy(tiny_model)
    learner = _learner(tiny_model, tokenizer)
    _randomise_b(tiny_model)
    assert isinstance(learner.ref, lora.AdaptersOff) and learner.ref.module is learner.module
    batch = pack(samples(tokenizer), tokenizer.pad_token_id)
    with torch.no_grad():
        want, _ = response_logprobs(base, batch)
        policy, _ = response_logprobs(learner.model, batch)
    ref, _ = response_logprobs(learner.ref, batch)
    m = batch["response_mask"].bool()
    torch.testing.assert_close(ref[m], want[m], atol=0, rtol=0)
    assert (policy[m] - want[m]).abs().max() > 1e-4  # the adapters are on again for the policy
    assert tiny_model.training  # adapters_off restored the mode it found


def test_resume_continues_exactly_and_checkpoints_hold_only_adapters(tiny_model, tokenizer, tmp_path):
    from torch.distributed.checkpoint import FileSystemReader

    straight = _learner(copy.deepcopy(tiny_model), tokenizer)
    for seed in (0, 1):
        straight.step(samples(tokenizer, seed=seed))
    first = _learner(copy.deepcopy(tiny_model), tokenizer)
    first.step(samples(tokenizer, seed=0))
    first.save_state(tmp_path / "ckpt")
    keys = FileSystemReader(str(tmp_path / "ckpt" / "dcp")).read_metadata().state_dict_metadata
    model_keys = [k for k in keys if k.startswith("model.")]
    assert model_keys and all(".lora_" in k for k in model_keys)
    assert any(k.startswith("optim.state.") and k.endswith("exp_avg_sq") for k in keys)
    resumed = _learner(copy.deepcopy(tiny_model), tokenizer)
    resumed.load_state(tmp_path / "ckpt")
    metrics = resumed.step(samples(tokenizer, seed=1))
    assert metrics["kl"] > 0  # the reference stayed the base
    want, got = straight.full_state_dict(), resumed.full_state_dict()
    assert want.keys() == got.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], atol=0, rtol=0, msg=name)


def test_merged_export_equals_peft_merge_loads_and_generates(tiny_model, tokenizer, tmp_path):
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from train.learner.export import export_checkpoint, export_state

    base = copy.deepcopy(tiny_model)
    learner = _learner(tiny_model, tokenizer)
    learner.step(samples(tokenizer, seed=0))
    learner.save_state(tmp_path / "ckpt")
    merged = learner.full_state_dict()
    assert merged.keys() == base.state_dict().keys()  # plain HF names: what vLLM's load_weights takes
    # peft's own merge of the same adapters (a PeftModel built independently, weights copied by name)
    peft_model = get_peft_model(base, PeftLoraConfig(r=LORA.rank, lora_alpha=LORA.alpha, target_modules=["q_proj", "v_proj",
                                                                                                          "down_proj"]))
    trained = dict(tiny_model.named_parameters())
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if ".lora_" in name:
                p.copy_(trained[name.removeprefix("base_model.model.")])
    reference = peft_model.merge_and_unload().state_dict()
    for name in merged:
        torch.testing.assert_close(merged[name], reference[name], atol=1e-7, rtol=1e-6, msg=name)

    out = export_state(merged, "tiny-random", tmp_path / "hf")
    exported = AutoModelForCausalLM.from_pretrained(out).eval()
    batch = pack(samples(tokenizer), tokenizer.pad_token_id)
    with torch.no_grad():
        want, _ = response_logprobs(tiny_model.eval(), batch)
        got, _ = response_logprobs(exported, batch)
        generated = exported.generate(torch.tensor([[5, 6, 7]]), do_sample=False, max_new_tokens=6, min_new_tokens=6,
                                      pad_token_id=tokenizer.pad_token_id)
    m = batch["response_mask"].bool()
    torch.testing.assert_close(got[m], want[m], atol=1e-5, rtol=1e-5)
    assert generated.shape == (1, 9)
    # `helix export` of the checkpoint (adapters only) merges into the base the same way
    again = AutoModelForCausalLM.from_pretrained(export_checkpoint(tmp_path / "ckpt", "tiny-random", tmp_path / "hf2",
                                                                   lora_cfg=LORA)).state_dict()
    for name in merged:
        torch.testing.assert_close(again[name], merged[name], atol=0, rtol=0, msg=name)


def test_the_engine_sync_takes_the_merged_weights_one_at_a_time(tiny_model, tokenizer):
    """Learner.full_state_view (what the loop hands an engine's weight sync) is full_state_dict as a mapping, same
    names in the same order, bit for bit, but merges each weight only when it is read: a second full set of
    merged weights was the quickstart's memory peak. Shown by changing a later layer's B after reading the first
    weight: a merge made up front would not see it."""
    from collections.abc import Mapping

    learner = _learner(tiny_model, tokenizer)
    _randomise_b(tiny_model)
    want = learner.full_state_dict()
    view = learner.full_state_view()
    assert isinstance(view, Mapping) and list(view) == list(want) and len(view) == len(want)
    for name, value in view.items():
        torch.testing.assert_close(value, want[name], atol=0, rtol=0, msg=name)

    items = iter(learner.full_state_view().items())
    first_name, _ = next(items)
    last = [n for n, p in tiny_model.named_parameters() if ".lora_B." in n][-1]
    plain = last.replace(f".lora_B.{lora.ADAPTER}.", ".")
    assert list(want).index(plain) > list(want).index(first_name)
    with torch.no_grad():
        dict(tiny_model.named_parameters())[last].add_(1.0)
    rest = dict(items)
    assert not torch.equal(rest[plain], want[plain])  # merged when read, after the change
    assert torch.equal(rest[plain], learner.full_state_dict()[plain])
    with pytest.raises(KeyError):
        view[last]  # the adapters themselves are not weights of the plain model


def test_gradient_checkpointing_trains_the_adapters_alike(tiny_model, tokenizer):
    """model.gradient_checkpointing (the quickstart's): with a frozen embedding the checkpointed blocks
    would see no input that needs a gradient; the adapters must move exactly as without it."""
    plain, checkpointed = copy.deepcopy(tiny_model), copy.deepcopy(tiny_model)
    checkpointed.gradient_checkpointing_enable()
    before = None
    for model in (plain, checkpointed):
        learner = _learner(model, tokenizer)
        _randomise_b(model)
        before = _factors(model)
        learner.step(samples(tokenizer))
    a, b = _factors(plain), _factors(checkpointed)
    assert all(not torch.equal(a[n][0], before[n][0]) for n in a)  # A moved (B != 0 gives it a gradient)
    for name in a:
        torch.testing.assert_close(b[name][0], a[name][0], atol=1e-7, rtol=1e-6, msg=name)
        torch.testing.assert_close(b[name][1], a[name][1], atol=1e-7, rtol=1e-6, msg=name)


def test_the_first_step_skips_the_reference_forward_with_the_same_result(tiny_model, tokenizer):
    """Until the adapters move (B = 0) the policy's log-probs are the reference's bit for bit, so the first step
    runs no reference forward and ends with the weights and metrics of a step that ran it; later steps, and a
    policy whose B is not 0, run it."""
    calls = []

    def counted(learner):
        ref = learner.ref
        learner.ref = lambda *a, **k: (calls.append(1), ref(*a, **k))[1]
        return learner

    results = []
    for skip in (True, False):
        learner = counted(_learner(copy.deepcopy(tiny_model), tokenizer, kl_coef=0.05))
        if not skip:  # the reference forward forced, as before
            learner._ref_is_policy = lambda: False
        calls.clear()
        first = learner.step(samples(tokenizer, seed=0))
        ran_first = len(calls)
        second = learner.step(samples(tokenizer, seed=1))
        results.append((first, second, learner.full_state_dict(), ran_first, len(calls) - ran_first))
    (first, second, state, ran_first, ran_second), (want1, want2, want_state, forced_first, _) = results
    assert ran_first == 0 and forced_first > 0 and ran_second > 0
    assert first == {**want1, "train_time_s": first["train_time_s"]} and first["kl"] == 0.0
    assert second == {**want2, "train_time_s": second["train_time_s"]} and second["kl"] > 0
    for name in want_state:
        torch.testing.assert_close(state[name], want_state[name], atol=0, rtol=0, msg=name)
    moved_b = counted(_learner(copy.deepcopy(tiny_model), tokenizer, kl_coef=0.05))
    _randomise_b(moved_b.module)
    calls.clear()
    assert moved_b.step(samples(tokenizer))["kl"] > 0 and calls
