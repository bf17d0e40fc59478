r"""The concrete drift transforms of the adaptive SGLD samplers (docs/algorithms.md).

Each is a [`DriftTransform`][tfp_sgmcmc.transforms.DriftTransform] (the update rule of
[`tfp_sgmcmc.transforms`][tfp_sgmcmc.transforms]): pSGLD's RMSprop diagonal
([`RMSPreconditioner`][tfp_sgmcmc.transforms.drifts.RMSPreconditioner]), the adaptive
biases ``d = g + a·A`` of MSGLD, ASGLD, AdaMax-SGLD and Adadelta-SGLD
([`AdaptiveBias`][tfp_sgmcmc.transforms.drifts.AdaptiveBias] and its subclasses), and
pSGLD's preconditioner over any of them
([`PreconditionedBias`][tfp_sgmcmc.transforms.drifts.PreconditionedBias]). The samplers
build theirs; these classes compose new ones, e.g.
``SGLD(est, ε, transform=PreconditionedBias(AdaMaxBias(a=2.), decay=0.9))``.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.internal.util import (
    RecordedArgument,
    check_in_interval,
    check_positive,
    static_value,
)
from tfp_sgmcmc.transforms import DriftTransform, TransformResult

__all__ = [
    "RMSPreconditioner",
    "AdaptiveBias",
    "MomentumBias",
    "AdamBias",
    "AdaMaxBias",
    "AdadeltaBias",
    "PreconditionedBias",
]


class RMSPreconditioner(DriftTransform):
    r"""The RMSprop diagonal preconditioner of pSGLD (Li, Chen, Carlson & Carin 2016).

    $$
    V_t = \alpha V_{t-1} + (1 - \alpha)\, g_t \odot g_t \quad (V_0 = 0;\ \text{updated before use}),
    \qquad G_t = 1 \oslash (\lambda + \sqrt{V_t}), \qquad d_t = g_t
    $$

    The divergence correction Γ(θ) is dropped, as in Li et al.'s experiments,
    SGMCMCJax, Kim et al. and Alexos et al.'s code: it vanishes as α → 1 and
    leaves a small bias otherwise. ``V`` accumulates the full N-scaled
    stochastic gradient (SGMCMCJax and Kim et al.), so ``λ`` is on that scale;
    Li et al.'s Matlab code uses the per-datum average gradient, which
    changes λ's meaning by a factor ``N``.

    Args:
      decay: ``α`` in [0, 1). Default value: ``0.99``.
      epsilon: ``λ > 0``. Default value: ``1e-5``.

    #### References

    [1]: Chunyuan Li, Changyou Chen, David Carlson and Lawrence Carin.
         Preconditioned Stochastic Gradient Langevin Dynamics for Deep Neural
         Networks. In _AAAI_, 2016. https://arxiv.org/abs/1512.07666
    """

    def __init__(self, decay: Any = 0.99, epsilon: Any = 1e-5) -> None:
        check_in_interval(decay, "decay", 0.0, 1.0, high_open=True, scalar=True)
        check_positive(epsilon, "epsilon", scalar=True)
        self._record(decay=decay, epsilon=epsilon)

    def init(self, grads: list[tf.Tensor]) -> list[tf.Tensor]:
        return [tf.zeros_like(g) for g in grads]

    def update(self, grads: list[tf.Tensor], state: list[tf.Tensor]) -> TransformResult:
        new_v, precond = [], []
        for g, v in zip(grads, state):
            a = self._cast("decay", g.dtype)
            v = a * v + (1 - a) * tf.square(g)
            new_v.append(v)
            precond.append(1.0 / (self._cast("epsilon", g.dtype) + tf.sqrt(v)))
        return TransformResult(list(grads), precond, new_v)


# --------------------------------------------------------------------------- #
# Adaptive drifts (Kim, Song & Liang; docs/algorithms.md#adaptive-drift)
# --------------------------------------------------------------------------- #


def _check_bias_factor(a: Any) -> None:
    check_positive(a, "a", allow_zero=True, scalar=True)


def _check_unit_interval(x: Any, name: str) -> None:
    # [0, 1): β = 0 means "no memory"; β = 1 would freeze the accumulator at 0.
    check_in_interval(x, name, 0.0, 1.0, high_open=True, scalar=True)


def _check_two_moments(a: Any, beta1: Any, beta2: Any, epsilon: Any) -> tuple[Any, Any]:
    """Validate the arguments Adam and AdaMax share; ``(β1, β2)`` if both are static.

    Each caller then checks its own ordering of ``β1`` and ``β2`` (a bound on ``|A_t|``).
    """
    _check_bias_factor(a)
    _check_unit_interval(beta1, "beta1")
    _check_unit_interval(beta2, "beta2")
    check_positive(epsilon, "epsilon", scalar=True)
    b1, b2 = static_value(beta1), static_value(beta2)
    return (None, None) if b1 is None or b2 is None else (b1, b2)


class AdaptiveBias(DriftTransform):
    r"""Base class of the adaptive-bias drifts ``d_t = g_t + a A_t`` (no preconditioner).

    Kim, Song & Liang's general form (their eq. 1, in our ascent sign
    ``g = ∇ log π̃``):

    $$
    \theta_{t+1} = \theta_t + \varepsilon (g_t + a A_t) + \sqrt{2 \varepsilon T}\, \xi_t
    $$

    ``A_t`` is built from the past stochastic gradients ``g_0 … g_{t−1}`` only
    (the paper's index convention: the accumulators are advanced with ``g_t``
    *after* it has been used, reusing the same stochastic value). Subclasses
    define ``bias(state)`` (``A_t`` per part, from the accumulators) and
    ``advance(grad, state, bias)`` (the accumulators for step ``t + 1``); the
    state is a list with one tuple of accumulators per state part.
    """

    a = RecordedArgument[Any]()
    """The bias factor ``a ≥ 0``."""

    @abc.abstractmethod
    def _init_part(self, g: tf.Tensor) -> tuple[tf.Tensor, ...]:
        """Accumulators of one part at ``t = 0``."""

    @abc.abstractmethod
    def _bias_part(self, acc: tuple[tf.Tensor, ...]) -> tf.Tensor:
        """``A_t`` of one part from its accumulators (which hold ``g_{<t}``)."""

    @abc.abstractmethod
    def _advance_part(
        self, g: tf.Tensor, acc: tuple[tf.Tensor, ...], bias: tf.Tensor
    ) -> tuple[tf.Tensor, ...]:
        """Accumulators for step ``t + 1`` given ``g_t`` and ``A_t``."""

    def init(self, grads: list[tf.Tensor]) -> list[tuple[tf.Tensor, ...]]:
        return [self._init_part(g) for g in grads]

    def bias(self, state: list[tuple[tf.Tensor, ...]]) -> list[tf.Tensor]:
        """``A_t`` for every part."""
        return [self._bias_part(acc) for acc in state]

    def advance(
        self, grads: list[tf.Tensor], state: list[tuple[tf.Tensor, ...]], bias: list[tf.Tensor]
    ) -> list[tuple[tf.Tensor, ...]]:
        """Accumulators for the next step (lagged: ``g_t`` enters after use)."""
        return [self._advance_part(g, acc, b) for g, acc, b in zip(grads, state, bias)]

    def update(self, grads: list[tf.Tensor], state: list[tuple[tf.Tensor, ...]]) -> TransformResult:
        bias = self.bias(state)
        drift = [g + self._cast("a", g.dtype) * b for g, b in zip(grads, bias)]
        return TransformResult(drift, None, self.advance(grads, state, bias))


class MomentumBias(AdaptiveBias):
    r"""The momentum bias of MSGLD (Kim, Song & Liang, Algorithm 1).

    $$
    A_t = m_t, \qquad m_{t+1} = \beta_1 m_t + (1 - \beta_1) g_t, \qquad m_0 = 0,
    \qquad d_t = g_t + a m_t
    $$

    ``m_t`` holds the gradients up to ``θ_{t−1}`` only (the paper writes
    ``m_t = β1 m_{t−1} + (1−β1) ∇Ũ(θ_{t−1})``), so step 0 is plain SGLD; no
    bias correction. ``a = 0`` is SGLD exactly.

    Args:
      a: bias factor ``a ≥ 0``. Default value: ``1.``.
      beta1: smoothing factor ``β1`` in [0, 1). Default value: ``0.9``.

    Raises:
      ValueError: ``a < 0`` or ``beta1`` outside [0, 1).

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient
         Langevin dynamics with adaptive drifts. _Journal of Statistical
         Computation and Simulation_, 2022. https://arxiv.org/abs/2009.09535
    """

    def __init__(self, a: Any = 1.0, beta1: Any = 0.9) -> None:
        _check_bias_factor(a)
        _check_unit_interval(beta1, "beta1")
        self._record(a=a, beta1=beta1)

    def _init_part(self, g):
        return (tf.zeros_like(g),)

    def _bias_part(self, acc):
        return acc[0]

    def _advance_part(self, g, acc, bias):
        b1 = self._cast("beta1", g.dtype)
        return (b1 * acc[0] + (1 - b1) * g,)


class AdamBias(AdaptiveBias):
    r"""The Adam bias of ASGLD (Kim, Song & Liang, Algorithm 2).

    $$
    \begin{aligned}
    A_t &= m_t \oslash D_t, \qquad D_t = \sqrt{V_t} + \lambda \ (\text{default})
        \ \text{or}\ \sqrt{V_t + \lambda} \ (\texttt{"inside"}) \\
    m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t, \qquad
        V_{t+1} = \beta_2 V_t + (1 - \beta_2)\, g_t \odot g_t \\
    m_0 &= V_0 = 0, \qquad d_t = g_t + a A_t
    \end{aligned}
    $$

    Same lag as [`MomentumBias`][tfp_sgmcmc.transforms.drifts.MomentumBias] (``m_t``, ``V_t`` hold
    ``g_{<t}``) and
    no bias correction, so at ``t = 0`` the bias is ``0 / λ = 0`` and, for
    ``t ≥ 1``, ``|m_t ⊘ √V_t| ≤ C = √((1−β1)² / ((1−β2)(1 − β1²/β2)))``
    elementwise (Kim et al., App. A.2; ``C ≈ 7.27`` at 0.9/0.999), which
    needs ``β1² < β2``. The paper prints ``√V_t + λ1`` without parentheses:
    ``lambda_placement`` chooses between the two readings (docs/algorithms.md#asgld).
    ``λ`` is on the scale of the N-scaled stochastic gradient, as in pSGLD.

    Args:
      a: bias factor ``a ≥ 0``. Default value: ``1.``.
      beta1: ``β1`` in [0, 1). Default value: ``0.9``.
      beta2: ``β2`` in [0, 1), with ``β1² < β2``. Default value: ``0.999``.
      epsilon: ``λ > 0``. Default value: ``1e-8``.
      lambda_placement: ``"outside"`` (``√V + λ``) or ``"inside"``
        (``√(V + λ)``). Default value: ``"outside"``.

    Raises:
      ValueError: ``a < 0``, ``beta1``/``beta2`` outside [0, 1),
        ``beta1² >= beta2``, ``epsilon <= 0`` or an unknown
        ``lambda_placement``.

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient
         Langevin dynamics with adaptive drifts. _Journal of Statistical
         Computation and Simulation_, 2022. https://arxiv.org/abs/2009.09535

    [2]: Diederik P. Kingma and Jimmy Ba. Adam: A Method for Stochastic
         Optimization. In _ICLR_, 2015. https://arxiv.org/abs/1412.6980
    """

    def __init__(
        self,
        a: Any = 1.0,
        beta1: Any = 0.9,
        beta2: Any = 0.999,
        epsilon: Any = 1e-8,
        lambda_placement: str = "outside",
    ) -> None:
        b1, b2 = _check_two_moments(a, beta1, beta2, epsilon)
        if b1 is not None and np.any(np.square(b1) >= b2):
            raise ValueError(
                f"`beta1`**2 must be < `beta2` (Kim et al., Thm 3.2), got beta1={b1!r}, "
                f"beta2={b2!r}."
            )
        if lambda_placement not in ("outside", "inside"):
            raise ValueError(
                f"`lambda_placement` must be 'outside' or 'inside', got {lambda_placement!r}."
            )
        self._record(
            a=a, beta1=beta1, beta2=beta2, epsilon=epsilon, lambda_placement=lambda_placement
        )

    def _init_part(self, g):
        return (tf.zeros_like(g), tf.zeros_like(g))

    def _bias_part(self, acc):
        m, v = acc
        lam = self._cast("epsilon", m.dtype)
        outside = self._parameters["lambda_placement"] == "outside"
        denom = tf.sqrt(v) + lam if outside else tf.sqrt(v + lam)
        return m / denom

    def _advance_part(self, g, acc, bias):
        m, v = acc
        b1 = self._cast("beta1", g.dtype)
        b2 = self._cast("beta2", g.dtype)
        return (b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * tf.square(g))


class AdaMaxBias(AdaptiveBias):
    r"""AdaMax-based bias (named in Kim et al. §3.3; the formula is OUR choice).

    The paper names an AdaMax bias without a formula; we use Kingma & Ba's
    infinity-norm accumulator with the same lag and no bias correction
    (docs/algorithms.md#adaptive-variants):

    $$
    A_t = m_t \oslash (u_t + \lambda), \qquad m_{t+1} = \beta_1 m_t + (1 - \beta_1) g_t,
    \qquad u_{t+1} = \max(\beta_2 u_t, |g_t|), \qquad m_0 = u_0 = 0
    $$

    ``|A_t| ≤ (1 − β1) / (1 − β1/β2)`` elementwise (each ``|g_{t−k}| ≤
    u_t / β2^{k−1}``), which is why we require ``β1 < β2``.

    Args:
      a: bias factor ``a ≥ 0``. Default value: ``1.``.
      beta1: ``β1`` in [0, 1). Default value: ``0.9``.
      beta2: ``β2`` in [0, 1), ``β1 < β2``. Default value: ``0.999``.
      epsilon: ``λ > 0``. Default value: ``1e-8``.

    Raises:
      ValueError: ``a < 0``, ``beta1``/``beta2`` outside [0, 1),
        ``beta1 >= beta2`` or ``epsilon <= 0``.

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient
         Langevin dynamics with adaptive drifts. _Journal of Statistical
         Computation and Simulation_, 2022. https://arxiv.org/abs/2009.09535

    [2]: Diederik P. Kingma and Jimmy Ba. Adam: A Method for Stochastic
         Optimization (§7.1, AdaMax). In _ICLR_, 2015.
    """

    def __init__(
        self, a: Any = 1.0, beta1: Any = 0.9, beta2: Any = 0.999, epsilon: Any = 1e-8
    ) -> None:
        b1, b2 = _check_two_moments(a, beta1, beta2, epsilon)
        if b1 is not None and np.any(b1 >= b2):
            raise ValueError(f"`beta1` must be < `beta2`, got beta1={b1!r}, beta2={b2!r}.")
        self._record(a=a, beta1=beta1, beta2=beta2, epsilon=epsilon)

    def _init_part(self, g):
        return (tf.zeros_like(g), tf.zeros_like(g))

    def _bias_part(self, acc):
        m, u = acc
        return m / (u + self._cast("epsilon", m.dtype))

    def _advance_part(self, g, acc, bias):
        m, u = acc
        b1 = self._cast("beta1", g.dtype)
        b2 = self._cast("beta2", g.dtype)
        return (b1 * m + (1 - b1) * g, tf.maximum(b2 * u, tf.abs(g)))


class AdadeltaBias(AdaptiveBias):
    r"""Adadelta-based bias (named in Kim et al. §3.3; the formula is OUR choice).

    Zeiler's unit-correcting ratio applied to the lagged momentum
    (docs/algorithms.md#adaptive-variants). The "update" whose square Adadelta accumulates is
    taken to be the bias itself, ``Δ_t = A_t`` (the transform never sees the
    step size, and ``ε a A_t`` is the bias displacement):

    $$
    \begin{aligned}
    A_t &= \sqrt{E[\Delta^2]_t + \lambda} \oslash \sqrt{E[g^2]_t + \lambda} \odot m_t \\
    m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t \\
    E[g^2]_{t+1} &= \rho E[g^2]_t + (1 - \rho)\, g_t \odot g_t \\
    E[\Delta^2]_{t+1} &= \rho E[\Delta^2]_t + (1 - \rho)\, A_t \odot A_t
        \qquad (\text{all start at } 0)
    \end{aligned}
    $$

    All accumulators are lagged like MSGLD's, so step 0 is plain SGLD.

    Args:
      a: bias factor ``a ≥ 0``. Default value: ``1.``.
      beta1: momentum factor ``β1`` in [0, 1). Default value: ``0.9``.
      rho: Adadelta decay ``ρ`` in [0, 1). Default value: ``0.95``.
      epsilon: ``λ > 0``. Default value: ``1e-6``.

    Raises:
      ValueError: ``a < 0``, ``beta1``/``rho`` outside [0, 1) or
        ``epsilon <= 0``.

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient
         Langevin dynamics with adaptive drifts. _Journal of Statistical
         Computation and Simulation_, 2022. https://arxiv.org/abs/2009.09535

    [2]: Matthew D. Zeiler. ADADELTA: An Adaptive Learning Rate Method.
         arXiv:1212.5701, 2012.
    """

    def __init__(
        self, a: Any = 1.0, beta1: Any = 0.9, rho: Any = 0.95, epsilon: Any = 1e-6
    ) -> None:
        _check_bias_factor(a)
        _check_unit_interval(beta1, "beta1")
        _check_unit_interval(rho, "rho")
        check_positive(epsilon, "epsilon", scalar=True)
        self._record(a=a, beta1=beta1, rho=rho, epsilon=epsilon)

    def _init_part(self, g):
        return (tf.zeros_like(g), tf.zeros_like(g), tf.zeros_like(g))

    def _bias_part(self, acc):
        m, eg2, ed2 = acc
        lam = self._cast("epsilon", m.dtype)
        return tf.sqrt(ed2 + lam) / tf.sqrt(eg2 + lam) * m

    def _advance_part(self, g, acc, bias):
        m, eg2, ed2 = acc
        b1 = self._cast("beta1", g.dtype)
        rho = self._cast("rho", g.dtype)
        return (
            b1 * m + (1 - b1) * g,
            rho * eg2 + (1 - rho) * tf.square(g),
            rho * ed2 + (1 - rho) * tf.square(bias),
        )


class PreconditionedBias(DriftTransform):
    r"""pSGLD's RMSprop preconditioner combined with an adaptive bias.

    Kim et al. (§3.3) say the adaptive bias and an adaptive preconditioner
    "can be used together" without giving a formula; our concrete form
    (docs/algorithms.md#adaptive-variants, Γ dropped as in pSGLD):

    $$
    \begin{aligned}
    V_t &= \alpha V_{t-1} + (1 - \alpha)\, g_t \odot g_t, \qquad
        G_t = 1 \oslash (\lambda + \sqrt{V_t}) \qquad (\text{pSGLD, not lagged}) \\
    \theta_{t+1} &= \theta_t + \varepsilon G_t \odot (g_t + a A_t)
        + \sqrt{2 \varepsilon T G_t} \odot \xi_t
    \end{aligned}
    $$

    with ``A_t`` from ``bias`` (lagged, e.g.
    [`MomentumBias`][tfp_sgmcmc.transforms.drifts.MomentumBias]). The preconditioner keeps
    pSGLD's convention (updated with ``g_t`` before use) so that ``a = 0`` is pSGLD exactly.
    State: ``(bias_state, V)``.

    Args:
      bias: an [`AdaptiveBias`][tfp_sgmcmc.transforms.drifts.AdaptiveBias].
      decay: ``α`` in [0, 1). Default value: ``0.99``.
      epsilon: ``λ > 0`` of the preconditioner. Default value: ``1e-5``.

    Raises:
      ValueError: ``bias`` is not an ``AdaptiveBias``; bad ``decay``/``epsilon``.

    #### References

    [1]: Sehwan Kim, Qifan Song and Faming Liang. Stochastic gradient
         Langevin dynamics with adaptive drifts. _Journal of Statistical
         Computation and Simulation_, 2022. https://arxiv.org/abs/2009.09535

    [2]: Chunyuan Li, Changyou Chen, David Carlson and Lawrence Carin.
         Preconditioned Stochastic Gradient Langevin Dynamics for Deep Neural
         Networks. In _AAAI_, 2016. https://arxiv.org/abs/1512.07666
    """

    def __init__(self, bias: AdaptiveBias, decay: Any = 0.99, epsilon: Any = 1e-5) -> None:
        if not isinstance(bias, AdaptiveBias):
            raise ValueError(f"`bias` must be an AdaptiveBias, got {type(bias).__name__}.")
        self._bias = bias
        self._rms = RMSPreconditioner(decay, epsilon)
        self._record(bias=bias, decay=decay, epsilon=epsilon)

    def init(self, grads: list[tf.Tensor]) -> tuple[Any, list[tf.Tensor]]:
        return (self._bias.init(grads), self._rms.init(grads))

    def update(self, grads: list[tf.Tensor], state: tuple[Any, list[tf.Tensor]]) -> TransformResult:
        bias_state, v = state
        biased = self._bias.update(grads, bias_state)
        rms = self._rms.update(grads, v)
        return TransformResult(biased.drift, rms.preconditioner, (biased.state, rms.state))
