"""Stein-identity validity checks: exact draws pass on every scale and shape; a chain that
did not move, an over-dispersed one and one drifting through a tail are named.

The targets have closed-form scores, so the draws are exact (fixed seeds). The power
checks are the failing samples themselves: each must be caught with its own reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tfp_sgmcmc.diagnostics.validity import sample_validity, stein_moments

N = 400


@pytest.mark.parametrize("sigma", [1e-3, 1e-1, 1.0, 1e3])
def test_exact_gaussian_draws_pass_on_every_scale(sigma):
    rng = np.random.default_rng(7)
    mu = np.array([5.0, -3e3, 0.2])
    x = mu + sigma * rng.standard_normal((N, 3))
    s = -(x - mu) / sigma**2
    assert sample_validity(x, s) == ""
    m = stein_moments(x, s)
    # v_j ≈ 1 within a few Monte Carlo standard errors (√(2/N) for Gaussian draws).
    np.testing.assert_allclose(m.spread, 1.0, atol=5 * np.sqrt(2 / N))


def test_heavy_tailed_and_skewed_draws_pass():
    rng = np.random.default_rng(3)
    nu = 4.0
    t = stats.t(nu).rvs(size=(N, 2), random_state=rng)
    st = -(nu + 1) * t / (nu + t**2)
    assert sample_validity(t, st) == ""
    a = 2.0  # log of a Gamma(a) draw: score a - exp(u)
    u = np.log(stats.gamma(a).rvs(size=(N, 1), random_state=rng))
    assert sample_validity(u, a - np.exp(u)) == ""


def test_failures_are_named():
    rng = np.random.default_rng(11)
    sigma, mu = 1e-2, np.array([1.0, -2.0])
    z = rng.standard_normal((N, 2))

    def score(x):
        return -(x - mu) / sigma**2

    frozen = mu + 1e-5 * z  # spread a thousandth of the posterior's
    assert sample_validity(frozen, score(frozen)).startswith("did not move (coordinate")
    stuck = np.repeat(mu[None] + sigma, N, axis=0)
    assert sample_validity(stuck, score(stuck)) == "did not move (every draw is the same point)"
    over = mu + 30 * sigma * z
    assert sample_validity(over, score(over)).startswith("far from the posterior (coordinate")
    # A chain drifting away through a tail: its score points back at every draw.
    drift = mu + sigma * (100 + np.linspace(0, 10, N)[:, None] + z)
    reason = sample_validity(drift, score(drift))
    assert reason.startswith("far from the posterior (the full-data score")
    # Draws spread on the ridge between the two wells of π ∝ exp(−(x² − 4)²/8), where
    # the score −x(x² − 4)/2 rises with x: not a sample of π, whose Stein spread is 1.
    ridge = rng.uniform(-0.5, 0.5, (N, 1))
    reason = sample_validity(ridge, -ridge * (ridge**2 - 4) / 2)
    assert reason.startswith("not at the posterior (coordinate 0"), reason
    # Near-draws of the same double well pass: both modes (±2) visited, each with the
    # Gaussian of its curvature (sd 0.5).
    half = (N // 2, 1)
    wells = np.concatenate([rng.normal(2.0, 0.5, half), rng.normal(-2.0, 0.5, half)])
    assert sample_validity(wells, -wells * (wells**2 - 4) / 2) == "", stein_moments(
        wells, -wells * (wells**2 - 4) / 2
    )
    # A scale parameter running off: log-sigma grows, the score is -N + small.
    log_s = np.linspace(10, 300, N)[:, None]
    assert sample_validity(log_s, -1000 + np.exp(-log_s)).startswith("far from the posterior")


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="`scores` must have the samples' shape"):
        stein_moments(np.zeros((4, 2)), np.zeros((4, 3)))
    with pytest.raises(ValueError, match="at least 2 draws"):
        stein_moments(np.zeros((1, 2)), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="must be finite"):
        stein_moments(np.full((3, 1), np.nan), np.zeros((3, 1)))
