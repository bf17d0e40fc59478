"""Preconditioned (whitened) KSD and FSSD: scale-free ranking, invariance, bad input.

The targets are Gaussians ``N(μ, σ²Σ₀)`` with a correlated ``Σ₀``, exact scores
``−Σ⁻¹(x − μ)``, and fixed NumPy seeds (the rankings hold by wide margins for these
draws; the unit-metric power check is a statement about typical draws, checked over
replicates).
"""

from __future__ import annotations

import functools
import pathlib
import re
import warnings

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc.diagnostics import fssd, kernel_stein_discrepancy
from tfp_sgmcmc.diagnostics.ksd import BlockedKSD
from tfp_sgmcmc.diagnostics.metric import SAMPLE_DENSE_MAX_DIM, check_preconditioner, whiten

D = 3
SIGMAS = [1e-3, 1e-2, 1.0, 1e2, 1e3]


def _sigma0(d: int = D, seed: int = 11) -> np.ndarray:
    """A fixed correlated covariance with eigenvalues in a moderate range."""
    a = np.random.default_rng(seed).normal(size=(d, d))
    return a @ a.T / d + 0.5 * np.eye(d)


def _target(sigma: float, where: str, d: int = D):
    cov = sigma**2 * _sigma0(d)
    mu = np.full(d, 1e3 * sigma if where == "far" else 50.0)
    prec = np.linalg.inv(cov)
    return mu, cov, lambda x: -(x - mu) @ prec


def _candidates(mu, cov, sigma, n, seed):
    """Exact draws and the three wrong samples every discrepancy must rank behind them."""
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal(np.zeros(len(mu)), cov, size=n)
    return {
        "exact": mu + z,
        "frozen": mu + 1e-6 * sigma * rng.normal(size=(n, len(mu))),
        "over": mu + 2.0 * z,
        "under": mu + 0.3 * z,
    }


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(fn(*args, **kw))


def _ksd_ref_preconditioned(x, s, cov, c=1.0, beta=-0.5):
    """Brute-force V-statistic from the Stein kernel written in the original coordinates,
    ``k = sₓᵀΣs_y B^β − 2βB^{β−1}(sₓ − s_y)ᵀr − 2dβB^{β−1} − 4β(β−1) rᵀΣ⁻¹r B^{β−2}``,
    ``B = c² + rᵀΣ⁻¹r`` (no whitening involved)."""
    n, d = x.shape
    prec = np.linalg.inv(cov)
    total = 0.0
    for i in range(n):
        r = x[i] - x
        q = np.einsum("nd,de,ne->n", r, prec, r)
        base = c * c + q
        k = (
            (s @ cov @ s[i]) * base**beta
            - 2 * beta * base ** (beta - 1) * np.sum((s[i] - s) * r, -1)
            - 2 * d * beta * base ** (beta - 1)
            - 4 * beta * (beta - 1) * q * base ** (beta - 2)
        )
        total += k.sum()
    return np.sqrt(total) / n


# ---------------------------------------------------------------- the transformation


def test_whitened_target_is_standard_normal():
    # ∇_w log π_w(w) = Lᵀ∇_x log π(x): whitening N(μ, Σ) by Σ gives N(L⁻¹(μ − x̄), I).
    mu, cov, score = _target(1e-2, "abs")
    x = _candidates(mu, cov, 1e-2, 200, seed=1)["exact"]
    w, s_w = (t.numpy() for t in whiten(x, score(x), cov))
    chol = np.linalg.cholesky(cov)
    w_mu = np.linalg.solve(chol, mu - x.mean(0))
    # w is O(1); x − x̄ at |x| = 50 carries absolute rounding of order 1e-14/σ.
    np.testing.assert_allclose(w, np.linalg.solve(chol, (x - x.mean(0)).T).T, atol=1e-10)
    np.testing.assert_allclose(s_w, -(w - w_mu), atol=1e-9)


def test_whitened_ksd_equals_the_preconditioned_stein_kernel():
    rng = np.random.default_rng(2)
    cov = 1e-2 * _sigma0()
    x = rng.multivariate_normal([5.0, -1.0, 2.0], 2.0 * cov, size=40)
    s = -(x - 0.9 * x.mean(0)) @ np.linalg.inv(cov) + rng.normal(size=x.shape)
    got = kernel_stein_discrepancy(x, s, preconditioner=cov).numpy()
    np.testing.assert_allclose(got, _ksd_ref_preconditioned(x, s, cov), rtol=1e-9)
    # "sample" is the covariance with divisor n (another square root of it, same value).
    got = kernel_stein_discrepancy(x, s, preconditioner="sample").numpy()
    want = _ksd_ref_preconditioned(x, s, np.cov(x.T, bias=True))
    np.testing.assert_allclose(got, want, rtol=1e-8)


