"""Data held in memory as tensors: minibatches drawn statelessly from a seed.

See [`InMemoryData`][tfp_sgmcmc.data.InMemoryData] and its three minibatch
schemes (the [`tfp_sgmcmc.data`][tfp_sgmcmc.data] overview).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data.base import BatchState, DataSource, zeros_batch_state
from tfp_sgmcmc.data.permutation import feistel_permutation
from tfp_sgmcmc.internal.util import RNG_ALG, AttributeView, check_int

__all__ = ["SCHEMES", "InMemoryData"]

#: The minibatch schemes of ``InMemoryData``.
SCHEMES = ("with_replacement", "epoch", "random_window")


def _materialized_indices(idx: tf.Tensor, num_items: int) -> tf.Tensor:
    """``idx`` (row indices in ``[0, num_items)``), computed once into its own buffer.

    Under XLA on CPU, an elementwise index computation (the keyed permutation,
    a uniform draw) is fused into the gather that consumes it, and the fused
    gather evaluates the index expression again for every element it copies:
    ``d + 1`` times per row for ``x`` and ``y`` of a ``d``-feature regression
    gathered array by array, 6 times per row from the packed copy. The long
    integer chain in front of every load also keeps few loads in flight, so a
    fused ``"epoch"`` draw takes longer than one with the indices computed
    first (``benchmarks/bench_gather.py``, and the "cost of a minibatch draw"
    section of ``docs/benchmarks.md``). A while loop is a
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
    the default ``"epoch"`` scheme takes longer (``benchmarks/bench_gather.py``;
    "Rows on cache lines" in ``docs/benchmarks.md``).
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
        packed = tf.bitcast(
            tf.reshape(tf.concat(columns, axis=1), [big_n, offset // 2, 2]), tf.uint64
        )
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


class InMemoryData(DataSource):
    """Tensors held in memory; minibatches drawn statelessly from a seed.

    Args:
      data: a tensor/array, or a tuple/list/dict of them, all with the same
        leading dimension ``N`` (the number of examples). A minibatch has the
        same structure with leading dimension ``n``.
      scheme: ``"epoch"`` (default), ``"with_replacement"`` or
        ``"random_window"``; see [`tfp_sgmcmc.data`][tfp_sgmcmc.data].
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
        return zeros_batch_state()

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
            elif self._pack_rows and "rows" not in self._packed_cache and tf.executing_eagerly():
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
                tf.slice(
                    t,
                    tf.concat([[start], tf.zeros([t.shape.rank - 1], tf.int32)], 0),
                    [n] + t.shape[1:].as_list(),
                )
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
            seeds = tf.random.experimental.stateless_split(
                tf.cast(seed, tf.int32), num_chains, alg=RNG_ALG
            )
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
