"""The base class every SG-MCMC ``tfp.mcmc.TransitionKernel`` is built on.

It holds the contract common to all samplers (``docs/contributing.md``):

* ``parameters`` holds exactly the constructor arguments and ``copy()``
  rebuilds the kernel from them;
* ``is_calibrated`` is ``False``: SG samplers have no Metropolis correction and
  their stationary law differs from the target by O(step size);
* ``bootstrap_results(init_state)`` evaluates the estimator at the initial
  state; ``one_step`` **reuses that cached score** to move and then evaluates
  the estimator once at the new state, so the score in the results is the
  score *of the returned state* (what a Stein reducer reads) and each step
  costs one gradient evaluation (SGHMC: one per leapfrog step);
* results carry the stochastic ``target_log_prob`` and its gradient
  ``grads_target_log_prob``, the estimator's state, ``step`` (completed steps),
  ``step_size`` (the ε used by this step), ``diverged`` (per chain: the new
  state, its score or log-density is non-finite, or the state left the posterior
  where the estimator can tell: `GradientEstimator.left_posterior`) and ``seed``;
* seeds are stateless: ``one_step`` sanitizes its seed and splits it with
  salts, so the same seed gives the same chain. A Python ``int`` seed given
  to ``one_step`` maps to a fixed stateless pair
  (``tfp_sgmcmc.internal.util.stateless_seed``), unlike TFP's stateful
  reading of ints; ``tfp.mcmc.sample_chain(seed=int)`` converts the int
  statefully *before* the kernel sees it, so pass ``sample_chain`` a seed
  tensor (``tf.constant([0, 42])``, see ``docs/conventions.md``).

Because TFP's ``bootstrap_results`` takes no seed, the first minibatch (at the
initial state) is drawn from a fixed seed unless ``bootstrap_results`` is given
one; after that every batch comes from ``one_step``'s seed.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Mapping
from typing import Any, ClassVar

import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator
from tfp_sgmcmc.internal.random import standard_normal
from tfp_sgmcmc.internal.util import (
    RNG_ALG,
    AttributeView,
    RecordedArgument,
    all_finite,
    as_parts,
    restructure,
    stateless_seed,
)
from tfp_sgmcmc.kernels.arguments import as_schedule
from tfp_sgmcmc.schedules import StepSizeSchedule

__all__ = ["ParameterizedKernel", "SGMCMCKernel", "BOOTSTRAP_SEED", "registered_kernels"]

#: Seed of the minibatch drawn by ``bootstrap_results`` when it is given none.
BOOTSTRAP_SEED = (20_251_121, 0)

# Class name -> class of every public SGMCMCKernel subclass, filled as the classes are
# defined. Weak: a class defined and dropped (in a test, say) leaves with its last user.
_REGISTRY: weakref.WeakValueDictionary[str, type[SGMCMCKernel]] = weakref.WeakValueDictionary()


def registered_kernels() -> dict[str, type[SGMCMCKernel]]:
    """Every public ``SGMCMCKernel`` subclass defined so far, by class name, in order of
    definition (those of this package and any defined elsewhere).

    The command line's ``--kernel`` lookup reads it (with each class's ``cli_name``);
    nothing else keeps a list of the samplers.
    """
    return dict(_REGISTRY)


class ParameterizedKernel(tfp.mcmc.TransitionKernel):
    """The ``TransitionKernel`` plumbing every kernel of this package shares.

    SG kernels are uncalibrated (no Metropolis correction), ``parameters`` are the
    constructor arguments a subclass stores in ``self._parameters`` (so ``copy`` works),
    and ``name`` falls back to the class's ``_default_name``.
    """

    _parameters: dict[str, Any]
    _default_name: str

    @property
    def is_calibrated(self) -> bool:
        return False

    parameters = AttributeView[dict[str, Any]]("_parameters")

    @property
    def name(self) -> str:
        return self._parameters["name"] or self._default_name


class SGMCMCKernel(ParameterizedKernel):
    """Shared machinery of the SG-MCMC kernels (not used directly).

    Subclasses define ``_results_type`` (a namedtuple with at least the common
    fields), ``_init_extra(parts, estimate)`` (the sampler's own fields at
    bootstrap) and ``_transition(parts, state, results, step_size, seed)``.

    The class itself says what the rest of the package needs to know about it:
    defining a public subclass registers it (``kernels.base.registered_kernels``), its
    ``cli_name`` is its ``tfp-sgmcmc --kernel`` name, and
    ``gradient_noise_coefficient`` tells the gradient-noise diagnostic how minibatch
    noise compares with the noise it injects.
    """

    _results_type: type
    _default_name: str = "sgmcmc"
    #: The short ``tfp-sgmcmc --kernel`` name (``None``: the class name only). Set on the
    #: class itself; a subclass does not inherit it.
    cli_name: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "cli_name" not in cls.__dict__:
            cls.cli_name = None  # pSGLD is not `sgld` because it subclasses SGLD
        if not cls.__name__.startswith("_"):
            _REGISTRY[cls.__name__] = cls

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        temperature: Any = 1.0,
        name: str | None = None,
        **extra: Any,
    ) -> None:
        if not isinstance(estimator, GradientEstimator):
            raise ValueError(
                f"`estimator` must be a GradientEstimator, got {type(estimator).__name__}."
            )
        self._schedule: StepSizeSchedule = as_schedule(step_size)
        # Temperature may be a scalar or a schedule of the step (simulated annealing).
        self._temperature_schedule = as_schedule(temperature, "temperature", allow_zero=True)
        self._parameters = dict(
            estimator=estimator, step_size=step_size, temperature=temperature, **extra, name=name
        )

    def _init_from_arguments(self, owner: type, arguments: Mapping[str, Any]) -> None:
        """``SGMCMCKernel.__init__`` with every argument of ``owner``'s constructor.

        ``arguments`` are that constructor's ``locals()`` once it has validated and
        normalised them: ``estimator``, ``step_size``, ``temperature`` and ``name`` are
        passed by name, the others recorded in ``parameters`` in the signature's order,
        so ``parameters`` are exactly the arguments ``copy`` passes to the constructor.
        """
        shared = ("self", "estimator", "step_size", "temperature", "name")
        own = [k for k in inspect.signature(owner.__init__).parameters if k not in shared]
        SGMCMCKernel.__init__(
            self,
            arguments["estimator"],
            arguments["step_size"],
            arguments["temperature"],
            arguments["name"],
            **{k: arguments[k] for k in own},
        )

    # -- TransitionKernel API ------------------------------------------------ #
    estimator = RecordedArgument[GradientEstimator]("The gradient estimator.")
    step_size = RecordedArgument[Any]("``ε`` as given: a scalar, tensor or schedule.")
    temperature = RecordedArgument[Any]("``T`` as given: a scalar or schedule.")

    step_size_schedule = AttributeView[StepSizeSchedule]("_schedule")
    temperature_schedule = AttributeView[StepSizeSchedule]("_temperature_schedule")

    @property
    def gradient_evaluations_per_step(self) -> int:
        """Estimator calls per ``one_step`` (times the estimator's own cost gives
        minibatch-gradient evaluations)."""
        return 1

    def bootstrap_results(self, init_state: Any, seed: Any = None) -> Any:
        """Results at ``init_state``: the estimate there and fresh sampler state.

        Args:
          init_state: tensor or list of tensors (optional leading chain dims).
          seed: optional seed of the first minibatch. Default value: ``None``
            (the fixed ``BOOTSTRAP_SEED``).

        Raises:
          ValueError: ``init_state`` is not floating point, its parts have
            different dtypes, or its dtype differs from the data.
        """
        with tf.name_scope(f"{self.name}/bootstrap_results"):
            self.estimator.validate_state(init_state, "init_state")
            parts = as_parts(init_state)
            seed = stateless_seed(BOOTSTRAP_SEED if seed is None else seed)
            est, est_state, extra = self._bootstrap_estimate(parts, init_state, seed)
            dtype = parts[0].dtype
            return self._results_type(
                target_log_prob=est.target_log_prob,
                grads_target_log_prob=est.grads_target_log_prob,
                estimator_state=est_state,
                step=tf.constant(0, tf.int32),
                step_size=self._schedule(tf.constant(0, tf.int32), dtype),
                diverged=self._diverged(parts, est, extra),
                seed=tf.zeros([2], tf.int32),
                **extra,
            )

    def _bootstrap_estimate(
        self, parts: list[tf.Tensor], like: Any, seed: tf.Tensor
    ) -> tuple[GradientEstimate, Any, dict[str, Any]]:
        """The first estimate, the estimator state and the sampler's own fields.

        The estimator is bootstrapped and evaluated at ``init_state`` (``parts``
        in the structure of ``like``). A sampler that evaluates its estimator on
        another state (replica exchange evaluates a stack of replicas) overrides
        this and returns the estimate at ``init_state`` itself.
        """
        state = restructure(parts, like)
        est_state = self.estimator.bootstrap(state)
        est, est_state = self.estimator(state, est_state, seed)
        return est, est_state, self._init_extra(parts, est)

    def one_step(
        self, current_state: Any, previous_kernel_results: Any, seed: Any = None
    ) -> tuple[Any, Any]:
        """Advance the chain one step (see the subclass for the update rule).

        Returns:
          ``(next_state, kernel_results)``, the state in the structure of
          ``current_state``.
        """
        with tf.name_scope(f"{self.name}/one_step"):
            # A Python int is a deterministic stateless seed here (TFP would draw it
            # statefully: a new chain on every call of a compiled function).
            seed = stateless_seed(seed)
            parts = as_parts(current_state)
            dtype = parts[0].dtype
            prev = previous_kernel_results
            eps = self._schedule(prev.step, dtype)
            new_parts, est, est_state, extra = self._transition(
                parts, current_state, prev, eps, seed
            )
            results = prev._replace(
                target_log_prob=est.target_log_prob,
                grads_target_log_prob=est.grads_target_log_prob,
                estimator_state=est_state,
                step=prev.step + 1,
                step_size=eps,
                diverged=self._diverged(new_parts, est, extra),
                seed=seed,
                **extra,
            )
            return restructure(new_parts, current_state), results

    def gradient_noise_coefficient(
        self, step_size: float, temperature: float
    ) -> tuple[float, bool] | None:
        """How minibatch noise compares with the injected noise in one update.

        Returns ``(c, checked)``: the gradient-noise ratio of one update is
        ``r = c · Var(ĝ)`` at step size ``step_size`` and temperature ``temperature > 0``
        ([`gradient_noise_ratio`][tfp_sgmcmc.diagnostics.gradient_noise_ratio]), and
        ``checked`` says whether the sampler's stationary law needs ``r ≪ 1``. ``None``
        (the default) where the ratio is not derived for the sampler; a subclass that
        changes the update overrides this.
        """
        return None

    # -- helpers for subclasses ---------------------------------------------- #
    def _temperature(self, dtype: tf.DType, step: tf.Tensor) -> tf.Tensor:
        """``T`` for the step that starts at counter ``step``."""
        return self._temperature_schedule(step, dtype)

    def _estimate(
        self, parts: list[tf.Tensor], like: Any, estimator_state: Any, seed: tf.Tensor
    ) -> tuple[GradientEstimate, Any]:
        return self.estimator(restructure(parts, like), estimator_state, seed)

    @staticmethod
    def _batch_ndims(est: GradientEstimate) -> int:
        return est.target_log_prob.shape.rank or 0

    def _diverged(
        self, parts: list[tf.Tensor], est: GradientEstimate, extra: dict[str, Any]
    ) -> tf.Tensor:
        """Per chain: the state, log-density or score is non-finite, or the state left
        the posterior (`GradientEstimator.left_posterior`, where the estimator knows the
        posterior's location and scale). ``extra`` holds the sampler's own fields of the
        same results (a sampler whose chain holds more than the returned state reads
        them)."""
        nb = self._batch_ndims(est)
        finite = all_finite(list(parts) + list(est.grads_target_log_prob), nb)
        finite = tf.logical_and(finite, tf.math.is_finite(est.target_log_prob))
        diverged = tf.logical_not(finite)
        away = self.estimator.left_posterior(list(parts))
        return diverged if away is None else tf.logical_or(diverged, away)

    @staticmethod
    def _split(seed: tf.Tensor, n: int, salt: str) -> list[tf.Tensor]:
        # The same seeds as ``tfp.random.split_seed(seed, n, salt)`` (salted,
        # then ``stateless_uniform([n, 2])``; checked bit-identical eagerly, in
        # graphs and under XLA), but with the generator pinned to Philox: the
        # default ``auto_select`` path is slow under XLA on CPU, a visible share of
        # a cheap SGLD step (docs/benchmarks.md#findings-of-the-loaded-runs).
        salted = tfp.random.sanitize_seed(seed, salt=salt)
        return tf.unstack(tf.random.experimental.stateless_split(salted, n, alg=RNG_ALG))

    @staticmethod
    def _normals(parts: list[tf.Tensor], seed: tf.Tensor, salt: str) -> list[tf.Tensor]:
        # Threefry normals (tfp_sgmcmc/internal/random.py): cheaper than TensorFlow's
        # Philox normals under XLA on CPU (docs/benchmarks.md#mnist-bnn), and the same
        # eagerly and compiled.
        seeds = SGMCMCKernel._split(seed, len(parts), salt)
        return [standard_normal(tf.shape(p), s, p.dtype) for p, s in zip(parts, seeds)]

    def _init_extra(self, parts: list[tf.Tensor], est: GradientEstimate) -> dict[str, Any]:
        return {}

    def _transition(
        self,
        parts: list[tf.Tensor],
        like: Any,
        prev: Any,
        step_size: tf.Tensor,
        seed: tf.Tensor,
    ) -> tuple[list[tf.Tensor], GradientEstimate, Any, dict[str, Any]]:  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(
            f"{k}={v!r}" for k, v in self._parameters.items() if k != "name" or v is not None
        )
        return f"{type(self).__name__}({args})"
