"""Exact limits of S-SGLD and Sd-SGLD on a Gaussian posterior.

Derivation: docs/algorithms.md#stationary-structured.

Linear regression with 3 coefficients + bias, known σ² = 1, N(0, 1) priors:
posterior ``N(μ, Λ^{-1})``, ``Λ = AᵀA + I``, ``A = [X, 1]``. The covariates are
strongly correlated (x ~ N(m, C_x), corr 0.6–0.8, m = [0.5, 0, 1]) so the
mean-field answers differ clearly from the joint posterior.

Predictions are the exact stationary moments of the *discretised* chains
(``_structured_exact.exact_moments``: SGLD step ε, history draws with one
independent time index per group), whose ε → 0 limits are the block mean-field
``diag((Λ_BB)^{-1})`` (S-SGLD) and ``(diag Λ + ρ·offdiag Λ)^{-1}`` (Sd-SGLD,
scalar groups, Bernoulli(ρ)); the limits are checked separately. Each chain has
its own history; tolerances are z·SE over 64 independent chains with
z = Φ⁻¹(1 − 0.0005) (two-sided 0.999); power checks require a 10%-off target
(and the neighbouring method's prediction) to fail the same test.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from _stats import Z

import tfp_sgmcmc as sg
from tfp_sgmcmc.estimators.partitions import partition_from_group_ids, partition_fully_factorized
from tfp_sgmcmc.estimators.structured import (
    StructuredDropoutEstimator,
    StructuredEstimator,
)

from ._structured_exact import exact_moments, plain_spec, s_spec, sd_bernoulli_spec

EPS = 0.004
CHAINS = 64
BURN = 15_000
KEEP = 15_000
THIN_TRACE = 3


def _problem():
    rng = np.random.default_rng(1)
    n = 30
    cx = np.array([[1, 0.8, 0.6], [0.8, 1, 0.7], [0.6, 0.7, 1]])
    x = rng.multivariate_normal([0.5, 0.0, 1.0], cx, size=n)
    a = np.c_[x, np.ones(n)]
    y = a @ np.array([1.5, -0.8, 1.3, 0.5]) + rng.standard_normal(n)
    return a, y


A, Y = _problem()
LIK = A.T @ A
PRIOR = np.eye(4)
LAM = LIK + PRIOR
B = A.T @ Y
MU = np.linalg.solve(LAM, B)
GROUPS2 = np.array([0, 0, 1, 1])  # {w1, w2}, {w3, b}
SCALAR = np.arange(4)


def _base():
    def loglik(theta, batch):
        a, y = batch
        return -0.5 * (y - tf.einsum("nd,...d->...n", a, theta)) ** 2

    def logprior(theta):
        return -0.5 * tf.reduce_sum(theta**2, axis=-1)

    # Full batch: the only gradient noise is the structured one, as in the prediction.
    return sg.MinibatchEstimator(loglik, (A, Y), batch_size=len(Y), log_prior_fn=logprior)


def _run(estimator, seed):
    kernel = sg.SGLD(estimator, EPS)
    init = tf.constant(np.tile(MU, (CHAINS, 1)))

    @tf.function(jit_compile=True)
    def run(s):
        return tfp.mcmc.sample_chain(
            KEEP // THIN_TRACE,
            init,
            kernel=kernel,
            num_burnin_steps=BURN,
            num_steps_between_results=THIN_TRACE - 1,
            trace_fn=None,
            seed=s,
        )

    return run(tf.constant([seed, 7], tf.int32)).numpy()  # [draws, chains, 4]


def _chain_stats(samples):
    """Per-chain means and covariances -> (mean over chains, standard error)."""
    m = samples.mean(0)  # [chains, 4]
    c = samples - m
    cov = np.einsum("tci,tcj->cij", c, c) / samples.shape[0]
    return (m.mean(0), m.std(0, ddof=1) / np.sqrt(CHAINS)), (
        cov.mean(0),
        cov.std(0, ddof=1) / np.sqrt(CHAINS),
    )


def _agrees(est, se, pred):
    return np.abs(est - pred) <= Z * se


def _block_mean_field(groups):
    out = np.zeros((4, 4))
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        out[np.ix_(idx, idx)] = np.linalg.inv(LAM[np.ix_(idx, idx)])
    return out


def test_exact_solver_limits_match_theory():
    """At small ε the discretised predictions approach the analytic fixed points."""
    eps = 2.5e-4
    _, c_plain = exact_moments(LIK, B, PRIOR, eps, GROUPS2, plain_spec(2), tol=1e-12)
    np.testing.assert_allclose(c_plain, np.linalg.inv(LAM), rtol=0.03, atol=2e-3)
    m, c_s = exact_moments(LIK, B, PRIOR, eps, GROUPS2, s_spec(2), tol=1e-12)
    np.testing.assert_allclose(m, MU, atol=1e-8)
    np.testing.assert_allclose(np.diag(c_s), np.diag(_block_mean_field(GROUPS2)), rtol=0.03)
    assert np.allclose(c_s[:2, 2:], 0.0)
    rho = 0.5
    m, c_sd = exact_moments(LIK, B, PRIOR, eps, SCALAR, sd_bernoulli_spec(4, rho, 4), tol=1e-12)
    prec = np.diag(np.diag(LAM)) + rho * (LAM - np.diag(np.diag(LAM)))
    np.testing.assert_allclose(m, MU, atol=1e-8)
    np.testing.assert_allclose(c_sd, np.linalg.inv(prec), rtol=0.05, atol=2e-3)
    # And the limits are far apart (the statistical tests can tell them apart).
    assert np.all(np.diag(_block_mean_field(GROUPS2)) < 0.9 * np.diag(np.linalg.inv(LAM)))


@pytest.mark.statistical
def test_s_sgld_two_groups_is_block_mean_field(seed):
    est = StructuredEstimator(
        _base(), partition_from_group_ids([GROUPS2]), history_capacity=1500, thinning=10
    )
    samples = _run(est, seed)
    (m, m_se), (cov, cov_se) = _chain_stats(samples)
    pm, pc = exact_moments(LIK, B, PRIOR, EPS, GROUPS2, s_spec(2))
    assert np.all(_agrees(m, m_se, pm)), (m, pm, m_se)
    assert np.all(_agrees(np.diag(cov), np.diag(cov_se), np.diag(pc))), (np.diag(cov), np.diag(pc))
    # Cross-group covariances vanish; within-group ones survive (and match).
    cross = cov[:2, 2:]
    assert np.all(_agrees(cross, cov_se[:2, 2:], 0.0)), cross
    for i, j in [(0, 1), (2, 3)]:
        assert _agrees(cov[i, j], cov_se[i, j], pc[i, j]), (i, j, cov[i, j], pc[i, j])
        assert abs(cov[i, j]) > 5 * Z * cov_se[i, j]  # clearly non-zero
    # Power: a 10% wrong variance, and the joint (plain SGLD) law, both fail.
    var, var_se = np.diag(cov), np.diag(cov_se)
    assert not np.all(_agrees(var, var_se, 1.1 * np.diag(pc)))
    _, c_plain = exact_moments(LIK, B, PRIOR, EPS, GROUPS2, plain_spec(2))
    assert not np.all(_agrees(var, var_se, np.diag(c_plain)))
    assert not np.all(_agrees(cross, cov_se[:2, 2:], c_plain[:2, 2:]))


@pytest.mark.statistical
def test_s_sgld_fully_factorised(seed):
    est = StructuredEstimator(
        _base(), partition_fully_factorized([np.zeros(4)]), history_capacity=1500, thinning=10
    )
    samples = _run(est, seed)
    (m, m_se), (cov, cov_se) = _chain_stats(samples)
    pm, pc = exact_moments(LIK, B, PRIOR, EPS, SCALAR, s_spec(4))
    assert np.all(_agrees(m, m_se, pm)), (m, pm)
    assert np.all(_agrees(cov, cov_se, pc)), (cov, pc)  # off-diagonals: all zero
    assert np.allclose(pc - np.diag(np.diag(pc)), 0.0)
    var, var_se = np.diag(cov), np.diag(cov_se)
    assert not np.all(_agrees(var, var_se, 1.1 * np.diag(pc)))
    assert not np.all(_agrees(var, var_se, 0.9 * np.diag(pc)))


@pytest.mark.statistical
def test_sd_sgld_bernoulli_precision_interpolates(seed):
    rho, k = 0.5, 4
    est = StructuredDropoutEstimator(
        _base(),
        partition_fully_factorized([np.zeros(4)]),
        num_masks=k,
        keep_prob=rho,
        history_capacity=1500,
        thinning=10,
    )
    samples = _run(est, seed)
    (m, m_se), (cov, cov_se) = _chain_stats(samples)
    pm, pc = exact_moments(LIK, B, PRIOR, EPS, SCALAR, sd_bernoulli_spec(4, rho, k))
    assert np.all(_agrees(m, m_se, pm)), (m, pm)
    assert np.all(_agrees(cov, cov_se, pc)), (cov, pc)
    var, var_se = np.diag(cov), np.diag(cov_se)
    assert not np.all(_agrees(var, var_se, 1.1 * np.diag(pc)))
    # Neither end of the continuum fits: not S-SGLD (ρ → 0) and not SGLD (ρ = 1).
    _, c_s = exact_moments(LIK, B, PRIOR, EPS, SCALAR, s_spec(4))
    _, c_plain = exact_moments(LIK, B, PRIOR, EPS, SCALAR, plain_spec(4))
    assert not np.all(_agrees(cov, cov_se, c_s))
    assert not np.all(_agrees(cov, cov_se, c_plain))
