"""Find the maximum a posteriori (MAP) state, e.g. to centre control variates.

Two methods:

* ``"lbfgs"`` (default): TFP's L-BFGS (``tfp.optimizer.lbfgs_minimize``) on the
  exact full-data negative log-posterior (summed over data chunks). Best when a
  full pass is affordable (it is for the 1e6-row logistic regression).
* ``"adam"``: Adam on the estimator's minibatch gradients, as the MAMBA code
  does (lr 1e-2, 5,000 steps, 1% batch, start at 0), in one XLA-compiled loop.
  Adam's update is the textbook one (Kingma & Ba 2015, with bias correction);
  written out because it must consume our seeded minibatch estimator inside the
  compiled loop, which Keras optimizers (stateful ``Variable``s) cannot.

**One program per structure.** Adam runs as a transition kernel in the loop every
chain runs ([`run_steps`][tfp_sgmcmc.loop.run_steps]) and follows its seed
rule: step ``t`` draws its minibatch with ``stateless_fold_in(seed, t)``. The
learning rate, the number of steps and the seed are inputs of the compiled program,
which is kept per estimator (the same object) and state structure (parts, shapes,
dtypes): a later call on them, with any learning rate, step count or seed, runs the
program compiled by the first. L-BFGS's objective (a graph of the full-data
log-density and score) is kept the same way. The last ``MAX_PROGRAMS`` programs are
kept; each holds its estimator.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.data.dataset import dataset_sources_exist, traced_draws
from tfp_sgmcmc.estimators.base import GradientEstimator
from tfp_sgmcmc.internal.adam import AdamState, adam_ascent_step, adam_init
from tfp_sgmcmc.internal.autograph import needs_autograph
from tfp_sgmcmc.internal.util import (
    as_parts,
    check_int,
    check_positive,
    restructure,
    stateless_seed,
)
from tfp_sgmcmc.loop import run_steps

__all__ = ["find_map", "MapResult", "MAX_PROGRAMS", "AdamAscent", "AdamAscentResults"]

#: How many compiled programs (estimator, state structure, method) ``find_map`` keeps.
MAX_PROGRAMS = 8

_PROGRAMS: OrderedDict = OrderedDict()


def _cached(key: tuple, estimator: Any, build: Callable[[], Any]) -> Any:
    """The program filed under ``key``, built by ``build()`` on a miss (least recently
    used programs beyond ``MAX_PROGRAMS`` are dropped). The entry holds ``estimator``, so
    the id in ``key`` stays its own while the entry lives."""
    if key in _PROGRAMS:
        _PROGRAMS.move_to_end(key)
        return _PROGRAMS[key][1]
    program = build()
    _PROGRAMS[key] = (estimator, program)
    while len(_PROGRAMS) > MAX_PROGRAMS:
        _PROGRAMS.popitem(last=False)
    return program


class AdamAscentResults(NamedTuple):
    """The results of [`AdamAscent`][tfp_sgmcmc.estimators.map.AdamAscent]: Adam's step count
    and moments, and the estimator's state."""

    adam: AdamState
    est_state: Any


