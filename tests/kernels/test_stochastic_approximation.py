"""The SA wrapper (SGLD-SA / SGHMC-SA): settings, exactness of the energy, cost, chains."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.kernels.stochastic_approximation import StochasticApproximation, deng_sghmc
from tfp_sgmcmc.priors import SpikeAndSlabGroupLasso, SSGLEstimator
from tfp_sgmcmc.schedules import ConstantStepSize, GeometricAnnealing, SAStepSize

F64 = tf.float64


def linear_problem(rng, n=40, p=12):
    x = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:3] = [3.0, 2.0, 1.0]
    y = x @ beta + rng.normal(0, 1.0, n)
    return x, y, beta


def residual(b, d):
    return d[1] - tf.linalg.matvec(d[0], b)


def make_est(x, y, batch_size, v0=0.1, **kw):
    prior = SpikeAndSlabGroupLasso(v0=v0, v1=10.0, a=1.0, b=None)
    return SSGLEstimator(prior, (x, y), batch_size=batch_size, residual_fn=residual, **kw)


# ------------------------------------------------------------------ validation #
def test_bad_input(rng):
    x, y, _ = linear_problem(rng)
    est = make_est(x, y, 10)
    inner = sg.SGLD(est, 1e-3)
    with pytest.raises(ValueError, match="`sa_step_size`"):
        StochasticApproximation(inner, 1.5)
    with pytest.raises(ValueError, match="`sa_step_size`"):
        StochasticApproximation(inner, ConstantStepSize(0.1), require_decay=True)
    with pytest.raises(ValueError, match="`sa_step_size`"):
        StochasticApproximation(inner, 1.0, require_decay=True)
    StochasticApproximation(inner, SAStepSize(1.0, 100.0, 0.7), require_decay=True)
    plain = sg.MinibatchEstimator(lambda b, d: -0.5 * residual(b, d) ** 2, (x, y), 10)
    with pytest.raises(ValueError, match="`inner_kernel`"):
        StochasticApproximation(sg.SGLD(plain, 1e-3), 0.5)
    with pytest.raises(ValueError, match="`inner_kernel`"):
        StochasticApproximation(tfp.mcmc.RandomWalkMetropolis(lambda b: -tf.reduce_sum(b**2)), 0.5)
    prior = SpikeAndSlabGroupLasso(v0=0.1, sigma_form="classification")
    with pytest.raises(ValueError, match="`prior`"):
        SSGLEstimator(prior, (x, y), 10, residual_fn=residual)
    with pytest.raises(ValueError, match="`residual_fn`"):
        SSGLEstimator(prior, (x, y), 10)
    with pytest.raises(ValueError, match="`sparse_parts`"):
        make_est(x, y, 10, sparse_parts=[False, False])
    for kw, name in [
        (dict(initial_latents=dict(rho=None)), r"initial_latents\['rho'\]"),
        (dict(initial_latents=dict(rho=1.5)), r"initial_latents\['rho'\]"),
        (dict(initial_latents=dict(delta=1.0)), r"initial_latents\['delta'\]"),
        (dict(initial_latents=dict(delta="abc")), r"initial_latents\['delta'\]"),
        (dict(initial_latents=dict(kappa0=-1.0)), r"initial_latents\['kappa0'\]"),
        (dict(initial_latents=dict(sigma=0.0)), r"initial_latents\['sigma'\]"),
        (dict(initial_latents=dict(tau=1.0)), "initial_latents"),
        (dict(initial_latents=[0.5]), "initial_latents"),
        (dict(batch_ndims=0.0), "batch_ndims"),
        (dict(batch_ndims=-1), "batch_ndims"),
    ]:
        with pytest.raises(ValueError, match=f"`{name}`"):
            make_est(x, y, 10, **kw)
    assert make_est(x, y, 10, batch_ndims=np.int64(0)).batch_ndims == 0
    with pytest.raises(ValueError, match="`momentum`"):
        deng_sghmc(make_est(x, y, 10), 1e-3, momentum=1.0)
    with pytest.raises(ValueError, match="`learning_rate`"):
        deng_sghmc(make_est(x, y, 10), 0.5, momentum=0.9)  # β̂ = 0.25 > α = 0.1
    with pytest.raises(ValueError, match="`sparse_parts`"):
        k = StochasticApproximation(
            sg.SGLD(make_est(x, y, 10, sparse_parts=[True, False]), 1e-3), 0.5
        )
        k.bootstrap_results(tf.zeros(12, F64))


# --------------------------------------------------------- ω ≡ 0 = plain SGLD #
def test_omega_zero_is_plain_sgld_with_fixed_prior(rng, tf_seed):
    """ω ≡ 0 with κ0 = κ1 = σ = 1 is SGLD on a fixed L1 + L2 prior: identical chains."""
    x, y, _ = linear_problem(rng)
    p = x.shape[1]
    est = make_est(x, y, batch_size=10)
    sa = StochasticApproximation(sg.SGLD(est, 1e-3), 0.0)

    def ll(b, d):
        return -0.5 * residual(b, d) ** 2 - 0.5 * math.log(2 * math.pi)

    def lp(b):  # −Σ|β| − Σβ²/2 − ((p+ν+2)/2)·log 1 − νλ/2
        return -tf.reduce_sum(tf.abs(b)) - 0.5 * tf.reduce_sum(b**2) - 0.5

    plain = sg.SGLD(sg.MinibatchEstimator(ll, (x, y), 10, log_prior_fn=lp), 1e-3)
    out = []
    for k in (sa, plain):
        s = tfp.mcmc.sample_chain(
            8,
            tf.fill([p], tf.constant(0.3, F64)),
            kernel=k,
            seed=tf_seed,
            trace_fn=lambda _, r: getattr(r, "inner_results", r).target_log_prob,
        )
        out.append(s)
    np.testing.assert_allclose(out[0].all_states.numpy(), out[1].all_states.numpy(), rtol=1e-12)
    np.testing.assert_allclose(out[0].trace.numpy(), out[1].trace.numpy(), rtol=1e-10)


# ----------------------------------------- the energy after the latent update #
@pytest.mark.parametrize("omega", [1.0, 0.3])
def test_score_is_exact_for_the_updated_latents(rng, tf_seed, omega):
    """After a step, the cached score is ∇Q1(β_{k+1}; θ_{k+1}) (full batch: exact),
    and θ_{k+1} is the SA/EM update of θ_k at β_{k+1} with the batch's I."""
    x, y, _ = linear_problem(rng)
    p = x.shape[1]
    dense = tf.constant(0.5, F64)
    est = make_est(x, y, batch_size=x.shape[0], sparse_parts=[True, False], dense_prior_scale=2.0)

    def residual2(s, d):
        return d[1] - tf.linalg.matvec(d[0], s[0]) - s[1]

    est = SSGLEstimator(
        est.prior,
        (x, y),
        x.shape[0],
        residual_fn=residual2,
        sparse_parts=[True, False],
        dense_prior_scale=2.0,
        initial_latents={"sigma": 1.5},
    )
    k = StochasticApproximation(sg.SGLD(est, 1e-3), omega)
    state = [tf.constant(rng.normal(0, 0.5, p)), dense]
    r = k.bootstrap_results(state)
    new, r1 = k.one_step(state, r, seed=tf_seed)
    lat = r1.latents
    full = est.full_log_prob_and_gradient(new, lat)
    for g, w in zip(r1.inner_results.grads_target_log_prob, full.grads_target_log_prob):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        r1.inner_results.target_log_prob.numpy(), full.target_log_prob.numpy(), rtol=1e-12
    )
    # Independent NumPy check of Q1 itself at (β_{k+1}, θ_{k+1}).
    b, c = new[0].numpy(), new[1].numpy()
    s = float(lat.sigma.numpy())
    sse = np.sum((y - x @ b - c) ** 2)
    k0, k1 = lat.kappa0[0].numpy(), lat.kappa1[0].numpy()
    q1 = (
        -sse / (2 * s * s)
        - len(y) * math.log(s)
        - 0.5 * len(y) * math.log(2 * math.pi)
        - np.sum(k0 * np.abs(b)) / s
        - np.sum(k1 * b**2) / (2 * s * s)
        - (p + 1 + 2) / 2 * math.log(s * s)
        - 1 / (2 * s * s)
        - c**2 / (2 * 4.0)
    )
    np.testing.assert_allclose(r1.inner_results.target_log_prob.numpy(), q1, rtol=1e-12)
    # The latent update used the new β and the batch's residual sum of squares.
    want = est.prior.sa_update(
        r.latents, [new[0]], tf.constant(omega, F64), num_examples=len(y), sse=tf.constant(sse, F64)
    )
    np.testing.assert_allclose(lat.sigma.numpy(), want.sigma.numpy(), rtol=1e-12)
    np.testing.assert_allclose(lat.rho[0].numpy(), want.rho[0].numpy(), rtol=1e-12)
    assert float(r1.sa_step_size.numpy()) == pytest.approx(omega)


