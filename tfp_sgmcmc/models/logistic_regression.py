r"""The MAMBA paper's Bayesian logistic regression (N = 10⁶, d = 10).

Data generation follows the authors' code exactly (docs/algorithms.md#exp-logistic):

$$
\begin{aligned}
\theta_{\text{true}} &\sim \mathcal{N}(0, 10 I_d) \\
u &= 2\rho U - \rho, \quad U \sim \mathrm{Uniform}(0, 1) \text{ drawn once}, \quad \rho = 0.4 \\
\Sigma_X[i, j] &= u^{|i-j|} \\
Z &\sim \mathcal{N}(0, 1)^{N \times d} \text{ iid}, \quad
    X = Z \cdot \mathrm{chol}(\Sigma_X) \quad (\text{lower-triangular}) \\
y_i &\sim \mathrm{Bernoulli}\big(\sigma(\theta_{\text{true}}^\top x_i)\big)
\end{aligned}
$$

so the rows of ``X`` have covariance ``chol(Σ_X)ᵀ chol(Σ_X)`` (not exactly ``Σ_X``,
as in the authors' code). The first 80% of the rows are the training set, the
last 20% the test set. Prior ``θ ~ N(0, 10 I)``; logistic likelihood
``log p(y|x, θ) = y·ℓ − log(1 + e^ℓ)``, ``ℓ = θᵀx``.

The authors draw with JAX key 42; we draw with NumPy's PCG64 (``seed=42``), so
the data set is the same *law* but not the same numbers (JAX's generator is not
available here, and nothing is downloaded).

A ground-truth posterior (mean and marginal standard deviation, with their
Monte-Carlo standard errors) from a long full-batch NUTS run is stored in
``tfp_sgmcmc/models/ground_truth/logistic_regression.json`` (see
``models/make_ground_truth.py`` for the command that produced it).

#### References

[1]: Jeremie Coullon, Leah South and Christopher Nemeth. Stochastic gradient
     MCMC with multi-armed bandit tuning. _arXiv:2105.13059_, 2021. §4.1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.models._problem import TrainSplitMixin, read_ground_truth

__all__ = [
    "LogisticRegression",
    "logistic_regression",
    "generate_logistic_regression_data",
    "load_ground_truth",
]

_GROUND_TRUTH = os.path.join(os.path.dirname(__file__), "ground_truth", "logistic_regression.json")

PRIOR_VARIANCE = 10.0


def generate_logistic_regression_data(
    num_examples: int = 1_000_000,
    num_features: int = 10,
    rho: float = 0.4,
    seed: int = 42,
) -> dict[str, np.ndarray]:
    """Draws the §14.1 data set with NumPy (float64).

    Args:
      num_examples: ``N``, rows in total (train + test). Default value: ``1_000_000``.
      num_features: ``d``. Default value: ``10``.
      rho: ``ρ``; ``u = 2ρU − ρ``. Default value: ``0.4``.
      seed: NumPy seed. Default value: ``42``.

    Returns:
      dict with ``x`` [N, d], ``y`` [N], ``theta_true`` [d], ``sigma_x`` [d, d], ``u``.
    """
    if num_examples < 2:
        raise ValueError(f"`num_examples` must be >= 2, got {num_examples}.")
    if num_features < 1:
        raise ValueError(f"`num_features` must be >= 1, got {num_features}.")
    rng = np.random.default_rng(seed)
    theta_true = rng.normal(0.0, np.sqrt(PRIOR_VARIANCE), size=num_features)
    u = 2.0 * rho * rng.uniform() - rho  # ONE uniform for every entry, as the authors' code
    idx = np.arange(num_features)
    sigma_x = u ** np.abs(idx[:, None] - idx[None, :])
    chol = np.linalg.cholesky(sigma_x)  # lower-triangular
    z = rng.standard_normal((num_examples, num_features))
    x = z @ chol
    p = 1.0 / (1.0 + np.exp(-(x @ theta_true)))
    y = (rng.uniform(size=num_examples) < p).astype(np.float64)
    return {"x": x, "y": y, "theta_true": theta_true, "sigma_x": sigma_x, "u": np.float64(u)}


def log_likelihood(state: Any, batch: Any) -> tf.Tensor:
    """Per-example logistic log-likelihood ``y ℓ − softplus(ℓ)``, ``ℓ = θᵀx``.

    ``state`` is ``[..., d]`` (leading chain dimensions broadcast); ``batch`` is
    ``(x [n, d], y [n])``; returns ``[..., n]``.
    """
    x, y = batch
    theta = state[0] if isinstance(state, (list, tuple)) else state
    logits = tf.einsum("nd,...d->...n", tf.cast(x, theta.dtype), theta)
    y = tf.cast(y, theta.dtype)
    return y * logits - tf.nn.softplus(logits)


def log_prior(state: Any) -> tf.Tensor:
    """``log N(θ; 0, 10 I)`` up to a constant: ``−‖θ‖²/20``."""
    theta = state[0] if isinstance(state, (list, tuple)) else state
    return -0.5 * tf.reduce_sum(tf.square(theta), axis=-1) / PRIOR_VARIANCE


def load_ground_truth(path: str | None = None) -> dict[str, Any] | None:
    """The stored NUTS ground truth (``None`` if it has not been produced)."""
    return read_ground_truth(path or _GROUND_TRUTH)


@dataclass
class LogisticRegression(TrainSplitMixin):
    """The §14.1 problem: data split, log-likelihood, prior, estimators, metrics.

    Attributes:
      x_train, y_train, x_test, y_test: the 80/20 split (``dtype``).
      theta_true: the generating parameter.
      sigma_x: ``Σ_X``.
      num_examples: ``N`` (train + test), the ``N`` of the heuristic step ``1/N``
        in the authors' code.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    theta_true: np.ndarray
    sigma_x: np.ndarray
    num_examples: int
    seed: int
    dtype: Any = np.float32
    _cache: dict = field(default_factory=dict, repr=False)

    log_likelihood_fn = staticmethod(log_likelihood)
    log_prior_fn = staticmethod(log_prior)

    @property
    def num_features(self) -> int:
        return int(self.x_train.shape[1])

    def data(self, scheme: str = "epoch"):
        """The training set as an [`InMemoryData`][tfp_sgmcmc.InMemoryData] (cached per scheme)."""
        from tfp_sgmcmc.data import InMemoryData

        key = ("data", scheme)
        if key not in self._cache:
            self._cache[key] = InMemoryData((self.x_train, self.y_train), scheme=scheme)
        return self._cache[key]

    def estimator(self, batch_size: int, scheme: str = "epoch", independent_chains: bool = False):
        """A [`MinibatchEstimator`][tfp_sgmcmc.MinibatchEstimator] on the training set.

        ``independent_chains=True`` draws one minibatch per chain (see
        ``docs/estimators.md``).
        """
        from tfp_sgmcmc.estimators import MinibatchEstimator

        return MinibatchEstimator(
            log_likelihood,
            self.data(scheme),
            int(batch_size),
            log_prior_fn=log_prior,
            independent_chains=independent_chains,
        )

    def ground_truth(self) -> dict[str, Any] | None:
        """The stored NUTS posterior summary, if it matches this problem: its seed, ``N``,
        training-set size (``train_fraction``) and number of features; ``None`` otherwise
        (a reference of another posterior would score the samples against wrong moments)."""
        gt = load_ground_truth()
        if gt is None:
            return None
        if gt.get("seed") != self.seed or gt.get("num_examples") != self.num_examples:
            return None
        # The posterior conditions on the training rows only: another split is another target.
        if gt.get("num_train") != self.num_train:
            return None
        if np.shape(gt.get("mean", [])) != (self.num_features,):
            return None
        return gt

    def test_log_prob_class1(self, samples: np.ndarray) -> np.ndarray:
        """``log σ(θ_sᵀx)`` for every sample ``s`` and test row: ``[S, n_test]``."""
        logits = np.asarray(samples, np.float64) @ np.asarray(self.x_test, np.float64).T
        return -np.logaddexp(0.0, -logits)

    def predictive_accuracy(self, samples: np.ndarray, max_samples: int = 1000) -> float:
        """The authors' accuracy: per test point exponentiate the average log σ(θ_sᵀx) and round.

        (A geometric model average, as the paper's code, docs/algorithms.md#metrics.)
        """
        samples = _subsample(np.asarray(samples), max_samples)
        mean_log_p1 = self.test_log_prob_class1(samples).mean(axis=0)
        pred = (np.exp(mean_log_p1) > 0.5).astype(np.float64)
        return float(np.mean(pred == self.y_test))

    def test_log_loss(self, samples: np.ndarray, max_samples: int = 1000) -> float:
        """Held-out log-loss of the posterior-predictive (arithmetic model average)."""
        samples = _subsample(np.asarray(samples), max_samples)
        logits = np.asarray(samples, np.float64) @ np.asarray(self.x_test, np.float64).T
        log_p1 = -np.logaddexp(0.0, -logits)
        log_p0 = -np.logaddexp(0.0, logits)
        s = logits.shape[0]
        lp1 = np.logaddexp.reduce(log_p1, axis=0) - np.log(s)
        lp0 = np.logaddexp.reduce(log_p0, axis=0) - np.log(s)
        y = np.asarray(self.y_test, np.float64)
        return float(-np.mean(y * lp1 + (1.0 - y) * lp0))


