"""Stein discrepancies as ``tfp.experimental.mcmc.Reducer``s.

Both reducers consume the chain one state at a time inside
``tfp.experimental.mcmc.WithReductions`` (under ``tfp.mcmc.sample_chain``; read
``reducer.finalize(kernel_results.reduction_results)`` in ``trace_fn``) or
``tfp.experimental.mcmc.sample_fold``, under ``tf.function(jit_compile=True)``.

**Which score.** By default the score is read from the kernel results
(``score_getter_fn``; default: the innermost ``grads_target_log_prob``). For
the kernels of [`tfp_sgmcmc.kernels`][tfp_sgmcmc.kernels] this is the *stochastic* (minibatch)
score of the state the reducer receives: they evaluate the estimator at the
new state and cache it (``kernels/base.py``), and ``WithReductions`` hands the
reducer the results of the step that produced the state. It costs nothing,
but it is noisy ("stochastic KSD", Gorham et al. 2020). Passing
``score_fn(state)`` instead computes a score (e.g. the full-data
``estimator.score_fn()``) on the kept (thinned) states only — the MAMBA
paper's choice (thin 10, full-batch scores).

**Chains.** A state with ``chain_ndims`` leading batch dimensions is
``chain_ndims`` independent chains; the statistic is computed per chain.

**Arguments both reducers take** after their own (each class documents only its own):

- ``score_fn``: optional ``state -> score`` (same structure as the state), evaluated
  on kept states only. Default value: ``None``.
- ``score_getter_fn``: ``kernel_results -> score``. Default value: ``None``
  ([`get_innermost_score`][tfp_sgmcmc.diagnostics.reducers.get_innermost_score]).
  Give at most one of the two score sources.
- ``thin``: keep every ``thin``-th state (an int ``≥ 1``). Default value: ``1``.
- ``chain_ndims``: leading batch (chain) dimensions of the state. Default value: ``0``.
- ``name``: name scope. Default value: ``None``.

#### References

1. J. Gorham, L. Mackey. Measuring sample quality with kernels. ICML 2017.
2. W. Jitkrittum et al. A linear-time kernel goodness-of-fit test. NeurIPS 2017.
3. J. Gorham, A. Raj, L. Mackey. Stochastic Stein discrepancies. NeurIPS 2020.
4. J. Coullon, L. South, C. Nemeth. Efficient and generalizable tuning
   strategies for stochastic gradient MCMC. Statistics and Computing, 2023.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.diagnostics.fssd import (
    fssd_features,
    fssd_statistic_from_sums,
    validate_fssd_kernel,
)
from tfp_sgmcmc.diagnostics.ksd import DEFAULT_BLOCK_SIZE, BlockedKSD, check_ksd_arguments
from tfp_sgmcmc.internal.stein_inputs import flatten_parts
from tfp_sgmcmc.internal.util import AttributeView, get_outermost

__all__ = [
    "get_innermost_score",
    "KSDReducer",
    "KSDReducerState",
    "FSSDReducer",
    "FSSDReducerState",
]


def get_innermost_score(kernel_results: Any) -> Any:
    """The innermost ``grads_target_log_prob`` of (possibly wrapped) kernel results.

    Follows ``inner_results`` (``WithReductions``, ``SampleDiscardingKernel``,
    ``ThinningKernel`` ...) and ``accepted_results`` (TFP's Metropolis-Hastings
    kernels) until a results tuple with that field is found.

    Raises:
      ValueError: no ``grads_target_log_prob`` anywhere in the nest.
    """
    score = get_outermost(
        kernel_results, "grads_target_log_prob", nested_attrs=("inner_results", "accepted_results")
    )
    if score is None:
        raise ValueError(
            "`score_getter_fn`: the kernel results carry no `grads_target_log_prob`; "
            "pass `score_fn` or a `score_getter_fn`."
        )
    return score


class _SteinReducerBase(tfp.experimental.mcmc.Reducer):
    """Score plumbing and thinning shared by the two reducers."""

    def __init__(
        self,
        score_fn: Callable[[Any], Any] | None,
        score_getter_fn: Callable[[Any], Any] | None,
        thin: int,
        chain_ndims: int,
    ) -> None:
        if score_fn is not None and score_getter_fn is not None:
            raise ValueError("Pass at most one of `score_fn` and `score_getter_fn`.")
        if score_fn is not None and not callable(score_fn):
            raise ValueError("`score_fn` must be callable.")
        if score_getter_fn is not None and not callable(score_getter_fn):
            raise ValueError("`score_getter_fn` must be callable.")
        if not isinstance(thin, (int, np.integer)) or thin < 1:
            raise ValueError(f"`thin` must be an int >= 1, got {thin!r}.")
        if not isinstance(chain_ndims, (int, np.integer)) or chain_ndims < 0:
            raise ValueError(f"`chain_ndims` must be an int >= 0, got {chain_ndims!r}.")
        self._score_fn = score_fn
        self._score_getter_fn = score_getter_fn or get_innermost_score
        self._thin = int(thin)
        self._chain_ndims = int(chain_ndims)
        # The constructor's arguments; each reducer adds its own.
        self._parameters = dict(
            score_fn=score_fn, score_getter_fn=score_getter_fn, thin=thin, chain_ndims=chain_ndims
        )

    parameters = AttributeView[dict[str, Any]]("_parameters")

    thin = AttributeView[int]("_thin")

    chain_ndims = AttributeView[int]("_chain_ndims")

    def _flat_state(self, state: Any) -> tf.Tensor:
        return flatten_parts(state, "chain_state", self._chain_ndims)

    def _flat_score(self, state: Any, kernel_results: Any) -> tf.Tensor:
        if self._score_fn is not None:
            score = self._score_fn(state)
        else:
            score = self._score_getter_fn(kernel_results)
        return flatten_parts(score, "score", self._chain_ndims)

    def _keep(self, seen: tf.Tensor) -> tf.Tensor:
        # Keep the last state of every window of `thin` states (steps thin, 2·thin, ...).
        return tf.equal(tf.math.floormod(seen + 1, self._thin), 0)

    def _accumulate(self, state: Any, x: tf.Tensor, score: tf.Tensor) -> tuple[tf.Tensor, ...]:
        """The reducer state's fields but ``num_seen`` after taking in one kept sample."""
        raise NotImplementedError

    def one_step(
        self, new_chain_state, current_reducer_state, previous_kernel_results=None, axis=None
    ):
        if axis is not None:
            raise ValueError(
                f"`axis` is not supported by {type(self).__name__} (use `chain_ndims`)."
            )
        with tf.name_scope(f"{self._name}/one_step"):
            st = current_reducer_state

            def take():
                x = self._flat_state(new_chain_state)
                s = self._flat_score(new_chain_state, previous_kernel_results)
                return self._accumulate(st, x, s)

            if self._thin == 1:
                fields = take()
            else:
                # A skipped sample leaves every field but the counter ``num_seen`` (last).
                fields = tf.cond(self._keep(st.num_seen), take, lambda: tuple(st)[:-1])
            return type(st)(*fields, st.num_seen + 1)


