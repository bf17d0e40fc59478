r"""Exact blocked Gibbs sampler for Bayesian PMF (a reference, not an SG sampler).

The PMF model of [`tfp_sgmcmc.models.pmf`][tfp_sgmcmc.models.pmf] is conditionally
conjugate: the likelihood is Gaussian with a known precision ``α``, the rows are
Gaussian given their hyperparameters, and each latent dimension's
``(μ_W,k, λ_W,k)`` has a Normal-Gamma prior. Every block below is therefore
drawn from its exact full conditional (the Gibbs sampler of Salakhutdinov & Mnih 2008, with
the diagonal precision and Gamma hyperprior of the model), which makes this
the full-batch reference for the model's posterior where Hamiltonian Monte
Carlo mixes too slowly (see ``docs/studies/mamba_pmf.md``).

One sweep, with ``r_ij`` the centred training ratings, ``J_i`` the items user
``i`` rated and ``Λ_W = diag(λ_W)``, draws three blocks in turn.

**Hyperparameters**, for ``W ∈ {U, V}`` with ``n`` rows and each dimension ``k``
(prior ``μ | λ ~ N(μ0, (β0 λ)⁻¹)``, ``λ ~ Gamma(a0, b0)``, ``β0 = 1``): with
``w̄_k`` the column mean,

$$
\beta_n = \beta_0 + n,\quad
\mu_n = \frac{\beta_0\mu_0 + n\bar w_k}{\beta_n},\quad
a_n = a_0 + \frac n2,\quad
b_n = b_0 + \frac12\sum_r (W_{rk}-\bar w_k)^2
      + \frac{\beta_0 n (\bar w_k-\mu_0)^2}{2\beta_n},
$$

then ``λ_W,k ~ Gamma(a_n, rate b_n)`` and ``μ_W,k | λ ~ N(μ_n, (β_n λ)⁻¹)``.

**User rows**, independently given ``V``:

$$
P_i = \Lambda_U + \alpha \sum_{j\in J_i} V_j V_j^\top,\qquad
U_i \sim N\Bigl(P_i^{-1}\bigl(\Lambda_U\mu_U + \alpha \sum_{j\in J_i} r_{ij} V_j\bigr),\
P_i^{-1}\Bigr).
$$

**Item rows**, alike, given the new ``U``.

The sums over ratings are sparse products (``O(n_ratings d²)`` per sweep); the
``d × d`` systems are solved by batched Cholesky factorisations. Draws are
returned in the samplers' unconstrained parametrisation
``[U, V, μ_U, log λ_U, μ_V, log λ_V]`` (`tfp_sgmcmc.models.pmf.PARAM_NAMES`).

#### References

[1]: Ruslan Salakhutdinov and Andriy Mnih. Bayesian probabilistic matrix
     factorization using Markov chain Monte Carlo. In _ICML_, 2008.
[2]: Jeremie Coullon, Leah South and Christopher Nemeth. Efficient and
     generalizable tuning strategies for stochastic gradient MCMC.
     _Statistics and Computing_, 33, 2023 (arXiv:2105.13059). §4.2, App. C.2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from tfp_sgmcmc.models.pmf import A0, ALPHA, B0, MU0, PMF

__all__ = ["PMFGibbs", "normal_gamma_posterior", "row_conditionals"]


def normal_gamma_posterior(
    w: np.ndarray, mu0: float = MU0, a0: float = A0, b0: float = B0, beta0: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(μ_n, β_n, a_n, b_n)`` per column of ``w`` ``[n, d]`` (step 1 of the sweep).

    The law of ``(μ_k, λ_k)`` given the rows is ``λ_k ~ Gamma(a_n, rate b_n)``,
    ``μ_k | λ_k ~ N(μ_n, (β_n λ_k)⁻¹)``.
    """
    n = w.shape[0]
    wbar = w.mean(axis=0)
    beta_n = beta0 + n
    mu_n = (beta0 * mu0 + n * wbar) / beta_n
    a_n = a0 + 0.5 * n
    b_n = b0 + 0.5 * np.sum((w - wbar) ** 2, axis=0) + beta0 * n * (wbar - mu0) ** 2 / (
        2.0 * beta_n
    )
    d = w.shape[1]
    return mu_n, np.full(d, beta_n, float), np.full(d, a_n, float), b_n


