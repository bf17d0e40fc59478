"""BAOAB and BADODAB: hand-computed steps, exact stationary laws, thermostat fixed point.

* One-step replays in NumPy (float64, exact score) of both splittings.
* BAOAB on ``N(0, Σ)`` with exact gradients: the linear recursion
  ``z' = M z + N ξ`` of ``z = (q, p)`` has the stationary covariance of the
  discrete Lyapunov equation ``C = M C Mᵀ + N Nᵀ``, which is in closed form
  ``Cov q = T Σ`` (exact for every stable h, Leimkuhler & Matthews 2013) and
  ``Cov p = T (I − h²P/4)``; checked against scipy's solver, then by simulation
  with z-scores from the spread across independent chains, with a power check
  (a target with a 10% larger covariance fails).
* BADODAB's thermostat mean equals the friction its noise implies,
  ``⟨ξ⟩ = (σ_A² + h s²)/(2T) = A + h s²/(2T)`` (Leimkuhler & Shang 2016), with
  exact and with noisy gradients; 10%-off values fail. The step is small
  (h = 0.05) so the O(h²) bias of the discretised chain (≈ 0.2% of ⟨ξ⟩,
  measured with a NumPy replica of the recursion) is below the standard error.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import tensorflow as tf
import tensorflow_probability as tfp
from _stats import Z, moment_z_scores

import tfp_sgmcmc as sg

from ._models import normals_like

SIGMA = np.array([[1.0, 0.9], [0.9, 1.0]])
PREC = np.linalg.inv(SIGMA)
I2 = np.eye(2)


def _target(prec):
    return lambda t: -0.5 * tf.einsum("...i,ij,...j->...", t, prec, t)


def _seeds(seed, n):
    return [
        tfp.random.sanitize_seed(s)
        for s in tfp.random.split_seed([seed, 42], n=n, salt="test_splitting")
    ]


def _ou(p, gamma, rate, h, xi):
    x = 2 * gamma * h
    return np.exp(-gamma * h) * p + np.sqrt(rate * h * (-np.expm1(-x)) / x) * xi


@pytest.mark.parametrize("temperature", [1.0, 0.3])
def test_baoab_step_matches_numpy(rng, seed, temperature):
    h, gamma = 0.2, 1.3
    kernel = sg.BAOAB(
        sg.NoisyGradientEstimator(_target(tf.constant(PREC))),
        h,
        friction=gamma,
        temperature=temperature,
    )
    q = rng.standard_normal([3, 2])
    state = tf.constant(q)
    results = kernel.bootstrap_results(state)
    p = None
    for k, s in enumerate(_seeds(seed, 3)):
        state, results = kernel.one_step(state, results, seed=s)
        p_seed, noise_seed, _ = tfp.random.split_seed(s, n=3, salt="baoab.one_step")
        if k == 0:
            (z0,) = normals_like([[3, 2]], tf.float64, p_seed, "p0")
            p = np.sqrt(temperature) * z0
        (xi,) = normals_like([[3, 2]], tf.float64, noise_seed, "o")
        p = p + h / 2 * (-q @ PREC)
        q = q + h / 2 * p
        p = _ou(p, gamma, 2 * gamma * temperature, h, xi)
        q = q + h / 2 * p
        p = p + h / 2 * (-q @ PREC)
        np.testing.assert_allclose(state.numpy(), q, rtol=1e-10)
        np.testing.assert_allclose(results.momentum[0].numpy(), p, rtol=1e-10)
        np.testing.assert_allclose(results.grads_target_log_prob[0].numpy(), -q @ PREC, rtol=1e-10)


def test_badodab_step_matches_numpy(rng, seed):
    h, a, mu, temp = 0.1, 0.7, 2.0, 0.8
    kernel = sg.BADODAB(
        sg.NoisyGradientEstimator(_target(tf.constant(PREC))),
        h,
        diffusion=a,
        thermostat_mass=mu,
        temperature=temp,
    )
    q = rng.standard_normal([3, 2])
    state = tf.constant(q)
    results = kernel.bootstrap_results(state)
    np.testing.assert_allclose(results.thermostat[0].numpy(), [a] * 3)
    xi_t = np.full(3, a)
    p = None
    for k, s in enumerate(_seeds(seed, 3)):
        state, results = kernel.one_step(state, results, seed=s)
        p_seed, noise_seed, _ = tfp.random.split_seed(s, n=3, salt="badodab.one_step")
        if k == 0:
            (z0,) = normals_like([[3, 2]], tf.float64, p_seed, "p0")
            p = np.sqrt(temp) * z0
        (eta,) = normals_like([[3, 2]], tf.float64, noise_seed, "o")
        p = p + h / 2 * (-q @ PREC)
        q = q + h / 2 * p
        xi_t = xi_t + h / (2 * mu) * ((p * p).sum(1) - 2 * temp)
        p = _ou(p, xi_t[:, None], 2 * a * temp, h, eta)
        xi_t = xi_t + h / (2 * mu) * ((p * p).sum(1) - 2 * temp)
        q = q + h / 2 * p
        p = p + h / 2 * (-q @ PREC)
        np.testing.assert_allclose(state.numpy(), q, rtol=1e-10)
        np.testing.assert_allclose(results.momentum[0].numpy(), p, rtol=1e-10)
        np.testing.assert_allclose(results.thermostat[0].numpy(), xi_t, rtol=1e-10)


def test_ornstein_uhlenbeck_step_limits():
    p, xi = tf.constant([1.0, -2.0], tf.float64), tf.constant([0.5, 0.3], tf.float64)
    # γ → 0: a Brownian increment σ√h ξ; γ < 0 (a negative thermostat) stays finite.
    out = sg.integrators.ornstein_uhlenbeck_step(p, tf.constant(0.0, tf.float64), 2.0, 0.1, xi)
    np.testing.assert_allclose(out.numpy(), p.numpy() + np.sqrt(0.2) * xi.numpy(), rtol=1e-12)
    out = sg.integrators.ornstein_uhlenbeck_step(p, tf.constant(-0.5, tf.float64), 2.0, 0.1, xi)
    np.testing.assert_allclose(out.numpy(), _ou(p.numpy(), -0.5, 2.0, 0.1, xi.numpy()))


# --------------------------------------------------------------------------- #
# BAOAB: the exact stationary law of the discretised chain.
# --------------------------------------------------------------------------- #

H, GAMMA, TEMP = 0.3, 1.0, 1.0


def baoab_stationary_cov(prec, h, gamma, temp):
    """Stationary covariance of ``z = (q, p)`` (p after the closing B), via scipy."""
    zero = np.zeros((2, 2))
    b = np.block([[I2, zero], [-h / 2 * prec, I2]])
    a = np.block([[I2, h / 2 * I2], [zero, I2]])
    c = np.exp(-gamma * h)
    o = np.block([[I2, zero], [zero, c * I2]])
    noise = np.vstack([zero, np.sqrt(temp * (1 - c * c)) * I2])
    m = b @ a @ o @ a @ b
    n = b @ a @ noise
    return scipy.linalg.solve_discrete_lyapunov(m, n @ n.T)


@pytest.mark.parametrize("h,gamma,temp", [(0.3, 1.0, 1.0), (0.6, 0.2, 0.5), (0.1, 5.0, 2.0)])
def test_baoab_lyapunov_solution_has_the_closed_form(h, gamma, temp):
    cov = baoab_stationary_cov(PREC, h, gamma, temp)
    np.testing.assert_allclose(cov[:2, :2], temp * SIGMA, rtol=1e-9)
    np.testing.assert_allclose(cov[2:, 2:], temp * (I2 - h * h * PREC / 4), rtol=1e-9)
    np.testing.assert_allclose(cov[:2, 2:], 0.0, atol=1e-9)


@tf.function(jit_compile=True)
def _run_baoab(prec, seed):
    est = sg.NoisyGradientEstimator(_target(prec))
    return tfp.mcmc.sample_chain(
        1000,
        tf.zeros([1000, 2], tf.float64),
        kernel=sg.BAOAB(est, H, friction=GAMMA),
        num_burnin_steps=200,
        trace_fn=lambda _, r: r.momentum[0],
        seed=seed,
    )


@pytest.mark.statistical
def test_baoab_stationary_law_on_a_gaussian(seed):
    cov = baoab_stationary_cov(PREC, H, GAMMA, TEMP)
    q, p = (t.numpy() for t in _run_baoab(tf.constant(PREC), tf.constant([seed, 1])))
    zq, zp = moment_z_scores(q, cov[:2, :2]), moment_z_scores(p, cov[2:, 2:])
    assert np.all(np.abs(zq) < Z), zq
    assert np.all(np.abs(zp) < Z), zp
    # Power: a target whose covariance is 10% too large fails the same check.
    q_wrong, _ = (
        t.numpy()
        for t in _run_baoab(tf.constant(np.linalg.inv(1.1 * SIGMA)), tf.constant([seed, 2]))
    )
    assert np.max(np.abs(moment_z_scores(q_wrong, cov[:2, :2])[:3])) > Z


# --------------------------------------------------------------------------- #
# BADODAB: ⟨ξ⟩ = A + h s² / (2T).
# --------------------------------------------------------------------------- #

BH, BA, BMU = 0.05, 1.0, 1.0


@tf.function(jit_compile=True)
def _run_badodab(noise_scale, seed):
    est = sg.NoisyGradientEstimator(_target(tf.constant(PREC)), noise_scale=noise_scale)
    kernel = sg.BADODAB(est, BH, diffusion=BA, thermostat_mass=BMU)
    return tfp.mcmc.sample_chain(
        2000,
        tf.zeros([400, 2], tf.float64),
        kernel=kernel,
        num_burnin_steps=1000,
        trace_fn=lambda _, r: r.thermostat[0],
        seed=seed,
    )


@pytest.mark.statistical
@pytest.mark.parametrize("noise_scale", [0.0, 3.0])
def test_badodab_thermostat_mean_is_the_friction_its_noise_implies(seed, noise_scale):
    _, xi = _run_badodab(tf.constant(noise_scale, tf.float64), tf.constant([seed, 3]))
    per_chain = xi.numpy().mean(0)
    mean, se = per_chain.mean(), per_chain.std(ddof=1) / np.sqrt(per_chain.size)
    want = BA + BH * noise_scale**2 / 2.0
    assert abs(mean - want) < Z * se, (mean, want, se)
    for wrong in (0.9 * want, 1.1 * want):  # power: 10%-off fixed points fail
        assert abs(mean - wrong) > Z * se
