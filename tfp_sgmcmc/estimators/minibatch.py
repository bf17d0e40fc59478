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

Chains. A state may carry leading chain dimensions ``B``. By default every
chain sees the same batch ``S`` at a step, so the chains' gradient noises
``(N/n) Σ_{i∈S} ∇ log p(x_i|θ_c) − Σ_i ∇ log p(x_i|θ_c)`` are correlated
(for a linear-Gaussian likelihood they are *identical*). With
``independent_chains=True`` chain ``c`` draws its own batch ``S_c``
(independent across chains given the step's seed, each with the scheme's
law), so the ``C = |B|`` chains are independent Markov chains, as if run in
separate programs: between-chain variances, R-hat and multi-chain ESS mean
what they say. The likelihood is then evaluated per chain with
``tf.vectorized_map`` over the flattened chains, so ``log_likelihood_fn``
keeps its single-chain contract. Cost: ``C × n`` gathered rows instead of
``n`` per step (measured in ``docs/estimators.md``).

#### References

[1]: Max Welling and Yee Whye Teh. Bayesian Learning via Stochastic Gradient
     Langevin Dynamics. In _ICML_, 2011.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data import DataSource, InMemoryData
from tfp_sgmcmc.data.base import BatchState
from tfp_sgmcmc.estimators.base import (
    GradientEstimate,
    GradientEstimator,
    value_and_gradient_parts,
)
from tfp_sgmcmc.internal import random as rng
from tfp_sgmcmc.internal.autograph import autograph_context, call_user
from tfp_sgmcmc.internal.util import (
    AttributeView,
    as_parts,
    cast_param,
    check_int,
    check_positive,
    is_list_like,
    restructure,
)

__all__ = ["MinibatchEstimator", "NoisyGradientEstimator"]

LogPriorFn = Callable[[Any], tf.Tensor]
LogLikelihoodFn = Callable[[Any, Any], tf.Tensor]


def _check_per_example(ll: tf.Tensor, num_rows: int | None) -> None:
    """``log_likelihood_fn`` returned ``[..., n]`` (one value per example), statically."""
    if ll.shape.rank == 0:
        raise ValueError(
            "`log_likelihood_fn` must return one log-likelihood per example (shape [..., n]), "
            "got a scalar: return the per-example values, not their sum."
        )
    if ll.shape.rank is not None and ll.shape[-1] is not None and num_rows is not None:
        if int(ll.shape[-1]) != int(num_rows):
            raise ValueError(
                "`log_likelihood_fn` must return one log-likelihood per example (last "
                f"axis of length {num_rows}), got shape {ll.shape.as_list()}."
            )


#: Errors TensorFlow raises for a state, data or model that do not fit together: a
#: shape or dtype mismatch inside an op (eagerly ``InvalidArgumentError``; while a graph
#: is built ``ValueError`` or ``TypeError``).
_MODEL_ERRORS = (tf.errors.InvalidArgumentError, TypeError, ValueError)


def _describe(value: Any) -> str:
    """``float32[2, 3]``-style shapes and dtypes of a nest of tensors or arrays."""
    out = []
    for leaf in tf.nest.flatten(value):
        dtype = getattr(leaf, "dtype", None)
        name = getattr(dtype, "name", None) or str(np.asarray(leaf).dtype)
        out.append(f"{name}{list(np.shape(leaf))}")
    return ", ".join(out)


def _gist(error: BaseException, limit: int = 300) -> str:
    """What an error says: for a TensorFlow op error (whose text goes on with the graph's
    nodes) its first line, without the ``{{function_node}}`` prefix of eager kernels."""
    text = str(error).strip() or type(error).__name__
    if not isinstance(error, tf.errors.OpError):
        return text
    text = text.splitlines()[0]
    if text.startswith("{{function_node"):
        text = text.split("}}", 1)[-1].strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _computed_from(tensor: tf.Tensor, sources: list[tf.Tensor]) -> bool:
    """Whether a graph tensor is computed from any of ``sources`` (its ops' inputs, walked
    back; a nested function's call or a loop takes its inputs as any op does)."""
    targets = {s.ref() for s in sources}
    seen: set[str] = set()
    pending = [tensor]
    while pending:
        t = pending.pop()
        if t.ref() in targets:
            return True
        if t.op.name not in seen:
            seen.add(t.op.name)
            pending.extend(t.op.inputs)
    return False


