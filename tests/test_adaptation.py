"""Windowed adaptation of the whitening map: a map that fits is kept, a wrong one is refined
towards the draws' covariance (at most a factor 4 in variance per window), an unsettled window
changes nothing; and `sample_posterior` adapts on a skewed posterior with exact marginals.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from scipy import special

import tfp_sgmcmc as sg
from tfp_sgmcmc.estimators.adaptation import adapt_whitening, rewhiten, shrunk_covariance

tfd = tfp.distributions
D = 3


def _white(scale: np.ndarray) -> sg.WhitenedEstimator:
    def log_prior(theta):
        return -0.5 * tf.reduce_sum(theta**2, -1)

    def log_lik(theta, batch):
        return tf.zeros(tf.concat([tf.shape(theta)[:-1], [tf.shape(batch)[0]]], 0), tf.float64)

    est = sg.MinibatchEstimator(log_lik, np.zeros([1, 1]), 1, log_prior_fn=log_prior)
    return sg.WhitenedEstimator(est, tf.zeros(D, tf.float64), scale)


def _draws(cov: np.ndarray, seed: int = 0, t: int = 400, c: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal([t, c, cov.shape[0]]) @ np.linalg.cholesky(cov).T


def test_a_map_that_fits_is_kept():
    white = _white(np.eye(D))
    step = adapt_whitening(white, _draws(np.eye(D)))
    assert not step.changed and step.reason == "fits"
    np.testing.assert_array_equal(white.scale, np.eye(D))
    # Shrinkage: 1,600 unit draws give a covariance within a few percent of I.
    s = shrunk_covariance(_draws(np.eye(D)).reshape(-1, D), 1600)
    assert np.max(np.abs(np.linalg.eigvalsh(s) - 1)) < 0.1


@pytest.mark.parametrize("dense", [True, False])
def test_a_wrong_map_is_refined_towards_the_draws(dense):
    true_cov = np.diag([3.0, 1.0, 1 / 3.0])  # the Laplace fit is off by 3x in variance
    white = _white(np.eye(D) if dense else np.ones(D))
    w = _draws(true_cov)
    step = adapt_whitening(white, w)
    assert step.changed and step.variance_range[1] > 2.5 and step.variance_range[0] < 0.4
    # z = L w is unchanged by the new coordinates, and they have unit covariance.
    new = rewhiten(w, step)
    z_old = w.reshape(-1, D) @ (np.eye(D) if dense else np.diag(np.ones(D))).T
    scale = white.scale if dense else np.diag(white.scale)
    np.testing.assert_allclose(new.reshape(-1, D) @ scale.T, z_old, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.diag(np.cov(new.reshape(-1, D).T)), 1.0, atol=0.15)


def test_one_window_changes_a_variance_by_at_most_max_change():
    white = _white(np.eye(D))
    step = adapt_whitening(white, _draws(np.diag([100.0, 1.0, 1.0])))
    assert step.changed
    np.testing.assert_allclose(np.diag(white.scale @ white.scale.T)[0], 4.0, rtol=1e-3)


def test_an_unsettled_window_changes_nothing():
    w = _draws(np.eye(D))
    w[:, 0] += np.linspace(0, 30, w.shape[0])[:, None]  # chain 0 still drifting
    white = _white(np.eye(D))
    step = adapt_whitening(white, w)
    assert not step.changed and step.reason.startswith("not settled (split R-hat")
    np.testing.assert_array_equal(white.scale, np.eye(D))


def test_bad_input_is_named():
    white = _white(np.eye(D))
    with pytest.raises(ValueError, match=r"`w` must be draws \[T >= 2, C, 3\]"):
        adapt_whitening(white, np.zeros([10, 4, 2]))
    with pytest.raises(ValueError, match="`w` must be finite"):
        adapt_whitening(white, np.full([10, 4, 3], np.nan))
    with pytest.raises(ValueError, match="`tolerance` must be > 1"):
        adapt_whitening(white, _draws(np.eye(D)), tolerance=1.0)
    with pytest.raises(ValueError, match="`scale` must have shape"):
        white.set_scale(np.ones(D))


@pytest.mark.statistical
def test_sample_posterior_adapts_on_a_skewed_posterior():
    """Poisson rates with Gamma priors and (mostly) zero counts: the posterior of
    ``log λ_k`` is a log-Gamma law with shape ``α_k`` (``0.5``: skewed, variance
    ``ψ'(0.5) = 4.93`` against the Laplace fit's ``1/α = 2``). Exact marginals:
    mean ``ψ(α) − log β``, variance ``ψ'(α)``."""
    a = np.array([0.5, 1.0, 1.0])
    counts = np.array([0, 1, 19])
    n = 20
    y = np.zeros([n, 3])
    for k, c in enumerate(counts):
        y[:c, k] = 1.0
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(rate=tfd.Independent(tfd.Gamma(tf.constant(a), tf.constant(1.0, tf.float64)), 1))
    )

    def likelihood(p, batch):
        return tfd.Independent(tfd.Poisson(rate=p["rate"][..., None, :]), 1)

    post = sg.JointPosterior(prior, likelihood, y, batch_size=n)
    res = sg.sample_posterior(post, num_results=1000, seed=0, progress=False)
    alpha, beta = a + counts, 1.0 + n
    mean = special.digamma(alpha) - np.log(beta)
    sd = np.sqrt(special.polygamma(1, alpha))
    u = np.log(res.draws["rate"]).reshape(-1, 3)
    assert res.verdict == "ok", res.reasons
    assert any(note.startswith("preconditioner adapted") for note in res.notes), res.notes
    assert np.max(np.abs(u.mean(0) - mean) / sd) < 0.2
    assert np.all(np.abs(u.std(0) / sd - 1) < 0.1)
    # The map now carries the wider spread of log λ_0 (a variance above the fit's 2).
    assert res.kernel.estimator.covariance[0, 0] > 2.5
