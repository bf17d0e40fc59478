"""MAMBA's default metric with far more coordinates than draws: the curvature metric.

The target is ``N(μ, diag(σ²))`` with ``d = 20,000`` and scales ``σ_j`` log-uniform on
``[10⁻³, 10³]``; scores are exact; each candidate has ``n = 20`` draws, so no sample
covariance exists. In the curvature metric (``σ̂_j² = Var(x_j)/v_j``, which for this
target is ``σ_j²`` whatever the sample's spread) the KSD is, up to ``O(d^{-1/2})``
relative terms: exact draws ``√(2d/n) ≈ 44.7``; a chain frozen at the mean
``√d ≈ 141``; draws spread 3× too wide ``√(10d/n) = 100``; a diverged chain (every draw
shifted by 100σ) far larger. The off-diagonal Stein-kernel terms are ``O(1)`` against
diagonal ones of order ``d``, so across seeds the values vary in the third digit
(measured over the three seeds here: exact 44.68–44.73, frozen 141.27, over-dispersed
99.83–100.04, diverged 3,309–3,310); the margins asserted (×2 and more) are far outside
that spread.

Power checks: the unit-metric KSD of the MAMBA paper ranks the frozen chain first, and so
does the previous high-dimensional default, the per-coordinate sample standard
deviations (``√(d/n) ≈ 32`` against ``≈ 45``); and scored against a wrong target (the
mean shifted by 2σ) the new metric prefers that target's draws to the true
posterior's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc.diagnostics import kernel_stein_discrepancy
from tfp_sgmcmc.diagnostics.validity import familywise_thresholds, sample_validity
from tfp_sgmcmc.tuning.metrics import DisqualifiedSample, KSDMetric, resolve_metric

D, N = 20_000, 20
_RNG = np.random.default_rng(46)
SIGMA = 10.0 ** _RNG.uniform(-3.0, 3.0, D)
MU = _RNG.standard_normal(D)


def _score(x: np.ndarray, mu: np.ndarray = MU) -> np.ndarray:
    return -(x - mu) / SIGMA**2


def _ksd(x: np.ndarray, preconditioner, mu: np.ndarray = MU) -> float:
    return float(kernel_stein_discrepancy(x, _score(x, mu), preconditioner=preconditioner))


def _metric(metric: KSDMetric, x: np.ndarray) -> float:
    """``metric`` on ``x`` with the exact full-data scores (its scorer replaced)."""
    metric.scores = lambda samples, estimator: [_score(samples[0])]
    return metric([x], {}, None)


def _candidates(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((N, D))
    return {
        "exact": MU + SIGMA * z,
        "frozen": MU + 1e-6 * rng.standard_normal((N, D)),
        "over": MU + 3.0 * SIGMA * z,
        "diverged": MU + SIGMA * (z + 100.0),
    }


@pytest.fixture(scope="module")
def seeds() -> list[dict[str, np.ndarray]]:
    return [_candidates(seed) for seed in (1, 2, 3)]


def test_curvature_metric_ranks_exact_draws_first(seeds):
    for cands in seeds:
        v = {k: _ksd(x, "curvature") for k, x in cands.items()}
        assert v["exact"] == pytest.approx(math.sqrt(2 * D / N), rel=0.02)
        assert v["frozen"] > 3.0 * v["exact"]
        assert v["over"] > 2.0 * v["exact"]
        assert v["diverged"] > 50.0 * v["exact"]


def test_mamba_default_uses_it_above_100_coordinates(seeds):
    metric = resolve_metric("ksd")
    assert isinstance(metric, KSDMetric) and metric.preconditioner == "auto"
    x = seeds[0]["exact"]
    assert _metric(metric, x) == pytest.approx(_ksd(x, "curvature"), rel=1e-9)
    # Up to 100 coordinates "auto" is the sample covariance, as before.
    small = x[:, :50]
    got = float(kernel_stein_discrepancy(small, _score(x)[:, :50], preconditioner="auto"))
    want = float(kernel_stein_discrepancy(small, _score(x)[:, :50], preconditioner="sample"))
    assert got == want
    # The validity check still disqualifies the frozen and the diverged chains.
    for bad, why in (("frozen", "did not move"), ("diverged", "far from the posterior")):
        with pytest.raises(DisqualifiedSample, match=why):
            _metric(KSDMetric(), seeds[0][bad])


def test_power_unit_and_sample_metrics_are_fooled(seeds):
    cands = seeds[0]
    unit = {k: _ksd(x, None) for k, x in cands.items()}
    assert unit["frozen"] < 0.1 * unit["exact"]
    own = {k: _ksd(x, "sample") for k, x in cands.items()}
    assert own["frozen"] < 0.8 * own["exact"]


def test_power_wrong_target_reverses_the_order(seeds):
    """Against N(μ + 2σ, diag(σ²)) the shifted draws are exact and the true posterior's
    draws are not: the order of the two flips with the target."""
    exact = seeds[0]["exact"]
    shifted = exact + 2.0 * SIGMA
    assert _ksd(exact, "curvature") < 0.7 * _ksd(shifted, "curvature")
    wrong = MU + 2.0 * SIGMA
    assert _ksd(shifted, "curvature", wrong) < 0.7 * _ksd(exact, "curvature", wrong)


def test_validity_limits_hold_for_all_coordinates_at_once():
    """With 5 draws in 10⁵ coordinates the per-coordinate limits flag exact draws ("far
    from the posterior": some coordinate's score looks one-sided); the family-wise limits
    pass them, and still flag a chain frozen at 10⁻⁶ of the scale."""
    d, n = 100_000, 5
    rng = np.random.default_rng(7)
    sigma = 10.0 ** rng.uniform(-3.0, 3.0, d)
    limits = familywise_thresholds(n, d)
    assert limits["frozen"] < 0.01 and limits["one_sided"] > 0.95 and limits["wide"] >= 100
    for _ in range(3):
        x = sigma * rng.standard_normal((n, d))
        s = -x / sigma**2
        assert sample_validity(x, s).startswith("far from the posterior")
        assert sample_validity(x, s, **limits) == ""
        assert sample_validity(1e-6 * x, s * 1e-6, **limits).startswith("did not move")
    with pytest.raises(ValueError, match="`n`"):
        familywise_thresholds(1, d)


def test_curvature_metric_refuses_a_sample_no_gaussian_fits():
    x = np.random.default_rng(0).standard_normal((N, 200))
    with pytest.warns(RuntimeWarning, match="curvature"):
        # Scores rising with x: v_j < 0 everywhere.
        assert float(kernel_stein_discrepancy(x, x, preconditioner="curvature")) == math.inf
    from tfp_sgmcmc.diagnostics.metric import whitening_map

    with pytest.raises(ValueError, match="needs the scores"):
        whitening_map(tf.constant(x), "curvature")
