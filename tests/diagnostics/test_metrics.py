"""ESS, IAC, relative std error, calibration (ECE/MCE) and model averaging."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.diagnostics import (
    effective_sample_size,
    expected_calibration_error,
    integrated_autocorrelation_time,
    maximum_calibration_error,
    relative_std_error,
)
from tfp_sgmcmc.diagnostics.calibration import calibration_errors, model_averaged_probabilities


def _ar1(rng, n, m, a):
    x = np.empty((n, m))
    x[0] = rng.normal(size=m)
    e = rng.normal(size=(n, m)) * np.sqrt(1 - a * a)
    for t in range(1, n):
        x[t] = a * x[t - 1] + e[t]
    return x


def _iac_reference(f, c=5.0):
    """Direct O(n²) sums (no FFT) for one series, same window rule."""
    n = f.size
    g = f - f.mean()
    cov = np.array([np.dot(g[: n - t], g[t:]) / (n - t) for t in range(n)])
    rho = cov / cov[0]
    for m in range(1, n):
        tau = 1 + 2 * rho[1 : m + 1].sum()
        if m >= c * tau:
            return tau, m
    return 1 + 2 * rho[1:].sum(), n - 1


def test_iac_equals_direct_sums(rng):
    x = _ar1(rng, 300, 3, 0.7)
    res = integrated_autocorrelation_time(x)
    for j in range(3):
        tau, m = _iac_reference(x[:, j])
        np.testing.assert_allclose(res.per_parameter.numpy()[j], tau, rtol=1e-8)
        assert res.window.numpy()[j] == m
    np.testing.assert_allclose(res.mean.numpy(), res.per_parameter.numpy().mean(), rtol=1e-12)


@pytest.mark.statistical
def test_iac_ar1_exact_value_and_power(seed):
    """AR(1) with coefficient a has τ = (1 + a)/(1 − a). Tolerance from Sokal's
    variance var(τ̂) ≈ 2(2M + 1)τ²/n averaged over the series; a 10%-off τ fails
    (checked where the test is precise enough: a = 0.5)."""
    r = np.random.default_rng(seed)
    n, m = 20000, 10
    for a in (0.5, 0.9):
        res = integrated_autocorrelation_time(_ar1(r, n, m, a))
        true = (1 + a) / (1 - a)
        mean_window = res.window.numpy().mean()
        se = true * np.sqrt(2 * (2 * mean_window + 1) / n) / np.sqrt(m)
        z = 3.09  # Φ⁻¹(0.999)
        est = res.mean.numpy()
        assert abs(est - true) < z * se, (a, est, true, se)
        if a == 0.5:  # power: a 10% wrong τ is rejected (se ≈ 2% of τ here)
            assert abs(est - 1.1 * true) > z * se


def test_iac_parts_and_constant(rng):
    x = _ar1(rng, 200, 4, 0.3)
    res = integrated_autocorrelation_time([x[:, :2].reshape(200, 2, 1), x[:, 2:]])
    flat = integrated_autocorrelation_time(x)
    np.testing.assert_allclose(res.per_parameter[0].numpy().ravel(),
                               flat.per_parameter.numpy()[:2], rtol=1e-10)
    np.testing.assert_allclose(res.mean.numpy(), flat.mean.numpy(), rtol=1e-10)
    const = integrated_autocorrelation_time(np.ones((50, 1)))
    assert np.isnan(const.per_parameter.numpy()[0])


def test_ess_delegates_to_tfp(rng):
    x = _ar1(rng, 500, 3, 0.6)
    np.testing.assert_allclose(
        effective_sample_size(x).numpy(),
        tfp.mcmc.effective_sample_size(tf.constant(x)).numpy(), rtol=1e-12,
    )
    parts = effective_sample_size([x[:, :1], x[:, 1:]], filter_beyond_positive_pairs=True)
    assert isinstance(parts, list) and parts[1].shape == (2,)


def test_relative_std_error(rng):
    x = rng.normal(size=(1000, 4)) * np.array([1.0, 2.0, 0.5, 3.0])
    ref = np.array([1.0, 2.0, 0.5, 3.0])
    want = np.linalg.norm(x.std(0) - ref) / np.linalg.norm(ref)
    np.testing.assert_allclose(relative_std_error(x, ref).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(relative_std_error(1.1 * ref, ref).numpy(), 0.1, rtol=1e-12)
    np.testing.assert_allclose(
        relative_std_error([x[:, :1], x[:, 1:]], [ref[:1], ref[1:]]).numpy(), want, rtol=1e-12
    )
    with pytest.raises(ValueError, match="`samples_or_std`"):
        relative_std_error(x[:, :3], ref)
    with pytest.raises(ValueError, match="`reference_std`"):
        relative_std_error(ref, np.zeros(4))
    with pytest.raises(ValueError, match="`reference_std`"):
        relative_std_error(ref, np.array([1.0, np.nan, 1.0, 1.0]))


def test_ece_mce_hand_computed():
    # conf/pred: .95→1 ✓, .85→1 ✗, .25→0 (conf .75) ✓, .62→1 ✓; bins (0.9,1], (0.8,0.9],
    # (0.7,0.8], (0.6,0.7] with gaps .05, .85, .25, .38.
    p1 = np.array([0.95, 0.85, 0.25, 0.62])
    y = np.array([1, 0, 0, 1])
    ece, mce = calibration_errors(p1, y)
    np.testing.assert_allclose(ece, (0.05 + 0.85 + 0.25 + 0.38) / 4, rtol=1e-12)
    np.testing.assert_allclose(mce, 0.85, rtol=1e-12)
    probs = np.stack([1 - p1, p1], 1)
    assert expected_calibration_error(probs, np.eye(2)[y]) == pytest.approx(ece, rel=1e-12)
    assert maximum_calibration_error(probs, y) == pytest.approx(mce, rel=1e-12)


def _paper_reference(conf, correct, m):
    """The MAMBA repository's get_ECE_MCE loop, restated."""
    _, bins = np.histogram(conf, bins=m)
    eces, mces = [], []
    for idx in range(1, m + 1):
        sel = (conf < bins[idx]) & (conf >= bins[idx - 1])
        with np.errstate(invalid="ignore"):
            acc = np.mean(correct[sel]) if sel.any() else np.nan
            cb = np.mean(conf[sel]) if sel.any() else np.nan
        eces.append(sel.sum() * abs(acc - cb))
        mces.append(abs(acc - cb))
    return np.sum(eces) / conf.size, max(mces)


