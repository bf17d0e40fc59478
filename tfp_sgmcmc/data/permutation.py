"""A keyed pseudo-random permutation of ``[0, N)``, evaluated on the fly.

The ``"epoch"`` scheme of [`InMemoryData`][tfp_sgmcmc.data.InMemoryData]
visits a fresh permutation of the rows every epoch. An explicit ``N``-vector
permutation in the kernel results would be stored at every step by
``tfp.mcmc.sample_chain``'s default ``trace_fn``; this one is a bijection
computed from ``(seed, position)``, so the scheme's state is two scalars.
"""

from __future__ import annotations

import math

import tensorflow as tf

__all__ = ["feistel_permutation", "feistel_radices"]

# Why not tf.random.experimental.index_shuffle (benchmarks/bench_permutation.py,
# docs/benchmarks.md "Epoch permutation"): on TF 2.21 its op has no XLA kernel on
# CPU, so it cannot sit inside the compiled sampling step at all.
_FEISTEL_ROUNDS = 4
# Odd multipliers of a 32-bit integer hash (Wellons' "lowbias32" finaliser);
# uint32 arithmetic wraps modulo 2**32, which is the hash's definition.
_MIX1 = 0x7FEB352D
_MIX2 = 0x846CA68B
_GOLDEN = 0x9E3779B9
_MAX_ITEMS = 2**32 - 2**16


def _hash32(h: tf.Tensor) -> tf.Tensor:
    """A bijective avalanche hash of ``uint32`` values (xor-shift-multiply)."""
    u32 = tf.uint32
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, tf.constant(16, u32)))
    h = h * tf.constant(_MIX1, u32)
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, tf.constant(15, u32)))
    h = h * tf.constant(_MIX2, u32)
    return tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, tf.constant(16, u32)))


