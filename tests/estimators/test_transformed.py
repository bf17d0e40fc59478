"""Constrained parameters through bijectors: chain rule, Jacobian, stationary law.

Model: ``y_i ~ N(0, v)``, ``i = 1..N``, prior ``v ~ InvGamma(α, β)``; the
posterior is ``InvGamma(a, b)`` with ``a = α + N/2``, ``b = β + Σy²/2``. The
sampler runs on ``z`` with ``v = f(z)`` (``Exp`` or ``Softplus``), whose
density is ``log π(f(z)) + log f'(z)``.

The statistical test compares SGLD (full-data gradients, so the only error is
the discretisation) with the *exact stationary law of the discretised chain*
``z' = z + ε s(z) + √(2ε) ξ``: in one dimension its density is the left
eigenvector of the transition kernel on a fine grid (to grid accuracy), so
the tolerance is the Monte Carlo error alone. The step is large enough
(``ε·a = 0.2``) that this law differs visibly from the continuous target, and
the same check fails when the log-det-Jacobian is left out (power).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from scipy import special
from scipy.optimize import brentq

import tfp_sgmcmc as sg
from tfp_sgmcmc.estimators import (
    ControlVariateEstimator,
    MinibatchEstimator,
    TransformedEstimator,
)
from tfp_sgmcmc.kernels import TransformedTransitionKernel

tfb = tfp.bijectors
tfd = tfp.distributions

ALPHA, BETA = 3.0, 2.0
N = 20
NUM_CHAINS = 4000
NUM_STEPS = 80


def _data() -> np.ndarray:
    return np.random.default_rng(3).normal(0.0, 1.5, size=N)


def _posterior_params(y: np.ndarray) -> tuple[float, float]:
    return ALPHA + N / 2, BETA + 0.5 * float(np.sum(y**2))


def _estimator(y: np.ndarray, batch_size: int = N) -> MinibatchEstimator:
    """The model in the constrained space ``v > 0`` (one part, chains on axis 0)."""

    def loglik(v, batch):
        return tfd.Normal(tf.zeros([], v.dtype), tf.sqrt(v)[..., None]).log_prob(batch)

    def logprior(v):
        return tfd.InverseGamma(tf.constant(ALPHA, v.dtype), tf.constant(BETA, v.dtype)).log_prob(v)

    return MinibatchEstimator(loglik, y, batch_size, log_prior_fn=logprior)


def _z_score(z: np.ndarray, a: float, b: float, kind: str, jacobian: bool = True) -> np.ndarray:
    """Analytic ``d/dz [log InvGamma(f(z); a, b) + log f'(z)]``."""
    if kind == "exp":
        # log π_z = -(a+1) z - b e^{-z} + z
        return -(a + 1.0) + b * np.exp(-z) + (1.0 if jacobian else 0.0)
    v = np.logaddexp(0.0, z)  # softplus
    dv = special.expit(z)
    d_log_pv = -(a + 1.0) / v + b / v**2
    # log f'(z) = log σ(z); its derivative is 1 - σ(z)
    return d_log_pv * dv + ((1.0 - dv) if jacobian else 0.0)


def _discretised_law(score, eps: float, grid: np.ndarray) -> np.ndarray:
    """Stationary density (on ``grid``) of ``z' = z + ε s(z) + √(2ε) ξ``."""
    dz = grid[1] - grid[0]
    mean = grid + eps * score(grid)
    p = np.exp(-((grid[None, :] - mean[:, None]) ** 2) / (4.0 * eps))
    rows = p.sum(axis=1)
    # A far-tail row whose move leaves the grid gets a self-loop so that P stays
    # stochastic; such states are unreachable from the mode (density < 1e-40).
    idx = np.flatnonzero(rows == 0.0)
    p[idx, idx] = 1.0
    p /= p.sum(axis=1, keepdims=True)
    # Power iteration π ← πP from a point mass at the mode: the chain contracts at
    # rate ~(1 - ε·a) = 0.8 per step, so 200 iterations converge far below the
    # Monte Carlo error.
    pi = np.zeros(len(grid))
    pi[np.argmin(np.abs(score(grid)))] = 1.0
    for _ in range(200):
        pi = pi @ p
    return pi / (pi.sum() * dz)


def _ks_distance(samples: np.ndarray, grid: np.ndarray, density: np.ndarray) -> float:
    cdf = np.cumsum(density) * (grid[1] - grid[0])
    x = np.sort(samples)
    f = np.interp(x, grid, cdf)
    n = len(x)
    return float(max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n)))


