"""The Laplace curvature is the true second derivative, also through lgamma/lbeta terms.

Shape parameters (a Student-t ν, a Gamma concentration, a negative-binomial total
count) enter the log-density through ``lgamma``/``lbeta``. The dense Hessian and the
Hutchinson product are checked against central finite differences of the score.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.estimators.laplace import (
    _flat_fns,
    _hessian,
    _hutchinson_diagonal,
    laplace_approximation,
)

tfd = tfp.distributions

_RNG = np.random.default_rng(7)
_Y_T = _RNG.standard_t(4.0, size=60)
_Y_GAMMA = _RNG.gamma(3.0, size=60)
_Y_NB = _RNG.negative_binomial(5, 0.4, size=60).astype(np.float64)
#: (log ν, Student-t location, log Gamma concentration, log NB total count), near the mode.
_X0 = np.array([np.log(4.0), 0.05, np.log(3.0), np.log(5.0)])


def _shape_estimator() -> sg.MinibatchEstimator:
    """Student-t ν, Gamma concentration and NB total count, all in one log-density."""
    one = tf.constant(1.0, tf.float64)

    def log_prior(parts):
        x = parts[0]
        nu, loc = tf.exp(x[..., 0:1]), x[..., 1:2]
        alpha, r = tf.exp(x[..., 2:3]), tf.exp(x[..., 3:4])
        lp = tf.reduce_sum(tfd.StudentT(df=nu, loc=loc, scale=one).log_prob(_Y_T), -1)
        lp += tf.reduce_sum(tfd.Gamma(concentration=alpha, rate=one).log_prob(_Y_GAMMA), -1)
        lp += tf.reduce_sum(
            tfd.NegativeBinomial(total_count=r, logits=tf.constant(0.4, tf.float64)).log_prob(
                _Y_NB
            ),
            -1,
        )
        # A coupling term, so the Hessian has off-diagonal entries to get right too.
        return lp + 0.5 * x[..., 0] * x[..., 2] - 0.5 * tf.reduce_sum(x * x, -1) / 25.0

    def log_lik(parts, batch):
        return tf.zeros(tf.concat([tf.shape(parts[0])[:-1], [tf.shape(batch)[0]]], 0), tf.float64)

    return sg.MinibatchEstimator(log_lik, np.zeros([1, 1]), 1, log_prior_fn=log_prior)


def _fd_hessian(est: sg.MinibatchEstimator, x: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Central differences of the full-data score, column by column."""
    flat_grad, _ = _flat_fns(est, [tf.constant(x)])
    cols = []
    for e in np.eye(x.size):
        up = np.asarray(flat_grad(tf.constant(x + h * e)))
        down = np.asarray(flat_grad(tf.constant(x - h * e)))
        cols.append((up - down) / (2 * h))
    fd = np.stack(cols, 1)
    return 0.5 * (fd + fd.T)


@pytest.fixture(scope="module")
def shape_model():
    est = _shape_estimator()
    return est, _fd_hessian(est, _X0)


def test_dense_hessian_matches_finite_differences_through_lgamma(shape_model):
    est, fd = shape_model
    # The point is near the mode, where the true curvature is negative definite: the
    # Laplace precision is then −∇² log π itself, with nothing floored or measured.
    assert np.all(np.linalg.eigvalsh(fd) < 0)
    flat_grad, _ = _flat_fns(est, [tf.constant(_X0)])
    np.testing.assert_allclose(_hessian(flat_grad, tf.constant(_X0)), fd, rtol=1e-5, atol=1e-6)
    lap = laplace_approximation(est, [tf.constant(_X0)], max_dense_dim=10)
    assert lap.dense and not lap.notes
    np.testing.assert_allclose(lap.precision, -fd, rtol=1e-5, atol=1e-6)
    # Each shape parameter on its own: ν (Student-t, lbeta), the Gamma concentration and
    # the NB total count (lgamma) have curvature of the right sign and size.
    for j in (0, 2, 3):
        assert lap.precision[j, j] == pytest.approx(-fd[j, j], rel=1e-5)


def test_hutchinson_product_matches_finite_differences_through_lgamma(shape_model):
    est, fd = shape_model
    flat_grad, _ = _flat_fns(est, [tf.constant(_X0)])
    for seed in range(3):
        # One probe: the estimate is exactly −v ⊙ (∇² log π) v for the probe drawn
        # from this seed, so it is compared with the finite-difference product.
        v = np.random.default_rng(seed).choice([-1.0, 1.0], size=_X0.size)
        got = _hutchinson_diagonal(flat_grad, tf.constant(_X0), 1, seed)
        np.testing.assert_allclose(got, -v * (fd @ v), rtol=1e-5, atol=1e-6)
    # Through the public path (diagonal above max_dense_dim), many probes average the
    # off-diagonal terms out: |off-diagonal| ≤ 1 here, so 100 probes leave an error of
    # about 1/√100 = 0.1 per coordinate; 0.6 is six such errors, far below the wrong
    # curvature's error (its ν term has the wrong sign: +26 against -4.5).
    lap = laplace_approximation(est, [tf.constant(_X0)], max_dense_dim=0, num_probes=100)
    assert not lap.dense
    np.testing.assert_allclose(lap.precision, -np.diag(fd), atol=0.6)
