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


def _dollar_scale_posterior() -> tuple[sg.JointPosterior, np.ndarray]:
    """``y ~ N(mu, sigma)`` with ``sigma`` near 19,000 (a regression on earnings in
    dollars), ``sigma`` on TFP's default ``Softplus`` map: its autodiff Hessian is NaN
    there (``exp`` overflows beyond an argument of about 710), its score is finite."""
    y = np.random.default_rng(3).normal(20_000.0, 19_000.0, size=300)
    prior = tfd.JointDistributionNamed(dict(
        mu=tfd.Normal(np.float64(0.0), 1e6), sigma=tfd.HalfNormal(np.float64(1e6))))
    post = sg.JointPosterior(
        prior, lambda p, b: tfd.Normal(p["mu"][..., None], p["sigma"][..., None]), y,
        batch_size=300)
    return post, y


def test_a_curvature_autodiff_cannot_give_is_differenced_from_the_score():
    """Where automatic differentiation gives a NaN Hessian but a finite score, the mode
    search and the Laplace curvature difference the score instead: the mode is found by
    Newton and the curvature is the exact one of a normal sample. Power check: the
    automatic Hessian itself is not finite at that mode."""
    from tfp_sgmcmc.estimators.laplace import _hessian_fn, find_mode

    post, y = _dollar_scale_posterior()
    est = post.estimator
    mode = find_mode(est, [[tf.zeros_like(p) for p in post.initial_state(seed=0)]])
    assert mode.converged, mode
    flat_grad, _ = _flat_fns(est, mode.position)
    x = tf.concat([tf.reshape(p, [-1]) for p in mode.position], 0)
    assert not np.all(np.isfinite(_hessian_fn(flat_grad)(x)))  # power check
    lap = laplace_approximation(est, mode.position)
    assert lap.dense and np.all(np.isfinite(lap.precision))
    # The normal sample's curvature at (mu, sigma = s), with z = softplus⁻¹ sigma and
    # dsigma/dz = sigmoid(z) = 1 to double precision (the priors are flat at this scale):
    # -∂²/∂mu² = N / s², -∂²/∂z² = -N / s² + 3 Σ(y - mu)² / s⁴.
    n, mu, s = y.size, float(x[0]), float(tf.math.softplus(x[1]))
    ss = float(np.sum((y - mu) ** 2))
    want = [n / s**2, -n / s**2 + 3 * ss / s**4]
    np.testing.assert_allclose(np.diag(lap.precision), want, rtol=1e-5)
