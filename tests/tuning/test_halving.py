"""Successive halving, the one pruning rule of MAMBA and ``sample_posterior``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfp_sgmcmc.tuning import halving as halving_module
from tfp_sgmcmc.tuning.halving import successive_halving


def _fixed(metrics_by_round):
    calls = []

    def run_round(i, survivors):
        calls.append((i, list(survivors)))
        return {a: metrics_by_round[i][a] for a in survivors}

    return run_round, calls


def test_keeps_the_best_floor_m_over_eta_each_round_ties_in_grid_order():
    # 9 arms, eta 3, 2 rounds: round 0 keeps 3, round 1 ranks them.
    r0 = {a: m for a, m in enumerate([5.0, 1.0, 3.0, 1.0, 9.0, 0.5, 7.0, 2.0, 8.0])}
    r1 = {a: m for a, m in enumerate([0, 4.0, 0, 2.0, 0, 2.0, 0, 0, 0])}
    run_round, calls = _fixed([r0, r1])
    out = successive_halving(range(9), 2, 3, run_round)
    # ties (arms 1 and 3 at 1.0) keep grid order; arms 3 and 5 tie in round 1.
    assert calls == [(0, list(range(9))), (1, [5, 1, 3])]
    assert out.ranked == [5, 3, 1]  # round 1: 5 and 3 tie at 2.0, 5 first in S_1
    assert out.best == 5
    assert out.survivors == [list(range(9)), [5, 1, 3]]


def test_nan_ranks_last_and_drop_unusable_removes_non_finite_arms():
    r0 = {0: math.nan, 1: 2.0, 2: math.inf, 3: 1.0}
    run_round, _ = _fixed([r0])
    assert successive_halving(range(4), 1, 2, run_round).ranked == [3, 1, 0, 2]
    assert successive_halving(range(4), 1, 2, run_round, drop_unusable=True).ranked == [3, 1]
    # Every arm unusable: no winner, and no further round is run.
    run_round, calls = _fixed([{0: math.inf, 1: math.nan}, {}])
    out = successive_halving(range(2), 2, 2, run_round, drop_unusable=True)
    assert out.best is None and len(calls) == 1
    # Without dropping, an unusable arm still survives when nothing better is left.
    out = successive_halving(range(2), 1, 2, _fixed([{0: math.inf, 1: math.nan}])[0])
    assert out.best == 0


def test_bad_arguments_are_named():
    run_round, _ = _fixed([{}])
    with pytest.raises(ValueError, match="arms"):
        successive_halving([], 1, 3, run_round)
    with pytest.raises(ValueError, match="eta"):
        successive_halving([0, 1], 1, 1, run_round)
    with pytest.raises(ValueError, match="num_rounds"):
        successive_halving([0, 1], 0, 2, run_round)
    with pytest.raises(ValueError, match="distinct"):
        successive_halving([0, 0], 1, 2, run_round)
    with pytest.raises(ValueError, match=r"no metric for arm\(s\) \[1\]"):
        successive_halving([0, 1], 1, 2, lambda i, s: {0: 1.0})


def test_finds_the_best_arm_of_noisy_rewards_as_the_rule_predicts():
    # 27 arms, true metrics 0..26 with noise shrinking as the per-arm budget grows
    # (sd 1/sqrt(budget)): the rule must return arm 0 far more often than chance,
    # and a rule that kept the worst arms instead (the power check) must not.
    rng = np.random.default_rng(0)

    def run_round(i, survivors):
        return {a: a / 4 + rng.normal(0, 1.0 / 3**i) for a in survivors}

    wins = sum(successive_halving(range(27), 3, 3, run_round).best == 0 for _ in range(200))
    assert wins > 120

    def inverted(i, survivors):
        return {a: -m for a, m in run_round(i, survivors).items()}

    wins = sum(successive_halving(range(27), 3, 3, inverted).best == 0 for _ in range(200))
    assert wins == 0


def test_mamba_and_sample_posterior_use_this_rule(monkeypatch):
    """Both tuners prune with `successive_halving` (a spy counts the calls)."""
    import tfp_sgmcmc.automatic as automatic
    import tfp_sgmcmc.tuning.mamba as mamba

    assert mamba.successive_halving is halving_module.successive_halving
    assert automatic.successive_halving is halving_module.successive_halving
    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs.get("drop_unusable", False))
        return halving_module.successive_halving(*args, **kwargs)

    monkeypatch.setattr(mamba, "successive_halving", spy)
    monkeypatch.setattr(automatic, "successive_halving", spy)

    import tensorflow as tf
    import tensorflow_probability as tfp

    import tfp_sgmcmc as sg

    tfd = tfp.distributions
    est = sg.NoisyGradientEstimator(
        lambda x: -0.5 * tf.reduce_sum(tf.square(x), axis=-1), noise_scale=0.1
    )
    result = sg.tuning.MAMBA(
        sg.tuning.grid(step_size=[1e-3, 0.1, 1.5]), tf.fill([2], tf.constant(3.0, tf.float64)),
        lambda step_size: sg.SGLD(est, step_size), budget=sg.tuning.steps(900),
        progress=False, sampling=sg.tuning.ArmSampling(jit_compile=False),
    ).run()
    assert seen == [False] and result.best_index == 1

    rng = np.random.default_rng(1)
    x = np.ones([100, 1], np.float32)
    y = rng.normal(1.0, 1.0, 100).astype(np.float32)
    joint = sg.JointPosterior(
        tfd.JointDistributionNamedAutoBatched({"mu": tfd.Normal(0.0, 10.0)}),
        lambda p, batch: tfd.Normal(p["mu"][..., None] * batch[0][:, 0], 1.0),
        (x, y),
        batch_size=100,
    )
    sg.sample_posterior(joint, num_results=50, tuning_steps=20, progress=False,
                        jit_compile=False, adapt=False, max_gradient_evaluations=2000)
    assert seen == [False, True]
