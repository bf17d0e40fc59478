"""A ``tf.data.Dataset`` as a data source, for data that does not fit in memory.

Its iterator has no XLA kernel, so a compiled sampler is fed in chunks: a
``StreamFeeder`` (``tfp_sgmcmc/data/stream.py``) pulls the ``K`` batches of a
chunk of steps from a prefetched stream outside the program, and the ``K``
steps read them inside one XLA program. The source owns that stream and the
read cursor of the program; the feeder drives them through the source's
``start_chunks``, ``block_reader``, ``feeding`` and ``batches_fed``.

How many minibatches a step draws from each source is found by tracing the
step inside ``counting_draws()``: within that scope a draw is counted and
returns placeholder zeros instead of reading the stream.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data.base import BatchState, DataSource, zeros_batch_state
from tfp_sgmcmc.data.blocks import BlockReader
from tfp_sgmcmc.internal.util import AttributeView, check_int

__all__ = [
    "FULL_CACHE_BYTES",
    "DatasetData",
    "counting_draws",
    "dataset_sources_exist",
    "traced_draws",
]

FULL_CACHE_BYTES = 512 << 20
"""Default ``full_cache_bytes`` of [`DatasetData`][tfp_sgmcmc.data.DatasetData]: a
``full_dataset`` whose rows take at most this many bytes is kept in memory."""

# The draw counts of the innermost ``counting_draws`` scope (source -> draws), or
# ``None`` outside any. A context variable rather than a global flag: the scope
# holds only for the code that opened it (another thread tracing at the same time
# reads its batches as usual).
_DRAW_COUNTS: contextvars.ContextVar[dict[DatasetData, int] | None] = contextvars.ContextVar(
    "tfp_sgmcmc_draw_counts", default=None
)
# Every live source, weakly, so that callers can skip tracing a step for counts
# when no tf.data source exists at all. Only ``DatasetData.__init__`` adds to it.
_LIVE: weakref.WeakSet[DatasetData] = weakref.WeakSet()


@contextlib.contextmanager
def counting_draws() -> Iterator[dict[DatasetData, int]]:
    """A scope in which ``DatasetData`` draws are counted, not read.

    Inside it, every minibatch draw of every ``DatasetData`` (eager or traced)
    adds one to the source's entry of the yielded dict and returns zeros of
    the minibatch's shape and dtype; no batch of any stream is consumed.
    Scopes nest: the innermost one counts.

    Yields:
      the dict ``{source: draws}``, filled while the scope is open.
    """
    counts: dict[DatasetData, int] = {}
    token = _DRAW_COUNTS.set(counts)
    try:
        yield counts
    finally:
        _DRAW_COUNTS.reset(token)


def traced_draws(fn: Callable[..., Any], *args: Any) -> dict[DatasetData, int]:
    """Minibatches each ``DatasetData`` gives one call ``fn(*args)``.

    ``fn`` is traced once (``tf.function``, no autograph), not run: every draw
    of a source is counted and nothing is read.
    """
    with counting_draws() as counts:
        tf.function(fn, autograph=False).get_concrete_function(*args)
    return dict(counts)


def dataset_sources_exist() -> bool:
    """Whether any ``DatasetData`` is alive (if none, no step can read one)."""
    return bool(len(_LIVE))


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
      [`StreamFeeder`][tfp_sgmcmc.data.stream.StreamFeeder] reads the source
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
        # Chunked reads (``start_chunks``): the stacked-batch reader, the cursor
        # counting the batches a chunk program has read, and, while such a program
        # is traced (``feeding``), its stacked batches ``[K, n, ...]`` (flat) and the
        # index of the first one it reads. Only this class's methods set them.
        self._reader: BlockReader | None = None
        self._cursor: tf.Variable | None = None
        self._feed: list[list[tf.Tensor]] | None = None  # consecutive blocks, each flat
        self._feed_offset: tf.Tensor | None = None  # index of the feed's first unread batch
        _LIVE.add(self)

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
        return zeros_batch_state()

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
        recorder = _DRAW_COUNTS.get()
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

    @property
    def block_reader(self) -> BlockReader | None:
        """The reader of the chunked stream (``None`` until ``start_chunks``)."""
        return self._reader

    def start_chunks(self, block_batches: int) -> None:
        """Switch to chunked reads in prefetched blocks of ``block_batches`` batches.

        Called by a [`StreamFeeder`][tfp_sgmcmc.data.stream.StreamFeeder]; a no-op
        once the source is chunked. Started before any other read, the stream
        is a ``dataset.batch(block_batches)`` stream whose blocks ``tf.data``
        stacks itself; started after, it continues the iterator already read
        (a second iterator would restart the stream) through a loop of single
        reads. Every later read of the source takes the next batch of that
        stream.

        Raises:
          ValueError: ``block_batches`` not a positive int.

        Warns:
          RuntimeWarning: the source was read before its chunked stream
            started.
        """
        if self._reader is not None:
            return
        block_batches = check_int(block_batches, "block_batches", 1)
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
                'the running chunk for the cores (see docs/estimators.md, "Out-of-core '
                'data at in-memory speed"). Build the feeder before the first '
                "read (stream_feeder(kernel, state) and compile, or StreamFeeder.start, "
                "then kernel.bootstrap_results), as `sample` does.",
                RuntimeWarning,
                stacklevel=3,
            )
            self._reader = BlockReader(self._iterator, self._flat_spec, block_batches)
        self._cursor = tf.Variable(0, dtype=tf.int32, trainable=False, name="batch_cursor")

    @contextlib.contextmanager
    def feeding(self, blocks: Sequence[Sequence[tf.Tensor]], offset: tf.Tensor) -> Iterator[None]:
        """A scope, while a chunk program is traced, in which draws read fed batches.

        Inside it, the ``k``-th draw (from ``k = 0``) reads batch ``offset + k``
        of ``blocks`` laid end to end, by a gather whose index XLA takes at
        run time; on entry the program resets the read cursor (see
        ``batches_fed``). Used by a
        [`StreamFeeder`][tfp_sgmcmc.data.stream.StreamFeeder] program around the
        chunk function.

        Args:
          blocks: consecutive blocks of stacked batches, each a flat list of
            ``[m, n, ...]`` tensors (one per array of a minibatch).
          offset: ``int32`` scalar tensor, the index of the first unread batch.

        Raises:
          RuntimeError: the source is not chunked (``start_chunks`` first).
        """
        if self._cursor is None:
            raise RuntimeError("Call `start_chunks` before feeding a DatasetData.")
        self._feed = [list(flat) for flat in blocks]
        self._feed_offset = offset
        self._cursor.assign(0)
        try:
            yield
        finally:
            self._feed = None
            self._feed_offset = None

    def batches_fed(self) -> tf.Tensor:
        """The fed batches read since the last ``feeding`` scope opened (an ``int32``).

        Raises:
          RuntimeError: the source is not chunked (``start_chunks`` first).
        """
        if self._cursor is None:
            raise RuntimeError("Call `start_chunks` before reading the fed-batch count.")
        return self._cursor.read_value()

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
