"""``sg.sample_posterior`` against exact posteriors, real posteriors, and its own errors.

The exact test is a conjugate Normal-inverse-gamma regression whose posterior
marginals are known in closed form (Student-t coefficients, an inverse-gamma
variance), with N = 10⁵ uncentred, correlated predictors on scales from 10⁻² to
10³: the case that broke step sizes chosen without the posterior's scale.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from scipy import stats

import tfp_sgmcmc as sg

tfd = tfp.distributions

SCALES = np.array([1.0, 1e-2, 1e-1, 1e1, 1e3])


def nig_regression(dtype: str, n: int = 100_000, seed: int = 0):
    """The posterior and its exact marginal means and sds (Bishop 2006, Sec. 3.3; the
    normal-inverse-gamma conjugate prior)."""
    rng = np.random.default_rng(seed)
    d = SCALES.size
    corr = np.linalg.cholesky(0.6 * np.ones((d, d)) + 0.4 * np.eye(d))
    x = (rng.standard_normal((n, d)) @ corr.T) * SCALES + 3.0 * SCALES  # uncentred
    x[:, 0] = 1.0
    y = x @ np.array([2.0, 50.0, -3.0, 0.2, 0.001]) + 1.5 * rng.standard_normal(n)
    a0, b0 = 3.0, 2.0
    tau = 10.0 / SCALES  # beta_j | sigma2 ~ N(0, sigma2 tau_j^2)
    lam = x.T @ x + np.diag(tau**-2)
    mu = np.linalg.solve(lam, x.T @ y)
    a_n, b_n = a0 + n / 2, b0 + 0.5 * (y @ y - mu @ lam @ mu)
    nu = 2 * a_n
    sd_beta = np.sqrt(b_n / a_n * np.diag(np.linalg.inv(lam)) * nu / (nu - 2))
    ig = stats.invgamma(a_n, scale=b_n)
    truth = {"beta": (mu, sd_beta), "sigma2": (ig.mean(), ig.std())}
    dt = np.dtype(dtype)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            sigma2=tfd.InverseGamma(dt.type(a0), dt.type(b0)),
            beta=lambda sigma2: tfd.MultivariateNormalDiag(
                tf.zeros(d, dt), tf.sqrt(sigma2)[..., None] * tau.astype(dt)
            ),
        )
    )

    def likelihood(p, batch):
        features, _ = batch
        mean = tf.einsum("nd,...d->...n", features, p["beta"])
        return tfd.Normal(mean, tf.sqrt(p["sigma2"])[..., None])

    post = sg.JointPosterior(
        prior, likelihood, (x.astype(dt), y.astype(dt)), batch_size=min(n, 1000)
    )
    return post, truth


def errors(draws: dict[str, np.ndarray], truth) -> tuple[float, float]:
    """Worst |mean error| in posterior sds and worst |sd ratio - 1|."""
    worst_mean = worst_sd = 0.0
    for name, (mean, sd) in truth.items():
        x = np.asarray(draws[name], np.float64)
        x = x.reshape((-1,) + x.shape[2:])
        ok = np.isfinite(x).all()
        m_err = np.max(np.abs((x.mean(0) - mean) / sd)) if ok else np.inf
        s_err = np.max(np.abs(x.std(0) / sd - 1)) if ok else np.inf
        worst_mean, worst_sd = max(worst_mean, m_err), max(worst_sd, s_err)
    return worst_mean, worst_sd


# The exact checks run in the slow tier (tens of seconds each); in CI, the sklearn
# real-posterior tests check sample_posterior end to end against NUTS references.
@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_exact_conjugate_regression(dtype):
    post, truth = nig_regression(dtype)
    res = sg.sample_posterior(post, num_results=1000, num_chains=4, seed=3, progress=False)
    mean_err, sd_err = errors(res.draws, truth)
    # 4 chains x 1,000 draws thinned near one autocorrelation time: the mean's Monte
    # Carlo error is about 0.03 sd, so 0.1 sd is three standard errors.
    assert mean_err < 0.1, (mean_err, res)
    assert sd_err < 0.1, (sd_err, res)
    assert res.verdict == "ok", res.reasons
    # At least num_results draws: more when R-hat or the ESS asked for them.
    t = res.draws["sigma2"].shape[0]
    assert t >= 1000 and res.draws["beta"].shape == (t, 4, 5)
    assert res.draws["sigma2"].shape == (t, 4) and res.whitened.shape[0] == t
    assert set(res.timings) >= {
        "map",
        "curvature",
        "tuning_sampling",
        "tuning_metric",
        "sampling",
        "verdict",
        "total",
    }


@pytest.mark.statistical
def test_the_old_recipe_fails_the_same_test():
    """Power check: SGLD from the MAP with a step size from the old fixed grid."""
    post, truth = nig_regression("float64")
    init = post.initial_state(4, method="map")

    @tf.function(jit_compile=True)
    def run(eps):
        kernel = sg.SGLD(post.estimator, step_size=eps)
        return sg.sample_chain(
            200, init, kernel=kernel, num_steps_between_results=4, seed=tf.constant([0, 1])
        )

    for eps in (1e-3, 1e-4, 1e-5):
        z = run(tf.constant(eps, tf.float64))
        draws = post.constrain(z)
        mean_err, sd_err = errors({k: v.numpy() for k, v in draws.items()}, truth)
        assert not (mean_err < 0.1 and sd_err < 0.1), eps


@pytest.mark.statistical
def test_plain_estimator_with_an_initial_state():
    """The estimator path: a correlated Gaussian on scales 10⁻³ and 10³, full batches."""
    cov = np.array([[1e-6, 0.9e-3 * 0.5], [0.9e-3 * 0.5, 0.25e6 * 1e-6 * 1e6]])
    cov[1, 1] = 1e6
    cov[0, 1] = cov[1, 0] = 0.9 * np.sqrt(cov[0, 0] * cov[1, 1])
    mean = np.array([5.0, -3e3])
    prec = tf.constant(np.linalg.inv(cov))

    def log_prior(theta):
        r = theta - mean
        return -0.5 * tf.einsum("...i,ij,...j->...", r, prec, r)

    def log_lik(theta, batch):
        return tf.zeros(tf.concat([tf.shape(theta)[:-1], [tf.shape(batch)[0]]], 0), tf.float64)

    est = sg.MinibatchEstimator(log_lik, np.zeros([10, 1]), 10, log_prior_fn=log_prior)
    res = sg.sample_posterior(
        est, num_results=500, initial_state=tf.zeros(2, tf.float64), seed=1, progress=False
    )
    x = res.draws["part_0"].reshape(-1, 2)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(x.mean(0) - mean) / sd < 0.15)
    assert np.all(np.abs(x.std(0) / sd - 1) < 0.12)
    assert abs(np.corrcoef(x.T)[0, 1] - 0.9) < 0.05
    assert res.verdict == "ok"
    assert "full batches" in " ".join(res.notes)


def test_bad_arguments_are_named():
    post, _ = nig_regression("float64", n=200)
    with pytest.raises(ValueError, match="`num_chains`"):
        sg.sample_posterior(post, num_chains=1)
    with pytest.raises(ValueError, match="`step_sizes`"):
        sg.sample_posterior(post, step_sizes=[0.1, 3.0])
    with pytest.raises(ValueError, match="`seed`"):
        sg.sample_posterior(post, seed=-1)
    with pytest.raises(ValueError, match="`posterior`"):
        sg.sample_posterior(object())
    with pytest.raises(ValueError, match="`initial_state` is required"):
        sg.sample_posterior(post.estimator)