class AdamAscent(tfp.mcmc.TransitionKernel):
    r"""Adam up the minibatch score of ``estimator``, as a transition kernel, so that it
    runs in the library's loop ([`run_steps`][tfp_sgmcmc.loop.run_steps]) under its seed
    rule. Step ``t`` estimates ``g_t = ∇ log π̂(θ_t)`` on the minibatch its seed (or the
    estimator's source) gives, then (Kingma & Ba 2015, bias-corrected, for ascent)

    $$
    m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t,\quad
    v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2,\quad
    \theta_{t+1} = \theta_t + \eta\,\frac{m_t / (1 - \beta_1^t)}
        {\sqrt{v_t / (1 - \beta_2^t)} + \epsilon}.
    $$

    The MAP search of [`find_map`][tfp_sgmcmc.estimators.find_map] (``method="adam"``) and
    of ``tfp_sgmcmc.keras.BayesianModel.fit``.

    Args:
      estimator: a gradient estimator.
      like: the state's structure (a tensor or a list of parts); the kernel's state is
        the list of parts.
      learning_rate: ``η``, a scalar tensor or ``tf.Variable`` (a variable changed
        between calls changes the step without a new program).
      epsilon: ``ϵ``. Adam is invariant to the scale of ``g`` but for ``ϵ``: ascent on
        ``log π`` with ``ϵ N`` is descent on the mean loss ``−log π / N`` with ``ϵ``, as
        Keras's optimizers take it. Default value: ``1e-8``.
    """

    def __init__(
        self,
        estimator: GradientEstimator,
        like: Any,
        learning_rate: Any,
        epsilon: float = 1e-8,
    ) -> None:
        self._parameters = dict(
            estimator=estimator, like=like, learning_rate=learning_rate, epsilon=epsilon
        )

    @property
    def parameters(self) -> dict:
        return self._parameters

    @property
    def is_calibrated(self) -> bool:
        return False

    def bootstrap_results(self, init_state: list) -> AdamAscentResults:
        p = self._parameters
        return AdamAscentResults(
            adam_init(init_state), p["estimator"].bootstrap(restructure(init_state, p["like"]))
        )

    def one_step(
        self, current_state: list, previous_kernel_results: AdamAscentResults, seed: Any = None
    ) -> tuple[list, AdamAscentResults]:
        p = self._parameters
        est, est_state = p["estimator"](
            restructure(current_state, p["like"]), previous_kernel_results.est_state, seed
        )
        # Ascent on log π with the minibatch score.
        lr = tf.convert_to_tensor(p["learning_rate"], current_state[0].dtype)
        x, adam = adam_ascent_step(
            current_state,
            est.grads_target_log_prob,
            previous_kernel_results.adam,
            lr,
            epsilon=p["epsilon"],
        )
        return x, AdamAscentResults(adam, est_state)


class MapResult(NamedTuple):
    """Result of [`find_map`][tfp_sgmcmc.estimators.map.find_map].

    Attributes:
      position: the MAP state (the structure of ``initial_state``).
      log_prob: full-data ``log π`` at ``position`` (``nan`` for ``"adam"`` on
        data without a full pass).
      converged: L-BFGS convergence flag (``True`` for Adam, which runs its steps).
      num_iterations: iterations run.
    """

    position: Any
    log_prob: tf.Tensor
    converged: bool
    num_iterations: int