def test_none_is_the_unit_metric_bit_for_bit():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, D))
    s = -x + 0.1 * rng.normal(size=x.shape)
    v = rng.normal(size=(4, D))
    assert kernel_stein_discrepancy(x, s).numpy() == kernel_stein_discrepancy(
        x, s, preconditioner=None
    ).numpy()
    assert fssd(x, s, v).numpy() == fssd(x, s, v, preconditioner=None).numpy()
    # The identity metric is the same statistic (computed through the whitening path).
    np.testing.assert_allclose(
        kernel_stein_discrepancy(x, s, preconditioner=np.eye(D)).numpy(),
        kernel_stein_discrepancy(x, s).numpy(),
        rtol=1e-12,
    )


# ---------------------------------------------------------------- ranking across scales


@pytest.mark.parametrize("where", ["far", "abs"])
@pytest.mark.parametrize("sigma", SIGMAS)
def test_ksd_ranks_exact_draws_first_at_every_scale(sigma, where):
    mu, cov, score = _target(sigma, where)
    cands = _candidates(mu, cov, sigma, 500, seed=4)
    point_mass = np.tile(mu, (500, 1))
    for pre in (cov, "sample"):
        val = {k: _quiet(kernel_stein_discrepancy, x, score(x), preconditioner=pre)
               for k, x in cands.items()}
        for bad in ("frozen", "over", "under"):
            assert val["exact"] < 0.5 * val[bad], (pre if isinstance(pre, str) else "cov", val)
        exact_point = _quiet(kernel_stein_discrepancy, point_mass, score(point_mass),
                             preconditioner=pre)
        # A point mass: √(k_π(μ, μ)) = √d in any fixed metric; +inf in its own (degenerate).
        assert exact_point == (np.inf if isinstance(pre, str) else pytest.approx(np.sqrt(D)))


@pytest.mark.parametrize("sigma", SIGMAS)
def test_fssd_ranks_exact_draws_first_at_every_scale(sigma):
    mu, cov, score = _target(sigma, "abs")
    cands = _candidates(mu, cov, sigma, 1000, seed=5)
    cands["point mass"] = np.tile(mu, (1000, 1))
    # Σ known: the locations are drawn from the target, in the original coordinates.
    locs = np.random.default_rng(6).multivariate_normal(mu, cov, size=5)
    for kw in (dict(kernel="imq"), dict(kernel="gaussian", bandwidth=1.0)):
        val = {k: float(fssd(x, score(x), locs, preconditioner=cov, **kw))
               for k, x in cands.items()}
        for bad in ("frozen", "point mass", "over", "under"):
            assert val[bad] > max(5.0 * abs(val["exact"]), 1e-3), (kw, val)
    # "sample": each sample is measured in its own metric, so the locations must come
    # from its own Gaussian fit (as fssd_opt draws them); target draws would lie far
    # away from a collapsed chain in its whitened units.
    val = {}
    for k in ("exact", "frozen", "over", "under"):
        x = cands[k]
        locs = np.random.default_rng(7).multivariate_normal(x.mean(0), np.cov(x.T), size=5)
        val[k] = float(fssd(x, score(x), locs, kernel="imq", preconditioner="sample"))
    for bad in ("frozen", "over", "under"):
        assert val[bad] > max(5.0 * abs(val["exact"]), 1e-3), val


def test_unit_metric_ksd_prefers_a_frozen_chain_at_small_scale():
    # The defect the preconditioner fixes: at σ = 1e-2, KSD²(exact) ≈ tr(Σ⁻¹)/n ≫ d =
    # KSD²(point mass at the mode), so the unit-metric KSD ranks the frozen chain first.
    mu, cov, score = _target(1e-2, "abs")
    wins = 0
    for rep in range(5):
        cands = _candidates(mu, cov, 1e-2, 500, seed=100 + rep)
        exact, frozen = cands["exact"], cands["frozen"]
        wins += float(kernel_stein_discrepancy(frozen, score(frozen))) < float(
            kernel_stein_discrepancy(exact, score(exact))
        )
    # KSD²(exact) fluctuates like a weighted χ²_d around its mean: a rare draw can fall
    # below d, so the check is over replicates (these seeds: all five).
    assert wins >= 4
    assert np.trace(np.linalg.inv(cov)) / 500 > 10 * D  # why: the score term dominates


