"""Tests of the adaptive-drift kernels (MSGLD, ASGLD and variants).

Update rules: docs/algorithms.md#adaptive-drift.

* exact stationary covariance of MSGLD on the correlated 2-D Gaussian with
  gradient noise (§14.2), from the augmented linear recursion s = (θ, m), for
  a = 0.01 and a = 1; the unlagged recursion and a 10%-off target are
  rejected by the same test (power);
* a = 0 is SGLD (pSGLD for the preconditioned variant) exactly;
* the ASGLD invariant |m/√V| ≤ C (Kim et al. App. A.2);
* hand-computed steps of every variant (including the lag over 3 steps);
* the kernels inside ``tfp.mcmc.sample_chain`` with parts, chains, both
  dtypes, minibatch/control-variate estimators, schedules and a temperature
  schedule; the hyperparameters' own range checks.

``copy``/``parameters``, XLA, seeds, shapes, step-size and temperature checks
run for every variant in the contract suite (``test_contract.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from _stats import Z, assert_rejects, assert_within, z_scores
from scipy.linalg import solve_discrete_lyapunov

import tfp_sgmcmc as sg
from tfp_sgmcmc.kernels.adaptive import (
    ASGLD,
    MSGLD,
    AdadeltaSGLD,
    AdaMaxSGLD,
    PreconditionedAdamSGLD,
    PreconditionedMomentumSGLD,
)

SIGMA = np.array([[1.0, 0.9], [0.9, 1.0]])
PREC = np.linalg.inv(SIGMA)


def gaussian_log_prob(theta: tf.Tensor) -> tf.Tensor:
    p = tf.constant(PREC, theta.dtype)
    return -0.5 * tf.einsum("...i,ij,...j->...", theta, p, theta)


# --------------------------------------------------------------------------- #
# Closed-form stationary covariance of MSGLD on the Gaussian (§14.2 recipe)
# --------------------------------------------------------------------------- #
def msgld_stationary_cov(
    a: float,
    beta1: float = 0.9,
    eps: float = 0.1,
    temp: float = 1.0,
    s: float = 1.0,
    lagged: bool = True,
) -> np.ndarray:
    """Cov(θ) of the augmented recursion s = (θ, m), solving S = F S Fᵀ + Q.

    Ascent sign: g = −Pθ + s e, e, ξ ~ N(0, I).
    lagged   (paper):  θ' = θ + ε(g + a m) + √(2εT) ξ,  m' = β1 m + (1−β1) g
    unlagged (wrong):  m' = β1 m + (1−β1) g,  θ' = θ + ε(g + a m') + √(2εT) ξ
    """
    eye, zero = np.eye(2), np.zeros((2, 2))
    p = PREC
    c = np.sqrt(2 * eps * temp)
    if lagged:
        f = np.block([[eye - eps * p, eps * a * eye], [-(1 - beta1) * p, beta1 * eye]])
        g = np.block([[eps * s * eye, c * eye], [(1 - beta1) * s * eye, zero]])
    else:
        k = eps * (1 + a * (1 - beta1))  # weight of g in θ' after substituting m'
        f = np.block([[eye - k * p, eps * a * beta1 * eye], [-(1 - beta1) * p, beta1 * eye]])
        g = np.block([[k * s * eye, c * eye], [(1 - beta1) * s * eye, zero]])
    assert np.max(np.abs(np.linalg.eigvals(f))) < 1.0
    return solve_discrete_lyapunov(f, g @ g.T)[:2, :2]


def test_closed_form_reproduces_algorithms_md():
    np.testing.assert_allclose(
        msgld_stationary_cov(0.0), [[1.12946, 0.91946], [0.91946, 1.12946]], atol=1e-5
    )
    np.testing.assert_allclose(
        msgld_stationary_cov(0.01), [[1.12374, 0.91374], [0.91374, 1.12374]], atol=1e-5
    )
    np.testing.assert_allclose(
        msgld_stationary_cov(1.0), [[0.86741, 0.65119], [0.65119, 0.86741]], atol=1e-5
    )
    np.testing.assert_allclose(
        msgld_stationary_cov(1.0, lagged=False),
        [[0.84549, 0.62782], [0.62782, 0.84549]],
        atol=1e-5,
    )


def _second_moments(kernel, num_chains, num_steps, burnin, seed):
    """Per-chain time averages of θ1², θ2², θ1θ2 (the stationary mean is 0)."""

    @tf.function(jit_compile=True)
    def run(seed):
        init = tf.zeros([num_chains, 2], tf.float64)
        return tfp.mcmc.sample_chain(
            num_steps, init, kernel=kernel, num_burnin_steps=burnin, trace_fn=None, seed=seed
        )

    x = run(seed).numpy()  # [steps, chains, 2]
    stats = np.stack([x[..., 0] ** 2, x[..., 1] ** 2, x[..., 0] * x[..., 1]], -1).mean(0)
    return stats  # [chains, 3]; chains are independent, so the MCSE is sd/√chains


def _z_scores(stats: np.ndarray, cov: np.ndarray) -> np.ndarray:
    return z_scores(stats, np.array([cov[0, 0], cov[1, 1], cov[0, 1]]))


@pytest.mark.statistical
@pytest.mark.parametrize("a", [0.01, 1.0])
def test_msgld_stationary_covariance_exact(a, seed):
    est = sg.NoisyGradientEstimator(gaussian_log_prob, noise_scale=1.0)
    kernel = MSGLD(est, step_size=0.1, a=a, beta1=0.9)
    stats = _second_moments(kernel, 1000, 3000, 300, tf.constant([seed, 5]))
    exact = msgld_stationary_cov(a)
    assert_within(_z_scores(stats, exact), Z, f"a={a}")
    # Power: a 10%-off target fails the same test.
    assert_rejects(_z_scores(stats, 1.1 * exact))
    if a == 1.0:
        # Index convention: the unlagged recursion's covariance is rejected.
        assert_rejects(_z_scores(stats, msgld_stationary_cov(a, lagged=False)), Z, "unlagged")


# --------------------------------------------------------------------------- #
# Reductions to SGLD / pSGLD
# --------------------------------------------------------------------------- #
REDUCTIONS = {
    "msgld": (lambda e: MSGLD(e, 0.1, a=0.0), lambda e: sg.SGLD(e, 0.1)),
    "asgld": (lambda e: ASGLD(e, 0.1, a=0.0), lambda e: sg.SGLD(e, 0.1)),
    "adamax": (lambda e: AdaMaxSGLD(e, 0.1, a=0.0), lambda e: sg.SGLD(e, 0.1)),
    "adadelta": (lambda e: AdadeltaSGLD(e, 0.1, a=0.0), lambda e: sg.SGLD(e, 0.1)),
    "psgld_momentum": (
        lambda e: PreconditionedMomentumSGLD(e, 0.1, a=0.0),
        lambda e: sg.PSGLD(e, 0.1),
    ),
    "psgld_adam": (lambda e: PreconditionedAdamSGLD(e, 0.1, a=0.0), lambda e: sg.PSGLD(e, 0.1)),
}


def _eager_chain(kernel, init, n, seed):
    """The chain of ``n`` steps, eagerly (no compilation: these tests are short)."""
    x, r = init, kernel.bootstrap_results(init)
    seeds = tfp.random.split_seed(seed, n)
    out = []
    for i in range(n):
        x, r = kernel.one_step(x, r, seed=seeds[i])
        out.append(x.numpy())
    return np.stack(out)


def test_zero_bias_factor_is_the_base_sampler(seed):
    """a = 0: same seed ⇒ the same chain as SGLD (pSGLD for the preconditioned ones)."""
    est = sg.NoisyGradientEstimator(gaussian_log_prob, noise_scale=1.0)
    init = tf.constant(np.random.default_rng(seed).normal(size=(8, 2)), tf.float64)
    s = tf.constant([seed, 11])
    for k, (make, base) in REDUCTIONS.items():
        x = _eager_chain(make(est), init, 15, s)
        y = _eager_chain(base(est), init, 15, s)
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-12, err_msg=k)
    # Power: a non-zero bias factor does change the chain.
    x = _eager_chain(MSGLD(est, 0.1, a=0.5), init, 5, s)
    y = _eager_chain(sg.SGLD(est, 0.1), init, 5, s)
    assert np.abs(x - y).max() > 1e-3


# --------------------------------------------------------------------------- #
# ASGLD invariant |m/√V| ≤ C
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("beta1, beta2", [(0.9, 0.999), (0.5, 0.3)])
def test_asgld_moment_ratio_invariant(beta1, beta2, seed):
    est = sg.NoisyGradientEstimator(gaussian_log_prob, noise_scale=1.0)
    kernel = ASGLD(est, 0.1, a=0.1, beta1=beta1, beta2=beta2)

    @tf.function  # graph mode: short chain, compiling with XLA would cost more than it saves
    def run(seed):
        return tfp.mcmc.sample_chain(
            500,
            tf.fill([16, 2], tf.constant(3.0, tf.float64)),
            kernel=kernel,
            trace_fn=lambda _, r: r.transform_state[0],
            seed=seed,
        )

    _, (m, v) = run(tf.constant([seed, 3]))
    ratio = np.abs(m.numpy()) / np.sqrt(v.numpy())
    c = np.sqrt((1 - beta1) ** 2 / ((1 - beta2) * (1 - beta1**2 / beta2)))
    # Step 1 (traced index 0): m_1/√V_1 = (1−β1)/√(1−β2) · sign(g_0): no bias correction.
    np.testing.assert_allclose(ratio[0], (1 - beta1) / np.sqrt(1 - beta2), rtol=1e-12)
    assert np.all(ratio <= c * (1 + 1e-12)), (ratio.max(), c)


# --------------------------------------------------------------------------- #
# Hand-computed steps
# --------------------------------------------------------------------------- #
def _np_bias_step(kind, g, acc, hp):
    """(A_t, next accumulators) for one part, in NumPy, straight from the docstrings."""
    if kind == "momentum":
        (m,) = acc
        return m, (hp["beta1"] * m + (1 - hp["beta1"]) * g,)
    if kind in ("adam", "adam_inside"):
        m, v = acc
        d = np.sqrt(v) + hp["eps"] if kind == "adam" else np.sqrt(v + hp["eps"])
        a_t = m / d
        return a_t, (
            hp["beta1"] * m + (1 - hp["beta1"]) * g,
            hp["beta2"] * v + (1 - hp["beta2"]) * g**2,
        )
    if kind == "adamax":
        m, u = acc
        a_t = m / (u + hp["eps"])
        return a_t, (
            hp["beta1"] * m + (1 - hp["beta1"]) * g,
            np.maximum(hp["beta2"] * u, np.abs(g)),
        )
    if kind == "adadelta":
        m, eg, ed = acc
        a_t = np.sqrt(ed + hp["eps"]) / np.sqrt(eg + hp["eps"]) * m
        r = hp["rho"]
        return a_t, (
            hp["beta1"] * m + (1 - hp["beta1"]) * g,
            r * eg + (1 - r) * g**2,
            r * ed + (1 - r) * a_t**2,
        )
    raise AssertionError(kind)


HP = dict(a=2.5, beta1=0.7, beta2=0.9, eps=1e-3, rho=0.8, decay=0.6, peps=1e-2)


def _maker(cls, **hyper):
    """``(estimator, temperature) -> kernel`` with step size 0.05 and ``hyper``."""
    return lambda e, t: cls(e, 0.05, temperature=t, **hyper)


_BIAS = dict(a=HP["a"], beta1=HP["beta1"])  # every variant's bias factor and momentum
_ADAM = dict(_BIAS, beta2=HP["beta2"], epsilon=HP["eps"])
#: name -> (reference recursion, preconditioned?, kernel factory)
VARIANTS = {
    "msgld": ("momentum", False, _maker(MSGLD, **_BIAS)),
    "asgld": ("adam", False, _maker(ASGLD, **_ADAM)),
    "asgld_inside": ("adam_inside", False, _maker(ASGLD, **_ADAM, lambda_placement="inside")),
    "adamax": ("adamax", False, _maker(AdaMaxSGLD, **_ADAM)),
    "adadelta": (
        "adadelta", False, _maker(AdadeltaSGLD, **_BIAS, rho=HP["rho"], epsilon=HP["eps"])
    ),
    "psgld_momentum": (
        "momentum",
        True,
        _maker(PreconditionedMomentumSGLD, **_BIAS, decay=HP["decay"], epsilon=HP["peps"]),
    ),
    "psgld_adam": (
        "adam",
        True,
        _maker(PreconditionedAdamSGLD, **_ADAM, decay=HP["decay"], precond_epsilon=HP["peps"]),
    ),
}


def _quartic_log_prob(theta):
    # Non-quadratic so that the gradient is not linear in θ.
    return -0.25 * tf.reduce_sum(theta**4, -1) - 0.5 * tf.reduce_sum(theta**2, -1) + theta[..., 0]


def _np_grad(theta):
    g = -(theta**3) - theta
    g[..., 0] += 1.0
    return g


@pytest.mark.parametrize("name", list(VARIANTS))
def test_hand_computed_steps(name):
    """Three deterministic steps (T = 0, exact gradient) against NumPy: pins the lag."""
    kind, precond, make = VARIANTS[name]
    est = sg.NoisyGradientEstimator(_quartic_log_prob, noise_scale=0.0)
    kernel = make(est, 0.0)
    theta = np.array([[0.7, -1.3], [2.0, 0.1]])
    x = tf.constant(theta)
    res = kernel.bootstrap_results(x)
    nparts = len(kernel._transform().init([x]) if not precond else kernel._transform().init([x])[0])
    assert nparts == 1
    acc = tuple(
        np.zeros_like(theta)
        for _ in range({"momentum": 1, "adamax": 2, "adadelta": 3}.get(kind, 2))
    )
    v = np.zeros_like(theta)
    eps = 0.05
    for t in range(3):
        x, res = kernel.one_step(x, res, seed=tf.constant([t, 1]))
        g = _np_grad(theta)
        a_t, acc = _np_bias_step(kind, g, acc, HP)
        if t == 0:
            np.testing.assert_array_equal(a_t, 0.0)  # step 0 is plain SGLD/pSGLD
        drift = g + HP["a"] * a_t
        if precond:
            v = HP["decay"] * v + (1 - HP["decay"]) * g**2
            drift = drift / (HP["peps"] + np.sqrt(v))
        theta = theta + eps * drift
        np.testing.assert_allclose(x.numpy(), theta, rtol=1e-12, atol=1e-14)
    bias_state = res.transform_state[0] if precond else res.transform_state
    for got, want in zip(bias_state[0], acc):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)


def test_msgld_step_with_noise_matches_sgld_plus_bias():
    """T = 1: same seed ⇒ same noise and score, so θ'_MSGLD − θ'_SGLD = ε a m_t."""
    est = sg.NoisyGradientEstimator(gaussian_log_prob, noise_scale=1.0)
    x0 = tf.constant([[0.3, -0.2]], tf.float64)
    ms, sgld = MSGLD(est, 0.1, a=3.0, beta1=0.5), sg.SGLD(est, 0.1)
    r_ms, r_sg = ms.bootstrap_results(x0), sgld.bootstrap_results(x0)
    m = np.array([[0.4, -1.1]])
    r_ms = r_ms._replace(transform_state=[(tf.constant(m),)])
    s = tf.constant([4, 2])
    y_ms, new = ms.one_step(x0, r_ms, seed=s)
    y_sg, _ = sgld.one_step(x0, r_sg, seed=s)
    np.testing.assert_allclose(y_ms.numpy() - y_sg.numpy(), 0.1 * 3.0 * m, atol=1e-14)
    g = r_sg.grads_target_log_prob[0].numpy()
    np.testing.assert_allclose(new.transform_state[0][0].numpy(), 0.5 * m + 0.5 * g, atol=1e-14)


# --------------------------------------------------------------------------- #
# Integration: sample_chain, XLA, parts, chains, dtypes, estimators, schedules
# --------------------------------------------------------------------------- #
def _logreg_estimator(dtype, rng):
    n, d = 500, 3
    x = rng.normal(size=(n, d)).astype(dtype.as_numpy_dtype)
    y = (rng.random(n) < 1 / (1 + np.exp(-(x @ [1.0, -2.0, 0.5] + 0.3)))).astype(x.dtype)

    def loglik(state, batch):
        w, b = state
        logits = tf.einsum("nd,...d->...n", batch[0], w) + b[..., None]
        labels = tf.broadcast_to(batch[1], tf.shape(logits))
        return -tf.nn.sigmoid_cross_entropy_with_logits(labels, logits)

    def prior(state):
        w, b = state
        return -0.5 * tf.reduce_sum(w**2, -1) - 0.5 * b**2

    return sg.MinibatchEstimator(loglik, (x, y), batch_size=50, log_prior_fn=prior)


ALL_KERNELS = {
    "msgld": lambda e, s, t: MSGLD(e, s, a=1.0, beta1=0.9, temperature=t),
    "asgld": lambda e, s, t: ASGLD(e, s, a=1.0, temperature=t),
    "adamax": lambda e, s, t: AdaMaxSGLD(e, s, temperature=t),
    "adadelta": lambda e, s, t: AdadeltaSGLD(e, s, temperature=t),
    "psgld_momentum": lambda e, s, t: PreconditionedMomentumSGLD(e, s, temperature=t),
    "psgld_adam": lambda e, s, t: PreconditionedAdamSGLD(e, s, temperature=t),
}


# (kernel, dtype, estimator, XLA): every variant runs in sample_chain with schedules;
# one under XLA here (the contract suite compiles MSGLD, pSGLD-Adam and the others).
INTEGRATION = [
    ("msgld", tf.float32, "cv", False),
    ("asgld", tf.float64, "minibatch", True),
    ("psgld_adam", tf.float32, "cv", False),
    ("adamax", tf.float64, "cv", False),
    ("adadelta", tf.float32, "minibatch", False),
    ("psgld_momentum", tf.float64, "minibatch", False),
]


@pytest.mark.parametrize(
    "name, dtype, est_name, jit",
    INTEGRATION,
    ids=[f"{c[0]}-{c[1].name}-{c[2]}" for c in INTEGRATION],
)
def test_sample_chain_parts_chains_schedules(name, dtype, est_name, jit, rng):
    """Parts, 4 chains, a step-size schedule, an annealed temperature schedule."""
    est = _logreg_estimator(dtype, rng)
    if est_name == "cv":
        est = sg.ControlVariateEstimator(est, [tf.zeros([3], dtype), tf.zeros([], dtype)])
    step = sg.PolynomialDecay(0.1 if name.startswith("psgld") else 1e-3, b=10.0, gamma=0.55)
    temp = sg.PolynomialDecay(1.0, b=1.0, gamma=0.1)  # an annealing temperature schedule
    kernel = ALL_KERNELS[name](est, step, temp)
    init = [tf.zeros([4, 3], dtype), tf.zeros([4], dtype)]

    @tf.function(jit_compile=jit)
    def run(seed):
        return tfp.mcmc.sample_chain(
            300, init, kernel=kernel, trace_fn=lambda _, r: (r.diverged, r.step_size), seed=seed
        )

    (w, b), (div, eps) = run(tf.constant([1, 2]))
    assert w.dtype == dtype and w.shape == (300, 4, 3) and b.shape == (300, 4)
    assert not div.numpy().any()
    assert np.all(np.isfinite(w.numpy()))
    assert eps.numpy()[0] > eps.numpy()[-1]  # the schedule is applied
    # The chains move towards the truth (w1 > 0 > w2): the sampler does real work.
    mean_w = w.numpy()[150:].mean((0, 1))
    assert mean_w[0] > 0.3 and mean_w[1] < -0.6, mean_w


def test_copy_rebuilds_the_transform():
    """``copy`` re-runs the constructor, so the drift transform sees the new values
    (the generic ``copy``/``parameters`` contract is in ``test_contract.py``)."""
    est = sg.NoisyGradientEstimator(gaussian_log_prob, 1.0)
    k = ASGLD(est, 0.1, a=0.1, beta1=0.8, beta2=0.99, epsilon=1e-6, lambda_placement="inside")
    k2 = k.copy(a=5.0, beta1=0.5)
    assert type(k2) is ASGLD and k2.parameters["a"] == 5.0
    assert k2._transform().parameters["a"] == 5.0 and k2._transform().parameters["beta1"] == 0.5
    assert k2._transform().parameters["lambda_placement"] == "inside"
    assert MSGLD is MSGLD and ASGLD is ASGLD


def test_tensor_hyperparameters_as_mamba_arms():
    """a and β1 may be tensors/variables (not validated statically, used as given)."""
    est = sg.NoisyGradientEstimator(gaussian_log_prob, 0.0)
    a = tf.Variable(2.0, dtype=tf.float64)
    k = MSGLD(est, 0.1, a=a, beta1=tf.constant(0.5, tf.float64), temperature=0.0)
    x = tf.constant([[1.0, 0.0]], tf.float64)
    r = k.bootstrap_results(x)
    x1, r = k.one_step(x, r, seed=[1, 1])
    x2, _ = k.one_step(x1, r, seed=[1, 2])
    g0 = -PREC @ np.array([1.0, 0.0])
    th1 = np.array([1.0, 0.0]) + 0.1 * g0
    g1 = -PREC @ th1
    np.testing.assert_allclose(x2.numpy()[0], th1 + 0.1 * (g1 + 2.0 * 0.5 * g0), rtol=1e-12)


@pytest.mark.parametrize(
    "make, arg",
    [
        (lambda e: MSGLD(e, 0.1, a=-1.0), "`a`"),
        (lambda e: MSGLD(e, 0.1, beta1=1.0), "`beta1`"),
        (lambda e: MSGLD(e, 0.1, beta1=-0.1), "`beta1`"),
        (lambda e: ASGLD(e, 0.1, beta2=1.0), "`beta2`"),
        (lambda e: ASGLD(e, 0.1, beta1=0.9, beta2=0.8), "`beta1`**2"),
        (lambda e: ASGLD(e, 0.1, epsilon=0.0), "`epsilon`"),
        (lambda e: ASGLD(e, 0.1, lambda_placement="middle"), "`lambda_placement`"),
        (lambda e: AdaMaxSGLD(e, 0.1, beta1=0.9, beta2=0.9), "`beta1`"),
        (lambda e: AdadeltaSGLD(e, 0.1, rho=1.5), "`rho`"),
        (lambda e: PreconditionedMomentumSGLD(e, 0.1, decay=1.0), "`decay`"),
        (lambda e: PreconditionedAdamSGLD(e, 0.1, precond_epsilon=-1.0), "`precond_epsilon`"),
    ],
)
def test_bad_input_raises_naming_argument(make, arg):
    est = sg.NoisyGradientEstimator(gaussian_log_prob, 1.0)
    with pytest.raises(ValueError, match=arg.replace("*", r"\*")):
        make(est)


def test_divergence_is_flagged_not_hidden():
    """A step far beyond stability makes the state non-finite: `diverged` reports it."""
    est = sg.NoisyGradientEstimator(lambda t: -0.5 * 1e6 * tf.reduce_sum(t**2, -1), 0.0)
    k = MSGLD(est, 1.0, a=10.0, temperature=0.0)
    x = tf.ones([2, 2], tf.float32)
    r = k.bootstrap_results(x)
    assert not r.diverged.numpy().any()
    for i in range(30):
        x, r = k.one_step(x, r, seed=[1, i])
    assert r.diverged.numpy().all()
