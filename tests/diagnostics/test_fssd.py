"""FSSD and FSSD-opt: exactness, rate/power, both optimisation modes, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc.diagnostics import fssd, fssd_opt
from tfp_sgmcmc.diagnostics.fssd import fssd_features

from ._reference import fssd_ref, fssd_tau_ref


@pytest.mark.parametrize("kernel", ["gaussian", "imq"])
@pytest.mark.parametrize("chunk_size", [4096, 13])
def test_fssd_equals_bruteforce(rng, kernel, chunk_size):
    n, d, j = 80, 4, 3
    x = rng.normal(size=(n, d)) + 0.5
    s = -1.3 * x + 0.2 * rng.normal(size=(n, d))
    v = rng.normal(size=(j, d))
    if kernel == "gaussian":
        got = fssd(x, s, v, kernel="gaussian", bandwidth=1.4, chunk_size=chunk_size)
        want = fssd_ref(x, s, v, kernel="gaussian", sigma=1.4)
        tau = fssd_features(tf.constant(x), tf.constant(s), v, "gaussian", 1.4)
        tau_ref = fssd_tau_ref(x, s, v, "gaussian", sigma=1.4)
    else:
        got = fssd(x, s, v, kernel="imq", c=1.5, beta=-0.3, chunk_size=chunk_size)
        want = fssd_ref(x, s, v, kernel="imq", c=1.5, beta=-0.3)
        tau = fssd_features(tf.constant(x), tf.constant(s), v, "imq", None, 1.5, -0.3)
        tau_ref = fssd_tau_ref(x, s, v, "imq", c=1.5, beta=-0.3)
    np.testing.assert_allclose(tf.reshape(tau, [n, -1]).numpy(), tau_ref, rtol=1e-10)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_fssd_parts_and_default_bandwidth(rng):
    n = 50
    a, b = rng.normal(size=(n, 2, 2)), rng.normal(size=(n, 1))
    sa, sb = -a, -b + 0.1
    flat_x = np.concatenate([a.reshape(n, -1), b], 1)
    flat_s = np.concatenate([sa.reshape(n, -1), sb], 1)
    v = rng.normal(size=(2, 5))
    d2 = np.sqrt(((flat_x[:, None] - flat_x[None]) ** 2).sum(-1))
    med = np.median(d2[np.triu_indices(n, 1)])
    got = fssd([a, b], [sa, sb], v).numpy()
    np.testing.assert_allclose(got, fssd_ref(flat_x, flat_s, v, sigma=med), rtol=1e-6)


@pytest.mark.statistical
def test_rate_and_power_on_gaussian(seed):
    """Exact N(0, I) samples: FSSD²_U is a degenerate U-statistic, |value| ~ 1/n.

    A 10% wider sample or a shifted mean has population FSSD² > 0 and gives a
    clearly larger value (a flipped score sign or wrong ∇k would make the
    exact sample's population FSSD² non-zero and break the rate check).
    """
    r = np.random.default_rng(seed)
    d, j = 2, 3
    v = np.array([[0.5, -0.5], [1.0, 1.0], [-1.0, 0.3]])
    ns = [250, 1000, 4000]
    rms = []
    for n in ns:
        vals = [fssd(x := r.normal(size=(n, d)), -x, v, bandwidth=1.0).numpy()
                for _ in range(30)]
        # Median |FSSD²_U|: robust to the heavy (χ²-mixture) tails of the null law.
        rms.append(np.median(np.abs(vals)))
    slope = np.polyfit(np.log(ns), np.log(rms), 1)[0]
    assert -1.3 < slope < -0.7, (slope, rms)
    del j
    n = 8000
    x = r.normal(size=(n, d))
    exact = abs(fssd(x, -x, v, bandwidth=1.0).numpy())
    wide = fssd(1.1 * x, -1.1 * x, v, bandwidth=1.0).numpy()
    shifted = fssd(x + 0.3, -(x + 0.3), v, bandwidth=1.0).numpy()
    assert wide > 5 * max(exact, rms[-1]), (wide, exact, rms[-1])
    assert shifted > 5 * max(exact, rms[-1]), (shifted, exact, rms[-1])


@pytest.mark.statistical
def test_fssd_opt_jitkrittum_detects_wrong_scale(seed):
    r = np.random.default_rng(seed)
    x = r.normal(size=(2500, 3))
    null = fssd_opt(x, -x, seed=(seed, 1))
    alt = fssd_opt(1.2 * x, -1.2 * x, seed=(seed, 1))
    assert null.locations.shape == (5, 3)
    assert null.num_train == 500 and null.num_test == 2000
    assert null.bandwidth is not None and null.bandwidth.numpy() > 0
    assert null.p_value > 0.01, null.p_value
    assert alt.p_value < 0.01, alt.p_value
    assert alt.value.numpy() > null.value.numpy()
    # The test statistic is n_test · FSSD²_U on the held-out split.
    np.testing.assert_allclose(alt.test_statistic.numpy(), 2000 * alt.value.numpy(), rtol=1e-9)


def test_fssd_opt_mamba_independent_locations_and_ascent(seed):
    r = np.random.default_rng(seed)
    x = 1.2 * r.normal(size=(400, 3))
    res = fssd_opt(x, -x, mode="mamba", seed=(seed, 2))
    v = res.locations.numpy()
    assert v.shape == (10, 3)
    # Independent draws: all 10 locations differ (the reference code's bug made them equal).
    dists = np.sqrt(((v[:, None] - v[None]) ** 2).sum(-1))[np.triu_indices(10, 1)]
    assert dists.min() > 1e-3
    np.testing.assert_allclose(
        res.value.numpy(), fssd_ref(x, -x, v, kernel="imq"), rtol=1e-6
    )
    # 100 Adam steps of lr 1e-3 move each coordinate by about lr per step (|m̂|/√v̂ ≈ 1
    # for a steady gradient; up to ~2x when it flips), and raise FSSD².
    v0 = fssd_opt(x, -x, mode="mamba", seed=(seed, 2), num_steps=0).locations.numpy()
    step = np.abs(v - v0).max()
    assert 0.01 < step <= 0.2, step
    assert res.value.numpy() > fssd_ref(x, -x, v0, kernel="imq")


def test_bad_inputs(rng):
    x = rng.normal(size=(20, 3))
    v = rng.normal(size=(2, 3))
    with pytest.raises(ValueError, match="`kernel`"):
        fssd(x, -x, v, kernel="rbf")
    with pytest.raises(ValueError, match="`beta`"):
        fssd(x, -x, v, kernel="imq", beta=-1.5)
    with pytest.raises(ValueError, match="`c`"):
        fssd(x, -x, v, kernel="imq", c=0.0)
    with pytest.raises(ValueError, match="`bandwidth`"):
        fssd(x, -x, v, bandwidth=0.0)
    with pytest.raises(ValueError, match="`locations`"):
        fssd(x, -x, v[:, :2])
    with pytest.raises(ValueError, match="`locations`"):
        fssd(x, -x, np.zeros((0, 3)))
    with pytest.raises(ValueError, match="`samples` and `scores`"):
        fssd(x, -x[:, :2], v)
    with pytest.raises(ValueError, match="`samples`"):
        fssd(x[:1], -x[:1], v)
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="`scores`"):
        fssd(x, bad, v)
    with pytest.raises(ValueError, match="`num_locations`"):
        fssd_opt(x, -x, num_locations=0)
    with pytest.raises(ValueError, match="`mode`"):
        fssd_opt(x, -x, mode="adam")
    with pytest.raises(ValueError, match="`kernel`"):
        fssd_opt(x, -x, mode="mamba", kernel="gaussian")
    with pytest.raises(ValueError, match="`train_fraction`"):
        fssd_opt(x, -x, train_fraction=1.0)
    with pytest.raises(ValueError, match="`samples`"):
        fssd_opt(x[:5], -x[:5])


def test_fssd_with_run_time_sample_count_and_one_location(rng):
    """A traced function without a static n gives the eager value (and NaN for n < 2);
    a single location must be passed as [1, d]."""
    x = rng.normal(size=(37, 3))
    s = -x
    v = x[:4]
    dyn = tf.function(lambda a, b: fssd(a, b, v, chunk_size=5),
                      input_signature=[tf.TensorSpec([None, 3], tf.float64)] * 2)
    np.testing.assert_allclose(dyn(x, s).numpy(), fssd(x, s, v, chunk_size=5).numpy(),
                               rtol=1e-12)
    assert np.isnan(dyn(x[:1], s[:1]).numpy())
    with pytest.raises(ValueError, match=r"`locations` must be \[J, d\]"):
        fssd(x, s, x[0])
    np.testing.assert_allclose(fssd(x, s, x[:1]).numpy(), fssd(x, s, x[None, 0]).numpy())
    with pytest.raises(ValueError, match="`bandwidth`"):
        fssd(x, s, v, bandwidth=tf.constant(0.0, tf.float64))