def feistel_radices(num_items: int) -> tuple[int, int]:
    """The two radices ``(a, b)`` of the Feistel domain ``Z_a × Z_b`` for ``num_items``.

    ``a = ⌈√N⌉`` and ``b = ⌈N / a⌉``, so ``N ≤ a b < N + a``: the domain exceeds
    ``[0, N)`` by less than a fraction ``1/b ≈ 1/√N`` (none at all when ``N`` is a
    product of two such factors, e.g. ``10**6 = 1000 × 1000``).
    """
    a = math.isqrt(num_items - 1) + 1
    return a, -(-num_items // a)


def feistel_permutation(
    x: tf.Tensor, num_items: int, seed: tf.Tensor, index_dtype: tf.DType = tf.int64
) -> tf.Tensor:
    r"""A keyed pseudo-random permutation of ``[0, num_items)`` applied to ``x``.

    A 4-round Feistel network on the mixed-radix domain ``Z_a × Z_b``
    ([`feistel_radices`][tfp_sgmcmc.data.permutation.feistel_radices], ``a b ≥ N``) with
    modular addition (Black & Rogaway 2002, the generalised Feistel of their
    §5): writing ``x = \ell b + r``, the rounds alternate

    $$
    (\ell, r) \in \mathbb{Z}_a \times \mathbb{Z}_b \mapsto
        \bigl(r,\ (\ell + F_k(r)) \bmod a\bigr) \in \mathbb{Z}_b \times \mathbb{Z}_a,
    \qquad
    (\ell, r) \in \mathbb{Z}_b \times \mathbb{Z}_a \mapsto
        \bigl(r,\ (\ell + F_k(r)) \bmod b\bigr),
    $$

    each invertible, so after an even number of rounds ``ℓ b + r`` is a
    bijection of ``[0, a b)``. ``F_k(r)`` is a 32-bit avalanche hash of
    ``r ⊕ k`` with a per-round key ``k`` hashed from ``seed``. Cycle walking
    (re-applying the map while the value is ``≥ N``) restricts it to a
    bijection of ``[0, N)``; as ``a b < N + a``, a value walks with
    probability below ``1/b ≈ 1/√N`` (a power-of-two domain can exceed ``N``
    by a factor up to 4, and a batch then pays for its slowest element's
    walk). A last keyed rotation ``y ↦ (y + o) mod N``, with ``o`` uniform on
    ``[0, N)``, makes the image of every position uniform on ``[0, N)`` over
    seeds (the four rounds alone are not, on small domains), so a batch of
    ``n`` positions holds each row with probability exactly ``n/N``.
    Different ``seed`` values give (pseudo-)independent permutations.
    All arithmetic is ``uint32``. This is a shuffling device, not
    cryptography.

    Args:
      x: integer tensor with entries in ``[0, num_items)``.
      num_items: the size of the permuted set (a Python int in ``[1, 2**32 - 2**16]``).
      seed: stateless seed ``int32[2]``, or ``int32[..., 2]`` for one
        permutation per leading index (broadcast against ``x`` of shape
        ``[..., n]``).
      index_dtype: ``tf.int64`` (default) or ``tf.int32`` (only for
        ``num_items ≤ 2**31``), the dtype of the result.

    Returns:
      ``index_dtype`` tensor of the same shape as ``x``.

    #### References

    [1]: John Black and Phillip Rogaway. Ciphers with Arbitrary Finite Domains.
         In _CT-RSA_, 2002. https://doi.org/10.1007/3-540-45760-7_9
    """
    if not 1 <= num_items <= _MAX_ITEMS:  # keeps a b below 2**32 (uint32 arithmetic)
        raise ValueError(f"`num_items` must lie in [1, 2**32 - 2**16], got {num_items}.")
    index_dtype = tf.as_dtype(index_dtype)
    if index_dtype not in (tf.int32, tf.int64) or (index_dtype == tf.int32 and num_items > 2**31):
        raise ValueError(
            "`index_dtype` must be tf.int64, or tf.int32 for `num_items` <= 2**31, got "
            f"{index_dtype.name} with num_items = {num_items}."
        )
    a, b = feistel_radices(num_items)
    u32 = tf.uint32
    keys = _hashed_keys(tf.convert_to_tensor(seed))
    if keys.shape.rank > 1:  # [..., rounds] -> [..., 1, rounds] against x [..., n]
        keys = keys[..., tf.newaxis, :]

    def add_mod(u: tf.Tensor, h: tf.Tensor, m: int) -> tf.Tensor:
        s = u + h % tf.constant(m, u32)  # < 2m: one conditional subtraction
        return tf.where(s >= m, s - tf.constant(m, u32), s)

    def once(v: tf.Tensor) -> tf.Tensor:
        left = v // tf.constant(b, u32)
        right = v - left * tf.constant(b, u32)
        for r in range(_FEISTEL_ROUNDS):
            h = _hash32(tf.bitwise.bitwise_xor(right, keys[..., r]))
            left, right = right, add_mod(left, h, a if r % 2 == 0 else b)
        return left * tf.constant(b, u32) + right

    y = once(tf.cast(x, u32))
    if a * b > num_items:  # statically known: N = a b never walks
        y = tf.while_loop(
            lambda v: tf.reduce_any(v >= num_items),
            lambda v: [tf.where(v >= num_items, once(v), v)],
            [y],
        )
        y = y[0] if isinstance(y, (list, tuple)) else y
    # A keyed rotation y -> (y + o) mod N, o uniform on [0, N): each position's image
    # is then uniform on [0, N) whatever the network's own bias (four rounds on a
    # small domain are measurably far from a uniform shuffle: some rows are drawn more
    # often than others, which the data tests' chi-square check on N = 3..50 detects),
    # so every row is in a batch with probability n/N.
    # Written without overflow for N up to 2**32 - 2**16.
    offset = keys[..., _FEISTEL_ROUNDS] % tf.constant(num_items, u32)
    room = tf.constant(num_items, u32) - offset
    y = tf.where(y >= room, y - room, y + offset)
    return tf.cast(y, index_dtype)


def _hashed_keys(seed: tf.Tensor) -> tf.Tensor:
    """Feistel round keys and the rotation key, ``uint32[..., rounds + 1]``, from
    stateless seeds ``int32[..., 2]``."""
    s = tf.bitcast(tf.cast(seed, tf.int32), tf.uint32)
    keys = []
    for r in range(_FEISTEL_ROUNDS + 1):
        # Two hash passes over (seed_0, seed_1, round): distinct seeds or rounds
        # give unrelated keys.
        h = _hash32(s[..., 0] + tf.constant((r + 1) * _GOLDEN % 2**32, tf.uint32))
        keys.append(_hash32(tf.bitwise.bitwise_xor(h, s[..., 1])))
    return tf.stack(keys, axis=-1)
