"""Bayesian probabilistic matrix factorisation (the MAMBA paper's §4.2 model).

Ratings ``R_ij`` of user ``i`` for item ``j`` (the observed pairs only),
latent rows ``U_i, V_j ∈ R^d`` (``d = 20``), ratings centred by the training
mean ``r̄`` as in the authors' code [1]:

```none
R_ij − r̄ | U, V      ~ N(U_iᵀ V_j, α⁻¹)                    α = 3 (known)
U_i | μ_U, λ_U       ~ N(μ_U, diag(λ_U)⁻¹)                i = 1..N_users
V_j | μ_V, λ_V       ~ N(μ_V, diag(λ_V)⁻¹)                j = 1..N_items
μ_W | λ_W            ~ N(μ0 1, diag(λ_W)⁻¹)               μ0 = 0,  W ∈ {U, V}
λ_W,k                ~ Gamma(a0, b0)   (shape, rate)      a0 = 4, b0 = 5, k = 1..d
```

i.e. τ = (α, μ0, a0, b0) = (3, 0, 4, 5) of the paper's Appendix C.2.1 [1],
the hierarchical model of Salakhutdinov & Mnih [2] with a diagonal
precision ``Λ_W = diag(λ_W)`` (a Gamma, not a Wishart, hyperprior, as the
paper's text and its code) and ``β0 = 1``. The log-density, up to a constant:

```none
log π = Σ_(i,j)∈train −(α/2)(R_ij − r̄ − U_iᵀV_j)²
      + Σ_W [ Σ_rows −½ (W_r − μ_W)ᵀ diag(λ_W)(W_r − μ_W) + (n_W/2) Σ_k log λ_W,k
              − ½ (μ_W − μ0)ᵀ diag(λ_W)(μ_W − μ0) + ½ Σ_k log λ_W,k
              + Σ_k [(a0 − 1) log λ_W,k − b0 λ_W,k] ]
```

The precisions are positive. The chain moves ``z_W = log λ_W`` through the
library's constrained-parameter support: `PMF.estimator` is a
[`TransformedEstimator`][tfp_sgmcmc.estimators.TransformedEstimator] with the
per-part bijectors `STATE_BIJECTORS` (``tfb.Exp`` on the two precisions,
identity elsewhere) around a minibatch estimator written in the constrained
parameters ``θ = [U, V, μ_U, λ_U, μ_V, λ_V]`` (`log_prior_constrained`). It adds
the log-Jacobian ``Σ_k z_W,k`` and applies the chain rule to the score:

```none
log π_z(z) = log π(θ(z)) + Σ_W Σ_k z_W,k,     ∂/∂z_W,k = λ_W,k ∂/∂λ_W,k log π + 1
```

(the Jacobian term is exactly the authors' ``lp_lambda``, ``3 z − 5 e^z + z``).
`log_prior` gives the same unconstrained prior for code outside the samplers
(the HMC ground truth).

State (one part each, leading dimensions are chains):
``[U (N_users, d), V (N_items, d), μ_U (d,), z_U (d,), μ_V (d,), z_V (d,)]``.

A minibatch is a batch of ratings ``(user, item, r − r̄)``; the per-rating
log-likelihood gathers only the user's and the item's rows, so a step costs
``O(n d)`` for the likelihood plus ``O((N_users + N_items) d)`` for the
prior and the update, never ``O(N_users × N_items)``.

Data: `synthetic_ratings` (a seeded PMF with MovieLens-100K's shape:
943 users, 1,682 items, 100,000 integer ratings 1-5, each user ≥ 20
ratings, long-tailed counts) or a MovieLens file through
`tfp_sgmcmc.models.data_files.load_movielens`. Split 80/20 at random
(seeded). Metrics: test RMSE of the posterior-mean prediction clipped to
the rating scale (as the authors' ``_predict_loss``), and the test
log-likelihood of the posterior predictive ``log (1/S) Σ_s N(R; r̄ + U_sᵢᵀV_sⱼ, α⁻¹)``.
See ``docs/models.md``.

#### References

[1]: Jeremie Coullon, Leah South and Christopher Nemeth. Efficient and
     generalizable tuning strategies for stochastic gradient MCMC.
     _Statistics and Computing_, 33, 2023 (arXiv:2105.13059). §4.2, App. C.2.
[2]: Ruslan Salakhutdinov and Andriy Mnih. Bayesian probabilistic matrix
     factorization using Markov chain Monte Carlo. In _ICML_, 2008.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.internal.util import AttributeView
from tfp_sgmcmc.models._problem import TrainSplitMixin, read_ground_truth
from tfp_sgmcmc.models.data_files import RatingsData, load_movielens

tfb = tfp.bijectors

__all__ = [
    "PMF",
    "pmf",
    "synthetic_ratings",
    "split_ratings",
    "constrain",
    "constrained_log_prior",
    "log_prior_constrained",
    "PRECISION_BIJECTOR",
    "STATE_BIJECTORS",
    "PARAM_NAMES",
    "ALPHA",
    "MU0",
    "A0",
    "B0",
    "LATENT_DIM",
    "load_ground_truth",
]

#: The paper's τ = (α, μ0, a0, b0) and latent dimension.
ALPHA, MU0, A0, B0 = 3.0, 0.0, 4.0, 5.0
LATENT_DIM = 20
PARAM_NAMES = ["U", "V", "mu_U", "log_lambda_U", "mu_V", "log_lambda_V"]
_GROUND_TRUTH = os.path.join(os.path.dirname(__file__), "ground_truth", "pmf_synthetic.json")

#: ``θ_k = f_k(z_k)`` per state part: the precisions are ``exp`` of the chain's
#: ``log λ``; the other parts are unconstrained.
PRECISION_BIJECTOR = tfb.Exp()
STATE_BIJECTORS = [
    tfb.Identity(),
    tfb.Identity(),
    tfb.Identity(),
    PRECISION_BIJECTOR,
    tfb.Identity(),
    PRECISION_BIJECTOR,
]


def constrain(z: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``(λ, log|dλ/dz|)``: the precisions and the log-Jacobian summed over the last axis."""
    lam = PRECISION_BIJECTOR.forward(z)
    return lam, PRECISION_BIJECTOR.forward_log_det_jacobian(z, event_ndims=1)


