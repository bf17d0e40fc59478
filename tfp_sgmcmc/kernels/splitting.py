r"""Splitting integrators of underdamped Langevin dynamics: BAOAB and BADODAB.

Both discretise, with unit mass and ``U = −log π``,

```none
dq = p dt,   dp = ∇log π(q) dt − γ p dt + √(2γT) dW          (Langevin)
```

by composing exactly solvable pieces: **B** ``p ← p + (h/2)∇log π̃(q)``,
**A** ``q ← q + (h/2) p``, **O** the exact Ornstein-Uhlenbeck solution
(`tfp_sgmcmc.integrators.ornstein_uhlenbeck_step`) and, for BADODAB, **D**
a half step of an adaptive (Nosé-Hoover) thermostat that replaces ``γ``. One
step is ``BAOAB`` (or ``BADODAB``); the closing ``B`` uses the stochastic score
at the new position, which the next step's opening ``B`` reuses, so each step
costs one gradient evaluation like every other kernel of the library. See
``docs/samplers/splitting.md``.

#### References

[1]: Benedict Leimkuhler and Charles Matthews. Rational Construction of
     Stochastic Numerical Methods for Molecular Sampling. _Applied Mathematics
     Research eXpress_, 2013(1): 34-56, 2013.
[2]: Benedict Leimkuhler and Xiaocheng Shang. Adaptive Thermostats for Noisy
     Gradient Systems. _SIAM Journal on Scientific Computing_, 38(2):
     A712-A736, 2016.
"""

from __future__ import annotations

import collections
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator
from tfp_sgmcmc.integrators import adaptive_thermostat_half_step, ornstein_uhlenbeck_step
from tfp_sgmcmc.internal.util import RecordedArgument, cast_param, check_positive
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.tfp_wrappers import SGMCMCResultsMixin, sgmcmc_results_fields
from tfp_sgmcmc.kernels.thermostat import initial_momentum_and_thermostat

__all__ = ["BAOAB", "BADODAB", "BAOABKernelResults", "BADODABKernelResults"]


class BAOABKernelResults(
    SGMCMCResultsMixin,
    collections.namedtuple("BAOABKernelResults", sgmcmc_results_fields("momentum")),
):
    """Results of BAOAB: the common SG fields and ``momentum`` (``p`` after the closing
    B, list of parts)."""

    __slots__ = ()


class BADODABKernelResults(
    SGMCMCResultsMixin,
    collections.namedtuple(
        "BADODABKernelResults", sgmcmc_results_fields("momentum", "thermostat")
    ),
):
    """Results of BADODAB: the common SG fields, ``momentum`` (``p`` after the closing B,
    list of parts) and ``thermostat`` (``ξ``, one per state part and chain: a list of
    batch-shaped tensors)."""

    __slots__ = ()


def _fresh_momentum(kernel, parts, prev, seed, temperature):
    """``p ~ N(0, T I)`` at the first step, the carried momentum afterwards."""

    def fresh() -> list[tf.Tensor]:
        return [tf.sqrt(temperature) * z for z in kernel._normals(parts, seed, "p0")]

    return tf.cond(prev.step == 0, fresh, lambda: list(prev.momentum))


