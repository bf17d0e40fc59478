r"""Drift and preconditioner transforms for the Langevin kernel (optax style).

A transform turns the stochastic score ``g_t = ∇ log π̃(θ_t)`` into the drift
``d_t`` and an optional diagonal preconditioner ``G_t`` used by
[`langevin_step`][tfp_sgmcmc.integrators.langevin_step]:

$$
\theta_{t+1} = \theta_t + \varepsilon G_t \odot d_t + \sqrt{2 \varepsilon T G_t} \odot \xi
$$

Its state (moment accumulators) lives in the kernel results, so kernels stay
pure. Plain SGLD uses no transform (``d = g``, ``G = 1``).

A transform is an object with ``init(grads) -> state`` and
``update(grads, state) -> TransformResult``; ``grads`` is a list of parts.
``parameters`` records the constructor arguments (so a kernel's ``copy()``
and MAMBA's arms can rebuild it).

The concrete drifts of the adaptive samplers (pSGLD's RMS preconditioner, the momentum,
Adam, AdaMax and Adadelta biases, and their preconditioned composition) are in
[`tfp_sgmcmc.transforms.drifts`][tfp_sgmcmc.transforms.drifts]; each sampler builds its own
(``MSGLD`` is ``SGLD`` with a ``MomentumBias``), and they compose directly:
``SGLD(est, ε, transform=PreconditionedBias(AdaMaxBias(a=2.), decay=0.9))``.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import tensorflow as tf

from tfp_sgmcmc.internal.util import RecordedParameters

__all__ = ["TransformResult", "DriftTransform"]


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


class DriftTransform(RecordedParameters, abc.ABC):
    """Base class of drift / preconditioner transforms.

    A subclass records its constructor arguments with ``self._record(...)``, which
    makes them its ``parameters``.
    """

    @abc.abstractmethod
    def init(self, grads: list[tf.Tensor]) -> Any:
        """Initial state, given the score at the initial state (for shapes)."""

    @abc.abstractmethod
    def update(self, grads: list[tf.Tensor], state: Any) -> TransformResult:
        """Drift and preconditioner for the score ``grads`` at the current state."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.parameters.items())
        return f"{type(self).__name__}({args})"
