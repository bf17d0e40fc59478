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
every ``DatasetData`` a kernel reads and its ``c`` by tracing one step, pulls the
``K`` batches of each chunk as one stacked tensor and passes it to the compiled
chunk program as an argument; inside, every minibatch draw reads the next
stacked batch (a cursor variable counts them). The ``k``-th minibatch drawn is
the dataset's ``k``-th batch, exactly as when the iterator is read step by step,
so both paths run the same chain from the same seeds (the kernel's seeds never
reach a ``tf.data`` source). After each chunk the cursor must equal ``K``: a
kernel drawing a data-dependent number of minibatches per step is refused, never
fed the wrong batches.

Memory: the running chunk's ``K`` batches plus one prefetched block. Per-example
work in the pipeline (a per-example shuffle of a large buffer, parsing) costs
more than the sampler; see ``docs/estimators.md``, "Out-of-core data at
in-memory speed", for a pipeline that keeps up and the measured speeds.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.data import DatasetData
from tfp_sgmcmc.internal.util import check_int

__all__ = ["BlockReader", "StreamFeeder", "stream_feeder"]

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

    Args:
      iterator: a ``tf.data`` iterator of minibatches (infinite).
      flat_spec: the flat ``tf.TensorSpec`` list of one minibatch.
      block: batches per prefetched block (a positive int).
    """

    def __init__(self, iterator: Any, flat_spec: Sequence[tf.TensorSpec], block: int) -> None:
        self.block = check_int(block, "block", 1)
        specs = list(flat_spec)

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
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tf-data-block")
        self._next: Future | None = None
        self._current: list[tf.Tensor] = []
        self._offset = self.block  # nothing buffered yet

    def _fetch(self) -> list[tf.Tensor]:
        return self._pull(tf.constant(self.block, tf.int32))

    def take(self, k: int) -> list[tf.Tensor]:
        """The next ``k`` batches, flat: one tensor ``[k, n, ...]`` per array."""
        k = check_int(k, "k", 1)
        pieces: list[list[tf.Tensor]] = []
        need = k
        while need:
            if self._offset == self.block:
                block = self._next.result() if self._next is not None else self._fetch()
                self._current, self._offset = block, 0
                # Read the next block while the caller computes on this one.
                self._next = self._executor.submit(self._fetch)
            m = min(need, self.block - self._offset)
            if m == self.block:
                pieces.append(self._current)
            else:
                pieces.append([t[self._offset : self._offset + m] for t in self._current])
            self._offset += m
            need -= m
        if len(pieces) == 1:
            return pieces[0]
        return [tf.concat(ts, axis=0) for ts in zip(*pieces)]


def _count_draws(kernel: Any, state: Any, kernel_results: Any) -> dict[DatasetData, int]:
    """Minibatches each ``DatasetData`` gives one ``kernel.one_step`` (by tracing it)."""

    def step(s: Any, r: Any) -> Any:
        return kernel.one_step(s, r, seed=tf.constant([0, 0], tf.int32))

    DatasetData._recorder = {}
    try:
        tf.function(step, autograph=False).get_concrete_function(state, kernel_results)
        return dict(DatasetData._recorder)
    finally:
        DatasetData._recorder = None


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
    steps, each one XLA program):

    ```python
    import numpy as np
    import tensorflow as tf
    import tensorflow_probability as tfp
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.data_stream import StreamFeeder

    x = np.random.default_rng(0).normal(1.0, 1.0, 1000).astype(np.float32)
    ds = (tf.data.Dataset.from_tensor_slices(x).batch(50, drop_remainder=True).cache()
          .shuffle(20, seed=1).repeat())
    est = sg.MinibatchEstimator(lambda m, b: -0.5 * (b - m) ** 2,
                                sg.DatasetData(ds, num_examples=1000), batch_size=50)
    kernel = sg.SGLD(est, step_size=1e-4)
    state = tf.constant(0.0)
    results = kernel.bootstrap_results(state)
    feeder = StreamFeeder(kernel, state, results)

    def chunk(state, results, seed):
        _, state, results = tfp.experimental.mcmc.sample_fold(
            25, state, results, kernel, seed=seed)
        return state, results

    run = feeder.compile(chunk, num_steps=25)
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

    def compile(
        self, fn: Callable[..., Any], num_steps: int, jit_compile: bool = True
    ) -> Callable[..., Any]:
        """A callable running ``fn`` (``num_steps`` kernel steps) on fed minibatches.

        ``fn(*args)`` must run exactly ``num_steps`` steps of the feeder's
        kernel (e.g. ``tfp.experimental.mcmc.sample_fold``) and is traced once
        per argument signature, like a ``tf.function``. Each call of the
        returned callable takes the next ``num_steps · c`` batches of every
        source, runs ``fn`` in one program and checks that exactly that many
        were read.

        Args:
          fn: the chunk function (any arguments, any outputs).
          num_steps: kernel steps one call of ``fn`` runs.
          jit_compile: compile with XLA. Default value: ``True``.

        Returns:
          ``call(*args) -> fn(*args)``.

        Raises:
          ValueError: ``num_steps`` not a positive int; ``fn`` not callable.
        """
        if not callable(fn):
            raise ValueError("`fn` must be callable.")
        num_steps = check_int(num_steps, "num_steps", 1)
        wanted = [num_steps * c for c in self._draws]
        for src, k in zip(self._sources, wanted):
            src._start_chunks(k)  # the first program's chunk sets the prefetched block
            nbytes = k * src.batch_nbytes
            if nbytes > CHUNK_BYTES_WARNING:
                warnings.warn(
                    f"A chunk of {num_steps} steps holds {k} minibatches "
                    f"({nbytes / 2**20:.0f} MiB) of a tf.data source: use fewer steps per "
                    "chunk (the driver's `chunk_size`) to bound memory.",
                    RuntimeWarning,
                    stacklevel=2,
                )
        sources = self._sources

        def fed(feeds: Sequence[Sequence[tf.Tensor]], *args: Any) -> Any:
            for src, flat in zip(sources, feeds):
                src._feed = list(flat)
            try:
                return fn(*args)
            finally:
                for src in sources:
                    src._feed = None

        program = tf.function(fed, jit_compile=jit_compile, autograph=False)

        def call(*args: Any) -> Any:
            feeds = [src._reader.take(k) for src, k in zip(sources, wanted)]
            for src in sources:
                src._cursor.assign(0)
            out = program(feeds, *args)
            for src, k in zip(sources, wanted):
                read = int(src._cursor.numpy())
                if read != k:
                    raise RuntimeError(
                        f"The chunk program read {read} minibatches of a tf.data source, but "
                        f"{num_steps} steps were expected to read {k}: the kernel draws a "
                        "data-dependent number of minibatches per step, which cannot be fed in "
                        "chunks; run it step by step (jit_compile=False)."
                    )
            return out

        return call


def stream_feeder(kernel: Any, state: Any, kernel_results: Any) -> StreamFeeder | None:
    """A [`StreamFeeder`][tfp_sgmcmc.data_stream.StreamFeeder] if ``kernel`` reads ``tf.data``.

    Returns ``None`` (without tracing anything when no ``DatasetData`` exists)
    for kernels whose data are all in memory: their programs need no feeding.
    """
    if not len(DatasetData._live):
        return None
    counts = _count_draws(kernel, state, kernel_results)
    if not counts:
        return None
    feeder = StreamFeeder.__new__(StreamFeeder)
    feeder._setup(counts)
    return feeder
