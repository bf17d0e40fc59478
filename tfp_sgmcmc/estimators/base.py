"""The gradient-estimator protocol shared by every kernel.

A posterior is ``log π(θ) = log p(θ) + Σ_{i=1..N} log p(x_i | θ)``. A
[`GradientEstimator`][tfp_sgmcmc.estimators.base.GradientEstimator] owns the data, draws its own
minibatch from the seed
it is given (``tfp.mcmc`` kernels have no batch argument), and returns a
stochastic estimate of ``log π`` and of its gradient ``∇ log π`` (the score;
samplers ascend it, TFP's sign convention). Whatever state it needs between
steps (minibatch position, chain history, ...) it returns, and the kernel
carries it in its results so that ``sample_chain`` stays pure.

Kernels call an estimator exactly once per step (SGHMC: once per leapfrog
step); `GradientEstimator.num_calls` counts Python-side calls so tests can
assert it at trace time.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.internal.util import AttributeView, as_parts, is_list_like, restructure

__all__ = [
    "GradientEstimate",
    "GradientEstimator",
    "WrappingEstimator",
    "ChangeOfVariablesEstimator",
    "value_and_gradient_parts",
]


class GradientEstimate(NamedTuple):
    """A stochastic estimate at one state.

    Attributes:
      target_log_prob: estimate of ``log π(θ)`` (shape: the chains' batch shape).
      grads_target_log_prob: list of tensors, ``∇ log π(θ)`` for each state part.
    """

    target_log_prob: tf.Tensor
    grads_target_log_prob: list[tf.Tensor]


def value_and_gradient_parts(
    fn: Callable[[Any], tf.Tensor], state: Any
) -> tuple[tf.Tensor, list[tf.Tensor]]:
    """``fn(state)`` and its gradient w.r.t. every part, as a list.

    ``fn`` receives ``state`` in the caller's structure (tensor or list). The
    gradient of a batch of values (one per chain) is the gradient of their
    sum, which is each chain's own gradient because chains share no
    parameters. Each gradient is the partial derivative in that part, the others
    held fixed, in eager and graph mode alike, whatever computed the parts.
    """
    parts = as_parts(state)

    def f(*p: tf.Tensor) -> tf.Tensor:
        return fn(restructure(list(p), state))

    # A tape, in graph mode too: TFP's default there is `tf.gradients`, which follows
    # every path of the graph from a part, including one through another part computed
    # from it (a bijector's dependent support, `Uniform(0, 1 - a)`: `b = (1 - a) σ(z_b)`
    # enters `f` as a part of its own), and returns a total derivative where the score
    # is the partial one. Eager mode always used a tape, so graph and eager disagreed.
    value, grads = tfp.math.value_and_gradient(f, parts, use_gradient_tape=True)
    grads = list(grads)
    for i, (g, p) in enumerate(zip(grads, parts)):
        if g is None:
            # A part the target does not depend on has a zero gradient; TF says None.
            grads[i] = tf.zeros_like(p)
    return value, grads


class GradientEstimator(abc.ABC):
    """Abstract base of gradient estimators (see the module docstring)."""

    #: How many (minibatch) gradient evaluations one call costs: 1 for a plain
    #: minibatch, 2 for control variates (θ and the centre on one batch).
    gradient_evaluations_per_call: int = 1

    def __init__(self) -> None:
        self.num_calls = 0

    @property
    @abc.abstractmethod
    def dtype(self) -> tf.DType | None:
        """The float dtype of the data (``None`` if the estimator has no data)."""

    @abc.abstractmethod
    def bootstrap(self, state: Any) -> Any:
        """The initial estimator state (a nest of tensors) for ``state``."""

    @abc.abstractmethod
    def _estimate(self, state: Any, estimator_state: Any, seed: tf.Tensor) -> tuple[
        GradientEstimate, Any
    ]:
        """Subclasses: the estimate at ``state`` and the next estimator state."""

    def __call__(
        self, state: Any, estimator_state: Any, seed: tf.Tensor
    ) -> tuple[GradientEstimate, Any]:
        """Estimate ``log π`` and ``∇ log π`` at ``state`` from ``seed``."""
        self.num_calls += 1
        return self._estimate(state, estimator_state, seed)

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        """The exact (all-data) ``log π`` and score at ``state``.

        Used for control-variate anchors, MAP search and full-data Stein
        discrepancies. Subclasses without data override it.
        """
        raise NotImplementedError(f"{type(self).__name__} has no full-data log-density.")

    def left_posterior(self, state: Any) -> tf.Tensor | None:
        """Per chain: ``state`` lies where the posterior has no mass, or ``None``.

        Kernels report a step as ``diverged`` when this is true (as well as on a
        non-finite state, score or log-density). Only an estimator that knows the
        posterior's location and scale can tell; the default says nothing.
        `WhitenedEstimator` answers with the χ² radius of its whitened state.
        """
        del state
        return None

    def score_fn(self) -> Callable[[Any], list[tf.Tensor]]:
        """``state -> ∇ log π(state)`` computed on the full data (a list of parts)."""
        return lambda state: self.full_log_prob_and_gradient(state).grads_target_log_prob

    def full_log_prob_fn(self) -> Callable[..., tf.Tensor]:
        """``log π`` on the full data as a ``target_log_prob_fn`` for TFP's exact kernels
        (``tfp.mcmc.MetropolisAdjustedLangevinAlgorithm``, ``HamiltonianMonteCarlo``,
        ``NoUTurnSampler``): called with the state's parts as TFP calls it, and
        differentiated by `full_log_prob_and_gradient`'s own score, so that the value and
        the gradient a step needs cost one full-data evaluation (a gradient taken through
        the value would run the estimator's score computation again)."""

        def log_prob(*parts: tf.Tensor) -> tf.Tensor:
            @tf.custom_gradient
            def value(*p: tf.Tensor) -> Any:
                est = self.full_log_prob_and_gradient(p[0] if len(p) == 1 else list(p))
                lp = est.target_log_prob

                def grad(dy: tf.Tensor) -> list[tf.Tensor]:
                    # dy has the chains' batch shape; each part adds its event dimensions.
                    out = []
                    for g in est.grads_target_log_prob:
                        extra = tf.ones([tf.rank(g) - tf.rank(dy)], tf.int32)
                        out.append(tf.reshape(dy, tf.concat([tf.shape(dy), extra], 0)) * g)
                    return out

                return lp, grad

            return value(*parts)

        return log_prob

    def validate_state(self, state: Any, arg_name: str = "init_state") -> None:
        """Raise ``ValueError`` naming ``arg_name`` for a state the estimator cannot use:
        ``None``, a part that is not a tensor, an empty list, parts that are not floating
        point or of several dtypes, a dtype other than the data's."""
        if state is None or (is_list_like(state) and not state):
            raise ValueError(
                f"`{arg_name}` must be a float tensor or a list of them, got {state!r}."
            )
        try:
            parts = as_parts(state)
        except (TypeError, ValueError) as e:  # None in a list, strings, ragged lists
            raise ValueError(
                f"`{arg_name}` must be a float tensor or a list of them; a part cannot be a "
                f"tensor: {e}"
            ) from e
        dtypes = {p.dtype for p in parts}
        for p in parts:
            if not p.dtype.is_floating:
                raise ValueError(
                    f"`{arg_name}` must be floating point, got a part of dtype {p.dtype.name}."
                )
        if len(dtypes) > 1:
            raise ValueError(
                f"`{arg_name}` parts have different dtypes {sorted(d.name for d in dtypes)}; "
                "use one float dtype for every part."
            )
        want = self.dtype
        have = parts[0].dtype
        if want is not None and have != want:
            raise ValueError(
                f"`{arg_name}` has dtype {have.name} but the data are {want.name}: cast one "
                "of them so the state and the data share a dtype."
            )


class WrappingEstimator(GradientEstimator):
    """Base of estimators that wrap another one, ``base`` (control variates, SVRG, the
    distributed estimator): the data's dtype, the batch size and N come from the wrapped
    estimator, so each wrapper states only what it adds.

    Raises:
      ValueError: ``base`` is not an instance of ``kind`` (the wrapper's requirement).
    """

    def __init__(self, base: Any, kind: type = GradientEstimator) -> None:
        super().__init__()
        if not isinstance(base, kind):
            raise ValueError(f"`base` must be a {kind.__name__}, got {type(base).__name__}.")
        self._base = base

    base = AttributeView[Any]("_base")
    """The wrapped estimator."""

    dtype = AttributeView[tf.DType | None]("_base.dtype")
    """The data's float dtype, from the wrapped estimator."""

    batch_size = AttributeView[int]("_base.batch_size")
    """The wrapped estimator's minibatch size ``n``."""

    num_examples = AttributeView[int]("_base.num_examples")
    """The wrapped estimator's data size ``N``."""


class ChangeOfVariablesEstimator(WrappingEstimator):
    """A wrapper on coordinates ``z`` that a map sends to the wrapped estimator's state.

    ``_pull_back(state, evaluate)`` evaluates ``evaluate`` (the wrapped estimate, and
    anything else it returns) at the mapped state and pulls the estimate back to ``z``:
    the log density gains the map's log-det Jacobian, the score is multiplied by the
    map's transposed Jacobian. The stochastic and the full-data estimates are both
    that pull-back.
    """

    def _pull_back(self, state: Any, evaluate: Any) -> tuple[GradientEstimate, Any]:
        raise NotImplementedError

    def _estimate(self, state: Any, estimator_state: Any, seed: tf.Tensor):
        return self._pull_back(state, lambda inner: self._base(inner, estimator_state, seed))

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        """The wrapped estimator's exact ``log π`` and score, pulled back to ``state``."""
        est, _ = self._pull_back(
            state, lambda inner: (self._base.full_log_prob_and_gradient(inner), None)
        )
        return est
