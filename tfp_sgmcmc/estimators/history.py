"""The chain history ``q̂`` of structured SG-MCMC: a bounded ring buffer of states.

Alexos, Boyd & Mandt [1] replace the unknown factor ``q_{−i}`` by the empirical
distribution of the chain's own past samples (§4: uniform over
``{θ^(1), …, θ^(t)}``). Storing the whole past is impossible for long chains,
so, as the authors' code does, we keep the last ``capacity`` stored states in a
ring buffer and store every ``thinning``-th evaluated state.

The buffer is a plain nest of tensors that lives in the estimator state (and
hence in the kernel results), so ``tfp.mcmc.sample_chain`` stays pure:

* ``buffer``: one tensor per state part, shape ``[capacity + 1] + part.shape``
  (chain dimensions included; the last slot is scratch for thinned-out writes)
  — **memory: (capacity + 1) × |θ| × num_chains floats**;
* ``count``: number of valid slots (``min(#stored, capacity)``), int32;
* ``position``: the slot the next stored state overwrites, int32;
* ``calls``: number of evaluations seen (for thinning), int32.

Draws: ``index = ⌊u · count⌋`` with ``u ~ U[0, 1)``, i.e. uniform over the valid
slots (the reference code's ``randint(0, capacity) mod count`` is slightly
non-uniform until the buffer is full [docs/algorithms.md#s-sgmcmc]; we do not copy it).

#### References

[1]: Antonios Alexos, Alex Boyd and Stephan Mandt. Structured Stochastic
     Gradient MCMC. In _ICML_, 2022. https://arxiv.org/abs/2107.09028
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from tfp_sgmcmc.internal.random import philox_uniform
from tfp_sgmcmc.internal.util import check_int

__all__ = ["History", "init_history", "append_history", "draw_history_indices"]


class History(NamedTuple):
    """Ring-buffer state (see the module docstring)."""

    buffer: list[tf.Tensor]
    count: tf.Tensor
    position: tf.Tensor
    calls: tf.Tensor


def init_history(parts: list[tf.Tensor], capacity: int) -> History:
    """A buffer whose every slot holds the initial state; one valid sample.

    Filling every slot (not only slot 0) keeps every value finite and costs
    nothing extra; only ``count = 1`` slot is ever drawn from at first.
    """
    capacity = check_int(capacity, "capacity", 1)
    # One extra scratch slot (index ``capacity``) absorbs the writes of thinned-out states.
    buffer = [tf.broadcast_to(p[tf.newaxis], [capacity + 1] + p.shape.as_list()) for p in parts]
    one = tf.constant(1, tf.int32)
    return History(
        buffer=[tf.identity(b) for b in buffer],
        count=one,
        position=tf.constant(1 % capacity, tf.int32),
        calls=tf.constant(0, tf.int32),
    )


def append_history(history: History, parts: list[tf.Tensor], thinning: int) -> History:
    """Store ``parts`` (the state just evaluated) if this evaluation is kept by thinning.

    The first evaluation (``calls == 0``) is the kernel's bootstrap at the
    initial state, which the buffer already holds, so it is not stored again;
    afterwards evaluation ``t`` (at ``θ_t``) is stored when ``t % thinning == 0``.
    When not storing we write into a scratch slot, which keeps the update an
    O(|θ|) in-place scatter under XLA instead of a select over the whole buffer.
    """
    capacity = int(history.buffer[0].shape[0]) - 1
    calls = history.calls
    store = tf.logical_and(calls > 0, tf.equal(calls % thinning, 0))
    pos = history.position
    # Not storing: write into the scratch slot ``capacity`` (never drawn from).
    # Writing unconditionally keeps this an in-place O(|θ|) scatter under XLA.
    slot = tf.where(store, pos, capacity)
    new_buffer = [
        tf.tensor_scatter_nd_update(buf, [[slot]], tf.cast(p, buf.dtype)[tf.newaxis])
        for buf, p in zip(history.buffer, parts)
    ]
    inc = tf.cast(store, tf.int32)
    return History(
        buffer=new_buffer,
        count=tf.minimum(history.count + inc, capacity),
        position=(pos + inc) % capacity,
        calls=calls + 1,
    )


def draw_history_indices(count: tf.Tensor, shape: tf.TensorShape | list[int], seed: tf.Tensor):
    """Independent uniform slot indices in ``[0, count)`` with the given shape."""
    # TensorFlow's Philox uniforms, mapped to floats the same way in every mode.
    u = philox_uniform(shape, seed, tf.float32)
    idx = tf.cast(tf.floor(u * tf.cast(count, tf.float32)), tf.int32)
    # Guard the measure-zero u→1 rounding edge in float32.
    return tf.minimum(idx, count - 1)
