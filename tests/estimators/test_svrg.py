"""Exact tests of the SVRG estimator (anchor refreshed every ``update_rate`` calls)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg

from ._enumerate import EnumeratedBatches, N, linear_gaussian_model, with_replacement_tuples


def _full(base, theta):
    full = base.full_log_prob_and_gradient(tf.constant(theta))
    return full.target_log_prob.numpy(), full.grads_target_log_prob[0].numpy()


def test_exactly_unbiased_over_all_batches_for_any_anchor(rng):
    """With the anchor at θ̂ and the chain at θ ≠ θ̂, the average over all N**n
    with-replacement batches of the estimate is the full-data score (and
    log-density) at θ; a single batch is not."""
    x, y, ll, lp = linear_gaussian_model(rng)
    n = 2
    table = with_replacement_tuples(N, n)
    base = sg.MinibatchEstimator(ll, EnumeratedBatches((x, y), table), n, log_prior_fn=lp)
    svrg = sg.SVRGEstimator(base, update_rate=10**6)  # the anchor stays at θ̂
    anchor = rng.standard_normal(2)
    theta = anchor + rng.standard_normal(2)
    st = svrg.bootstrap(tf.constant(anchor))
    np.testing.assert_allclose(st.anchor[0].numpy(), anchor)
    grads, values = [], []
    for k in range(len(table)):
        out, st_k = svrg(tf.constant(theta), st, tf.constant([k, 0]))
        grads.append(out.grads_target_log_prob[0].numpy())
        values.append(out.target_log_prob.numpy())
        np.testing.assert_allclose(st_k.anchor[0].numpy(), anchor)  # not refreshed
    want_value, want_grad = _full(base, theta)
    np.testing.assert_allclose(np.mean(grads, 0), want_grad, rtol=1e-12)
    np.testing.assert_allclose(np.mean(values), want_value, rtol=1e-12)
    assert not np.allclose(grads[1], want_grad)  # the test can fail: batches differ


@pytest.mark.parametrize("scheme", ["with_replacement", "epoch"])
def test_equals_the_full_data_score_at_the_anchor_for_any_batch(rng, scheme):
    x, y, ll, lp = linear_gaussian_model(rng)
    base = sg.MinibatchEstimator(ll, sg.InMemoryData((x, y), scheme), 2, log_prior_fn=lp)
    svrg = sg.SVRGEstimator(base, update_rate=3)
    anchor = rng.standard_normal([3, 2])  # three chains, one anchor each
    st = svrg.bootstrap(tf.constant(anchor))
    want = [_full(base, a) for a in anchor]
    for k in range(5):
        st_fixed = st._replace(num_calls=tf.constant(1))  # never due: the anchor is kept
        out, _ = svrg(tf.constant(anchor), st_fixed, tf.constant([k, 7]))
        for c in range(3):
            np.testing.assert_allclose(
                out.grads_target_log_prob[0].numpy()[c], want[c][1], rtol=1e-12
            )
            np.testing.assert_allclose(out.target_log_prob.numpy()[c], want[c][0], rtol=1e-12)


@pytest.mark.parametrize("update_rate", [1, 3])
def test_anchor_refreshed_exactly_on_schedule_inside_a_compiled_loop(rng, seed, update_rate):
    """Calls 0, r, 2r, ... move the anchor to the state of that call (its score
    becomes the full-data score there and the estimate is exact); other calls
    keep it. Run as a compiled SGLD chain: one estimator call per step."""
    x, y, ll, lp = linear_gaussian_model(rng)
    base = sg.MinibatchEstimator(
        ll, sg.InMemoryData((x, y), "with_replacement"), 2, log_prior_fn=lp
    )
    svrg = sg.SVRGEstimator(base, update_rate=update_rate)
    kernel = sg.SGLD(svrg, 0.05)
    state0 = tf.constant(rng.standard_normal([2, 2]))
    steps = 7

    @tf.function(jit_compile=True)
    def run(sd):
        return tfp_sample(kernel, state0, steps, sd)

    states, (anchors, calls, scores) = run(tf.constant([seed, 5]))
    states, anchors, calls, scores = (t.numpy() for t in (states, anchors, calls, scores))
    # Results k (k = 1..steps) follow call k, made at the returned state x_k.
    anchor = state0.numpy()
    for k in range(1, steps + 1):
        assert calls[k - 1] == k + 1  # the bootstrap made call 0
        if k % update_rate == 0:
            anchor = states[k - 1]
            for c in range(2):
                np.testing.assert_allclose(scores[k - 1][c], _full(base, anchor[c])[1], rtol=1e-10)
        np.testing.assert_array_equal(anchors[k - 1], anchor)


def tfp_sample(kernel, state0, steps, seed):
    import tensorflow_probability as tfp

    return tfp.mcmc.sample_chain(
        steps,
        state0,
        kernel=kernel,
        seed=seed,
        trace_fn=lambda _, r: (
            r.estimator_state.anchor[0],
            r.estimator_state.num_calls,
            r.grads_target_log_prob[0],
        ),
    )


def test_bad_arguments(rng):
    x, y, ll, lp = linear_gaussian_model(rng)
    base = sg.MinibatchEstimator(ll, (x, y), 2)
    with pytest.raises(ValueError, match="update_rate"):
        sg.SVRGEstimator(base, 0)
    with pytest.raises(ValueError, match="update_rate"):
        sg.SVRGEstimator(base, 2.0)
    with pytest.raises(ValueError, match="base"):
        sg.SVRGEstimator(sg.NoisyGradientEstimator(lambda t: -tf.reduce_sum(t**2, -1)), 2)
    assert sg.SVRGEstimator(base, 4).with_batch_size(3).batch_size == 3
