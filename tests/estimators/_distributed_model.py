"""The model shared by the tf.distribute test workers (float64 logistic regression).

Imported by ``_distributed_worker.py`` (two logical CPU devices) and
``_multiworker_worker.py`` (two processes), which run as scripts from this directory.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

__all__ = [
    "N", "D", "BATCH", "CHAINS", "STEPS", "TRACE_LOG",
    "log_likelihood", "log_prior", "make_data", "init_state",
]

N, D, BATCH, CHAINS, STEPS = 400, 3, 40, 3, 50
#: (replica id, device of the replica's log-likelihood, rows of its shard) seen at trace time.
TRACE_LOG: list[tuple[Any, str, int]] = []


def log_likelihood(state: list[tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
    """Logistic regression with weights ``w`` [chains, D] and bias ``b`` [chains]."""
    w, b = state
    x, y = batch
    logits = tf.einsum("nd,...d->...n", x, w) + b[..., None]
    out = -tf.nn.sigmoid_cross_entropy_with_logits(tf.broadcast_to(y, tf.shape(logits)), logits)
    ctx = tf.distribute.get_replica_context()
    rid = None if ctx is None else ctx.replica_id_in_sync_group
    TRACE_LOG.append((None if not tf.is_tensor(rid) else rid.device, out.device, int(x.shape[0])))
    return out


def log_prior(state: list[tf.Tensor]) -> tf.Tensor:
    w, b = state
    return -0.5 * tf.reduce_sum(tf.square(w), -1) / 4.0 - 0.5 * tf.square(b) / 4.0


def make_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20251121)
    x = rng.standard_normal((N, D))
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-(x @ np.array([1.0, -2.0, 0.5]))))).astype(
        np.float64
    )
    return x, y


def init_state() -> list[tf.Tensor]:
    rng = np.random.default_rng(7)
    return [tf.constant(rng.standard_normal((CHAINS, D))), tf.constant(rng.standard_normal(CHAINS))]
