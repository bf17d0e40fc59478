"""KSD: exactness against a brute-force reference, rate/power, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc.diagnostics import kernel_stein_discrepancy
from tfp_sgmcmc.diagnostics.stein_kernels import (
    median_heuristic,
    stein_kernel_diagonal,
    stein_kernel_matrix,
)

from ._reference import ksd_ref, stein_matrix_ref


def _random_inputs(rng, n=60, d=4, shift=1.5):
    x = rng.normal(size=(n, d)) + shift
    s = -(x - 0.3) * 1.7 + 0.4 * rng.normal(size=(n, d))
    return x, s


@pytest.mark.parametrize("c,beta", [(1.0, -0.5), (2.0, -0.3), (0.5, -0.9)])
@pytest.mark.parametrize("statistic", ["v", "u"])
@pytest.mark.parametrize("block_size", [1024, 16, 7])
def test_imq_equals_bruteforce(rng, c, beta, statistic, block_size):
    x, s = _random_inputs(rng)
    got = kernel_stein_discrepancy(
        x, s, c=c, beta=beta, statistic=statistic, block_size=block_size
    ).numpy()
    want = ksd_ref(x, s, statistic, kernel="imq", c=c, beta=beta)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("statistic", ["v", "u"])
def test_rbf_equals_bruteforce(rng, statistic):
    x, s = _random_inputs(rng, n=50, d=3)
    got = kernel_stein_discrepancy(x, s, kernel="rbf", bandwidth=1.3, statistic=statistic,
                                   block_size=8)
    np.testing.assert_allclose(
        got.numpy(), ksd_ref(x, s, statistic, kernel="rbf", h=1.3), rtol=1e-6
    )
    # Default bandwidth = median pairwise distance.
    d2 = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    med = np.median(d2[np.triu_indices(len(x), 1)])
    np.testing.assert_allclose(median_heuristic(tf.constant(x)).numpy(), med, rtol=1e-9)
    got_default = kernel_stein_discrepancy(x, s, kernel="rbf", statistic=statistic)
    np.testing.assert_allclose(
        got_default.numpy(), ksd_ref(x, s, statistic, kernel="rbf", h=med), rtol=1e-6
    )


def test_stein_matrix_and_closed_form_diagonal(rng):
    x, s = _random_inputs(rng, n=20, d=5)
    for kw in ({"c": 1.0, "beta": -0.5}, {"c": 1.7, "beta": -0.25}):
        km = stein_kernel_matrix(x, s, **kw).numpy()
        ref = stein_matrix_ref(x, s, "imq", **kw)
        np.testing.assert_allclose(km, ref, rtol=1e-6, atol=1e-9 * np.abs(ref).max())
        c, b = kw["c"], kw["beta"]
        d = x.shape[1]
        closed = (s**2).sum(-1) * c ** (2 * b) - 2 * d * b * c ** (2 * (b - 1))
        np.testing.assert_allclose(np.diag(ref), closed, rtol=1e-10)
        np.testing.assert_allclose(
            stein_kernel_diagonal(tf.constant(s), "imq", c, b).numpy(), closed, rtol=1e-10
        )
    # c = 1, β = −½: k_π(x, x) = ‖s‖² + d.
    np.testing.assert_allclose(
        stein_kernel_diagonal(tf.constant(s)).numpy(), (s**2).sum(-1) + x.shape[1], rtol=1e-12
    )


def test_list_of_parts_matches_flattened(rng):
    n = 40
    a = rng.normal(size=(n, 2, 3))
    b = rng.normal(size=(n,))
    sa = -a + 0.1 * rng.normal(size=a.shape)
    sb = -b
    flat_x = np.concatenate([a.reshape(n, -1), b[:, None]], 1)
    flat_s = np.concatenate([sa.reshape(n, -1), sb[:, None]], 1)
    got = kernel_stein_discrepancy([a, b], [sa, sb], block_size=16).numpy()
    np.testing.assert_allclose(got, ksd_ref(flat_x, flat_s), rtol=1e-6)


def test_float32_close_to_float64_with_large_scores(rng):
    # ‖s‖ ∝ N: the sum cancels heavily; centring + float64 accumulation keep
    # float32 inputs usable (chain far from the origin, scores ~1e3).
    n, d = 400, 10
    x = 5.0 + 0.05 * rng.normal(size=(n, d))
    s = -(x - 5.0) / 0.05**2 + 30.0 * rng.normal(size=(n, d))
    v64 = kernel_stein_discrepancy(x, s, block_size=128).numpy()
    v32 = kernel_stein_discrepancy(x.astype(np.float32), s.astype(np.float32),
                                   block_size=128).numpy()
    assert v32.dtype == np.float32
    np.testing.assert_allclose(v64, ksd_ref(x, s), rtol=1e-6)
    np.testing.assert_allclose(v32, v64, rtol=1e-3)


def test_inside_xla_function(rng):
    x, s = _random_inputs(rng, n=70)
    f = tf.function(lambda a, b: kernel_stein_discrepancy(a, b, block_size=32),
                    jit_compile=True)
    np.testing.assert_allclose(f(tf.constant(x), tf.constant(s)).numpy(), ksd_ref(x, s),
                               rtol=1e-6)


def test_nonfinite_in_graph_gives_nan(rng):
    x, s = _random_inputs(rng, n=10)
    s[3, 1] = np.nan
    f = tf.function(lambda a, b: kernel_stein_discrepancy(a, b))
    assert np.isnan(f(tf.constant(x), tf.constant(s)).numpy())


@pytest.mark.statistical
def test_rate_and_power_on_gaussian(seed):
    """Exact N(0, I) samples: V-KSD ~ n^{-1/2}; 10% wrong scale / shifted mean: larger.

    With a flipped score sign or a wrong kernel derivative the exact samples
    would have a non-zero population KSD, the V-statistic would stop shrinking,
    and the slope check would fail.
    """
    r = np.random.default_rng(seed)
    d = 3
    score = lambda x: -x  # noqa: E731  N(0, I)
    ns = [250, 500, 1000, 2000]
    reps = 4
    v_exact = []
    for n in ns:
        vals = [kernel_stein_discrepancy(x := r.normal(size=(n, d)), score(x)).numpy()
                for _ in range(reps)]
        v_exact.append(np.mean(vals))
    slope = np.polyfit(np.log(ns), np.log(v_exact), 1)[0]
    assert -0.62 < slope < -0.38, slope
    n = 4000
    x = r.normal(size=(n, d))
    exact = kernel_stein_discrepancy(x, score(x)).numpy()
    wide = kernel_stein_discrepancy(1.1 * x, score(1.1 * x)).numpy()
    shifted = kernel_stein_discrepancy(x + 0.3, score(x + 0.3)).numpy()
    assert wide > 1.6 * exact, (wide, exact)
    assert shifted > 3.0 * exact, (shifted, exact)
    # A wrong target plateaus at its population KSD instead of shrinking like n^{-1/2}:
    # from n = 500 to 4000 the exact value falls to ~0.35x, the 10%-wide one stays > 0.6x.
    xs = x[:500]
    wide_small = kernel_stein_discrepancy(1.1 * xs, score(1.1 * xs)).numpy()
    assert wide / wide_small > 0.6, (wide, wide_small)
    # U-statistic: centred at 0 for exact samples, clearly positive otherwise.
    u_exact = kernel_stein_discrepancy(x, score(x), statistic="u").numpy()
    u_shift = kernel_stein_discrepancy(x + 0.3, score(x + 0.3), statistic="u").numpy()
    assert abs(u_exact) < 0.2 * u_shift, (u_exact, u_shift)


@pytest.mark.parametrize(
    "kwargs,arg",
    [
        ({"beta": 0.0}, "beta"),
        ({"beta": -1.0}, "beta"),
        ({"beta": 0.5}, "beta"),
        ({"c": 0.0}, "c"),
        ({"c": -1.0}, "c"),
        ({"kernel": "gauss"}, "kernel"),
        ({"statistic": "w"}, "statistic"),
        ({"block_size": 0}, "block_size"),
        ({"bandwidth": 1.0}, "bandwidth"),
        ({"kernel": "rbf", "bandwidth": -1.0}, "bandwidth"),
    ],
)
def test_bad_arguments(rng, kwargs, arg):
    x, s = _random_inputs(rng, n=5)
    with pytest.raises(ValueError, match=f"`{arg}`"):
        kernel_stein_discrepancy(x, s, **kwargs)


def test_bad_inputs(rng):
    x, s = _random_inputs(rng, n=5)
    with pytest.raises(ValueError, match="`samples` and `scores`"):
        kernel_stein_discrepancy(x, s[:, :3])
    with pytest.raises(ValueError, match="`scores`"):
        kernel_stein_discrepancy([x, x], s)
    with pytest.raises(ValueError, match="`samples`"):
        kernel_stein_discrepancy(x[:1], s[:1], statistic="u")
    bad = s.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="`scores`.*non-finite"):
        kernel_stein_discrepancy(x, bad)
    bad = x.copy()
    bad[1, 1] = np.nan
    with pytest.raises(ValueError, match="`samples`.*non-finite"):
        kernel_stein_discrepancy(bad, s)
    with pytest.raises(ValueError, match="`samples`"):
        kernel_stein_discrepancy(x.astype(np.int32), s.astype(np.int32))


def _median_ref(x, max_points=1000):
    n = len(x)
    m = min(n, max_points)
    z = x[np.round(np.linspace(0, n - 1, m)).astype(int)].astype(np.float64)
    iu, ju = np.triu_indices(m, 1)
    return np.sqrt(np.median(((z[iu] - z[ju]) ** 2).sum(-1)))


@pytest.mark.parametrize("n", [2, 3, 201, 1300])
@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_median_heuristic_centres_before_the_gram_form(rng, n, offset):
    """Far from the origin, float32 distances from ‖x‖² + ‖y‖² − 2xᵀy cancel; the
    subsample is centred first, so the median stays the reference's (in eager mode,
    a traced function with unknown n, and XLA)."""
    x64 = rng.normal(size=(n, 2)) + offset
    x = x64.astype(np.float32)
    want = _median_ref(x)
    dyn = tf.function(median_heuristic, input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    xla = tf.function(lambda a: median_heuristic(a), jit_compile=True)
    for got in (median_heuristic(x), dyn(x), xla(tf.constant(x))):
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-4)
    # num_valid: only the leading rows count (a partly filled buffer).
    padded = np.concatenate([x, np.zeros((5, 2), np.float32)])
    np.testing.assert_allclose(
        median_heuristic(padded, num_valid=tf.constant(n)).numpy(), want, rtol=2e-4
    )
    assert median_heuristic(padded[:1], num_valid=1).numpy() == 1.0  # no pair: 1


def test_tensor_bandwidth_and_empty_event_are_rejected(rng):
    x, s = _random_inputs(rng, n=10, d=3)
    for bad in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="`bandwidth`"):
            kernel_stein_discrepancy(x, s, kernel="rbf", bandwidth=tf.constant(bad, tf.float64))
    with pytest.raises(ValueError, match="`bandwidth` must be a scalar"):
        kernel_stein_discrepancy(x, s, kernel="rbf", bandwidth=tf.constant([1.0, 2.0]))
    with pytest.raises(ValueError, match="`samples` has no coordinates"):
        kernel_stein_discrepancy(np.zeros((5, 0)), np.zeros((5, 0)))
    # Overflow names KSD's own inputs (not another function's arguments).
    with pytest.raises(ValueError, match=r"^`samples`/`scores` too large"):
        kernel_stein_discrepancy(x.astype(np.float32), (s * 1e30).astype(np.float32))
