"""The PMF Gibbs sampler draws every block from the model's exact full conditional.

A full conditional is exact iff ``log π(θ) − log q(block)`` does not depend on
the block (``π`` the model's own log-density, ``q`` the Gibbs law), so each test
evaluates that difference at random values of one block and requires it to be
constant to rounding; a slightly wrong conditional (power checks) moves it by
orders of magnitude more. The Gaussian draw itself is checked against its
exact mean and covariance with a Monte Carlo tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st
import tensorflow as tf

from tfp_sgmcmc.models import pmf as pm
from tfp_sgmcmc.models.data_files import RatingsData
from tfp_sgmcmc.models.pmf_gibbs import (
    PMFGibbs,
    _draw_rows,
    normal_gamma_posterior,
    row_conditionals,
)

D = 3


def _problem(num_users: int = 7, num_items: int = 6, num_ratings: int = 30) -> pm.PMF:
    rng = np.random.default_rng(3)
    users = np.concatenate([np.arange(num_users), rng.integers(0, num_users, num_ratings)])
    items = np.concatenate([rng.integers(0, num_items, num_users), rng.integers(0, num_items,
                                                                              num_ratings)])
    ratings = rng.integers(1, 6, users.shape[0]).astype(np.float32)
    data = RatingsData(
        users=users.astype(np.int32), items=items.astype(np.int32), ratings=ratings,
        num_users=num_users, num_items=num_items,
        user_ids=np.arange(num_users), item_ids=np.arange(num_items), source="test",
    )
    return pm.pmf(ratings=data, latent_dim=D, train_fraction=0.9, dtype=np.float64)


def _log_density(prob: pm.PMF, theta: list[np.ndarray]) -> float:
    """The model's constrained log-density (likelihood over the training ratings + prior)."""
    t = [tf.constant(p, tf.float64) for p in theta]
    batch = tuple(tf.constant(a) for a in prob.arrays("train"))
    return float(tf.reduce_sum(pm.log_likelihood(t, batch)) + pm.log_prior_constrained(*t))


def _state(prob: pm.PMF, rng: np.random.Generator) -> list[np.ndarray]:
    return [
        rng.normal(size=(prob.num_users, D)), rng.normal(size=(prob.num_items, D)),
        rng.normal(size=D), rng.gamma(3.0, 1.0, D), rng.normal(size=D), rng.gamma(3.0, 1.0, D),
    ]


def _spread(values: list[float]) -> float:
    return float(np.ptp(values))


@pytest.fixture(scope="module")
def setup():
    prob = _problem()
    return prob, PMFGibbs(prob), _state(prob, np.random.default_rng(0))


def _row_spread(prob, gibbs, theta, side: int, alpha: float = pm.ALPHA) -> float:
    """Spread of log π − log q over random values of one row (user 2 or item 1)."""
    rng = np.random.default_rng(1)
    if side == 0:
        a, r, other, mu, lam, row = gibbs._a_users, gibbs._r_users, theta[1], theta[2], theta[3], 2
    else:
        a, r, other, mu, lam, row = gibbs._a_items, gibbs._r_items, theta[0], theta[4], theta[5], 1
    prec, lin = row_conditionals(a, r, other, mu, lam, alpha=alpha)
    cov = np.linalg.inv(prec[row])
    mean = cov @ lin[row]
    diffs = []
    for _ in range(6):
        x = rng.normal(size=D) * 2.0
        th = [p.copy() for p in theta]
        th[side][row] = x
        diffs.append(_log_density(prob, th) - st.multivariate_normal(mean, cov).logpdf(x))
    return _spread(diffs)


@pytest.mark.parametrize("side", [0, 1], ids=["user_rows", "item_rows"])
def test_row_conditional_is_exact(setup, side):
    prob, gibbs, theta = setup
    assert _row_spread(prob, gibbs, theta, side) < 1e-8
    # Power: a 5% wrong likelihood precision is visible.
    assert _row_spread(prob, gibbs, theta, side, alpha=0.95 * pm.ALPHA) > 1e-3