def _named(error: BaseException) -> bool:
    """A ``ValueError`` or ``TypeError`` that already names its argument (this library's
    errors start with it, in backticks): passed on as it is."""
    return type(error) in (ValueError, TypeError) and str(error).startswith("`")


def _float_output(value: Any, fn_name: str, dtype: tf.DType, what: str) -> tf.Tensor:
    """``value`` as a tensor of the state's float ``dtype``; ``ValueError`` naming
    ``fn_name`` otherwise (statically: it costs nothing in a compiled step).

    ``None``, integers and another float dtype used to fail later inside TensorFlow
    (``'NoneType' object has no attribute 'shape'``, an ``AddV2`` of float64 and
    float32) or, for an int, in the scaling by ``N/n``.
    """
    if value is None:
        raise ValueError(
            f"`{fn_name}` returned None; it must return {what} as a {dtype.name} tensor "
            "(did it forget a `return`?)."
        )
    try:
        value = tf.convert_to_tensor(value, dtype_hint=dtype)
    except _MODEL_ERRORS as e:
        raise ValueError(
            f"`{fn_name}` must return {what} as a {dtype.name} tensor, got "
            f"{type(value).__name__}: {_gist(e)}"
        ) from e
    if value.dtype != dtype:
        raise ValueError(
            f"`{fn_name}` must return {what} of the state's dtype {dtype.name}, got "
            f"{value.dtype.name}: cast the result (or the data it reads) to {dtype.name}."
        )
    return value


