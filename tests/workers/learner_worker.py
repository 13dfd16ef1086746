"""One GRPO step (or save / resume) on the tiny policy, run alone or under torchrun by
tests/learner/test_distributed_train.py. Writes the resulting full weights to OUT/weights.pt (rank 0).

AdamW runs with eps 1e3 by default (``--adam linear``): its update is then linear in the gradient, so
two layouts' weights differ by their gradients' round-off. With AdamW's own eps every first update is
~lr x sign(grad), and round-off that flips a near-0 gradient's sign moves a weight by ~lr: a
tolerance set above that on one CPU failed on another (an AVX2-only EPYC: 2.17e-4)."""

import argparse
import gc
import json
from pathlib import Path

import torch

from train.learner.backends import needs_process_group
from train.learner.config import LoraConfig, TrainerConfig
from train.learner.distributed import init_distributed, shard, shutdown
from train.learner.learner import Learner, Sample
from train.learner.models import load_policy


def batch(step: int) -> list[list[Sample]]:
    """4 groups x 3 samples with varied lengths and rewards (different per step)."""
    gen = torch.Generator().manual_seed(100 + step)
    groups = []
    for g in range(4):
        prompt = torch.randint(10, 1000, (5 + 2 * g,), generator=gen).tolist()
        groups.append([Sample(prompt, torch.randint(10, 1000, (3 + (j + g) % 4,), generator=gen).tolist(),
                              reward=float((j * 7 + g + step) % 3), group=g) for j in range(3)])
    return groups


def main() -> None:
    import faulthandler
    faulthandler.dump_traceback_later(300, exit=True)  # a hung collective fails the test instead of CI
    ap = argparse.ArgumentParser()
    ap.add_argument("--strategy", default="none")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--save", help="save_state here after the steps")
    ap.add_argument("--load", help="load_state from here before the steps")
    ap.add_argument("--first-step", type=int, default=0)
    ap.add_argument("--token-budget", type=int, default=0)
    ap.add_argument("--zero-stage", type=int, default=3)
    ap.add_argument("--ppo-mini-batches", type=int, default=1)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--dtype", default="float32", help="model.dtype: the dtype the policy is loaded in")
    ap.add_argument("--lr", type=float, default=None, help="default: 10 with --adam linear, 1e-2 with plain")
    ap.add_argument("--adam", choices=("linear", "plain"), default="linear",
                    help="linear: AdamW with eps 1e3, whose update is linear in the gradient (about SGD with lr "
                         "lr/1e3), so weights of two layouts compare their gradients and round-off stays "
                         "round-off on any CPU; plain: AdamW's own eps, each first update ~lr x sign(grad)")
    ap.add_argument("--offload", action="store_true")
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--generate", action="store_true",
                    help="before the steps, each rank generates a different number of tokens (as the hf engine does)")
    ap.add_argument("--lora", action="store_true", help="trainer.lora: rank-4 adapters on q_proj, v_proj, down_proj")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    info = init_distributed(single_process_group=needs_process_group(args.strategy))
    torch.manual_seed(0)
    model, tok = load_policy("tiny-random", args.dtype, None, seed=0)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    lr = args.lr if args.lr is not None else (10.0 if args.adam == "linear" else 1e-2)
    cfg = TrainerConfig(lr=lr, grad_clip=1e9, strategy=args.strategy, micro_batch_size=2,
                        max_tokens_per_micro_batch=args.token_budget, lr_warmup_steps=2,
                        zero_stage=args.zero_stage, ppo_mini_batches=args.ppo_mini_batches, bf16=args.bf16,
                        offload_params=args.offload,
                        lora=LoraConfig(enabled=args.lora, rank=4, alpha=8.0, target_modules="q_proj,v_proj,down_proj"))
    torch.manual_seed(0)  # the LoRA A matrices: the same draw on every rank and in one process
    learner = Learner(model, cfg, group_size=3, temperature=1.0, pad_id=tok.pad_token_id, info=info)
    assert learner.strategy == ("none" if args.strategy == "ddp" and info.world == 1 else args.strategy), learner.strategy
    if args.adam == "linear":
        inner = getattr(learner.optimizer, "optimizer", learner.optimizer)  # DeepSpeed's ZeRO optimizer wraps torch's
        assert isinstance(inner, torch.optim.AdamW), type(inner)
        for group in inner.param_groups:
            group["eps"] = 1e3
    if args.load:
        learner.load_state(Path(args.load))
    if args.generate:
        n = 2 + 5 * info.rank  # unequal lengths: per-forward collectives would deadlock here
        with learner.generation_context(), torch.no_grad():
            out = model.generate(torch.tensor([[5, 6, 7]]), do_sample=False, max_new_tokens=n, min_new_tokens=n,
                                 pad_token_id=tok.pad_token_id)
        assert out.shape[1] == 3 + n, out.shape
    losses = []
    for step in range(args.first_step, args.first_step + args.steps):
        mine = [s for group in shard(batch(step), info) for s in group]
        losses.append(learner.step(mine)["loss"])
    if args.save:
        learner.save_state(Path(args.save))
    weights = learner.full_state_dict()
    if info.is_main:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        torch.save({k: v.detach().clone() for k, v in weights.items()}, out / "weights.pt")
        (out / "losses.json").write_text(json.dumps(losses))
    # The learner (a DDP/FSDP/DeepSpeed wrapper with hooks on the group) goes before the group, as in
    # train/helix.py. Kept past it, it was destroyed at main()'s return with the group already gone,
    # and once in CI a DDP rank hung there (at that line) until the 300 s watchdog above.
    del learner, model, weights
    gc.collect()
    shutdown(info)


if __name__ == "__main__":
    main()
