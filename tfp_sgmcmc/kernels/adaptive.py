r"""Adaptive-drift SGLD (Kim, Song & Liang): MSGLD, ASGLD and the §3.3 variants.

Each kernel is
[`SGLD`][tfp_sgmcmc.kernels.langevin.SGLD]
with a fixed drift transform from [`tfp_sgmcmc.transforms`][tfp_sgmcmc.transforms] and its
hyperparameters as constructor arguments, so ``parameters`` are exactly the
constructor arguments, ``copy(a=..., beta1=...)`` rebuilds it and MAMBA can
build arms from keyword arguments. Results are
[`SGLDKernelResults`][tfp_sgmcmc.kernels.langevin.SGLDKernelResults]; the bias
accumulators (``m``, ``V``, ...) are in ``transform_state``.

General form (Kim et al. eq. 1, ascent sign ``g_t = ∇ log π̃(θ_t)``):

$$
\theta_{t+1} = \theta_t + \varepsilon_t (g_t + a A_t) + \sqrt{2 \varepsilon_t T}\, \xi_t
$$

with ``A_t`` built from ``g_0 … g_{t−1}`` only (docs/algorithms.md#lagged-momentum).

Arguments every kernel here takes (each class documents only its own):

- ``estimator``, ``step_size`` (``ε > 0``: scalar, tensor or schedule),
  ``temperature`` (``T ≥ 0``: scalar or schedule; default ``1.``) and ``name``
  (default ``None``: the class's own name): as in
  [`SGLD`][tfp_sgmcmc.kernels.langevin.SGLD].
- ``a``: bias factor ``a ≥ 0`` (paper: 1 "or slightly larger"). Default value: ``1.``.
- ``beta1``: momentum smoothing ``β1`` in [0, 1). Default value: ``0.9``.

Every constructor raises ``ValueError`` naming the argument that is out of range.
"""

from __future__ import annotations

from typing import Any

from tfp_sgmcmc.estimators.base import GradientEstimator
from tfp_sgmcmc.internal.util import check_positive
from tfp_sgmcmc.kernels.langevin import SGLD
from tfp_sgmcmc.transforms import DriftTransform
from tfp_sgmcmc.transforms.drifts import (
    AdadeltaBias,
    AdaMaxBias,
    AdamBias,
    MomentumBias,
    PreconditionedBias,
)

# Each kernel beside its paper's acronym where it has one.
__all__ = [
    "MSGLD",
    "ASGLD",
    "AdaMaxSGLD",
    "AdadeltaSGLD",
    "PreconditionedMomentumSGLD",
    "PreconditionedAdamSGLD",
]

#: Constructor arguments every kernel shares; the rest are the drift's hyperparameters.
_COMMON_ARGS = ("estimator", "step_size", "temperature", "name")


class _AdaptiveSGLD(SGLD):
    """SGLD whose drift transform is built from the kernel's own hyperparameters.

    A variant states its hyperparameters once, in its ``__init__`` signature, and
    calls ``self._setup(locals())``; ``_make_transform`` maps them to the transform
    (by default ``_bias(**hyperparameters)``). ``parameters`` are then exactly the
    constructor arguments, so ``copy(a=..., beta1=...)`` rebuilds the transform.
    """

    _bias: type[DriftTransform]

    def _setup(self, arguments: dict[str, Any]) -> None:
        hyper = {k: v for k, v in arguments.items() if k not in (*_COMMON_ARGS, "self")}
        hyper.pop("__class__", None)
        # Validation happens in the transform's constructor (ValueError naming the
        # argument), before the base class stores anything.
        self._fixed_transform = self._make_transform(**hyper)
        self._init_from_arguments(type(self), arguments)

    def _make_transform(self, **hyper: Any) -> DriftTransform:
        return self._bias(**hyper)

    def _transform(self) -> DriftTransform:
        return self._fixed_transform


class MSGLD(_AdaptiveSGLD):
    r"""Momentum SGLD (MSGLD; Kim, Song & Liang, Algorithm 1).

    $$
    \begin{aligned}
    \theta_{t+1} &= \theta_t + \varepsilon_t (g_t + a m_t) + \sqrt{2 \varepsilon_t T}\, \xi_t \\
    m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t, \qquad m_0 = 0
    \end{aligned}
    $$

    ``g_t = ∇ log π̃(θ_t)`` is the stochastic score (one estimator call per
    step, reused for ``m`` without re-evaluation). The momentum used at step
    ``t`` holds gradients up to ``θ_{t−1}`` only (the paper's convention), so
    step 0 is plain SGLD; no bias correction. ``a = 0`` gives SGLD exactly
    (same seed, same chain). The lag matters: on the 2-D Gaussian of
    docs/algorithms.md#stationary-adaptive it changes the stationary covariance and the stability
    region (``tests/kernels/test_adaptive.py``).

    Its arguments (``estimator``, ``step_size``, ``a``, ``beta1``, ``temperature``,
    ``name``, default ``'msgld'``) are the family's shared ones
    ([`tfp_sgmcmc.kernels.adaptive`][tfp_sgmcmc.kernels.adaptive]); it has no others.

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient Langevin dynamics
         with adaptive drifts. _Journal of Statistical Computation and Simulation_, 2022,
         Algorithm 1 (momentum SGLD).
         https://arxiv.org/abs/2009.09535
    """

    _default_name = "msgld"
    _bias = MomentumBias

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        a: Any = 1.0,
        beta1: Any = 0.9,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        self._setup(locals())


