"""``BayesianModel.fit(..., tune=...)``: MAMBA chooses the sampler, step and batch size.

The posterior of a linear-Gaussian model is known exactly (conjugate), so the tuned
draws are checked against it; the grid holds a step that freezes the chain and one
that diverges, which the tuner must not pick (power). The pieces it is built from are
checked on their own: the weighted rows of a ``KerasPosterior`` and the anchored subset
score the KSD reads.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.estimators import AnchoredSubsetEstimator
from tfp_sgmcmc.keras import BayesianModel, KerasPosterior, Tuning

N, D, NOISE, PRIOR = 400, 3, 0.5, 1.0


def _regression(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, D)).astype("float32")
    w = np.array([1.0, -2.0, 0.5])
    y = (x @ w + 0.3 + NOISE * rng.normal(size=N)).astype("float32")
    return x, y


def _linear(seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((D,)), keras.layers.Dense(1)])


def _exact_posterior(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of ``[w, b]`` under ``N(0, PRIOR²)`` priors and noise ``NOISE``."""
    a = np.hstack([x, np.ones((len(x), 1))]).astype(np.float64)
    precision = a.T @ a / NOISE**2 + np.eye(D + 1) / PRIOR**2
    cov = np.linalg.inv(precision)
    mean = cov @ a.T @ y.astype(np.float64) / NOISE**2
    return mean, np.sqrt(np.diag(cov))


def _linear_bayes(num_draws: int) -> BayesianModel:
    """The linear-Gaussian model with the posterior ``_exact_posterior`` gives."""
    return BayesianModel(
        _linear(), likelihood="gaussian", noise_scale=NOISE, prior_scale=PRIOR,
        num_draws=num_draws, seed=3, learning_rate=0.05,
    )


def _mlp(seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(3)]
    )


def _blobs(n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = (rng.normal(size=(3, 4))[y] * 2 + rng.normal(size=(n, 4))).astype("float32")
    return x, y.astype("int32")


def test_weighted_rows_count_an_example_as_often_as_its_weight():
    x, y = _blobs(60)
    model = _mlp()
    w = np.ones(60)
    w[:5] = 3.0
    w[5:8] = 0.0
    weighted = KerasPosterior(model, (x, y), sample_weight=w)
    rows = np.concatenate([np.repeat(np.arange(5), 3), np.arange(8, 60)])
    repeated = KerasPosterior(model, (x[rows], y[rows]))
    plain = KerasPosterior(model, (x, y))
    state = weighted.init_state()
    lp_w = float(weighted.estimator(60).full_log_prob_and_gradient(state).target_log_prob)
    lp_r = float(repeated.estimator(67).full_log_prob_and_gradient(state).target_log_prob)
    lp_p = float(plain.estimator(60).full_log_prob_and_gradient(state).target_log_prob)
    np.testing.assert_allclose(lp_w, lp_r, rtol=1e-5)
    assert abs(lp_w - lp_p) > 1.0  # power: the weights change the density
    with pytest.raises(ValueError, match="sample_weight"):
        KerasPosterior(model, (x, y), sample_weight=np.ones(59))
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(10)
    with pytest.raises(ValueError, match="sample_weight"):
        KerasPosterior(model, ds, num_examples=60, sample_weight=np.ones(60))


def test_anchored_subset_score_is_exact_at_the_centre_and_close_near_it():
    x, y = _blobs(600)
    model = _mlp()
    full_post = KerasPosterior(model, (x, y))
    full = full_post.estimator(600)
    idx = np.random.default_rng(1).choice(600, 60, replace=False)
    subset_post = KerasPosterior(model, (x[idx], y[idx]), sample_weight=np.full(60, 10.0))
    subset = subset_post.estimator(60)
    centre = full_post.init_state()
    anchored = AnchoredSubsetEstimator(subset, full, centre)

    def flat(g):
        return np.concatenate([np.ravel(p) for p in g.grads_target_log_prob])

    exact = flat(full.full_log_prob_and_gradient(centre))
    np.testing.assert_allclose(flat(anchored.full_log_prob_and_gradient(centre)), exact,
                               rtol=1e-4, atol=1e-3)
    rng = np.random.default_rng(2)
    near = [c + 0.02 * rng.normal(size=c.shape).astype("float32") for c in centre]
    exact = flat(full.full_log_prob_and_gradient(near))
    err_anchored = np.linalg.norm(flat(anchored.full_log_prob_and_gradient(near)) - exact)
    err_subset = np.linalg.norm(flat(subset.full_log_prob_and_gradient(near)) - exact)
    # The anchor removes the subset's error at the centre, which dominates nearby.
    assert err_anchored < 0.2 * err_subset, (err_anchored, err_subset)


def test_tuned_fit_samples_the_exact_posterior_and_skips_frozen_and_diverged_arms():
    x, y = _regression()
    mean, sd = _exact_posterior(x, y)
    bayes = _linear_bayes(num_draws=200)
    # 1e-4·ε₀ freezes the chain; 1e3·ε₀ diverges: neither may win.
    tune = Tuning(samplers=("sgld", "sghmc", "sgnht-cv"), step_factors=(1e3, 1.0, 1e-4),
                  epochs=30.0, score_rows=200)
    with pytest.warns(RuntimeWarning, match="gradient-noise ratio"):
        bayes.fit(x, y, batch_size=40, epochs=30, sample_epochs=300, verbose=0, tune=tune)
    result = bayes.tuning_result
    assert result is not None and len(result.arms) == 9
    arm = result.best_arm
    assert arm["step_size"] == pytest.approx(bayes.step_size)
    factor = arm["step_size"] / min(a["step_size"] for a in result.arms) / 1e4
    assert factor == pytest.approx(1.0, rel=1e-6), arm  # the middle step, ε₀
    assert result.grid_edges() == {}  # inside the grid: no note says otherwise
    assert not any("grid's end" in note for note in bayes.notes)
    assert arm["sampler"].upper() in bayes.sampler_name
    assert "tuning" in bayes.timings
    draws = np.concatenate([d.reshape(len(d), -1) for d in bayes.draws], axis=1)
    assert draws.shape == (200, D + 1)
    # Tolerance: 4 Monte Carlo standard errors of the mean from the draws' own
    # effective sample size (TFP's estimator), floored at 5 draws.
    ess = np.maximum(5.0, tfp.mcmc.effective_sample_size(tf.constant(draws)).numpy())
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 4 * sd / np.sqrt(ess))
    np.testing.assert_allclose(draws.std(0), sd, rtol=0.5)
    lines = "\n".join(bayes._settings())
    assert "MAMBA" in lines


