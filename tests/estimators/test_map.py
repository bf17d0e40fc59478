"""``find_map`` reaches the analytic MAP of a conjugate linear-Gaussian model."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg

N, D, PRIOR_PREC = 200, 3, 0.5


@pytest.fixture
def model(rng):
    x = rng.standard_normal((N, D))
    y = x @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(N)

    def log_likelihood(theta, batch):
        xb, yb = batch
        return -0.5 * tf.square(yb - tf.einsum("nd,...d->...n", xb, theta))

    def log_prior(theta):
        return -0.5 * PRIOR_PREC * tf.reduce_sum(tf.square(theta), -1)

    map_ = np.linalg.solve(x.T @ x + PRIOR_PREC * np.eye(D), x.T @ y)
    return x, y, log_likelihood, log_prior, map_


def test_lbfgs_reaches_the_analytic_map(model):
    x, y, ll, lp, want = model
    est = sg.MinibatchEstimator(ll, (x, y), 20, log_prior_fn=lp, full_data_chunk_size=64)
    res = sg.find_map(est, tf.zeros(D, tf.float64), method="lbfgs")
    assert res.converged
    np.testing.assert_allclose(res.position.numpy(), want, atol=1e-6)
    full = est.full_log_prob_and_gradient(tf.constant(want))
    np.testing.assert_allclose(res.log_prob.numpy(), full.target_log_prob.numpy(), rtol=1e-10)


def test_lbfgs_with_a_list_state(model):
    x, y, _, _, want = model

    def ll_parts(state, batch):
        a, b = state
        xb, yb = batch
        return -0.5 * tf.square(yb - xb[:, 0] * a - tf.einsum("nd,...d->...n", xb[:, 1:], b))

    lp = lambda s: -0.5 * PRIOR_PREC * (tf.square(s[0]) + tf.reduce_sum(tf.square(s[1]), -1))  # noqa: E731
    est = sg.MinibatchEstimator(ll_parts, (x, y), 20, log_prior_fn=lp)
    res = sg.find_map(est, [tf.constant(0.0, tf.float64), tf.zeros(D - 1, tf.float64)])
    np.testing.assert_allclose(res.position[0].numpy(), want[0], atol=1e-6)
    np.testing.assert_allclose(res.position[1].numpy(), want[1:], atol=1e-6)


def test_adam_reaches_the_analytic_map(model):
    x, y, ll, lp, want = model
    est = sg.MinibatchEstimator(ll, (x, y), N, log_prior_fn=lp)  # full batch: deterministic
    res = sg.find_map(est, tf.zeros(D, tf.float64), method="adam", num_steps=1500,
                      learning_rate=0.05)
    np.testing.assert_allclose(res.position.numpy(), want, atol=1e-3)


def test_adam_with_minibatches_gets_close(model):
    x, y, ll, lp, want = model
    est = sg.MinibatchEstimator(ll, (x, y), 50, log_prior_fn=lp)
    res = sg.find_map(est, tf.zeros(D, tf.float64), method="adam", num_steps=1500,
                      learning_rate=0.01, seed=3)
    # Minibatch noise leaves Adam within a few posterior sds (≈ 1/√N ≈ 0.07).
    np.testing.assert_allclose(res.position.numpy(), want, atol=0.1)


def test_lbfgs_from_a_steep_start_moves_and_improves():
    """Bayesian PMF from its small random start: the gradient norm is about 4,300 and a
    unit step along it overflows the precisions' ``exp`` into NaN. Unscaled, TFP's line
    search failed and the start came back unchanged (log π −158,250 after "1 iteration");
    the search must move and climb."""
    import warnings

    from tfp_sgmcmc.models import pmf as pm

    prob = pm.pmf(synthetic=True, dtype=np.float64)
    est = prob.estimator(prob.num_train)
    init = prob.init_state(seed=1)
    lp0 = float(est.full_log_prob_and_gradient(init).target_log_prob)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no line-search failure
        res = sg.find_map(est, init, num_steps=20)
    assert res.num_iterations == 20
    assert float(res.log_prob) > lp0 + 50_000
    moved = [float(np.max(np.abs(a.numpy() - b.numpy()))) for a, b in zip(res.position, init)]
    assert min(moved) > 0.0


def test_lbfgs_warns_when_its_line_search_fails(model):
    x, y, ll, _, _ = model

    def lp(theta):  # finite only at the start: every step is rejected
        at_start = tf.reduce_all(tf.equal(theta, 0.0), -1)
        return tf.where(at_start, tf.zeros([], theta.dtype), tf.constant(np.nan, theta.dtype))

    est = sg.MinibatchEstimator(ll, (x, y), 20, log_prior_fn=lp)
    with pytest.warns(UserWarning, match="line search failed"):
        res = sg.find_map(est, tf.zeros(D, tf.float64))
    assert not res.converged


def test_lbfgs_refuses_a_start_of_zero_density(model):
    x, y, ll, _, _ = model
    lp = lambda t: tf.math.log(-tf.reduce_sum(tf.abs(t), -1))  # noqa: E731  (-inf at 0)
    est = sg.MinibatchEstimator(ll, (x, y), 20, log_prior_fn=lp)
    with pytest.raises(ValueError, match="initial_state"):
        sg.find_map(est, tf.zeros(D, tf.float64))


@pytest.mark.parametrize("keep_full", [False, True], ids=["no-full-pass", "full-pass"])
def test_adam_on_a_tf_data_source(model, keep_full):
    """Adam's loop reads a tf.data stream as a graph (its iterator has no XLA kernel) and
    ends near the MAP; the log-density is NaN without a full pass."""
    x, y, log_likelihood, log_prior, map_ = model
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N, seed=1)
          .batch(50, drop_remainder=True).repeat())
    full = tf.data.Dataset.from_tensor_slices((x, y)) if keep_full else None
    est = sg.MinibatchEstimator(log_likelihood, sg.DatasetData(ds, N, full_dataset=full), 50,
                                log_prior)
    res = sg.find_map(est, tf.zeros([D], tf.float64), method="adam", num_steps=3000,
                      learning_rate=0.02)
    np.testing.assert_allclose(res.position.numpy(), map_, atol=0.1)
    assert np.isfinite(res.log_prob.numpy()) == keep_full