def find_map(
    estimator: GradientEstimator,
    initial_state: Any,
    method: str = "lbfgs",
    num_steps: int = 500,
    learning_rate: float = 1e-2,
    seed: Any = 0,
    tolerance: float = 1e-8,
) -> MapResult:
    """Maximise the posterior of ``estimator``'s model from ``initial_state``.

    Args:
      estimator: a gradient estimator with a full-data log-density (lbfgs) or
        any estimator (adam).
      initial_state: starting point (tensor or list of parts, no chain dims).
      method: ``"lbfgs"`` or ``"adam"``. Default value: ``"lbfgs"``.
      num_steps: maximum L-BFGS iterations, or Adam steps. Default value: ``500``.
      learning_rate: Adam's step. Default value: ``1e-2``.
      seed: stateless seed of Adam's minibatches (an int ``>= 0`` or an int32 pair):
        step ``t`` draws with ``stateless_fold_in(seed, t)``. Default value: ``0``.
      tolerance: L-BFGS gradient tolerance. Default value: ``1e-8``.

    Raises:
      ValueError: unknown ``method``, non-positive ``num_steps`` or
        ``learning_rate``, or a state the estimator cannot use.
    """
    if method not in ("lbfgs", "adam"):
        raise ValueError(f"`method` must be 'lbfgs' or 'adam', got {method!r}.")
    num_steps = check_int(num_steps, "num_steps", 1)
    check_positive(learning_rate, "learning_rate", scalar=True)
    estimator.validate_state(initial_state, "initial_state")
    parts = as_parts(initial_state)
    shapes = [p.shape for p in parts]
    sizes = [int(np.prod(s)) for s in shapes]

    def unflatten(x: tf.Tensor) -> list[tf.Tensor]:
        return [tf.reshape(c, s) for c, s in zip(tf.split(x, sizes), shapes)]

    key = (
        id(estimator),
        method,
        type(initial_state).__name__ if isinstance(initial_state, (list, tuple)) else None,
        tuple((tuple(p.shape.as_list()), p.dtype.name) for p in parts),
    )
    if method == "lbfgs":

        def build_objective() -> Any:
            @tf.function(autograph=needs_autograph(estimator))  # see internal.autograph
            def value_and_grad(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
                est = estimator.full_log_prob_and_gradient(restructure(unflatten(x), initial_state))
                g = tf.concat([tf.reshape(g, [-1]) for g in est.grads_target_log_prob], 0)
                return -est.target_log_prob, -g

            return value_and_grad

        value_and_grad = _cached(key, estimator, build_objective)
        x0 = tf.concat([tf.reshape(p, [-1]) for p in parts], 0)
        f0, g0 = value_and_grad(x0)
        if not bool(tf.math.is_finite(f0)) or not bool(tf.reduce_all(tf.math.is_finite(g0))):
            raise ValueError(
                "`initial_state`: the log-posterior or its gradient is not finite there "
                f"(log π = {-float(f0)}); start the MAP search from a state of positive density."
            )
        # TFP's L-BFGS tries a unit step along −∇ first: with a gradient norm in the
        # thousands (a hierarchical model far from its mode) that step overflows, the
        # line search fails and the start comes back unchanged. Searching over
        # y = (x − x0) / s with s² = 1 / max(‖∇‖, 1) makes that first step at most unit
        # length in x; later steps are quasi-Newton steps, which the scaling does not
        # change. The tolerance is divided by s so it still bounds the gradient in x.
        s = tf.math.rsqrt(tf.maximum(tf.norm(g0), tf.ones([], g0.dtype)))

        def scaled(y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            f, g = value_and_grad(x0 + s * y)
            return f, s * g

        res = tfp.optimizer.lbfgs_minimize(
            scaled, tf.zeros_like(x0), max_iterations=num_steps, tolerance=tolerance * s
        )
        position = x0 + s * res.position
        if bool(res.failed) or not bool(tf.math.is_finite(res.objective_value)):
            warnings.warn(
                f"find_map: L-BFGS stopped after {int(res.num_iterations)} iteration(s) "
                "without converging (its line search failed); the returned position is the "
                "best point it reached, not a MAP. Try method='adam', or a start closer to "
                "the mode.",
                UserWarning,
                stacklevel=2,
            )
        pos = restructure(unflatten(position), initial_state)
        return MapResult(pos, -res.objective_value, bool(res.converged), int(res.num_iterations))

    def build_adam() -> Any:
        # A tf.data iterator has no XLA kernel: an estimator reading one runs as a graph.
        @tf.function(
            jit_compile=not _reads_stream(estimator, initial_state),
            autograph=needs_autograph(estimator),
        )
        def run(x0: list, seed: tf.Tensor, lr: tf.Tensor, num_steps: tf.Tensor) -> list:
            kernel = AdamAscent(estimator, initial_state, lr)
            out = run_steps(kernel, x0, kernel.bootstrap_results(x0), num_steps, seed, record=False)
            return out.state

        return run

    run = _cached(key, estimator, build_adam)
    x = run(
        parts,
        stateless_seed(seed),
        tf.constant(learning_rate, parts[0].dtype),
        tf.constant(num_steps, tf.int32),
    )
    pos = restructure(list(x), initial_state)
    try:
        lp = estimator.full_log_prob_and_gradient(pos).target_log_prob
    except (NotImplementedError, ValueError):
        lp = tf.constant(float("nan"), parts[0].dtype)
    return MapResult(pos, lp, True, int(num_steps))


def _reads_stream(estimator: GradientEstimator, state: Any) -> bool:
    """Whether an estimate reads a ``DatasetData`` (traced, nothing is read)."""
    if not dataset_sources_exist():
        return False

    def one(s: Any) -> tf.Tensor:
        est, _ = estimator(s, estimator.bootstrap(s), tf.constant([0, 0], tf.int32))
        return est.target_log_prob

    return bool(traced_draws(one, state))
