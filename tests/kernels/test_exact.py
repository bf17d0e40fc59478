"""Each kernel's ``one_step`` against a hand-computed NumPy step (float64).

The kernels draw their noise from stateless, salted seed splits. The replay
re-draws the same standard normals (``normals_like``) and applies the update
rules of docs/algorithms.md (#sgld to #sgnht) written out in NumPy, for several consecutive
steps, so state carried in the results (pSGLD's ``V``, SGHMC's and SGNHT's
momentum, the thermostat) is checked too. The target is a Gaussian with the
exact score (``NoisyGradientEstimator`` with ``noise_scale = 0``) so the
gradient is known in closed form. A separate test checks the injected noise
has the right variance.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

from ._models import normals_like

PREC = np.array([[2.0, 0.6], [0.6, 1.0]])  # precision of the Gaussian target
SHAPE = [3, 2]  # 3 chains, 2 coordinates
NUM_STEPS = 3
RTOL = 1e-10


def _target(theta):
    return -0.5 * tf.einsum("...i,ij,...j->...", theta, tf.constant(PREC), theta)


def _score(theta):
    return -theta @ PREC  # PREC is symmetric


def _estimator():
    return sg.NoisyGradientEstimator(_target, noise_scale=0.0)


def _seeds(seed):
    return [tfp.random.sanitize_seed(s) for s in
            tfp.random.split_seed([seed, 42], n=NUM_STEPS, salt="test_exact")]


def _init(rng):
    return rng.standard_normal(SHAPE)


def _run(kernel, theta0, seeds):
    state = tf.constant(theta0)
    results = kernel.bootstrap_results(state)
    out = []
    for s in seeds:
        state, results = kernel.one_step(state, results, seed=s)
        out.append((state.numpy(), results))
    return out


def _z(seed, salt, n=1):
    return normals_like([SHAPE] * n, tf.float64, seed, salt)


@pytest.mark.parametrize("temperature", [1.0, 0.5, 0.0])
def test_sgld_step(rng, seed, temperature):
    eps = 0.05
    theta = _init(rng)
    seeds = _seeds(seed)
    got = _run(sg.SGLD(_estimator(), eps, temperature=temperature), theta, seeds)
    for s, (state, results) in zip(seeds, got):
        noise_seed, _ = tfp.random.split_seed(s, n=2, salt="sgld.one_step")
        (xi,) = _z(noise_seed, "sgld.noise")
        theta = theta + eps * _score(theta) + np.sqrt(2 * eps * temperature) * xi
        np.testing.assert_allclose(state, theta, rtol=RTOL)
        # The results carry the score and log-density of the returned state.
        np.testing.assert_allclose(results.grads_target_log_prob[0].numpy(), _score(theta),
                                   rtol=RTOL)
        np.testing.assert_allclose(results.target_log_prob.numpy(),
                                   -0.5 * np.einsum("ci,ij,cj->c", theta, PREC, theta), rtol=RTOL)
        assert float(results.step_size) == eps


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_sgld_prefetch_noise_step(rng, seed, temperature):
    """``prefetch_noise=True``: step 0 draws its own normals (salt ``sgld.noise.first``),
    every step draws the next step's (salt ``sgld.noise``) from its own seed, and the
    update is SGLD's with those normals; the results carry the draw ahead."""
    eps = 0.05
    theta0 = theta = _init(rng)
    seeds = _seeds(seed)
    kernel = sg.SGLD(_estimator(), eps, temperature=temperature, prefetch_noise=True)
    got = _run(kernel, theta, seeds)
    ahead = None
    for t, (s, (state, results)) in enumerate(zip(seeds, got)):
        noise_seed, _ = tfp.random.split_seed(s, n=2, salt="sgld.one_step")
        (xi,) = _z(noise_seed, "sgld.noise.first") if t == 0 else ahead
        theta = theta + eps * _score(theta) + np.sqrt(2 * eps * temperature) * xi
        np.testing.assert_allclose(state, theta, rtol=RTOL)
        np.testing.assert_allclose(results.grads_target_log_prob[0].numpy(), _score(theta),
                                   rtol=RTOL)
        ahead = _z(noise_seed, "sgld.noise")
        np.testing.assert_array_equal(results.next_noise[0].numpy(), ahead[0])
    # The shifted stream is a different chain from the default one (same seeds).
    plain = _run(sg.SGLD(_estimator(), eps, temperature=temperature), theta0, seeds)
    assert not np.allclose(plain[-1][0], got[-1][0])