class FSSDReducerState(NamedTuple):
    """Streaming FSSD state: O(J·d) per chain.

    Attributes:
      num_samples: kept states so far (float64, per chain).
      sum_tau: ``Σ τ(x_i)``, float64 ``[*chains, J, d]``.
      sum_sq_tau: ``Σ ‖τ(x_i)‖²``, float64 ``[*chains]``.
      num_seen: states received (int32, thinning counter).
    """

    num_samples: tf.Tensor
    sum_tau: tf.Tensor
    sum_sq_tau: tf.Tensor
    num_seen: tf.Tensor


class FSSDReducer(_SteinReducerBase):
    """Streaming linear-time ``FSSD²_U`` of a chain at fixed test locations.

    State ``(n, Σ τ_i, Σ ‖τ_i‖²)``; ``finalize`` returns
    ``FSSD²_U = (‖Σ τ_i‖² − Σ ‖τ_i‖²)/(n(n−1))`` per chain (equal to
    `fssd` on the kept states), NaN while
    ``n < 2`` or if a kept state or score was non-finite. See the module
    docstring for the score source. ``finalize`` returns float64 (the sums
    are accumulated in float64 whatever the state dtype).

    Besides the arguments below, it takes ``score_fn``, ``score_getter_fn``, ``thin``,
    ``chain_ndims`` and ``name``, which both reducers share
    ([`tfp_sgmcmc.diagnostics.reducers`][tfp_sgmcmc.diagnostics.reducers]).

    Args:
      locations: ``[J, d]`` test locations in the flattened state coordinates
        (e.g. from [`fssd_opt`][tfp_sgmcmc.diagnostics.fssd_opt] on a pilot run).
      kernel: ``"imq"`` or ``"gaussian"``. Default value: ``"imq"``.
      bandwidth: Gaussian ``σ`` (required for ``"gaussian"``). Default value: ``None``.
      c: IMQ scale ``c > 0``. Default value: ``1.``.
      beta: IMQ exponent in ``(−1, 0)``. Default value: ``-0.5``.

    Raises:
      ValueError: bad kernel arguments, ``J < 1``, ``thin < 1``, non-finite
        ``locations``, or both score sources given.

    #### References

    1. W. Jitkrittum et al. A linear-time kernel goodness-of-fit test. NeurIPS 2017.
    """

    def __init__(
        self,
        locations: Any,
        kernel: str = "imq",
        bandwidth: Any = None,
        c: float = 1.0,
        beta: float = -0.5,
        score_fn: Callable[[Any], Any] | None = None,
        score_getter_fn: Callable[[Any], Any] | None = None,
        thin: int = 1,
        chain_ndims: int = 0,
        name: str | None = None,
    ) -> None:
        super().__init__(score_fn, score_getter_fn, thin, chain_ndims)
        validate_fssd_kernel(kernel, bandwidth, c, beta)
        if kernel == "gaussian" and bandwidth is None:
            raise ValueError("`bandwidth` is required for the streaming Gaussian FSSD.")
        v = np.asarray(locations)
        if v.ndim != 2 or v.shape[0] < 1 or v.shape[1] < 1:
            raise ValueError(f"`locations` must be [J, d] with J >= 1, got shape {v.shape}.")
        if not np.all(np.isfinite(v)):
            raise ValueError("`locations` contains non-finite values (NaN or Inf).")
        self._locations = v
        self._kernel = kernel
        self._bandwidth = bandwidth
        self._c = c
        self._beta = beta
        self._name = name or "fssd_reducer"
        self._parameters.update(
            locations=locations, kernel=kernel, bandwidth=bandwidth, c=c, beta=beta, name=name
        )

    def initialize(self, initial_chain_state: Any, initial_kernel_results: Any = None):
        with tf.name_scope(f"{self._name}/initialize"):
            x = self._flat_state(initial_chain_state)
            if x.shape[-1] is not None and x.shape[-1] != self._locations.shape[1]:
                raise ValueError(
                    f"`locations` have dimension {self._locations.shape[1]} but the flattened "
                    f"state has {x.shape[-1]}."
                )
            batch = tf.shape(x)[:-1]
            return FSSDReducerState(
                num_samples=tf.zeros(batch, tf.float64),
                sum_tau=tf.zeros(tf.concat([batch, self._locations.shape], 0), tf.float64),
                sum_sq_tau=tf.zeros(batch, tf.float64),
                num_seen=tf.constant(0, tf.int32),
            )

    def _accumulate(self, state, x, score):
        bandwidth = 1.0 if self._bandwidth is None else self._bandwidth
        tau = tf.cast(
            fssd_features(x, score, self._locations, self._kernel, bandwidth, self._c, self._beta),
            tf.float64,
        )
        return (
            state.num_samples + 1.0,
            state.sum_tau + tau,
            state.sum_sq_tau + tf.reduce_sum(tau * tau, axis=[-2, -1]),
        )

    def finalize(self, final_reducer_state):
        st = final_reducer_state
        stat = fssd_statistic_from_sums(st.num_samples, st.sum_tau, st.sum_sq_tau)
        return tf.where(st.num_samples >= 2.0, stat, tf.constant(np.nan, tf.float64))


