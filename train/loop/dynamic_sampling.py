"""Dynamic sampling (``trainer.dynamic_sampling``, DAPO): refill the batch with groups that teach.

A group whose advantages are all 0 (every child equally good, equally invalid, or equally a
repeat) adds no policy gradient: it was paid for in generation and evaluation and then contributes
nothing but the KL term. With dynamic sampling on, after an epoch's B groups are evaluated the loop
draws more parents from P_t, generates and evaluates their groups, and repeats until B groups have
spread or ``max_rounds`` extra rounds are spent (or ``run.max_evaluations`` leaves no room for a round);
the step trains on the first B groups with spread, in job order. Every child of every round is
archived and joins selection as usual: dropping a group only keeps it out of the update.

Spread is judged on the advantages the estimator itself computes from the trusted rewards
(train.learner.grpo.groups_with_spread), not on raw reward equality: a shaped reward whose values
differ in their last digits has no spread after verl's epsilon either (verl-recipe PR #125 is what
filtering on another signal does). Rank 0 decides each round and every rank follows (the prompts
are broadcast, generation is sharded as usual), so no rank waits on another; a rank left with no
group to train on joins the step with one sample without a reward (no tokens, no gradient), and
the learner pads its micro-batches to the others' count (train.learner.learner._chunks).
"""

from __future__ import annotations

import time

from train.learner.distributed import broadcast
from train.learner.grpo import groups_with_spread

DROPPED = "dynamic sampling: the group had no spread (or the batch was full), so the update left it out"


def plan_round(spread: list[bool], batch: int, rounds_done: int, max_rounds: int, world: int,
               room: int | None = None) -> tuple[list[int], int]:
    """Which groups the step trains on so far (the first ``batch`` with spread, by index) and how many
    prompts the next round draws (0: stop). A round draws what is missing divided by the spread rate
    seen so far (so one round usually fills the batch), at least what is missing and one per rank,
    at most ``batch``; with no spread seen yet, ``batch``. ``room``: the prompts run.max_evaluations still
    allows (None: no budget); a round that cannot give every rank one stops instead."""
    kept = [j for j, s in enumerate(spread) if s][:batch]
    missing = batch - len(kept)
    if missing <= 0 or rounds_done >= max_rounds:
        return kept, 0
    with_spread = sum(spread)
    # missing / (with_spread / len(spread)), rounded up in integers: a float quotient that should be exact
    # (11 / (22/60) = 30.000000000000004) would draw one prompt more than the rule says
    wanted = batch if not with_spread else min(batch, -(-missing * len(spread) // with_spread))
    count = max(wanted, missing, world)
    if room is not None:
        count = min(count, room)
    return kept, count if count >= world else 0


def _room(run, epoch) -> int | None:
    """Prompts a round may still draw within run.max_evaluations (children archived by earlier epochs, plus
    this epoch's so far); None without a budget."""
    budget = run.cfg.run.max_evaluations
    if not budget:
        return None
    spent = run.main.evo.archive.count() - 1 + len(epoch.children)  # the starter is no child
    return max(budget - spent, 0) // run.cfg.rollout.group_size


def refill(run, epoch) -> None:
    """Extra rounds of ``run.prompts``, ``run.generate`` and ``run.evaluate`` (train.loop.epoch_loop.HelixRun)
    until the batch holds B groups with spread or the cap; sets ``epoch.trained`` and ``epoch.sampling``."""
    cfg = run.cfg.trainer
    ds = cfg.dynamic_sampling
    rounds, extra_gen_s, extra_s = 0, 0.0, 0.0
    while True:
        plan = None
        if run.main:
            spread = groups_with_spread(epoch.rewards, cfg.adv_estimator, cfg.norm_adv_by_std, ds.tolerance)
            plan = (*plan_round(spread, cfg.prompts_per_epoch, rounds, ds.max_rounds, run.info.world, _room(run, epoch)),
                    spread)
        kept, count, spread = broadcast(plan, run.info)
        if not count:
            break
        rounds += 1
        start, gen_before = time.perf_counter(), epoch.times.get("gen_time_s", 0.0)
        run.prompts(epoch, count)
        run.generate(epoch)
        run.evaluate(epoch)
        extra_s += time.perf_counter() - start
        extra_gen_s += epoch.times.get("gen_time_s", 0.0) - gen_before
    epoch.trained = set(kept)
    epoch.sampling = dict(ds_rounds=rounds, ds_groups=len(spread), ds_groups_trained=len(kept),
                          ds_groups_no_spread=len(spread) - sum(spread),
                          # the table's 0-std: the generated groups' share without spread (what was paid for)
                          zero_std_frac=(len(spread) - sum(spread)) / len(spread),
                          ds_extra_gen_time_s=extra_gen_s, ds_extra_time_s=extra_s)