def _mapped_over_chains(
    one: Callable[[tuple], tf.Tensor], parts: list[tf.Tensor], batch: list[tf.Tensor]
) -> tf.Tensor:
    """``tf.vectorized_map(one, (parts, batch))``, differentiable in ``parts`` under XLA
    without making the state a compile-time constant.

    Under XLA, ``tf.vectorized_map`` runs the vectorised body as a nested function. A
    gradient taken through it feeds intermediates of that function (for example a
    reduction's shifted axis) to ops that need compile-time constants, so XLA's
    constant analysis marks the function's inputs -- the chains' states, hence the
    step size and seed they depend on -- as compile-time constants: every new value
    of them compiled the program again (seconds each). The backward pass here
    recomputes each chain's vector-Jacobian product inside its own vectorised
    map instead: the same gradient, at the cost of one more likelihood
    evaluation, and nothing crosses the function boundary that must be constant.
    """

    @tf.custom_gradient
    def mapped(*ps: tf.Tensor):
        ll = tf.vectorized_map(one, (list(ps), batch))

        def grad(upstream: tf.Tensor, variables: Any = None):
            variables = list(variables or [])

            def vjp(args: tuple) -> tuple[list[tf.Tensor], list[tf.Tensor]]:
                ps_i, bs_i, up_i = args
                with tf.GradientTape() as tape:
                    tape.watch(ps_i)
                    value = one((ps_i, bs_i))
                g_ps, g_vars = tape.gradient(
                    value, (list(ps_i), variables), output_gradients=up_i,
                    unconnected_gradients=tf.UnconnectedGradients.ZERO,
                )
                return list(g_ps), list(g_vars)

            g_ps, g_vars = tf.vectorized_map(vjp, (list(ps), batch, upstream))
            if variables:  # variables the likelihood reads: summed over the chains
                return list(g_ps), [tf.reduce_sum(g, 0) for g in g_vars]
            return list(g_ps)

        return ll, grad

    return mapped(*parts)


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
      independent_chains: draw one minibatch per chain (module docstring), so
        chains in one program are independent. Needs an
        [`InMemoryData`][tfp_sgmcmc.data.InMemoryData] source. Default value:
        ``False`` (one batch shared by all chains: cheaper, and enough for a
        single chain).

    Both functions may use Python control flow on tensors (``if tf.reduce_sum(x) > 0:``):
    inside a compiled program they are converted by AutoGraph (``tf.autograph``) where
    the estimator calls them, as ``tf.function`` converts the functions it calls; the
    library's own code is traced without AutoGraph. A function given while AutoGraph is
    off (``tf.autograph.experimental.do_not_convert``, or built inside
    ``tf.function(autograph=False)``) runs as written. Eagerly they run as written.

    Raises:
      ValueError: ``batch_size`` outside ``[1, N]`` or not an int; a non-callable
        ``log_likelihood_fn``/``log_prior_fn``; ``independent_chains`` not a
        bool, or set with a data source other than ``InMemoryData``; ``data`` is
        ``None`` or holds something that is no array. Later, naming the function:
        ``log_likelihood_fn`` or ``log_prior_fn`` fails inside TensorFlow, returns
        ``None``, integers or another dtype than the state's, or (the prior) not one
        value per chain; and, at the first eager estimate, a log-likelihood whose
        gradient never reaches the state, or one that ignores the chain dimension
        (``ll(theta[0], batch)`` for a ``[2, d]`` state: see ``_estimate``).
    """

    def __init__(
        self,
        log_likelihood_fn: LogLikelihoodFn,
        data: DataSource | Any,
        batch_size: int,
        log_prior_fn: LogPriorFn | None = None,
        full_data_chunk_size: int = 100_000,
        independent_chains: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(independent_chains, (bool, np.bool_)):
            raise ValueError(
                f"`independent_chains` must be a bool, got {type(independent_chains).__name__}."
            )
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
        # Whether AutoGraph converts them while traced (internal.autograph.call_user).
        self._autograph = autograph_context()
        self._data = data
        self._batch_size = int(batch_size)
        self._chunk = int(full_data_chunk_size)
        if independent_chains and not isinstance(data, InMemoryData):
            raise ValueError(
                "`independent_chains=True` needs an InMemoryData source (a tf.data iterator "
                f"yields one batch per step), got {type(data).__name__}."
            )
        self._independent = bool(independent_chains)
        # State signatures (structure, shapes, dtype) whose first eager estimate was
        # checked (see `_estimate`), the one `bootstrap` last saw, and the argument name
        # errors use while that first estimate runs.
        self._checked: set[tuple] = set()
        self._initial_signature: tuple | None = None
        self._naming: str | None = None

    # -- configuration ---------------------------------------------------- #
    data = AttributeView[DataSource]("_data")

    batch_size = AttributeView[int]("_batch_size")

    num_examples = AttributeView[int]("_data.num_examples")

    dtype = AttributeView[tf.DType | None]("_data.float_dtype")

    independent_chains = AttributeView[bool]("_independent")
    """Whether each chain draws its own minibatch."""

    log_likelihood_fn = AttributeView[LogLikelihoodFn]("_log_likelihood_fn")

    log_prior_fn = AttributeView[LogPriorFn | None]("_log_prior_fn")

    def with_batch_size(self, batch_size: int) -> MinibatchEstimator:
        """The same model and data with another batch size."""
        return self._same_autograph(
            MinibatchEstimator(
                self._log_likelihood_fn,
                self._data,
                batch_size,
                log_prior_fn=self._log_prior_fn,
                full_data_chunk_size=self._chunk,
                independent_chains=self._independent,
            )
        )

    def with_independent_chains(self, independent_chains: bool = True) -> MinibatchEstimator:
        """The same model, data and batch size with per-chain (or shared) minibatches."""
        return self._same_autograph(
            MinibatchEstimator(
                self._log_likelihood_fn,
                self._data,
                self._batch_size,
                log_prior_fn=self._log_prior_fn,
                full_data_chunk_size=self._chunk,
                independent_chains=independent_chains,
            )
        )

    def _same_autograph(self, other: MinibatchEstimator) -> MinibatchEstimator:
        """``other``, converting the functions as this estimator does (AutoGraph's status
        where the functions were given, not where the copy is made)."""
        other._autograph = self._autograph
        return other

    # -- pieces reused by wrappers (control variates, structured energies) -- #
    def log_prior(self, state: Any) -> tf.Tensor:
        """``log p(θ)``; a scalar zero (broadcasting) for a flat prior."""
        if self._log_prior_fn is None:
            return tf.zeros([], as_parts(state)[0].dtype)
        return self._call_log_prior(state)

    # -- the user's functions, called with named errors ---------------------- #
    def _failure(
        self, fn_name: str, error: BaseException, state: Any, batch: Any, arg_name: str | None
    ) -> str:
        """The message of a ``ValueError`` for ``fn_name`` failing inside TensorFlow: what
        it was called with, and the likely cause."""
        shown = f"`{arg_name}`" if arg_name else "the state"
        got = f"{shown} ({_describe(state)})"
        if batch is not None:
            got += f" and a minibatch of `data` ({_describe(batch)})"
        hint = "the state's shape and dtype must be those the model expects"
        if batch is not None:
            hint += ", and `data` must hold the arrays it reads with the shapes it reads"
            dtype = as_parts(state)[0].dtype
            kinds = [t.dtype for t in tf.nest.flatten(batch)]
            if dtype.is_floating and not any(k.is_floating for k in kinds):
                hint += (
                    f" (`data` holds no floating array, the state is {dtype.name}: cast the "
                    f"data to {dtype.name}, before or inside `{fn_name}`)"
                )
        return f"`{fn_name}` failed on {got}: {_gist(error)}. Check that {hint}."

    def _call_log_likelihood(self, state: Any, batch: Any, arg_name: str | None = None):
        """``log_likelihood_fn(state, batch)``, a float tensor of the state's dtype.

        Raises:
          ValueError: naming ``log_likelihood_fn`` (and ``arg_name``, ``data``) when it
            fails inside TensorFlow or returns ``None``, integers or another dtype.
        """
        return self._call_model_fn(
            "log_likelihood_fn",
            self._log_likelihood_fn,
            (state, batch),
            arg_name,
            "one log-likelihood per example (shape [..., n])",
        )

    def _call_log_prior(self, state: Any, arg_name: str | None = None) -> tf.Tensor:
        """``log_prior_fn(state)``, a float tensor of the state's dtype (``ValueError``
        naming ``log_prior_fn`` otherwise, as ``_call_log_likelihood``)."""
        return self._call_model_fn(
            "log_prior_fn", self._log_prior_fn, (state,), arg_name, "one log-prior per chain"
        )

    def _call_model_fn(
        self,
        fn_name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        arg_name: str | None,
        what: str,
    ) -> tf.Tensor:
        """The user's ``fn`` (named ``fn_name``) called with ``args`` (the state, then
        the minibatch if any): its value as a float tensor of the state's dtype
        (``_float_output``, which says ``what`` it must return), or a ``ValueError``
        naming ``fn_name`` when it fails inside TensorFlow (``_failure``)."""
        state = args[0]
        batch = args[1] if len(args) > 1 else None
        try:
            # Through AutoGraph while traced: the library's programs are traced
            # without it, the user's function may still branch on tensors.
            value = call_user(fn, self._autograph, *args)
        except _MODEL_ERRORS as e:
            if _named(e):
                raise
            raise ValueError(
                self._failure(fn_name, e, state, batch, arg_name or self._naming)
            ) from e
        return _float_output(value, fn_name, as_parts(state)[0].dtype, what)

    @staticmethod
    def _prior_shape_error(lp_shape: tf.TensorShape, chain_shape: tf.TensorShape) -> ValueError:
        """The ``ValueError`` for a prior that does not give one value per chain."""
        if lp_shape.rank == 0:
            also = " that depends on the state (the chains' priors summed, it seems)"
        elif lp_shape.rank > chain_shape.rank:
            # A prior with more dimensions may be right and the likelihood drop the chains.
            also = (
                " (or, if the prior is right, `log_likelihood_fn` must keep the state's "
                "chain dimensions: values of shape chains + [n])"
            )
        else:
            also = ""
        return ValueError(
            "`log_prior_fn` must return one log-prior per chain, of the chains' shape "
            f"{chain_shape.as_list()} (the shape of `log_likelihood_fn`'s values without the "
            f"example axis), got shape {lp_shape.as_list()}{also}: reduce over the event "
            "dimensions only (e.g. `tf.reduce_sum(..., axis=-1)`), not over the chains."
        )

    def _check_prior_shape(self, lp: tf.Tensor, chain_shape: tf.TensorShape, state: Any) -> None:
        """The prior gives one value per chain: the shape of the likelihood's sum
        (``chain_shape``), where both are known while the step is built.

        A prior summed over the chains broadcast silently (every chain's log-density held
        every chain's prior: the gradients were right, the values wrong), and a
        ``[chains, d]`` prior broadcast to ``[chains, chains]`` or failed in ``AddV2``.
        One value for several chains is right for a constant (a flat prior written by
        hand broadcasts to every chain): it is refused when it is computed from the
        state, which a graph shows while it is built; eagerly the first estimate tells
        from the prior's gradient (``_check_first_estimate``).
        """
        if lp.shape.rank is None or chain_shape.rank is None:
            return
        if lp.shape.rank == 0 and chain_shape.rank > 0:
            if not tf.executing_eagerly() and _computed_from(lp, as_parts(state)):
                raise self._prior_shape_error(lp.shape, chain_shape)
            return
        if lp.shape.rank != chain_shape.rank or not lp.shape.is_compatible_with(chain_shape):
            raise self._prior_shape_error(lp.shape, chain_shape)

    def chain_ndims_of_batch(self, batch: Any) -> int:
        """Leading chain dimensions of a batch (0 for a batch shared by all chains)."""
        if not self._independent:
            return 0
        return int(tf.nest.flatten(batch)[0].shape.rank) - self._data.row_ranks[0]

    def _per_chain_log_likelihood(self, state: Any, batch: Any, chain_ndims: int) -> tf.Tensor:
        """``log p(x_{c,i} | θ_c)`` of shape ``B + [n]``: chain ``c`` on its own rows.

        The chains are flattened and mapped with ``tf.vectorized_map`` so the
        user's ``log_likelihood_fn`` sees one chain's state and an ``[n, ...]``
        batch, as in the shared mode.
        """
        parts = as_parts(state)
        flat_batch = tf.nest.flatten(batch)
        chain_shape = flat_batch[0].shape[:chain_ndims].as_list()
        num_chains = int(np.prod(chain_shape, dtype=np.int64))
        for p in parts:
            if p.shape[:chain_ndims].as_list() != chain_shape:
                raise ValueError(
                    f"independent chains: state part of shape {p.shape.as_list()} does not "
                    f"lead with the chain shape {chain_shape} of the estimator state."
                )
        parts_c = [tf.reshape(p, [num_chains, *p.shape[chain_ndims:]]) for p in parts]
        batch_c = [tf.reshape(t, [num_chains, *t.shape[chain_ndims:]]) for t in flat_batch]
        structure = self._data.arrays

        def one(args: tuple) -> tf.Tensor:
            ps, bs = args
            return self._call_log_likelihood(
                restructure(list(ps), state), tf.nest.pack_sequence_as(structure, list(bs))
            )

        ll = _mapped_over_chains(one, parts_c, batch_c)
        return tf.reshape(ll, [*chain_shape, *ll.shape[1:]])

    def scaled_log_likelihood(self, state: Any, batch: Any, num_rows: int) -> tf.Tensor:
        """``(N/num_rows) Σ_{i∈batch} log p(x_i | θ)``.

        With per-chain batches (``independent_chains``), chain ``c`` of
        ``state`` is evaluated on its own rows ``batch[c]``.
        """
        chain_ndims = self.chain_ndims_of_batch(batch)
        if chain_ndims > 0:
            ll = self._per_chain_log_likelihood(state, batch, chain_ndims)
        else:
            ll = self._call_log_likelihood(state, batch)
        _check_per_example(ll, num_rows)
        scale = tf.constant(self.num_examples / num_rows, ll.dtype)
        return scale * tf.reduce_sum(ll, axis=-1)

    def log_prob_on_batch(self, state: Any, batch: Any, include_prior: bool = True) -> tf.Tensor:
        """The minibatch log-posterior estimate on a given ``batch`` of ``n`` rows."""
        n = int(tf.nest.flatten(batch)[0].shape[self.chain_ndims_of_batch(batch)])
        out = self.scaled_log_likelihood(state, batch, n)
        if include_prior and self._log_prior_fn is not None:
            lp = self._call_log_prior(state)
            self._check_prior_shape(lp, out.shape, state)
            out = out + lp
        return out

    def sample_batch(self, estimator_state: BatchState, seed: tf.Tensor) -> tuple[Any, BatchState]:
        """This step's minibatch: ``[n, ...]`` rows, or ``B + [n, ...]`` per chain.

        Per-chain batches are drawn when ``independent_chains`` is set and the
        estimator state carries chain dimensions ``B`` (from ``bootstrap``).
        """
        if not self._independent:
            return self._data.sample_batch(self._batch_size, estimator_state, seed)
        chain_shape = estimator_state.position.shape.as_list()
        if not chain_shape:
            return self._data.sample_batch(self._batch_size, estimator_state, seed)
        num_chains = int(np.prod(chain_shape, dtype=np.int64))
        flat_state = BatchState(
            tf.reshape(estimator_state.epoch_seed, [num_chains, 2]),
            tf.reshape(estimator_state.position, [num_chains]),
        )
        batch, new_state = self._data.sample_chain_batches(self._batch_size, flat_state, seed)
        batch = tf.nest.map_structure(
            lambda t: tf.reshape(t, [*chain_shape, *t.shape[1:]]), batch
        )
        new_state = BatchState(
            tf.reshape(new_state.epoch_seed, [*chain_shape, 2]),
            tf.reshape(new_state.position, chain_shape),
        )
        return batch, new_state

    def chain_shape(self, state: Any) -> list[int]:
        """The chains' batch shape ``B`` of ``state`` (static).

        Read from the shape of ``log_likelihood_fn`` on one row (``B + [1]``):
        only the likelihood knows which state dimensions are events. Under
        ``tf.function`` the probe is pruned (only its static shape is used).
        """
        row = tf.nest.map_structure(lambda t: t[:1], self._data.arrays)
        ll = self._call_log_likelihood(state, row, "init_state")
        shape = ll.shape[:-1]
        if not shape.is_fully_defined():
            raise ValueError(
                "independent chains need a static chain shape; `log_likelihood_fn` returned "
                f"shape {ll.shape} on one row."
            )
        return shape.as_list()

    @staticmethod
    def _signature(state: Any) -> tuple | None:
        """``(is a list, ((shape, dtype) per part))`` of a concrete float state, the key of
        the first-estimate check; ``None`` in a graph or for anything else."""
        if not tf.executing_eagerly() or state is None:
            return None
        try:
            parts = as_parts(state)
        except (TypeError, ValueError):
            return None  # not a state: `validate_state` names it where a kernel takes one
        if not all(p.dtype.is_floating for p in parts):
            return None
        return is_list_like(state), tuple((tuple(p.shape), p.dtype.name) for p in parts)

    def _check_first_estimate(
        self, state: Any, batch: Any, value: tf.Tensor, grads: list[tf.Tensor]
    ) -> bool:
        """Whether the first eager estimate at a state signature is sound; ``ValueError``
        naming ``log_likelihood_fn`` when its gradient never reaches the state.

        The estimate's own score tells, with no other call of the likelihood: when the
        likelihood's gradient is exactly zero, the score is exactly the prior's (``g +
        0 = g``), which costs one gradient of the prior alone. Only then is the
        likelihood evaluated again (``_check_gradient_reaches``). ``False`` (check again
        next time) when a value is not finite or a part is empty: no conclusion there.
        """
        parts = as_parts(state)
        finite = np.all(np.isfinite(value.numpy())) and all(
            np.all(np.isfinite(g.numpy())) for g in grads
        )
        if not finite or any(p.shape.num_elements() == 0 for p in parts):
            return False
        self._check_chains_kept(state, batch, value, grads)
        if self._log_prior_fn is None:
            prior_grads = [np.zeros(p.shape, p.dtype.as_numpy_dtype) for p in parts]
        else:
            lp, prior_grads = value_and_gradient_parts(self._call_log_prior, state)
            prior_grads = [g.numpy() for g in prior_grads]
            if lp.shape.rank == 0 and value.shape.rank and any(map(np.any, prior_grads)):
                raise self._prior_shape_error(lp.shape, value.shape)  # (see _check_prior_shape)
        if all(np.array_equal(g.numpy(), gp) for g, gp in zip(grads, prior_grads)):
            self._check_gradient_reaches(
                state, lambda s: self.log_prob_on_batch(s, batch, include_prior=False)
            )
        return True

    def _check_chains_kept(
        self, state: Any, batch: Any, value: tf.Tensor, grads: list[tf.Tensor]
    ) -> None:
        """``ValueError`` naming ``log_likelihood_fn`` when it ignores the chain dimension:
        one value per example for the whole state (shape ``[n]``) computed from one slice
        of the state's leading axis, say ``ll(theta[0], batch)`` for a ``[2, d]`` state.

        The estimate is then one log-density for all the chains, and every slice but one
        of the leading axis random-walks (its score is zero). Only the likelihood knows
        which state dimensions are chains, so the shape alone cannot tell this from one
        chain of a matrix parameter: the score does. When the estimate has no chain
        dimensions, every part leads with the same axis of size ``c >= 2``, and the score
        is exactly zero on all of its slices but one, the state is moved on those slices
        (a fixed pattern); a log-density whose values do not change at all does not read
        them. One more evaluation of the log-density, only in that case. (With a
        ``log_prior_fn`` of one value per chain, ``_check_prior_shape`` names it first.)
        """
        if value.shape.rank != 0:
            return  # values per chain: the chains are kept
        parts = as_parts(state)
        leads = {int(p.shape[0]) if p.shape.rank else None for p in parts}
        if len(leads) != 1 or None in leads:
            return
        (c,) = leads
        if c < 2:
            return
        live = np.zeros(c, bool)
        for g in grads:
            live |= np.any(np.reshape(g.numpy(), [c, -1]) != 0, axis=1)
        if int(live.sum()) != 1:
            return
        k = int(np.argmax(live))
        moved = []
        for p in parts:
            x = p.numpy()
            pattern = np.sin(1.0 + 2.3 * np.arange(x.size)).reshape(x.shape)
            delta = 0.5 * (1.0 + np.abs(x)) * pattern
            delta[k] = 0.0  # the slice it reads stays where it is
            moved.append(tf.constant(x + delta, p.dtype))
        other = self.log_prob_on_batch(restructure(moved, state), batch)
        if not np.array_equal(other.numpy(), value.numpy()):
            return
        shown = f"`{self._naming}`" if self._naming else "the state"
        raise ValueError(
            f"`log_likelihood_fn` ignores the chain dimension: it returned one value per "
            f"example for all of {shown} ({_describe(state)}), and the log-density depends "
            f"on slice {k} of the leading axis of size {c} only, so the other "
            f"{c - 1} chain(s) would random-walk. Return values of shape chains + [n] "
            f"(here [{c}, n]) computed from the whole state, e.g. with "
            "`tf.einsum('nd,...d->...n', x, theta)` or `theta[..., j]`, not `theta[0]`. "
            "(If the leading axis is no chain axis, the log-density must depend on all of "
            "it: the other slices would have no likelihood and no prior.)"
        )

    def _check_gradient_reaches(
        self, state: Any, log_likelihood: Callable[[Any], tf.Tensor]
    ) -> None:
        """``ValueError`` naming ``log_likelihood_fn`` when its gradient is exactly zero at
        ``state`` and at a second state while its values differ.

        One zero gradient is no fault (a linear model with zero targets has one at zero,
        a full batch at the maximum-likelihood point); a second state, moved in every
        coordinate by a fixed pattern of mixed signs and sizes, tells a stationary point
        from a gradient that never reaches the state. A likelihood whose values do not
        change either (a constant one, to sample the prior) passes.
        """
        values, grads = value_and_gradient_parts(log_likelihood, state)
        if any(np.any(g.numpy()) for g in grads):
            return  # the prior's score only swamped the likelihood's
        moved = []
        for p in as_parts(state):
            x = p.numpy()
            pattern = np.sin(1.0 + 2.3 * np.arange(x.size)).reshape(x.shape)
            moved.append(tf.constant(x + 0.5 * (1.0 + np.abs(x)) * pattern, p.dtype))
        other, moved_grads = value_and_gradient_parts(log_likelihood, restructure(moved, state))
        if any(np.any(g.numpy()) for g in moved_grads) or not np.all(np.isfinite(other)):
            return
        if np.array_equal(other.numpy(), values.numpy()):
            return
        shown = f"`{self._naming}`" if self._naming else "the state"
        raise ValueError(
            f"`log_likelihood_fn`'s gradient with respect to the state is exactly zero at "
            f"{shown} and at a second state, while its values differ between them: the "
            "gradient does not reach the state (a `tf.stop_gradient`, an integer cast or a "
            "rounding in the model?), and a gradient-based sampler would sample the prior "
            "alone. Make the log-likelihood differentiable in the state."
        )

    # -- protocol ------------------------------------------------------------ #
    def bootstrap(self, state: Any) -> BatchState:
        """The data scheme's initial state; ``state`` is the chain's initial state, which
        errors of the first estimate there name ``init_state`` (see ``_estimate``)."""
        self._initial_signature = self._signature(state)
        init = self._data.init_batch_state()
        if not self._independent:
            return init
        chain_shape = self.chain_shape(state)
        if not chain_shape:
            return init
        # One scheme state per chain (each its own epoch stream).
        return BatchState(
            tf.broadcast_to(init.epoch_seed, [*chain_shape, 2]),
            tf.broadcast_to(init.position, chain_shape),
        )

    def _estimate(
        self, state: Any, estimator_state: BatchState, seed: tf.Tensor
    ) -> tuple[GradientEstimate, BatchState]:
        """The minibatch estimate; the first one computed eagerly at a state signature
        (structure, shapes, dtype) is checked too.

        Every call names the model's faults while the estimate is built, in a graph as
        eagerly (``_call_log_likelihood``, ``_call_log_prior``, ``_check_prior_shape``);
        errors of the first estimate after ``bootstrap`` at the same signature name
        ``init_state``. The first eager estimate also raises when the log-likelihood's
        gradient is exactly zero at the state and at a second state while its values
        differ (``_check_first_estimate``: no extra likelihood call unless the score is
        exactly the prior's). The estimate itself is computed as always.

        Raises:
          ValueError: ``log_likelihood_fn`` or ``log_prior_fn`` fails inside TensorFlow
            on the state and the minibatch (a state of the wrong shape, data of the wrong
            rank or of an integer dtype the model mixes with the float state), returns
            ``None``, integers or another dtype than the state's, or the prior's shape
            is not the chains' shape; or the log-likelihood's gradient never reaches
            the state (a ``tf.stop_gradient``, an integer cast or a rounding: a gradient
            sampler would sample the prior alone), or it ignores the chain dimension
            (``_check_chains_kept``).
        """
        batch, new_state = self.sample_batch(estimator_state, seed)
        key = self._signature(state)
        if key is None or key in self._checked:
            value, grads = value_and_gradient_parts(
                lambda s: self.log_prob_on_batch(s, batch), state
            )
            return GradientEstimate(value, grads), new_state
        self._naming = "init_state" if key == self._initial_signature else None
        try:
            value, grads = value_and_gradient_parts(
                lambda s: self.log_prob_on_batch(s, batch), state
            )
            if self._check_first_estimate(state, batch, value, grads):
                self._checked.add(key)
        finally:
            self._naming = None
        return GradientEstimate(value, grads), new_state

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        """Exact ``log π(θ)`` and score, summing the likelihood over all chunks.

        Each chunk's value and gradient are taken on their own and summed (the score of
        a sum is the sum of the scores), so the memory is one chunk's activations, not
        the data set's: one tape over every chunk would keep all of them until the
        gradient, which grows with the number of rows.
        """
        value = grads = None
        for chunk in self._data.full_batches(self._chunk):

            def chunk_ll(s: Any, chunk: Any = chunk) -> tf.Tensor:
                ll = self._call_log_likelihood(s, chunk)
                _check_per_example(ll, tf.nest.flatten(chunk)[0].shape[0])
                return tf.reduce_sum(ll, axis=-1)

            v, g = value_and_gradient_parts(chunk_ll, state)
            value = v if value is None else value + v
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
        if self._log_prior_fn is not None:

            def prior(s: Any) -> tf.Tensor:
                lp = self._call_log_prior(s)
                self._check_prior_shape(lp, value.shape, s)
                return lp

            v, g = value_and_gradient_parts(prior, state)
            value, grads = value + v, [a + b for a, b in zip(grads, g)]
        return GradientEstimate(value, grads)

    def __repr__(self) -> str:
        ind = ", independent_chains=True" if self._independent else ""
        return (
            f"MinibatchEstimator(N={self.num_examples}, batch_size={self._batch_size}, "
            f"data={self._data!r}{ind})"
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
        self._autograph = autograph_context()  # see MinibatchEstimator
        self._noise_scale = noise_scale

    @property
    def dtype(self) -> tf.DType | None:
        return None

    target_log_prob_fn = AttributeView[Callable[[Any], tf.Tensor]]("_fn")

    noise_scale = AttributeView[Any]("_noise_scale")

    def bootstrap(self, state: Any) -> tuple:
        del state
        return ()

    def _target(self, state: Any) -> tf.Tensor:
        return call_user(self._fn, self._autograph, state)  # converted while traced

    def _estimate(self, state: Any, estimator_state: tuple, seed: tf.Tensor):
        value, grads = value_and_gradient_parts(self._target, state)
        # The library's split and normals: the same draws eagerly, in graphs and under
        # XLA (tfp_sgmcmc/internal/random.py).
        seeds = rng.split_seed(seed, len(grads))
        noisy = []
        for g, s in zip(grads, seeds):
            scale = cast_param(self._noise_scale, g.dtype)  # exact in float64
            noisy.append(g + scale * rng.standard_normal(tf.shape(g), s, g.dtype))
        return GradientEstimate(value, noisy), estimator_state

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        value, grads = value_and_gradient_parts(self._target, state)
        return GradientEstimate(value, grads)

