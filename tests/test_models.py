"""Reference models: the §14.1 logistic-regression data and its ground truth."""

from __future__ import annotations

import numpy as np
import pytest

from tfp_sgmcmc.models.logistic_regression import (
    generate_logistic_regression_data,
    load_ground_truth,
    log_likelihood,
    log_prior,
    logistic_regression,
)


def test_data_generation_follows_the_paper():
    raw = generate_logistic_regression_data(num_examples=20_000, seed=42)
    x, y, th, sig, u = raw["x"], raw["y"], raw["theta_true"], raw["sigma_x"], raw["u"]
    assert x.shape == (20_000, 10) and y.shape == (20_000,) and th.shape == (10,)
    assert -0.4 <= u <= 0.4
    i = np.arange(10)
    np.testing.assert_allclose(sig, u ** np.abs(i[:, None] - i[None, :]))
    # X = Z chol(Σ_X): row covariance chol(Σ)ᵀ chol(Σ) (not Σ), within MC error.
    chol = np.linalg.cholesky(sig)
    cov = np.cov(x.T)
    want = chol.T @ chol
    assert np.max(np.abs(cov - want)) < 5 * np.sqrt(2.0 / 20_000) * 1.5
    # Labels follow the logistic model: mean of y - σ(θᵀx) is ~0.
    p = 1 / (1 + np.exp(-(x @ th)))
    assert abs(np.mean(y - p)) < 4 * np.sqrt(np.mean(p * (1 - p)) / 20_000)
    # θ_true ~ N(0, 10 I): seeded, reproducible.
    again = generate_logistic_regression_data(num_examples=20_000, seed=42)
    np.testing.assert_array_equal(again["x"], x)
    other = generate_logistic_regression_data(num_examples=20_000, seed=43)
    assert not np.allclose(other["theta_true"], th)


def test_split_and_model_functions():
    prob = logistic_regression(num_examples=1000)
    assert prob.num_train == 800 and prob.x_test.shape == (200, 10)
    assert prob.batch_size_from_fraction(0.01) == 8
    theta = np.stack([prob.theta_true, np.zeros(10)]).astype(np.float32)  # two chains
    ll = log_likelihood(theta, (prob.x_train, prob.y_train)).numpy()
    assert ll.shape == (2, 800)
    logits = prob.x_train.astype(np.float64) @ prob.theta_true
    ref = prob.y_train * logits - np.logaddexp(0, logits)
    np.testing.assert_allclose(ll[0], ref, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(ll[1], -np.log(2.0), rtol=1e-6)
    np.testing.assert_allclose(log_prior(theta).numpy()[0], -np.sum(prob.theta_true**2) / 20,
                               rtol=1e-5)
    acc = prob.predictive_accuracy(prob.theta_true[None])
    assert 0.8 < acc <= 1.0
    assert prob.predictive_accuracy(-prob.theta_true[None]) < 0.2
    assert prob.test_log_loss(prob.theta_true[None]) < prob.test_log_loss(np.zeros((1, 10)))
    with pytest.raises(ValueError, match="`train_fraction`"):
        logistic_regression(num_examples=100, train_fraction=1.0)


@pytest.mark.parametrize(
    "num_examples, train_fraction", [(3, 0.9), (10, 0.01), (2, 0.2)],
    ids=["empty_test", "empty_train", "two_rows_rounded_to_zero"],
)
def test_split_needs_a_training_and_a_test_row(num_examples, train_fraction):
    with pytest.raises(ValueError, match="`train_fraction`.*`num_examples`"):
        logistic_regression(num_examples=num_examples, num_features=2,
                            train_fraction=train_fraction)
    logistic_regression(num_examples=2, num_features=2, train_fraction=0.5)


@pytest.mark.parametrize("fraction", [-0.5, 0.0, 1.5, float("nan"), float("inf"), None, "0.1"])
def test_batch_size_from_fraction_refuses_fractions_outside_0_1(fraction):
    prob = logistic_regression(num_examples=100, num_features=2)
    with pytest.raises(ValueError, match="`fraction`"):
        prob.batch_size_from_fraction(fraction)
    assert prob.batch_size_from_fraction(1.0) == prob.num_train
    assert prob.batch_size_from_fraction(1e-6) == 1


def test_ground_truth_must_match_split_and_features(monkeypatch):
    """Only seed and N were compared: another split or d got the stored reference."""
    from tfp_sgmcmc.models import logistic_regression as lr_module

    prob = logistic_regression(num_examples=100, num_features=3)
    stored = {"seed": 42, "num_examples": 100, "num_train": 80, "mean": [0.0, 0.0, 0.0]}
    monkeypatch.setattr(lr_module, "load_ground_truth", lambda: dict(stored))
    assert prob.ground_truth() == stored
    assert logistic_regression(num_examples=100, num_features=3,
                               train_fraction=0.5).ground_truth() is None
    assert logistic_regression(num_examples=100, num_features=4).ground_truth() is None
    assert logistic_regression(num_examples=100, num_features=3, seed=1).ground_truth() is None


def test_stored_ground_truth_is_consistent():
    gt = load_ground_truth()
    if gt is None:
        pytest.fail("tfp_sgmcmc/models/ground_truth/logistic_regression.json is missing")
    for k in ("mean", "std", "mcse_mean", "mcse_std", "ess", "rhat", "command", "versions"):
        assert k in gt
    std, mcse = np.asarray(gt["std"]), np.asarray(gt["mcse_std"])
    assert std.shape == (10,) and np.all(std > 0) and np.all(mcse > 0)
    assert np.all(mcse < 0.03 * std)  # ~1% relative MCSE from ESS ~4000 of (θ-μ)²
    assert np.all(np.asarray(gt["rhat"]) < 1.02)
    # Near-Gaussian posterior at N = 8e5 (Laplace error O(1/sqrt(N))): the HMC
    # std agrees with the Laplace std within its Monte-Carlo error.
    lap = np.asarray(gt["laplace_std"])
    assert np.all(np.abs(std - lap) < 4 * mcse + 0.02 * lap)
    # The posterior mean is near θ_true relative to a few posterior stds.
    z = (np.asarray(gt["mean"]) - np.asarray(gt["theta_true"])) / std
    assert np.all(np.abs(z) < 5)
