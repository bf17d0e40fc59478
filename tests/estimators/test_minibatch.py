"""Exact tests of the minibatch estimator: unbiasedness as an average over every batch."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg

from ._enumerate import EnumeratedBatches, subsets, with_replacement_tuples

N = 5


def _data(rng):
    x = rng.standard_normal((N, 2))
    y = (rng.random(N) < 0.5).astype(np.float64)
    return x, y


def log_likelihood(theta, batch):  # logistic regression, broadcasting over chains
    x, y = batch
    logits = tf.einsum("nd,...d->...n", x, theta)
    return -tf.nn.sigmoid_cross_entropy_with_logits(tf.broadcast_to(y, tf.shape(logits)), logits)


def log_prior(theta):
    return -0.5 * tf.reduce_sum(tf.square(theta), -1) / 4.0


def _value_and_grad(fn, theta):
    theta = tf.convert_to_tensor(theta)
    with tf.GradientTape() as tape:
        tape.watch(theta)
        value = fn(theta)
    return value.numpy(), tape.gradient(value, theta).numpy()


@pytest.mark.parametrize(
    "table_fn,n",
    [(with_replacement_tuples, 2), (with_replacement_tuples, 3), (subsets, 2), (subsets, 4)],
    ids=["replacement-n2", "replacement-n3", "subsets-n2", "subsets-n4"],
)
def test_unbiased_as_exact_average_over_all_batches(rng, table_fn, n):
    """E_S[log π̃] = log π and E_S[∇ log π̃] = ∇ log π, enumerating every batch S."""
    x, y = _data(rng)
    theta = rng.standard_normal((3, 2))  # three chains
    table = table_fn(N, n)
    est = sg.MinibatchEstimator(log_likelihood, EnumeratedBatches((x, y), table), n,
                                log_prior_fn=log_prior)
    state = est.bootstrap(theta)
    values, grads = [], []
    for k in range(len(table)):
        out, _ = est(tf.constant(theta), state, tf.constant([k, 0]))
        values.append(out.target_log_prob.numpy())
        grads.append(out.grads_target_log_prob[0].numpy())
        # The estimate is log_prob_on_batch on the batch the data source served.
        v, g = _value_and_grad(lambda t, k=k: est.log_prob_on_batch(
            t, (x[table[k]], y[table[k]])), theta)
        np.testing.assert_allclose(values[-1], v, rtol=1e-12)
        np.testing.assert_allclose(grads[-1], g, rtol=1e-12)
    full = est.full_log_prob_and_gradient(tf.constant(theta))
    np.testing.assert_allclose(np.mean(values, 0), full.target_log_prob.numpy(), rtol=1e-12)
    np.testing.assert_allclose(np.mean(grads, 0), full.grads_target_log_prob[0].numpy(),
                               rtol=1e-10, atol=1e-12)
    # ... and a single batch is not the full value (the test can fail).
    assert not np.allclose(values[0], full.target_log_prob.numpy())


def test_full_log_prob_is_prior_plus_sum_and_chunking_is_exact(rng):
    x, y = _data(rng)
    theta = rng.standard_normal(2)
    want, want_g = _value_and_grad(
        lambda t: tf.reduce_sum(log_likelihood(t, (x, y)), -1) + log_prior(t), theta)
    for chunk in (1, 2, N):
        est = sg.MinibatchEstimator(log_likelihood, (x, y), 2, log_prior_fn=log_prior,
                                    full_data_chunk_size=chunk)
        full = est.full_log_prob_and_gradient(tf.constant(theta))
        np.testing.assert_allclose(full.target_log_prob.numpy(), want, rtol=1e-12)
        np.testing.assert_allclose(full.grads_target_log_prob[0].numpy(), want_g, rtol=1e-12)


def test_scaling_and_prior_enter_once(rng):
    x, y = _data(rng)
    theta = tf.constant(rng.standard_normal(2))
    est = sg.MinibatchEstimator(log_likelihood, (x, y), 2, log_prior_fn=log_prior)
    batch = (x[:2], y[:2])
    ll = tf.reduce_sum(log_likelihood(theta, batch)).numpy()
    np.testing.assert_allclose(est.scaled_log_likelihood(theta, batch, 2).numpy(), N / 2 * ll)
    np.testing.assert_allclose(est.log_prob_on_batch(theta, batch).numpy(),
                               N / 2 * ll + log_prior(theta).numpy())
    # A full batch (n = N) is the exact log-posterior, whatever the seed.
    full_est = sg.MinibatchEstimator(log_likelihood, (x, y), N, log_prior_fn=log_prior)
    out, _ = full_est(theta, full_est.bootstrap(theta), tf.constant([3, 4]))
    np.testing.assert_allclose(out.target_log_prob.numpy(),
                               full_est.full_log_prob_and_gradient(theta).target_log_prob.numpy())


def test_flat_prior_and_parts_state(rng):
    x, y = _data(rng)

    def ll_parts(state, batch):
        w, b = state
        xb, yb = batch
        logits = tf.einsum("nd,...d->...n", xb, w) + b[..., None]
        return -tf.nn.sigmoid_cross_entropy_with_logits(
            tf.broadcast_to(yb, tf.shape(logits)), logits)

    table = subsets(N, 2)
    est = sg.MinibatchEstimator(ll_parts, EnumeratedBatches((x, y), table), 2)
    state = [tf.constant(rng.standard_normal(2)), tf.constant(0.3, tf.float64)]
    grads = [est(state, est.bootstrap(state), tf.constant([k, 0]))[0].grads_target_log_prob
             for k in range(len(table))]
    full = est.full_log_prob_and_gradient(state).grads_target_log_prob
    for i in range(2):
        np.testing.assert_allclose(np.mean([g[i].numpy() for g in grads], 0), full[i].numpy(),
                                   rtol=1e-10, atol=1e-12)


def test_sample_batch_is_reproducible_from_the_seed(rng):
    x, y = _data(rng)
    est = sg.MinibatchEstimator(log_likelihood, sg.InMemoryData((x, y), "with_replacement"), 3)
    st = est.bootstrap(None)
    a, _ = est.sample_batch(st, tf.constant([1, 2]))
    b, _ = est.sample_batch(st, tf.constant([1, 2]))
    np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())


def test_log_likelihood_must_be_per_example(rng):
    x, y = _data(rng)
    est = sg.MinibatchEstimator(lambda t, b: tf.reduce_sum(log_likelihood(t, b), -1, keepdims=True),
                                (x, y), 2)
    with pytest.raises(ValueError, match="`log_likelihood_fn`"):
        est(tf.zeros(2, tf.float64), est.bootstrap(None), tf.constant([1, 2]))


# --------------------------------------------------------------------------- #
# NoisyGradientEstimator.
# --------------------------------------------------------------------------- #


def _gauss(t):
    return -0.5 * tf.reduce_sum(t * t, -1)


def test_noisy_estimator_without_noise_is_exact(rng):
    theta = tf.constant(rng.standard_normal((4, 3)))
    est = sg.NoisyGradientEstimator(_gauss)
    out, _ = est(theta, est.bootstrap(theta), tf.constant([1, 1]))
    np.testing.assert_allclose(out.grads_target_log_prob[0].numpy(), -theta.numpy())
    np.testing.assert_allclose(out.target_log_prob.numpy(), _gauss(theta).numpy())


def test_noisy_estimator_noise_moments(seed):
    """e ~ N(0, s² I), independent across chains and coordinates."""
    s = 0.7
    theta = tf.zeros([20_000, 2], tf.float64)
    est = sg.NoisyGradientEstimator(_gauss, noise_scale=s)
    out, _ = est(theta, (), tf.constant([seed, 5]))
    e = out.grads_target_log_prob[0].numpy()
    n = e.size
    assert abs(e.mean()) < 3.3 * s / np.sqrt(n)
    assert abs(np.mean(e**2) - s**2) < 3.3 * s**2 * np.sqrt(2 / n)
    corr = np.corrcoef(e[:, 0], e[:, 1])[0, 1]
    assert abs(corr) < 3.3 / np.sqrt(e.shape[0])