def test_calibration_random_and_paper_compatible(rng):
    n, k = 500, 4
    logits = rng.normal(size=(n, k)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = np.array([rng.choice(k, p=p) for p in probs])  # calibrated by construction
    ece, mce = calibration_errors(probs, y, num_bins=10)
    # Brute force: each sample's bin by explicit interval tests.
    conf, pred = probs.max(1), probs.argmax(1)
    corr = (pred == y).astype(float)
    tot, mx = 0.0, 0.0
    for b in range(10):
        lo, hi = b / 10, (b + 1) / 10
        sel = ((conf > lo) | (b == 0) & (conf >= lo)) & (conf <= hi)
        if sel.any():
            gap = abs(corr[sel].mean() - conf[sel].mean())
            tot += sel.sum() / n * gap
            mx = max(mx, gap)
    np.testing.assert_allclose([ece, mce], [tot, mx], rtol=1e-12)
    assert ece < 0.1  # calibrated probabilities give a small ECE
    overconfident = probs**3 / (probs**3).sum(1, keepdims=True)
    assert expected_calibration_error(overconfident, y) > 2 * ece
    pe, pm = calibration_errors(probs, y, paper_compatible=True)
    re, rm = _paper_reference(conf, corr, 10)
    np.testing.assert_allclose([pe, pm], [re, rm], rtol=1e-12)


def test_model_averaged_probabilities(rng):
    p = rng.uniform(0.05, 0.95, size=(7, 5, 3))
    np.testing.assert_allclose(model_averaged_probabilities(p), p.mean(0), rtol=1e-12)
    np.testing.assert_allclose(model_averaged_probabilities(p, "geometric"),
                               np.exp(np.log(p).mean(0)), rtol=1e-12)
    np.testing.assert_allclose(model_averaged_probabilities(np.log(p), "geometric", True),
                               np.exp(np.log(p).mean(0)), rtol=1e-12)
    np.testing.assert_allclose(model_averaged_probabilities(np.log(p), log_inputs=True),
                               p.mean(0), rtol=1e-12)
    with pytest.raises(ValueError, match="`method`"):
        model_averaged_probabilities(p, "harmonic")
    with pytest.raises(ValueError, match="`per_sample`"):
        model_averaged_probabilities(p + 1.0)


def test_metric_bad_inputs():
    with pytest.raises(ValueError, match="`samples`"):
        integrated_autocorrelation_time(np.ones((1, 3)))
    with pytest.raises(ValueError, match="`samples`"):
        integrated_autocorrelation_time(np.array([[0.0], [np.nan], [1.0]]))
    with pytest.raises(ValueError, match="`c`"):
        integrated_autocorrelation_time(np.ones((5, 1)), c=0.0)
    with pytest.raises(ValueError, match="`samples`"):
        effective_sample_size(np.ones((1, 2)))
    with pytest.raises(ValueError, match="`num_bins`"):
        expected_calibration_error(np.array([0.3]), np.array([1]), num_bins=0)
    with pytest.raises(ValueError, match="`labels`"):
        expected_calibration_error(np.array([0.3, 0.4]), np.array([1]))
    with pytest.raises(ValueError, match="`probs`"):
        expected_calibration_error(np.array([np.nan]), np.array([1]))


def test_predictive_metrics_by_hand():
    from tfp_sgmcmc.diagnostics import predictive_metrics
    from tfp_sgmcmc.diagnostics.calibration import calibration_errors

    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.0, 1.0]])
    labels = np.array([0, 1, 1, 0])
    out = predictive_metrics(probs, labels, num_bins=5)
    assert out["accuracy"] == pytest.approx(0.5)
    # The last row's true class has probability 0: floored at 1e-300, not an infinite loss,
    # also for a float32 predictive (1e-300 is 0 in float32).
    want = -np.mean(np.log([0.9, 0.8, 0.4, 1e-300]))
    assert out["log_loss"] == pytest.approx(want, rel=1e-12)
    f32 = predictive_metrics(probs.astype(np.float32), labels, num_bins=5)
    assert f32["log_loss"] == pytest.approx(want, rel=1e-6)
    ece, mce = calibration_errors(probs, labels, num_bins=5)
    assert (out["ece"], out["mce"]) == (ece, mce)
    assert predictive_metrics(probs, labels, min_probability=1e-12)["log_loss"] < out["log_loss"]
    with pytest.raises(ValueError, match="probs"):
        predictive_metrics(probs[:, 0], labels)