def test_one_gradient_evaluation_per_step(rng, tf_seed):
    x, y, _ = linear_problem(rng)
    est = make_est(x, y, 10)
    k = StochasticApproximation(sg.SGLD(est, 1e-3), SAStepSize(1.0, 10.0, 0.7))
    state = tf.zeros(x.shape[1], F64)
    r = k.bootstrap_results(state)
    before = est.num_calls
    k.one_step(state, r, seed=tf_seed)
    assert est.num_calls - before == 1
    assert k.gradient_evaluations_per_step == 1


# ------------------------------------------------------------ SGHMC mapping #
def test_deng_sghmc_is_sgd_with_momentum(rng):
    """At T = 0 (deterministic) our SGHMC from deng_sghmc reproduces Deng's
    v ← μv + η∇, β ← β + v, one step behind (ours starts with v = 0 at β0)."""
    target = lambda b: -0.5 * tf.reduce_sum(tf.constant([1.0, 4.0], F64) * b**2)  # noqa: E731
    est = sg.NoisyGradientEstimator(target)
    eta, mu = 0.05, 0.9
    k = deng_sghmc(est, eta, momentum=mu, gradient_noise_variance=None, temperature=0.0)
    assert k.parameters["friction"] == pytest.approx(1 - mu)
    assert not k.parameters["momentum_refresh"] and k.parameters["order"] == "chen"
    ours = tfp.mcmc.sample_chain(
        20, tf.constant([1.0, -1.0], F64), kernel=k, trace_fn=None, seed=1
    ).numpy()
    b, v, ref = np.array([1.0, -1.0]), np.zeros(2), []
    for _ in range(20):
        v = mu * v + eta * (-np.array([1.0, 4.0]) * b)
        b = b + v
        ref.append(b.copy())
    # rtol 1e-6: the core SGHMC casts its Python-float friction through float32.
    np.testing.assert_allclose(ours[1:], np.array(ref)[:-1], rtol=1e-6)
    k2 = deng_sghmc(est, 1e-4, momentum=0.9, temperature=GeometricAnnealing(1.0, 1.003))
    assert k2.parameters["noise_estimate"] == pytest.approx(0.5e-4)


