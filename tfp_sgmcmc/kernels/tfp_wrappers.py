"""Composition of the SG kernels with TFP's kernel wrappers.

* `TransformedTransitionKernel`: a drop-in for
  ``tfp.mcmc.TransformedTransitionKernel`` (same name, arguments, results and
  semantics: the chain runs on the unconstrained space and states come out in
  the constrained one). TFP's class looks for a ``target_log_prob_fn`` in the
  inner kernel; an SG kernel is driven by a gradient estimator instead, so
  this subclass rebuilds the SG kernel around a
  `tfp_sgmcmc.estimators.TransformedEstimator` (the change of
  variables and its log-det-Jacobian, applied to the stochastic estimate).
  Any other inner kernel (HMC, NUTS, ...) is handled by TFP's code unchanged.
* `SGMCMCResultsMixin`: the base of every SG kernel's results. SG
  kernels have no acceptance step, so the fields that TFP's
  Metropolis-Hastings and step-size-adaptation wrappers read
  (``log_acceptance_correction``, ``log_accept_ratio``) raise an
  `UncalibratedKernelError` that names the alternative, instead of
  TFP's ``AttributeError`` from deep inside the wrapper or, for
  ``tfp.mcmc.MetropolisHastings``, a silent accept/reject on the minibatch
  log-density (a chain that targets nothing). ``ThinningKernel``,
  ``sample_chain``, ``sample_fold`` and the reducers never read these fields.

See ``docs/tfp_models.md`` for the table of wrappers.
"""

from __future__ import annotations

from typing import Any

import tensorflow_probability as tfp
from tensorflow_probability.python.mcmc.transformed_kernel import make_transform_fn

from tfp_sgmcmc.estimators.base import GradientEstimator
from tfp_sgmcmc.estimators.transformed import TransformedEstimator
from tfp_sgmcmc.internal.util import AttributeView, PrettyNamedTupleMixin

__all__ = [
    "TransformedTransitionKernel",
    "SGMCMCResultsMixin",
    "sgmcmc_results_fields",
    "UncalibratedKernelError",
]

_MH_MESSAGE = (
    "tfp.mcmc.MetropolisHastings cannot wrap a stochastic-gradient kernel: it would accept "
    "or reject on the noisy minibatch log-density, with no proposal-density correction, "
    "which targets no known distribution. For an exact (full-data) chain use "
    "tfp.mcmc.MetropolisAdjustedLangevinAlgorithm, HamiltonianMonteCarlo or "
    "NoUTurnSampler on the full-data log-density (estimator.full_log_prob_and_gradient, or "
    "tfp_sgmcmc.joint.JointPosterior.target_log_prob_fn); SG kernels are run uncalibrated."
)

_ADAPTATION_MESSAGE = (
    "SG kernels have no Metropolis acceptance, so they have no `log_accept_ratio` for "
    "tfp.mcmc.SimpleStepSizeAdaptation / DualAveragingStepSizeAdaptation to adapt to. Tune "
    "the step size with MAMBA (tfp_sgmcmc.MAMBA(...).run(), Stein-discrepancy "
    "bandit) or give the kernel a step-size schedule (tfp_sgmcmc.schedules, e.g. "
    "PolynomialDecay)."
)


class UncalibratedKernelError(TypeError):
    """An SG kernel was composed with a TFP wrapper that needs an acceptance step."""

    # AutoGraph re-raises an error from converted code as its own type only when the
    # type keeps ``Exception.__init__``; otherwise a ``tf.function`` turns it into a
    # ``StagingError`` that ``except UncalibratedKernelError`` would miss.
    __init__ = Exception.__init__


class SGMCMCResultsMixin(PrettyNamedTupleMixin):
    """Base of SG kernel results: refuses the acceptance fields with a clear error.

    The error is a ``TypeError`` (not an ``AttributeError``) on purpose: TFP's
    wrappers read these fields inside ``try: ... except AttributeError`` or
    through ``hasattr``-based nested lookups, which would swallow an
    ``AttributeError`` and then fail with a generic message or, for
    ``MetropolisHastings``, silently assume a zero correction.
    """

    __slots__ = ()

    @property
    def log_acceptance_correction(self) -> Any:
        raise UncalibratedKernelError(_MH_MESSAGE)

    @property
    def log_accept_ratio(self) -> Any:
        raise UncalibratedKernelError(_ADAPTATION_MESSAGE)


