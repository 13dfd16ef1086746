"""Eq. 4 computed by hand in numpy, against our verl-backed loss."""

import numpy as np
import pytest
import torch

from train.learner.grpo import LossSettings, actor_config, compute_advantages, grpo_loss, zero_std_fraction

RNG = np.random.default_rng(0)
LENGTHS = [3, 5, 2, 4, 1, 5]  # response lengths of 6 rollouts, two prompts with G = 3
GROUPS = np.array([0, 0, 0, 1, 1, 1])
REWARDS = np.array([1.0, 2.0, 4.0, 0.5, 0.5, 3.0])


def mask() -> torch.Tensor:
    m = torch.zeros(6, 5)
    for i, n in enumerate(LENGTHS):
        m[i, :n] = 1
    return m


def hand_advantages() -> np.ndarray:
    adv = np.zeros(6)
    for g in (0, 1):
        r = REWARDS[GROUPS == g]
        adv[GROUPS == g] = (r - r.mean()) / (r.std(ddof=1) + 1e-6)  # verl: unbiased std, eps 1e-6
    return adv


def test_grpo_advantage_is_group_normalised_reward_on_every_token():
    adv = compute_advantages(torch.tensor(REWARDS), GROUPS, mask())
    expected = hand_advantages()[:, None] * mask().numpy()
    np.testing.assert_allclose(adv.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_equal_rewards_give_zero_advantage_not_nan():
    rewards = torch.tensor([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    adv = compute_advantages(rewards, GROUPS, mask())
    assert torch.isfinite(adv).all() and adv.abs().max() == 0
    assert zero_std_fraction(rewards, GROUPS) == 1.0
    assert zero_std_fraction(torch.tensor(REWARDS), GROUPS) == 0.0


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_loss_equals_hand_computed_eq4(agg):
    m = mask()
    logp = torch.tensor(RNG.normal(-1.0, 0.3, (6, 5)), dtype=torch.float32)
    old = logp + torch.tensor(RNG.normal(0, 0.3, (6, 5)), dtype=torch.float32)  # ratios span the clip range
    ref = logp + torch.tensor(RNG.normal(0, 0.2, (6, 5)), dtype=torch.float32)
    beta, eps = 1e-3, 0.2
    settings = LossSettings(clip_ratio_low=eps, clip_ratio_high=eps, loss_agg_mode=agg, kl_coef=beta, group_size=3)
    cfg = actor_config(settings, dp_size=1, batch_num_tokens=int(m.sum()), global_batch_size=6)
    adv = compute_advantages(torch.tensor(REWARDS), GROUPS, m)
    loss, metrics = grpo_loss(logp, old, ref, adv, m, None, cfg)

    # Hand computation of -J_GRPO (eq. 4) with the k3 ("low_var_kl") KL estimator.
    lp, op, rp, a, mk = (t.double().numpy() for t in (logp, old, ref, torch.tensor(hand_advantages())[:, None].expand(6, 5), m))
    ratio = np.exp(lp - op)
    assert ((ratio < 1 - eps) | (ratio > 1 + eps))[mk > 0].any(), "test data must exercise clipping"
    surrogate = np.minimum(ratio * a, np.clip(ratio, 1 - eps, 1 + eps) * a)
    kl = np.clip(np.exp(rp - lp) - (rp - lp) - 1, -10, 10)
    per_token = -(surrogate - beta * kl)
    if agg == "token-mean":
        expected = (per_token * mk).sum() / mk.sum()
    else:  # the paper's literal 1/G sum_j 1/|a_j| sum_k
        expected = np.mean([(per_token[i] * mk[i]).sum() / mk[i].sum() for i in range(6)])
    assert loss.item() == pytest.approx(expected, rel=1e-5, abs=1e-7)
    assert metrics["kl"] > 0


def test_entropy_bonus_lowers_the_loss():
    m = mask()
    logp = torch.full((6, 5), -1.0)
    ent = torch.full((6, 5), 2.0)
    adv = compute_advantages(torch.tensor(REWARDS), GROUPS, m)
    base = actor_config(LossSettings(kl_coef=0.0, group_size=3), 1, int(m.sum()), 6)
    bonus = actor_config(LossSettings(kl_coef=0.0, entropy_coeff=0.1, group_size=3), 1, int(m.sum()), 6)
    l0, _ = grpo_loss(logp, logp, None, adv, m, ent, base)
    l1, metrics = grpo_loss(logp, logp, None, adv, m, ent, bonus)
    assert metrics["entropy"] == pytest.approx(2.0)
    assert (l0 - l1).item() == pytest.approx(0.1 * 2.0, rel=1e-5)


def test_other_verl_estimators_are_one_config_line_away():
    adv = compute_advantages(torch.tensor(REWARDS), GROUPS, mask(), estimator="rloo")
    # RLOO: r_i - mean of the other G-1 rewards in the group, scaled by G/(G-1) in verl -> check sign and zero-sum.
    per_seq = adv[:, 0].numpy()
    for g in (0, 1):
        assert abs(per_seq[GROUPS == g].sum()) < 1e-5
    assert per_seq[2] > 0 and per_seq[0] < 0


def test_every_listed_estimator_works_from_outcome_rewards():
    from train.learner.grpo import known_estimators

    names = known_estimators()
    # verl's critic (gae), baseline-model (remax) and log-prob (optimal_token_baseline) estimators
    # need inputs a HELIX step does not have: listing them would pass validation and crash later.
    assert {"grpo", "rloo", "opo"} <= set(names)
    assert not {"gae", "remax", "optimal_token_baseline"} & set(names)
    for name in names:
        adv = compute_advantages(torch.tensor(REWARDS), GROUPS, mask(), estimator=name)
        assert adv.shape == mask().shape and torch.isfinite(adv).all(), name


@pytest.mark.parametrize("high, expected, clipped", [(0.2, -1.2, 1.0), (0.28, -1.25, 0.0)])
def test_clip_higher_lets_a_positive_advantage_ratio_grow_further(high, expected, clipped):
    """Vanilla PPO clip with DAPO's asymmetric range: token loss = -A * min(r, clip(r, 1-e_low, 1+e_high)).
    By hand, r = 1.25 and A = 1: symmetric e = 0.2 clips to 1.2; e_high = 0.28 leaves 1.25."""
    cfg = actor_config(LossSettings(clip_ratio_low=0.2, clip_ratio_high=high, kl_coef=0.0, group_size=1), 1, 1, 1)
    log_prob = torch.tensor([[np.log(1.25)]])
    loss, parts = grpo_loss(log_prob, torch.zeros(1, 1), None, torch.ones(1, 1), torch.ones(1, 1), None, cfg)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert parts["clip_frac"] == pytest.approx(clipped)


# --- exact advantages at realistic reward values -------------------------------------------

RECORD = 2.6359830849  # the HELIX circle-packing record


def _mask(n: int, width: int = 4) -> torch.Tensor:
    return torch.ones(n, width)


@pytest.mark.parametrize("value, g", [(RECORD, 16), (RECORD, 8), (2.6359830849 * 1.0000001, 3), (11.873462, 16), (0.1, 7)])
def test_a_group_of_equal_rewards_gets_exactly_zero_advantage(value, g):
    # float32 verl math gave +0.1913 for sixteen copies of the record: its mean is one ulp off.
    rewards = torch.tensor([value] * g, dtype=torch.float64)
    adv = compute_advantages(rewards, np.zeros(g, dtype=int), _mask(g))
    assert torch.equal(adv, torch.zeros(g, 4))
    assert zero_std_fraction(rewards, np.zeros(g, dtype=int)) == 1.0


def test_near_ties_keep_their_order_and_spacing():
    # 1e-7 apart at 2.636 is below float32 resolution (ulp 2.4e-7): float32 math gave [-0.20, 0, 0, 0.20].
    rewards = torch.tensor([RECORD + k * 1e-7 for k in range(4)], dtype=torch.float64)
    adv = compute_advantages(rewards, np.zeros(4, dtype=int), _mask(4))[:, 0].double().numpy()
    r = rewards.numpy()
    expected = (r - r.mean()) / (r.std(ddof=1) + 1e-6)  # float64 reference, verl's formula
    np.testing.assert_allclose(adv, expected, rtol=1e-5)
    assert np.all(np.diff(adv) > 0)
    np.testing.assert_allclose(np.diff(adv), np.full(3, np.diff(adv).mean()), rtol=1e-4)  # evenly spaced in, evenly out
    assert zero_std_fraction(rewards, np.zeros(4, dtype=int)) == 0.0


def test_symbolic_regression_scale_rewards_match_a_float64_reference():
    r = np.array([11.873462, 11.873461, 12.402718, 0.0, 11.873462, 3.1415926, 3.1415926, 3.1415926])
    groups = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    r[4] = 3.1415926  # group 1 is four equal rewards
    adv = compute_advantages(torch.tensor(r), groups, _mask(8))[:, 0].double().numpy()
    g0 = r[:4]
    np.testing.assert_allclose(adv[:4], (g0 - g0.mean()) / (g0.std(ddof=1) + 1e-6), rtol=1e-6)
    assert adv[0] > adv[1]  # 1e-6 apart at 11.87: kept apart
    assert np.all(adv[4:] == 0.0)
    assert zero_std_fraction(torch.tensor(r), groups) == 0.5


def test_zero_std_fraction_counts_exactly_the_tied_groups():
    r = torch.tensor([RECORD] * 4 + [RECORD, RECORD, RECORD, RECORD + 1e-9] + [0.0] * 4, dtype=torch.float64)
    groups = np.repeat([5, 9, 2], 4)  # group ids need not be 0..n-1
    assert zero_std_fraction(r, groups) == pytest.approx(2 / 3)
    adv = compute_advantages(r, groups, _mask(12))[:, 0]
    assert torch.all(adv[:4] == 0) and torch.all(adv[8:] == 0) and torch.all(adv[4:8] != 0)


@pytest.mark.parametrize("estimator", ["grpo_vectorized", "rloo", "opo"])
def test_other_group_relative_estimators_also_give_ties_exactly_zero(estimator):
    rewards = torch.tensor([RECORD] * 16 + [RECORD + k * 1e-3 for k in range(16)], dtype=torch.float64)
    groups = np.repeat([0, 1], 16)
    adv = compute_advantages(rewards, groups, _mask(32), estimator=estimator)
    assert torch.equal(adv[:16], torch.zeros(16, 4))
    assert torch.all(adv[16:, 0].diff() > 0)
