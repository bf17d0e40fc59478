r"""Counter-based standard normals that are fast under XLA on CPU and identical everywhere.

Every SG-MCMC step adds one Gaussian draw per parameter, so on a large model
(the 79,510 weights of the 784-100-10 network of ``docs/models.md``) the noise
generator is a large share of a step. TensorFlow's stateless Philox normals
are slow under XLA on CPU (the 32×32→64-bit products of Philox are emulated),
and TensorFlow's faster ``"threefry"`` algorithm has no
kernel outside XLA, so a chain would change between eager and compiled runs.
This module implements the Threefry-2x32 block cipher (20 rounds; Salmon et
al. 2011) with 32-bit adds, rotations and xors, which XLA vectorises, and
maps its bits to normals by the inverse error function, as JAX does:

$$
u \sim \mathcal U[-1 + 2^{-24}, 1), \qquad \xi = \sqrt 2\,\operatorname{erf}^{-1}(u)
    \sim \mathcal N(0, 1),
$$

with ``u`` built from the top 23 (float32) or 53 (float64) random bits. The
same seed gives bit-identical uniforms eagerly, in graphs and under XLA, and
normals that differ only by the rounding of the two ``erf⁻¹`` implementations
(at most a few 10⁻⁴ in float32 in the far tails, 10⁻¹¹ in float64), where
TensorFlow's own stateless normals use different algorithms eagerly and under
XLA (they differ by O(1)).
The cost of both, per float and per step: ``docs/benchmarks.md#mnist-bnn``.

Two more draws are pinned for the same reason: `philox_uniform` gives TensorFlow's
Philox float uniforms with the bits mapped to floats by integer arithmetic (TensorFlow
maps them one way in its kernels and another under XLA), and `split_seed` gives
``tfp.random.split_seed``'s seeds with the generator pinned to Philox (TFP's default,
``auto_select``, derives other seeds under XLA).

#### References

[1]: John K. Salmon, Mark A. Moraes, Ron O. Dror and David E. Shaw. Parallel
     random numbers: as easy as 1, 2, 3. In _SC '11_, 2011 (Threefry-2x32,
     Table 4 rotation constants, known-answer vectors of Random123).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.internal.util import in_xla_context

__all__ = [
    "threefry2x32",
    "random_bits",
    "uniform",
    "standard_normal",
    "philox_uniform",
    "split_seed",
]

# Rotation constants of Threefry-2x32 (Salmon et al. 2011, Table 4) and the
# key-schedule parity constant.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def _rotl(x: tf.Tensor, r: int) -> tf.Tensor:
    return tf.bitwise.bitwise_or(
        tf.bitwise.left_shift(x, tf.constant(r, tf.uint32)),
        tf.bitwise.right_shift(x, tf.constant(32 - r, tf.uint32)),
    )


def threefry2x32(key: Any, x0: tf.Tensor, x1: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Threefry-2x32 with 20 rounds of the counter pairs ``(x0, x1)`` under ``key``.

    Args:
      key: two 32-bit words (``uint32[2]``, or ``int32[2]`` bit-cast).
      x0, x1: ``uint32`` counters of one shape.

    Returns:
      The two ``uint32`` output words, of the counters' shape.
    """
    key = tf.convert_to_tensor(key)
    if key.dtype != tf.uint32:
        key = tf.bitcast(tf.cast(key, tf.int32), tf.uint32)
    k0, k1 = key[0], key[1]
    ks = (k0, k1, tf.bitwise.bitwise_xor(tf.bitwise.bitwise_xor(k0, k1), _PARITY))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = tf.bitwise.bitwise_xor(_rotl(x1, r), x0)
        # Key injection after every four rounds.
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + ks[(block + 2) % 3] + tf.constant(block + 1, tf.uint32)
    return x0, x1


def random_bits(num_words: Any, seed: Any) -> tf.Tensor:
    """``num_words`` pseudo-random ``uint32`` words of the stateless ``seed`` (``int32[2]``).

    Word ``i`` is one output of the cipher on counter ``i`` (the counters
    ``0 .. 2h−1`` are paired as ``(i, h + i)``), so a draw of ``n`` words is
    the same whatever program computes it.
    """
    half = (num_words + 1) // 2
    if in_xla_context():
        # The same words, computed at full length: word i is y0 of the pair (i, h + i)
        # for i < h and y1 of (i − h, i) after. Twice the cipher's work, but XLA on CPU
        # vectorises it, where the concatenation of two halves of odd length defeats its
        # vectoriser: 79,510 normals (the 784-100-10 network's weights) took 8 times
        # longer that way (docs/keras.md, "The noise generator under XLA").
        i = tf.range(num_words, dtype=tf.int32)
        first = i < half
        c0 = tf.bitcast(tf.where(first, i, i - half), tf.uint32)
        y0, y1 = threefry2x32(seed, c0, c0 + tf.bitcast(tf.cast(half, tf.int32), tf.uint32))
        return tf.where(first, y0, y1)
    counts = tf.bitcast(tf.range(2 * half, dtype=tf.int32), tf.uint32)
    y0, y1 = threefry2x32(seed, counts[:half], counts[half:])
    return tf.concat([y0, y1], axis=0)[:num_words]


def _num_elements(shape: Any) -> tuple[Any, Any]:
    """``(shape, n)``: Python ints when static, tensors otherwise."""
    static = tf.get_static_value(tf.convert_to_tensor(shape, tf.int32))
    if static is not None:
        dims = [int(s) for s in np.reshape(static, [-1])]
        return dims, int(np.prod(dims, dtype=np.int64))
    shape = tf.convert_to_tensor(shape, tf.int32)
    return shape, tf.reduce_prod(shape)


