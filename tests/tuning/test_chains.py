"""Independent chains per arm, the metric's standard error and the pick's confidence."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
from tfp_sgmcmc.diagnostics import kernel_stein_discrepancy
from tfp_sgmcmc.tuning.executors import evaluate_metric_with_se
from tfp_sgmcmc.tuning.runner import ArmRunner, RunOutput

N, D = 64, 2


def _problem(rng, independent=True):
    x = rng.standard_normal((N, D))

    def ll(theta, batch):
        return -0.5 * tf.reduce_sum(tf.square(batch - theta[..., tf.newaxis, :]), -1)

    return sg.MinibatchEstimator(ll, x, 8, independent_chains=independent), x


def test_mamba_with_chains_per_arm(rng):
    est, x = _problem(rng)
    res = tu.MAMBA(
        tu.grid(step_size=[1e-3, 3e-3, 1e-2, 3e-1]),
        tf.zeros([D], tf.float64),
        tu.KernelSpec(sg.SGLD, est),
        budget=tu.steps(2400),
        eta=2,
        seed=1,
        progress=False,
        sampling=tu.ArmSampling(chains_per_arm=3, jit_compile=False),
    ).run()
    assert res.chains_per_arm == 3
    r0 = [r for r in res.records if r.round == 0]
    # Steps count every chain: r_0 = 2400 / (4 · 2) = 300 chain-steps = 100 steps per chain.
    assert all(r.steps == 100 for r in r0)
    assert all(r.spent == 300 for r in r0)
    finite = [r for r in res.records if math.isfinite(r.metric)]
    assert finite and all(math.isfinite(r.metric_se) and r.metric_se > 0 for r in finite)
    assert res.best_samples.shape[1:] == (3, D)  # [m, C, d]
    assert np.asarray(res.best_state).shape == (3, D)
    text = res.pick_confidence()
    assert "±" in text and "SE" in text
    assert "±" in res.to_markdown()


def test_short_screening_round_scores_each_chains_last_state(rng):
    """C chains split an arm's budget: in a screening round, fewer than `thin` steps per
    chain still give one sample per chain (its last state)."""
    est, _ = _problem(rng)
    start = tf.zeros([D], tf.float64)

    def run(chains, screening=True):
        runner = ArmRunner(
            lambda step_size: sg.SGLD(est, step_size),
            [{"step_size": 1e-2}],
            start,
            thin=10,
            seed=3,
            chains_per_arm=chains,
            jit_compile=False,
        )
        return runner, runner.run(0, 4 * chains, tu.steps(1), screening=screening)

    runner, out = run(4)  # 4 steps per chain < thin = 10
    assert out.steps == 4 and not out.diverged
    assert out.samples[0].shape == (1, 4, D)  # one sample (the last state) per chain
    np.testing.assert_array_equal(out.samples[0][0], runner.arm_states[0].state[0])
    assert out.target_log_prob.shape == (1, 4)
    # The chains moved and differ from each other (independent minibatches and noise).
    assert np.all(np.abs(out.samples[0][0]) > 0)
    assert np.unique(out.samples[0][0][:, 0]).size == 4
    value, se, _, note = evaluate_metric_with_se(tu.KSDMetric(), out, est)
    assert math.isfinite(value) and math.isfinite(se) and note == ""
    # One chain, or a deciding round, keeps Algorithm 1's rule: no thinned sample,
    # an infinite metric.
    for chains, screening in ((1, True), (4, False)):
        _, short = run(chains, screening)
        assert short.steps == 4 and short.samples[0].shape[0] == 0
        value, _, _, note = evaluate_metric_with_se(tu.KSDMetric(), short, est)
        assert value == math.inf and "no thinned sample" in note


def test_chains_per_arm_needs_independent_batches(rng):
    est, _ = _problem(rng, independent=False)
    with pytest.raises(ValueError, match="independent_chains=True"):
        tu.MAMBA(
            tu.grid(step_size=[1e-3, 1e-2]),
            tf.zeros([D], tf.float64),
            tu.KernelSpec(sg.SGLD, est),
            budget=tu.steps(400),
            eta=2,
            progress=False,
            sampling=tu.ArmSampling(chains_per_arm=2),
        )
    with pytest.raises(ValueError, match="chains_per_arm"):
        tu.MAMBA(
            tu.grid(step_size=[1e-3, 1e-2]),
            tf.zeros([D], tf.float64),
            tu.KernelSpec(sg.SGLD, est),
            budget=tu.steps(400),
            eta=2,
            progress=False,
            sampling=tu.ArmSampling(chains_per_arm=0),
        )


@pytest.mark.parametrize("preconditioner", [None, "sample"])
def test_ksd_jackknife_matches_leave_one_group_out(rng, preconditioner):
    """The jackknife equals leave-one-group-out KSDs, the sample metric re-estimated
    from the remaining groups."""
    est, x = _problem(rng)
    metric = tu.KSDMetric(preconditioner=preconditioner)
    groups = [[rng.standard_normal((m, D)) * 0.3 + x.mean(0)] for m in (5, 7, 6)]
    value, se = metric.value_and_se(groups, est)
    pooled = np.concatenate([g[0] for g in groups])

    def ksd(s):
        scores = metric.scores([s], est)[0]
        return float(
            kernel_stein_discrepancy(
                tf.constant(s), tf.constant(scores), preconditioner=preconditioner
            )
        )

    assert value == pytest.approx(ksd(pooled), rel=1e-10)
    loo = np.array(
        [ksd(np.concatenate([g[0] for j, g in enumerate(groups) if j != k])) for k in range(3)]
    )
    expected = math.sqrt(2 / 3 * np.sum((loo - loo.mean()) ** 2))
    assert se == pytest.approx(expected, rel=1e-8)


def test_metric_se_of_one_chain_uses_blocks_and_plain_metrics_use_chains(rng):
    est, x = _problem(rng)
    samples = rng.standard_normal((40, D)) * 0.2 + x.mean(0)
    out = RunOutput([samples], np.zeros(40), 400, 1.0, 0.0, False)
    value, se, _, note = evaluate_metric_with_se(tu.KSDMetric(), out, est)
    assert note == "" and math.isfinite(se) and se > 0
    # The value is the KSD of the whole chain, as without a standard error.
    assert value == pytest.approx(tu.KSDMetric()([samples], {}, est), rel=1e-10)
    # A metric without value_and_se: mean over chains ± sd/√C.
    chains = rng.standard_normal((10, 4, D))
    out = RunOutput([chains], np.zeros((10, 4)), 100, 1.0, 0.0, False, num_chains=4)
    metric = tu.FunctionMetric(lambda s: float(np.mean(s[0][:, 0])))
    value, se, _, _ = evaluate_metric_with_se(metric, out, est)
    per = chains[:, :, 0].mean(0)
    assert value == pytest.approx(per.mean())
    assert se == pytest.approx(per.std(ddof=1) / 2.0)
