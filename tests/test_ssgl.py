"""The SSGL prior: validation, E-step in log space, latent targets, SA fixed point.

Closed forms are those of Deng et al. (2019), eqs. (12)–(15) (``docs/algorithms.md#sgld-sa``),
evaluated here independently in NumPy (float64) at hand-chosen points,
including points where the naive density ratio of the reference code is 0/0.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc.kernels.arguments import check_sa_schedule
from tfp_sgmcmc.priors import SpikeAndSlabGroupLasso
from tfp_sgmcmc.priors.ssgl import SSGLLatents
from tfp_sgmcmc.schedules import (
    ConstantStepSize,
    GeometricAnnealing,
    PolynomialDecay,
    SAStepSize,
)

F64 = tf.float64


# ---------------------------------------------------------------- references #
def np_log_odds(beta, sigma, delta, v0, v1):
    """log a − log b of eq. (12), written out by hand."""
    log_a = (
        math.log(delta)
        - beta**2 / (2 * sigma**2 * v1)
        - 0.5 * math.log(2 * math.pi * sigma**2 * v1)
    )
    log_b = math.log(1 - delta) - abs(beta) / (sigma * v0) - math.log(2 * sigma * v0)
    return log_a - log_b


def np_sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def np_g(
    beta, rho, k0, k1, delta, sigma, omega, v0, v1, a, b, nu, lam, form, n_total=None, sse=None
):
    """NumPy reference of one SA step (one sparse part), R-code order ρ, κ, δ, σ²."""
    beta = np.asarray(beta, float)
    rho_t = np.array([np_sigmoid(np_log_odds(x, sigma, delta, v0, v1)) for x in beta])
    rho = (1 - omega) * rho + omega * rho_t
    k0 = (1 - omega) * k0 + omega * (1 - rho) / v0
    k1 = (1 - omega) * k1 + omega * rho / v1
    p = beta.size
    delta = (1 - omega) * delta + omega * (rho.sum() + a - 1) / (a + b + p - 2)
    rb = np.sum(k0 * np.abs(beta))
    j = np.sum(k1 * beta**2)
    if form == "regression":
        ra, rc = n_total + p + nu, sse + j + nu * lam
    else:
        ra, rc = p + nu + 2, j + nu * lam
    s_t = (rb + math.sqrt(rb**2 + 4 * ra * rc)) / (2 * ra)
    sigma = math.sqrt((1 - omega) * sigma**2 + omega * s_t**2)
    return rho, k0, k1, delta, sigma


def latents(rho, k0, k1, delta, sigma):
    c = lambda x: tf.constant(np.asarray(x, float), F64)  # noqa: E731
    return SSGLLatents([c(rho)], [c(k0)], [c(k1)], [c(delta)], c(sigma))


# ---------------------------------------------------------------- validation #
@pytest.mark.parametrize(
    "kwargs, arg",
    [
        (dict(v0=0.0), "v0"),
        (dict(v0=-1.0), "v0"),
        (dict(v0=10.0, v1=10.0), "v0"),
        (dict(v0=20.0, v1=10.0), "v0"),
        (dict(v0=0.1, a=0.0), "a"),
        (dict(v0=0.1, b=-2.0), "b"),
        (dict(v0=0.1, nu=0.0), "nu"),
        (dict(v0=0.1, lam=-1.0), "lam"),
        (dict(v0=0.1, sigma_form="poisson"), "sigma_form"),
    ],
)
def test_prior_bad_input_names_argument(kwargs, arg):
    with pytest.raises(ValueError, match=f"`{arg}`"):
        SpikeAndSlabGroupLasso(**kwargs)


@pytest.mark.parametrize(
    "kwargs, arg",
    [
        (dict(A=0.0), "A"),
        (dict(A=1.0, B=-1.0), "B"),
        (dict(A=1.0, alpha=0.0), "alpha"),
        (dict(A=1.0, alpha=1.5), "alpha"),
        (dict(A=1.0, alpha=-0.7), "alpha"),
        (dict(A=1.0, cap=1.5), "cap"),
        (dict(A=1.0, cap=0.0), "cap"),
    ],
)
def test_sa_step_size_bad_input(kwargs, arg):
    with pytest.raises(ValueError, match=f"`{arg}`"):
        SAStepSize(**kwargs)


def test_check_sa_schedule_rejects_non_decaying():
    for bad in (
        ConstantStepSize(0.1),
        PolynomialDecay(1.0, 1.0, gamma=0.0),
        PolynomialDecay(1.0, 1.0, gamma=2.0),
        0.1,
    ):
        with pytest.raises(ValueError, match="`sa_step_size`"):
            check_sa_schedule(bad)
    good = SAStepSize(10.0, 1000.0, 0.7)
    assert check_sa_schedule(good) is good
    assert check_sa_schedule(PolynomialDecay(1.0, 1.0, gamma=0.7)) is not None


def test_schedules_values():
    w = SAStepSize(10.0, 1000.0, 0.7)
    for t in (0, 5, 1000):
        np.testing.assert_allclose(
            w(tf.constant(t), F64).numpy(), 10 * (t + 1 + 1000) ** -0.7, rtol=1e-12
        )
    capped = SAStepSize(1000.0, 100.0, 0.7, cap=0.1)  # the R notebook's ω: the cap binds
    assert capped(tf.constant(10**5), F64).numpy() == pytest.approx(0.1)
    assert capped(tf.constant(10**7), F64).numpy() < 0.1
    ann = GeometricAnnealing(tau0=2.0, c=1.003)
    for t in (0, 7, 2000):
        np.testing.assert_allclose(ann(tf.constant(t), F64).numpy(), 1 / (2 * 1.003**t), rtol=1e-10)
        np.testing.assert_allclose(
            ann.inverse_temperature(tf.constant(t), F64).numpy(), 2 * 1.003**t, rtol=1e-10
        )
    with pytest.raises(ValueError, match="`tau0`"):
        GeometricAnnealing(tau0=0.0)


# ------------------------------------------------------------------- E-step #
@pytest.mark.parametrize(
    "beta, sigma, delta, v0, v1",
    [
        (0.5, 1.0, 0.5, 0.1, 10.0),
        (0.0, 1.0, 0.5, 0.1, 10.0),
        (-0.02, 2.0, 0.01, 0.01, 10.0),
        (3.0, 0.7, 0.3, 0.001, 10.0),
    ],
)
def test_e_step_matches_closed_form(beta, sigma, delta, v0, v1):
    prior = SpikeAndSlabGroupLasso(v0=v0, v1=v1)
    got = prior.e_step(tf.constant([beta], F64), tf.constant(sigma, F64), tf.constant(delta, F64))
    want = np_sigmoid(np_log_odds(beta, sigma, delta, v0, v1))
    # At moderate |β| the naive density ratio of the reference code agrees.
    a = delta * math.exp(-(beta**2) / (2 * sigma**2 * v1)) / math.sqrt(2 * math.pi * sigma**2 * v1)
    b = (1 - delta) * math.exp(-abs(beta) / (sigma * v0)) / (2 * sigma * v0)
    if a + b > 0:
        np.testing.assert_allclose(want, a / (a + b), rtol=1e-10)
    np.testing.assert_allclose(got.numpy()[0], want, rtol=1e-12)


def test_e_step_where_naive_densities_underflow():
    # β = 2σ v1/v0 balances the two exponents: −β²/(2σ²v1) + |β|/(σv0) = 0, while each
    # density alone is exp(−2000): the reference code's ratio is 0/0.
    v0, v1, sigma, delta = 0.1, 10.0, 1.0, 0.5
    beta = 2 * sigma * v1 / v0
    with np.errstate(all="ignore"):
        a = delta * np.exp(-(beta**2) / (2 * sigma**2 * v1)) / np.sqrt(2 * np.pi * sigma**2 * v1)
        b = (1 - delta) * np.exp(-abs(beta) / (sigma * v0)) / (2 * sigma * v0)
        assert a == 0.0 and b == 0.0 and np.isnan(a / (a + b))
    # By hand: log-odds = log(δ/(1−δ)) − ½ log(2π σ² v1) + log(2σ v0).
    want = np_sigmoid(-0.5 * math.log(2 * math.pi * 10.0) + math.log(0.2))
    prior = SpikeAndSlabGroupLasso(v0=v0, v1=v1)
    # float32: the two O(2000) exponents cancel, so the log-odds carry ~2000·eps32 ≈ 1e-4.
    for dtype in (tf.float32, tf.float64):
        got = prior.e_step(
            tf.constant([beta, -beta], dtype), tf.constant(sigma, dtype), tf.constant(delta, dtype)
        )
        np.testing.assert_allclose(
            got.numpy(), [want, want], rtol=1e-3 if dtype == tf.float32 else 1e-12
        )
    # Both densities underflow in float32 at |β| = 1e4, yet ρ stays finite: beyond
    # β = 2σv1/v0 the Gaussian slab decays faster than the Laplace spike (log-odds
    # −β²/20 + 10|β| + const → −∞, ρ → 0); at |β| = 50 the slab dominates (ρ → 1);
    # near 0 the spike does.
    got = prior.e_step(
        tf.constant([1e4, -1e4, 50.0, 1e-8], tf.float32),
        tf.constant(1.0, tf.float32),
        tf.constant(0.5, tf.float32),
    ).numpy()
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got[:3], [0.0, 0.0, 1.0], atol=1e-30)
    np.testing.assert_allclose(got[3], want, rtol=1e-5)  # exponents ≈ 0: the constants only


def test_kappa_delta_sigma_targets_closed_form():
    v0, v1, a, b, nu, lam = 0.1, 10.0, 1.0, 4.0, 1.0, 1.0
    prior = SpikeAndSlabGroupLasso(
        v0=v0, v1=v1, a=a, b=b, nu=nu, lam=lam, sigma_form="classification"
    )
    rho = tf.constant([0.9, 0.2, 0.0, 1.0], F64)
    k0, k1 = prior.kappa_targets(rho)
    np.testing.assert_allclose(k0.numpy(), [1.0, 8.0, 10.0, 0.0])
    np.testing.assert_allclose(k1.numpy(), [0.09, 0.02, 0.0, 0.1])
    # (Σρ + a − 1)/(a + b + p − 2) = 2.1 / 7.
    np.testing.assert_allclose(prior.delta_target(rho).numpy(), 2.1 / 7)
    beta = tf.constant([2.0, -0.5, 0.0, 1.0], F64)
    # R_b = 1·2 + 8·0.5 + 0 + 0 = 6; J = 0.09·4 + 0.02·0.25 + 0 + 0.1 = 0.465.
    s_cls = prior.sigma_target([beta], [k0], [k1])
    ca, cc = 4 + 1 + 2, 0.465 + 1
    np.testing.assert_allclose(
        s_cls.numpy(), (6 + math.sqrt(36 + 4 * ca * cc)) / (2 * ca), rtol=1e-12
    )
    reg = SpikeAndSlabGroupLasso(v0=v0, v1=v1, a=a, b=b, nu=nu, lam=lam, sigma_form="regression")
    s_reg = reg.sigma_target([beta], [k0], [k1], num_examples=50, sse=tf.constant(120.0, F64))
    ra, rc = 50 + 4 + 1, 120 + 0.465 + 1
    np.testing.assert_allclose(
        s_reg.numpy(), (6 + math.sqrt(36 + 4 * ra * rc)) / (2 * ra), rtol=1e-12
    )
    # σ̃ is the positive root of R_a σ² − R_b σ − R_c = 0.
    s = float(s_reg.numpy())
    assert abs(ra * s * s - 6 * s - rc) < 1e-9 and s > 0
    with pytest.raises(ValueError, match="`num_examples`"):
        reg.sigma_target([beta], [k0], [k1])
    # b = None means b = p_l (the simulations' b = p).
    p_none = SpikeAndSlabGroupLasso(v0=v0, v1=v1, a=1.0)
    np.testing.assert_allclose(p_none.delta_target(rho).numpy(), 2.1 / (1 + 4 + 4 - 2))


def test_log_prior_and_gradient():
    prior = SpikeAndSlabGroupLasso(v0=0.1, v1=10.0, nu=2.0, lam=3.0)
    beta = tf.constant([[1.5, -0.3], [0.2, -2.0]], F64)
    lat = SSGLLatents(
        [tf.fill([2, 2], tf.constant(0.5, F64))],
        [tf.constant([[1.0, 2.0], [3.0, 4.0]], F64)],
        [tf.constant([[0.5, 0.1], [0.2, 0.3]], F64)],
        [tf.constant(0.5, F64)],
        tf.constant(1.7, F64),
    )
    b = beta.numpy()
    k0, k1, s = lat.kappa0[0].numpy(), lat.kappa1[0].numpy(), 1.7
    want = (
        -np.sum(k0 * np.abs(b)) / s
        - np.sum(k1 * b**2) / (2 * s**2)
        - (4 + 2 + 2) / 2 * math.log(s**2)
        - 6 / (2 * s**2)
    )
    np.testing.assert_allclose(prior.log_prior([beta], lat).numpy(), want, rtol=1e-12)
    with tf.GradientTape() as tape:
        tape.watch(beta)
        lp = prior.log_prior([beta], lat)
    np.testing.assert_allclose(
        tape.gradient(lp, beta).numpy(), prior.grad_log_prior([beta], lat)[0].numpy(), rtol=1e-12
    )


# --------------------------------------------------------------- SA recursion #
@pytest.mark.parametrize("form", ["classification", "regression"])
def test_sa_update_one_step_matches_reference(form):
    kw = dict(v0=0.05, v1=10.0, a=1.0, b=7.0, nu=1.0, lam=1.0)
    prior = SpikeAndSlabGroupLasso(sigma_form=form, **kw)
    rng = np.random.default_rng(3)
    beta = np.concatenate([[3.0, -2.0, 1.0], 0.05 * rng.standard_normal(5)])
    rho, k0, k1 = np.full(8, 0.5), np.full(8, 1.0), np.full(8, 1.0)
    for omega in (0.3, 1.0, 0.0):
        extra = dict(num_examples=40, sse=tf.constant(55.0, F64)) if form == "regression" else {}
        got = prior.sa_update(
            latents(rho, k0, k1, 0.5, 1.2),
            [tf.constant(beta, F64)],
            tf.constant(omega, F64),
            **extra,
        )
        want = np_g(beta, rho, k0, k1, 0.5, 1.2, omega, form=form, n_total=40, sse=55.0, **kw)
        for g, w in zip([got.rho[0], got.kappa0[0], got.kappa1[0], got.delta[0], got.sigma], want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-12, atol=1e-12)


def test_sa_update_takes_python_and_other_dtype_omega():
    """``omega=1.0`` (the EM step) raised AttributeError; float64 ω on float32 latents
    raised InvalidArgumentError."""
    prior = SpikeAndSlabGroupLasso(0.1, sigma_form="classification")
    beta = [tf.constant([0.5, -1.0, 0.0])]
    lat = prior.initial_latents(beta)
    want = prior.sa_update(lat, beta, tf.constant(1.0))
    for omega in (1.0, 1, np.float64(1.0), tf.constant(1.0, F64)):
        got = prior.sa_update(lat, beta, omega)
        assert got.sigma.dtype == tf.float32
        np.testing.assert_allclose(got.rho[0].numpy(), want.rho[0].numpy())
    for bad in (1.5, -0.1, None, "0.5"):
        with pytest.raises(ValueError, match="`omega`"):
            prior.sa_update(lat, beta, bad)


@pytest.mark.parametrize("form", ["classification", "regression"])
def test_sa_recursion_converges_to_fixed_point_with_beta_held_fixed(form):
    """With β fixed, the SA iterates θ_k → θ* with θ* = g_{θ*}(β) (supplement Thm 1)."""
    kw = dict(v0=0.1, v1=10.0, a=1.0, b=20.0, nu=1.0, lam=1.0)
    prior = SpikeAndSlabGroupLasso(sigma_form=form, **kw)
    rng = np.random.default_rng(11)
    beta = np.concatenate([[3.0, -2.0, 1.0], 0.05 * rng.standard_normal(17)])
    n_total, sse = 30, 60.0
    # θ* by iterating the map itself (ω = 1) in NumPy, independently of the code under test.
    th = (np.full(20, 0.5), np.ones(20), np.ones(20), 0.5, 1.0)
    for _ in range(2000):
        th = np_g(beta, *th, 1.0, form=form, n_total=n_total, sse=sse, **kw)
    fixed = np_g(beta, *th, 1.0, form=form, n_total=n_total, sse=sse, **kw)
    for x, y in zip(th, fixed):  # a genuine fixed point
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)
    omega_fn = SAStepSize(1.0, 10.0, 0.7)
    extra = dict(num_examples=n_total, sse=tf.constant(sse, F64)) if form == "regression" else {}
    b_t = [tf.constant(beta, F64)]

    @tf.function
    def run(num_steps):
        def body(t, lat):
            return t + 1, prior.sa_update(lat, b_t, omega_fn(t, F64), **extra)

        lat0 = latents(np.full(20, 0.5), np.ones(20), np.ones(20), 0.5, 1.0)
        return tf.while_loop(lambda t, _: t < num_steps, body, (tf.constant(0), lat0))[1]

    def err(lat):
        flat = [lat.rho[0], lat.kappa0[0], lat.kappa1[0], lat.delta[0], lat.sigma]
        return max(float(np.max(np.abs(g.numpy() - w) / (1 + np.abs(w)))) for g, w in zip(flat, th))

    e_short, e_long = err(run(tf.constant(30))), err(run(tf.constant(3000)))
    assert e_long < 1e-6, (e_short, e_long)
    assert e_short > 1e4 * e_long  # it is the recursion that converged, not the start
