"""How a kernel reads its per-step scalars: a step size, a temperature, an SA step ``ω``.

Each is a scalar or a [`StepSizeSchedule`][tfp_sgmcmc.schedules.StepSizeSchedule] of the
step counter; [`as_schedule`][tfp_sgmcmc.kernels.arguments.as_schedule] promotes a scalar to
[`ConstantStepSize`][tfp_sgmcmc.schedules.ConstantStepSize] and validates what is known
statically, and [`check_sa_schedule`][tfp_sgmcmc.kernels.arguments.check_sa_schedule] admits
only the decaying steps the stochastic-approximation theory needs. For writers of kernels;
the schedules themselves are in [`tfp_sgmcmc.schedules`][tfp_sgmcmc.schedules].
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfp_sgmcmc.internal.util import static_number, static_value
from tfp_sgmcmc.schedules import (
    ConstantStepSize,
    PolynomialDecay,
    SAStepSize,
    StepSizeSchedule,
)

__all__ = ["ScalarOrSchedule", "as_schedule", "check_sa_schedule"]


def check_sa_schedule(schedule: Any, name: str = "sa_step_size") -> StepSizeSchedule:
    """Validate a stochastic-approximation step ``ω_k`` that must decay to 0.

    Accepted: [`SAStepSize`][tfp_sgmcmc.schedules.SAStepSize] (decaying by construction) and
    [`PolynomialDecay`][tfp_sgmcmc.schedules.PolynomialDecay] with ``γ ∈ (0,
    1]`` (the same family). Constants
    (including SGLD-EM's ``ω ≡ 1``) and other schedules are rejected, because
    the SA convergence theory (Deng et al. 2019, supplement Assumption 1)
    needs ``ω_k → 0`` and ``Σ ω_k = ∞``.

    Raises:
      ValueError: naming ``name``, for anything that is not known to decay.
    """
    if isinstance(schedule, SAStepSize):
        return schedule
    if isinstance(schedule, PolynomialDecay):
        g = static_value(schedule.parameters["gamma"])
        if g is not None and 0 < float(g) <= 1:
            return schedule
        raise ValueError(
            f"`{name}` must decay with exponent in (0, 1] (ω_k → 0, Σ ω_k = ∞), got {schedule!r}."
        )
    raise ValueError(
        f"`{name}` must be a decaying SA schedule (SAStepSize or PolynomialDecay with γ ∈ (0, 1]) "
        f"when a stochastic-approximation schedule is required, got {schedule!r}."
    )


ScalarOrSchedule = float | tf.Tensor | tf.Variable | StepSizeSchedule


def as_schedule(
    step_size: ScalarOrSchedule, name: str = "step_size", allow_zero: bool = False
) -> StepSizeSchedule:
    """Promote a scalar to [`ConstantStepSize`][tfp_sgmcmc.schedules.ConstantStepSize]; validate
    statically known values.

    Any per-step scalar (step size, temperature, SA step ω) uses this: the
    schedule is evaluated at the step counter inside the compiled chain.
    ``allow_zero`` admits 0 (temperature 0 = optimiser).
    """
    if isinstance(step_size, StepSizeSchedule):
        return step_size
    if callable(step_size):
        raise ValueError(
            f"`{name}` must be a scalar or a StepSizeSchedule, got a plain callable; "
            "subclass StepSizeSchedule so its parameters are recorded."
        )
    v = static_number(step_size, name)
    if v is not None and v.ndim != 0:
        raise ValueError(f"`{name}` must be a scalar, got shape {v.shape}.")
    try:
        return ConstantStepSize(step_size, allow_zero=allow_zero)
    except (ValueError, TypeError) as e:
        raise type(e)(str(e).replace("`step_size`", f"`{name}`")) from None
