"""WhitenedEstimator, the Laplace approximation, the mode search and the verdict."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.diagnostics.verdict import (
    MAX_RUNAWAY_PROBES,
    judge_whitened_draws,
    runaway_draws,
    runaway_threshold,
)
from tfp_sgmcmc.estimators.laplace import find_mode, laplace_approximation


def _gaussian_estimator(mean: np.ndarray, cov: np.ndarray) -> sg.MinibatchEstimator:
    """A correlated Gaussian target as an estimator with one dummy data row."""
    prec = tf.constant(np.linalg.inv(cov))
    mu = tf.constant(mean)

    def log_prior(parts):
        a, b = parts
        x = tf.concat([a, b[..., None]], -1) - mu
        return -0.5 * tf.einsum("...i,ij,...j->...", x, prec, x)

    def log_lik(parts, batch):
        return tf.zeros(tf.concat([tf.shape(parts[1]), [tf.shape(batch)[0]]], 0), tf.float64)

    return sg.MinibatchEstimator(log_lik, np.zeros([1, 1]), 1, log_prior_fn=log_prior)


MEAN = np.array([3.0, -200.0, 0.01])
COV = np.array([[4.0, 1.0, 0.001], [1.0, 1.0, 0.0005], [0.001, 0.0005, 1e-6]])


def test_whitened_score_is_pulled_back_exactly():
    est = _gaussian_estimator(MEAN, COV)
    centre = [tf.constant(MEAN[:2]), tf.constant(MEAN[2])]
    scale = np.linalg.cholesky(COV)
    white = sg.WhitenedEstimator(est, centre, scale)
    w = tf.constant(np.random.default_rng(0).standard_normal([3, 3]))
    got = white.full_log_prob_and_gradient(w)
    # z = m + L w: the Gaussian becomes N(0, I), whose score is -w.
    np.testing.assert_allclose(got.grads_target_log_prob[0], -w.numpy(), rtol=1e-8, atol=1e-8)
    z = white.unwhiten(w)
    np.testing.assert_allclose(white.whiten(z), w, rtol=1e-8, atol=1e-9)
    # Power check: a diagonal scale does not whiten a correlated Gaussian.
    diag = sg.WhitenedEstimator(est, centre, np.sqrt(np.diag(COV)))
    bad = diag.full_log_prob_and_gradient(w).grads_target_log_prob[0]
    assert np.max(np.abs(bad.numpy() + w.numpy())) > 0.1


def test_diverged_means_left_the_posterior_with_a_whitened_estimator():
    """A finite state beyond the χ² runaway radius is ``diverged``; a typical one is not."""
    est = _gaussian_estimator(MEAN, COV)
    centre = [tf.constant(MEAN[:2]), tf.constant(MEAN[2])]
    white = sg.WhitenedEstimator(est, centre, np.linalg.cholesky(COV))
    radius = np.sqrt(runaway_threshold(3))
    w = tf.constant([[0.5, -1.0, 2.0], [radius * 1.01, 0.0, 0.0], [0.0, radius * 0.99, 0.0]])
    w = tf.cast(w, tf.float64)
    np.testing.assert_array_equal(white.left_posterior(w), [False, True, False])
    kernel = sg.SGLD(white, step_size=1e-12)  # a step that cannot bring it back
    results = kernel.bootstrap_results(w)
    np.testing.assert_array_equal(results.diverged, [False, True, False])
    _, results = kernel.one_step(w, results, seed=tf.constant([1, 2]))
    np.testing.assert_array_equal(results.diverged, [False, True, False])
    # Power check: the same finite states under the plain estimator are not flagged
    # (it does not know where the posterior is).
    z = white.unwhiten(w)
    plain = sg.SGLD(est, step_size=1e-12).bootstrap_results(z)
    assert not np.any(plain.diverged)
    # Built with flag_runaway_steps=False (as sample_posterior builds it), the kernel
    # flags no finite state, at any batch size; its draws are judged afterwards.
    quiet = sg.WhitenedEstimator(est, centre, np.linalg.cholesky(COV), flag_runaway_steps=False)
    for e in (quiet, quiet.with_batch_size(1)):
        assert e.left_posterior(w) is None
        assert not np.any(sg.SGLD(e, step_size=1e-12).bootstrap_results(w).diverged)


def _draws_with_one_far(radius: float, d: int = 3) -> np.ndarray:
    w = np.random.default_rng(4).standard_normal([200, 4, d])
    w[150, 1] = 0.0
    w[150, 1, 0] = radius
    return w


def test_a_far_draw_left_the_posterior_only_where_its_density_fell_as_the_laplace_fits():
    """Beyond the radius √q, a draw left the posterior when log π fell there by more than
    q/2 (as under the Laplace fit, Δ = ‖w‖²/2), and not where the tail is heavier."""
    d = 3
    q = runaway_threshold(d)
    w = _draws_with_one_far(1.5 * np.sqrt(q), d)
    gaussian = lambda x: 0.5 * np.sum(x**2, -1)  # noqa: E731 - the Laplace fit's Δ
    exponential = lambda x: np.sqrt(np.sum(x**2, -1))  # noqa: E731 - a heavier tail
    nan = lambda x: np.full(len(x), np.nan)  # noqa: E731 - log π not finite there
    seen = []

    def recording(x):
        seen.append(len(x))
        return exponential(x)

    r = runaway_draws(w, recording)
    assert seen == [1]  # only the draw beyond the radius is evaluated
    assert not r.away.any() and r.beyond == 1 and r.spared == 1
    assert r.max_spared_drop == pytest.approx(1.5 * np.sqrt(q))
    for drop in (gaussian, nan, None):  # power: the Laplace tail, no density, radius only
        r = runaway_draws(w, drop)
        np.testing.assert_array_equal(r.away, [False, True, False, False])
    v = judge_whitened_draws(w, log_density_drop=exponential)
    assert not any("left the posterior" in r for r in v.reasons), v
    assert v.stats["tail_draws_beyond_radius"] == 1
    v = judge_whitened_draws(w, log_density_drop=gaussian)
    assert v.status == "failed"
    assert any("left the posterior" in r and "below the mode" in r for r in v.reasons), v
    # Inside the radius nothing is evaluated, whatever the density says.
    inside = _draws_with_one_far(0.9 * np.sqrt(q), d)
    assert not runaway_draws(inside, lambda x: np.full(len(x), np.inf)).away.any()


def test_draws_beyond_the_probe_limit_count_by_their_chain():
    """Past `MAX_RUNAWAY_PROBES` draws beyond the radius, the farthest are evaluated; a
    chain none of whose far draws was evaluated counts as left."""
    d = 2
    q = runaway_threshold(d)
    w = np.zeros([MAX_RUNAWAY_PROBES + 10, 2, d])
    w[:, 0, 0] = 2.0 * np.sqrt(q)   # chain 0: far draws, all evaluated first (farther)
    w[:10, 1, 0] = 1.1 * np.sqrt(q)  # chain 1: far draws, none evaluated
    r = runaway_draws(w, lambda x: np.sqrt(np.sum(x**2, -1)))
    np.testing.assert_array_equal(r.away, [False, True])
    assert r.spared == MAX_RUNAWAY_PROBES


def test_whitened_estimator_names_bad_scales():
    est = _gaussian_estimator(MEAN, COV)
    centre = [tf.constant(MEAN[:2]), tf.constant(MEAN[2])]
    with pytest.raises(ValueError, match="`scale` must have shape"):
        sg.WhitenedEstimator(est, centre, np.ones(4))
    with pytest.raises(ValueError, match="`scale` must be finite with a positive diagonal"):
        sg.WhitenedEstimator(est, centre, np.array([1.0, 0.0, 1.0]))
    white = sg.WhitenedEstimator(est, centre, np.ones(3))
    with pytest.raises(ValueError, match=r"`init_state` must have shape \[\*chains, 3\]"):
        white.validate_state(tf.zeros([2, 4], tf.float64))


def test_laplace_recovers_the_gaussian_covariance():
    est = _gaussian_estimator(MEAN, COV)
    mode = find_mode(est, [[tf.zeros(2, tf.float64), tf.zeros([], tf.float64)]], 1)
    np.testing.assert_allclose(
        np.concatenate([mode.position[0], [mode.position[1]]]), MEAN, rtol=1e-6, atol=1e-7
    )
    lap = laplace_approximation(est, mode.position)
    assert lap.dense and not lap.notes
    np.testing.assert_allclose(lap.covariance, COV, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(lap.lambda_max, np.linalg.eigvalsh(np.linalg.inv(COV)).max(),
                               rtol=1e-6)
    # Hutchinson's diagonal (used above max_dense_dim): exact for a diagonal precision,
    # whatever the scales.
    cov = np.diag(np.diag(COV))
    est = _gaussian_estimator(MEAN, cov)
    diag = laplace_approximation(est, mode.position, max_dense_dim=1, num_probes=8)
    assert not diag.dense
    np.testing.assert_allclose(diag.precision, 1 / np.diag(cov), rtol=1e-6)
    np.testing.assert_allclose(diag.scale, np.sqrt(np.diag(cov)), rtol=1e-6)


def test_find_mode_names_a_start_without_density():
    def log_lik(parts, batch):
        return tf.zeros(tf.concat([tf.shape(parts[0])[:-1], [tf.shape(batch)[0]]], 0),
                        tf.float64)

    est = sg.MinibatchEstimator(
        log_lik, np.zeros([1, 1]), 1,
        log_prior_fn=lambda p: tf.fill(tf.shape(p[0])[:-1], tf.constant(np.nan, tf.float64)),
    )
    with pytest.raises(ValueError, match="no mode found"):
        find_mode(est, [[tf.zeros(2, tf.float64)]], 1)


def test_verdict_ok_on_exact_draws_and_failed_on_broken_chains():
    rng = np.random.default_rng(1)
    good = rng.standard_normal([500, 4, 3])
    v = judge_whitened_draws(good)
    assert v.status == "ok", v
    frozen = good.copy()
    frozen[:, 2] = 0.3 + 1e-4 * rng.standard_normal([500, 3])
    v = judge_whitened_draws(frozen)
    assert v.status == "failed" and any("did not move" in r for r in v.reasons)
    away = good.copy()
    away[-1, 1] = np.sqrt(runaway_threshold(3)) * 1.1
    v = judge_whitened_draws(away)
    assert v.status == "failed" and any("left the posterior" in r for r in v.reasons)
    apart = good.copy()
    apart[:, 0] += 3.0
    v = judge_whitened_draws(apart)
    assert v.status == "failed" and any("R-hat" in r for r in v.reasons)
    nan = good.copy()
    nan[7, 3, 0] = np.nan
    assert judge_whitened_draws(nan).status == "failed"
    # The bias check: a large step with noisy gradients is suspect, a small one is not.
    assert judge_whitened_draws(good, 0.5, np.full(3, 1.0)).status == "suspect"
    assert judge_whitened_draws(good, 0.05, np.full(3, 0.1)).status == "ok"
    with pytest.raises(ValueError, match="`w` must be"):
        judge_whitened_draws(good[:, :1])


def test_a_flat_direction_gets_a_measured_scale_not_a_floor():
    """``log π = −x₀²/2 − x₁⁴/4``: the Hessian at the mode is 0 along ``x₁``, so its
    Laplace scale comes from where log π has dropped by 1/2, ``x₁ = 2^{1/4}``."""

    def log_prior(parts):
        (x,) = parts
        return -0.5 * x[..., 0] ** 2 - 0.25 * x[..., 1] ** 4

    def log_lik(parts, batch):
        return tf.zeros(tf.concat([tf.shape(parts[0])[:-1], [tf.shape(batch)[0]]], 0), tf.float64)

    est = sg.MinibatchEstimator(log_lik, np.zeros([1, 1]), 1, log_prior_fn=log_prior)
    lap = laplace_approximation(est, [tf.zeros(2, tf.float64)])
    np.testing.assert_allclose(np.diag(lap.scale), [1.0, 2**0.25], rtol=1e-6)
    assert any("measured where log π drops by 1/2 (1 found" in n for n in lap.notes), lap.notes