def test_sgld_prefetch_noise_resumes_from_stored_results(rng, seed):
    """A run stopped after step 2 and resumed from its results written out as NumPy
    leaves (what the driver's checkpoint stores) continues the same chain: the noise
    drawn ahead travels in the results."""
    kernel = sg.SGLD(_estimator(), 0.05, prefetch_noise=True)
    seeds = _seeds(seed)
    theta = tf.constant(_init(rng))
    whole = _run(kernel, theta.numpy(), seeds)
    state, results = theta, kernel.bootstrap_results(theta)
    for s in seeds[:2]:
        state, results = kernel.one_step(state, results, seed=s)
    leaves = [np.asarray(x) for x in tf.nest.flatten(results)]
    restored = tf.nest.pack_sequence_as(results, [tf.constant(x) for x in leaves])
    resumed, _ = kernel.one_step(tf.constant(state.numpy()), restored, seed=seeds[2])
    np.testing.assert_array_equal(resumed.numpy(), whole[2][0])
    # Restarting from the state alone (fresh results) would not: the draw is lost.
    fresh = kernel.bootstrap_results(state)._replace(step=results.step)
    restarted, _ = kernel.one_step(state, fresh, seed=seeds[2])
    assert not np.allclose(restarted.numpy(), whole[2][0])


def test_sgld_prefetch_noise_must_be_a_bool():
    with pytest.raises(ValueError, match="prefetch_noise"):
        sg.SGLD(_estimator(), 0.1, prefetch_noise=1)


def test_sgld_list_of_parts(rng, seed):
    """Each part draws its own noise; a two-part state equals the NumPy step."""
    eps = 0.05

    def target(parts):
        a, b = parts
        return -0.5 * tf.reduce_sum(a * a, -1) - 1.5 * tf.square(b)

    kernel = sg.SGLD(sg.NoisyGradientEstimator(target), eps)
    a, b = rng.standard_normal([3, 2]), rng.standard_normal([3])
    state = [tf.constant(a), tf.constant(b)]
    results = kernel.bootstrap_results(state)
    for s in _seeds(seed):
        state, results = kernel.one_step(state, results, seed=s)
        noise_seed, _ = tfp.random.split_seed(s, n=2, salt="sgld.one_step")
        xa, xb = normals_like([[3, 2], [3]], tf.float64, noise_seed, "sgld.noise")
        a = a + eps * (-a) + np.sqrt(2 * eps) * xa
        b = b + eps * (-3 * b) + np.sqrt(2 * eps) * xb
        np.testing.assert_allclose(state[0].numpy(), a, rtol=RTOL)
        np.testing.assert_allclose(state[1].numpy(), b, rtol=RTOL)


def test_sgld_full_batch_noiseless_is_gradient_ascent_with_scheduled_step(rng, seed):
    sched = sg.PolynomialDecay(a=0.1, b=1.0, gamma=0.55)
    theta = _init(rng)
    got = _run(sg.SGLD(_estimator(), sched, temperature=0.0), theta, _seeds(seed))
    for t, (state, results) in enumerate(got):
        eps = 0.1 * (1.0 + t) ** -0.55
        theta = theta + eps * _score(theta)
        np.testing.assert_allclose(state, theta, rtol=RTOL)
        np.testing.assert_allclose(float(results.step_size), eps, rtol=1e-12)


def test_psgld_updates_v_before_use(rng, seed):
    eps, decay, lam = 0.01, 0.9, 1e-3
    theta = _init(rng)
    seeds = _seeds(seed)
    got = _run(sg.PSGLD(_estimator(), eps, decay=decay, epsilon=lam), theta, seeds)
    v = np.zeros(SHAPE)
    for s, (state, results) in zip(seeds, got):
        g = _score(theta)
        v = decay * v + (1 - decay) * g * g  # V_t with the current gradient, then used
        precond = 1.0 / (lam + np.sqrt(v))
        noise_seed, _ = tfp.random.split_seed(s, n=2, salt="sgld.one_step")
        (xi,) = _z(noise_seed, "sgld.noise")
        theta = theta + eps * precond * g + np.sqrt(2 * eps * precond) * xi
        np.testing.assert_allclose(state, theta, rtol=RTOL)
        np.testing.assert_allclose(results.transform_state[0].numpy(), v, rtol=RTOL)