class KSDReducerState(NamedTuple):
    """Bounded buffer of the most recent kept states and scores.

    Attributes:
      samples: ``[capacity, *chains, d]`` ring buffer of flattened states.
      scores: ``[capacity, *chains, d]`` their scores.
      num_stored: states kept so far (may exceed capacity; int32).
      num_seen: states received (int32, thinning counter).
    """

    samples: tf.Tensor
    scores: tf.Tensor
    num_stored: tf.Tensor
    num_seen: tf.Tensor


class KSDReducer(_SteinReducerBase):
    """Kernel Stein discrepancy over a bounded, thinned buffer of the chain.

    Every ``thin``-th state and its score enter a ring buffer of ``capacity``
    rows (the oldest is overwritten once it is full), so memory is
    O(capacity·d) and ``finalize`` costs O(capacity²·d): it returns
    [`kernel_stein_discrepancy`][tfp_sgmcmc.diagnostics.kernel_stein_discrepancy] of the buffered
    states (V-statistic KSD by default, or KSD²_U), per chain. Read in a
    ``trace_fn`` at every step it gives a moving-window KSD trace. See the
    module docstring for the score source.

    Besides the arguments below, it takes ``score_fn``, ``score_getter_fn``, ``thin``,
    ``chain_ndims`` and ``name``, which both reducers share
    ([`tfp_sgmcmc.diagnostics.reducers`][tfp_sgmcmc.diagnostics.reducers]).

    Args:
      capacity: buffer rows (most recent kept states). Default value: ``1000``.
      kernel: ``"imq"`` or ``"rbf"``. Default value: ``"imq"``.
      c: IMQ scale. Default value: ``1.``.
      beta: IMQ exponent. Default value: ``-0.5``.
      bandwidth: RBF length scale (``None`` = median heuristic). Default value: ``None``.
      statistic: ``"v"`` or ``"u"``. Default value: ``"v"``.
      block_size: KSD block size. Default value: ``1024``.

    Raises:
      ValueError: bad KSD arguments, ``capacity < 2`` (``< 1`` for V),
        ``thin < 1``, or both score sources given.

    #### References

    1. J. Gorham, L. Mackey. Measuring sample quality with kernels. ICML 2017.
    2. J. Coullon, L. South, C. Nemeth. Efficient and generalizable tuning
       strategies for stochastic gradient MCMC. Statistics and Computing, 2023.
    """

    def __init__(
        self,
        capacity: int = 1000,
        kernel: str = "imq",
        c: float = 1.0,
        beta: float = -0.5,
        bandwidth: Any = None,
        statistic: str = "v",
        block_size: int = DEFAULT_BLOCK_SIZE,
        score_fn: Callable[[Any], Any] | None = None,
        score_getter_fn: Callable[[Any], Any] | None = None,
        thin: int = 1,
        chain_ndims: int = 0,
        name: str | None = None,
    ) -> None:
        super().__init__(score_fn, score_getter_fn, thin, chain_ndims)
        check_ksd_arguments(kernel, c, beta, bandwidth, statistic, block_size)
        min_cap = 2 if statistic == "u" else 1
        if not isinstance(capacity, (int, np.integer)) or capacity < min_cap:
            raise ValueError(
                f"`capacity` must be an int >= {min_cap} for statistic={statistic!r}, "
                f"got {capacity!r}."
            )
        self._capacity = int(capacity)
        # The unit metric, no XLA of its own: finalize runs inside the caller's program.
        self._ksd = BlockedKSD(
            kernel, c, beta, bandwidth, statistic, int(block_size), jit_compile=False, metric=None
        )
        self._name = name or "ksd_reducer"
        self._parameters.update(
            kernel=kernel, c=c, beta=beta, bandwidth=bandwidth, statistic=statistic,
            block_size=block_size, capacity=capacity,
        )  # fmt: skip
        self._parameters["name"] = name

    capacity = AttributeView[int]("_capacity")

    def initialize(self, initial_chain_state: Any, initial_kernel_results: Any = None):
        with tf.name_scope(f"{self._name}/initialize"):
            x = self._flat_state(initial_chain_state)
            shape = tf.concat([[self._capacity], tf.shape(x)], 0)
            buf = tf.zeros(shape, x.dtype)
            return KSDReducerState(buf, buf, tf.constant(0, tf.int32), tf.constant(0, tf.int32))

    def _accumulate(self, state, x, score):
        # A ring buffer: the newest sample overwrites the oldest once it is full.
        idx = tf.math.floormod(state.num_stored, self._capacity)[None, None]
        return (
            tf.tensor_scatter_nd_update(state.samples, idx, x[None]),
            tf.tensor_scatter_nd_update(state.scores, idx, tf.cast(score, x.dtype)[None]),
            state.num_stored + 1,
        )

    def finalize(self, final_reducer_state):
        st = final_reducer_state
        cap = self._capacity
        count = tf.minimum(st.num_stored, cap)
        weights = tf.cast(tf.range(cap) < count, st.samples.dtype)
        if self._ksd.kernel == "rbf" and self._ksd.bandwidth is None:
            # The median heuristic subsamples rows in time order, as the batch
            # function on the kept states does: unroll a buffer that has wrapped
            # (the oldest row sits at the write position). KSD itself ignores order.
            start = tf.where(st.num_stored > cap, tf.math.floormod(st.num_stored, cap), 0)
            st = st._replace(
                samples=tf.roll(st.samples, -start, axis=0),
                scores=tf.roll(st.scores, -start, axis=0),
            )
        rank = st.samples.shape.rank
        d = tf.shape(st.samples)[-1]
        min_n = 2 if self._ksd.statistic == "u" else 1
        if rank == 2:
            # One chain: no map over chains (keeps the compiled graph small).
            val = self._ksd(st.samples, st.scores, weights, eager_checks=False)
            return tf.where(count >= min_n, val, tf.constant(np.nan, val.dtype))
        # [cap, *chains, d] -> [chains, cap, d]: one KSD per chain.
        perm = list(range(1, rank - 1)) + [0, rank - 1]
        xs = tf.reshape(tf.transpose(st.samples, perm), [-1, cap, d])
        ss = tf.reshape(tf.transpose(st.scores, perm), [-1, cap, d])

        def one(args):
            x, s = args
            return self._ksd(x, s, weights, eager_checks=False)

        vals = tf.map_fn(one, (xs, ss), fn_output_signature=st.samples.dtype)
        vals = tf.reshape(vals, tf.shape(st.samples)[1:-1])
        return tf.where(count >= min_n, vals, tf.constant(np.nan, vals.dtype))