class BAOAB(SGMCMCKernel):
    r"""BAOAB Langevin splitting with a stochastic gradient (Leimkuhler & Matthews 2013).

    One step (unit mass, ``h = step_size``, ``γ = friction``, ``T = temperature``,
    ``g = ∇log π̃``, ``ξ ~ N(0, I)``):

    ```none
    p ← p + (h/2) g(q)                     B
    q ← q + (h/2) p                        A
    p ← e^{−γh} p + √(T(1 − e^{−2γh})) ξ   O
    q ← q + (h/2) p                        A
    p ← p + (h/2) g(q)                     B   (g at the new q, reused by the next step)
    ```

    (Leimkuhler & Matthews 2013, eqs. (8)-(9) and §4.) The momentum starts at
    ``N(0, T I)`` (drawn at the first step). For a Gaussian target with exact
    gradients the positions have **exactly** the target covariance for every
    stable ``h`` (``h² λ_max(−∇²log π) < 4``) and every ``γ``, and the momenta
    ``T(I − h²P/4)`` (``P`` the target precision): see
    ``tests/kernels/test_splitting.py``, which checks this against the
    Lyapunov equation of the linear recursion and by simulation.

    Relation to SGMCMCJax's ``baoab(dt, gamma, kBT)``: ``dt = h``,
    ``gamma = γ``, and its O step injects ``kBT·√(1 − e^{−2γh}) ξ``, i.e.
    ``T = kBT²`` here (its default ``kBT = 0.25`` samples ``π^{16}``; use
    ``temperature = kBT**2`` to reproduce it). It also evaluates the gradient
    twice per step; here the closing ``B``'s gradient is reused.

    Args:
      estimator: gradient estimator.
      step_size: ``h > 0`` (scalar, tensor or schedule).
      friction: ``γ > 0``. Default value: ``1.``.
      temperature: ``T ≥ 0`` (scalar or schedule). Default value: ``1.``.
      name: Default value: ``None`` (``'baoab'``).

    Raises:
      ValueError: non-positive or non-scalar ``step_size`` or ``friction``,
        negative ``temperature``.

    #### References

    [1]: Benedict Leimkuhler and Charles Matthews. Rational Construction of
         Stochastic Numerical Methods for Molecular Sampling. _Applied
         Mathematics Research eXpress_, 2013(1): 34-56, 2013.
    """

    _results_type = BAOABKernelResults
    _default_name = "baoab"
    cli_name = "baoab"

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        friction: Any = 1.0,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        check_positive(friction, "friction", scalar=True)
        super().__init__(estimator, step_size, temperature, name, friction=friction)

    friction = RecordedArgument[Any]("The friction ``γ > 0``.")

    def _init_extra(self, parts: list[tf.Tensor], est: GradientEstimate) -> dict[str, Any]:
        return {"momentum": [tf.zeros_like(p) for p in parts]}

    def _transition(self, parts, like, prev, step_size, seed):
        p_seed, noise_seed, est_seed = self._split(seed, 3, "baoab.one_step")
        dtype = parts[0].dtype
        temp = self._temperature(dtype, prev.step)
        gamma = cast_param(self._parameters["friction"], dtype)
        half = 0.5 * step_size
        p = _fresh_momentum(self, parts, prev, p_seed, temp)
        noise = self._normals(parts, noise_seed, "o")
        q = []
        for i, (qi, pi, g, xi) in enumerate(zip(parts, p, prev.grads_target_log_prob, noise)):
            pi = pi + half * g  # B
            qi = qi + half * pi  # A
            pi = ornstein_uhlenbeck_step(pi, gamma, 2.0 * gamma * temp, step_size, xi)  # O
            q.append(qi + half * pi)  # A
            p[i] = pi
        est, est_state = self._estimate(q, like, prev.estimator_state, est_seed)
        p = [pi + half * g for pi, g in zip(p, est.grads_target_log_prob)]  # B
        return q, est, est_state, {"momentum": p}