def test_psgld_with_constant_preconditioner_is_rescaled_sgld(rng, seed):
    """Coupling: with decay 0 and a constant |g| the preconditioner is 1/(λ+|g|);
    on a 1-D linear target (constant score) pSGLD equals SGLD at ε·G."""
    slope, lam, eps = 4.0, 1.0, 0.02

    def target(x):
        return slope * tf.reduce_sum(x, -1)

    est = sg.NoisyGradientEstimator(target)
    precond = 1.0 / (lam + slope)
    x0 = tf.constant(rng.standard_normal([5, 1]))
    a = sg.PSGLD(est, eps, decay=0.0, epsilon=lam)
    b = sg.SGLD(est, eps * precond)
    ra, rb = a.bootstrap_results(x0), b.bootstrap_results(x0)
    sa = sb = x0
    for s in _seeds(seed):
        sa, ra = a.one_step(sa, ra, seed=s)
        sb, rb = b.one_step(sb, rb, seed=s)
    np.testing.assert_allclose(sa.numpy(), sb.numpy(), rtol=1e-12)


def _sghmc_replay(theta, v, seeds, results_list, big_l, eta, alpha, beta, temp, order, refresh):
    for step, (s, (state, results)) in enumerate(zip(seeds, results_list)):
        split = tfp.random.split_seed(s, n=2 * big_l + 1, salt="sghmc.one_step")
        if refresh or step == 0:
            (z,) = normals_like([SHAPE], tf.float64, split[0], "v0")
            v = np.sqrt(eta * temp) * z
        for l in range(big_l):
            (xi,) = normals_like([SHAPE], tf.float64, split[1 + 2 * l], "xi")
            noise = np.sqrt(2 * (alpha - beta) * eta * temp) * xi
            if order == "chen":  # θ ← θ + v; v ← v + η∇(θ_new) − αv + noise
                theta = theta + v
                v = v + eta * _score(theta) - alpha * v + noise
            else:  # explicit: both updates use the score at the old θ
                g = _score(theta)
                theta = theta + v
                v = v + eta * g - alpha * v + noise
        np.testing.assert_allclose(state, theta, rtol=RTOL)
        np.testing.assert_allclose(results.momentum[0].numpy(), v, rtol=RTOL)
    return theta


@pytest.mark.parametrize("order", ["chen", "explicit"])
@pytest.mark.parametrize("refresh", [True, False], ids=["refresh", "keep"])
@pytest.mark.parametrize("big_l", [1, 3])
def test_sghmc_step(rng, seed, order, refresh, big_l):
    eta, alpha, beta, temp = 0.02, 0.2, 0.05, 0.8
    theta = _init(rng)
    seeds = _seeds(seed)
    kernel = sg.SGHMC(_estimator(), eta, num_leapfrog_steps=big_l, friction=alpha,
                      noise_estimate=beta, momentum_refresh=refresh, order=order,
                      temperature=temp)
    got = _run(kernel, theta, seeds)
    _sghmc_replay(theta, None, seeds, got, big_l, eta, alpha, beta, temp, order, refresh)