# --------------------------------------------------------------------------- #
# Densities
# --------------------------------------------------------------------------- #
def log_likelihood(state: Any, batch: Any, alpha: float = ALPHA) -> tf.Tensor:
    """Per-rating ``log N(r − r̄; U_iᵀV_j, α⁻¹)`` for a batch ``(users, items, centred)``.

    ``state`` parts have optional leading chain dimensions; returns ``[..., n]``.
    Only the ``n`` rows ``U[users]`` and ``V[items]`` are read.
    """
    u, v = state[0], state[1]
    users, items, r = batch
    ug = tf.gather(u, users, axis=-2)  # [..., n, d]
    vg = tf.gather(v, items, axis=-2)
    pred = tf.reduce_sum(ug * vg, axis=-1)
    resid = tf.cast(r, u.dtype) - pred
    a = tf.constant(alpha, u.dtype)
    return -0.5 * a * tf.square(resid) + 0.5 * (tf.math.log(a) - np.log(2.0 * np.pi))


def _gaussian_rows(w: tf.Tensor, mu: tf.Tensor, lam: tf.Tensor) -> tf.Tensor:
    """``Σ_rows −½ (w_r − μ)ᵀ diag(λ)(w_r − μ) + ½ n Σ_k log λ_k`` (no 2π), leading dims kept."""
    n = tf.cast(tf.shape(w)[-2], w.dtype)
    quad = tf.reduce_sum(tf.square(w - mu[..., None, :]) * lam[..., None, :], axis=[-2, -1])
    return -0.5 * quad + 0.5 * n * tf.reduce_sum(tf.math.log(lam), axis=-1)


def log_prior_constrained(u, v, mu_u, lam_u, mu_v, lam_v, mu0=MU0, a0=A0, b0=B0) -> tf.Tensor:
    """The hierarchical prior in the constrained parametrisation (λ > 0), up to a constant."""
    total = 0.0
    for w, mu, lam in ((u, mu_u, lam_u), (v, mu_v, lam_v)):
        total += _gaussian_rows(w, mu, lam)
        total += -0.5 * tf.reduce_sum(tf.square(mu - mu0) * lam, axis=-1) + 0.5 * tf.reduce_sum(
            tf.math.log(lam), axis=-1
        )
        total += tf.reduce_sum((a0 - 1.0) * tf.math.log(lam) - b0 * lam, axis=-1)
    return total


