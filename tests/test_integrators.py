"""Exact tests of the pure update rules against hand-written NumPy steps (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc import integrators

SHAPE = (3, 4)  # 3 chains × 4 coordinates


def _arrays(rng, n):
    return [rng.standard_normal(SHAPE) for _ in range(n)]


@pytest.mark.parametrize("temperature", [1.0, 0.3, 0.0])
def test_langevin_step_plain(rng, temperature):
    theta, g, xi = _arrays(rng, 3)
    eps = 0.07
    got = integrators.langevin_step(theta, g, tf.constant(eps, tf.float64),
                                    tf.constant(temperature, tf.float64), xi)
    want = theta + eps * g + np.sqrt(2 * eps * temperature) * xi
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)


def test_langevin_step_preconditioned(rng):
    theta, g, xi = _arrays(rng, 3)
    precond = rng.uniform(0.1, 3.0, SHAPE)
    eps, temp = 0.05, 0.8
    got = integrators.langevin_step(theta, g, tf.constant(eps, tf.float64),
                                    tf.constant(temp, tf.float64), xi, precond)
    want = theta + eps * precond * g + np.sqrt(2 * eps * temp * precond) * xi
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)


def test_langevin_h_form_equivalence(rng):
    """Welling & Teh's h form θ + (h/2)g + √h ξ is the ε form with h = 2ε."""
    theta, g, xi = _arrays(rng, 3)
    h = 0.02
    got = integrators.langevin_step(theta, g, tf.constant(h / 2, tf.float64),
                                    tf.constant(1.0, tf.float64), xi)
    np.testing.assert_allclose(got.numpy(), theta + h / 2 * g + np.sqrt(h) * xi, rtol=1e-12)


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_sghmc_momentum_step(rng, temperature):
    v, g, xi = _arrays(rng, 3)
    eta, alpha, beta = 0.01, 0.1, 0.04
    got = integrators.sghmc_momentum_step(
        v, g, tf.constant(eta, tf.float64), tf.constant(alpha, tf.float64),
        tf.constant(beta, tf.float64), tf.constant(temperature, tf.float64), xi,
    )
    want = v + eta * g - alpha * v + np.sqrt(2 * (alpha - beta) * eta * temperature) * xi
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)


def test_sgnht_momentum_step_broadcasts_one_thermostat_per_chain(rng):
    v, g, xi = _arrays(rng, 3)
    alpha = rng.uniform(-0.1, 0.3, (SHAPE[0], 1))  # one per chain, broadcast over coordinates
    h, a, temp = 0.01, 0.05, 0.7
    got = integrators.sgnht_momentum_step(
        v, alpha, g, tf.constant(h, tf.float64), tf.constant(a, tf.float64),
        tf.constant(temp, tf.float64), xi,
    )
    want = v - alpha * v + h * g + np.sqrt(2 * a * h * temp) * xi
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("event_ndims", [0, 1, 2])
def test_sgnht_thermostat_step(rng, event_ndims):
    v = rng.standard_normal((3, 4, 5))
    batch_shape = v.shape[: v.ndim - event_ndims]
    alpha = rng.standard_normal(batch_shape)
    h, temp = 0.02, 1.3
    got = integrators.sgnht_thermostat_step(
        alpha, v, tf.constant(h, tf.float64), tf.constant(temp, tf.float64), event_ndims
    )
    axes = tuple(range(v.ndim - event_ndims, v.ndim))
    ke = np.mean(v**2, axis=axes) if axes else v**2  # vᵀv / D per chain
    np.testing.assert_allclose(got.numpy(), alpha + ke - h * temp, rtol=1e-12)
    assert got.shape == batch_shape


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_integrators_keep_dtype(dtype):
    x = tf.ones([2, 3], dtype)
    s = tf.constant(0.1, dtype)
    assert integrators.langevin_step(x, x, s, s, x).dtype == dtype
    assert integrators.sghmc_momentum_step(x, x, s, s, s * 0, s, x).dtype == dtype
    assert integrators.sgnht_momentum_step(x, s, x, s, s, s, x).dtype == dtype
    assert integrators.sgnht_thermostat_step(tf.ones([2], dtype), x, s, s, 1).dtype == dtype
