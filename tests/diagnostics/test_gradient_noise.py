"""Gradient-noise ratio r = ε²Var(ĝ)/(injected variance): exact value, coefficients, warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.diagnostics import gradient_noise_ratio, laplace_ksd_reference
from tfp_sgmcmc.driver import sample


def _gauss(n=10_000, d=2, batch_size=100, seed=0):
    """The model of docs/cli.md: x_i ~ N(1, I), N(x_i; θ, I) likelihood, N(0, I) prior."""
    x = np.random.default_rng(seed).normal(1.0, 1.0, size=(n, d)).astype("float32")

    def log_likelihood(theta, batch):
        return -0.5 * tf.reduce_sum((tf.expand_dims(theta, -2) - batch) ** 2, -1)

    def log_prior(theta):
        return -0.5 * tf.reduce_sum(theta**2, -1)

    return x, sg.MinibatchEstimator(log_likelihood, x, batch_size, log_prior_fn=log_prior)


def test_ratio_matches_the_exact_minibatch_variance():
    """ĝ_j = (N/n) Σ_batch (x_ij − θ_j) − θ_j without replacement: Var = (N²/n) s_j² (N−n)/(N−1)."""
    n, d, b, eps = 2000, 50, 50, 1e-4
    x, est = _gauss(n, d, b)
    s2 = x.astype(np.float64).var(0)  # population variance of each column
    exact = eps * (n**2 / b) * s2 * (n - b) / (n - 1) / 2.0  # r = ε V / (2T), T = 1
    report = gradient_noise_ratio(sg.SGLD(est, eps), tf.zeros([d]), num_probes=256, seed=3)
    rel = report.ratio[0] / exact
    # Each r_j is a sample variance of 256 draws (relative sd √(2/255) ≈ 0.09), nearly
    # independent across the 50 columns: the mean's standard error is measured from them
    # (≈ 0.013), and the check is |z| < 3.5. Power: a 10%-off coefficient, either way,
    # is ≥ 0.09 away, i.e. |z| > 3.5 even after the 3.5-SE allowance.
    se = rel.std(ddof=1) / np.sqrt(d)
    assert 0.005 < se < 0.025, se
    assert abs(rel.mean() - 1.0) / se < 3.5, (rel.mean(), se)
    for wrong in (1.1, 1 / 1.1):
        assert abs(wrong * rel.mean() - 1.0) / (wrong * se) > 3.5, (wrong, rel.mean(), se)
    assert report.max == pytest.approx(float(report.ratio[0].max()))


def test_coefficients_of_sghmc_and_sgnht_and_temperature():
    _, est = _gauss(2000, 3, 50)
    state = tf.zeros([3])
    base = gradient_noise_ratio(sg.SGLD(est, 1e-4), state, seed=1).ratio[0]
    hot = gradient_noise_ratio(sg.SGLD(est, 1e-4, temperature=2.0), state, seed=1).ratio[0]
    np.testing.assert_allclose(hot, base / 2.0, rtol=1e-12)
    # SGHMC: r = η V / (2(α − β̂)T) = SGLD's r / (α − β̂).
    k = sg.SGHMC(est, 1e-4, friction=0.1, noise_estimate=0.02)
    np.testing.assert_allclose(
        gradient_noise_ratio(k, state, seed=1).ratio[0], base / 0.08, rtol=1e-12
    )
    # SGNHT: r = h V / (2aT), reported but never flagged (the thermostat absorbs it).
    rep = gradient_noise_ratio(sg.SGNHT(est, 1e-4, diffusion=0.5), state, seed=1)
    np.testing.assert_allclose(rep.ratio[0], base / 0.5, rtol=1e-12)
    assert rep.max > rep.threshold and not rep.violated
    assert gradient_noise_ratio(sg.PSGLD(est, 1e-4), state) is None  # not derived
    with pytest.raises(ValueError, match="`num_probes`"):
        gradient_noise_ratio(sg.SGLD(est, 1e-4), state, num_probes=1)


def test_driver_warns_on_the_old_cli_example_settings(tmp_path):
    """docs/cli.md used step 1e-5 with batch 100: posterior sd 0.023 against 0.0100, R-hat 1,
    no divergence. The ratio (≈ 5 there) must say so; the new example's settings must not."""
    _, old = _gauss(batch_size=100)
    with pytest.warns(RuntimeWarning, match="gradient-noise ratio.*smaller step size"):
        run = sample(
            sg.SGLD(old, 1e-5),
            tf.zeros([4, 2]),
            20,
            str(tmp_path / "old"),
            chunk_size=20,
            progress=False,
            jit_compile=False,
        )
    assert run.gradient_noise["violated"] and 2.0 < run.gradient_noise["median"] < 10.0
    _, new = _gauss(batch_size=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run = sample(
            sg.SGLD(new, 1e-6),
            tf.zeros([4, 2]),
            20,
            str(tmp_path / "new"),
            chunk_size=20,
            progress=False,
            jit_compile=False,
        )
    assert not run.gradient_noise["violated"] and run.gradient_noise["max"] < 0.1


def test_laplace_reference_is_the_ksd_of_exact_samples():
    """On a Gaussian posterior the Laplace draws are exact: their KSD matches the KSD of
    exact posterior draws of the same size (same seed) and is far below a 2x-wide sample."""
    x, est = _gauss(2000, 2, 100)
    prec = 2000 + 1.0
    mean = x.astype(np.float64).sum(0) / prec
    ref = laplace_ksd_reference(est, [np.zeros(2, np.float32)], 300, seed=0)
    np.testing.assert_allclose(ref.map_state[0], mean, atol=1e-4)
    np.testing.assert_allclose(ref.laplace_sd, 1 / np.sqrt(prec), rtol=1e-3)
    z = np.random.default_rng(0).standard_normal((300, 2))
    exact = (mean + z / np.sqrt(prec)).astype(np.float32)
    wide = (mean + 2 * z / np.sqrt(prec)).astype(np.float32)
    ksd = [
        float(
            sg.kernel_stein_discrepancy(
                s, est.full_log_prob_and_gradient(s).grads_target_log_prob[0]
            )
        )
        for s in (exact, wide)
    ]
    assert ref.ksd == pytest.approx(ksd[0], rel=0.05)
    assert ksd[1] > 1.8 * ref.ksd  # sd 2x too large: KSD 2.2x the reference
