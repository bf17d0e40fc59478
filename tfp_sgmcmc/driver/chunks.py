"""The driver's chunk machinery: plan, seed stream, compiled chunk programs.

A run of ``num_samples`` draws (after ``num_burnin_steps`` burn-in steps, keeping
every ``thin``-th state) is cut into a fixed *plan* of chunks
([`chunk_plan`][tfp_sgmcmc.driver.chunks.chunk_plan]); chunk ``i`` runs with the seed
``stateless_fold_in(run_seed, i)`` ([`chunk_seed`][tfp_sgmcmc.driver.chunks.chunk_seed]).
[`compile_chunk`][tfp_sgmcmc.driver.chunks.compile_chunk] builds one compiled program per
chunk shape and [`run_chunk`][tfp_sgmcmc.driver.chunks.run_chunk] calls it on explicit
inputs:

```none
(state, kernel_results, reducer_states, seed) ──tfp.experimental.mcmc.sample_fold──▶
    ChunkOutput(state', kernel_results', reducer_states', draws [n, ...], trace [n, ...],
                reductions)
```

Both [`sample`][tfp_sgmcmc.driver.sample] (runs streamed to a run directory) and
[`ChunkedChain`][tfp_sgmcmc.driver.ChunkedChain] (runs kept in memory) are loops over
these two steps. See ``docs/driver.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = [
    "chunk_seed",
    "chunk_plan",
    "compile_chunk",
    "run_chunk",
    "ChunkOutput",
    "ChunkProgram",
]

#: The two kinds of chunk in a plan.
_KINDS = ("burnin", "sample")


def as_run_seed(seed: Any) -> np.ndarray:
    """An int32 ``[2]`` stateless seed from an int or a pair (no stateful RNG)."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        s = int(seed)
        if s < 0:
            raise ValueError(f"`seed` must be a non-negative int or a pair, got {seed!r}.")
        # Split into two 31-bit words so every Python int below 2**62 is distinct.
        return np.array([(s >> 31) & 0x7FFFFFFF, s & 0x7FFFFFFF], np.int32)
    arr = np.asarray(seed)
    if arr.shape != (2,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"`seed` must be a non-negative int or an int pair, got {seed!r}.")
    return arr.astype(np.int32)


def chunk_seed(run_seed: Any, chunk_index: int) -> np.ndarray:
    """Seed of chunk ``chunk_index``: ``stateless_fold_in(run_seed, chunk_index)``.

    A function of the run seed and the chunk index only, so the seed stream is
    the same however many times the run is interrupted and resumed.
    """
    seed = tf.constant(as_run_seed(run_seed), tf.int32)
    return tf.random.experimental.stateless_fold_in(seed, int(chunk_index)).numpy()


def chunk_plan(
    num_samples: int, num_burnin_steps: int, thin: int, chunk_size: int
) -> list[tuple[str, int]]:
    """The run's chunks: ``("burnin", steps)`` then ``("sample", draws)``.

    Burn-in chunks have ``chunk_size · thin`` steps and sampling chunks
    ``chunk_size`` draws; the last of each kind may be shorter.
    """
    plan: list[tuple[str, int]] = []
    unit = chunk_size * thin
    full, rest = divmod(num_burnin_steps, unit)
    plan += [("burnin", unit)] * full + ([("burnin", rest)] if rest else [])
    full, rest = divmod(num_samples, chunk_size)
    plan += [("sample", chunk_size)] * full + ([("sample", rest)] if rest else [])
    return plan


def chunk_steps(kind: str, n: int, thin: int) -> int:
    """Kernel steps of a ``(kind, n)`` chunk."""
    return n if kind == "burnin" else n * thin


class ChunkOutput(NamedTuple):
    """What one chunk returns: the carried state and the chunk's outputs.

    ``draws`` (the kept states, ``[n, ...]`` per part), ``trace`` (the
    ``trace_fn`` values, ``[n, ...]``) and ``reductions`` (the finalized reducer
    outputs) are ``None`` for a burn-in chunk.
    """

    state: Any
    kernel_results: Any
    reducer_states: Any
    draws: Any = None
    trace: Any = None
    reductions: Any = None


class ChunkProgram(NamedTuple):
    """A compiled chunk: ``kind`` (``"burnin"``/``"sample"``), ``n`` (steps, resp.
    draws), ``thin`` and the compiled function ``fn(state, kernel_results,
    reducer_states, seed)``."""

    kind: str
    n: int
    thin: int
    fn: Callable[..., Any]


