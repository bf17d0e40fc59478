"""Step-size schedules ``ε_t`` as functions of the step counter ``t`` (0-based).

Every schedule keeps its parameters as tensors and is evaluated inside the
compiled chain, so giving new values (as ``tf.Tensor`` arguments of a
``tf.function``) never retraces. A kernel accepts either a schedule or a plain
scalar (promoted to :class:`ConstantStepSize`).

* :class:`ConstantStepSize`: ``ε_t = ε``.
* :class:`PolynomialDecay`: ``ε_t = a (b + t)^(−γ)`` (Welling & Teh 2011 [1];
  γ = 0.55 is their default; Deng et al. use ``0.001·k^(−1/3)``).
* :class:`CyclicalStepSize`: ``ε_k = (ε_0/2) [cos(π·mod(k−1, ⌈K/M⌉)/⌈K/M⌉) + 1]``
  with the 1-based ``k = t + 1`` (Zhang et al. 2020 [2]), so the very first step
  uses the largest step size (SGMCMCJax evaluates it at ``k = 0`` and starts at
  almost the smallest, an off-by-one we do not copy).

#### References

[1]: Max Welling and Yee Whye Teh. Bayesian Learning via Stochastic Gradient
     Langevin Dynamics. In _ICML_, 2011.
[2]: Ruqi Zhang, Chunyuan Li, Jianyi Zhang, Changyou Chen and Andrew Gordon
     Wilson. Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning. In
     _ICLR_, 2020. https://arxiv.org/abs/1902.03932
"""

from __future__ import annotations

import math
from typing import Any, Union

import tensorflow as tf

from tfp_sgmcmc.internal.util import check_positive, static_value

__all__ = [
    "StepSizeSchedule",
    "ConstantStepSize",
    "PolynomialDecay",
    "CyclicalStepSize",
    "ScalarOrSchedule",
    "as_schedule",
]


