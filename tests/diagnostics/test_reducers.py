"""Stein reducers: streaming == batch, score sources, chains, all kernels, traces."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.diagnostics import FSSDReducer, KSDReducer, fssd, kernel_stein_discrepancy
from tfp_sgmcmc.diagnostics.reducers import get_innermost_score

tfem = tfp.experimental.mcmc


def _gaussian_estimator(noise=0.5):
    # N(0, I) target; the kernel's score is exact grad + N(0, noise²) noise.
    return sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), noise)


V3 = np.array([[0.5, -0.5, 0.0], [1.0, 1.0, -1.0]])


def test_streaming_equals_batch_via_with_reductions(tf_seed):
    """One XLA run: the reducers' finalize equals the batch functions on the traced
    thinned states and the scores the kernel returned for them."""
    est = _gaussian_estimator()
    kernel = sg.SGLD(est, 0.1)
    thin = 3
    ksd_full = KSDReducer(capacity=100, thin=thin)
    ksd_ring = KSDReducer(capacity=7, thin=thin, statistic="u")
    fssd_r = FSSDReducer(V3, thin=thin)
    fssd_g = FSSDReducer(V3, kernel="gaussian", bandwidth=1.3)
    reducers = [ksd_full, ksd_ring, fssd_r, fssd_g]
    wr = tfem.WithReductions(kernel, reducers)

    @tf.function(jit_compile=True)
    def run(seed):
        x0 = tf.constant([2.0, -1.0, 0.5], tf.float64)
        states, (scores, red) = tfp.mcmc.sample_chain(
            61, x0, kernel=wr, seed=seed,
            trace_fn=lambda s, kr: (get_innermost_score(kr)[0], kr.reduction_results),
        )
        last = tf.nest.map_structure(lambda t: t[-1], red)
        return states, scores, [r.finalize(s) for r, s in zip(reducers, last)]

    states, scores, (k_full, k_ring, f_thin, f_all) = run(tf_seed)
    states, scores = states.numpy(), scores.numpy()
    kept = slice(thin - 1, None, thin)  # steps thin, 2·thin, ...
    xs, ss = states[kept], scores[kept]
    assert xs.shape[0] == 20
    np.testing.assert_allclose(k_full.numpy(), kernel_stein_discrepancy(xs, ss).numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(
        k_ring.numpy(),
        kernel_stein_discrepancy(xs[-7:], ss[-7:], statistic="u").numpy(), rtol=1e-6,
    )
    np.testing.assert_allclose(f_thin.numpy(), fssd(xs, ss, V3, kernel="imq").numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(
        f_all.numpy(), fssd(states, scores, V3, bandwidth=1.3).numpy(), rtol=1e-6
    )
    # The default score is the kernel's stochastic score, not the exact one.
    assert not np.allclose(ss, -xs)


def test_score_fn_and_chain_dims_via_sample_fold(tf_seed):
    """Full-data ``score_fn`` on kept states; 3 chains at once; ``sample_fold``."""
    est = _gaussian_estimator(noise=2.0)
    kernel = sg.SGLD(est, 0.1)
    score_fn = est.score_fn()
    ksd_r = KSDReducer(capacity=50, thin=2, score_fn=score_fn, chain_ndims=1)
    fssd_r = FSSDReducer(V3, score_fn=score_fn, chain_ndims=1, thin=2)
    trace = tfem.TracingReducer(size=40)

    @tf.function(jit_compile=True)
    def run(seed):
        x0 = tf.constant([[2.0, -1.0, 0.5], [0.0, 0.0, 0.0], [-3.0, 1.0, 1.0]], tf.float64)
        red, _, _ = tfem.sample_fold(40, x0, kernel=kernel, reducer=[ksd_r, fssd_r, trace],
                                     seed=seed)
        return red

    k, f, (states, _) = run(tf_seed)
    states = states.numpy()  # [40, 3, 3]
    assert k.shape == (3,) and f.shape == (3,)
    for c in range(3):
        xs = states[1::2, c]
        np.testing.assert_allclose(k.numpy()[c], kernel_stein_discrepancy(xs, -xs).numpy(),
                                   rtol=1e-6)
        np.testing.assert_allclose(f.numpy()[c], fssd(xs, -xs, V3, kernel="imq").numpy(),
                                   rtol=1e-6)


@pytest.mark.parametrize(
    "make_kernel",
    [
        lambda e: sg.SGLD(e, 0.05),
        lambda e: sg.PSGLD(e, 0.05),
        lambda e: sg.SGHMC(e, 0.05, num_leapfrog_steps=3, friction=0.5),
        lambda e: sg.SGNHT(e, 0.02),
    ],
    ids=["SGLD", "PSGLD", "SGHMC", "SGNHT"],
)
def test_every_kernel_float32_parts(make_kernel, tf_seed):
    """List-of-parts float32 states through sample_fold under XLA for every kernel."""
    est = sg.NoisyGradientEstimator(
        lambda p: -0.5 * (tf.reduce_sum(p[0] ** 2, [-2, -1]) + tf.reduce_sum(p[1] ** 2, -1)),
        0.3,
    )
    kernel = make_kernel(est)
    ksd_r = KSDReducer(capacity=30)
    fssd_r = FSSDReducer(np.zeros((2, 5)))
    trace = tfem.TracingReducer(
        trace_fn=lambda s, kr: (s, get_innermost_score(kr)), size=30
    )

    @tf.function(jit_compile=True)
    def run(seed):
        x0 = [tf.ones([2, 2], tf.float32), tf.ones([1], tf.float32)]
        red, _, _ = tfem.sample_fold(30, x0, kernel=kernel, reducer=[ksd_r, fssd_r, trace],
                                     seed=seed)
        return red

    k, f, (states, scores) = run(tf_seed)
    assert k.dtype == tf.float32 and np.isfinite(k.numpy())
    assert np.isfinite(f.numpy())
    xs = np.concatenate([states[0].numpy().reshape(30, -1), states[1].numpy()], 1)
    ss = np.concatenate([scores[0].numpy().reshape(30, -1), scores[1].numpy()], 1)
    np.testing.assert_allclose(
        k.numpy(), kernel_stein_discrepancy(xs.astype(np.float64), ss.astype(np.float64)),
        rtol=1e-4,
    )


@pytest.mark.statistical
def test_trace_decreases_as_sgld_converges(tf_seed):
    """SGLD on N(0, I₂) started at (20, 20): the moving-window KSD and the running
    FSSD read in ``trace_fn`` fall by an order of magnitude as the chain converges.

    A wrong score sign or kernel derivative would make the equilibrium values
    comparable to (or larger than) the transient ones."""
    est = _gaussian_estimator(noise=0.5)
    kernel = sg.SGLD(est, 0.05)
    ksd_r = KSDReducer(capacity=50, thin=4)
    fssd_r = FSSDReducer(np.array([[0.5, 0.5], [-1.0, 0.0], [0.0, 1.5]]))
    wr = tfem.WithReductions(kernel, [ksd_r, fssd_r])
    every = 50

    def trace_fn(state, kr):
        k_st, f_st = kr.reduction_results
        # Finalize the O(capacity²) KSD only every `every` steps.
        k = tf.cond(tf.equal(kr.inner_results.step % every, 0),
                    lambda: ksd_r.finalize(k_st), lambda: tf.constant(np.nan, tf.float64))
        return k, fssd_r.finalize(f_st)

    @tf.function(jit_compile=True)
    def run(seed):
        return tfp.mcmc.sample_chain(1200, tf.constant([20.0, 20.0], tf.float64), kernel=wr,
                                     trace_fn=trace_fn, seed=seed)

    _, (k_trace, f_trace) = run(tf_seed)
    k = k_trace.numpy()[every - 1::every]  # windows ending at steps 50, 100, ...
    f = f_trace.numpy()
    assert np.all(np.isfinite(k))
    # The first window holds only transient states; the last ones are in equilibrium.
    assert k[0] > 5 * np.mean(k[-5:]), k
    assert np.mean(k[:4]) > np.mean(k[-4:]), k
    # The running FSSD² is dominated by the transient early on and decays afterwards.
    # (Measured with seeds 17, 1, 2: f ≈ 0.5 at step 50, 0.005-0.05 after 1200 steps.)
    assert f[50] > 5 * np.mean(np.abs(f[-100:])), (f[50], f[-100:])
    assert f[50] > f[300] and f[100] > np.mean(np.abs(f[-100:]))


def test_reducer_bad_arguments():
    with pytest.raises(ValueError, match="`capacity`"):
        KSDReducer(capacity=1, statistic="u")
    with pytest.raises(ValueError, match="`beta`"):
        KSDReducer(beta=-1.0)
    with pytest.raises(ValueError, match="`c`"):
        KSDReducer(c=0.0)
    with pytest.raises(ValueError, match="`thin`"):
        KSDReducer(thin=0)
    with pytest.raises(ValueError, match="`score_fn`"):
        KSDReducer(score_fn=lambda s: s, score_getter_fn=lambda kr: kr)
    with pytest.raises(ValueError, match="`locations`"):
        FSSDReducer(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="`locations`"):
        FSSDReducer(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="`bandwidth`"):
        FSSDReducer(V3, kernel="gaussian")
    with pytest.raises(ValueError, match="`kernel`"):
        FSSDReducer(V3, kernel="rbf")
    with pytest.raises(ValueError, match="`locations`"):
        FSSDReducer(V3).initialize(tf.zeros([4]))
    with pytest.raises(ValueError, match="`score_getter_fn`"):
        get_innermost_score(tfem.SampleDiscardingKernel)  # no results fields at all


@pytest.mark.parametrize(
    "capacity, steps, chain_ndims",
    [(100, 30, 0), (100, 30, 1), (7, 23, 0), (7, 23, 1), (1100, 1250, 0)],
    ids=["partly-filled", "partly-filled-chains", "wrapped", "wrapped-chains", "wrapped-large"],
)
def test_rbf_median_bandwidth_matches_batch_function(capacity, steps, chain_ndims, tf_seed):
    """RBF with the median-heuristic bandwidth: a partly filled buffer's empty rows
    stay out of the median, and a wrapped buffer is subsampled in time order (above
    1000 rows the heuristic takes evenly spaced rows), as the batch function does."""
    est = _gaussian_estimator(noise=1.0)
    kernel = sg.SGLD(est, 0.05)
    score_fn = est.score_fn()
    red = KSDReducer(capacity=capacity, kernel="rbf", score_fn=score_fn,
                     chain_ndims=chain_ndims)
    trace = tfem.TracingReducer(size=steps)
    shape = [2, 3] if chain_ndims else [3]

    @tf.function(jit_compile=True)
    def run(seed):
        x0 = tf.fill(shape, tf.constant(3.0, tf.float64))
        out, _, _ = tfem.sample_fold(steps, x0, kernel=kernel, reducer=[red, trace], seed=seed)
        return out

    k, (states, _) = run(tf_seed)
    states = states.numpy()
    kept = states[-capacity:]
    expect = [kernel_stein_discrepancy(kept, -kept, kernel="rbf").numpy()] if not chain_ndims \
        else [kernel_stein_discrepancy(kept[:, c], -kept[:, c], kernel="rbf").numpy()
              for c in range(2)]
    np.testing.assert_allclose(np.reshape(k.numpy(), [-1]), expect, rtol=1e-9)
    # Power: the zero rows (the old behaviour) give another bandwidth and another value.
    if steps < capacity and not chain_ndims:
        padded = np.concatenate([kept, np.zeros((capacity - steps, 3))])
        from tfp_sgmcmc.diagnostics.stein_kernels import median_heuristic

        wrong_h = float(median_heuristic(padded))
        wrong = kernel_stein_discrepancy(kept, -kept, kernel="rbf", bandwidth=wrong_h).numpy()
        assert abs(wrong - expect[0]) > 1e-3 * abs(expect[0])