def row_conditionals(
    indicator: sp.csr_matrix,
    weighted: sp.csr_matrix,
    other: np.ndarray,
    mu: np.ndarray,
    lam: np.ndarray,
    alpha: float = ALPHA,
) -> tuple[np.ndarray, np.ndarray]:
    """Precisions ``P [rows, d, d]`` and linear terms ``h [rows, d]`` of the row conditionals.

    ``indicator`` has a 1 (or the multiplicity) at each rated pair, ``weighted``
    the centred rating; rows are the users (or items), columns the other side,
    whose factors are ``other``. The conditional of row ``i`` is
    ``N(P_i⁻¹ h_i, P_i⁻¹)`` with ``P_i = diag(λ) + α Σ_j A_ij o_j o_jᵀ`` and
    ``h_i = diag(λ) μ + α Σ_j R_ij o_j`` (step 2 of the sweep).
    """
    d = other.shape[1]
    outer = (other[:, :, None] * other[:, None, :]).reshape(other.shape[0], d * d)
    prec = alpha * np.asarray(indicator @ outer).reshape(-1, d, d)
    prec[:, np.arange(d), np.arange(d)] += lam
    lin = alpha * np.asarray(weighted @ other) + lam * mu
    return prec, lin


def _draw_rows(prec: np.ndarray, lin: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row from ``N(P⁻¹ h, P⁻¹)`` via ``P = L Lᵀ``: ``x = P⁻¹h + L⁻ᵀ z``."""
    chol = np.linalg.cholesky(prec)
    mean = np.linalg.solve(prec, lin[..., None])[..., 0]
    z = rng.standard_normal(lin.shape)
    return mean + np.linalg.solve(np.swapaxes(chol, -1, -2), z[..., None])[..., 0]


class PMFGibbs:
    """The blocked Gibbs sampler of a [`PMF`][tfp_sgmcmc.models.pmf.PMF] problem's posterior.

    Args:
      problem: the PMF problem (its training split is the data).

    Example:

    ```python
    from tfp_sgmcmc.models import pmf as pm
    from tfp_sgmcmc.models.pmf_gibbs import PMFGibbs

    prob = pm.pmf(synthetic=True, dtype="float64")
    gibbs = PMFGibbs(prob)
    draws = gibbs.sample(gibbs.to_constrained(prob.init_state()), num_sweeps=100, seed=0)
    ```
    """

    def __init__(self, problem: PMF) -> None:
        if not isinstance(problem, PMF):
            raise ValueError(f"`problem` must be a PMF problem, got {type(problem).__name__}.")
        users, items, r = problem.arrays("train")
        shape = (problem.num_users, problem.num_items)
        r = np.asarray(r, np.float64)
        ones = np.ones_like(r)
        # COO -> CSR sums duplicate pairs, so a pair rated twice counts twice, as in the
        # likelihood's sum over ratings.
        self._a_users = sp.csr_matrix((ones, (users, items)), shape=shape)
        self._r_users = sp.csr_matrix((r, (users, items)), shape=shape)
        self._a_items = self._a_users.T.tocsr()
        self._r_items = self._r_users.T.tocsr()
        self.problem = problem
        self.latent_dim = problem.latent_dim

    # -- parametrisations ------------------------------------------------------ #
    @staticmethod
    def to_constrained(state: Sequence[Any]) -> list[np.ndarray]:
        """``[U, V, μ_U, λ_U, μ_V, λ_V]`` from an unconstrained state (``λ = exp z``)."""
        u, v, mu_u, z_u, mu_v, z_v = (np.asarray(p, np.float64) for p in state)
        return [u, v, mu_u, np.exp(z_u), mu_v, np.exp(z_v)]

    @staticmethod
    def to_unconstrained(theta: Sequence[np.ndarray]) -> list[np.ndarray]:
        """``[U, V, μ_U, log λ_U, μ_V, log λ_V]`` from a constrained state."""
        u, v, mu_u, lam_u, mu_v, lam_v = theta
        return [u, v, mu_u, np.log(lam_u), mu_v, np.log(lam_v)]

    # -- one sweep ------------------------------------------------------------- #
    def sweep(self, theta: Sequence[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
        """One Gibbs sweep (hyperparameters, then users, then items) of a constrained state."""
        u, v = theta[0], theta[1]
        hyper = []
        for w in (u, v):
            mu_n, beta_n, a_n, b_n = normal_gamma_posterior(w)
            lam = rng.gamma(a_n, 1.0 / b_n)
            mu = mu_n + rng.standard_normal(mu_n.shape) / np.sqrt(beta_n * lam)
            hyper.append((mu, lam))
        (mu_u, lam_u), (mu_v, lam_v) = hyper
        u = _draw_rows(*row_conditionals(self._a_users, self._r_users, v, mu_u, lam_u), rng)
        v = _draw_rows(*row_conditionals(self._a_items, self._r_items, u, mu_v, lam_v), rng)
        return [u, v, mu_u, lam_u, mu_v, lam_v]

    def sample(
        self,
        theta: Sequence[np.ndarray],
        num_sweeps: int,
        seed: int,
        thin: int = 1,
        callback: Callable[[int], None] | None = None,
    ) -> list[np.ndarray]:
        """Runs ``num_sweeps`` sweeps from the constrained ``theta``.

        Returns the kept draws (every ``thin``-th sweep) in the unconstrained
        parametrisation, one array ``[num_sweeps // thin, *shape]`` per part.
        ``callback(sweep)`` is called after every sweep (progress reporting).

        Raises:
          ValueError: ``num_sweeps`` or ``thin`` below 1, ``thin`` above
            ``num_sweeps`` (no draw would be kept), a ``theta`` with the wrong
            shapes, non-positive precisions, or a sweep that produced a
            non-finite value.
        """
        if int(num_sweeps) < 1 or int(thin) < 1:
            raise ValueError(f"`num_sweeps` and `thin` must be >= 1, got {num_sweeps}, {thin}.")
        # Checked before sweeping: otherwise every sweep runs and nothing is kept.
        if int(thin) > int(num_sweeps):
            raise ValueError(
                f"`thin` = {thin} exceeds `num_sweeps` = {num_sweeps}: no draw would be kept."
            )
        theta = [np.asarray(p, np.float64) for p in theta]
        d = self.latent_dim
        shapes = [
            (self.problem.num_users, d), (self.problem.num_items, d), (d,), (d,), (d,), (d,)
        ]
        if len(theta) != 6 or any(p.shape != s for p, s in zip(theta, shapes)):
            got = [p.shape for p in theta]
            raise ValueError(f"`theta` must have part shapes {shapes}, got {got}.")
        if np.any(theta[3] <= 0) or np.any(theta[5] <= 0):
            raise ValueError("`theta`'s precisions λ_U and λ_V must be positive.")
        rng = np.random.default_rng(seed)
        kept: list[list[np.ndarray]] = [[] for _ in range(6)]
        for k in range(int(num_sweeps)):
            theta = self.sweep(theta, rng)
            if not all(np.all(np.isfinite(p)) for p in theta):
                raise ValueError(f"Gibbs sweep {k} produced a non-finite value.")
            if (k + 1) % int(thin) == 0:
                for store, p in zip(kept, self.to_unconstrained(theta)):
                    store.append(p)
            if callback is not None:
                callback(k)
        return [np.stack(s) for s in kept]
