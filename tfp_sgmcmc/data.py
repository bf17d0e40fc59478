"""Data sources that gradient estimators draw minibatches from.

Two sources share one small protocol (``num_examples``, ``float_dtype``,
``init_batch_state``, ``sample_batch``, ``full_batches``):

* [`InMemoryData`][tfp_sgmcmc.data.InMemoryData] holds tensors and draws each minibatch from the
  seed the
  kernel passes. It is pure (the same seed gives the same batch), runs under
  ``tf.function(jit_compile=True)``, and offers three schemes:

  ``"with_replacement"``
      ``n`` i.i.d. uniform row indices per step, then a row gather (what
      SGMCMCJax does).
  ``"epoch"`` (default)
      Without replacement within an epoch: each epoch visits a fresh random
      permutation of the rows in ``⌊N/n⌋`` consecutive batches (the remainder
      rows of that permutation are skipped, like ``drop_remainder``). The
      permutation is a keyed pseudo-random bijection of ``[0, N)`` evaluated on
      the fly (a 4-round Feistel network with cycle walking), so the scheme's
      state is just ``(epoch seed, batch position)`` -- two scalars. Keeping an
      explicit N-vector permutation in the kernel results would make
      ``tfp.mcmc.sample_chain``'s default ``trace_fn`` store it at every step.
  ``"random_window"``
      The fastest: the rows are shuffled once (with ``shuffle_seed``) into a
      private copy extended by its first ``n`` rows, and each step takes the
      contiguous window that starts at a uniform offset in ``[0, N)``. Every
      row lies in exactly ``n`` of the ``N`` windows, so its inclusion
      probability is exactly ``n/N`` and the N/n-scaled gradient is unbiased;
      within a window the rows are distinct. Unlike the other schemes, only
      ``N`` distinct batches exist for a given shuffle, and consecutive batches
      are independent draws of the offset. A contiguous slice costs a fraction
      of a random-row gather (16 vs 41 µs for 1,000 of 1e6 × 10 rows; 69 vs
      315 µs for 10,000, measured with per-array gathers, before the packed
      copy below), which dominates SGLD at a 1% batch. Memory: one
      extra copy of the data.

  When ``n == N`` every scheme returns the whole data set without gathering.

  Under ``"with_replacement"`` and ``"epoch"`` a minibatch is a random-row
  gather, which on CPU costs per row a cache miss per array and, under XLA,
  something per gathered element. The row indices are computed into their own
  buffer before the gather: left to itself, XLA fuses the index computation
  into the gather and evaluates it again for every gathered element (see
  ``_materialized_indices``). With ``pack_rows=True``, ``InMemoryData`` keeps a
  private copy with the rows of all 4- and 8-byte arrays side
  by side as 64-bit words, each row padded so that it never straddles a
  64-byte cache line (``x`` and ``y`` of a ``d = 10`` float32 logistic
  regression: 44 bytes of data in a 64-byte row of 8 words, instead of 10 + 1
  elements in two arrays), so a draw is one gather of fewer, wider elements
  and one cache line per row; the batches are bit-identical to per-array
  gathers. In one-process A/B runs (N = 10⁶, d = 10, loaded
  machine, CPU time per sample) it made SGHMC (L = 5) 8% / 11% cheaper at
  batches of 10,000 / 1,000 rows, and cSGLD 21% cheaper at 10,000 rows (no
  measurable change at 1,000; ``docs/benchmarks.md``).
  The copy costs the memory of those arrays once more (plus the padding: at
  most the next power of two of a row below 64 bytes, less than one line
  above), which is why it is not the default: a data set that fits in memory
  once need not fit twice.

* [`DatasetData`][tfp_sgmcmc.data.DatasetData] adapts a ``tf.data.Dataset`` for data that does not
  fit in memory. Its iterator cannot be compiled by XLA (``IteratorGetNext`` has
  no XLA kernel), so a compiled sampler is fed in chunks: the driver (or a
  [`StreamFeeder`][tfp_sgmcmc.data_stream.StreamFeeder]) pulls the ``K``
  batches of a chunk of steps from a prefetched stream outside the program and
  the ``K`` steps read them inside one XLA program. Step by step, it also runs
  under ``tf.function`` without ``jit_compile``. It is reproducible only if the
  dataset itself is seeded.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.internal.util import RNG_ALG, AttributeView, check_int

__all__ = [
    "BatchState",
    "InMemoryData",
    "DatasetData",
    "DataSource",
    "SCHEMES",
    "feistel_permutation",
    "feistel_radices",
]

SCHEMES = ("with_replacement", "epoch", "random_window")


class BatchState(NamedTuple):
    """Minibatch-scheme state carried in the kernel results.

    ``epoch_seed`` keys the current epoch's permutation (``"epoch"`` scheme);
    ``position`` is the index of the next batch within the epoch. Other schemes
    carry the same (unused) fields so every source has one results structure.
    """

    epoch_seed: tf.Tensor
    position: tf.Tensor


def _zeros_batch_state() -> BatchState:
    return BatchState(tf.zeros([2], tf.int32), tf.zeros([], tf.int32))


# --------------------------------------------------------------------------- #
# Keyed permutation of [0, N) (for the "epoch" scheme).
# --------------------------------------------------------------------------- #

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
    ([`feistel_radices`][tfp_sgmcmc.data.feistel_radices], ``a b ≥ N``) with
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
    if index_dtype not in (tf.int32, tf.int64) or (
        index_dtype == tf.int32 and num_items > 2**31
    ):
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
    # small domain are far from a uniform shuffle: at N = 5 some rows were drawn 5%
    # more often than others), so every row is in a batch with probability n/N.
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


def _materialized_indices(idx: tf.Tensor, num_items: int) -> tf.Tensor:
    """``idx`` (row indices in ``[0, num_items)``), computed once into its own buffer.

    Under XLA on CPU, an elementwise index computation (the keyed permutation,
    a uniform draw) is fused into the gather that consumes it, and the fused
    gather evaluates the index expression again for every element it copies:
    ``d + 1`` times per row for ``x`` and ``y`` of a ``d``-feature regression
    gathered array by array, 6 times per row from the packed copy. The long
    integer chain in front of every load also keeps few loads in flight: a
    fused ``"epoch"`` draw took 1.5 to 1.9 times as long as it does with the
    indices computed first (``benchmarks/bench_gather.py``, and the "cost of a
    minibatch draw" section of ``docs/benchmarks.md``). A while loop is a
    fusion boundary XLA cannot remove when its trip count is unknown at compile
    time; this one tests whether the first index lies out of range, which it
    never does, so its body never runs and the values are unchanged. Testing
    one element rather than all keeps a reduction (a tree of them, under XLA)
    out of every draw. Outside XLA it costs one comparison.
    """
    bound = tf.constant(num_items, idx.dtype)
    size = idx.shape.num_elements()
    if size == 0:
        return idx

    def out_of_range(v: tf.Tensor) -> tf.Tensor:
        if size is None:  # a dynamic shape may be empty: test them all
            return tf.reduce_any(v >= bound)
        return tf.reshape(v, [-1])[0] >= bound

    def wrap(v: tf.Tensor) -> list[tf.Tensor]:  # never runs: a body XLA cannot drop
        return [tf.where(v >= bound, v - bound, v)]

    out = tf.while_loop(out_of_range, wrap, [idx])
    return out[0] if isinstance(out, (list, tuple)) else out


# --------------------------------------------------------------------------- #
# Row-packed copy (one gather per minibatch).
# --------------------------------------------------------------------------- #

_WORD = tf.uint32
_PACKABLE = (tf.float32, tf.int32, tf.uint32, tf.float64, tf.int64, tf.uint64)


_CACHE_LINE_WORDS = 16  # 64-byte cache lines, in 32-bit words


def _padded_row_words(words: int) -> int:
    """The packed row width (32-bit words) for ``words`` words of data.

    Rows are padded to whole 64-bit words (half as many gathered elements as
    32-bit ones) and then so that no row straddles a 64-byte cache line: to the
    next power of two up to a line, to whole lines beyond. A row of ``x`` with
    10 float32 features and a float32 ``y`` (44 bytes) becomes 64 bytes: stored
    at 48 bytes, half the rows of a random gather touch two lines, and a draw of
    the default ``"epoch"`` scheme took 3% / 11% longer at batches of 10,000 /
    1,000 rows (``benchmarks/bench_gather.py``; "Rows on cache lines" in
    ``docs/benchmarks.md``).
    """
    if words <= _CACHE_LINE_WORDS:
        return max(2, 1 << (words - 1).bit_length())
    return -(-words // _CACHE_LINE_WORDS) * _CACHE_LINE_WORDS


class _PackedRows:
    """The rows of several arrays side by side as 32-bit words, stored as ``uint64[N, W/2]``.

    A random-row gather costs about one cache miss per row and array, so
    gathering ``x`` and ``y`` separately pays twice the misses of one gather
    of packed rows. Arrays of 4-byte dtypes take ``prod(row shape)`` words
    per row, 8-byte dtypes twice as many (``tf.bitcast`` to ``uint32``); the
    gathered words are bit-cast back, so the batch is bit-identical to
    per-array gathers. The rows are stored as 64-bit words (XLA's gather on
    CPU costs something per gathered element, so wider elements make it
    cheaper), padded as ``_padded_row_words`` says. Other dtypes (1- or 2-byte,
    strings, complex) are gathered on their own.
    """

    def __init__(self, packed: tf.Tensor, layout: list[tuple[int, int] | None]) -> None:
        self.packed = packed
        self.layout = layout  # per flat array: (word offset, words per row) or None

    @staticmethod
    def build(flat: list[tf.Tensor]) -> _PackedRows | None:
        """The packed copy of ``flat`` (eagerly), or ``None`` if fewer than two
        arrays can be packed (nothing would be saved)."""
        eligible = [t.dtype in _PACKABLE and t.shape[1:].is_fully_defined() for t in flat]
        if sum(eligible) < 2:
            return None
        big_n = int(flat[0].shape[0])
        columns, layout, offset = [], [], 0
        for t, ok in zip(flat, eligible):
            if not ok:
                layout.append(None)
                continue
            words = tf.reshape(tf.bitcast(t, _WORD), [big_n, -1])
            width = int(words.shape[1])
            columns.append(words)
            layout.append((offset, width))
            offset += width
        width = _padded_row_words(offset)
        if width > offset:  # zero words, never read back
            columns.append(tf.zeros([big_n, width - offset], _WORD))
            offset = width
        packed = tf.bitcast(tf.reshape(tf.concat(columns, axis=1), [big_n, offset // 2, 2]),
                            tf.uint64)
        return _PackedRows(packed, layout)

    def gather(self, flat: list[tf.Tensor], idx: tf.Tensor) -> list[tf.Tensor]:
        """``[tf.gather(t, idx) for t in flat]``, with one gather for the packed arrays."""
        lead = idx.shape.as_list()
        rows = tf.gather(self.packed, idx)  # idx.shape + [W / 2] (uint64)
        rows = tf.reshape(tf.bitcast(rows, _WORD), lead + [-1])  # idx.shape + [W] (uint32)
        out = []
        for t, where in zip(flat, self.layout):
            if where is None:
                out.append(tf.gather(t, idx))
                continue
            offset, width = where
            words = rows[..., offset : offset + width]
            shape = lead + t.shape[1:].as_list() + ([2] if t.dtype.size == 8 else [])
            out.append(tf.bitcast(tf.reshape(words, shape), t.dtype))
        return out


# --------------------------------------------------------------------------- #
# Sources.
# --------------------------------------------------------------------------- #


class DataSource:
    """Protocol of the data sources (documented, not enforced)."""

    _num_examples: int
    _float_dtype: tf.DType | None

    num_examples = AttributeView[int]("_num_examples")
    """``N``, the number of examples."""

    float_dtype = AttributeView[tf.DType | None]("_float_dtype")
    """The one floating dtype of the data (``None`` if it has no floating array)."""

    def init_batch_state(self) -> BatchState:  # pragma: no cover - protocol
        raise NotImplementedError

    def sample_batch(
        self, batch_size: int, batch_state: BatchState, seed: tf.Tensor
    ) -> tuple[Any, BatchState]:  # pragma: no cover - protocol
        raise NotImplementedError

    def full_batches(self, chunk_size: int | None = None) -> Iterator[Any]:  # pragma: no cover
        raise NotImplementedError

    def validate_batch_size(self, batch_size: int) -> None:
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool):
            raise ValueError(f"`batch_size` must be a Python int, got {batch_size!r}.")
        if not 1 <= batch_size <= self.num_examples:
            raise ValueError(
                f"`batch_size` must lie in [1, N] = [1, {self.num_examples}], got {batch_size}."
            )


class InMemoryData(DataSource):
    """Tensors held in memory; minibatches drawn statelessly from a seed.

    Args:
      data: a tensor/array, or a tuple/list/dict of them, all with the same
        leading dimension ``N`` (the number of examples). A minibatch has the
        same structure with leading dimension ``n``.
      scheme: ``"epoch"`` (default), ``"with_replacement"`` or
        ``"random_window"``; see the module docstring.
      shuffle_seed: seed of the one-off shuffle used by ``"random_window"``.
        Default value: ``0``.
      pack_rows: keep a private row-packed copy of the arrays whose dtypes
        are 4 or 8 bytes wide (their rows side by side, padded so that no
        row straddles a 64-byte cache line), so that the ``"epoch"`` and
        ``"with_replacement"`` schemes fetch a minibatch with one random-row
        gather instead of one per array (each gathered row costs a cache miss
        per array otherwise). The copy is made once, eagerly, when an
        estimator prepares the source; it costs the memory of those arrays
        once more, plus the padding (a row of 44 bytes is stored in 64;
        nothing is copied when fewer than two arrays qualify). The batches
        are bit-identical either way.
        Default value: ``False`` (the copy doubles the memory of those arrays).
      name: name used in error messages.

    Raises:
      ValueError: ``None`` or an entry that is no array, empty data, arrays of
        different lengths, floating arrays of different float dtypes, non-finite
        values, or an unknown ``scheme``.
    """

    def __init__(
        self,
        data: Any,
        scheme: str = "epoch",
        shuffle_seed: int = 0,
        pack_rows: bool = False,
        name: str = "data",
    ) -> None:
        if not isinstance(pack_rows, (bool, np.bool_)):
            raise ValueError(f"`pack_rows` must be a bool, got {type(pack_rows).__name__}.")
        if scheme not in SCHEMES:
            raise ValueError(f"`scheme` must be one of {SCHEMES}, got {scheme!r}.")
        if data is None:
            raise ValueError(
                f"`{name}` must be an array or a tuple, list or dict of arrays, got None."
            )
        self._structure = data
        flat = tf.nest.flatten(data)
        if not flat:
            raise ValueError(f"`{name}` is empty: give at least one array.")
        tensors = []
        for i, a in enumerate(flat):
            if a is None:
                raise ValueError(f"`{name}` array {i} is None: every entry must be an array.")
            try:
                t = tf.convert_to_tensor(a)
            except (TypeError, ValueError) as e:  # ragged lists, objects: TF's words only
                raise ValueError(
                    f"`{name}` array {i} ({type(a).__name__}) cannot be a tensor: {e}"
                ) from e
            if t.shape.rank is None or t.shape.rank == 0:
                raise ValueError(f"`{name}` array {i} must have a leading example dimension.")
            tensors.append(t)
        lengths = {int(t.shape[0]) for t in tensors}
        if len(lengths) != 1:
            raise ValueError(
                f"`{name}` arrays have mismatched lengths {sorted(lengths)}: every array "
                "must have the same number of examples along axis 0."
            )
        n = lengths.pop()
        if n == 0:
            raise ValueError(f"`{name}` has no examples (N = 0).")
        float_dtypes = {t.dtype for t in tensors if t.dtype.is_floating}
        if len(float_dtypes) > 1:
            raise ValueError(
                f"`{name}` mixes float dtypes {sorted(d.name for d in float_dtypes)}; "
                "cast every floating array to one dtype (the dtype of the chain state)."
            )
        for i, t in enumerate(tensors):
            if t.dtype.is_floating and tf.executing_eagerly():
                if not bool(tf.reduce_all(tf.math.is_finite(t))):
                    raise ValueError(f"`{name}` array {i} contains NaN or Inf.")
        self._flat = tensors
        self._num_examples = n
        self._float_dtype = float_dtypes.pop() if float_dtypes else None
        self._scheme = scheme
        self._shuffle_seed = check_int(shuffle_seed, "shuffle_seed", -(2**63), 2**63 - 1)
        self._windowed: dict[int, list[tf.Tensor]] = {}
        self._pack_rows = bool(pack_rows)
        # Shared by the views of ``with_scheme`` (the copy does not depend on the scheme).
        self._packed_cache: dict[str, _PackedRows | None] = {}
        self.name = name

    # -- protocol ----------------------------------------------------------- #
    scheme = AttributeView[str]("_scheme")

    @property
    def arrays(self) -> Any:
        """The data in the structure the user gave (as tensors)."""
        return tf.nest.pack_sequence_as(self._structure, self._flat)

    def with_scheme(self, scheme: str) -> InMemoryData:
        """A view of the same tensors with another minibatch scheme."""
        other = InMemoryData.__new__(InMemoryData)
        other.__dict__.update(self.__dict__)
        if scheme not in SCHEMES:
            raise ValueError(f"`scheme` must be one of {SCHEMES}, got {scheme!r}.")
        other._scheme = scheme
        other._windowed = {}
        return other  # the packed copy (scheme-independent) is shared

    def init_batch_state(self) -> BatchState:
        return _zeros_batch_state()

    def prepare(self, batch_size: int) -> None:
        """Precompute what the scheme needs for ``batch_size`` (call eagerly).

        ``"random_window"`` needs its shuffled, extended copy; the other
        schemes the row-packed copy (``pack_rows``). Doing it at estimator
        construction keeps the copy out of compiled loops; without it the
        batches are the same, gathered array by array.
        """
        self.validate_batch_size(batch_size)
        if batch_size < self._num_examples:
            if self._scheme == "random_window":
                self._window_copy(batch_size)
            elif (
                self._pack_rows and "rows" not in self._packed_cache and tf.executing_eagerly()
            ):
                self._packed_cache["rows"] = _PackedRows.build(self._flat)

    def _window_copy(self, n: int) -> list[tf.Tensor]:
        if n not in self._windowed:
            # Built eagerly even when first asked for inside a traced function (the tuner
            # builds an arm's estimator while tracing its program): inside the graph, the
            # shuffle and the N-row gather would run again at every call of the program.
            with tf.init_scope():
                perm = tf.random.experimental.stateless_shuffle(
                    tf.range(self._num_examples), seed=[self._shuffle_seed, 0x5EED]
                )
                ext = tf.concat([perm, perm[:n]], axis=0)
                self._windowed[n] = [tf.gather(t, ext) for t in self._flat]
        return self._windowed[n]

    def sample_batch(
        self, batch_size: int, batch_state: BatchState, seed: tf.Tensor
    ) -> tuple[Any, BatchState]:
        """Draw one minibatch of ``batch_size`` rows from ``seed``."""
        n, big_n = batch_size, self._num_examples
        if n == big_n:
            return self.arrays, batch_state
        if self._scheme == "with_replacement":
            idx = tf.random.stateless_uniform(
                [n], seed=seed, minval=0, maxval=big_n, dtype=tf.int32, alg=RNG_ALG
            )
            flat = self._gather_rows(idx)
            new_state = batch_state
        elif self._scheme == "random_window":
            start = tf.random.stateless_uniform(
                [], seed=seed, minval=0, maxval=big_n, dtype=tf.int32, alg=RNG_ALG
            )
            flat = [
                tf.slice(t, tf.concat([[start], tf.zeros([t.shape.rank - 1], tf.int32)], 0),
                         [n] + t.shape[1:].as_list())
                for t in self._window_copy(n)
            ]
            new_state = batch_state
        else:  # epoch
            batches_per_epoch = big_n // n
            new_epoch = tf.equal(batch_state.position, 0)
            epoch_seed = tf.where(new_epoch, tf.cast(seed, tf.int32), batch_state.epoch_seed)
            itype = self._index_dtype()
            pos = tf.cast(batch_state.position, itype) * n + tf.range(n, dtype=itype)
            idx = feistel_permutation(pos, big_n, epoch_seed, index_dtype=itype)
            flat = self._gather_rows(idx)
            new_state = BatchState(
                epoch_seed, tf.math.floormod(batch_state.position + 1, batches_per_epoch)
            )
        return tf.nest.pack_sequence_as(self._structure, flat), new_state

    def sample_chain_batches(
        self, batch_size: int, batch_state: BatchState, seed: tf.Tensor
    ) -> tuple[Any, BatchState]:
        """One independent minibatch per chain: rows ``[C, n, ...]`` for ``C`` chains.

        ``batch_state`` carries one scheme state per chain (``position`` of
        shape ``[C]``, ``epoch_seed`` ``[C, 2]``). Every chain's batch has the
        scheme's law (inclusion probability ``n/N`` per row), and the chains'
        batches are independent given ``seed``: ``"with_replacement"`` draws
        ``C × n`` i.i.d. indices, ``"random_window"`` ``C`` i.i.d. offsets, and
        ``"epoch"`` gives each chain its own keyed permutation per epoch (keys
        from each chain's own split of ``seed``). Cost: ``C × n`` gathered rows
        instead of ``n`` (a gather even for ``"random_window"``).
        """
        n, big_n = batch_size, self._num_examples
        num_chains = int(batch_state.position.shape[0])
        if n == big_n:
            flat = [tf.broadcast_to(t, [num_chains, *t.shape]) for t in self._flat]
            return tf.nest.pack_sequence_as(self._structure, flat), batch_state
        if self._scheme == "with_replacement":
            idx = tf.random.stateless_uniform(
                [num_chains, n], seed=seed, minval=0, maxval=big_n, dtype=tf.int32, alg=RNG_ALG
            )
            flat = self._gather_rows(idx)
            new_state = batch_state
        elif self._scheme == "random_window":
            start = tf.random.stateless_uniform(
                [num_chains, 1], seed=seed, minval=0, maxval=big_n, dtype=tf.int32, alg=RNG_ALG
            )
            idx = start + tf.range(n, dtype=tf.int32)
            flat = [tf.gather(t, idx) for t in self._window_copy(n)]
            new_state = batch_state
        else:  # epoch: an independent permutation stream per chain
            batches_per_epoch = big_n // n
            seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int32), num_chains)
            new_epoch = tf.equal(batch_state.position, 0)[:, tf.newaxis]
            epoch_seed = tf.where(new_epoch, seeds, batch_state.epoch_seed)
            itype = self._index_dtype()
            pos = tf.cast(batch_state.position, itype)[:, tf.newaxis] * n + tf.range(n, dtype=itype)
            idx = feistel_permutation(pos, big_n, epoch_seed, index_dtype=itype)
            flat = self._gather_rows(idx)
            new_state = BatchState(
                epoch_seed, tf.math.floormod(batch_state.position + 1, batches_per_epoch)
            )
        return tf.nest.pack_sequence_as(self._structure, flat), new_state

    def _index_dtype(self) -> tf.DType:
        """``int32`` row indices when ``N ≤ 2**31`` (cheaper than ``int64`` under XLA)."""
        return tf.int32 if self._num_examples <= 2**31 else tf.int64

    def _gather_rows(self, idx: tf.Tensor) -> list[tf.Tensor]:
        """The rows ``idx`` (any shape) of every array: one gather from the packed copy
        when there is one, else one gather per array. The indices are computed once
        (see ``_materialized_indices``)."""
        idx = _materialized_indices(idx, self._num_examples)
        packed = self._packed_cache.get("rows")
        if packed is None:
            return [tf.gather(t, idx) for t in self._flat]
        return packed.gather(self._flat, idx)

    @property
    def row_ranks(self) -> list[int]:
        """Rank of each data array (the example axis included)."""
        return [int(t.shape.rank) for t in self._flat]

    def full_batches(self, chunk_size: int | None = None) -> Iterator[Any]:
        """Consecutive chunks covering every example once (for full-data sums)."""
        big_n = self._num_examples
        chunk = big_n if chunk_size is None else max(1, min(int(chunk_size), big_n))
        for start in range(0, big_n, chunk):
            stop = min(start + chunk, big_n)
            yield tf.nest.pack_sequence_as(self._structure, [t[start:stop] for t in self._flat])

    def __repr__(self) -> str:
        shapes = [f"{t.dtype.name}{t.shape.as_list()}" for t in self._flat]
        return f"InMemoryData(N={self._num_examples}, scheme={self._scheme!r}, arrays={shapes})"


#: Default ``full_cache_bytes`` of [`DatasetData`][tfp_sgmcmc.data.DatasetData]: a
#: ``full_dataset`` whose rows take at most this many bytes is kept in memory.
FULL_CACHE_BYTES = 512 << 20


def _in_xla_context() -> bool:
    """Whether the graph being built is compiled by XLA (``jit_compile=True``)."""
    try:  # TensorFlow has no public equivalent; without it, XLA's own error stands
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def _fed_batch(blocks: list[list[tf.Tensor]], i: tf.Tensor) -> list[tf.Tensor]:
    """Batch ``i`` of consecutive stacked blocks (each a flat list of ``[m_k, n, ...]``).

    A gather, not ``c[i]``: XLA compiles a strided slice's start as a constant
    (one program per start value); a gather takes it at run time. Several
    blocks (a chunk that starts inside one block and ends in the next) are
    read through a ``tf.switch_case`` on the block that holds ``i``, so they
    are never copied into one tensor.
    """
    if len(blocks) == 1:
        return [tf.gather(c, i) for c in blocks[0]]
    starts = np.cumsum([0] + [int(b[0].shape[0]) for b in blocks])
    which = tf.reduce_sum(tf.cast(i >= tf.constant(starts[1:-1], i.dtype), tf.int32))
    branches = [
        (lambda b=b, s=int(s): [tf.gather(c, i - s) for c in b]) for b, s in zip(blocks, starts)
    ]
    return tf.switch_case(which, branches)


class DatasetData(DataSource):
    """A ``tf.data.Dataset`` of minibatches, for data that does not fit in memory.

    The dataset must yield batches of exactly the estimator's batch size
    (``dataset.batch(n, drop_remainder=True)``); it is repeated forever. Draws
    are reproducible only if the dataset's own shuffling is seeded; the
    kernel's seed does not reach it.

    Two ways to run a sampler on it, with the same minibatch sequence (the
    ``k``-th minibatch any estimator draws is the dataset's ``k``-th batch):

    * **Chunked, compiled** (what [`sample`][tfp_sgmcmc.driver.sampler.sample]
      does with ``jit_compile=True``): a
      [`StreamFeeder`][tfp_sgmcmc.data_stream.StreamFeeder] reads the source
      in prefetched blocks of ``K`` stacked batches (a ``dataset.batch(K)``
      stream, when it starts before the source's first read, as the driver
      starts it), and the ``K`` steps of a chunk read theirs inside one
      ``tf.function(jit_compile=True)`` program (see ``docs/estimators.md``,
      "Out-of-core data at in-memory speed").
    * **Step by step**, under ``tf.function`` without ``jit_compile`` (the
      iterator is read inside the graph; tf.data iterators have no XLA kernel).

    Both read the one iterator of the dataset, in order, so they can be mixed
    (e.g. an eager bootstrap, then compiled chunks, then a graph-mode
    diagnostic): once a source feeds chunks, its other reads take the next
    batches of the prefetched chunk stream.

    Args:
      dataset: a batched ``tf.data.Dataset`` (elements: tensor or structure).
      num_examples: ``N``, the size of the full data set (tf.data cardinality
        is often unknown, so it must be given).
      full_dataset: optional unbatched or batched dataset that visits every
        example exactly once, used for full-data gradients (control variates,
        MAP, full-data scores). Default value: ``None`` (full passes raise).
      full_cache_bytes: if the ``N`` rows of ``full_dataset`` take at most
        this many bytes, they are read once, at the first full pass, and kept
        in memory: later passes slice tensors (as
        [`InMemoryData`][tfp_sgmcmc.data.InMemoryData]), which XLA compiles,
        instead of re-reading the dataset row by row in a graph (the tuner's
        full-data KSD scores, a MAP search). ``0`` never keeps them.
        Default value: ``FULL_CACHE_BYTES`` (512 MiB).

    Raises:
      ValueError: ``dataset`` not batched with a static batch size, mixed
        float dtypes, a batch larger than ``num_examples``, a negative
        ``full_cache_bytes``; at the first full pass, a kept ``full_dataset``
        whose number of rows is not ``num_examples``.
    """

    # Set by tfp_sgmcmc.data_stream while it traces one kernel step to count the
    # minibatches each source is asked for (source -> calls); ``None`` otherwise.
    _recorder: dict[DatasetData, int] | None = None
    # Live instances, so a driver run without any tf.data source skips the count.
    _live: weakref.WeakSet[DatasetData] = weakref.WeakSet()

    @staticmethod
    def _traced_draws(fn: Callable[..., Any], *args: Any) -> dict[DatasetData, int]:
        """Minibatches each ``DatasetData`` gives one call ``fn(*args)``.

        ``fn`` is traced once, not run: every draw of a source is counted and
        nothing is read.
        """
        DatasetData._recorder = {}
        try:
            tf.function(fn, autograph=False).get_concrete_function(*args)
            return dict(DatasetData._recorder)
        finally:
            DatasetData._recorder = None

    def __init__(
        self,
        dataset: tf.data.Dataset,
        num_examples: int,
        full_dataset: tf.data.Dataset | None = None,
        full_cache_bytes: int | None = None,
    ) -> None:
        if not isinstance(dataset, tf.data.Dataset):
            raise ValueError(f"`dataset` must be a tf.data.Dataset, got {type(dataset).__name__}.")
        num_examples = check_int(num_examples, "num_examples", 1)
        spec = dataset.element_spec
        flat = tf.nest.flatten(spec)
        if not flat or any(s.shape.rank is None or s.shape.rank == 0 for s in flat):
            shapes = [s.shape for s in flat]
            raise ValueError(
                "`dataset` must yield batches (every component with a leading batch "
                f"dimension), got element shapes {shapes}: use "
                "dataset.batch(batch_size, drop_remainder=True)."
            )
        dims = {s.shape[0] for s in flat}
        if len(dims) != 1 or None in dims or not all(s.shape.is_fully_defined() for s in flat):
            raise ValueError(
                "`dataset` must yield batches with a static, common leading dimension: "
                "use dataset.batch(batch_size, drop_remainder=True)."
            )
        self._batch_size = int(dims.pop())
        self._batch_rank = flat[0].shape.rank  # tells a batched full_dataset from rows
        float_dtypes = {s.dtype for s in flat if s.dtype.is_floating}
        if len(float_dtypes) > 1:
            names = sorted(d.name for d in float_dtypes)
            raise ValueError(f"`dataset` mixes float dtypes {names}.")
        self._float_dtype = float_dtypes.pop() if float_dtypes else None
        self._num_examples = int(num_examples)
        if self._batch_size > self._num_examples:
            raise ValueError(
                f"`dataset` batch size {self._batch_size} exceeds `num_examples` {num_examples}."
            )
        self._spec = spec
        self._flat_spec = flat
        self._dataset = dataset.repeat()
        # Made at the first read (see `_element_iterator`): chunked reads that start
        # before any other read get a stream of whole blocks instead.
        self._iterator: Any = None
        self._full = full_dataset
        if full_cache_bytes is None:
            full_cache_bytes = FULL_CACHE_BYTES
        self._full_cache_bytes = check_int(full_cache_bytes, "full_cache_bytes", 0)
        self._full_arrays: list[tf.Tensor] | None = None  # the kept rows of full_dataset
        # Chunked reads (tfp_sgmcmc.data_stream): the stacked-batch reader, the
        # cursor counting the batches a chunk program has read, and, while such a
        # program is traced, its stacked batches ``[K, n, ...]`` (flat) and the index
        # of the first one it reads.
        self._reader: Any = None
        self._cursor: tf.Variable | None = None
        self._feed: list[list[tf.Tensor]] | None = None  # consecutive blocks, each flat
        self._feed_offset: tf.Tensor | None = None  # index of the feed's first unread batch
        DatasetData._live.add(self)

    batch_size = AttributeView[int]("_batch_size")

    element_spec = AttributeView[Any]("_spec")
    """The ``tf.TypeSpec`` structure of one minibatch."""

    @property
    def batch_nbytes(self) -> int:
        """Bytes of one minibatch (every array)."""
        return sum(
            int(np.prod(s.shape.as_list(), dtype=np.int64)) * s.dtype.size for s in self._flat_spec
        )

    @property
    def chunked(self) -> bool:
        """Whether this source feeds chunked programs (see the class docstring)."""
        return self._reader is not None

    def init_batch_state(self) -> BatchState:
        return _zeros_batch_state()

    def prepare(self, batch_size: int) -> None:
        self.validate_batch_size(batch_size)
        if batch_size != self._batch_size:
            raise ValueError(
                f"`batch_size` {batch_size} differs from the dataset's batch size "
                f"{self._batch_size}: batch the dataset with the estimator's batch size "
                "(a dataset of single rows reads as batches of the rows' first dimension)."
            )

    def sample_batch(
        self, batch_size: int, batch_state: BatchState, seed: tf.Tensor
    ) -> tuple[Any, BatchState]:
        del seed  # the dataset's own (seeded) shuffling decides the batch
        return tf.nest.pack_sequence_as(self._spec, self._next_flat()), batch_state

    def _next_flat(self) -> list[tf.Tensor]:
        """The next minibatch of the stream (flat), wherever this call runs."""
        recorder = DatasetData._recorder
        if recorder is not None:  # counting the calls of one traced step: no data read
            recorder[self] = recorder.get(self, 0) + 1
            return [tf.zeros(s.shape, s.dtype) for s in self._flat_spec]
        if self._feed is not None:  # inside a chunk program: the cursor-th fed batch
            i = self._cursor.assign_add(1, read_value=True) - 1 + self._feed_offset
            return _fed_batch(self._feed, i)
        if self._reader is not None:
            if tf.executing_eagerly():
                return [t[0] for t in self._reader.take(1)]
            out = tf.py_function(
                lambda: [t[0] for t in self._reader.take(1)],
                [],
                [s.dtype for s in self._flat_spec],
            )
            for t, s in zip(out, self._flat_spec):
                t.set_shape(s.shape)
            return list(out)
        return tf.nest.flatten(self._element_iterator().get_next())

    def _element_iterator(self) -> Any:
        """The iterator of the stream's batches, made (eagerly) at the first read."""
        if self._iterator is None:
            with tf.init_scope():
                self._iterator = iter(self._dataset)
        return self._iterator

    def _start_chunks(self, block_batches: int) -> None:
        """Switch to chunked reads (called by a
        [`StreamFeeder`][tfp_sgmcmc.data_stream.StreamFeeder])."""
        if self._reader is not None:
            return
        from tfp_sgmcmc.data_stream import BlockReader  # the chunked stream lives there

        if self._iterator is None:
            # Nothing read yet: the stream's first iterator is one of whole blocks, so
            # tf.data stacks them (the same batches in the same order).
            with tf.init_scope():
                blocks = iter(self._dataset.batch(block_batches, drop_remainder=True))
            self._reader = BlockReader(blocks, self._flat_spec, block_batches, stacked=True)
        else:
            # The same iterator: the chunks continue the stream where earlier reads
            # stopped (a second iterator would restart it, and reshuffle a reshuffling
            # dataset).
            warnings.warn(
                "This DatasetData was read before its chunked stream started, so the blocks "
                "of compiled chunks come from a loop of single reads that competes with "
                "the running chunk for the cores (about 0.4 of the stacked stream's speed "
                "at a 0.1% batch in docs/estimators.md). Build the feeder before the first "
                "read (stream_feeder(kernel, state) and compile, or StreamFeeder.start, "
                "then kernel.bootstrap_results), as `sample` does.",
                RuntimeWarning,
                stacklevel=3,
            )
            self._reader = BlockReader(self._iterator, self._flat_spec, block_batches)
        self._cursor = tf.Variable(0, dtype=tf.int32, trainable=False, name="batch_cursor")

    def _full_batched(self) -> bool:
        # A batched full_dataset has the minibatches' rank; an unbatched one (single
        # rows) one less, and must be batched, never unbatched (that would split rows).
        spec0 = tf.nest.flatten(self._full.element_spec)[0]
        return spec0.shape.rank == self._batch_rank

    @property
    def full_in_memory(self) -> bool:
        """Whether full passes read kept in-memory rows (see ``full_cache_bytes``).

        True when ``full_dataset`` is given, its rows have static shapes, and
        its ``N`` rows take at most ``full_cache_bytes`` bytes.
        """
        if self._full is None or self._full_cache_bytes == 0:
            return False
        batched = self._full_batched()
        nbytes = 0
        for s in tf.nest.flatten(self._full.element_spec):
            row = s.shape[1:] if batched else s.shape
            if not row.is_fully_defined():
                return False
            nbytes += int(np.prod(row.as_list(), dtype=np.int64)) * s.dtype.size
        return nbytes * self._num_examples <= self._full_cache_bytes

    def _kept_full_arrays(self) -> list[tf.Tensor]:
        """The ``N`` rows of ``full_dataset`` as tensors, read once (eagerly)."""
        if self._full_arrays is None:
            # Built eagerly even when first asked for inside a traced function (a
            # full-data score program): the read must not become part of it.
            with tf.init_scope():
                ds = self._full if self._full_batched() else self._full.batch(65_536)
                pieces = [tf.nest.flatten(b) for b in ds]
                arrays = [tf.concat(ts, axis=0) for ts in zip(*pieces)]
            rows = int(arrays[0].shape[0]) if arrays else 0
            if rows != self._num_examples:
                raise ValueError(
                    f"`full_dataset` has {rows} rows, but `num_examples` is "
                    f"{self._num_examples}: it must visit every example exactly once."
                )
            self._full_arrays = arrays
        return self._full_arrays

    def full_batches(self, chunk_size: int | None = None) -> Iterator[Any]:
        if self._full is None:
            raise ValueError(
                "This DatasetData has no `full_dataset`: pass one to compute full-data "
                "gradients (control variates, MAP, full-data scores)."
            )
        ds = self._full
        if self.full_in_memory:
            arrays = self._kept_full_arrays()
            big_n = self._num_examples
            chunk = big_n if chunk_size is None else max(1, min(int(chunk_size), big_n))
            for start in range(0, big_n, chunk):
                stop = min(start + chunk, big_n)
                yield tf.nest.pack_sequence_as(ds.element_spec, [t[start:stop] for t in arrays])
            return
        batched = self._full_batched()
        if not tf.executing_eagerly() and _in_xla_context():
            raise ValueError(
                "A full pass over this DatasetData's `full_dataset` was asked for inside an "
                "XLA-compiled program (e.g. an SVRG anchor refresh in a jit-compiled chunk), "
                "but its rows are streamed, not kept in memory, and a tf.data iterator has "
                "no XLA kernel. Keep them in memory (raise `full_cache_bytes` above the "
                f"{self._num_examples} rows' size), or run without XLA (jit_compile=False)."
            )
        if not tf.executing_eagerly():
            # Inside a traced function a dataset cannot signal its end to a Python
            # loop (the loop would unroll forever): read exactly the ceil(N / chunk)
            # chunks that N examples make.
            chunk = self._num_examples if chunk_size is None else int(chunk_size)
            iterator = iter((ds.unbatch() if batched else ds).batch(chunk))
            for _ in range(-(-self._num_examples // chunk)):
                yield iterator.get_next()
            return
        if chunk_size is not None:
            ds = (ds.unbatch() if batched else ds).batch(int(chunk_size))
        elif not batched:
            ds = ds.batch(self._num_examples)
        yield from ds

