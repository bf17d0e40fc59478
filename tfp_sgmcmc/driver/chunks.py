"""The driver's chunk machinery: plan, seeds, compiled chunk programs.

A run of ``num_samples`` draws (after ``num_burnin_steps`` burn-in steps, keeping
every ``thin``-th state) is cut into a fixed *plan* of chunks
([`chunk_plan`][tfp_sgmcmc.driver.chunks.chunk_plan]). Every chunk runs the library's one
loop ([`run_steps`][tfp_sgmcmc.loop.run_steps]) and its seed rule: step ``t`` of
the run (counted from 0 over the whole run, burn-in included) takes
``stateless_fold_in(run_seed, t)``, so the draws do not depend on ``chunk_size`` nor on
where the run was interrupted.
[`compile_chunk`][tfp_sgmcmc.driver.chunks.compile_chunk] builds one compiled program per
chunk shape and [`run_chunk`][tfp_sgmcmc.driver.chunks.run_chunk] calls it on explicit
inputs:

```none
(state, kernel_results, reducer_states, run_seed, first_step) ──run_steps──▶
    ChunkOutput(state', kernel_results', reducer_states', draws [n, ...], trace [n, ...],
                reductions)
```

The run seed and the first step are runtime inputs, so one program serves every chunk of
its shape, every seed and every resume.
Both [`sample`][tfp_sgmcmc.driver.sample] (runs streamed to a run directory) and
[`ChunkedChain`][tfp_sgmcmc.driver.ChunkedChain] (runs kept in memory) are loops over
these two steps. See ``docs/driver.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, overload

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.loop import chain_seed, run_steps, step_seed

__all__ = [
    "chunk_seed",
    "chunk_plan",
    "ChunkPlan",
    "compile_chunk",
    "run_chunk",
    "ChunkOutput",
    "ChunkProgram",
]

#: The two kinds of chunk in a plan.
_KINDS = ("burnin", "sample")


def as_run_seed(seed: Any) -> np.ndarray:
    """An int32 ``[2]`` stateless seed from an int in ``[0, 2**31)`` or an int32 pair (no
    stateful RNG; a wider int is a ``ValueError`` naming ``seed``); see
    [`chain_seed`][tfp_sgmcmc.loop.chain_seed]."""
    return chain_seed(seed)


def chunk_seed(run_seed: Any, first_step: int) -> np.ndarray:
    """The seed of the chunk that starts at step ``first_step`` of the run: the seed its
    first step takes, ``stateless_fold_in(run_seed, first_step)``.

    The checkpoint records it for the next chunk, and a resume checks it against the
    run's seed and the checkpointed position.
    """
    seed = tf.constant(as_run_seed(run_seed), tf.int32)
    return step_seed(seed, int(first_step)).numpy()


class ChunkPlan(Sequence[tuple[str, int]]):
    """The run's chunks, ``("burnin", steps)`` then ``("sample", draws)``, as a sequence
    computed on demand.

    It is never materialised as a list: a plan of billions of chunks (a huge
    ``num_samples`` over a small ``chunk_size``) costs no memory, and the position of a
    chunk in the run (its first step, the draws before it) is arithmetic, O(1), so the
    driver does no per-chunk work that grows with the run. It compares equal to the list
    of its chunks.
    """

    def __init__(self, num_samples: int, num_burnin_steps: int, thin: int, chunk_size: int):
        self.num_samples, self.num_burnin_steps = int(num_samples), int(num_burnin_steps)
        self.thin, self.chunk_size = int(thin), int(chunk_size)
        self._unit = self.chunk_size * self.thin  # steps of a full burn-in chunk
        self.num_burnin_chunks = -(-self.num_burnin_steps // self._unit)
        self.num_sample_chunks = -(-self.num_samples // self.chunk_size)

    def __len__(self) -> int:
        return self.num_burnin_chunks + self.num_sample_chunks

    @overload
    def __getitem__(self, index: int) -> tuple[str, int]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[str, int]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = int(index) + (len(self) if index < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(f"chunk {index} of a plan of {len(self)}")
        if i < self.num_burnin_chunks:
            return ("burnin", min(self._unit, self.num_burnin_steps - i * self._unit))
        j = i - self.num_burnin_chunks
        return ("sample", min(self.chunk_size, self.num_samples - j * self.chunk_size))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ChunkPlan):
            return self.key == other.key
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(a == tuple(b) for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"ChunkPlan{self.key}"

    @property
    def key(self) -> tuple[int, int, int, int]:
        return (self.num_samples, self.num_burnin_steps, self.thin, self.chunk_size)

    def steps_before(self, index: int) -> int:
        """Kernel steps of the chunks before chunk ``index`` (where chunk ``index`` starts)."""
        index = max(0, min(int(index), len(self)))
        if index <= self.num_burnin_chunks:
            return min(index * self._unit, self.num_burnin_steps)
        return self.num_burnin_steps + self.draws_before(index) * self.thin

    def draws_before(self, index: int) -> int:
        """Draws kept by the chunks before chunk ``index`` (the first row it writes)."""
        j = max(0, min(int(index), len(self)) - self.num_burnin_chunks)
        return min(j * self.chunk_size, self.num_samples)

    @property
    def total_steps(self) -> int:
        return self.num_burnin_steps + self.num_samples * self.thin

    @property
    def max_chunk_steps(self) -> int:
        """Kernel steps of the longest chunk (0 for an empty plan)."""
        burnin = min(self._unit, self.num_burnin_steps)
        return max(burnin, min(self.chunk_size, self.num_samples) * self.thin)


def chunk_plan(num_samples: int, num_burnin_steps: int, thin: int, chunk_size: int) -> ChunkPlan:
    """The run's chunks: ``("burnin", steps)`` then ``("sample", draws)``.

    Burn-in chunks have ``chunk_size · thin`` steps and sampling chunks
    ``chunk_size`` draws; the last of each kind may be shorter. A
    [`ChunkPlan`][tfp_sgmcmc.driver.chunks.ChunkPlan]: a sequence computed on demand
    (equal to the list of its chunks).
    """
    return ChunkPlan(num_samples, num_burnin_steps, thin, chunk_size)


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
    reducer_states, run_seed, first_step)``."""

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
    """Compiles one chunk of ``kernel``: [`run_steps`][tfp_sgmcmc.loop.run_steps].

    A ``"burnin"`` chunk runs ``n`` steps and returns the last state; a
    ``"sample"`` chunk runs ``n · thin`` steps and keeps every ``thin``-th state
    with its ``trace_fn(state, kernel_results)`` (any nest of tensors), while the
    ``reducer`` dict (name → ``tfp.experimental.mcmc.Reducer``) folds over the kept
    states. The program is one ``tf.function(jit_compile=jit_compile)``; its inputs
    are explicit (state, kernel results, reducer states, run seed, first step), so
    consecutive chunks chain by passing one chunk's outputs to the next, and one
    program serves every chunk of its shape.

    Args:
      kernel: a ``tfp.mcmc.TransitionKernel``.
      kind: ``"burnin"`` or ``"sample"``.
      n: steps of a burn-in chunk, draws of a sampling chunk (``>= 1``).
      thin: keep every ``thin``-th state. Default value: ``1``.
      reducer: dict of reducers, or ``None``. Default value: ``None``.
      trace_fn: ``(state, kernel_results) -> nest``; ``None`` traces nothing.
        Default value: ``None``.
      jit_compile: compile with XLA. Default value: ``True``.
      feeder: a [`StreamFeeder`][tfp_sgmcmc.data.stream.StreamFeeder] when the
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
    reducer = dict(reducer or {})

    if kind == "burnin":

        def burnin(state, kernel_results, reducer_states, seed, first_step):
            out = run_steps(
                kernel, state, kernel_results, n, seed, first_step=first_step, record=False
            )
            return out.state, out.kernel_results, reducer_states

        fn, steps = burnin, n
    else:

        def chunk(state, kernel_results, reducer_states, seed, first_step):
            out = run_steps(
                kernel,
                state,
                kernel_results,
                n * thin,
                seed,
                first_step=first_step,
                thin=thin,
                num_slots=n,
                trace_fn=trace_fn,
                reducer=reducer or None,
                reducer_state=reducer_states,
            )
            reductions = {k: r.finalize(out.reducer_state[k]) for k, r in reducer.items()}
            return (
                out.state, out.kernel_results, out.reducer_state, out.draws, out.trace,
                reductions,
            )

        fn, steps = chunk, n * thin
    if feeder is not None:  # a tf.data source: feed the chunk its minibatches
        return ChunkProgram(kind, n, thin, feeder.compile(fn, steps, jit_compile))
    return ChunkProgram(kind, n, thin, tf.function(fn, jit_compile=jit_compile, autograph=False))


def run_chunk(
    program: ChunkProgram,
    state: Any,
    kernel_results: Any,
    reducer_states: Any,
    seed: Any,
    first_step: int,
) -> ChunkOutput:
    """Runs one compiled chunk on explicit inputs.

    Args:
      program: from [`compile_chunk`][tfp_sgmcmc.driver.chunks.compile_chunk].
      state: the chain state at the chunk's start.
      kernel_results: the kernel results at that state.
      reducer_states: the reducers' states (``{}`` without reducers).
      seed: the run seed (an int or an int pair).
      first_step: the run's index of the chunk's first step (the steps of the chunks
        before it); step ``t`` takes ``stateless_fold_in(seed, t)``.

    Returns:
      A [`ChunkOutput`][tfp_sgmcmc.driver.chunks.ChunkOutput] (tensors).
    """
    # A burn-in program returns the first three fields only.
    seed = tf.constant(as_run_seed(seed), tf.int32)
    first = tf.constant(int(first_step), tf.int32)
    return ChunkOutput(*program.fn(state, kernel_results, reducer_states, seed, first))
