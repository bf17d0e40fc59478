"""Replica-exchange SGLD: a hand-computed step with swaps, mode coverage, the variance helper."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.kernels import replica_exchange

from ._models import LinearGaussianModel, normals_like

Z = 3.3
PREC = np.array([[2.0, 0.6], [0.6, 1.0]])


def _gauss(x):
    return -0.5 * tf.einsum("...i,ij,...j->...", x, tf.constant(PREC), x)


@pytest.mark.parametrize("num_replicas,variance", [(2, 0.0), (3, 0.3), (4, [0.1, 0.2, 0.3])])
def test_step_matches_numpy(rng, seed, num_replicas, variance):
    k, eps, t1, tk = num_replicas, 0.2, 0.7, 5.0
    kernel = sg.RESGLD(
        sg.NoisyGradientEstimator(_gauss),
        eps,
        num_replicas=k,
        max_temperature=tk,
        energy_variance=variance,
        temperature=t1,
    )
    x0 = rng.standard_normal([2, 2])  # two chains
    state = tf.constant(x0)
    r = kernel.bootstrap_results(state)
    temps = t1 * (tk / t1) ** (np.arange(k) / (k - 1))
    np.testing.assert_allclose(r.temperatures.numpy(), temps, rtol=1e-12)
    reps = np.tile(x0[None], [k, 1, 1])
    var = np.broadcast_to(np.asarray(variance, float), [k - 1])
    accepts = np.zeros([k - 1, 2], int)
    swapped_any = False
    for step, s in enumerate(tfp.random.split_seed([seed, 2], n=6, salt="test_resgld")):
        state, r = kernel.one_step(state, r, seed=s)
        noise_seed, _, swap_seed = tfp.random.split_seed(s, n=3, salt="resgld.one_step")
        (xi,) = normals_like([[k, 2, 2]], tf.float64, noise_seed, "resgld.noise")
        reps = reps + eps * (-reps @ PREC) + np.sqrt(2 * eps * temps)[:, None, None] * xi
        energy = 0.5 * np.einsum("kci,ij,kcj->kc", reps, PREC, reps)
        d_inv = 1 / temps[:-1] - 1 / temps[1:]
        log_s = d_inv[:, None] * (energy[:-1] - energy[1:] - (d_inv * var)[:, None])
        u = tf.random.stateless_uniform(
            [k - 1, 2], seed=swap_seed, dtype=tf.float64, alg="philox"
        ).numpy()
        active = np.ones(k - 1, bool) if k == 2 else (np.arange(k - 1) % 2 == step % 2)
        acc = active[:, None] & (np.log(u) < log_s)
        for j in range(k - 1):
            for c in range(2):
                if acc[j, c]:
                    reps[[j, j + 1], c] = reps[[j + 1, j], c]
        accepts += acc
        swapped_any |= acc.any()
        np.testing.assert_allclose(r.replica_states[0].numpy(), reps, rtol=1e-10)
        np.testing.assert_allclose(state.numpy(), reps[0], rtol=1e-10)
        np.testing.assert_allclose(r.grads_target_log_prob[0].numpy(), -reps[0] @ PREC, rtol=1e-10)
        np.testing.assert_array_equal(r.is_swap_accepted.numpy(), acc)
        np.testing.assert_array_equal(r.swap_accepts.numpy(), accepts)
    assert swapped_any  # the swap path was exercised
    np.testing.assert_allclose(r.swap_rates.numpy(), accepts / r.swap_attempts.numpy(), rtol=1e-12)


MODE = 4.0


def _mixture(x):
    """Equal mixture of N(±4, 1) in 1-D (energy barrier ≈ 8 at T = 1)."""
    a = -0.5 * tf.square(x[..., 0] - MODE)
    b = -0.5 * tf.square(x[..., 0] + MODE)
    return tf.reduce_logsumexp(tf.stack([a, b]), 0)


@tf.function(jit_compile=True)
def _run(kernel_name, seed):
    est = sg.NoisyGradientEstimator(_mixture)
    if kernel_name == "resgld":
        kernel = sg.RESGLD(est, 0.05, num_replicas=3, max_temperature=30.0)
    else:
        kernel = sg.SGLD(est, 0.05)
    init = tf.fill([100, 1], tf.constant(-MODE, tf.float64))  # every chain in the left mode
    return tfp.mcmc.sample_chain(
        2000, init, kernel=kernel, num_burnin_steps=500, trace_fn=None, seed=seed
    )


@pytest.mark.statistical
def test_cold_replica_visits_both_modes_in_the_right_proportion(seed):
    """The cold replica's time in the right mode is 1/2 per chain (z-score across
    chains); plain SGLD from the same start never leaves the left mode and
    fails the same check."""
    x = _run("resgld", tf.constant([seed, 1])).numpy()[..., 0]
    right = (x > 0).mean(0)
    m, se = right.mean(), right.std(ddof=1) / np.sqrt(right.size)
    assert abs(m - 0.5) < Z * se, (m, se)
    assert abs(m - 0.55) > Z * se  # power: a 10%-off occupancy fails
    assert abs(np.mean(x * x) - (MODE**2 + 1)) < 0.1 * (MODE**2 + 1)
    sgld = (_run("sgld", tf.constant([seed, 1])).numpy()[..., 0] > 0).mean(0)
    assert abs(sgld.mean() - 0.5) > Z * max(sgld.std(ddof=1), 1e-3) / np.sqrt(sgld.size)


@pytest.mark.slow
def test_estimate_energy_variance_matches_the_closed_form(rng):
    """With-replacement batches: Var[(N/n) Σ_S d_i] = (N²/n) Var_pop(d) for
    d_i = log p(x_i|a) − log p(x_i|b); half of it is the swap correction."""
    model = LinearGaussianModel(num_examples=40, batch_size=5)
    est = model.minibatch_estimator()
    a, b = rng.standard_normal([1, 3]), rng.standard_normal([1, 3])
    d = (
        model.log_likelihood(tf.constant(a), (model.x, model.y))
        - model.log_likelihood(tf.constant(b), (model.x, model.y))
    ).numpy()[0]
    want = 0.5 * 40**2 / 5 * d.var()
    got = replica_exchange.estimate_energy_variance(
        est, tf.constant(a), tf.constant(b), num_batches=400, seed=(3, 4)
    ).numpy()
    assert got.shape == (1,)
    # Relative SE of a variance from 400 draws of a near-Gaussian sum: √(2/399) ≈ 7%.
    assert abs(got[0] / want - 1) < Z * 0.075, (got, want)
    with pytest.raises(ValueError, match="num_batches"):
        replica_exchange.estimate_energy_variance(
            est, tf.constant(a), tf.constant(b), num_batches=1
        )


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_replicas=1), "num_replicas"),
        (dict(max_temperature=0.5), "max_temperature"),
        (dict(energy_variance=-1.0), "energy_variance"),
        (dict(energy_variance=[0.1, 0.2, 0.3]), "energy_variance"),
        (dict(temperature=0.0), "temperature"),
        (dict(max_temperature=[5.0, 10.0]), "max_temperature"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sg.RESGLD(sg.NoisyGradientEstimator(_gauss), 0.1, **kwargs)


def _quartic(x):
    return -tf.reduce_sum(x**4, -1)


def test_a_diverged_hot_replica_is_reported():
    """log π = −x⁴: explicit Euler is unstable once 12εx² > 2, which only the hot
    replica (T_K = 1000) reaches. Its inf/NaN state used to leave ``diverged`` False
    (the cold replica is finite) while every swap was silently rejected."""
    kernel = sg.RESGLD(
        sg.NoisyGradientEstimator(_quartic), 0.05, num_replicas=2, max_temperature=1000.0
    )
    run = tf.function(
        lambda: tfp.mcmc.sample_chain(
            300,
            tf.zeros([1], tf.float64),
            kernel=kernel,
            seed=tf.constant([1, 2]),
            trace_fn=lambda _, r: (
                r.diverged,
                r.replica_states[0][:, 0],
                r.replica_target_log_prob,
                r.replica_grads_target_log_prob[0][:, 0],
            ),
        )
    )
    cold, (diverged, states, lps, grads) = run()
    finite = np.isfinite(states.numpy()) & np.isfinite(lps.numpy()) & np.isfinite(grads.numpy())
    assert np.isfinite(cold.numpy()).all()  # the returned replica stays finite
    assert finite[:, 0].all() and not finite[:, 1].all()  # only the hot replica blows up
    np.testing.assert_array_equal(diverged.numpy(), ~finite.all(1))


def test_diverged_is_per_chain_over_all_replicas():
    kernel = sg.RESGLD(sg.NoisyGradientEstimator(_gauss), 0.1, num_replicas=3)
    state = tf.zeros([4, 2], tf.float64)
    r = kernel.bootstrap_results(state)
    assert r.diverged.shape == [4] and not r.diverged.numpy().any()
    bad = r.replica_states[0].numpy()
    bad[2, 1, 0] = np.nan  # the hottest replica of chain 1
    r = r._replace(replica_states=[tf.constant(bad)])
    _, r = kernel.one_step(state, r, seed=[3, 4])
    np.testing.assert_array_equal(r.diverged.numpy(), [False, True, False, False])
    nan_init = tf.constant([[0.0, 0.0], [np.nan, 0.0], [0.0, 0.0], [0.0, 0.0]], tf.float64)
    r0 = kernel.bootstrap_results(nan_init)
    np.testing.assert_array_equal(r0.diverged.numpy(), [False, True, False, False])


def _independent_estimator(num_examples=200, batch_size=50):
    y = np.random.default_rng(0).normal(size=num_examples)

    def loglik(theta, batch):
        return -0.5 * tf.reduce_sum(tf.square(batch[:, None] - theta[..., None, :]), -1)

    return sg.MinibatchEstimator(
        loglik,
        sg.InMemoryData(y),
        batch_size,
        log_prior_fn=lambda t: -0.5 * tf.reduce_sum(t**2, -1),
        independent_chains=True,
    )


@pytest.mark.parametrize("chain_shape", [[], [4]])
def test_independent_chains_give_every_replica_its_own_batch(chain_shape):
    """With ``independent_chains=True`` the estimator is bootstrapped on the
    ``[K] + state shape`` replica stack: each replica of each chain draws its own
    batch. It used to fail at the first ``one_step`` (estimator state of the chains
    only)."""
    k = 3
    est = _independent_estimator()
    kernel = sg.RESGLD(est, 1e-3, num_replicas=k)
    x = tf.zeros(chain_shape + [2], tf.float64)
    r = kernel.bootstrap_results(x)
    assert r.estimator_state.position.shape == [k] + chain_shape
    # Every replica starts at x, so only the batches make their estimates differ.
    lp = r.replica_target_log_prob.numpy().reshape(k, -1)
    assert len(np.unique(lp)) == lp.size
    np.testing.assert_array_equal(r.target_log_prob.numpy(), r.replica_target_log_prob[0].numpy())
    run = tf.function(
        lambda: tfp.mcmc.sample_chain(
            5, x, kernel=kernel, seed=tf.constant([1, 2]),
            trace_fn=lambda _, r: (r.replica_target_log_prob, r.diverged),
        )
    )
    samples, (lps, diverged) = run()
    assert samples.shape == [5] + chain_shape + [2]
    assert lps.shape == [5, k] + chain_shape
    assert not diverged.numpy().any()
    # The shared-batch estimator on the same data: all replicas see one batch.
    shared = sg.RESGLD(est.with_independent_chains(False), 1e-3, num_replicas=k)
    lp_shared = shared.bootstrap_results(x).replica_target_log_prob.numpy()
    np.testing.assert_array_equal(lp_shared, np.broadcast_to(lp_shared[:1], lp_shared.shape))


def test_independent_replica_batches_are_unbiased():
    """The per-replica batches are draws of the scheme (every row in a batch with
    probability n/N), so the K × C bootstrap estimates at θ = 0 average to the
    full-data log-likelihood."""
    n_total, n, k, chains = 200, 50, 4, 64
    est = _independent_estimator(n_total, n)
    kernel = sg.RESGLD(est, 1e-3, num_replicas=k)
    theta = tf.zeros([chains, 2], tf.float64)
    lp = kernel.bootstrap_results(theta, seed=[5, 6]).replica_target_log_prob.numpy().ravel()
    y = np.random.default_rng(0).normal(size=n_total)
    ell = -0.5 * 2 * y**2  # per-example log-likelihood at θ = 0, d = 2
    mean_want = n_total * ell.mean()
    assert abs(lp.mean() - mean_want) < Z * lp.std(ddof=1) / np.sqrt(lp.size)