def constrained_log_prior(theta: Any) -> tf.Tensor:
    """The prior of the constrained state ``[U, V, μ_U, λ_U, μ_V, λ_V]`` (no Jacobian)."""
    return log_prior_constrained(*theta)


def log_prior(state: Any) -> tf.Tensor:
    """The prior of the unconstrained state ``[U, V, μ_U, z_U, μ_V, z_V]`` (with the Jacobian).

    The samplers do not call it (`PMF.estimator` applies the same change of
    variables through `STATE_BIJECTORS`); it serves full-batch code such as
    the HMC ground truth.
    """
    u, v, mu_u, z_u, mu_v, z_v = state
    lam_u, ldj_u = constrain(z_u)
    lam_v, ldj_v = constrain(z_v)
    return log_prior_constrained(u, v, mu_u, lam_u, mu_v, lam_v) + ldj_u + ldj_v


# --------------------------------------------------------------------------- #
# Data
# --------------------------------------------------------------------------- #
def synthetic_ratings(
    num_users: int = 943,
    num_items: int = 1682,
    num_ratings: int = 100_000,
    min_per_user: int = 20,
    latent_dim: int = LATENT_DIM,
    seed: int = 0,
) -> RatingsData:
    """A seeded PMF data set with MovieLens-100K's shape (integer stars 1-5).

    Counts: user activity ``a_u ~ LogNormal(0, 0.8)``, item popularity
    ``p_j ∝ LogNormal(0, 1)``; every user gets ``min_per_user`` ratings plus
    a multinomial share (∝ ``a_u``) of the rest, capped at ``num_items``, and
    rates that many distinct items drawn ∝ ``p_j``, so both count
    distributions are long-tailed like MovieLens's. Ratings: ``U_i, V_j ~
    N(0, s² I_d)`` with ``s⁴ d = 0.8`` (so ``U_iᵀV_j`` has variance 0.8),
    ``r = clip(round(3.53 + U_iᵀV_j + ε), 1, 5)``, ``ε ~ N(0, 1/α)``: mean
    and spread close to MovieLens-100K's 3.53 ± 1.13.

    Returns:
      A `tfp_sgmcmc.models.data_files.RatingsData` (``source="synthetic"``).
    """
    for name, val in (
        ("num_users", num_users),
        ("num_items", num_items),
        ("num_ratings", num_ratings),
        ("latent_dim", latent_dim),
    ):
        if int(val) < 1:
            raise ValueError(f"`{name}` must be >= 1, got {val}.")
    if min_per_user * num_users > num_ratings or num_ratings > num_users * num_items:
        raise ValueError(
            f"`num_ratings` = {num_ratings} must lie in [min_per_user * num_users, "
            f"num_users * num_items] = [{min_per_user * num_users}, {num_users * num_items}]."
        )
    rng = np.random.default_rng(seed)
    activity = rng.lognormal(0.0, 0.8, num_users)
    popularity = rng.lognormal(0.0, 1.0, num_items)
    popularity /= popularity.sum()
    counts = np.full(num_users, min_per_user) + rng.multinomial(
        num_ratings - min_per_user * num_users, activity / activity.sum()
    )
    counts = np.minimum(counts, num_items)
    deficit = num_ratings - counts.sum()
    while deficit > 0:  # hand the capped excess to users with room, in activity order
        room = np.flatnonzero(counts < num_items)
        take = room[np.argsort(-activity[room])][:deficit]
        counts[take] += 1
        deficit = num_ratings - counts.sum()
    users = np.repeat(np.arange(num_users), counts)
    items = np.concatenate(
        [rng.choice(num_items, size=c, replace=False, p=popularity) for c in counts]
    )
    s = (0.8 / latent_dim) ** 0.25
    u = rng.normal(0.0, s, (num_users, latent_dim))
    v = rng.normal(0.0, s, (num_items, latent_dim))
    raw = 3.53 + np.sum(u[users] * v[items], axis=1) + rng.normal(0.0, ALPHA**-0.5, users.size)
    ratings = np.clip(np.round(raw), 1, 5).astype(np.float32)
    return RatingsData(
        users=users.astype(np.int32),
        items=items.astype(np.int32),
        ratings=ratings,
        num_users=num_users,
        num_items=num_items,
        user_ids=np.arange(num_users) + 1,
        item_ids=np.arange(num_items) + 1,
        min_rating=1.0,
        max_rating=5.0,
        source="synthetic",
    )