def test_ess_single_tensor_takes_per_part_arguments(rng):
    """A single tensor reaches TFP as one tensor, so ``cross_chain_dims=1`` (a scalar
    for a scalar structure) works as in TFP."""
    x = _ar1(rng, 400, 6, 0.5).reshape(400, 3, 2)
    np.testing.assert_allclose(
        effective_sample_size(x, cross_chain_dims=1).numpy(),
        tfp.mcmc.effective_sample_size(tf.constant(x), cross_chain_dims=1).numpy(),
        rtol=1e-12,
    )


@pytest.mark.parametrize("num_bins", [10, 25, 29, 35, 38, 100])
def test_ece_bins_are_right_closed_at_every_edge(num_bins):
    """A confidence equal to an edge b/M falls in bin ((b−1)/M, b/M] for every M
    (conf·M rounded up would put 0.56 with M = 25 into the next bin)."""
    for b in range(1, num_bins):
        edge = b / num_bins
        if edge <= 0.5:
            continue  # binary confidences lie in [0.5, 1]
        # One correct prediction at the edge, one wrong just above it: two bins,
        # each with gap |acc − conf|.
        above = min(edge + 0.5 / num_bins, 1.0)
        probs = np.array([edge, above])
        labels = np.array([1, 0])
        ece, mce = calibration_errors(probs, labels, num_bins=num_bins)
        want_gaps = [1.0 - edge, above]
        assert ece == pytest.approx(np.mean(want_gaps), abs=1e-12), (num_bins, b)
        assert mce == pytest.approx(max(want_gaps), abs=1e-12), (num_bins, b)


def test_labels_are_validated():
    from tfp_sgmcmc.diagnostics import predictive_metrics

    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    for bad in ([5, 0, 1], [-1, 0, 1], [2, 0, 1], [0.5, 0, 1]):
        with pytest.raises(ValueError, match="`labels`"):
            calibration_errors(probs, np.array(bad))
        with pytest.raises(ValueError, match="`labels`"):
            predictive_metrics(probs, np.array(bad))
    with pytest.raises(ValueError, match="`labels`"):
        calibration_errors(probs, np.array([[1, 1], [0, 1], [1, 0]]))  # not one-hot
    one_hot = np.eye(2)[[0, 1, 1]]
    assert predictive_metrics(probs, one_hot) == predictive_metrics(probs, np.array([0, 1, 1]))
    assert calibration_errors(probs[:, 1], np.array([True, False, True])) == calibration_errors(
        probs, np.array([1, 0, 1]))
