"""Independent chains (``MinibatchEstimator(independent_chains=True)``) on an exact Gaussian case.

Model: ``x_i ~ N(θ, 1)``, ``i = 1..N``, flat prior, so

```none
∇ log π̃(θ) = −N θ + (N/n) Σ_{i∈S} x_i = −A θ + b + ν,   A = N,  b = Σ_i x_i
```

and the gradient noise ``ν = (N/n) Σ_{i∈S} x_i − Σ_i x_i`` does not depend on
``θ``: chains sharing a batch have *identical* noise, chains with their own
batches independent noise. With i.i.d. batches (``"with_replacement"``:
``Var ν = (N²/n) s²``, ``s²`` the population variance of ``x``), SGLD
``θ' = θ + ε(−Aθ + b + ν) + √(2ε) ξ`` is the AR(1) recursion
``θ' − μ = ρ(θ − μ) + εν + √(2ε)ξ`` with ``ρ = 1 − εA``, ``μ = b/A``, whose
stationary variance is exactly

```none
v = (ε² Var ν + 2ε) / (1 − ρ²)
```

(``docs/estimators.md``). Across independent chains that is the between-chain
variance at any time; with a shared batch only the injected part
``2ε/(1 − ρ²)`` is.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

N, BATCH = 200, 10


def _gauss_ll(theta, x):
    # theta: [...] (one chain: a scalar per chain); x: [n]
    return -0.5 * tf.square(x - theta[..., tf.newaxis])


def _estimator(rng, scheme, independent):
    x = rng.standard_normal(N)
    data = sg.InMemoryData(x, scheme=scheme)
    est = sg.MinibatchEstimator(_gauss_ll, data, BATCH, independent_chains=independent)
    return est, x


def _noise_draws(est, x, num_chains, num_draws, seed):
    """``[num_draws, C]`` gradient noises at θ = 0, threading the estimator state."""
    theta = tf.zeros([num_chains], tf.float64)
    full = float(np.sum(x))  # ∇ log π(0) = Σ x_i

    @tf.function(jit_compile=True)
    def draws(seed):
        def body(carry, k):
            state, _ = carry
            g, state = est(theta, state, tf.stack([seed[0] + k, seed[1]]))
            return state, g.grads_target_log_prob[0]

        init = (est.bootstrap(theta), tf.zeros([num_chains], tf.float64))
        _, out = tf.scan(body, tf.range(num_draws), initializer=init)
        return out

    return draws(tf.constant([seed, 7], tf.int32)).numpy() - full


def _mean_cross_correlation(noise):
    """Mean off-diagonal correlation of the chains' noise series and its null SE.

    Under independence the pairwise sample correlations are uncorrelated with
    variance ≈ 1/T, so their mean over ``P`` pairs has SE ``1/√(T P)``.
    """
    t, c = noise.shape
    r = np.corrcoef(noise, rowvar=False)
    off = r[~np.eye(c, dtype=bool)]
    pairs = c * (c - 1) / 2
    return float(off.mean()), 1.0 / np.sqrt(t * pairs)


@pytest.mark.parametrize("scheme", ["with_replacement", "random_window", "epoch"])
def test_gradient_noise_is_uncorrelated_across_independent_chains(rng, seed, scheme):
    est, x = _estimator(rng, scheme, independent=True)
    noise = _noise_draws(est, x, num_chains=8, num_draws=150, seed=seed)
    m, se = _mean_cross_correlation(noise)
    assert abs(m) < 3 * se, (m, se)
    # The shared mode on the same data: the chains' noises are identical.
    shared, _ = _estimator(np.random.default_rng(seed), scheme, independent=False)
    est_shared = sg.MinibatchEstimator(_gauss_ll, shared.data, BATCH)
    noise_shared = _noise_draws(est_shared, x, num_chains=8, num_draws=150, seed=seed)
    m_shared, _ = _mean_cross_correlation(noise_shared)
    assert m_shared > 0.99 and m_shared > m + 20 * se


def test_independent_noise_has_the_scheme_variance(rng, seed):
    # Each chain's noise keeps the with-replacement law: Var ν = (N²/n) s².
    est, x = _estimator(rng, "with_replacement", independent=True)
    noise = _noise_draws(est, x, num_chains=16, num_draws=150, seed=seed)
    exact = N**2 / BATCH * np.var(x)
    got = np.mean(noise**2)  # E ν = 0 exactly
    se = got * np.sqrt(2.0 / noise.size)
    assert abs(got - exact) < 3 * se, (got, exact, se)
    assert abs(got - 1.1 * exact) > 3 * se  # power: a 10%-off variance is rejected


def _between_chain_variance(est, x, step_size, num_chains, seed):
    kernel = sg.SGLD(est, step_size=step_size)
    mu = float(np.mean(x))
    init = tf.fill([num_chains], tf.constant(mu, tf.float64))

    @tf.function(jit_compile=True)
    def run(seed):
        return tfp.mcmc.sample_chain(
            30,
            init,
            kernel=kernel,
            num_burnin_steps=50,
            num_steps_between_results=19,
            trace_fn=None,
            seed=seed,
        )

    draws = run(tf.constant([seed, 11], tf.int32)).numpy()  # [snapshots, chains]
    per_snapshot = draws.var(axis=1, ddof=1)
    # Snapshots 20 steps apart (ρ^20 ≈ 0.01) are independent; each sample variance of
    # C Gaussian chains has variance 2v²/(C − 1).
    return float(per_snapshot.mean()), float(per_snapshot.std(ddof=1) / np.sqrt(len(draws)))


def test_between_chain_variance_matches_the_discretised_stationary_law(rng, seed):
    est, x = _estimator(rng, "with_replacement", independent=True)
    eps = 1e-3
    rho = 1.0 - eps * N
    var_nu = N**2 / BATCH * np.var(x)
    exact = (eps**2 * var_nu + 2 * eps) / (1 - rho**2)
    got, se = _between_chain_variance(est, x, eps, 256, seed)
    assert abs(got - exact) < 3 * se, (got, exact, se)
    # Power: a 10%-off target fails the same check.
    assert abs(got - 1.1 * exact) > 3 * se and abs(got - 0.9 * exact) > 3 * se
    # The shared mode misses the gradient-noise part of the spread entirely.
    shared = sg.MinibatchEstimator(_gauss_ll, est.data, BATCH)
    got_shared, se_shared = _between_chain_variance(shared, x, eps, 256, seed)
    injected_only = 2 * eps / (1 - rho**2)
    assert abs(got_shared - injected_only) < 3 * se_shared
    assert abs(got_shared - exact) > 10 * se_shared


def test_control_variates_with_independent_chains(rng, seed):
    # The CV estimate is exact at the centre whatever each chain's batch.
    est, x = _estimator(rng, "random_window", independent=True)
    centre = tf.constant(float(np.mean(x)), tf.float64)
    cv = sg.ControlVariateEstimator(est, centre)
    assert cv.independent_chains
    theta = tf.fill([4], centre)
    g, _ = cv(theta, cv.bootstrap(theta), tf.constant([seed, 1], tf.int32))
    np.testing.assert_allclose(g.grads_target_log_prob[0].numpy(), 0.0, atol=1e-8)
    theta = tf.constant([0.1, 0.2, 0.3, 0.4], tf.float64)
    g, _ = cv(theta, cv.bootstrap(theta), tf.constant([seed, 1], tf.int32))
    # Away from the centre: −N(θ − μ) exactly (the likelihood's curvature is constant).
    np.testing.assert_allclose(
        g.grads_target_log_prob[0].numpy(), -N * (theta.numpy() - np.mean(x)), rtol=1e-8
    )


def test_single_chain_and_bad_input(rng):
    est, x = _estimator(rng, "epoch", independent=True)
    # One chain (no chain dimension): the shared path, same batch law.
    g, st = est(
        tf.constant(0.0, tf.float64),
        est.bootstrap(tf.constant(0.0, tf.float64)),
        tf.constant([1, 2], tf.int32),
    )
    assert g.grads_target_log_prob[0].shape == ()
    assert st.position.shape == ()
    with pytest.raises(ValueError, match="independent_chains"):
        sg.MinibatchEstimator(_gauss_ll, x, BATCH, independent_chains="yes")
    ds = sg.DatasetData(
        tf.data.Dataset.from_tensor_slices(x).repeat().batch(BATCH, drop_remainder=True), N
    )
    with pytest.raises(ValueError, match="InMemoryData"):
        sg.MinibatchEstimator(_gauss_ll, ds, BATCH, independent_chains=True)
