"""MAMBA's default metric: the KSD in the samples' own metric ranks a sharp posterior's
exact draws ahead of a frozen chain and of an over-dispersed one; the unit-kernel KSD
of the MAMBA paper (kept as ``"ksd_unit"``) puts the frozen chain first.

The target is ``N(μ, σ²I)`` in ``d = 2`` with ``σ = 1e-2`` and exact full-data scores
(a `NoisyGradientEstimator`, whose full pass is noise free); draws use a fixed seed.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.tuning.executors import evaluate_metric_with_se
from tfp_sgmcmc.tuning.metrics import DisqualifiedSample, KSDMetric, resolve_metric
from tfp_sgmcmc.tuning.runner import RunOutput

D, SIGMA, N = 2, 1e-2, 200
MU = np.array([1.0, -2.0])


def _log_prob(theta: tf.Tensor) -> tf.Tensor:
    mu = tf.constant(MU, theta.dtype)
    return -0.5 * tf.reduce_sum(tf.square((theta - mu) / SIGMA), axis=-1)


ESTIMATOR = sg.NoisyGradientEstimator(_log_prob, noise_scale=0.0)


@pytest.fixture(scope="module")
def candidates() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2024)
    z = rng.standard_normal((N, D))
    return {
        "exact": MU + SIGMA * z,
        "frozen": MU + 1e-6 * rng.standard_normal((N, D)),
        "over": MU + 3.0 * SIGMA * z,
    }


def _values(metric: KSDMetric, candidates: dict[str, np.ndarray]) -> dict[str, float]:
    return {k: metric([v], {}, ESTIMATOR) for k, v in candidates.items()}


def test_default_metric_ranks_exact_draws_first(candidates):
    metric = resolve_metric("ksd")
    assert isinstance(metric, KSDMetric) and metric.preconditioner == "auto"
    assert metric.check_validity
    # The frozen chain is disqualified before it is scored, with its reason.
    with pytest.raises(DisqualifiedSample, match="did not move"):
        metric([candidates["frozen"]], {}, ESTIMATOR)
    # The discrepancy itself, without the validity check, ranks the same way.
    v = _values(KSDMetric(check_validity=False), candidates)
    assert all(math.isfinite(x) for x in v.values())
    assert v["exact"] < v["frozen"] and v["exact"] < v["over"]
    # Dimensionless: a clear margin, not a rounding-level one.
    assert v["frozen"] > 2 * v["exact"] and v["over"] > 2 * v["exact"]


def test_unit_metric_ranks_the_frozen_chain_first(candidates):
    """Power check: the paper's unit-kernel KSD is fooled (KSD² ≈ d for a point mass
    against ≈ d/(σ²n) for exact draws)."""
    metric = resolve_metric("ksd_unit")
    assert isinstance(metric, KSDMetric) and metric.preconditioner is None
    v = _values(metric, candidates)
    assert v["frozen"] < v["exact"] < v["over"]
    assert v["frozen"] == pytest.approx(math.sqrt(D), rel=0.05)


def test_value_and_se_use_the_same_whitening(candidates):
    """The pooled value of `value_and_se` (the Gram-matrix path MAMBA uses) equals the
    metric's call, and the sample metric's ranking carries over with standard errors."""
    metric = KSDMetric(check_validity=False)
    out = {}
    for key, x in candidates.items():
        run = RunOutput([x], np.zeros(N), N, 1.0, 0.0, False)
        value, se, _, note = evaluate_metric_with_se(metric, run, ESTIMATOR)
        assert note == "" and math.isfinite(se) and se > 0
        assert value == pytest.approx(metric([x], {}, ESTIMATOR), rel=1e-9)
        out[key] = (value, se)
    assert out["exact"][0] + 2 * out["exact"][1] < out["frozen"][0] - 2 * out["frozen"][1]
    assert out["exact"][0] + 2 * out["exact"][1] < out["over"][0] - 2 * out["over"][1]


def test_a_chain_that_did_not_move_is_pruned(candidates):
    stuck = np.repeat(MU[None, :] + 1e-3, N, axis=0)
    run = RunOutput([stuck], np.zeros(N), N, 1.0, 0.0, False)
    value, se, _, note = evaluate_metric_with_se(KSDMetric(), run, ESTIMATOR)
    assert value == math.inf and note == "did not move (every draw is the same point)"
    with pytest.raises(DisqualifiedSample, match="did not move"):
        KSDMetric()([stuck], {}, ESTIMATOR)
    # Without the validity check the sample metric still refuses it (zero variance).
    unchecked = KSDMetric(check_validity=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value, se, _, _ = evaluate_metric_with_se(unchecked, run, ESTIMATOR)
        direct = unchecked([stuck], {}, ESTIMATOR)
    assert value == math.inf and direct == math.inf
    assert any("zero variance" in str(w.message) for w in caught)
    # The unit metric scores it finitely (and well: ≈ √d + the score at μ + 1e-3).
    assert math.isfinite(resolve_metric("ksd_unit")([stuck], {}, ESTIMATOR))


def test_fixed_preconditioner_and_repr(candidates):
    fixed = KSDMetric(preconditioner=np.full(D, SIGMA), check_validity=False)
    v = _values(fixed, candidates)
    assert v["exact"] < v["frozen"] and v["exact"] < v["over"]
    assert "preconditioner='auto'" in repr(KSDMetric())
    assert "preconditioner=None" in repr(KSDMetric(preconditioner=None))
    assert "check_validity=False" in repr(resolve_metric("ksd_unit"))
    assert "preconditioner=array[2]" in repr(fixed)
    with pytest.raises(ValueError, match="preconditioner"):
        KSDMetric(preconditioner="unit")
    with pytest.raises(ValueError, match="ksd_unit"):
        resolve_metric("ksd-unit")


def test_mamba_names_why_each_disqualified_arm_lost():
    """End to end: on N(μ, σ²I) with σ = 1e-2 a step of 1e-12 never moves and a step of 5e-4
    (ε λ = 5) runs off; both are disqualified with their reason, shown in the round table,
    and a step that samples the posterior wins."""
    from tfp_sgmcmc import tuning as tu

    result = tu.MAMBA(
        tu.grid(step_size=[1e-12, 1e-5, 5e-4]),
        tf.constant(MU),
        lambda step_size: sg.SGLD(ESTIMATOR, step_size),
        budget=tu.steps(600),
        eta=3,
        seed=0,
        progress=False,
    ).run()
    assert result.best_arm == {"step_size": 1e-5}
    notes = {r.arm["step_size"]: r.note for r in result.records if r.round == 0}
    assert notes[1e-12].startswith("did not move")
    assert notes[5e-4] == "diverged" or notes[5e-4].startswith("far from the posterior")
    table = result.to_markdown()
    assert "inf (did not move)" in table
