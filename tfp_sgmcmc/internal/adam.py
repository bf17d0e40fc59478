r"""One small Adam, shared by the MAP finder and FSSD-opt's location search.

Textbook Adam (Kingma & Ba 2015, Algorithm 1, with bias correction), written
for **ascent** (the callers maximise ``log π`` or ``FSSD²_U``):

```none
m_t = β1 m_{t−1} + (1 − β1) g_t,      v_t = β2 v_{t−1} + (1 − β2) g_t²
x_t = x_{t−1} + lr · (m_t / (1 − β1^t)) / (√(v_t / (1 − β2^t)) + ε)
```

Defaults ``β1 = 0.9``, ``β2 = 0.999``, ``ε = 1e-8`` (the paper's and optax's).
Pure functions on lists of tensors, so they run inside ``tf.while_loop`` under XLA.

#### References

[1]: Diederik P. Kingma and Jimmy Ba. Adam: A method for stochastic
     optimization. In _ICLR_, 2015.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

__all__ = ["AdamState", "BETA2", "adam_init", "adam_ascent_step"]

#: The second moment's decay ``β2`` (the paper's default; readers of ``v_t`` correct by it).
BETA2 = 0.999


class AdamState(NamedTuple):
    """Step count ``t`` (completed steps) and the moments ``m``, ``v`` per part."""

    step: tf.Tensor
    m: list
    v: list


def adam_init(params: list) -> AdamState:
    """Zero moments shaped like ``params`` and ``t = 0``."""
    return AdamState(
        tf.constant(0, tf.int32),
        [tf.zeros_like(p) for p in params],
        [tf.zeros_like(p) for p in params],
    )


def adam_ascent_step(
    params: list,
    grads: list,
    state: AdamState,
    learning_rate: tf.Tensor,
    beta1: float = 0.9,
    beta2: float = BETA2,
    epsilon: float = 1e-8,
) -> tuple[list, AdamState]:
    """One bias-corrected Adam step **up** the gradient; returns new params and state."""
    t = state.step + 1
    tf_t = tf.cast(t, learning_rate.dtype)
    new_x, new_m, new_v = [], [], []
    for x, m, v, g in zip(params, state.m, state.v, grads):
        m = beta1 * m + (1.0 - beta1) * g
        v = beta2 * v + (1.0 - beta2) * g * g
        m_hat = m / (1.0 - beta1**tf_t)
        v_hat = v / (1.0 - beta2**tf_t)
        new_x.append(x + learning_rate * m_hat / (tf.sqrt(v_hat) + epsilon))
        new_m.append(m)
        new_v.append(v)
    return new_x, AdamState(t, new_m, new_v)