class ASGLD(_AdaptiveSGLD):
    r"""Adam SGLD (ASGLD; Kim, Song & Liang, Algorithm 2).

    $$
    \begin{aligned}
    \theta_{t+1} &= \theta_t + \varepsilon_t (g_t + a\, m_t \oslash D_t)
        + \sqrt{2 \varepsilon_t T}\, \xi_t \\
    m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t, \qquad
    V_{t+1} = \beta_2 V_t + (1 - \beta_2)\, g_t \odot g_t \\
    D_t &= \sqrt{V_t} + \lambda \ (\texttt{lambda\_placement="outside"})
        \quad\text{or}\quad \sqrt{V_t + \lambda} \ (\texttt{"inside"})
    \end{aligned}
    $$

    ``m_0 = V_0 = 0``, lagged like MSGLD (the bias at ``t = 0`` is
    ``0 / λ = 0``), no bias correction; ``|m_t / √V_t| ≤ C =
    √((1−β1)²/((1−β2)(1−β1²/β2)))`` (Kim et al., App. A.2), which needs
    ``β1² < β2``. Only the bias is rescaled: the noise stays isotropic.

    Besides the shared arguments
    ([`tfp_sgmcmc.kernels.adaptive`][tfp_sgmcmc.kernels.adaptive]; ``name`` defaults
    to ``'asgld'``):

    Args:
      beta2: ``β2`` in [0, 1), ``β1² < β2``. Default value: ``0.999``.
      epsilon: ``λ > 0`` (N-scaled gradient units). Default value: ``1e-8``.
      lambda_placement: ``"outside"`` or ``"inside"``.
        Default value: ``"outside"``.

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient Langevin dynamics
         with adaptive drifts. _Journal of Statistical Computation and Simulation_, 2022,
         Algorithm 2 (Adam SGLD).
         https://arxiv.org/abs/2009.09535
    """

    _default_name = "asgld"
    _bias = AdamBias

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        a: Any = 1.0,
        beta1: Any = 0.9,
        beta2: Any = 0.999,
        epsilon: Any = 1e-8,
        lambda_placement: str = "outside",
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        self._setup(locals())


class AdaMaxSGLD(_AdaptiveSGLD):
    r"""SGLD with an AdaMax bias (named in Kim et al. §3.3; formula is OUR choice).

    $$
    \begin{aligned}
    \theta_{t+1} &= \theta_t + \varepsilon_t \big(g_t + a\, m_t \oslash (u_t + \lambda)\big)
        + \sqrt{2 \varepsilon_t T}\, \xi_t \\
    m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t, \qquad u_{t+1} = \max(\beta_2 u_t, |g_t|)
    \end{aligned}
    $$

    See [`AdaMaxBias`][tfp_sgmcmc.transforms.drifts.AdaMaxBias] (lagged, no bias
    correction, ``β1 < β2``).

    Besides the shared arguments
    ([`tfp_sgmcmc.kernels.adaptive`][tfp_sgmcmc.kernels.adaptive]; ``name`` defaults
    to ``'adamax_sgld'``):

    Args:
      beta2: decay of the running maximum ``u``. Default value: ``0.999``.
      epsilon: ``λ > 0``. Default value: ``1e-8``.

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient Langevin dynamics
         with adaptive drifts. _Journal of Statistical Computation and Simulation_, 2022,
         §3.3 (names an AdaMax bias, not its update rule).
         https://arxiv.org/abs/2009.09535
    """

    _default_name = "adamax_sgld"
    _bias = AdaMaxBias

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        a: Any = 1.0,
        beta1: Any = 0.9,
        beta2: Any = 0.999,
        epsilon: Any = 1e-8,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        self._setup(locals())