# ---------------------------------------------------------------- invariance


def _affine(d: int, seed: int):
    rng = np.random.default_rng(seed)
    b = rng.normal(size=(d, d)) * np.array([1e-3, 1.0, 1e3])[:d] + 2.0 * np.eye(d)
    return rng.normal(size=d) * 100.0, b


@pytest.mark.parametrize("statistic", ["v", "u"])
def test_ksd_is_invariant_to_affine_reparametrisation(statistic):
    mu, cov, score = _target(1e-1, "abs")
    x = _candidates(mu, cov, 1e-1, 300, seed=8)["over"]
    s = score(x)
    a, b = _affine(D, seed=9)
    y, t, cov_y = a + x @ b.T, s @ np.linalg.inv(b), b @ cov @ b.T  # s_y = B⁻ᵀ s_x
    for pre_x, pre_y in ((cov, cov_y), ("sample", "sample")):
        got = kernel_stein_discrepancy(y, t, statistic=statistic, preconditioner=pre_y)
        want = kernel_stein_discrepancy(x, s, statistic=statistic, preconditioner=pre_x)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-8)
    # Diagonal scales are invariant under coordinate scalings (a diagonal B).
    scale = np.array([1e-3, 1.0, 1e4])
    sd = np.sqrt(np.diag(cov))
    got = kernel_stein_discrepancy(x * scale, s / scale, statistic=statistic,
                                   preconditioner=sd * scale)
    want = kernel_stein_discrepancy(x, s, statistic=statistic, preconditioner=sd)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-8)


def test_fssd_is_invariant_when_locations_transform_too():
    mu, cov, score = _target(1.0, "far")
    x = _candidates(mu, cov, 1.0, 400, seed=10)["under"]
    s = score(x)
    v = np.random.default_rng(12).multivariate_normal(mu, cov, size=4)
    a, b = _affine(D, seed=13)
    for kw in (dict(kernel="imq"), dict(kernel="gaussian")):
        for pre_x, pre_y in ((cov, b @ cov @ b.T), ("sample", "sample")):
            got = fssd(a + x @ b.T, s @ np.linalg.inv(b), a + v @ b.T, preconditioner=pre_y, **kw)
            want = fssd(x, s, v, preconditioner=pre_x, **kw)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-7)


# ---------------------------------------------------------------- "sample" in detail


def test_sample_metric_is_dense_up_to_100_dims_then_diagonal():
    rng = np.random.default_rng(14)
    for d in (SAMPLE_DENSE_MAX_DIM, SAMPLE_DENSE_MAX_DIM + 1):
        x = rng.normal(size=(150, d)) @ (np.eye(d) + 0.3 * rng.normal(size=(d, d)) / np.sqrt(d))
        s = -x + 0.1 * rng.normal(size=x.shape)
        got = kernel_stein_discrepancy(x, s, preconditioner="sample").numpy()
        if d <= SAMPLE_DENSE_MAX_DIM:
            want = kernel_stein_discrepancy(x, s, preconditioner=np.cov(x.T, bias=True))
        else:
            want = kernel_stein_discrepancy(x, s, preconditioner=x.std(0))
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-7)


@pytest.mark.parametrize("statistic", ["v", "u"])
def test_degenerate_sample_metric_is_inf_with_a_reason(statistic):
    mu, cov, score = _target(1e-2, "abs")
    x = _candidates(mu, cov, 1e-2, 300, seed=15)["exact"]
    x[:, 1] = mu[1]  # coordinate 1 never moved
    with pytest.warns(RuntimeWarning, match=r"zero variance \(1;.*KSD is \+inf"):
        val = kernel_stein_discrepancy(x, score(x), statistic=statistic,
                                       preconditioner="sample")
    assert val.numpy() == np.inf
    with pytest.warns(RuntimeWarning, match="FSSD is"):
        assert fssd(x, score(x), x[:3], preconditioner="sample").numpy() == np.inf
    with pytest.raises(ValueError, match="preconditioner='sample'.*zero variance"):
        whiten(x, score(x), "sample")
    # A single sample has no covariance either.
    with pytest.warns(RuntimeWarning):
        assert kernel_stein_discrepancy(x[:1], score(x[:1]), preconditioner="sample") == np.inf
    # Traced: no warning can be given, the value is still +inf.
    assert _traced_ksd("sample")(tf.constant(x), tf.constant(score(x))).numpy() == np.inf
    # Barely moving is not degenerate, and is ranked behind exact draws.
    y = x.copy()
    y[:, 1] += 1e-12 * np.random.default_rng(16).normal(size=len(y))
    assert np.isfinite(kernel_stein_discrepancy(y, score(y), preconditioner="sample").numpy())