# --------------------------------------------- chains under XLA, all kernels #
def _two_part_estimator(rng):
    """Sparse weights + dense bias, two chains (batch_ndims=1), float32."""
    x, y, _ = linear_problem(rng, n=60, p=8)
    ols = np.linalg.lstsq(np.c_[x, np.ones(len(y))], y, rcond=None)[0]
    x, y = x.astype(np.float32), y.astype(np.float32)

    def res(s, d):
        return d[1] - tf.einsum("np,cp->cn", d[0], s[0]) - s[1][:, None]

    prior = SpikeAndSlabGroupLasso(v0=0.1, v1=10.0)
    est = SSGLEstimator(
        prior,
        (x, y),
        20,
        residual_fn=res,
        sparse_parts=[True, False],
        batch_ndims=1,
        dense_prior_scale=10.0,
    )
    return est, ols


@pytest.mark.parametrize("jit", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_sgld_sa_selects_and_recovers_signals(rng, jit):
    """Graph mode in CI (XLA compilation alone takes longer than the run; the XLA
    variant is in the slow tier and every example runs under XLA)."""
    est, ols = _two_part_estimator(rng)
    k = StochasticApproximation(sg.SGLD(est, 1e-3), SAStepSize(1.0, 10.0, 0.7))

    @tf.function(jit_compile=jit)
    def run():
        return tfp.mcmc.sample_chain(
            1500,
            [tf.zeros([2, 8]), tf.zeros([2])],
            kernel=k,
            seed=[4, 2],
            trace_fn=lambda _, r: (r.latents.sigma, r.latents.rho[0], r.diverged),
        )

    (w, _), (sig, rho, dv) = run()
    assert sig.shape == (1500, 2) and rho.shape == (1500, 2, 8)
    assert not dv.numpy().any()
    post = w.numpy()[500:].mean(0)
    # Signals (3, 2, 1) kept near the least-squares fit; ρ → 1 for the two strong
    # ones; nulls (|OLS| ≤ 0.3 here) shrunk towards 0 with ρ small.
    np.testing.assert_allclose(post[:, :3], np.broadcast_to(ols[:3], (2, 3)), atol=0.3)
    assert np.all(rho.numpy()[-1][:, :2] > 0.99)
    assert np.all(rho.numpy()[-1][:, 3:] < 0.5)
    assert np.all(np.abs(post[:, 3:]) < np.abs(ols[3:8]) + 0.1)


def test_wrapper_runs_other_inner_kernels(rng):
    """pSGLD, SGHMC (Deng form, annealed) and SGNHT inside the wrapper, eagerly
    (tracing costs more than the steps here)."""
    est, _ = _two_part_estimator(rng)
    for kern in (
        sg.PSGLD(est, 1e-3),
        deng_sghmc(est, 1e-3, temperature=GeometricAnnealing(1.0, 1.003)),
        sg.SGNHT(est, 1e-3),
    ):
        k = StochasticApproximation(kern, SAStepSize(1.0, 10.0, 0.7))
        state = [tf.zeros([2, 8]), tf.zeros([2])]
        r = k.bootstrap_results(state)
        for i in range(6):
            state, r = k.one_step(state, r, seed=[i, 3])
        assert state[0].shape == (2, 8) and r.latents.sigma.shape == (2,)
        assert not r.diverged.numpy().any()
        assert np.all(np.isfinite(state[0].numpy())) and np.all(r.latents.sigma.numpy() > 0)
        assert int(r.step) == 6 and int(r.inner_results.step) == 6


def test_divergence_is_flagged(rng, tf_seed):
    x, y, _ = linear_problem(rng)
    k = StochasticApproximation(sg.SGLD(make_est(x, y, 10), 1e-3), 0.5)
    good = tf.zeros(x.shape[1], F64)
    bad = tf.tensor_scatter_nd_update(good, [[4]], tf.constant([np.nan], F64))
    r = k.bootstrap_results(good)
    assert not r.diverged.numpy()
    _, r1 = k.one_step(bad, r, seed=tf_seed)
    assert r1.diverged.numpy() and r1.inner_results.diverged.numpy()
    r_bad = k.bootstrap_results(bad)
    assert r_bad.diverged.numpy()


def test_chains_without_batch_ndims_name_it(rng):
    """A ``[C, p]`` state with the default ``batch_ndims=0`` used to fail with an
    opaque BroadcastTo error; it now names ``batch_ndims`` at bootstrap, and
    ``batch_ndims=1`` runs the chains."""
    x, y, _ = linear_problem(rng)
    state = tf.zeros([3, x.shape[1]], F64)
    kernel = StochasticApproximation(sg.SGLD(make_est(x, y, 10), 1e-3), 0.5)
    with pytest.raises(ValueError, match=r"`batch_ndims` is 0.*Set `batch_ndims`.*\(here 1\)"):
        kernel.bootstrap_results(state)
    with pytest.raises(ValueError, match="`batch_ndims`"):
        make_est(x, y, 10).full_log_prob_and_gradient(state)
    kernel = StochasticApproximation(sg.SGLD(make_est(x, y, 10, batch_ndims=1), 1e-3), 0.5)
    r = kernel.bootstrap_results(state)
    new_state, r = kernel.one_step(state, r, seed=[1, 2])
    assert new_state.shape == state.shape
    assert r.latents.sigma.shape == [3]
