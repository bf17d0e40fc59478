"""Second-order SG-MCMC: SGHMC (Chen, Fox & Guestrin 2014)."""

from __future__ import annotations

import collections
import warnings
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data import DatasetData
from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator
from tfp_sgmcmc.integrators import sghmc_momentum_step
from tfp_sgmcmc.internal.util import (
    AttributeView,
    RecordedArgument,
    cast_param,
    check_int,
    check_positive,
    estimator_data,
    static_value,
)
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.tfp_wrappers import SGMCMCResultsMixin

__all__ = ["SGHMCKernelResults", "SGHMC"]

ORDERS = ("chen", "explicit")
#: Largest ``num_leapfrog_steps``: the loop is unrolled when the step is traced.
MAX_LEAPFROG_STEPS = 1000


class SGHMCKernelResults(
    SGMCMCResultsMixin,
    collections.namedtuple(
        "SGHMCKernelResults",
        [
            "target_log_prob",
            "grads_target_log_prob",
            "estimator_state",
            "momentum",  # v after the last leapfrog step (list of parts)
            "step",
            "step_size",
            "diverged",
            "seed",
        ],
    ),
):
    __slots__ = ()


class SGHMC(SGMCMCKernel):
    r"""Stochastic gradient Hamiltonian Monte Carlo with friction (Chen et al. 2014).

    One ``one_step`` (one returned sample) = an optional momentum refresh
    ``v ~ N(0, η T I)`` followed by ``L = num_leapfrog_steps`` updates, each with
    its own minibatch. Chen et al.'s eq. (15) (``order="chen"``, default; the
    score is taken at the *new* position, symplectic Euler):

    $$
    \theta \leftarrow \theta + v, \qquad
    v \leftarrow v + \eta \nabla \log \tilde\pi(\theta) - \alpha v
        + \sqrt{2 (\alpha - \hat\beta) \eta T}\, \xi
    $$

    ``order="explicit"`` reproduces SGMCMCJax (and hence the MAMBA paper's
    numbers): both updates use the score at the position *before* the move.
    ``η = step_size`` (SGMCMCJax's ``dt``), ``α = friction`` (default 0.01, the
    MAMBA paper's value), ``β̂ = noise_estimate`` of the gradient-noise
    (default 0), ``T = temperature``. With ``momentum_refresh=False`` the
    momentum persists between samples (the "SGD with momentum" view of Saatci
    & Wilson and Deng et al., with ``α = 1 − μ``); it is drawn once at the first
    step.

    Uncalibrated: O(η) bias at a fixed step; explicit Euler on Hamiltonian
    dynamics gains energy, and only the friction keeps it stable (why the
    MAMBA paper's heuristic SGHMC, η = 1/N with L = 10, diverged).

    Args:
      estimator: gradient estimator.
      step_size: ``η > 0`` (scalar or schedule of the sample index; all ``L``
        inner updates of a sample use the same value).
      num_leapfrog_steps: ``L ≥ 1`` (Python int; the loop is unrolled, one
        estimator call per leapfrog step). ``L = 1`` only makes sense with
        ``momentum_refresh=False``: with a refresh the momentum's kick is
        discarded before it moves θ (a warning says so). Default value: ``5``
        (the smallest L of the MAMBA paper's grids).
      friction: ``α > 0``. Default value: ``0.01``.
      noise_estimate: ``β̂`` in ``[0, α]``. Default value: ``0.``.
      momentum_refresh: resample ``v`` at every sample. Default value: ``True``.
      order: ``"chen"`` or ``"explicit"``. Default value: ``"chen"``.
      temperature: ``T ≥ 0``, a scalar or a schedule of the step (annealing).
        Default value: ``1.``.
      minibatch_per_trajectory: if ``True``, the ``L`` leapfrog steps of one
        sample share one minibatch (BlackJAX's scheme) instead of drawing one
        each (Chen et al., SGMCMCJax): every call of the trajectory gets the
        same seed and the estimator state of the trajectory's start, and the
        state advances once per sample. Statistically the gradient noise of
        the ``L`` steps is then perfectly correlated instead of independent,
        so it accumulates coherently along a trajectory and, for the same
        ``η``, the stationary law moves further from the target (on a
        Gaussian, both laws are exact Lyapunov solutions:
        ``tests/kernels/test_sghmc_minibatch.py``).
        Under XLA the identical batch draws are computed once, so a sample
        costs one batch gather instead of ``L``. Needs an estimator whose batch
        is a function of its state and seed (every in-memory scheme; a
        ``DatasetData`` yields the next batch on every read and raises a
        ``ValueError``). With ``order="explicit"`` the first update still uses
        the previous sample's score. Default value: ``False``.
      name: Default value: ``None`` (``'sghmc'``).

    Raises:
      ValueError: non-positive ``step_size``/``friction``, ``noise_estimate``
        outside ``[0, friction]``, ``num_leapfrog_steps`` not an int in
        ``[1, 1000]``, unknown ``order``; ``momentum_refresh`` or
        ``minibatch_per_trajectory`` not a bool; ``minibatch_per_trajectory=True``
        with an estimator reading a ``DatasetData`` (also through a wrapping
        estimator's ``base``).

    #### References

    [1]: Tianqi Chen, Emily B. Fox and Carlos Guestrin. Stochastic Gradient
         Hamiltonian Monte Carlo. In _ICML_, 2014. https://arxiv.org/abs/1402.4102
    """

    _results_type = SGHMCKernelResults
    _default_name = "sghmc"
    cli_name = "sghmc"

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        num_leapfrog_steps: int = 5,
        friction: Any = 0.01,
        noise_estimate: Any = 0.0,
        momentum_refresh: bool = True,
        order: str = "chen",
        temperature: Any = 1.0,
        minibatch_per_trajectory: bool = False,
        name: str | None = None,
    ) -> None:
        for flag, value in (
            ("minibatch_per_trajectory", minibatch_per_trajectory),
            ("momentum_refresh", momentum_refresh),
        ):
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"`{flag}` must be a bool, got {value!r}.")
        momentum_refresh = bool(momentum_refresh)
        minibatch_per_trajectory = bool(minibatch_per_trajectory)
        if minibatch_per_trajectory:
            data = estimator_data(estimator)
            if isinstance(data, DatasetData):
                raise ValueError(
                    "`minibatch_per_trajectory=True` needs a minibatch that is a function of "
                    "the estimator state and the seed, so that every leapfrog step of a "
                    "trajectory can draw the same one; the estimator reads a DatasetData "
                    "(tf.data) source, which yields the next batch on every read. Use an "
                    "in-memory source (InMemoryData or arrays) or "
                    "`minibatch_per_trajectory=False`."
                )
        # The leapfrog loop is unrolled at trace time: a huge L would never finish tracing.
        check_int(num_leapfrog_steps, "num_leapfrog_steps", 1, maximum=MAX_LEAPFROG_STEPS)
        check_positive(friction, "friction", scalar=True)
        check_positive(noise_estimate, "noise_estimate", allow_zero=True, scalar=True)
        f, b = static_value(friction), static_value(noise_estimate)
        if f is not None and b is not None and float(b) > float(f):
            raise ValueError(
                f"`noise_estimate` ({float(b)}) must not exceed `friction` ({float(f)}): the "
                "injected noise variance 2(α − β̂)η would be negative."
            )
        if order not in ORDERS:
            raise ValueError(f"`order` must be one of {ORDERS}, got {order!r}.")
        if num_leapfrog_steps == 1 and momentum_refresh:
            # Every update moves θ by the momentum *before* kicking it, so with one
            # leapfrog step per sample the kick is discarded by the next refresh: the
            # chain is a Gaussian random walk that never uses the gradient.
            warnings.warn(
                "SGHMC with num_leapfrog_steps=1 and momentum_refresh=True never uses the "
                "gradient (each sample is θ + v, v ~ N(0, ηT)); use num_leapfrog_steps >= 2 "
                "or momentum_refresh=False.",
                UserWarning,
                stacklevel=2,
            )
        self._init_from_arguments(SGHMC, locals())

    num_leapfrog_steps = RecordedArgument[int]("``L``, leapfrog steps per transition.")

    gradient_evaluations_per_step = AttributeView[int]("num_leapfrog_steps")

    def gradient_noise_coefficient(
        self, step_size: float, temperature: float
    ) -> tuple[float, bool] | None:
        """``r = η Var(ĝ) / (2(α − β̂)T)`` (Chen et al. 2014, Sec. 3.2)."""
        alpha = float(cast_param(self._parameters["friction"], tf.float64))
        beta = float(cast_param(self._parameters["noise_estimate"], tf.float64))
        return step_size / (2.0 * (alpha - beta) * temperature), True

    def _init_extra(self, parts: list[tf.Tensor], est: GradientEstimate) -> dict[str, Any]:
        return {"momentum": [tf.zeros_like(p) for p in parts]}

    def _transition(self, parts, like, prev, step_size, seed):
        p = self._parameters
        big_l = p["num_leapfrog_steps"]
        seeds = self._split(seed, 2 * big_l + 1, "sghmc.one_step")
        dtype = parts[0].dtype
        temp = self._temperature(dtype, prev.step)
        alpha = cast_param(p["friction"], dtype)  # exact in float64 (not tf.cast)
        beta = cast_param(p["noise_estimate"], dtype)

        def fresh() -> list[tf.Tensor]:
            return [tf.sqrt(step_size * temp) * z for z in self._normals(parts, seeds[0], "v0")]

        if p["momentum_refresh"]:
            v = fresh()
        else:
            v = tf.cond(prev.step == 0, fresh, lambda: list(prev.momentum))

        theta, grads = list(parts), list(prev.grads_target_log_prob)
        est_state, est = prev.estimator_state, None
        per_trajectory = p["minibatch_per_trajectory"]
        start_state = prev.estimator_state

        def estimate(theta, est_state, l):
            if per_trajectory:  # the same batch for every leapfrog step of this sample
                return self._estimate(theta, like, start_state, seeds[2])
            return self._estimate(theta, like, est_state, seeds[2 + 2 * l])

        for l in range(big_l):
            noise = self._normals(theta, seeds[1 + 2 * l], "xi")
            if p["order"] == "chen":
                theta = [t + vi for t, vi in zip(theta, v)]
                est, est_state = estimate(theta, est_state, l)
                grads = est.grads_target_log_prob
                v = [
                    sghmc_momentum_step(vi, g, step_size, alpha, beta, temp, xi)
                    for vi, g, xi in zip(v, grads, noise)
                ]
            else:  # explicit Euler (SGMCMCJax): both updates use the score at the old θ
                new_theta = [t + vi for t, vi in zip(theta, v)]
                v = [
                    sghmc_momentum_step(vi, g, step_size, alpha, beta, temp, xi)
                    for vi, g, xi in zip(v, grads, noise)
                ]
                theta = new_theta
                est, est_state = estimate(theta, est_state, l)
                grads = est.grads_target_log_prob
        return theta, est, est_state, {"momentum": v}