class AdadeltaSGLD(_AdaptiveSGLD):
    r"""SGLD with an Adadelta bias (named in Kim et al. §3.3; formula is OUR choice).

    $$
    \begin{aligned}
    \theta_{t+1} &= \theta_t + \varepsilon_t (g_t + a A_t) + \sqrt{2 \varepsilon_t T}\, \xi_t \\
    A_t &= \sqrt{E[\Delta^2]_t + \lambda} \oslash \sqrt{E[g^2]_t + \lambda} \odot m_t,
        \qquad \Delta_t = A_t
    \end{aligned}
    $$

    See [`AdadeltaBias`][tfp_sgmcmc.transforms.drifts.AdadeltaBias] for the accumulators
    (all lagged).

    Besides the shared arguments
    ([`tfp_sgmcmc.kernels.adaptive`][tfp_sgmcmc.kernels.adaptive]; ``name`` defaults
    to ``'adadelta_sgld'``):

    Args:
      rho: Adadelta decay ``ρ``. Default value: ``0.95``.
      epsilon: ``λ > 0``. Default value: ``1e-6``.

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient Langevin dynamics
         with adaptive drifts. _Journal of Statistical Computation and Simulation_, 2022,
         §3.3 (names an Adadelta bias, not its update rule).
         https://arxiv.org/abs/2009.09535
    """

    _default_name = "adadelta_sgld"
    _bias = AdadeltaBias

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        a: Any = 1.0,
        beta1: Any = 0.9,
        rho: Any = 0.95,
        epsilon: Any = 1e-6,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        self._setup(locals())


class PreconditionedMomentumSGLD(_AdaptiveSGLD):
    r"""pSGLD plus the MSGLD momentum bias (Kim et al. §3.3; formula is OUR choice).

    $$
    \begin{aligned}
    V_t &= \alpha V_{t-1} + (1 - \alpha)\, g_t \odot g_t, \qquad
    G_t = 1 \oslash (\lambda_G + \sqrt{V_t}) \\
    \theta_{t+1} &= \theta_t + \varepsilon_t G_t \odot (g_t + a m_t)
        + \sqrt{2 \varepsilon_t T G_t} \odot \xi_t \\
    m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t
    \end{aligned}
    $$

    ``V`` follows pSGLD (updated before use), ``m`` follows MSGLD (lagged);
    Γ is dropped. ``a = 0`` is pSGLD exactly.

    Besides the shared arguments
    ([`tfp_sgmcmc.kernels.adaptive`][tfp_sgmcmc.kernels.adaptive]; ``name`` defaults
    to ``'psgld_momentum'``):

    Args:
      decay: pSGLD ``α`` in [0, 1). Default value: ``0.99``.
      epsilon: pSGLD ``λ_G > 0``. Default value: ``1e-5``.

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient Langevin dynamics
         with adaptive drifts. _Journal of Statistical Computation and Simulation_, 2022,
         §3.3, which names a past-gradient preconditioner plus bias; the momentum bias is
         from Algorithm 1.
         https://arxiv.org/abs/2009.09535
    """

    _default_name = "psgld_momentum"

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        a: Any = 1.0,
        beta1: Any = 0.9,
        decay: Any = 0.99,
        epsilon: Any = 1e-5,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        self._setup(locals())

    def _make_transform(self, a, beta1, decay, epsilon):  # type: ignore[override]
        return PreconditionedBias(MomentumBias(a, beta1), decay, epsilon)


class PreconditionedAdamSGLD(_AdaptiveSGLD):
    r"""pSGLD plus the ASGLD Adam bias (Kim et al. §3.3; formula is OUR choice).

    $$
    \theta_{t+1} = \theta_t
        + \varepsilon_t G_t \odot \big(g_t + a\, m_t \oslash (\sqrt{V_t} + \lambda)\big)
        + \sqrt{2 \varepsilon_t T G_t} \odot \xi_t
    $$

    ``G_t`` is pSGLD's RMSprop diagonal (its own ``decay`` α and
    ``precond_epsilon``, updated before use), ``m_t``, ``V_t`` are ASGLD's
    lagged moments (``beta1``, ``beta2``, ``epsilon``).

    Besides the shared arguments
    ([`tfp_sgmcmc.kernels.adaptive`][tfp_sgmcmc.kernels.adaptive]; ``name`` defaults
    to ``'psgld_adam'``):

    Args:
      beta2: ASGLD's ``β2``, ``β1² < β2``. Default value: ``0.999``.
      epsilon: the bias's ``λ > 0``. Default value: ``1e-8``.
      decay: pSGLD ``α`` in [0, 1). Default value: ``0.99``.
      precond_epsilon: pSGLD ``λ_G > 0``. Default value: ``1e-5``.

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient Langevin dynamics
         with adaptive drifts. _Journal of Statistical Computation and Simulation_, 2022,
         §3.3, which names a past-gradient preconditioner plus bias; the Adam bias is from
         Algorithm 2.
         https://arxiv.org/abs/2009.09535
    """

    _default_name = "psgld_adam"

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        a: Any = 1.0,
        beta1: Any = 0.9,
        beta2: Any = 0.999,
        epsilon: Any = 1e-8,
        decay: Any = 0.99,
        precond_epsilon: Any = 1e-5,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        self._setup(locals())

    def _make_transform(  # type: ignore[override]
        self, a, beta1, beta2, epsilon, decay, precond_epsilon
    ):
        check_positive(precond_epsilon, "precond_epsilon", scalar=True)
        bias = AdamBias(a, beta1, beta2, epsilon)
        return PreconditionedBias(bias, decay, precond_epsilon)


