"""Contour SGLD: a hand-computed step, the SA fixed point, importance reweighting.

Target: the standard 2-D Gaussian with ``log π = −|x|²/2`` (exact gradients),
so the energy ``U = |x|²/2`` is Exp(1)-distributed under π. For a histogram θ
the chain samples ``ϖ_θ ∝ π/Ψ_θ^ζ(U)`` and the SA recursion's mean field is
``m_i θ(i)^ζ − θ(i) Σ_j m_j θ(j)^ζ`` with ``m_j = ϖ_θ(S_j)``; its fixed point is
computed by quadrature and compared with the average histogram of many
independent chains (z-scores from the spread across chains), with a power
check (the fixed point of a 10%-wider Gaussian fails).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

from ._models import normals_like

Z = 3.3
M, GAP, ZETA = 10, 0.5, 0.75


def _target(scale=1.0):
    return lambda x: -0.5 * tf.reduce_sum(tf.square(x), -1) / scale


def _numpy_log_psi(log_theta, u, u_min, gap, zeta):
    j = np.clip(np.floor((u - u_min) / gap), 0, len(log_theta) - 1).astype(int)
    lo = log_theta[np.maximum(j - 1, 0)]
    frac = np.clip((u - u_min - j * gap) / gap, 0, 1)
    return zeta * (lo + (log_theta[j] - lo) * frac), j


def test_step_matches_numpy(rng, seed):
    eps, u_min, omega, temp = 0.1, -0.2, 0.3, 0.8
    kernel = sg.CSGLD(
        sg.NoisyGradientEstimator(_target()),
        eps,
        num_partitions=M,
        energy_gap=GAP,
        min_energy=u_min,
        zeta=ZETA,
        sa_step_size=omega,
        temperature=temp,
    )
    x = rng.standard_normal([3, 2]) * 1.5
    x[2] = [3.5, 0.5]  # U = 6.25: above the last partition, where the bracket is 1
    state = tf.constant(x)
    r = kernel.bootstrap_results(state)
    theta = np.full([3, M], 1.0 / M)
    np.testing.assert_allclose(r.energy_pdf.numpy(), theta)
    seeds = tfp.random.split_seed([seed, 1], n=4, salt="test_contour")
    for s in seeds:
        state, r = kernel.one_step(state, r, seed=s)
        noise_seed, _ = tfp.random.split_seed(s, n=2, salt="csgld.one_step")
        (xi,) = normals_like([[3, 2]], tf.float64, noise_seed, "csgld.noise")
        u = 0.5 * (x * x).sum(1)
        j = np.clip(np.floor((u - u_min) / GAP), 0, M - 1).astype(int)
        rows = np.arange(3)
        slope = np.log(theta[rows, j]) - np.log(theta[rows, np.maximum(j - 1, 0)])
        slope = np.where(u > u_min + M * GAP, 0.0, slope)  # flat above the last partition
        mult = 1 + ZETA * temp * slope / GAP
        x = x + eps * mult[:, None] * (-x) + np.sqrt(2 * eps * temp) * xi
        u_new = 0.5 * (x * x).sum(1)
        j_new = np.clip(np.floor((u_new - u_min) / GAP), 0, M - 1).astype(int)
        rate = omega * theta[rows, j_new] ** ZETA
        theta = theta + rate[:, None] * (np.eye(M)[j_new] - theta)
        np.testing.assert_allclose(state.numpy(), x, rtol=1e-10)
        np.testing.assert_allclose(r.gradient_multiplier.numpy(), mult, rtol=1e-10)
        np.testing.assert_array_equal(r.energy_index.numpy(), j_new)
        np.testing.assert_allclose(r.energy_pdf.numpy(), theta, rtol=1e-10)
        np.testing.assert_allclose(r.energy_pdf.numpy().sum(-1), 1.0, rtol=1e-12)
        for c in range(3):
            lw, _ = _numpy_log_psi(np.log(theta[c]), u_new[c], u_min, GAP, ZETA)
            np.testing.assert_allclose(r.log_importance_weight.numpy()[c], lw, rtol=1e-10)
    assert not np.allclose(theta, 1.0 / M)  # the histogram moved


def flattened_masses(log_theta, scale=1.0):
    """``ϖ_θ(S_i)`` for U = |x|²/2, x ~ N(0, scale I) (U has density e^{−u/scale}/scale)."""
    edges = [(i * GAP, (i + 1) * GAP if i < M - 1 else np.inf) for i in range(M)]

    def dens(u):
        lp, _ = _numpy_log_psi(log_theta, np.atleast_1d(u), 0.0, GAP, ZETA)
        return float(np.exp(-u / scale - lp[0]) / scale)

    m = np.array([scipy.integrate.quad(dens, a, b)[0] for a, b in edges])
    return m / m.sum()


def sa_fixed_point(scale=1.0, iters=2000):
    """Fixed point of the SA mean field, ``θ(i) ∝ ϖ_θ(S_i) θ(i)^ζ``, by damped iteration."""
    theta = np.full(M, 1.0 / M)
    for _ in range(iters):
        new = flattened_masses(np.log(theta), scale) * theta**ZETA
        new /= new.sum()
        if np.max(np.abs(new - theta)) < 1e-12:
            break
        theta = 0.5 * theta + 0.5 * new
    return theta


def _kernel(omega):
    return sg.CSGLD(
        sg.NoisyGradientEstimator(_target()),
        0.01,
        num_partitions=M,
        energy_gap=GAP,
        min_energy=0.0,
        zeta=ZETA,
        sa_step_size=omega,
    )


@tf.function(jit_compile=True)
def _learn(seed):
    x, _, final = tfp.mcmc.sample_chain(
        3000,
        tf.zeros([200, 2], tf.float64),
        kernel=_kernel(0.01),
        trace_fn=None,
        seed=seed,
        return_final_kernel_results=True,
    )
    return x[-1], final


@tf.function(jit_compile=True)
def _frozen(state, results, seed):
    return tfp.mcmc.sample_chain(
        1500,
        state,
        previous_kernel_results=results,
        kernel=_kernel(0.0),
        num_steps_between_results=1,
        trace_fn=lambda _, r: (r.energy_index, r.log_importance_weight),
        seed=seed,
    )


@pytest.mark.statistical
def test_flattened_law_histogram_and_importance_weights(seed):
    """SA learns θ near its fixed point; with θ then frozen, the chain's partition
    occupancy is the flattened law ϖ_θ (quadrature), and the importance weights
    recover E_π|x|² = 2 while the flattened samples alone do not."""
    state, final = _learn(tf.constant([seed, 4]))
    theta = final.energy_pdf.numpy().mean(0)
    fixed = sa_fixed_point()
    # The SA recursion has moved from uniform (0.35 away) to within 0.03 of its
    # fixed point (constant-ω SA fluctuates around it).
    assert np.max(np.abs(np.full(M, 1.0 / M) - fixed)) > 0.3
    assert np.max(np.abs(theta - fixed)) < 0.03, np.round(theta - fixed, 3)
    # Freeze one common θ for all chains (ω = 0).
    start = final._replace(energy_pdf=tf.broadcast_to(tf.constant(theta), [200, M]))
    x, (index, lw) = _frozen(state, start, tf.constant([seed, 5]))
    x, index, lw = x.numpy(), index.numpy(), lw.numpy()
    occupancy = np.stack([(index == i).mean(0) for i in range(M)], -1)  # [chains, M]
    est = occupancy.mean(0)
    se = occupancy.std(0, ddof=1) / np.sqrt(occupancy.shape[0])
    want = flattened_masses(np.log(theta))
    # Euler-Maruyama is biased near the jumps of the multiplier at the partition
    # edges: ~5% of the mass of the top partitions at ε = 0.01 (a NumPy replica of
    # the recursion with 4,000 chains), so each mass may also differ by 5%.
    tol = Z * se + 0.05 * want
    assert np.all(np.abs(est - want) < tol), np.round((est - want) / tol, 2)
    wrong = flattened_masses(np.log(theta), scale=1.1)  # power: a 10%-wider target
    assert np.any(np.abs(est - wrong) > Z * se + 0.05 * wrong)
    # Importance weights: E_π|x|² = 2; the flattened samples alone are far off.
    w = np.exp(lw - lw.max(0))
    r2 = (x * x).sum(-1)
    weighted = (w * r2).sum(0) / w.sum(0)
    m, s = weighted.mean(), weighted.std(ddof=1) / np.sqrt(weighted.size)
    bias = 0.01 * 2.0  # SGLD's O(ε) variance inflation at ε = 0.01 (0.5%), doubled
    assert abs(m - 2.0) < Z * s + bias, (m, s)
    assert abs(m - 2.2) > Z * s + bias  # a 10%-off value fails
    plain = r2.mean(0)
    assert plain.mean() - 2.0 > 10 * plain.std(ddof=1) / np.sqrt(plain.size)


def test_importance_weights_helper():
    w = sg.kernels.importance_weights(tf.constant([[0.0], [np.log(3.0)]]))
    np.testing.assert_allclose(w.numpy(), [[0.25], [0.75]])
    with pytest.raises(ValueError, match="NaN"):
        sg.kernels.importance_weights(tf.constant([0.0, np.nan]))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_partitions=1), "num_partitions"),
        (dict(num_partitions=10.0), "num_partitions"),
        (dict(energy_gap=0.0), "energy_gap"),
        (dict(zeta=-1.0), "zeta"),
        (dict(sa_step_size=1.0), "sa_step_size"),
        (dict(min_energy=float("nan")), "min_energy"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sg.CSGLD(sg.NoisyGradientEstimator(_target()), 0.1, **kwargs)