def compile_chunk(
    kernel: Any,
    kind: str,
    n: int,
    thin: int = 1,
    reducer: Mapping[str, Any] | None = None,
    trace_fn: Callable[[Any, Any], Any] | None = None,
    jit_compile: bool = True,
    feeder: Any = None,
) -> ChunkProgram:
    """Compiles one chunk of ``kernel`` with ``tfp.experimental.mcmc.sample_fold``.

    A ``"burnin"`` chunk runs ``n`` steps and returns the last state; a
    ``"sample"`` chunk runs ``n · thin`` steps and keeps every ``thin``-th state
    with its ``trace_fn(state, kernel_results)`` (any nest of tensors), while the
    ``reducer`` dict (name → ``tfp.experimental.mcmc.Reducer``) folds over the kept
    states. The program is one ``tf.function(jit_compile=jit_compile)``; its inputs
    are explicit (state, kernel results, reducer states, seed), so consecutive
    chunks chain by passing one chunk's outputs to the next.

    Args:
      kernel: a ``tfp.mcmc.TransitionKernel``.
      kind: ``"burnin"`` or ``"sample"``.
      n: steps of a burn-in chunk, draws of a sampling chunk (``>= 1``).
      thin: keep every ``thin``-th state. Default value: ``1``.
      reducer: dict of reducers, or ``None``. Default value: ``None``.
      trace_fn: ``(state, kernel_results) -> nest``; ``None`` traces nothing.
        Default value: ``None``.
      jit_compile: compile with XLA. Default value: ``True``.
      feeder: a [`StreamFeeder`][tfp_sgmcmc.data.StreamFeeder] when the
        kernel reads a ``tf.data`` source: each call then takes the chunk's
        minibatches from it. Default value: ``None``.

    Returns:
      A [`ChunkProgram`][tfp_sgmcmc.driver.chunks.ChunkProgram] for
      [`run_chunk`][tfp_sgmcmc.driver.chunks.run_chunk].

    Raises:
      ValueError: an unknown ``kind``.
    """
    if kind not in _KINDS:
        raise ValueError(f"`kind` must be one of {_KINDS}, got {kind!r}.")
    sample_fold = tfp.experimental.mcmc.sample_fold
    reducer = dict(reducer or {})
    trace = trace_fn if trace_fn is not None else (lambda s, r: ())

    if kind == "burnin":

        def burnin(state, kernel_results, reducer_states, seed):
            _, end, final_results = sample_fold(
                n, state, kernel_results, kernel, reducer=None, seed=seed
            )
            return end, final_results, reducer_states

        if feeder is not None:  # a tf.data source: feed the chunk its minibatches
            return ChunkProgram(kind, n, thin, feeder.compile(burnin, n, jit_compile))
        return ChunkProgram(
            kind, n, thin, tf.function(burnin, jit_compile=jit_compile, autograph=False)
        )

    def chunk(state, kernel_results, reducer_states, seed):
        tracer = tfp.experimental.mcmc.TracingReducer(
            trace_fn=lambda s, r: (s, trace(s, r)), size=n
        )
        reducers = {"trace": tracer, "user": reducer}
        previous = {"trace": tracer.initialize(state, kernel_results), "user": reducer_states}
        out, end, final_results, final_states = sample_fold(
            n,
            state,
            kernel_results,
            kernel,
            reducer=reducers,
            previous_reducer_state=previous,
            return_final_reducer_states=True,
            num_steps_between_results=thin - 1,
            seed=seed,
        )
        draws, traced = out["trace"]
        # The tracing reducer's own final state (a TensorList) must not leave an
        # XLA program, so only the user reducers' states are returned.
        return end, final_results, final_states["user"], draws, traced, out["user"]

    if feeder is not None:  # a tf.data source: feed the chunk its minibatches
        return ChunkProgram(kind, n, thin, feeder.compile(chunk, n * thin, jit_compile))
    return ChunkProgram(kind, n, thin, tf.function(chunk, jit_compile=jit_compile, autograph=False))


def run_chunk(
    program: ChunkProgram,
    state: Any,
    kernel_results: Any,
    reducer_states: Any,
    seed: Any,
) -> ChunkOutput:
    """Runs one compiled chunk on explicit inputs.

    Args:
      program: from [`compile_chunk`][tfp_sgmcmc.driver.chunks.compile_chunk].
      state: the chain state at the chunk's start.
      kernel_results: the kernel results at that state.
      reducer_states: the reducers' states (``{}`` without reducers).
      seed: the chunk's stateless seed (e.g.
        [`chunk_seed`][tfp_sgmcmc.driver.chunks.chunk_seed]).

    Returns:
      A [`ChunkOutput`][tfp_sgmcmc.driver.chunks.ChunkOutput] (tensors).
    """
    # A burn-in program returns the first three fields only.
    seed = tf.convert_to_tensor(seed, tf.int32)
    return ChunkOutput(*program.fn(state, kernel_results, reducer_states, seed))
