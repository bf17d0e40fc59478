"""Step-size schedules ``ε_t`` as functions of the step counter ``t`` (0-based).

Every schedule keeps its parameters as tensors and is evaluated inside the
compiled chain, so giving new values (as ``tf.Tensor`` arguments of a
``tf.function``) never retraces. A kernel accepts either a schedule or a plain
scalar (promoted to [`ConstantStepSize`][tfp_sgmcmc.schedules.ConstantStepSize] by
[`as_schedule`][tfp_sgmcmc.kernels.arguments.as_schedule]).

* [`ConstantStepSize`][tfp_sgmcmc.schedules.ConstantStepSize]: ``ε_t = ε``.
* [`PolynomialDecay`][tfp_sgmcmc.schedules.PolynomialDecay]: ``ε_t = a (b + t)^(−γ)`` (Welling &
  Teh 2011 [1];
  γ = 0.55 is their default; Deng et al. use ``0.001·k^(−1/3)``).
* [`CyclicalStepSize`][tfp_sgmcmc.schedules.CyclicalStepSize]: ``ε_k = (ε_0/2)
  [cos(π·mod(k−1, ⌈K/M⌉)/⌈K/M⌉) + 1]``
  with the 1-based ``k = t + 1`` (Zhang et al. 2020 [2]), so the very first step
  uses the largest step size (SGMCMCJax evaluates it at ``k = 0`` and starts at
  almost the smallest, an off-by-one we do not copy).
* [`SAStepSize`][tfp_sgmcmc.schedules.SAStepSize]: the stochastic-approximation step
  ``ω_k = min(cap, A (k + B)^(−α))``, ``α ∈ (0, 1]``, 1-based ``k = t + 1``
  (Deng et al. 2019 [3], supplement eq. (8)).
* [`GeometricAnnealing`][tfp_sgmcmc.schedules.GeometricAnnealing]: the *temperature* ``T_t =
  1/τ_t`` of simulated
  annealing with inverse temperature ``τ_t = τ_0 c^t`` (Deng et al. [3] §4).

#### References

[1]: Max Welling and Yee Whye Teh. Bayesian Learning via Stochastic Gradient
     Langevin Dynamics. In _ICML_, 2011.
[2]: Ruqi Zhang, Chunyuan Li, Jianyi Zhang, Changyou Chen and Andrew Gordon
     Wilson. Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning. In
     _ICLR_, 2020. https://arxiv.org/abs/1902.03932
[3]: Wei Deng, Xiao Zhang, Faming Liang and Guang Lin. An Adaptive Empirical
     Bayesian Method for Sparse Deep Learning. In _NeurIPS_, 2019 (and its
     supplementary material). https://arxiv.org/abs/1910.10791
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.internal.util import (
    RecordedParameters,
    check_in_interval,
    check_int,
    check_positive,
    static_value,
)

__all__ = [
    "StepSizeSchedule",
    "ConstantStepSize",
    "PolynomialDecay",
    "CyclicalStepSize",
    "SAStepSize",
    "GeometricAnnealing",
]


class StepSizeSchedule(RecordedParameters):
    """Base class: ``schedule(step, dtype) -> ε_step`` (a scalar tensor).

    A subclass records its constructor arguments with ``self._record(...)``, which
    makes them its ``parameters`` (or overrides ``parameters``).
    """

    def __call__(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={_fmt(v)}" for k, v in self.parameters.items())
        return f"{type(self).__name__}({args})"


def _fmt(v: Any) -> str:
    s = static_value(v)
    return repr(s.item()) if s is not None and s.ndim == 0 else repr(v)


class ConstantStepSize(StepSizeSchedule):
    """``ε_t = step_size`` for every step.

    Args:
      step_size: positive scalar (Python number, tensor or ``tf.Variable``).
      allow_zero: also accept 0 (a constant temperature may be 0).
        Default value: ``False``.

    Raises:
      ValueError: ``step_size`` is statically known and not positive (negative
        when ``allow_zero``).
    """

    def __init__(self, step_size: Any, allow_zero: bool = False) -> None:
        check_positive(step_size, "step_size", allow_zero=allow_zero, scalar=True)
        # ``allow_zero`` is recorded only when set, so a step size's repr stays short.
        self._record(step_size=step_size, **({"allow_zero": True} if allow_zero else {}))

    def __call__(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        del step
        return self._cast("step_size", dtype)


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
        check_positive(a, "a", scalar=True)
        check_positive(b, "b", allow_zero=True, scalar=True)
        check_positive(gamma, "gamma", allow_zero=True, scalar=True)
        if not one_based:
            bv = static_value(b)
            if bv is not None and float(bv) == 0.0:
                raise ValueError("`b` must be > 0 when `one_based=False` (ε_0 = a·0^(−γ) = ∞).")
        self._record(a=a, b=b, gamma=gamma, one_based=one_based)

    def __call__(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        t = tf.cast(step, dtype) + (1.0 if self._parameters["one_based"] else 0.0)
        a, b, gamma = (self._cast(name, dtype) for name in ("a", "b", "gamma"))
        return a * tf.pow(b + t, -gamma)


class CyclicalStepSize(StepSizeSchedule):
    """Cosine cyclical schedule of Zhang et al. (2020).

    ``ε_k = (ε_0/2)[cos(π·mod(k−1, c)/c) + 1]``, ``c = ⌈K/M⌉``, ``k = t + 1``.

    Args:
      initial_step_size: ``ε_0 > 0``, the step size at the start of each cycle.
      num_steps: ``K``, the total number of steps of the run.
      num_cycles: ``M ≥ 1``, the number of cycles.
      exploration_fraction: ``β`` in [0, 1): the first fraction of each cycle is
        "exploration" (the paper runs an optimiser there). Exposed through
        `is_exploration` so a driver can discard those samples.
        Default value: ``0.``.

    Raises:
      ValueError: naming the argument: ``initial_step_size`` not a positive
        scalar; ``num_steps`` not an int ≥ 1 or ``num_cycles`` not an int in
        ``[1, num_steps]`` (Python and NumPy ints pass, bools do not);
        ``exploration_fraction`` not a number in ``[0, 1)``.
    """

    def __init__(
        self,
        initial_step_size: Any,
        num_steps: int,
        num_cycles: int,
        exploration_fraction: float = 0.0,
    ) -> None:
        check_positive(initial_step_size, "initial_step_size", scalar=True)
        num_steps = check_int(num_steps, "num_steps", 1)
        num_cycles = check_int(num_cycles, "num_cycles", 1, maximum=num_steps)
        check_in_interval(
            exploration_fraction, "exploration_fraction", 0.0, 1.0, high_open=True, scalar=True
        )
        try:  # kept as a Python float: ``is_exploration`` compares with it in float64
            exploration_fraction = float(exploration_fraction)
        except (TypeError, ValueError) as e:
            raise ValueError(
                "`exploration_fraction` must be a number in [0, 1) known at construction, "
                f"got {exploration_fraction!r}."
            ) from e
        self._record(
            initial_step_size=initial_step_size,
            num_steps=num_steps,
            num_cycles=num_cycles,
            exploration_fraction=exploration_fraction,
        )
        self._cycle_length = math.ceil(num_steps / num_cycles)

    def _position(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        # (k − 1) mod c with k = step + 1, i.e. step mod c; returned as a fraction.
        c = self._cycle_length
        return tf.cast(tf.math.floormod(tf.cast(step, tf.int64), c), dtype) / c

    def __call__(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        r = self._position(step, dtype)
        return self._cast("initial_step_size", dtype) / 2 * (tf.cos(math.pi * r) + 1)

    def is_exploration(self, step: tf.Tensor) -> tf.Tensor:
        """True while ``step`` lies in the exploration part of its cycle."""
        return self._position(step, tf.float64) < self._parameters["exploration_fraction"]


class SAStepSize(StepSizeSchedule):
    """Stochastic-approximation step ``ω_k = min(cap, A (k + B)^(−α))`` (Deng et al. 2019).

    ``k = t + 1`` is the 1-based iteration number of the step that starts at
    counter ``t`` (the recursion ``θ_{k+1} = (1 − ω_{k+1}) θ_k + ω_{k+1} g(β_{k+1})``
    of the supplement, eq. (4), uses ``ω_{k+1}`` at iteration ``k+1``). With
    ``A > 0`` and ``α ∈ (0, 1]`` the sequence decreases to 0 and ``Σ ω_k = ∞``
    (supplement Assumption 1, eq. (5)); the optional ``cap`` bounds the first
    values (the authors' R notebook uses ``min(0.1, 1000 (100 + k)^(−0.7))``,
    where the cap binds for every ``k ≤ 5·10^5``).

    Values used by the authors: logistic simulation ``A = 10, B = 1000,
    α = 0.7``; UCI code ``A = 1, B = 100, α = 0.7``.

    Args:
      A: ``A > 0``, the scale.
      B: ``B ≥ 0``, the offset. Default value: ``0.``.
      alpha: ``α ∈ (0, 1]``, the decay exponent. Default value: ``0.7``.
      cap: optional upper bound in ``(0, 1]``. Default value: ``None``.

    Raises:
      ValueError: ``A ≤ 0``, ``B < 0``, ``alpha`` outside ``(0, 1]`` or ``cap``
        outside ``(0, 1]``, or any of them not a real scalar (``None`` is
        allowed for ``cap`` only), naming the argument.

    #### References

    [1]: Wei Deng, Xiao Zhang, Faming Liang and Guang Lin. An Adaptive
         Empirical Bayesian Method for Sparse Deep Learning. In _NeurIPS_, 2019.
    """

    def __init__(self, A: Any, B: Any = 0.0, alpha: Any = 0.7, cap: Any = None) -> None:
        check_positive(A, "A", scalar=True)
        check_positive(B, "B", allow_zero=True, scalar=True)
        # ω_k → 0 with Σ ω_k = ∞ needs α in (0, 1].
        check_in_interval(alpha, "alpha", 0.0, 1.0, low_open=True, scalar=True)
        if cap is not None:
            check_in_interval(cap, "cap", 0.0, 1.0, low_open=True, scalar=True)
        self._record(A=A, B=B, alpha=alpha, cap=cap)

    def __call__(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        k = tf.cast(step, dtype) + 1.0
        big_a, big_b, alpha = (self._cast(name, dtype) for name in ("A", "B", "alpha"))
        w = big_a * tf.pow(k + big_b, -alpha)
        if self._parameters["cap"] is not None:
            w = tf.minimum(w, self._cast("cap", dtype))
        return w


class GeometricAnnealing(StepSizeSchedule):
    """Temperature of geometric simulated annealing: ``T_t = 1 / (τ_0 c^t)``.

    Deng et al. (2019) write the Langevin noise as ``N(0, 2ε/τ)`` with ``τ`` an
    **inverse** temperature and anneal ``τ_t = τ_0 c^t`` (``c = 1.003`` per
    iteration in the UCI study, ``1.005`` for ResNet; ``c > 1`` cools). Our
    kernels' ``temperature`` ``T`` *multiplies* the noise variance, so
    ``T = 1/τ``: this schedule evaluates to ``T_t = τ_0^{-1} c^{-t}``
    (computed as ``exp(−log τ_0 − t log c)``, no overflow of ``c^t``), and is
    passed as any kernel's ``temperature=``. `inverse_temperature`
    returns Deng's ``τ_t``.

    Args:
      tau0: initial inverse temperature ``τ_0 > 0`` (``τ_0 = 1``: start at the
        posterior).
      c: growth factor of the inverse temperature per step, ``c > 0``
        (``c > 1`` anneals towards the mode, ``c = 1`` is constant).
        Default value: ``1.003``.

    Raises:
      ValueError: ``tau0 ≤ 0`` or ``c ≤ 0``.
    """

    def __init__(self, tau0: Any = 1.0, c: Any = 1.003) -> None:
        check_positive(tau0, "tau0", scalar=True)
        check_positive(c, "c", scalar=True)
        self._record(tau0=tau0, c=c)

    def inverse_temperature(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        """Deng's ``τ_t = τ_0 c^t``."""
        return 1.0 / self(step, dtype)

    def __call__(self, step: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        t = tf.cast(step, dtype)
        tau0, c = self._cast("tau0", dtype), self._cast("c", dtype)
        log_tau = tf.math.log(tau0) + t * tf.math.log(c)
        return tf.exp(-log_tau)