def _traced_ksd(pre):
    # The metric is captured as a constant: a tf.function argument would be symbolic.
    return tf.function(
        lambda a, b: kernel_stein_discrepancy(a, b, preconditioner=pre), autograph=False
    )


def test_traced_and_weighted_calls_agree_with_eager():
    mu, cov, score = _target(1e2, "far")
    x = _candidates(mu, cov, 1e2, 200, seed=17)["over"]
    s = score(x)
    for pre in (cov, "sample", np.sqrt(np.diag(cov))):
        eager = kernel_stein_discrepancy(x, s, preconditioner=pre).numpy()
        traced = _traced_ksd(pre)(tf.constant(x), tf.constant(s)).numpy()
        np.testing.assert_allclose(traced, eager, rtol=1e-10)
        # A partly filled buffer (rows of weight 0 hold zeros and are ignored), as the
        # reducer's; moments and shift are taken over the rows of weight 1.
        buf_x = np.concatenate([x, np.zeros((56, D))])
        buf_s = np.concatenate([s, np.zeros((56, D))])
        weights = tf.constant(np.r_[np.ones(200), np.zeros(56)])
        ksd = BlockedKSD("imq", 1.0, -0.5, None, "v", 64, False, check_preconditioner(pre, D))
        got = ksd(tf.constant(buf_x), tf.constant(buf_s), weights, eager_checks=False).numpy()
        np.testing.assert_allclose(got, eager, rtol=1e-9)


def test_float32_agrees_with_float64():
    mu, cov, score = _target(1.0, "abs")
    x = _candidates(mu, cov, 1.0, 300, seed=18)["exact"]
    s = score(x)
    for pre in (cov, "sample"):
        want = kernel_stein_discrepancy(x, s, preconditioner=pre).numpy()
        got = kernel_stein_discrepancy(
            x.astype(np.float32), s.astype(np.float32), preconditioner=pre
        )
        assert got.dtype == tf.float32
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-3)


# ---------------------------------------------------------------- bad input

_NOT_SYMMETRIC = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
_INDEFINITE = np.diag([1.0, -1.0, 1.0])
_SINGULAR = np.ones((3, 3))


@pytest.mark.parametrize(
    "bad,match",
    [
        ("samples", "string 'samples'"),
        (1.0, "shape"),
        (np.ones((3, 3, 3)), "shape"),
        (np.ones((3, 2)), "shape"),
        (np.ones(0), "shape"),
        (np.ones(4), "dimension 4"),
        (np.eye(2), "dimension 2"),
        (np.array([1.0, np.nan, 1.0]), "non-finite"),
        (np.diag([1.0, np.inf, 1.0]), "non-finite"),
        (np.array([1.0, 0.0, 1.0]), "> 0"),
        (np.array([1.0, -2.0, 1.0]), "> 0"),
        (_NOT_SYMMETRIC, "symmetric"),
        (_INDEFINITE, "positive definite"),
        (_SINGULAR, "positive definite"),
        (object(), "numeric"),
    ],
)
def test_bad_preconditioner_is_named(bad, match):
    rng = np.random.default_rng(19)
    x = rng.normal(size=(20, D))
    s = -x
    with pytest.raises(ValueError, match="preconditioner") as err:
        kernel_stein_discrepancy(x, s, preconditioner=bad)
    assert re.search(match, str(err.value)), str(err.value)
    with pytest.raises(ValueError, match="preconditioner"):
        fssd(x, s, x[:2], preconditioner=bad)
    with pytest.raises(ValueError, match="preconditioner"):
        whiten(x, s, bad)


def test_symbolic_preconditioner_is_refused():
    @functools.partial(tf.function, autograph=False)
    def fn(p):
        return check_preconditioner(p)

    with pytest.raises(ValueError, match="preconditioner.*symbolic"):
        fn(tf.constant(np.eye(D)))


def test_docs_example_runs(capsys):
    page = pathlib.Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md"
    text = page.read_text(encoding="utf-8")
    section = text[text.index("## Preconditioned Stein discrepancies"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "<docs/diagnostics.md>", "exec"), {})
    out = capsys.readouterr().out
    values = dict(re.findall(r"(exact|frozen): unit (\S+), Σ", out))
    assert float(values["frozen"].rstrip(",")) < float(values["exact"].rstrip(","))
