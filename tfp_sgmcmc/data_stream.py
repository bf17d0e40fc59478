r"""Compiled sampling from ``tf.data``: feed an XLA program ``K`` minibatches at a time.

A ``tf.data`` iterator has no XLA kernel, so a sampler reading a
[`DatasetData`][tfp_sgmcmc.data.DatasetData] step by step must run as a plain
graph (about half the in-memory speed on the logistic-regression benchmark).
This module moves the iterator out of the program instead:

```none
dataset iterator ─▶ K reads, stacked ─▶ [K, n, ...] ─▶ XLA program: K steps, step j reads batch j
   (a background thread prepares the next block while the program runs)
```

A chunk of ``s`` sampler steps needs ``K = s · c`` minibatches, ``c`` being the
number of minibatches one step draws (1 for SGLD, ``L`` for SGHMC with ``L``
leapfrog steps). [`StreamFeeder`][tfp_sgmcmc.data_stream.StreamFeeder] finds
every ``DatasetData`` a kernel reads and its ``c`` by tracing one step, reads
each source in prefetched blocks of ``K`` stacked batches (a ``dataset.batch(K)``
stream, stacked by ``tf.data``, when the stream starts before the source's first
read; see [`StreamFeeder.start`][tfp_sgmcmc.data_stream.StreamFeeder.start] and
[`BlockReader`][tfp_sgmcmc.data_stream.BlockReader]) and passes the blocks that
hold a chunk's batches to the compiled chunk program as arguments; inside, every
minibatch draw reads the next unread batch (a cursor variable counts them; a
chunk that starts inside a block reads across two). The ``k``-th minibatch drawn is
the dataset's ``k``-th batch, exactly as when the iterator is read step by step,
so both paths run the same chain from the same seeds (the kernel's seeds never
reach a ``tf.data`` source). After each chunk the cursor must equal ``K``: a
kernel drawing a data-dependent number of minibatches per step is refused, never
fed the wrong batches.

The tuner's arm programs (MAMBA, grid search, the heuristic) run a number
of steps sized by their budget and stop early on divergence:
``compile(..., steps_run=...)`` gives each call the current prefetched block
(one shape, one XLA program) and consumes only the batches it read.

Memory: the blocks the running chunk reads (two when it starts inside a block)
plus one prefetched block. Per-example
work in the pipeline (a per-example shuffle of a large buffer, parsing) costs
more than the sampler; see ``docs/estimators.md``, "Out-of-core data at
in-memory speed", for a pipeline that keeps up and the measured speeds.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.data import DatasetData
from tfp_sgmcmc.internal.util import check_int

__all__ = ["BlockReader", "FedProgram", "StreamFeeder", "stream_feeder"]

#: Above this many bytes of stacked batches per chunk, the feeder warns.
CHUNK_BYTES_WARNING = 1 << 30


class BlockReader:
    """Reads a stream of batches ``K`` at a time, stacked along a new leading axis.

    One compiled graph reads ``block`` batches from the iterator in a
    ``tf.while_loop`` and stacks them; a background thread runs it for the
    next block while the caller computes on the current one (TensorFlow
    releases the GIL while the ops run). The iterator is the source's own, so
    the stream continues exactly where earlier reads stopped (a new iterator
    would restart it, with a new order if the dataset reshuffles).
    [`take`][tfp_sgmcmc.data_stream.BlockReader.take] returns any number of
    batches in stream order (whole blocks without a copy).

    With ``stacked=True`` the iterator yields whole blocks ``[block, n, ...]``
    (a ``dataset.batch(block)`` stream, which
    [`DatasetData`][tfp_sgmcmc.data.DatasetData] uses when no batch was read
    before the chunked reads start): ``tf.data`` stacks them itself, without
    graph ops per batch. The loop's ops compete with the running program for
    the cores: at a 0.1% batch of the logistic-regression benchmark, chunks
    of SGLD fed by the loop ran at 0.39–0.40 of the in-memory
    ``"random_window"`` speed, and at 0.85–0.88 fed by such a stream
    (``docs/estimators.md``, "Out-of-core data at in-memory speed").

    Args:
      iterator: a ``tf.data`` iterator of minibatches (infinite), or of
        stacked blocks of ``block`` minibatches with ``stacked=True``.
      flat_spec: the flat ``tf.TensorSpec`` list of one minibatch.
      block: batches per prefetched block (a positive int).
      stacked: whether ``iterator`` yields whole blocks. Default value:
        ``False``.
    """

    def __init__(
        self,
        iterator: Any,
        flat_spec: Sequence[tf.TensorSpec],
        block: int,
        stacked: bool = False,
    ) -> None:
        self.block = check_int(block, "block", 1)
        #: Whether the iterator yields whole blocks.
        self.stacked = bool(stacked)
        specs = list(flat_spec)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tf-data-block")
        self._next: Future | None = None
        # Buffered batches in stream order: segments (flat lists of [m, ...] tensors,
        # whole blocks or pieces), the first one read from ``_offset`` on.
        self._segments: deque[list[tf.Tensor]] = deque()
        self._offset = 0
        if stacked:
            shapes = [[self.block, *s.shape] for s in specs]
            have = [t.shape.as_list() for t in tf.nest.flatten(iterator.element_spec)]
            if have != shapes:
                raise ValueError(
                    f"`iterator` must yield blocks of shapes {shapes} with `stacked=True`, "
                    f"got {have}."
                )
            self._pull = lambda k: tf.nest.flatten(iterator.get_next())
            return

        def pull(k: tf.Tensor) -> list[tf.Tensor]:
            arrays = [tf.TensorArray(s.dtype, size=k, element_shape=s.shape) for s in specs]

            def body(i: tf.Tensor, *arrays: tf.TensorArray) -> tuple[Any, ...]:
                flat = tf.nest.flatten(iterator.get_next())
                return (i + 1, *[a.write(i, t) for a, t in zip(arrays, flat)])

            # parallel_iterations=1: the reads must happen in stream order.
            out = tf.while_loop(
                lambda i, *_: i < k, body, (tf.constant(0), *arrays), parallel_iterations=1
            )
            return [a.stack() for a in out[1:]]

        self._pull = tf.function(pull, autograph=False)

    def _fetch(self) -> list[tf.Tensor]:
        return self._pull(tf.constant(self.block, tf.int32))

    def _append_block(self) -> None:
        block = self._next.result() if self._next is not None else self._fetch()
        self._segments.append(block)
        # Read the next block while the caller computes on this one.
        self._next = self._executor.submit(self._fetch)

    def _head(self) -> list[tf.Tensor]:
        """The first segment with an unread batch (fetching a block if none is left)."""
        while self._segments and self._offset == int(self._segments[0][0].shape[0]):
            self._segments.popleft()
            self._offset = 0
        if not self._segments:
            self._append_block()
        return self._segments[0]

    def take(self, k: int) -> list[tf.Tensor]:
        """The next ``k`` batches, flat: one tensor ``[k, n, ...]`` per array."""
        k = check_int(k, "k", 1)
        pieces: list[list[tf.Tensor]] = []
        need = k
        while need:
            head = self._head()
            size = int(head[0].shape[0])
            m = min(need, size - self._offset)
            if m == size:
                pieces.append(head)
            else:
                pieces.append([t[self._offset : self._offset + m] for t in head])
            self._offset += m
            need -= m
        if len(pieces) == 1:
            return pieces[0]
        return [tf.concat(ts, axis=0) for ts in zip(*pieces)]

    def span(self, need: int) -> tuple[list[list[tf.Tensor]], int]:
        """``(blocks, offset)``: the buffered blocks that hold the next ``need`` batches.

        Nothing is consumed or copied: the batches are ``offset, offset + 1,
        ...`` of the blocks laid end to end (one block when they lie in the
        head block, more when they run past its end, e.g. after single reads
        left the stream between block boundaries). Blocks not yet read are
        fetched. [`consume`][tfp_sgmcmc.data_stream.BlockReader.consume]
        then moves past the batches a program read.
        """
        need = check_int(need, "need", 1)
        head = self._head()
        blocks, have = [head], int(head[0].shape[0]) - self._offset
        while have < need:
            while len(self._segments) <= len(blocks):
                self._append_block()
            nxt = self._segments[len(blocks)]
            blocks.append(nxt)
            have += int(nxt[0].shape[0])
        return blocks, self._offset

    def consume(self, m: int) -> None:
        """Move past the next ``m`` batches of a
        [`span`][tfp_sgmcmc.data_stream.BlockReader.span] (dropping the blocks read to
        their end)."""
        m = check_int(m, "m", 0)
        while m:
            size = int(self._segments[0][0].shape[0]) if self._segments else 0
            step = min(m, size - self._offset)
            if step <= 0:
                raise ValueError(f"{m} batches run past the buffered blocks.")
            self._offset += step
            m -= step
            if self._offset == size:
                self._segments.popleft()
                self._offset = 0

    def window(self, need: int) -> tuple[list[tf.Tensor], int]:
        """``(block, offset)``: ``block`` batches holding the next ones from ``offset`` on.

        Nothing is consumed: a program reads batches ``offset, offset + 1, ...``
        of ``block`` (always ``[block, n, ...]``, so one compiled shape serves
        every call) and then [`advance`][tfp_sgmcmc.data_stream.BlockReader.advance]
        moves past the ones it read, however many that was. ``block`` is the
        prefetched block itself (no copy) while it still holds ``need``
        unread batches; otherwise its unread tail and the next batches are
        copied into one new block starting at offset 0.
        """
        need = check_int(need, "need", 1)
        if need > self.block:
            raise ValueError(f"`need` = {need} exceeds the block of {self.block} batches.")
        head = self._head()
        if int(head[0].shape[0]) == self.block and self.block - self._offset >= need:
            return head, self._offset
        realigned = self.take(self.block)
        if self._segments:  # the segment the copy ended in keeps only its unread part
            head, size = self._segments[0], int(self._segments[0][0].shape[0])
            if self._offset == size:
                self._segments.popleft()
            elif self._offset:
                self._segments[0] = [t[self._offset :] for t in head]
        self._segments.appendleft(realigned)
        self._offset = 0
        return realigned, 0

    def advance(self, m: int) -> None:
        """Consume ``m`` batches of the last
        [`window`][tfp_sgmcmc.data_stream.BlockReader.window]."""
        m = check_int(m, "m", 0)
        size = int(self._segments[0][0].shape[0]) if self._segments else 0
        if self._offset + m > size:
            raise ValueError(
                f"`m` = {m} batches run past the window ({size - self._offset} unread)."
            )
        self._offset += m


def _count_draws(kernel: Any, state: Any, kernel_results: Any) -> dict[DatasetData, int]:
    """Minibatches each ``DatasetData`` gives one ``kernel.one_step`` (by tracing it)."""

    def step(s: Any, r: Any) -> Any:
        return kernel.one_step(s, r, seed=tf.constant([0, 0], tf.int32))

    return DatasetData._traced_draws(step, state, kernel_results)


class StreamFeeder:
    """Feeds compiled chunk programs the ``tf.data`` minibatches their steps draw.

    Built from a kernel and a (state, kernel results) pair of the chain: one
    traced ``kernel.one_step`` (not run) finds the
    [`DatasetData`][tfp_sgmcmc.data.DatasetData] sources it reads and how many
    minibatches ``c`` each gives a step. Then
    [`compile`][tfp_sgmcmc.data_stream.StreamFeeder.compile] turns a chunk
    function of ``s`` steps into a callable that pulls each source's next
    ``K = s · c`` batches (prefetched) and runs the chunk as one
    ``tf.function(jit_compile=True)`` program reading them. See the module
    docstring and ``docs/estimators.md``.

    Example (SGLD on a seeded, cached, batch-shuffled pipeline; 4 chunks of 25
    steps, each one XLA program). The feeder is built before the bootstrap
    reads the first batch, so the chunks read blocks that ``tf.data`` stacks
    (see [`start`][tfp_sgmcmc.data_stream.StreamFeeder.start]):

    ```python
    import numpy as np
    import tensorflow as tf
    import tensorflow_probability as tfp
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.data_stream import stream_feeder

    x = np.random.default_rng(0).normal(1.0, 1.0, 1000).astype(np.float32)
    ds = (tf.data.Dataset.from_tensor_slices(x).batch(50, drop_remainder=True).cache()
          .shuffle(20, seed=1).repeat())
    est = sg.MinibatchEstimator(lambda m, b: -0.5 * (b - m) ** 2,
                                sg.DatasetData(ds, num_examples=1000), batch_size=50)
    kernel = sg.SGLD(est, step_size=1e-4)
    state = tf.constant(0.0)
    feeder = stream_feeder(kernel, state)  # reads no batch

    def chunk(state, results, seed):
        _, state, results = tfp.experimental.mcmc.sample_fold(
            25, state, results, kernel, seed=seed)
        return state, results

    run = feeder.compile(chunk, num_steps=25)  # starts the stream of 25-batch blocks
    results = kernel.bootstrap_results(state)  # reads batch 0 of the first block
    for i in range(4):
        state, results = run(state, results, tf.constant([0, i]))
    assert abs(float(state) - 1.0) < 0.3
    ```

    Args:
      kernel: the transition kernel the chunks run.
      state: a chain state (structure, shapes and dtypes of the chain's).
      kernel_results: kernel results for ``state`` (e.g. from
        ``kernel.bootstrap_results``).

    Raises:
      ValueError: no ``DatasetData`` is read by the kernel's step.
    """

    def __init__(self, kernel: Any, state: Any, kernel_results: Any) -> None:
        self._setup(_count_draws(kernel, state, kernel_results))

    def _setup(self, counts: dict[DatasetData, int]) -> None:
        if not counts:
            raise ValueError(
                "`kernel` reads no DatasetData in its step: there is nothing to feed "
                "(an InMemoryData source compiles as it is)."
            )
        # A fixed order, so the feeds of a program are always passed alike.
        self._sources: list[DatasetData] = sorted(counts, key=id)
        self._draws = [counts[s] for s in self._sources]

    @property
    def sources(self) -> list[DatasetData]:
        """The ``DatasetData`` sources the kernel reads."""
        return list(self._sources)

    @property
    def draws_per_step(self) -> list[int]:
        """Minibatches one step draws from each source (in ``sources`` order)."""
        return list(self._draws)

    def start(self, num_steps: int) -> None:
        """Start every source's stream of prefetched blocks for chunks of ``num_steps`` steps.

        Call it before anything reads a source (e.g. before
        ``kernel.bootstrap_results`` reads its first minibatch), as
        [`sample`][tfp_sgmcmc.driver.sampler.sample] does: a stream started
        before any read is a ``dataset.batch(K)`` stream (``K = num_steps · c``),
        whose blocks ``tf.data`` stacks itself, and reads made before the first
        chunk take their batches from its first block. A source whose iterator
        was read first can only be fed by a compiled loop of single reads, which
        competes with the running chunk program for the cores: at a 0.1% batch
        of the logistic-regression benchmark it fed SGLD at about 0.4 of the
        in-memory ``"random_window"`` speed (``docs/estimators.md``). Sources
        already streaming keep their stream;
        [`compile`][tfp_sgmcmc.data_stream.StreamFeeder.compile] starts the
        streams of sources that have none.

        Raises:
          ValueError: ``num_steps`` not a positive int.

        Warns:
          RuntimeWarning: a source was read before its stream started (its
            blocks then come from the loop of single reads).
        """
        num_steps = check_int(num_steps, "num_steps", 1)
        for src, c in zip(self._sources, self._draws):
            src._start_chunks(num_steps * c)

    def compile(
        self,
        fn: Callable[..., Any],
        num_steps: int,
        jit_compile: bool = True,
        steps_run: Callable[[Any], int] | None = None,
    ) -> FedProgram:
        """A callable running ``fn`` (``num_steps`` kernel steps) on fed minibatches.

        ``fn(*args)`` must run exactly ``num_steps`` steps of the feeder's
        kernel (e.g. ``tfp.experimental.mcmc.sample_fold``) and is traced once
        per argument signature, like a ``tf.function``. Each call of the
        returned callable takes the next ``num_steps · c`` batches of every
        source, runs ``fn`` in one program and checks that exactly that many
        were read.

        With ``steps_run``, ``fn`` may instead run any number ``k`` of steps
        up to [`steps_available`][tfp_sgmcmc.data_stream.StreamFeeder.steps_available]
        (e.g. a loop with a step-count argument that stops early on
        divergence, as the tuner's arm programs): each call is given the
        source's current prefetched block (one shape for every call, so XLA
        compiles once) with the read cursor at its first unread batch, and
        consumes exactly the ``k · c`` batches it read; the rest stay at the
        head of the stream for the next call or any other read.

        Args:
          fn: the chunk function (any arguments, any outputs).
          num_steps: kernel steps one call of ``fn`` runs (with ``steps_run``:
            the most steps a call may run; it sets the prefetched block,
            ``num_steps · c`` batches, if the source has none yet).
          jit_compile: compile with XLA. Default value: ``True``.
          steps_run: ``steps_run(outputs) -> k``, the steps a call ran.
            Default value: ``None`` (exactly ``num_steps``).

        Returns:
          a [`FedProgram`][tfp_sgmcmc.data_stream.FedProgram]
          ``fed(*args) -> fn(*args)``.

        Raises:
          ValueError: ``num_steps`` not a positive int; ``fn`` or ``steps_run``
            not callable.

        Warns:
          RuntimeWarning: a source was read before its stream started (see
            [`start`][tfp_sgmcmc.data_stream.StreamFeeder.start]).
        """
        if not callable(fn):
            raise ValueError("`fn` must be callable.")
        if steps_run is not None and not callable(steps_run):
            raise ValueError("`steps_run` must be callable (outputs) -> steps.")
        num_steps = check_int(num_steps, "num_steps", 1)
        wanted = [num_steps * c for c in self._draws]
        for src, k in zip(self._sources, wanted):
            src._start_chunks(k)  # the first program's chunk sets the prefetched block
            nbytes = (src._reader.block if steps_run is not None else k) * src.batch_nbytes
            if nbytes > CHUNK_BYTES_WARNING:
                warnings.warn(
                    f"A chunk of {num_steps} steps holds {k} minibatches "
                    f"({nbytes / 2**20:.0f} MiB) of a tf.data source: use fewer steps per "
                    "chunk (the driver's `chunk_size`) to bound memory.",
                    RuntimeWarning,
                    stacklevel=2,
                )
        sources = self._sources
        draws = self._draws

        def fed(
            feeds: Sequence[Sequence[tf.Tensor]], offsets: Sequence[tf.Tensor], *args: Any
        ) -> Any:
            # A step's batch is batch ``offset + cursor`` of the source's blocks laid
            # end to end, read by a gather (see DatasetData): an index XLA takes at
            # run time. A slice's start would be a compile-time constant, and the
            # offset argument with it (one compilation per offset;
            # tests/tuning/test_compile_once.py).
            # The read cursors are reset and read inside the program, not by eager
            # variable ops around each call: those cost more per call than a short
            # chunk's steps (automatic control dependencies order the reset, the
            # reads of ``fn`` and the final value, as all touch the same variable).
            for src, blocks, offset in zip(sources, feeds, offsets):
                src._feed = [list(flat) for flat in blocks]
                src._feed_offset = offset
                src._cursor.assign(0)
            try:
                out = fn(*args)
            finally:
                for src in sources:
                    src._feed = None
                    src._feed_offset = None
            return out, [src._cursor.read_value() for src in sources]

        program = tf.function(fed, jit_compile=jit_compile, autograph=False)
        return FedProgram(program, sources, wanted, draws, num_steps, steps_run)

    def steps_available(self) -> int:
        """Steps the next call of a ``steps_run`` program may run (at least 1).

        The unread batches of each source's current block, divided by its
        draws per step (a block with fewer than one step's batches left is
        first merged with the next one, see
        [`BlockReader.window`][tfp_sgmcmc.data_stream.BlockReader.window]).

        Raises:
          RuntimeError: no program was compiled yet (no block exists).
        """
        steps = []
        for src, c in zip(self._sources, self._draws):
            if src._reader is None:
                raise RuntimeError("Compile a program before asking for `steps_available`.")
            block, offset = src._reader.window(c)
            steps.append((int(block[0].shape[0]) - offset) // c)
        return max(1, min(steps))


class FedProgram:
    """A chunk program fed from prefetched blocks (made by
    [`StreamFeeder.compile`][tfp_sgmcmc.data_stream.StreamFeeder.compile]).

    ``fed(*args)`` runs one chunk. ``program`` is the ``tf.function`` every
    call runs, as ``program(feeds, offsets, *args) -> (outputs, reads)``
    (``feeds``: each source's blocks of stacked batches, in stream order;
    ``offsets``: the index of its first unread batch in them; ``reads``: the
    batches the call read from each source),
    e.g. to inspect the XLA program with ``experimental_get_compiler_ir``.
    """

    def __init__(
        self,
        program: Any,
        sources: list[DatasetData],
        wanted: list[int],
        draws: list[int],
        num_steps: int,
        steps_run: Callable[[Any], int] | None,
    ) -> None:
        self.program = program
        self._sources = sources
        self._wanted = wanted
        self._draws = draws
        self._num_steps = num_steps
        self._steps_run = steps_run

    @staticmethod
    def _check(read: int, expected: int, steps: int) -> None:
        if read != expected:
            raise RuntimeError(
                f"The chunk program read {read} minibatches of a tf.data source, but "
                f"{steps} steps were expected to read {expected}: the kernel draws a "
                "data-dependent number of minibatches per step, which cannot be fed in "
                "chunks; run it step by step (jit_compile=False)."
            )

    def __call__(self, *args: Any) -> Any:
        sources = self._sources
        if self._steps_run is None:
            # The blocks themselves, never a copy: a chunk that starts inside a block
            # (single reads came before it) reads across two of them.
            spans = [src._reader.span(k) for src, k in zip(sources, self._wanted)]
            offsets = [tf.constant(offset, tf.int32) for _, offset in spans]
            out, reads = self.program([blocks for blocks, _ in spans], offsets, *args)
            for src, read, k in zip(sources, reads, self._wanted):
                self._check(int(read), k, self._num_steps)
                src._reader.consume(k)
            return out
        windows = [src._reader.window(c) for src, c in zip(sources, self._draws)]
        offsets = [tf.constant(offset, tf.int32) for _, offset in windows]
        out, reads = self.program([[block] for block, _ in windows], offsets, *args)
        k = int(self._steps_run(out))
        for src, c, read in zip(sources, self._draws, reads):
            read = int(read)
            self._check(read, k * c, k)
            src._reader.advance(read)
        return out


def stream_feeder(kernel: Any, state: Any, kernel_results: Any = None) -> StreamFeeder | None:
    """A [`StreamFeeder`][tfp_sgmcmc.data_stream.StreamFeeder] if ``kernel`` reads ``tf.data``.

    Returns ``None`` (without tracing anything when no ``DatasetData`` exists)
    for kernels whose data are all in memory: their programs need no feeding.
    Without ``kernel_results``, the kernel is bootstrapped at ``state`` on
    placeholder minibatches (no batch of the stream is read).
    """
    if not len(DatasetData._live):
        return None
    if kernel_results is None:
        DatasetData._recorder = {}
        try:
            kernel_results = kernel.bootstrap_results(state)
        finally:
            DatasetData._recorder = None
    counts = _count_draws(kernel, state, kernel_results)
    if not counts:
        return None
    feeder = StreamFeeder.__new__(StreamFeeder)
    feeder._setup(counts)
    return feeder