def sgmcmc_results_fields(*own: str) -> list[str]:
    """Field names of an SG kernel's results: the common ones around the sampler's ``own``.

    Every SG kernel's results start with the estimate at the returned state
    (``target_log_prob``, the stochastic ``log π̃``; ``grads_target_log_prob``, its
    gradient as a list of parts; ``estimator_state``), then hold the sampler's own
    fields, and end with the step's bookkeeping: ``step`` (completed steps),
    ``step_size`` (the ``ε`` of the step that produced the state), ``diverged`` (per
    chain: a non-finite state, score or log-density) and ``seed`` (the seed given to
    ``one_step``, to replay a step).
    """
    return [
        "target_log_prob",
        "grads_target_log_prob",
        "estimator_state",
        *own,
        "step",
        "step_size",
        "diverged",
        "seed",
    ]


def _is_sg_kernel(kernel: Any) -> bool:
    params = getattr(kernel, "parameters", None) or {}
    return isinstance(params.get("estimator"), GradientEstimator) and hasattr(kernel, "copy")


def _sg_kernel_stack(kernel: Any) -> list[Any] | None:
    """``[outer, ..., sg_kernel]`` down the ``inner_kernel`` chain, or ``None``."""
    stack = [kernel]
    while not _is_sg_kernel(kernel):
        params = getattr(kernel, "parameters", None) or {}
        if "target_log_prob_fn" in params or "inner_kernel" not in params:
            return None
        kernel = params["inner_kernel"]
        stack.append(kernel)
    return stack


class TransformedTransitionKernel(tfp.mcmc.TransformedTransitionKernel):
    """``tfp.mcmc.TransformedTransitionKernel`` that also accepts SG kernels.

    The inner chain runs on ``z`` and the returned states are ``θ = f(z)``,
    ``f = bijector.forward``; the inner SG kernel (found directly or down a
    stack of ``inner_kernel`` wrappers, e.g. a ``ThinningKernel``) is rebuilt
    with ``estimator=TransformedEstimator(estimator, bijector)``, so it moves
    ``z`` with the pulled-back stochastic score

    ```none
    ∇_z log π̃_z(z) = J_f(z)^T ∇_θ log π̃(f(z)) + ∇_z log |det J_f(z)|
    ```

    Results are TFP's ``TransformedTransitionKernelResults(transformed_state,
    inner_results)``. Kernels with a ``target_log_prob_fn`` (HMC, NUTS, ...)
    are transformed by TFP's own code, so this class can replace TFP's
    everywhere.

    Args:
      inner_kernel: an SG kernel (or a wrapper stack around one), or any TFP
        kernel with a ``target_log_prob_fn``.
      bijector: ``tfp.bijectors.Bijector`` or list of them, one per state part
        (mapping the unconstrained space to the constrained one).
      name: name scope. Default value: ``None`` (``'transformed_kernel'``).

    #### Examples

    ```python
    import tensorflow as tf, tensorflow_probability as tfp
    import tfp_sgmcmc as sg

    # A positive scale sigma with log-density -sigma (an Exponential(1) target).
    estimator = sg.NoisyGradientEstimator(lambda s: -tf.reduce_sum(s, -1), 0.0)
    kernel = sg.TransformedTransitionKernel(
        sg.SGLD(estimator, step_size=1e-3), bijector=tfp.bijectors.Softplus())
    sigmas = tfp.mcmc.sample_chain(100, tf.ones([4, 1]), kernel=kernel, trace_fn=None,
                                   seed=(1, 2))   # positive, in the model's space
    ```
    """

    def __init__(self, inner_kernel: Any, bijector: Any, name: str | None = None) -> None:
        stack = _sg_kernel_stack(inner_kernel)
        if stack is None:
            super().__init__(inner_kernel, bijector, name=name)
            return
        self._parameters = dict(
            inner_kernel=inner_kernel, bijector=bijector, name=name or "transformed_kernel"
        )
        sg_kernel = stack.pop()
        rebuilt = sg_kernel.copy(
            estimator=TransformedEstimator(sg_kernel.parameters["estimator"], bijector)
        )
        while stack:
            rebuilt = stack.pop().copy(inner_kernel=rebuilt)
        self._inner_kernel = rebuilt
        self._transform_unconstrained_to_target_support = make_transform_fn(bijector, "forward")
        self._transform_target_support_to_unconstrained = make_transform_fn(bijector, "inverse")

    transformed_kernel = AttributeView[Any]("_inner_kernel")
    """The inner kernel stack as rebuilt to run on the unconstrained space."""
