"""SGHMC with one minibatch per trajectory against one per leapfrog step: exact laws.

On ``N(0, Σ)`` with a noisy score ``−Pθ + s e`` (``NoisyGradientEstimator``,
whose noise is a function of the seed, as a minibatch is), one SGHMC sample
(momentum refresh, ``order="chen"``, ``L`` leapfrog steps) is linear in θ and
the noises: ``θ' = A θ + B w``. With a batch per leapfrog step ``w`` holds ``L``
independent gradient noises; with one per trajectory the same ``e`` enters all
``L`` steps. Both stationary covariances solve ``C = A C Aᵀ + B Bᵀ``; the
simulated chains must match their own law (z-scores across independent
chains) and the per-trajectory chain must fail the per-leapfrog law (they
differ by far more than 10%).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import tensorflow as tf
import tensorflow_probability as tfp
from _stats import Z, moment_z_scores

import tfp_sgmcmc as sg

SIGMA = np.array([[1.0, 0.9], [0.9, 1.0]])
PREC = np.linalg.inv(SIGMA)
ETA, ALPHA, L, NOISE = 0.01, 0.3, 4, 3.0


def sghmc_stationary_cov(per_trajectory: bool) -> np.ndarray:
    """Propagate θ and v as linear maps of [θ₀, noises] through one sample."""
    d = 2
    n_noise = d + (d if per_trajectory else L * d) + L * d  # v₀, gradient noise, injected ξ
    width = d + n_noise
    theta = np.hstack([np.eye(d), np.zeros((d, n_noise))])
    v = np.zeros((d, width))
    v[:, d : 2 * d] = np.sqrt(ETA) * np.eye(d)  # refresh v ~ N(0, ηT), T = 1
    col = 2 * d
    e_cols = None
    for _ in range(L):
        theta = theta + v
        if per_trajectory:
            if e_cols is None:
                e_cols, col = col, col + d
            ec = e_cols
        else:
            ec, col = col, col + d
        g = -PREC @ theta
        g[:, ec : ec + d] += NOISE * np.eye(d)
        xi = np.zeros((d, width))
        xi[:, col : col + d] = np.sqrt(2 * ALPHA * ETA) * np.eye(d)
        col += d
        v = v + ETA * g - ALPHA * v + xi
    assert col == width
    a, b = theta[:, :d], theta[:, d:]
    return scipy.linalg.solve_discrete_lyapunov(a, b @ b.T)


def _target(t):
    return -0.5 * tf.einsum("...i,ij,...j->...", t, tf.constant(PREC), t)


@tf.function(jit_compile=True)
def _run(per_trajectory, seed):
    est = sg.NoisyGradientEstimator(_target, noise_scale=NOISE)
    kernel = sg.SGHMC(
        est, ETA, num_leapfrog_steps=L, friction=ALPHA, minibatch_per_trajectory=per_trajectory
    )
    return tfp.mcmc.sample_chain(
        400,
        tf.zeros([500, 2], tf.float64),
        kernel=kernel,
        num_burnin_steps=300,
        trace_fn=None,
        seed=seed,
    )


def test_the_two_laws_differ_by_more_than_ten_percent():
    c_leap, c_traj = sghmc_stationary_cov(False), sghmc_stationary_cov(True)
    assert np.all(np.linalg.eigvals(np.linalg.solve(c_leap, c_traj)).real > 1.1)


@pytest.mark.statistical
@pytest.mark.parametrize("per_trajectory", [False, True])
def test_stationary_law_of_each_scheme(seed, per_trajectory):
    own = sghmc_stationary_cov(per_trajectory)
    other = sghmc_stationary_cov(not per_trajectory)
    x = _run(per_trajectory, tf.constant([seed, 7])).numpy()
    z = moment_z_scores(x, own)
    assert np.all(np.abs(z) < Z), np.round(z, 2)
    assert np.max(np.abs(moment_z_scores(x, other)[:3])) > Z  # power: the other scheme's law fails


def test_per_trajectory_uses_one_batch_and_advances_the_epoch_once():
    """With the epoch scheme every leapfrog call sees the trajectory's start
    state and seed, and the epoch position advances by one batch per sample."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, 2))
    batches = []

    def loglik(theta, batch):
        batches.append(batch[0])
        return -0.5 * tf.reduce_sum(tf.square(batch[0] - theta[..., None, :]), -1)

    est = sg.MinibatchEstimator(loglik, sg.InMemoryData((x,), scheme="epoch"), 3)
    kernel = sg.SGHMC(est, 1e-2, num_leapfrog_steps=3, minibatch_per_trajectory=True)
    r = kernel.bootstrap_results(tf.zeros([2], tf.float64))
    start = [t.numpy() for t in r.estimator_state]
    batches.clear()
    _, r = kernel.one_step(tf.zeros([2], tf.float64), r, seed=[1, 2])
    assert len(batches) == 3
    for b in batches[1:]:
        np.testing.assert_array_equal(b.numpy(), batches[0].numpy())
    one = sg.SGHMC(est, 1e-2, num_leapfrog_steps=1, momentum_refresh=False)
    r1 = one.bootstrap_results(tf.zeros([2], tf.float64))
    _, r1 = one.one_step(tf.zeros([2], tf.float64), r1, seed=[1, 2])
    for a, b in zip(r.estimator_state, r1.estimator_state):
        np.testing.assert_array_equal(a.numpy(), b.numpy())  # advanced by one batch
    assert any(not np.array_equal(a, b.numpy()) for a, b in zip(start, r.estimator_state))
    with pytest.raises(ValueError, match="minibatch_per_trajectory"):
        sg.SGHMC(est, 1e-2, minibatch_per_trajectory=1)


def test_per_trajectory_refuses_a_tf_data_source():
    """A ``DatasetData`` yields the next batch on every read, so the ``L`` leapfrog
    steps of a trajectory cannot share one: construction raises instead of silently
    drawing one batch per step, also through wrapping estimators."""
    y = np.repeat(np.arange(4.0), 10)
    ds = tf.data.Dataset.from_tensor_slices(y).batch(10, drop_remainder=True)

    def loglik(theta, batch):
        return -0.5 * tf.square(batch - theta[..., None])

    est = sg.MinibatchEstimator(loglik, sg.DatasetData(ds, num_examples=40), 10)
    wrapped = [
        est,
        sg.SVRGEstimator(est, update_rate=10),
        sg.TransformedEstimator(est, tfp.bijectors.Identity()),
    ]
    for e in wrapped:
        with pytest.raises(ValueError, match="`minibatch_per_trajectory=True`.*DatasetData"):
            sg.SGHMC(e, 1e-3, num_leapfrog_steps=3, minibatch_per_trajectory=True)
        sg.SGHMC(e, 1e-3, num_leapfrog_steps=3)  # the default per-update scheme is fine
    mem = sg.MinibatchEstimator(loglik, y, 10)
    sg.SGHMC(mem, 1e-3, num_leapfrog_steps=3, minibatch_per_trajectory=True)
