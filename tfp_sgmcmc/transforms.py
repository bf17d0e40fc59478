"""Drift and preconditioner transforms for the Langevin kernel (optax style).

A transform turns the stochastic score ``g_t = ∇ log π̃(θ_t)`` into the drift
``d_t`` and an optional diagonal preconditioner ``G_t`` used by
:func:`~tfp_sgmcmc.integrators.langevin_step`:

```none
θ_{t+1} = θ_t + ε G_t ⊙ d_t + √(2 ε T G_t) ⊙ ξ
```

Its state (moment accumulators) lives in the kernel results, so kernels stay
pure. Plain SGLD uses no transform (``d = g``, ``G = 1``).

A transform is an object with ``init(grads) -> state`` and
``update(grads, state) -> TransformResult``; ``grads`` is a list of parts.
``parameters`` records the constructor arguments (so a kernel's ``copy()``
and MAMBA's arms can rebuild it).
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import tensorflow as tf

from tfp_sgmcmc.internal.util import check_in_interval, check_positive

__all__ = ["TransformResult", "DriftTransform", "RMSPreconditioner"]


class TransformResult(NamedTuple):
    """What a transform gives the Langevin step.

    Attributes:
      drift: list of tensors ``d_t`` (one per state part).
      preconditioner: list of tensors ``G_t``, or ``None`` for ``G = 1``.
      state: the transform's next state.
    """

    drift: list[tf.Tensor]
    preconditioner: list[tf.Tensor] | None
    state: Any


class DriftTransform(abc.ABC):
    """Base class of drift / preconditioner transforms."""

    @property
    @abc.abstractmethod
    def parameters(self) -> dict[str, Any]:
        """Constructor arguments."""

    @abc.abstractmethod
    def init(self, grads: list[tf.Tensor]) -> Any:
        """Initial state, given the score at the initial state (for shapes)."""

    @abc.abstractmethod
    def update(self, grads: list[tf.Tensor], state: Any) -> TransformResult:
        """Drift and preconditioner for the score ``grads`` at the current state."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.parameters.items())
        return f"{type(self).__name__}({args})"


class RMSPreconditioner(DriftTransform):
    """The RMSprop diagonal preconditioner of pSGLD (Li, Chen, Carlson & Carin 2016).

    ```none
    V_t = α V_{t−1} + (1 − α) g_t ⊙ g_t        (V_0 = 0; updated before use)
    G_t = 1 ⊘ (λ + √V_t),   d_t = g_t
    ```

    The divergence correction Γ(θ) is dropped, as in Li et al.'s experiments,
    SGMCMCJax and both seed papers that use pSGLD: it vanishes as α → 1 and
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
        check_in_interval(decay, "decay", 0.0, 1.0, high_open=True)
        check_positive(epsilon, "epsilon")
        self._decay = decay
        self._epsilon = epsilon

    @property
    def parameters(self) -> dict[str, Any]:
        return {"decay": self._decay, "epsilon": self._epsilon}

    def init(self, grads: list[tf.Tensor]) -> list[tf.Tensor]:
        return [tf.zeros_like(g) for g in grads]

    def update(self, grads: list[tf.Tensor], state: list[tf.Tensor]) -> TransformResult:
        new_v, precond = [], []
        for g, v in zip(grads, state):
            a = tf.cast(self._decay, g.dtype)
            v = a * v + (1 - a) * tf.square(g)
            new_v.append(v)
            precond.append(1.0 / (tf.cast(self._epsilon, g.dtype) + tf.sqrt(v)))
        return TransformResult(list(grads), precond, new_v)