class BADODAB(SGMCMCKernel):
    r"""BADODAB: adaptive-Langevin (thermostatted) splitting (Leimkuhler & Shang 2016).

    Discretises the adaptive Langevin ("Ad-Langevin") dynamics

    ```none
    dq = p dt,  dp = ∇log π̃(q) dt − ξ p dt + σ_A dW,  dξ = μ⁻¹ (pᵀp − D T) dt,  σ_A² = 2AT
    ```

    by (unit mass, ``h = step_size``, ``A = diffusion``, ``μ = thermostat_mass``,
    ``D`` entries per state part, ``η ~ N(0, I)``)

    ```none
    p ← p + (h/2) g(q)                                         B
    q ← q + (h/2) p                                            A
    ξ ← ξ + (h/2μ)(pᵀp − D T)                                  D
    p ← e^{−ξh} p + σ_A √((1 − e^{−2ξh})/(2ξ)) η               O
    ξ ← ξ + (h/2μ)(pᵀp − D T)                                  D
    q ← q + (h/2) p                                            A
    p ← p + (h/2) g(q)                                         B   (g at the new q, reused)
    ```

    (Leimkuhler & Shang 2016, eqs. (2.3) and (3.5)-(3.11).) The thermostat
    absorbs the unknown gradient noise: its stationary mean is the friction
    that balances the *total* noise, ``⟨ξ⟩ = (σ_A² + σ_g²)/(2T)`` with ``σ_g²`` the
    gradient-noise variance per unit time (``h s²`` for a score with noise
    variance ``s²``, since each step adds ``h g``), i.e. ``⟨ξ⟩ = A`` with exact
    gradients. ``ξ`` starts at ``A``; one thermostat per state part and chain
    (as `tfp_sgmcmc.kernels.SGNHT`); the momentum starts at ``N(0, T I)``.

    Relation to SGMCMCJax's ``badodab(dt, a)``: ``dt = h``; its ``a`` is the
    initial thermostat value, its injected noise is ``σ_A = 1`` (``A = 1/(2T)``
    here) and ``μ = 1``; its thermostat is driven by ``‖p‖ − D`` (the norm, not
    ``pᵀp``), which does not keep the kinetic temperature at ``T``: we follow
    the paper.

    Args:
      estimator: gradient estimator.
      step_size: ``h > 0`` (scalar, tensor or schedule).
      diffusion: ``A > 0``, the injected-noise friction (``σ_A² = 2AT``).
        Default value: ``1.``.
      thermostat_mass: ``μ > 0``. Default value: ``1.``.
      temperature: ``T ≥ 0`` (scalar or schedule). Default value: ``1.``.
      name: Default value: ``None`` (``'badodab'``).

    Raises:
      ValueError: non-positive or non-scalar ``step_size``, ``diffusion`` or
        ``thermostat_mass``, negative ``temperature``.

    #### References

    [1]: Benedict Leimkuhler and Xiaocheng Shang. Adaptive Thermostats for
         Noisy Gradient Systems. _SIAM Journal on Scientific Computing_,
         38(2): A712-A736, 2016.
    """

    _results_type = BADODABKernelResults
    _default_name = "badodab"
    cli_name = "badodab"

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        diffusion: Any = 1.0,
        thermostat_mass: Any = 1.0,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        check_positive(diffusion, "diffusion", scalar=True)
        check_positive(thermostat_mass, "thermostat_mass", scalar=True)
        self._init_from_arguments(BADODAB, locals())

    def _init_extra(self, parts: list[tf.Tensor], est: GradientEstimate) -> dict[str, Any]:
        return initial_momentum_and_thermostat(parts, est, self._parameters["diffusion"])

    def _transition(self, parts, like, prev, step_size, seed):
        p_seed, noise_seed, est_seed = self._split(seed, 3, "badodab.one_step")
        dtype = parts[0].dtype
        temp = self._temperature(dtype, prev.step)
        a = cast_param(self._parameters["diffusion"], dtype)
        mu = cast_param(self._parameters["thermostat_mass"], dtype)
        nb = prev.target_log_prob.shape.rank or 0
        half = 0.5 * step_size
        p = _fresh_momentum(self, parts, prev, p_seed, temp)
        noise = self._normals(parts, noise_seed, "o")
        q, new_xi = [], []
        for i, (qi, pi, xi_t, g, eta) in enumerate(
            zip(parts, p, prev.thermostat, prev.grads_target_log_prob, noise)
        ):
            event_ndims = qi.shape.rank - nb
            pi = pi + half * g  # B
            qi = qi + half * pi  # A
            xi_t = adaptive_thermostat_half_step(xi_t, pi, step_size, mu, temp, event_ndims)  # D
            xi_b = tf.reshape(
                xi_t, tf.concat([tf.shape(xi_t), tf.ones([event_ndims], tf.int32)], 0)
            )
            pi = ornstein_uhlenbeck_step(pi, xi_b, 2.0 * a * temp, step_size, eta)  # O
            xi_t = adaptive_thermostat_half_step(xi_t, pi, step_size, mu, temp, event_ndims)  # D
            q.append(qi + half * pi)  # A
            p[i] = pi
            new_xi.append(xi_t)
        est, est_state = self._estimate(q, like, prev.estimator_state, est_seed)
        p = [pi + half * g for pi, g in zip(p, est.grads_target_log_prob)]  # B
        return q, est, est_state, {"momentum": p, "thermostat": new_xi}
