r"""The minibatch estimator: the one place that knows the N/n scaling.

For a batch ``S`` of ``n`` of the ``N`` examples,

$$
\log \tilde\pi(\theta) = \log p(\theta) + \frac{N}{n} \sum_{i \in S} \log p(x_i \mid \theta),
\qquad
\nabla \log \tilde\pi(\theta) = \nabla \log p(\theta)
    + \frac{N}{n} \sum_{i \in S} \nabla \log p(x_i \mid \theta)
$$

is unbiased for ``log π(θ)`` and ``∇ log π(θ)`` under every scheme of
[`tfp_sgmcmc.data`][tfp_sgmcmc.data] (each example's inclusion probability is ``n/N``).
The prior enters exactly once (the MAMBA paper, §2.1, writes the same estimator with the
prior spread as ``(1/N) log p`` over the examples; the two are identical).
Temperature is *not* applied here: it is a kernel argument multiplying the
injected noise variance, so ``temperature = 0`` turns any sampler into its
optimiser (see ``docs/conventions.md``).

#### References

[1]: Max Welling and Yee Whye Teh. Bayesian Learning via Stochastic Gradient
     Langevin Dynamics. In _ICML_, 2011.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.data import BatchState, DataSource, InMemoryData
from tfp_sgmcmc.estimators.base import (
    GradientEstimate,
    GradientEstimator,
    value_and_gradient_parts,
)
from tfp_sgmcmc.internal.util import RNG_ALG, as_parts, cast_param, check_int, check_positive

__all__ = ["MinibatchEstimator", "NoisyGradientEstimator"]

LogPriorFn = Callable[[Any], tf.Tensor]
LogLikelihoodFn = Callable[[Any, Any], tf.Tensor]


class MinibatchEstimator(GradientEstimator):
    """Unbiased minibatch estimate of the log-posterior and its gradient.

    Args:
      log_likelihood_fn: ``(state, batch) -> per-example log-likelihoods`` of
        shape ``batch_shape + [n]``, where ``state`` has the structure the
        kernel is given (a tensor or a list of parts, with optional leading
        chain dimensions ``batch_shape``) and ``batch`` has the structure of
        the data with leading dimension ``n``.
      data: an [`InMemoryData`][tfp_sgmcmc.data.InMemoryData], a
        [`DatasetData`][tfp_sgmcmc.data.DatasetData], or arrays (wrapped in
        ``InMemoryData`` with the default ``"epoch"`` scheme).
      batch_size: ``n``, a Python int in ``[1, N]`` (a static shape: a new
        batch size is a new compiled program).
      log_prior_fn: ``state -> log p(θ)`` of shape ``batch_shape``.
        Default value: ``None`` (flat prior).
      full_data_chunk_size: rows per chunk when summing over all the data
        (control-variate anchor, MAP, full-data scores). Default value:
        ``100_000``.

    Raises:
      ValueError: ``batch_size`` outside ``[1, N]`` or not an int; a non-callable
        ``log_likelihood_fn``/``log_prior_fn``.
    """

    def __init__(
        self,
        log_likelihood_fn: LogLikelihoodFn,
        data: DataSource | Any,
        batch_size: int,
        log_prior_fn: LogPriorFn | None = None,
        full_data_chunk_size: int = 100_000,
    ) -> None:
        super().__init__()
        if not callable(log_likelihood_fn):
            raise ValueError("`log_likelihood_fn` must be callable (state, batch) -> log-lik.")
        if log_prior_fn is not None and not callable(log_prior_fn):
            raise ValueError("`log_prior_fn` must be callable (state) -> log-prior, or None.")
        if not isinstance(data, DataSource):
            data = InMemoryData(data)
        data.prepare(batch_size)
        full_data_chunk_size = check_int(full_data_chunk_size, "full_data_chunk_size", 1)
        self._log_likelihood_fn = log_likelihood_fn
        self._log_prior_fn = log_prior_fn
        self._data = data
        self._batch_size = int(batch_size)
        self._chunk = int(full_data_chunk_size)

    # -- configuration ---------------------------------------------------- #
    @property
    def data(self) -> DataSource:
        return self._data

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def num_examples(self) -> int:
        return self._data.num_examples

    @property
    def dtype(self) -> tf.DType | None:
        return self._data.float_dtype

    @property
    def log_likelihood_fn(self) -> LogLikelihoodFn:
        return self._log_likelihood_fn

    @property
    def log_prior_fn(self) -> LogPriorFn | None:
        return self._log_prior_fn

    def with_batch_size(self, batch_size: int) -> MinibatchEstimator:
        """The same model and data with another batch size."""
        return MinibatchEstimator(
            self._log_likelihood_fn,
            self._data,
            batch_size,
            log_prior_fn=self._log_prior_fn,
            full_data_chunk_size=self._chunk,
        )

    # -- pieces reused by wrappers (control variates, structured energies) -- #
    def log_prior(self, state: Any) -> tf.Tensor:
        """``log p(θ)``; a scalar zero (broadcasting) for a flat prior."""
        if self._log_prior_fn is None:
            return tf.zeros([], as_parts(state)[0].dtype)
        return self._log_prior_fn(state)

    def scaled_log_likelihood(self, state: Any, batch: Any, num_rows: int) -> tf.Tensor:
        """``(N/num_rows) Σ_{i∈batch} log p(x_i | θ)``."""
        ll = self._log_likelihood_fn(state, batch)
        if ll.shape.rank is not None and ll.shape.rank >= 1 and ll.shape[-1] is not None:
            if int(ll.shape[-1]) != num_rows:
                raise ValueError(
                    "`log_likelihood_fn` must return one log-likelihood per example (last "
                    f"axis of length {num_rows}), got shape {ll.shape.as_list()}."
                )
        scale = tf.constant(self.num_examples / num_rows, ll.dtype)
        return scale * tf.reduce_sum(ll, axis=-1)

    def log_prob_on_batch(self, state: Any, batch: Any, include_prior: bool = True) -> tf.Tensor:
        """The minibatch log-posterior estimate on a given ``batch`` of ``n`` rows."""
        n = int(tf.nest.flatten(batch)[0].shape[0])
        out = self.scaled_log_likelihood(state, batch, n)
        if include_prior and self._log_prior_fn is not None:
            out = out + self._log_prior_fn(state)
        return out

    def sample_batch(self, estimator_state: BatchState, seed: tf.Tensor) -> tuple[Any, BatchState]:
        return self._data.sample_batch(self._batch_size, estimator_state, seed)

    # -- protocol ------------------------------------------------------------ #
    def bootstrap(self, state: Any) -> BatchState:
        del state
        return self._data.init_batch_state()

    def _estimate(
        self, state: Any, estimator_state: BatchState, seed: tf.Tensor
    ) -> tuple[GradientEstimate, BatchState]:
        batch, new_state = self.sample_batch(estimator_state, seed)
        value, grads = value_and_gradient_parts(lambda s: self.log_prob_on_batch(s, batch), state)
        return GradientEstimate(value, grads), new_state

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        """Exact ``log π(θ)`` and score, summing the likelihood over all chunks."""

        def full(s: Any) -> tf.Tensor:
            total = None
            for chunk in self._data.full_batches(self._chunk):
                ll = tf.reduce_sum(self._log_likelihood_fn(s, chunk), axis=-1)
                total = ll if total is None else total + ll
            if self._log_prior_fn is not None:
                total = total + self._log_prior_fn(s)
            return total

        value, grads = value_and_gradient_parts(full, state)
        return GradientEstimate(value, grads)

    def __repr__(self) -> str:
        return (
            f"MinibatchEstimator(N={self.num_examples}, batch_size={self._batch_size}, "
            f"data={self._data!r})"
        )


class NoisyGradientEstimator(GradientEstimator):
    """Exact gradient of a target plus Gaussian noise: ``∇ log π(θ) + s·e``, ``e ~ N(0, I)``.

    The synthetic "stochastic gradient" of the adaptive-drift paper's toy
    studies (Kim, Song & Liang, §4.1: ``∇Ũ(θ) = ∇U(θ) + e``) and, with
    ``noise_scale = 0``, a full-gradient estimator for any differentiable
    ``target_log_prob_fn``. The noise is drawn independently for every chain
    and part from the seed.

    Args:
      target_log_prob_fn: ``state -> log π(θ)`` (batch shape = chains).
      noise_scale: ``s ≥ 0``, the standard deviation of the added noise.
        Default value: ``0.``.
    """

    def __init__(self, target_log_prob_fn: Callable[[Any], tf.Tensor], noise_scale: Any = 0.0):
        super().__init__()
        if not callable(target_log_prob_fn):
            raise ValueError("`target_log_prob_fn` must be callable.")
        check_positive(noise_scale, "noise_scale", allow_zero=True)
        self._fn = target_log_prob_fn
        self._noise_scale = noise_scale

    @property
    def dtype(self) -> tf.DType | None:
        return None

    @property
    def target_log_prob_fn(self) -> Callable[[Any], tf.Tensor]:
        return self._fn

    @property
    def noise_scale(self) -> Any:
        return self._noise_scale

    def bootstrap(self, state: Any) -> tuple:
        del state
        return ()

    def _estimate(self, state: Any, estimator_state: tuple, seed: tf.Tensor):
        value, grads = value_and_gradient_parts(self._fn, state)
        seeds = tf.unstack(tf.random.experimental.stateless_split(seed, len(grads)))
        noisy = []
        for g, s in zip(grads, seeds):
            scale = cast_param(self._noise_scale, g.dtype)  # exact in float64
            e = tf.random.stateless_normal(tf.shape(g), seed=s, dtype=g.dtype, alg=RNG_ALG)
            noisy.append(g + scale * e)
        return GradientEstimate(value, noisy), estimator_state

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        value, grads = value_and_gradient_parts(self._fn, state)
        return GradientEstimate(value, grads)

