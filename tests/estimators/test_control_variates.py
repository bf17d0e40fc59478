"""Exact tests of the control-variate estimator (Baker et al. 2019)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg

from ._enumerate import EnumeratedBatches, N, linear_gaussian_model, with_replacement_tuples


@pytest.mark.parametrize("scheme", ["with_replacement", "epoch", "random_window"])
def test_equals_full_data_gradient_at_the_centre_for_any_batch(rng, scheme):
    x, y, ll, lp = linear_gaussian_model(rng)
    base = sg.MinibatchEstimator(ll, sg.InMemoryData((x, y), scheme), 2, log_prior_fn=lp)
    centre = tf.constant(rng.standard_normal(2))
    cv = sg.ControlVariateEstimator(base, centre)
    full = base.full_log_prob_and_gradient(centre)
    at_centre = tf.stack([centre, centre, centre])  # three chains at θ̂
    st = cv.bootstrap(at_centre)
    for k in range(5):
        out, st = cv(at_centre, st, tf.constant([k, 11]))
        for c in range(3):
            np.testing.assert_allclose(out.grads_target_log_prob[0].numpy()[c],
                                       full.grads_target_log_prob[0].numpy(), rtol=1e-12)
            np.testing.assert_allclose(out.target_log_prob.numpy()[c],
                                       full.target_log_prob.numpy(), rtol=1e-12)
    # Away from the centre a minibatch makes a difference (the test can fail).
    away, _ = cv(at_centre + 1.0, st, tf.constant([0, 11]))
    exact = base.full_log_prob_and_gradient(centre + 1.0).grads_target_log_prob[0].numpy()
    assert not np.allclose(away.grads_target_log_prob[0].numpy()[0], exact)


def test_one_batch_for_both_terms_and_exactly_unbiased(rng):
    """On every with-replacement batch S: ĝ(θ) = ∇π(θ̂) + g_S(θ) − g_S(θ̂); the
    average over all S is the full-data score at θ."""
    x, y, ll, lp = linear_gaussian_model(rng)
    n = 2
    table = with_replacement_tuples(N, n)
    base = sg.MinibatchEstimator(ll, EnumeratedBatches((x, y), table), n, log_prior_fn=lp)
    centre = tf.constant(rng.standard_normal(2))
    cv = sg.ControlVariateEstimator(base, centre)
    theta = tf.constant(rng.standard_normal((2, 2)))
    full_centre = base.full_log_prob_and_gradient(centre)
    grads, values = [], []
    for k in range(len(table)):
        out, _ = cv(theta, (), tf.constant([k, 0]))
        batch = (x[table[k]], y[table[k]])

        def on_batch(t, batch=batch):
            with tf.GradientTape() as tape:
                tape.watch(t)
                v = base.log_prob_on_batch(t, batch)
            return v, tape.gradient(v, t)

        v, g = on_batch(theta)
        vh, gh = on_batch(centre)
        np.testing.assert_allclose(
            out.grads_target_log_prob[0].numpy(),
            (g - gh + full_centre.grads_target_log_prob[0]).numpy(), rtol=1e-12)
        np.testing.assert_allclose(out.target_log_prob.numpy(),
                                   (v - vh + full_centre.target_log_prob).numpy(), rtol=1e-12)
        grads.append(out.grads_target_log_prob[0].numpy())
        values.append(out.target_log_prob.numpy())
    full = base.full_log_prob_and_gradient(theta)
    np.testing.assert_allclose(np.mean(grads, 0), full.grads_target_log_prob[0].numpy(),
                               rtol=1e-10)
    np.testing.assert_allclose(np.mean(values, 0), full.target_log_prob.numpy(), rtol=1e-10)
    # The noise covariance used by the statistical SGLD-CV test, exactly:
    # Cov[ĝ] = (1/n)(N Σ_i x_i x_iᵀ u uᵀ x_i x_iᵀ − A u uᵀ A), u = θ − θ̂.
    u = (theta - centre).numpy()[0]
    a = x.T @ x
    want = (N * sum(np.outer(xi, xi) @ np.outer(u, u) @ np.outer(xi, xi) for xi in x)
            - a @ np.outer(u, u) @ a) / n
    g0 = np.array(grads)[:, 0]
    np.testing.assert_allclose(np.cov(g0.T, bias=True), want, rtol=1e-9, atol=1e-12)


def test_works_with_every_kernel(rng):
    x, y, ll, lp = linear_gaussian_model(rng)
    base = sg.MinibatchEstimator(ll, (x, y), 2, log_prior_fn=lp)
    cv = sg.ControlVariateEstimator(base, tf.zeros(2, tf.float64))
    state = tf.zeros([2, 2], tf.float64)
    kernels = (sg.SGLD(cv, 1e-3), sg.PSGLD(cv, 1e-3), sg.SGHMC(cv, 1e-3, 2), sg.SGNHT(cv, 1e-3))
    for kernel in kernels:
        s, r = kernel.one_step(state, kernel.bootstrap_results(state), seed=[1, 2])
        assert np.all(np.isfinite(s.numpy())) and not r.diverged.numpy().any()


def test_precomputed_centre_gradient_is_used(rng):
    x, y, ll, lp = linear_gaussian_model(rng)
    base = sg.MinibatchEstimator(ll, (x, y), 2, log_prior_fn=lp)
    centre = tf.constant([0.1, 0.2], tf.float64)
    fake = [tf.constant([5.0, -5.0], tf.float64)]
    cv = sg.ControlVariateEstimator(base, centre, centering_gradient=fake,
                                    centering_log_prob=tf.constant(1.0, tf.float64))
    out, _ = cv(centre, cv.bootstrap(centre), tf.constant([1, 2]))
    np.testing.assert_allclose(out.grads_target_log_prob[0].numpy(), [5.0, -5.0], rtol=1e-12)



@pytest.mark.parametrize(
    "grad",
    [
        [tf.zeros([1], tf.float64)],  # broadcast into the estimate before
        [tf.zeros([2], tf.float64)] * 2,  # one part too many
        [],  # a part lost
        [tf.zeros([2], tf.float32)],
        [tf.constant([np.nan, 0.0], tf.float64)],
    ],
    ids=["shape", "too_many_parts", "no_parts", "dtype", "nan"],
)
def test_precomputed_centre_gradient_must_match_the_centre(rng, grad):
    x, y, ll, lp = linear_gaussian_model(rng)
    base = sg.MinibatchEstimator(ll, (x, y), 2, log_prior_fn=lp)
    centre = tf.constant([0.1, 0.2], tf.float64)
    with pytest.raises(ValueError, match=r"`centering_gradient"):
        sg.ControlVariateEstimator(base, centre, centering_gradient=grad,
                                   centering_log_prob=tf.constant(1.0, tf.float64))


def test_precomputed_centre_score_needs_both_parts_and_a_finite_scalar(rng):
    """A lone ``centering_gradient`` was silently replaced by a full pass."""
    x, y, ll, lp = linear_gaussian_model(rng)
    base = sg.MinibatchEstimator(ll, (x, y), 2, log_prior_fn=lp)
    centre = tf.constant([0.1, 0.2], tf.float64)
    good = [tf.constant([5.0, -5.0], tf.float64)]
    with pytest.raises(ValueError, match="`centering_gradient` was given without "
                                         "`centering_log_prob`"):
        sg.ControlVariateEstimator(base, centre, centering_gradient=good)
    with pytest.raises(ValueError, match="`centering_log_prob` was given without"):
        sg.ControlVariateEstimator(base, centre, centering_log_prob=1.0)
    for bad in (tf.constant(np.inf, tf.float64), tf.constant([1.0, 2.0], tf.float64),
                tf.constant(1.0, tf.float32)):
        with pytest.raises(ValueError, match="`centering_log_prob`"):
            sg.ControlVariateEstimator(base, centre, centering_gradient=good,
                                       centering_log_prob=bad)
    cv = sg.ControlVariateEstimator(base, centre, centering_gradient=good, centering_log_prob=1.0)
    assert cv.centering_log_prob.dtype == tf.float64
