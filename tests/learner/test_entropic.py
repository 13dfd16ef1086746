"""TTT-Discover's entropic advantage (trainer.adv_estimator: entropic_adaptive_beta) against values
worked out by hand: the KL target is solved here for q_top (not beta) with scipy, and the
leave-one-out weights are written out from that q in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import brentq

from train.learner import entropic
from train.learner.grpo import compute_advantages, known_estimators, zero_std_fraction

LN2 = math.log(2.0)


def one_outstanding(k: int) -> tuple[float, float]:
    """K-1 equal rewards and one higher: q_top = p, the others (1-p)/(K-1) each, and the KL target
    p ln(K p) + (1-p) ln(K (1-p)/(K-1)) = ln 2 fixes p. With x = e_low / e_top = (1-p) / ((K-1) p):
    the top's leave-one-out mean is x, so A_top = 1/x - 1; a low one's is (K-2 x + 1)/(K-1) of e_top,
    so A_low = x (K-1) / ((K-2) x + 1) - 1."""
    p = brentq(lambda p: p * math.log(k * p) + (1 - p) * math.log(k * (1 - p) / (k - 1)) - LN2, 1.0 / k + 1e-12, 1 - 1e-12)
    x = (1 - p) / ((k - 1) * p)
    return 1 / x - 1, x * (k - 1) / ((k - 2) * x + 1) - 1


def mask(n: int, width: int = 3) -> torch.Tensor:
    return torch.ones((n, width))


@pytest.mark.parametrize("k", [3, 4, 8, 16])
def test_one_outstanding_sample_matches_the_hand_solution(k):
    top, low = one_outstanding(k)
    rewards = torch.tensor([0.3] * (k - 1) + [0.8], dtype=torch.float64)
    adv = compute_advantages(rewards, np.zeros(k, dtype=int), mask(k), entropic.NAME)
    assert adv.dtype == torch.float32 and torch.isfinite(adv).all()
    np.testing.assert_allclose(adv[-1].numpy(), top, rtol=1e-6)
    np.testing.assert_allclose(adv[:-1].numpy(), low, rtol=1e-6)
    assert top > 1.0 and -1.0 < low < 0.0  # the best sample takes most of the weight


def test_k4_worked_example_and_beta():
    """K = 4, rewards (0, 0, 0, 1): p = 0.8025..., x = e^-beta = 0.0779..., A_top = 11.8487, A_low = -0.7980."""
    top, low = one_outstanding(4)
    assert top == pytest.approx(11.8487, abs=1e-4) and low == pytest.approx(-0.7980, abs=1e-4)
    adv, beta = entropic.group_advantages(torch.tensor([0.0, 0.0, 0.0, 1.0]))
    np.testing.assert_allclose(adv.numpy(), [low, low, low, top], rtol=1e-9)
    assert beta == pytest.approx(-math.log(1 / (top + 1)), rel=1e-9)  # x = exp(-beta * spread)


def test_scale_free_rewards_that_differ_in_the_seventh_digit():
    """Circle-packing rewards a 1e-7 apart weigh like (0, 0, 0, 1): the search runs on rewards over their spread."""
    top, low = one_outstanding(4)
    rewards = torch.tensor([2.6359830849] * 3 + [2.6359831849], dtype=torch.float64)
    adv, beta = entropic.group_advantages(rewards)
    np.testing.assert_allclose(adv.numpy(), [low, low, low, top], rtol=1e-6)
    assert beta == pytest.approx(-math.log(1 / (top + 1)) / 1e-7, rel=1e-6)


def test_ties_share_an_advantage():
    """(0, 0, 1): two tied at the bottom get the same value (the K = 3 hand solution). (0, 0, 1, 1, 1):
    three of five tied at the top, so KL <= ln(5/3) < ln 2 for every beta: beta is the search's end,
    the low ones' weight underflows to 0 (A = -1) and a top one's leave-one-out mean is 2/4, A = 1."""
    top, low = one_outstanding(3)
    adv = compute_advantages(torch.tensor([0.0, 0.0, 1.0]), np.zeros(3, dtype=int), mask(3), entropic.NAME)[:, 0]
    np.testing.assert_allclose(adv.numpy(), [low, low, top], rtol=1e-6)
    adv, beta = entropic.group_advantages(torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0]))
    np.testing.assert_allclose(adv.numpy(), [-1.0, -1.0, 1.0, 1.0, 1.0], atol=1e-12)
    assert beta == entropic.BETA_MAX


def test_equal_rewards_give_exactly_zero_and_no_nan():
    for rewards in ([0.7] * 4, [2.6359830849] * 16, [0.0], [-1.5, -1.5]):
        k = len(rewards)
        adv = compute_advantages(torch.tensor(rewards, dtype=torch.float64), np.zeros(k, dtype=int), mask(k), entropic.NAME)
        assert torch.equal(adv, torch.zeros((k, 3))), rewards
    assert zero_std_fraction(torch.tensor([0.7] * 4), np.zeros(4, dtype=int)) == 1.0


def test_a_group_of_two_gets_the_bounded_limit():
    """KL <= ln 2 only as beta -> inf for K = 2; the plain-mean limit is w = (2, 0), A = (+1, -1)."""
    adv, beta = entropic.group_advantages(torch.tensor([0.4, 0.1]))
    assert adv.tolist() == [1.0, -1.0] and beta == math.inf


def test_adaptive_beta_hits_the_kl_target_and_groups_stay_apart():
    """A general group: at the returned beta, KL(softmax(beta r) || uniform) = ln 2 (numpy, not the
    module's helper), and each advantage is exp(beta r_i) / mean_{j != i} exp(beta r_j) - 1."""
    r = np.array([0.1, 0.25, 0.3, 0.4, 0.05, 0.3])
    adv, beta = entropic.group_advantages(torch.tensor(r))
    q = np.exp(beta * (r - r.max()))
    q /= q.sum()
    assert float(np.sum(q * np.log(q * len(r)))) == pytest.approx(LN2, abs=1e-9)
    e = np.exp(beta * (r - r.max()))
    expected = [e[i] / np.delete(e, i).mean() - 1 for i in range(len(r))]
    np.testing.assert_allclose(adv.numpy(), expected, rtol=1e-9)
    # two groups in one batch are computed apart, and the masked tokens stay 0
    groups = np.array([7, 7, 7, 7, 7, 7, 3, 3, 3])
    rewards = torch.tensor(list(r) + [5.0, 5.0, 9.0])
    m = mask(9)
    m[0, 2] = 0
    full = compute_advantages(rewards, groups, m, entropic.NAME)
    np.testing.assert_allclose(full[:6, 0].numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(full[6:, 0].numpy(), entropic.group_advantages(torch.tensor([0.0, 0.0, 1.0]))[0].numpy(),
                               rtol=1e-6)
    assert full[0, 2] == 0 and full[0, 1] == full[0, 0]


def test_selectable_from_config():
    from train.config.config import load_config

    assert entropic.NAME in known_estimators()
    cfg = load_config("configs/quickstart.yaml", [f"trainer.adv_estimator={entropic.NAME}"])
    assert cfg.trainer.adv_estimator == entropic.NAME