def test_sghmc_orders_differ(rng, seed):
    """Chen's order (score at the new θ) and the explicit order are different chains."""
    theta = _init(rng)
    seeds = _seeds(seed)
    runs = [
        _run(sg.SGHMC(_estimator(), 0.05, num_leapfrog_steps=3, order=o), theta, seeds)[-1][0]
        for o in ("chen", "explicit")
    ]
    assert np.max(np.abs(runs[0] - runs[1])) > 1e-4


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_sgnht_step_and_first_step_momentum_draw(rng, seed, temperature):
    h, a = 0.01, 0.1
    theta = _init(rng)
    seeds = _seeds(seed)
    kernel = sg.SGNHT(_estimator(), h, diffusion=a, temperature=temperature)
    r0 = kernel.bootstrap_results(tf.constant(theta))
    np.testing.assert_allclose(r0.thermostat[0].numpy(), np.full([3], a))  # α₀ = a per chain
    got = _run(kernel, theta, seeds)
    alpha = np.full([3, 1], a)
    v = None
    for step, (s, (state, results)) in enumerate(zip(seeds, got)):
        v_seed, noise_seed, _ = tfp.random.split_seed(s, n=3, salt="sgnht.one_step")
        if step == 0:  # v₀ ~ N(0, hT I), drawn at the first step only
            (z,) = normals_like([SHAPE], tf.float64, v_seed, "v0")
            v = np.sqrt(h * temperature) * z
        (xi,) = normals_like([SHAPE], tf.float64, noise_seed, "xi")
        v = v - alpha * v + h * _score(theta) + np.sqrt(2 * a * h * temperature) * xi
        theta = theta + v
        alpha = alpha + np.mean(v**2, axis=-1, keepdims=True) - h * temperature
        np.testing.assert_allclose(state, theta, rtol=RTOL)
        np.testing.assert_allclose(results.momentum[0].numpy(), v, rtol=RTOL)
        np.testing.assert_allclose(results.thermostat[0].numpy(), alpha[:, 0], rtol=RTOL)


def test_sgnht_one_thermostat_per_part(rng, seed):
    """A list state has one thermostat per part, each averaging over its own D."""
    h, a = 0.01, 0.1

    def target(parts):
        return -0.5 * tf.reduce_sum(parts[0] ** 2, -1) - 0.5 * tf.reduce_sum(parts[1] ** 2, -1)

    kernel = sg.SGNHT(sg.NoisyGradientEstimator(target), h, diffusion=a)
    state = [tf.constant(rng.standard_normal([3, 2])), tf.constant(rng.standard_normal([3, 5]))]
    r = kernel.bootstrap_results(state)
    s = _seeds(seed)[0]
    new, r = kernel.one_step(state, r, seed=s)
    for part, alpha in zip(r.momentum, r.thermostat):
        v = part.numpy()
        np.testing.assert_allclose(alpha.numpy(), a + np.mean(v**2, -1) - h, rtol=RTOL)


# --------------------------------------------------------------------------- #
# Injected noise: variance of one step from a flat target (zero score).
# --------------------------------------------------------------------------- #

NUM_NOISE_CHAINS = 20_000


def _flat(x):
    return tf.zeros(tf.shape(x)[:-1], x.dtype)


@pytest.mark.parametrize(
    "name,build,variance",
    [
        # θ' − θ = √(2εT) ξ
        ("sgld", lambda est: sg.SGLD(est, 0.03, temperature=0.5), 2 * 0.03 * 0.5),
        # zero score: V = 0, G = 1/λ; λ = 1 makes G = 1
        ("psgld", lambda est: sg.PSGLD(est, 0.03, epsilon=1.0), 2 * 0.03),
        # L = 1, Chen order: θ' = θ + v₀, v₀ ~ N(0, ηT)
        ("sghmc", lambda est: sg.SGHMC(est, 0.03, 1, temperature=2.0), 0.03 * 2.0),
        # θ' = θ + (1 − a)v₀ + √(2ahT)ξ
        ("sgnht", lambda est: sg.SGNHT(est, 0.03, diffusion=0.2),
         (1 - 0.2) ** 2 * 0.03 + 2 * 0.2 * 0.03),
    ],
)
def test_injected_noise_variance(name, build, variance, seed):
    kernel = build(sg.NoisyGradientEstimator(_flat))
    x0 = tf.zeros([NUM_NOISE_CHAINS, 2], tf.float64)
    x1, _ = kernel.one_step(x0, kernel.bootstrap_results(x0), seed=[seed, 7])
    d = x1.numpy().ravel()
    se_var = variance * np.sqrt(2.0 / d.size)  # SE of a Gaussian sample variance
    assert abs(np.mean(d**2) - variance) < 3.3 * se_var
    assert abs(np.mean(d)) < 3.3 * np.sqrt(variance / d.size)
    # Power: a variance 5% off would fail the same test.
    assert abs(np.mean(d**2) - 1.05 * variance) > 3.3 * se_var