def _hyper_spread(prob, theta, a0: float = pm.A0) -> float:
    rng = np.random.default_rng(2)
    mu_n, beta_n, a_n, b_n = normal_gamma_posterior(theta[0], a0=a0)
    diffs = []
    for _ in range(6):
        mu, lam = rng.normal(size=D), rng.gamma(2.0, 1.0, D)
        th = [p.copy() for p in theta]
        th[2], th[3] = mu, lam
        log_q = st.gamma(a_n, scale=1.0 / b_n).logpdf(lam) + st.norm(
            mu_n, 1.0 / np.sqrt(beta_n * lam)
        ).logpdf(mu)
        diffs.append(_log_density(prob, th) - float(np.sum(log_q)))
    return _spread(diffs)


def test_hyperparameter_conditional_is_exact(setup):
    prob, _, theta = setup
    assert _hyper_spread(prob, theta) < 1e-8
    assert _hyper_spread(prob, theta, a0=pm.A0 + 0.5) > 1e-3  # power


def test_row_draws_have_the_exact_mean_and_covariance():
    rng = np.random.default_rng(5)
    m = rng.normal(size=(D, D))
    prec = m @ m.T + D * np.eye(D)
    lin = rng.normal(size=D)
    reps = 40_000
    x = _draw_rows(np.broadcast_to(prec, (reps, D, D)), np.broadcast_to(lin, (reps, D)), rng)
    cov = np.linalg.inv(prec)
    mean = cov @ lin
    se_mean = np.sqrt(np.diag(cov) / reps)
    assert np.all(np.abs(x.mean(0) - mean) < 4.5 * se_mean)
    # sd of a sample covariance entry: sqrt((Σ_ij² + Σ_ii Σ_jj) / reps)
    se_cov = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / reps)
    emp = np.cov(x, rowvar=False)
    assert np.all(np.abs(emp - cov) < 4.5 * se_cov)
    assert not np.all(np.abs(emp - 1.1 * cov) < 4.5 * se_cov)  # power: 10% too wide fails


def test_sample_shapes_parametrisation_and_bad_input(setup):
    prob, gibbs, theta = setup
    draws = gibbs.sample(theta, num_sweeps=6, seed=0, thin=2)
    assert [d.shape for d in draws] == [
        (3, prob.num_users, D), (3, prob.num_items, D), (3, D), (3, D), (3, D), (3, D)
    ]
    again = gibbs.sample(theta, num_sweeps=6, seed=0, thin=2)
    assert all(np.array_equal(a, b) for a, b in zip(draws, again))  # seeded
    assert np.all(np.isfinite(draws[3]))  # log λ: any real number
    with pytest.raises(ValueError, match="num_sweeps"):
        gibbs.sample(theta, num_sweeps=0, seed=0)
    with pytest.raises(ValueError, match="part shapes"):
        gibbs.sample(theta[:5], num_sweeps=1, seed=0)
    bad = [p.copy() for p in theta]
    bad[3][0] = -1.0
    with pytest.raises(ValueError, match="positive"):
        gibbs.sample(bad, num_sweeps=1, seed=0)
    with pytest.raises(ValueError, match="PMF problem"):
        PMFGibbs("not a problem")


def test_thin_above_num_sweeps_is_refused_before_sweeping(setup):
    _, gibbs, theta = setup
    done = []
    with pytest.raises(ValueError, match="`thin`"):
        gibbs.sample(theta, num_sweeps=3, seed=0, thin=5, callback=done.append)
    assert done == []
    assert gibbs.sample(theta, num_sweeps=3, seed=0, thin=3)[0].shape[0] == 1


def test_the_chain_moves(setup):
    """A sampler whose draws stay constant fails (every part changes between sweeps)."""
    _, gibbs, theta = setup
    draws = gibbs.sample(theta, num_sweeps=3, seed=1)
    for part in draws:
        assert np.all(np.abs(np.diff(part, axis=0)).reshape(2, -1).max(axis=1) > 0)