def split_ratings(
    data: RatingsData, train_fraction: float = 0.8, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a seeded random ``train_fraction`` / rest split of the ratings."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"`train_fraction` must be in (0, 1), got {train_fraction}.")
    perm = np.random.default_rng(seed).permutation(data.num_ratings)
    k = int(round(train_fraction * data.num_ratings))
    return np.sort(perm[:k]), np.sort(perm[k:])


def load_ground_truth(path: str | None = None) -> dict[str, Any] | None:
    """The stored HMC ground truth for the synthetic set (``None`` if absent)."""
    return read_ground_truth(path or _GROUND_TRUTH)


def _reference_latent_dim(gt: dict[str, Any]) -> int | None:
    """The latent dimension ``d`` a stored reference was computed with: its ``latent_dim``
    field or, in references written without it, the size of its ``mu_U`` diagnostics
    (one entry per latent dimension); ``None`` if neither is there."""
    if "latent_dim" in gt:
        return gt["latent_dim"]
    mu_u = gt.get("parameter_diagnostics", {}).get("mu_U")
    if isinstance(mu_u, dict) and isinstance(mu_u.get("parameters"), int):
        return mu_u["parameters"]
    return None


# --------------------------------------------------------------------------- #
# The problem
# --------------------------------------------------------------------------- #
@dataclass
class PMF(TrainSplitMixin):
    """The PMF problem: split, estimators, initial states and test metrics.

    Attributes:
      data: the full `tfp_sgmcmc.models.data_files.RatingsData`.
      train_idx, test_idx: the split (indices into ``data``).
      latent_dim: ``d``.
      mean_rating: ``r̄``, the training mean subtracted from the ratings.
      split_seed: seed of the split.
    """

    data: RatingsData
    train_idx: np.ndarray
    test_idx: np.ndarray
    latent_dim: int = LATENT_DIM
    mean_rating: float = 0.0
    split_seed: int = 0
    dtype: Any = np.float32
    _cache: dict = field(default_factory=dict, repr=False)

    num_users = AttributeView[int]("data.num_users")

    num_items = AttributeView[int]("data.num_items")

    @property
    def num_train(self) -> int:
        return int(self.train_idx.shape[0])

    @property
    def num_parameters(self) -> int:
        return (self.num_users + self.num_items + 4) * self.latent_dim

    def arrays(self, split: str = "train") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(users, items, r − r̄)`` of a split."""
        idx = self.train_idx if split == "train" else self.test_idx
        d = self.data
        return (d.users[idx], d.items[idx], (d.ratings[idx] - self.mean_rating).astype(self.dtype))

    def training_data(self, scheme: str = "with_replacement"):
        """The training ratings as an `tfp_sgmcmc.InMemoryData` (cached per scheme)."""
        from tfp_sgmcmc.data import InMemoryData

        key = ("data", scheme)
        if key not in self._cache:
            self._cache[key] = InMemoryData(self.arrays("train"), scheme=scheme, name="ratings")
        return self._cache[key]

    def constrained_estimator(
        self, batch_size: int, scheme: str = "with_replacement", full_data_chunk_size: int = 20_000
    ):
        """A `tfp_sgmcmc.MinibatchEstimator` over batches of ratings, in ``θ`` (λ > 0).

        ``full_data_chunk_size`` bounds the memory of full-data scores of a
        block of samples (``[block, chunk, d]`` gathered rows).
        """
        from tfp_sgmcmc.estimators import MinibatchEstimator

        return MinibatchEstimator(
            log_likelihood,
            self.training_data(scheme),
            int(batch_size),
            log_prior_fn=constrained_log_prior,
            full_data_chunk_size=int(full_data_chunk_size),
        )

    def estimator(
        self, batch_size: int, scheme: str = "with_replacement", full_data_chunk_size: int = 20_000
    ):
        """The sampler's estimator on the unconstrained state ``[U, V, μ_U, z_U, μ_V, z_V]``.

        A [`TransformedEstimator`][tfp_sgmcmc.estimators.TransformedEstimator]
        of `constrained_estimator` with `STATE_BIJECTORS` (module docstring).
        """
        from tfp_sgmcmc.estimators import TransformedEstimator

        inner = self.constrained_estimator(batch_size, scheme, full_data_chunk_size)
        return TransformedEstimator(inner, STATE_BIJECTORS)

    def control_variate_estimator(
        self, centre: Any, batch_size: int, scheme: str = "with_replacement"
    ):
        """SGLD-CV's estimator around ``centre`` (an unconstrained state, e.g. the MAP).

        The control variates live in ``θ`` (``ControlVariateEstimator`` of
        `constrained_estimator` at ``f(centre)``) and the change of variables is
        applied on top, as in `estimator`.
        """
        from tfp_sgmcmc.estimators import ControlVariateEstimator, TransformedEstimator

        outer = self.estimator(batch_size, scheme)
        cv = ControlVariateEstimator(outer.estimator, outer.forward(list(centre)))
        return TransformedEstimator(cv, STATE_BIJECTORS)

    def init_state(self, seed: int = 0, scale: float = 0.1) -> list[tf.Tensor]:
        """A small random state (rows ``N(0, scale²)``, μ = 0, λ = 1) to start a MAP search."""
        rng = np.random.default_rng(seed)
        d = self.latent_dim
        parts = [
            rng.normal(0, scale, (self.num_users, d)),
            rng.normal(0, scale, (self.num_items, d)),
            np.zeros(d),
            np.zeros(d),
            np.zeros(d),
            np.zeros(d),
        ]
        return [tf.constant(p, self.dtype) for p in parts]

    def ground_truth(self) -> dict[str, Any] | None:
        """The stored reference if it was computed on this very model, data set and split.

        It holds the posterior mean and standard deviation of the latent test
        predictions ``f_ij = U_iᵀV_j`` (the factors themselves are not identified:
        ``docs/models.md``), from the exact Gibbs sampler. ``None`` unless the
        reference's data seed, number of ratings, split (seed and training-set
        size) and latent dimension ``d`` are this problem's: the predictions'
        posterior depends on all of them.
        """
        if self.data.source != "synthetic":  # before reading the 0.6 MB file
            return None
        gt = load_ground_truth()
        if gt is None:
            return None
        if (
            gt.get("num_ratings") != self.data.num_ratings
            or gt.get("split_seed") != self.split_seed
            or gt.get("data_seed") != self._cache.get("data_seed")
            or gt.get("num_train") != self.num_train
            or gt.get("num_test") != int(self.test_idx.shape[0])
            or _reference_latent_dim(gt) != self.latent_dim
            or "test_predictions" not in gt
        ):
            return None
        return gt

    def xi(
        self, samples: list[np.ndarray], reference: dict[str, Any] | None = None,
        max_samples: int = 1000,
    ) -> float:
        r"""ξ(σ̂), the relative error of the posterior standard deviations of the test predictions.

        $$
        \xi(\hat\sigma) = \frac{\lVert \hat\sigma - \sigma_{\text{ref}} \rVert_2}
                               {\lVert \sigma_{\text{ref}} \rVert_2},
        $$

        over the vector of the test pairs' ``sd(U_iᵀV_j)``: ``σ̂`` from ``samples``
        (at most ``max_samples`` of them, evenly spaced), ``σ_ref`` from ``reference``
        (default: `ground_truth`). The MAMBA paper's ξ is over the parameters; for
        PMF those are not identified (rotations and permutations of the latent
        space), so their standard deviations depend on the run, not the posterior.

        Returns:
          ξ, or ``nan`` when there is no reference for this data set.

        Raises:
          ValueError: fewer than two samples, or a reference for another test set.
        """
        ref = self.ground_truth() if reference is None else reference
        if ref is None:
            return float("nan")
        pred = self._predictions(samples, max_samples)
        if pred.shape[0] < 2:
            raise ValueError(f"`samples` must hold at least two draws, got {pred.shape[0]}.")
        sd_ref = np.asarray(ref["test_predictions"]["std"], np.float64)
        if sd_ref.shape[0] != pred.shape[1]:
            raise ValueError(
                f"`reference` has {sd_ref.shape[0]} test predictions, this split {pred.shape[1]}."
            )
        sd = pred.std(axis=0, ddof=1)
        return float(np.linalg.norm(sd - sd_ref) / np.linalg.norm(sd_ref))

    # -- metrics -------------------------------------------------------------- #
    def _predictions(self, samples: list[np.ndarray], max_samples: int) -> np.ndarray:
        """``[S, n_test]`` predictions ``r̄ + U_sᵢᵀV_sⱼ`` (not clipped)."""
        u, v = np.asarray(samples[0]), np.asarray(samples[1])
        if u.ndim == 2:
            u, v = u[None], v[None]
        if u.shape[0] > max_samples:
            idx = np.linspace(0, u.shape[0] - 1, max_samples).round().astype(int)
            u, v = u[idx], v[idx]
        users, items, _ = self.arrays("test")
        out = np.empty((u.shape[0], users.shape[0]), np.float64)
        for s in range(u.shape[0]):
            out[s] = np.einsum("nd,nd->n", u[s][users], v[s][items])
        return out + self.mean_rating

    def test_rmse(self, samples: list[np.ndarray], max_samples: int = 500) -> float:
        """RMSE of the posterior-mean prediction, clipped to the rating scale."""
        pred = self._predictions(samples, max_samples).mean(axis=0)
        pred = np.clip(pred, self.data.min_rating, self.data.max_rating)
        r = self.data.ratings[self.test_idx].astype(np.float64)
        return float(np.sqrt(np.mean((pred - r) ** 2)))

    def test_log_likelihood(self, samples: list[np.ndarray], max_samples: int = 500) -> float:
        """Mean over test ratings of ``log (1/S) Σ_s N(r; r̄ + U_sᵢᵀV_sⱼ, α⁻¹)``."""
        pred = self._predictions(samples, max_samples)
        r = self.data.ratings[self.test_idx].astype(np.float64)
        lp = -0.5 * ALPHA * (r - pred) ** 2 + 0.5 * (np.log(ALPHA) - np.log(2 * np.pi))
        s = lp.shape[0]
        return float(np.mean(np.logaddexp.reduce(lp, axis=0) - np.log(s)))


def pmf(
    ratings: str | RatingsData | None = None,
    synthetic: bool = False,
    latent_dim: int = LATENT_DIM,
    train_fraction: float = 0.8,
    split_seed: int = 0,
    data_seed: int = 0,
    dtype: Any = np.float32,
) -> PMF:
    """Builds the PMF problem from a MovieLens file or the synthetic stand-in.

    Args:
      ratings: path of a ``u.data`` or ``ratings.csv`` file, or a
        `tfp_sgmcmc.models.data_files.RatingsData`.
      synthetic: use `synthetic_ratings` (``data_seed``) instead; exactly
        one of ``ratings`` and ``synthetic`` must be given, so a missing file
        never falls back to synthetic data silently.
      latent_dim: ``d``. Default value: ``20``.
      train_fraction: Default value: ``0.8``.
      split_seed: seed of the random split. Default value: ``0``.
      data_seed: seed of the synthetic data. Default value: ``0``.
      dtype: float dtype of the state and ratings. Default value: ``np.float32``.

    Raises:
      ValueError: both or neither of ``ratings`` and ``synthetic``; a bad
        ``latent_dim``; `tfp_sgmcmc.models.data_files.DataFileError`
        for a missing or malformed file.
    """
    if (ratings is None) == (not synthetic):
        raise ValueError(
            "give exactly one of `ratings` (a u.data or ratings.csv path) and "
            "`synthetic=True` (the offline stand-in)."
        )
    if int(latent_dim) < 1:
        raise ValueError(f"`latent_dim` must be >= 1, got {latent_dim}.")
    if synthetic:
        data = synthetic_ratings(seed=data_seed)
    elif isinstance(ratings, RatingsData):
        data = ratings
    else:
        data = load_movielens(ratings)
    train_idx, test_idx = split_ratings(data, train_fraction, split_seed)
    mean = float(np.mean(data.ratings[train_idx], dtype=np.float64))
    prob = PMF(
        data=data,
        train_idx=train_idx,
        test_idx=test_idx,
        latent_dim=int(latent_dim),
        mean_rating=mean,
        split_seed=int(split_seed),
        dtype=dtype,
    )
    prob._cache["data_seed"] = int(data_seed) if synthetic else None
    return prob