def test_tune_refuses_what_it_cannot_take():
    x, y = _regression()
    bayes = BayesianModel(_linear(), likelihood="gaussian", noise_scale=NOISE)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(40)
    with pytest.raises(ValueError, match="`tune` needs array inputs"):
        bayes.fit(ds, epochs=1, verbose=0, tune=True)
    with pytest.raises(ValueError, match="`tune` must be"):
        bayes.fit(x, y, epochs=1, verbose=0, tune="mamba")
    with pytest.raises(ValueError, match="unknown"):
        Tuning(samplers=("sgld", "nuts"))
    with pytest.raises(ValueError, match="not both"):
        Tuning(epochs=2.0, seconds=10.0)
    with pytest.raises(ValueError, match="step_factors"):
        Tuning(step_factors=(1.0, -1.0))
    with pytest.raises(ValueError, match="seconds"):
        Tuning(seconds=0)
    assert Tuning().epochs == 4.0 and Tuning(seconds=5).epochs is None
    assert Tuning(samplers="sgld-cv").samplers == ("sgld-cv",)


def test_the_unit_metric_on_whitened_samples_is_the_papers_ksd_in_the_weights():
    """``Tuning(metric="unit")`` scores whitened samples ``w = (θ − c)/s`` with the scales
    ``1/s``: that is the unit-metric KSD of the ``θ`` samples with ``θ``'s scores."""
    from tfp_sgmcmc.estimators import NoisyGradientEstimator
    from tfp_sgmcmc.tuning import KSDMetric

    rng = np.random.default_rng(0)
    mu, sigma = np.array([1.0, -2.0, 0.5]), np.array([0.1, 1.0, 3.0])
    c, s = np.array([0.9, -1.5, 0.0]), np.array([0.2, 0.5, 2.0])
    theta = mu + sigma * rng.normal(size=(12, 3))

    def log_theta(t):
        return -0.5 * tf.reduce_sum(((t - mu) / sigma) ** 2, -1)

    def log_w(w):
        return log_theta(c + s * w)

    raw = KSDMetric(preconditioner=None, check_validity=False, jit_compile=False)
    unit = KSDMetric(preconditioner=1.0 / s, check_validity=False, jit_compile=False)
    curvature = KSDMetric(preconditioner=None, check_validity=False, jit_compile=False)
    k_theta = raw([theta], {}, NoisyGradientEstimator(log_theta))
    w = (theta - c) / s
    k_unit = unit([w], {}, NoisyGradientEstimator(log_w))
    np.testing.assert_allclose(k_unit, k_theta, rtol=1e-6)
    # Power: the whitened samples' own unit metric is another number.
    k_white = curvature([w], {}, NoisyGradientEstimator(log_w))
    assert abs(k_white - k_theta) > 0.05 * k_theta


def test_a_tuning_without_a_usable_arm_falls_back_to_the_rules_sampler():
    x, y = _regression()
    mean, sd = _exact_posterior(x, y)
    bayes = _linear_bayes(num_draws=100)
    # Steps of 100 and 300 times the stable step diverge at once.
    tune = Tuning(samplers=("sgld",), step_factors=(100.0, 300.0), eta=2, epochs=10.0)
    with pytest.warns(RuntimeWarning, match="no arm with a finite KSD"):
        bayes.fit(x, y, batch_size=40, epochs=30, sample_epochs=100, verbose=0, tune=tune)
    assert bayes.tuning_result is not None
    assert bayes.sampler_name.startswith("preconditioned SGLD")
    assert any("no arm with a finite KSD" in n for n in bayes.notes)
    draws = np.concatenate([d.reshape(len(d), -1) for d in bayes.draws], axis=1)
    assert np.isfinite(draws).all() and draws.shape[0] == 100
    np.testing.assert_allclose(draws.std(0), sd, rtol=0.6)