def _subsample(samples: np.ndarray, max_samples: int) -> np.ndarray:
    if samples.shape[0] <= max_samples:
        return samples
    idx = np.linspace(0, samples.shape[0] - 1, max_samples).round().astype(int)
    return samples[idx]


def logistic_regression(
    num_examples: int = 1_000_000,
    num_features: int = 10,
    train_fraction: float = 0.8,
    seed: int = 42,
    dtype: Any = np.float32,
) -> LogisticRegression:
    """Builds the §14.1 problem (first ``train_fraction`` of rows train, the rest test).

    Args:
      num_examples: ``N`` in total. Default value: ``1_000_000``.
      num_features: ``d``. Default value: ``10``.
      train_fraction: fraction of rows (the first ones) used for training;
        ``round(train_fraction * num_examples)`` must leave at least one training
        and one test row. Default value: ``0.8``.
      seed: NumPy seed of the data generation. Default value: ``42``.
      dtype: dtype of the stored arrays. Default value: ``np.float32``.

    Returns:
      A [`LogisticRegression`][tfp_sgmcmc.models.logistic_regression.LogisticRegression].
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"`train_fraction` must be in (0, 1), got {train_fraction}.")
    n_train = int(round(train_fraction * num_examples))
    # An empty training or test set gives NaN metrics and an unusable estimator.
    if not 1 <= n_train <= num_examples - 1:
        raise ValueError(
            f"`train_fraction` = {train_fraction} of `num_examples` = {num_examples} gives "
            f"{n_train} training and {num_examples - n_train} test rows; both need at least one."
        )
    raw = generate_logistic_regression_data(num_examples, num_features, seed=seed)
    x = raw["x"].astype(dtype)
    y = raw["y"].astype(dtype)
    return LogisticRegression(
        x_train=x[:n_train],
        y_train=y[:n_train],
        x_test=x[n_train:],
        y_test=y[n_train:],
        theta_true=raw["theta_true"],
        sigma_x=raw["sigma_x"],
        num_examples=int(num_examples),
        seed=int(seed),
        dtype=dtype,
    )