class StepSizeSchedule:
    """Base class: ``schedule(step, dtype) -> ε_step`` (a scalar tensor)."""

    def __call__(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:  # pragma: no cover
        raise NotImplementedError

    @property
    def parameters(self) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={_fmt(v)}" for k, v in self.parameters.items())
        return f"{type(self).__name__}({args})"


def _fmt(v: Any) -> str:
    s = static_value(v)
    return repr(s.item()) if s is not None and s.ndim == 0 else repr(v)


def _cast(x: Any, dtype: tf.DType) -> tf.Tensor:
    return tf.cast(x, dtype) if isinstance(x, (tf.Tensor, tf.Variable)) else tf.constant(x, dtype)


class ConstantStepSize(StepSizeSchedule):
    """``ε_t = step_size`` for every step.

    Args:
      step_size: positive scalar (Python number, tensor or ``tf.Variable``).

    Raises:
      ValueError: ``step_size`` is statically known and not positive.
    """

    def __init__(self, step_size: Any) -> None:
        check_positive(step_size, "step_size")
        self._step_size = step_size

    @property
    def parameters(self) -> dict[str, Any]:
        return {"step_size": self._step_size}

    def __call__(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        del step
        return _cast(self._step_size, dtype)


class PolynomialDecay(StepSizeSchedule):
    """``ε_t = a (b + t)^(−γ)`` (Welling & Teh 2011).

    Args:
      a: positive scale.
      b: non-negative offset (``b = 0`` requires ``t ≥ 1``: we use ``b + t + 1``
        only when ``one_based=True``). Default value: ``1.``.
      gamma: decay exponent in (0.5, 1] for the Robbins-Monro conditions
        (values in (0, 0.5] are allowed but documented as not decaying fast
        enough for asymptotic exactness). Default value: ``0.55``.
      one_based: evaluate at ``k = t + 1`` (the papers' 1-based counter).
        Default value: ``False``.
    """

    def __init__(self, a: Any, b: Any = 1.0, gamma: Any = 0.55, one_based: bool = False) -> None:
        check_positive(a, "a")
        check_positive(b, "b", allow_zero=True)
        check_positive(gamma, "gamma", allow_zero=True)
        if not one_based:
            bv = static_value(b)
            if bv is not None and float(bv) == 0.0:
                raise ValueError("`b` must be > 0 when `one_based=False` (ε_0 = a·0^(−γ) = ∞).")
        self._a, self._b, self._gamma, self._one_based = a, b, gamma, one_based

    @property
    def parameters(self) -> dict[str, Any]:
        return {"a": self._a, "b": self._b, "gamma": self._gamma, "one_based": self._one_based}

    def __call__(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        t = tf.cast(step, dtype) + (1.0 if self._one_based else 0.0)
        return _cast(self._a, dtype) * tf.pow(_cast(self._b, dtype) + t, -_cast(self._gamma, dtype))


class CyclicalStepSize(StepSizeSchedule):
    """Cosine cyclical schedule of Zhang et al. (2020).

    ``ε_k = (ε_0/2)[cos(π·mod(k−1, c)/c) + 1]``, ``c = ⌈K/M⌉``, ``k = t + 1``.

    Args:
      initial_step_size: ``ε_0 > 0``, the step size at the start of each cycle.
      num_steps: ``K``, the total number of steps of the run.
      num_cycles: ``M ≥ 1``, the number of cycles.
      exploration_fraction: ``β`` in [0, 1): the first fraction of each cycle is
        "exploration" (the paper runs an optimiser there). Exposed through
        :meth:`is_exploration` so a driver can discard those samples.
        Default value: ``0.``.
    """

    def __init__(
        self,
        initial_step_size: Any,
        num_steps: int,
        num_cycles: int,
        exploration_fraction: float = 0.0,
    ) -> None:
        check_positive(initial_step_size, "initial_step_size")
        if not isinstance(num_steps, int) or num_steps < 1:
            raise ValueError(f"`num_steps` must be a positive int, got {num_steps!r}.")
        if not isinstance(num_cycles, int) or not 1 <= num_cycles <= num_steps:
            raise ValueError(f"`num_cycles` must be an int in [1, num_steps], got {num_cycles!r}.")
        if not 0.0 <= float(exploration_fraction) < 1.0:
            raise ValueError(
                f"`exploration_fraction` must lie in [0, 1), got {exploration_fraction!r}."
            )
        self._eps0 = initial_step_size
        self._num_steps = num_steps
        self._num_cycles = num_cycles
        self._exploration_fraction = float(exploration_fraction)
        self._cycle_length = math.ceil(num_steps / num_cycles)

    @property
    def parameters(self) -> dict[str, Any]:
        return {
            "initial_step_size": self._eps0,
            "num_steps": self._num_steps,
            "num_cycles": self._num_cycles,
            "exploration_fraction": self._exploration_fraction,
        }

    def _position(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        # (k − 1) mod c with k = step + 1, i.e. step mod c; returned as a fraction.
        c = self._cycle_length
        return tf.cast(tf.math.floormod(tf.cast(step, tf.int64), c), dtype) / c

    def __call__(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        r = self._position(step, dtype)
        return _cast(self._eps0, dtype) / 2 * (tf.cos(math.pi * r) + 1)

    def is_exploration(self, step: tf.Tensor) -> tf.Tensor:
        """True while ``step`` lies in the exploration part of its cycle."""
        return self._position(step, tf.float64) < self._exploration_fraction


ScalarOrSchedule = Union[float, tf.Tensor, tf.Variable, StepSizeSchedule]


def as_schedule(
    step_size: ScalarOrSchedule, name: str = "step_size", allow_zero: bool = False
) -> StepSizeSchedule:
    """Promote a scalar to :class:`ConstantStepSize`; validate statically known values.

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
    v = static_value(step_size)
    if v is not None and v.ndim != 0:
        raise ValueError(f"`{name}` must be a scalar, got shape {v.shape}.")
    try:
        if allow_zero:
            check_positive(step_size, name, allow_zero=True)
            sched = ConstantStepSize.__new__(ConstantStepSize)
            sched._step_size = step_size
            return sched
        return ConstantStepSize(step_size)
    except ValueError as e:
        raise ValueError(str(e).replace("`step_size`", f"`{name}`")) from None
