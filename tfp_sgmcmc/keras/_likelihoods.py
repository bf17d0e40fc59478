r"""The per-example log-likelihoods of the Keras bridges, written once.

[`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior] and
[`BayesianModel`][tfp_sgmcmc.keras.BayesianModel] read a model's outputs ``f_W(x)`` ``[n, ...]``
(flattened to ``[n, k]``) as

* ``"categorical"``: ``log p(y = c) = log_softmax(f)_c`` (logits), or ``log max(f_c, tiny)``
  (probabilities);
* ``"bernoulli"``: with ``f`` the first coordinate, ``y f − softplus(f)`` (a logit), or
  ``y log p + (1 − y) log(1 − p)`` with ``p = f`` clipped at ``tiny`` (a probability);
* ``"gaussian"``: ``Σ_j log N(y_j; f_j, σ²)`` over the ``k`` output coordinates, from
  ``log σ``;
* a callable ``(y, outputs) -> [n]``, the user's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

__all__ = ["per_example_log_likelihood", "gaussian_log_prior"]


def per_example_log_likelihood(
    likelihood: Any, y: Any, outputs: Any, *, from_logits: bool | None, log_noise: Any = None
) -> tf.Tensor:
    """``log p(y_i | f_W(x_i))``, ``[n]`` (module docstring).

    Args:
      likelihood: ``"categorical"``, ``"bernoulli"``, ``"gaussian"`` or a callable.
      y: the labels of the ``n`` rows (class ids, ``{0, 1}`` or values).
      outputs: the model's outputs (a list of them for a callable likelihood).
      from_logits: whether the outputs are logits (``"categorical"``, ``"bernoulli"``).
      log_noise: ``log σ`` of ``"gaussian"``, a scalar tensor.
    """
    if callable(likelihood):
        return likelihood(y, outputs)
    n = tf.shape(outputs)[0]
    out = tf.reshape(outputs, tf.stack([n, -1]))
    tiny = np.finfo(out.dtype.as_numpy_dtype).tiny
    if likelihood == "categorical":
        logp = tf.nn.log_softmax(out, axis=-1) if from_logits else tf.math.log(
            tf.maximum(out, tiny))
        return tf.gather(logp, tf.cast(tf.reshape(y, [-1]), tf.int32), axis=-1, batch_dims=1)
    if likelihood == "bernoulli":
        yy = tf.cast(tf.reshape(y, [-1]), out.dtype)
        if from_logits:
            logit = out[:, 0]
            return yy * logit - tf.nn.softplus(logit)
        p1 = out[:, 0]
        return yy * tf.math.log(tf.maximum(p1, tiny)) + (1 - yy) * tf.math.log(
            tf.maximum(1 - p1, tiny)
        )
    if likelihood != "gaussian":
        raise ValueError(f"unknown likelihood {likelihood!r}")
    yy = tf.reshape(tf.cast(y, out.dtype), tf.shape(out))
    log_s = tf.cast(log_noise, out.dtype)
    z = (yy - out) * tf.exp(-log_s)
    return tf.reduce_sum(-0.5 * tf.square(z) - log_s - 0.5 * np.log(2 * np.pi), axis=-1)


def gaussian_log_prior(weights: Sequence[tf.Tensor], scale: float, axes: Sequence[Any]) -> Any:
    """``log N(W; 0, scale² I)`` up to a constant: ``−Σ_k ‖W_k‖² / (2 scale²)``, each weight
    summed over its ``axes`` (those past its chain dimensions)."""
    total = 0.0
    for w, ax in zip(weights, axes):
        total = total + (tf.reduce_sum(tf.square(w), axis=list(ax)) if ax else tf.square(w))
    return -0.5 * total / (float(scale) ** 2)
