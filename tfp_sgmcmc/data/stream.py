"""Compiled sampling from ``tf.data``: feed an XLA program ``K`` minibatches at a time.

A ``tf.data`` iterator has no XLA kernel, so this module keeps it outside the
compiled program: a [`StreamFeeder`][tfp_sgmcmc.data.stream.StreamFeeder] passes a
chunk program the prefetched blocks of stacked batches its ``K`` minibatch
draws read, and checks afterwards that exactly ``K`` were read. The overview
is in [`tfp_sgmcmc.data`][tfp_sgmcmc.data]; the design and the measured
speeds in ``docs/estimators.md``, "Out-of-core data at in-memory speed".
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.data.dataset import (
    DatasetData,
    counting_draws,
    dataset_sources_exist,
    traced_draws,
)
from tfp_sgmcmc.internal.util import check_int

__all__ = [
    "CHUNK_BYTES_WARNING",
    "FedProgram",
    "StreamFeeder",
    "count_draws",
    "stream_feeder",
]

CHUNK_BYTES_WARNING = 1 << 30
"""Above this many bytes of stacked batches per chunk, the feeder warns."""


def count_draws(kernel: Any, state: Any, kernel_results: Any) -> dict[DatasetData, int]:
    """Minibatches each ``DatasetData`` gives one ``kernel.one_step`` (by tracing it).

    Nothing is read: the step is traced once, not run (see
    ``tfp_sgmcmc.data.dataset.traced_draws``).
    """

    def step(s: Any, r: Any) -> Any:
        return kernel.one_step(s, r, seed=tf.constant([0, 0], tf.int32))

    return traced_draws(step, state, kernel_results)


class StreamFeeder:
    """Feeds compiled chunk programs the ``tf.data`` minibatches their steps draw.

    Built from a kernel and a (state, kernel results) pair of the chain: one
    traced ``kernel.one_step`` (not run) finds the
    [`DatasetData`][tfp_sgmcmc.data.DatasetData] sources it reads and how many
    minibatches ``c`` each gives a step. Then
    [`compile`][tfp_sgmcmc.data.stream.StreamFeeder.compile] turns a chunk
    function of ``s`` steps into a callable that pulls each source's next
    ``K = s · c`` batches (prefetched) and runs the chunk as one
    ``tf.function(jit_compile=True)`` program reading them. See the module
    docstring and ``docs/estimators.md``.

    Example (SGLD on a seeded, cached, batch-shuffled pipeline; 4 chunks of 25
    steps, each one XLA program). The feeder is built before the bootstrap
    reads the first batch, so the chunks read blocks that ``tf.data`` stacks
    (see [`start`][tfp_sgmcmc.data.stream.StreamFeeder.start]):

    ```python
    import numpy as np
    import tensorflow as tf
    import tensorflow_probability as tfp
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.data.stream import stream_feeder

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
        self._setup(count_draws(kernel, state, kernel_results))

    @classmethod
    def _from_counts(cls, counts: dict[DatasetData, int]) -> StreamFeeder:
        """A feeder for draw counts already found (``counts`` must not be empty)."""
        feeder = cls.__new__(cls)
        feeder._setup(counts)
        return feeder

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
        competes with the running chunk program for the cores and feeds it
        more slowly (``docs/estimators.md``). Sources already streaming keep
        their stream;
        [`compile`][tfp_sgmcmc.data.stream.StreamFeeder.compile] starts the
        streams of sources that have none.

        Raises:
          ValueError: ``num_steps`` not a positive int.

        Warns:
          RuntimeWarning: a source was read before its stream started (its
            blocks then come from the loop of single reads).
        """
        num_steps = check_int(num_steps, "num_steps", 1)
        for src, c in zip(self._sources, self._draws):
            src.start_chunks(num_steps * c)

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
        up to [`steps_available`][tfp_sgmcmc.data.stream.StreamFeeder.steps_available]
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
          a [`FedProgram`][tfp_sgmcmc.data.stream.FedProgram]
          ``fed(*args) -> fn(*args)``.

        Raises:
          ValueError: ``num_steps`` not a positive int; ``fn`` or ``steps_run``
            not callable.

        Warns:
          RuntimeWarning: a source was read before its stream started (see
            [`start`][tfp_sgmcmc.data.stream.StreamFeeder.start]).
        """
        if not callable(fn):
            raise ValueError("`fn` must be callable.")
        if steps_run is not None and not callable(steps_run):
            raise ValueError("`steps_run` must be callable (outputs) -> steps.")
        num_steps = check_int(num_steps, "num_steps", 1)
        wanted = [num_steps * c for c in self._draws]
        for src, k in zip(self._sources, wanted):
            src.start_chunks(k)  # the first program's chunk sets the prefetched block
            nbytes = (src.block_reader.block if steps_run is not None else k) * src.batch_nbytes
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
            with contextlib.ExitStack() as scope:
                for src, blocks, offset in zip(sources, feeds, offsets):
                    scope.enter_context(src.feeding(blocks, offset))
                out = fn(*args)
            return out, [src.batches_fed() for src in sources]

        program = tf.function(fed, jit_compile=jit_compile, autograph=False)
        return FedProgram(program, sources, wanted, draws, num_steps, steps_run)

    def steps_available(self) -> int:
        """Steps the next call of a ``steps_run`` program may run (at least 1).

        The unread batches of each source's current block, divided by its
        draws per step (a block with fewer than one step's batches left is
        first merged with the next one, see
        [`BlockReader.window`][tfp_sgmcmc.data.blocks.BlockReader.window]).

        Raises:
          RuntimeError: no program was compiled yet (no block exists).
        """
        steps = []
        for src, c in zip(self._sources, self._draws):
            reader = src.block_reader
            if reader is None:
                raise RuntimeError("Compile a program before asking for `steps_available`.")
            block, offset = reader.window(c)
            steps.append((int(block[0].shape[0]) - offset) // c)
        return max(1, min(steps))


class FedProgram:
    """A chunk program fed from prefetched blocks (made by
    [`StreamFeeder.compile`][tfp_sgmcmc.data.stream.StreamFeeder.compile]).

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
            spans = [src.block_reader.span(k) for src, k in zip(sources, self._wanted)]
            offsets = [tf.constant(offset, tf.int32) for _, offset in spans]
            out, reads = self.program([blocks for blocks, _ in spans], offsets, *args)
            for src, read, k in zip(sources, reads, self._wanted):
                self._check(int(read), k, self._num_steps)
                src.block_reader.consume(k)
            return out
        windows = [src.block_reader.window(c) for src, c in zip(sources, self._draws)]
        offsets = [tf.constant(offset, tf.int32) for _, offset in windows]
        out, reads = self.program([[block] for block, _ in windows], offsets, *args)
        k = int(self._steps_run(out))
        for src, c, read in zip(sources, self._draws, reads):
            read = int(read)
            self._check(read, k * c, k)
            src.block_reader.advance(read)
        return out


def stream_feeder(kernel: Any, state: Any, kernel_results: Any = None) -> StreamFeeder | None:
    """A [`StreamFeeder`][tfp_sgmcmc.data.stream.StreamFeeder] if ``kernel`` reads ``tf.data``.

    Returns ``None`` (without tracing anything when no ``DatasetData`` exists)
    for kernels whose data are all in memory: their programs need no feeding.
    Without ``kernel_results``, the kernel is bootstrapped at ``state`` on
    placeholder minibatches (no batch of the stream is read).
    """
    if not dataset_sources_exist():
        return None
    if kernel_results is None:
        with counting_draws():  # the bootstrap's draws read placeholders, not the stream
            kernel_results = kernel.bootstrap_results(state)
    counts = count_draws(kernel, state, kernel_results)
    if not counts:
        return None
    return StreamFeeder._from_counts(counts)