def _run(kernel, init, seed, num_steps=NUM_STEPS):
    @tf.function  # graph mode: XLA's compile time would dominate these short runs
    def run():
        return tfp.mcmc.sample_chain(
            num_steps, init, kernel=kernel, num_steps_between_results=0, trace_fn=None, seed=seed
        )

    return tf.nest.map_structure(lambda t: t.numpy(), run())


BIJECTORS = {"exp": tfb.Exp(), "softplus": tfb.Softplus()}


@pytest.mark.parametrize("kind", ["exp", "softplus"])
def test_score_is_the_analytic_pullback(kind):
    y = _data()
    a, b = _posterior_params(y)
    est = TransformedEstimator(_estimator(y), BIJECTORS[kind])
    z = tf.constant(np.linspace(-1.0, 2.5, 7))
    full = est.full_log_prob_and_gradient(z)
    np.testing.assert_allclose(
        full.grads_target_log_prob[0], _z_score(z.numpy(), a, b, kind), rtol=1e-10, atol=1e-10
    )
    # The value is log π(f(z)) + log f'(z) up to the evidence: differences match.
    v = BIJECTORS[kind].forward(z).numpy()
    ref = tfd.InverseGamma(np.float64(a), np.float64(b)).log_prob(v).numpy()
    ref = ref + BIJECTORS[kind].forward_log_det_jacobian(z, event_ndims=0).numpy()
    got = full.target_log_prob.numpy()
    np.testing.assert_allclose(got - got[0], ref - ref[0], rtol=1e-10, atol=1e-9)
    # The stochastic estimate is unbiased: average over every batch of an epoch.
    mb = TransformedEstimator(_estimator(y, batch_size=5), BIJECTORS[kind])
    state = mb.bootstrap(z)
    grads = []
    for i in range(N // 5):
        e, state = mb(z, state, tf.constant([0, i]))
        grads.append(e.grads_target_log_prob[0].numpy())
    np.testing.assert_allclose(np.mean(grads, 0), _z_score(z.numpy(), a, b, kind), rtol=1e-9)


def test_control_variates_inside_the_transform():
    y = _data()
    a, b = _posterior_params(y)
    centre = tf.constant(b / (a + 1.0), tf.float64)  # the mode of v
    inner = ControlVariateEstimator(_estimator(y, batch_size=4), centre)
    est = TransformedEstimator(inner, tfb.Softplus())
    assert est.gradient_evaluations_per_call == 2
    z = tf.constant([0.3, 1.1, 2.0], tf.float64)
    state = est.bootstrap(z)
    grads = []
    for i in range(N // 4):
        e, state = est(z, state, tf.constant([1, i]))
        grads.append(e.grads_target_log_prob[0].numpy())
    np.testing.assert_allclose(np.mean(grads, 0), _z_score(z.numpy(), a, b, "softplus"), rtol=1e-9)


@pytest.mark.parametrize(
    "kind,num_chains", [("exp", 4000), pytest.param("softplus", 40_000, marks=pytest.mark.slow)]
)
def test_stationary_law_is_the_discretised_chains(kind, num_chains, seed):
    """SGLD through TransformedTransitionKernel vs the exact discretised law; power check.

    Softplus's log-det-Jacobian moves the law less than Exp's (its derivative
    ``1 - σ(z)`` is ~0.2 at the mode, against 1), so its power check needs 10x
    the chains (slow tier).
    """
    y = _data()
    a, b = _posterior_params(y)
    bij = BIJECTORS[kind]
    score = lambda g: _z_score(g, a, b, kind)  # noqa: E731
    z0 = brentq(score, -5.0, 10.0)  # the mode of log π_z
    curvature = (score(z0 - 1e-4) - score(z0 + 1e-4)) / 2e-4
    eps = 0.2 / curvature  # ε times the curvature of log π_z at its mode is 0.2
    sd = 1.0 / np.sqrt(curvature)
    init = tf.fill([num_chains], bij.forward(tf.constant(z0, tf.float64)))  # constrained
    grid = np.linspace(z0 - 7 * sd, z0 + 9 * sd, 801)

    kernel = TransformedTransitionKernel(sg.SGLD(_estimator(y), step_size=eps), bij)
    seed_t = tf.constant([seed, 1])
    v = _run(kernel, init, seed_t)
    assert np.all(v > 0.0)  # states come out in the constrained space
    z = bij.inverse(tf.constant(v[-1])).numpy()

    law = _discretised_law(score, eps, grid)
    mean = np.sum(grid * law) * (grid[1] - grid[0])
    var = np.sum((grid - mean) ** 2 * law) * (grid[1] - grid[0])

    def passes(samples: np.ndarray) -> bool:
        # KS at the 0.1% level and the mean within 4 Monte Carlo standard errors.
        ks_ok = _ks_distance(samples, grid, law) < 1.95 / np.sqrt(num_chains)
        return ks_ok and abs(samples.mean() - mean) < 4.0 * np.sqrt(var / num_chains)

    assert passes(z)

    # Power: the same chain without the log-det-Jacobian term fails the same check.
    no_jac = sg.SGLD(
        TransformedEstimator(_estimator(y), bij, include_log_det_jacobian=False), step_size=eps
    )
    z_wrong = _run(no_jac, tf.fill([num_chains], tf.constant(z0, tf.float64)), seed_t)[-1]
    assert not passes(z_wrong)


def test_transformed_kernel_matches_a_chain_on_z():
    """TTK(SGLD(est), f) returns f of the chain SGLD(TransformedEstimator(est, f)) runs."""
    y = _data()
    bij = tfb.Softplus()
    v0 = tf.constant([0.5, 1.0, 3.0], tf.float64)
    seed = tf.constant([4, 5])
    ttk = TransformedTransitionKernel(sg.SGNHT(_estimator(y, 5), step_size=1e-3), bij)
    assert isinstance(ttk, tfp.mcmc.TransformedTransitionKernel)
    assert not ttk.is_calibrated
    v = _run(ttk, v0, seed, num_steps=10)
    on_z = sg.SGNHT(TransformedEstimator(_estimator(y, 5), bij), step_size=1e-3)
    z = _run(on_z, bij.inverse(v0), seed, num_steps=10)
    np.testing.assert_allclose(v, bij.forward(z).numpy(), rtol=1e-12)


def test_transformed_kernel_finds_the_sg_kernel_under_a_wrapper():
    y = _data()
    inner = tfp.experimental.mcmc.ThinningKernel(sg.SGLD(_estimator(y), 1e-3), num_steps_to_skip=2)
    ttk = TransformedTransitionKernel(inner, tfb.Exp())
    rebuilt = ttk.transformed_kernel.inner_kernel.estimator
    assert isinstance(rebuilt, TransformedEstimator)
    v = tfp.mcmc.sample_chain(3, tf.ones([2], tf.float64), kernel=ttk, trace_fn=None, seed=(1, 2))
    assert v.shape == (3, 2) and np.all(v.numpy() > 0)


def test_transformed_kernel_still_wraps_tfp_kernels():
    target = tfd.Gamma(tf.constant(3.0, tf.float64), tf.constant(2.0, tf.float64))
    hmc = tfp.mcmc.HamiltonianMonteCarlo(target.log_prob, step_size=0.1, num_leapfrog_steps=3)
    ours = TransformedTransitionKernel(hmc, tfb.Exp())
    theirs = tfp.mcmc.TransformedTransitionKernel(hmc, tfb.Exp())
    x0 = tf.ones([2], tf.float64)
    a = tfp.mcmc.sample_chain(5, x0, kernel=ours, trace_fn=None, seed=(3, 4))
    b = tfp.mcmc.sample_chain(5, x0, kernel=theirs, trace_fn=None, seed=(3, 4))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_multipart_list_of_bijectors():
    y = _data()

    def loglik(parts, batch):
        mu, v = parts
        return tfd.Normal(mu[..., None], tf.sqrt(v)[..., None]).log_prob(batch)

    def logprior(parts):
        mu, v = parts
        return tfd.Normal(tf.constant(0.0, mu.dtype), 10.0).log_prob(mu) + tfd.InverseGamma(
            tf.constant(ALPHA, v.dtype), tf.constant(BETA, v.dtype)
        ).log_prob(v)

    est = TransformedEstimator(
        MinibatchEstimator(loglik, y, N, log_prior_fn=logprior), [tfb.Identity(), tfb.Exp()]
    )
    z = [tf.constant([0.1, -0.2], tf.float64), tf.constant([0.5, 0.0], tf.float64)]
    full = est.full_log_prob_and_gradient(z)

    def direct(mu, lv):
        v = tf.exp(lv)
        return (
            tf.reduce_sum(tfd.Normal(mu[..., None], tf.sqrt(v)[..., None]).log_prob(y), -1)
            + logprior([mu, v])
            + lv
        )

    value, grads = tfp.math.value_and_gradient(direct, z)
    np.testing.assert_allclose(full.target_log_prob, value, rtol=1e-12)
    for g, h in zip(full.grads_target_log_prob, grads):
        np.testing.assert_allclose(g, h, rtol=1e-12)


def test_bad_input():
    y = _data()
    with pytest.raises(TypeError, match="bijector"):
        TransformedEstimator(_estimator(y), bijector="exp")
    with pytest.raises(TypeError, match="estimator"):
        TransformedEstimator(lambda s: s, tfb.Exp())
    est = TransformedEstimator(_estimator(y), tfb.Exp())
    with pytest.raises(ValueError, match="init_state"):
        sg.SGLD(est, 1e-3).bootstrap_results(tf.ones([2], tf.float32))
    assert est.with_batch_size(4).batch_size == 4


def test_structured_estimator_through_the_transformed_kernel():
    """S-SGMCMC's estimator (history in the model's space) under a per-part bijector."""
    from tfp_sgmcmc.estimators import StructuredEstimator
    from tfp_sgmcmc.estimators.partitions import partition_by_part

    y = _data()

    def loglik(parts, batch):
        mu, v = parts
        return tfd.Normal(mu[..., None], tf.sqrt(v)[..., None]).log_prob(batch)

    def logprior(parts):
        mu, v = parts
        return tfd.Normal(tf.constant(0.0, mu.dtype), 10.0).log_prob(mu) + _inverse_gamma_lp(v)

    base = MinibatchEstimator(loglik, y, 5, log_prior_fn=logprior)
    theta0 = [tf.constant(0.0, tf.float64), tf.constant(2.0, tf.float64)]
    structured = StructuredEstimator(base, partition_by_part(theta0), history_capacity=20)
    kernel = TransformedTransitionKernel(sg.SGLD(structured, 1e-3), [tfb.Identity(), tfb.Exp()])
    mu, v = _run(kernel, theta0, tf.constant([2, 3]), num_steps=30)
    assert np.all(np.isfinite(mu)) and np.all(v > 0)


def _inverse_gamma_lp(v):
    return tfd.InverseGamma(tf.constant(ALPHA, v.dtype), tf.constant(BETA, v.dtype)).log_prob(v)


def test_jacobian_flag_must_be_a_bool_and_chains_pass_through():
    """``bool()`` read None or 0.0 as "no Jacobian" (another law) and "False" as True; an
    inner estimator that says nothing about per-chain batches read as sharing them."""
    y = _data()
    for bad in (None, 0.0, "False", [0]):
        with pytest.raises(ValueError, match="`include_log_det_jacobian`"):
            TransformedEstimator(_estimator(y), tfb.Exp(), include_log_det_jacobian=bad)
    assert not TransformedEstimator(
        _estimator(y), tfb.Exp(), include_log_det_jacobian=np.bool_(False)
    ).include_log_det_jacobian
    noisy = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.1)
    assert TransformedEstimator(noisy, tfb.Exp()).independent_chains is None
    est = TransformedEstimator(_estimator(y), tfb.Exp())
    assert est.independent_chains is False
    assert est.with_independent_chains().independent_chains is True
