"""``BayesianModel.predict``: per-draw outputs, central intervals and draws streamed to
a run directory.

The models are single ``Dense`` layers, so each draw's outputs are computed here from
the public ``draws`` with NumPy: the per-draw predictive, the intervals (order
statistics of the draws; the Gaussian mixture's CDF at the interval's ends) and the
streamed draws are checked against those exact values.
"""

from __future__ import annotations

import os

import h5py
import keras
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import ndtr

import tfp_sgmcmc.keras._prediction as keras_model_module
from tfp_sgmcmc.keras import BayesianModel


def _linear(d: int, k: int) -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((d,)), keras.layers.Dense(k)])


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, size=(200, 2))
    y = x @ np.array([1.5, -0.5]) + 0.3 * rng.normal(size=200)
    bayes = BayesianModel(
        _linear(2, 1), "gaussian", num_draws=11, learning_rate=0.05, jit_compile=False
    )
    bayes.fit(x, y, batch_size=10, epochs=2, sample_epochs=1, verbose=0)
    return x, y, bayes


def test_gaussian_interval_is_the_mixture_quantile(regression):
    x, _, bayes = regression
    w, b = bayes.draws
    sigma = bayes.noise_scale_draws
    mu = np.einsum("nd,sdk->snk", x[:6], w) + b[:, None, :]  # [S, n, 1]
    mean, std, lower, upper, draws = bayes.predict(
        x[:6], return_std=True, interval=0.8, return_draws=True
    )
    np.testing.assert_allclose(draws, mu, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean, mu.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(std, np.sqrt(mu.var(0) + np.mean(sigma**2)), rtol=1e-5)
    assert np.ptp(sigma) > 0 and np.ptp(mu, axis=0).min() > 0  # a true mixture
    for i in range(6):
        m = draws[:, i, 0]

        def cdf(v, m=m):
            return ndtr((v - m) / sigma).mean()

        for end, q in ((lower[i, 0], 0.1), (upper[i, 0], 0.9)):
            ref = brentq(lambda v, q=q: cdf(v) - q, m.min() - 10, m.max() + 10, xtol=1e-12)
            assert abs(end - ref) < 1e-6, (i, end, ref)  # σ is stored in float32
    # Not the quantiles of the means alone: the observation noise widens the interval.
    assert np.all(upper - lower > np.ptp(draws, axis=0))


def test_class_probability_interval_is_the_draws_order_statistics():
    rng = np.random.default_rng(2)
    centres = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    y = rng.integers(0, 3, 150)
    x = centres[y] + rng.normal(size=(150, 2))
    bayes = BayesianModel(_linear(2, 3), num_draws=11, learning_rate=0.05, jit_compile=False)
    bayes.fit(x, y, batch_size=10, epochs=2, sample_epochs=1, verbose=0)
    w, b = bayes.draws
    p = _softmax(np.einsum("nd,sdk->snk", x[:20], w) + b[:, None, :])  # [11, 20, 3]
    mean, lower, upper, draws = bayes.predict(x[:20], interval=0.8, return_draws=True)
    np.testing.assert_allclose(draws, p, atol=1e-6)
    np.testing.assert_allclose(mean, p.mean(0), atol=1e-6)
    ranked = np.sort(draws, axis=0)  # 11 draws: the 0.1 and 0.9 quantiles are ranks 1 and 9
    np.testing.assert_array_equal(lower, ranked[1])
    np.testing.assert_array_equal(upper, ranked[9])
    assert np.all(lower <= mean) and np.all(mean <= upper)
    with pytest.raises(ValueError, match="interval"):
        bayes.predict(x[:2], interval=1.0)
    with pytest.raises(ValueError, match="return_std"):
        bayes.predict(x[:2], return_std=True)


def test_run_dir_streams_the_draws_and_predict_reads_them_back(regression, tmp_path, monkeypatch):
    x, y, in_memory = regression
    run_dir = tmp_path / "run"
    bayes = BayesianModel(
        _linear(2, 1), "gaussian", num_draws=11, learning_rate=0.05, jit_compile=False
    )
    bayes.fit(x, y, batch_size=10, epochs=2, sample_epochs=1, verbose=0, run_dir=run_dir)
    assert bayes.draws is None and bayes.num_kept == 11
    assert bayes.run_dir == os.fspath(run_dir)
    with h5py.File(run_dir / "samples.h5", "r") as f:
        stored = [f["samples"][str(i)][()] for i in range(3)]  # kernel, bias, log sigma
    # The same seed runs the same chain: the streamed draws are the in-memory ones.
    for got, want in zip(stored, in_memory.draws):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(np.exp(stored[2]), in_memory.noise_scale_draws, rtol=1e-6)
    # Read back two draws at a time: the same predictions and scores.
    monkeypatch.setattr(keras_model_module, "READ_BYTES", 2 * 4 * 4)
    chunks = [c.shape[0] for c in bayes._draw_chunks()]
    assert chunks == [2, 2, 2, 2, 2, 1]
    got = bayes.predict(x[:5], interval=0.9, return_draws=True)
    want = in_memory.predict(x[:5], interval=0.9, return_draws=True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    assert bayes.evaluate(x, y) == in_memory.evaluate(x, y)

    # A samples.h5 that fit did not write is refused; a file is not a directory.
    foreign = tmp_path / "driver_run"
    foreign.mkdir()
    with h5py.File(foreign / "samples.h5", "w") as f:
        f.attrs["writer"] = "someone else"
    with pytest.raises(ValueError, match="run_dir"):
        bayes.fit(x, y, epochs=0, sample_epochs=1, verbose=0, run_dir=foreign)
    with pytest.raises(ValueError, match="run_dir"):
        bayes.fit(x, y, epochs=0, sample_epochs=1, verbose=0, run_dir=3)