def uniform(shape: Any, seed: Any, dtype: Any = tf.float32) -> tf.Tensor:
    """``U[0, 1)`` on the grid of the top 23 (float32) or 53 (float64) bits.

    Other floating dtypes are drawn in float32 and cast.
    """
    dtype = tf.as_dtype(dtype)
    if not dtype.is_floating:
        raise TypeError(f"`dtype` must be floating point, got {dtype.name}.")
    shape, n = _num_elements(shape)
    if dtype == tf.float64:
        bits = tf.reshape(random_bits(2 * n, seed), [2, -1])
        hi = tf.cast(tf.bitwise.right_shift(bits[0], tf.constant(5, tf.uint32)), tf.float64)
        lo = tf.cast(tf.bitwise.right_shift(bits[1], tf.constant(6, tf.uint32)), tf.float64)
        u = (hi * 67108864.0 + lo) * (1.0 / 9007199254740992.0)  # (a·2^26 + b) / 2^53
        return tf.reshape(u, shape)
    bits = random_bits(n, seed)
    # Mantissa trick: 23 random bits under the exponent of 1.0 give [1, 2).
    one_to_two = tf.bitwise.bitwise_or(
        tf.bitwise.right_shift(bits, tf.constant(9, tf.uint32)), tf.constant(0x3F800000, tf.uint32)
    )
    u = tf.bitcast(one_to_two, tf.float32) - 1.0
    return tf.cast(tf.reshape(u, shape), dtype)


def standard_normal(shape: Any, seed: Any, dtype: Any = tf.float32) -> tf.Tensor:
    r"""``N(0, 1)`` draws of ``shape``: $\sqrt 2\,\operatorname{erf}^{-1}(u)$, ``u`` uniform on
    ``[-1 + δ, 1)`` with ``δ`` the dtype's spacing below 1 (so ``erf⁻¹`` stays finite).

    Args:
      shape: the shape (list of ints or an ``int32`` vector).
      seed: a stateless ``int32[2]`` seed.
      dtype: a floating dtype. Default value: ``tf.float32``.
    """
    dtype = tf.as_dtype(dtype)
    if not dtype.is_floating:
        raise TypeError(f"`dtype` must be floating point, got {dtype.name}.")
    work = tf.float64 if dtype == tf.float64 else tf.float32
    lo = np.nextafter(work.as_numpy_dtype(-1.0), work.as_numpy_dtype(0.0))
    u = uniform(shape, seed, work)
    v = tf.maximum(lo + (1.0 - lo) * u, lo)
    z = tf.constant(np.sqrt(2.0), work) * tf.math.erfinv(v)
    return tf.cast(z, dtype)


def philox_uniform(shape: Any, seed: Any, dtype: Any = tf.float32) -> tf.Tensor:
    """TensorFlow's eager ``tf.random.stateless_uniform(shape, seed, dtype=dtype,
    alg="philox")``, bit for bit, in every mode.

    TensorFlow's own float sampler maps Philox's bits to floats one way in its kernels
    and another way under XLA. Its integer draws are the same in every mode, so the
    bits are drawn as ``uint32`` words and mapped here as TensorFlow's kernels map them:
    the low 23 bits of a word under the exponent of 1.0 (float32), or the low 20 bits of
    one word and all 32 of the next (float64), minus 1.

    Other floating dtypes are drawn in float32 and cast.

    Args:
      shape: the shape (list of ints or an ``int32`` vector).
      seed: a stateless ``int32[2]`` seed.
      dtype: a floating dtype. Default value: ``tf.float32``.

    Raises:
      ValueError: ``dtype`` is not floating point.
    """
    dtype = tf.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"`dtype` must be floating point, got {dtype.name}.")
    if dtype not in (tf.float32, tf.float64):
        return tf.cast(philox_uniform(shape, seed, tf.float32), dtype)
    shape, n = _num_elements(shape)
    words = 2 * n if dtype == tf.float64 else n
    bits = tf.random.stateless_uniform(
        [words], seed, minval=None, maxval=None, dtype=tf.uint32, alg="philox"
    )
    if dtype == tf.float32:
        mantissa = tf.bitwise.bitwise_and(bits, tf.constant(0x7FFFFF, tf.uint32))
        one_to_two = tf.bitwise.bitwise_or(mantissa, tf.constant(0x3F800000, tf.uint32))
        return tf.reshape(tf.bitcast(one_to_two, tf.float32) - 1.0, shape)
    pairs = tf.cast(tf.reshape(bits, [-1, 2]), tf.uint64)
    word = tf.bitwise.bitwise_or(tf.bitwise.left_shift(pairs[:, 0], 32), pairs[:, 1])
    mantissa = tf.bitwise.bitwise_and(word, tf.constant(2**52 - 1, tf.uint64))
    one_to_two = tf.bitwise.bitwise_or(mantissa, tf.constant(0x3FF0000000000000, tf.uint64))
    return tf.reshape(tf.bitcast(one_to_two, tf.float64) - 1.0, shape)


def split_seed(seed: Any, n: int, salt: str | None = None) -> list[tf.Tensor]:
    """``n`` stateless seeds from ``seed``, the same in every mode.

    Eagerly and in graphs these are ``tfp.random.split_seed(seed, n, salt)``'s seeds
    (the salt folded in by ``tfp.random.sanitize_seed``, then a Philox split). TFP's
    split uses TensorFlow's ``auto_select`` generator, for which XLA derives another
    Philox key from most seeds; pinned to Philox, the split is the same under XLA too.

    Args:
      seed: a stateless ``int32[2]`` seed.
      n: the number of seeds, a Python int.
      salt: an optional string that makes the split independent of others of ``seed``.
    """
    seed = tfp.random.sanitize_seed(seed, salt=salt)
    return tf.unstack(tf.random.experimental.stateless_split(seed, n, alg="philox"))
