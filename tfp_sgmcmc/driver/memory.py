"""Chains run in compiled chunks and kept in memory (no run directory).

[`ChunkedChain`][tfp_sgmcmc.driver.memory.ChunkedChain] is the in-memory sibling of
[`sample`][tfp_sgmcmc.driver.sample]: the same chunk plan, the same seed rule
(step ``t`` of the run takes ``stateless_fold_in(run_seed, t)``, as in every loop of the
library: ``tfp_sgmcmc.loop``) and the same compiled chunk
programs ([`compile_chunk`][tfp_sgmcmc.driver.chunks.compile_chunk]), so with equal
arguments it returns exactly the draws ``sample`` writes to ``samples.h5``. It keeps
its compiled programs, so repeated runs of one kernel (e.g. over data sets held in
``tf.Variable``s, or over seeds) compile once. Use it for studies and short runs
whose draws fit in memory; use ``sample`` for long runs that must survive a kill.
See ``docs/driver.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from tfp_sgmcmc.driver import chunks
from tfp_sgmcmc.internal.util import check_int

__all__ = ["ChunkedChain", "ChainResult"]


class ChainResult(NamedTuple):
    """What [`ChunkedChain.run`][tfp_sgmcmc.driver.memory.ChunkedChain.run] returns.

    Attributes:
      states: the kept draws as NumPy, ``[num_samples, ...]`` (a list for a list state).
      trace: the ``trace_fn`` outputs as NumPy, ``[num_samples, ...]`` per leaf.
      final_state: the chain state after the last step (tensors).
      final_kernel_results: the kernel results there.
      seconds: wall-clock seconds of the whole run (compilation included).
      steps_per_second: kernel steps per second over the chunks whose program was
        already compiled (NaN when every chunk compiled its program).
    """

    states: Any
    trace: Any
    final_state: Any
    final_kernel_results: Any
    seconds: float
    steps_per_second: float


class ChunkedChain:
    """Runs a kernel in compiled chunks and returns the kept draws in memory.

    Each chunk is one ``tf.function(jit_compile=jit_compile)`` around the library's
    flat loop ([`run_steps`][tfp_sgmcmc.loop.run_steps]) that carries the state
    and kernel results to the next chunk; the compiled programs are kept on the object
    and reused by every [`run`][tfp_sgmcmc.driver.memory.ChunkedChain.run] with the same
    chunk shapes (the seed and the chunk's first step are runtime inputs). The chain
    does not depend on ``chunk_size``: step ``t`` takes ``stateless_fold_in(seed, t)``,
    as in [`sample_chain`][tfp_sgmcmc.driver.flat.sample_chain].

    Args:
      kernel: any ``tfp.mcmc.TransitionKernel``.
      chunk_size: draws per compiled chunk (a burn-in chunk has
        ``chunk_size · thin`` steps). Default value: ``1000``.
      thin: keep every ``thin``-th state. Default value: ``1``.
      trace_fn: ``(state, kernel_results) -> nest`` of per-draw values to keep
        (like ``tfp.mcmc.sample_chain``'s); ``None`` keeps none. Default value: ``None``.
      jit_compile: compile with XLA (``False``: a plain graph, faster to build,
        slower per step). Default value: ``True``.

    Raises:
      ValueError: ``chunk_size`` or ``thin`` < 1, a ``trace_fn`` that is not callable,
        or a ``kernel`` without ``one_step``/``bootstrap_results``.

    ```python
    import tensorflow as tf
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.driver import ChunkedChain

    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), noise_scale=0.0)
    chain = ChunkedChain(sg.SGLD(est, 0.1), chunk_size=60, thin=2,
                         trace_fn=lambda s, r: r.target_log_prob)
    out = chain.run(tf.zeros([4, 2]), num_samples=120, seed=3)  # two chunks, one program
    assert out.states.shape == (120, 4, 2) and out.trace.shape == (120, 4)
    ```
    """

    def __init__(
        self,
        kernel: Any,
        chunk_size: int = 1000,
        thin: int = 1,
        trace_fn: Callable[[Any, Any], Any] | None = None,
        jit_compile: bool = True,
    ) -> None:
        if not (hasattr(kernel, "one_step") and hasattr(kernel, "bootstrap_results")):
            raise ValueError(
                f"`kernel` must be a tfp.mcmc.TransitionKernel, got {type(kernel).__name__}."
            )
        if trace_fn is not None and not callable(trace_fn):
            raise ValueError("`trace_fn` must be callable (state, kernel_results) -> nest.")
        self.kernel = kernel
        self.chunk_size = check_int(chunk_size, "chunk_size", 1)
        self.thin = check_int(thin, "thin", 1)
        self.trace_fn = trace_fn
        self.jit_compile = bool(jit_compile)
        self._programs: dict[tuple[str, int], chunks.ChunkProgram] = {}

    def _program(self, kind: str, n: int) -> tuple[chunks.ChunkProgram, bool]:
        """The compiled ``(kind, n)`` chunk and whether this call built it."""
        key = (kind, n)
        fresh = key not in self._programs
        if fresh:
            self._programs[key] = chunks.compile_chunk(
                self.kernel, kind, n, self.thin, None, self.trace_fn, self.jit_compile
            )
        return self._programs[key], fresh

    def run(
        self,
        init_state: Any,
        num_samples: int,
        seed: Any = 0,
        num_burnin_steps: int = 0,
        progress: bool = False,
        desc: str | None = None,
    ) -> ChainResult:
        """``num_burnin_steps`` steps, then ``num_samples`` kept draws (every ``thin``-th).

        Args:
          init_state: initial state (tensor or list of parts, optional leading
            chain dimensions).
          num_samples: draws to keep.
          seed: int or int pair, the run seed (step ``t`` of the run, burn-in
            included, takes ``stateless_fold_in(seed, t)``). Default value: ``0``.
          num_burnin_steps: steps discarded first. Default value: ``0``.
          progress: show a tqdm bar (rate, ETA). Default value: ``False``.
          desc: the bar's label. Default value: ``None``.

        Returns:
          A [`ChainResult`][tfp_sgmcmc.driver.memory.ChainResult].

        Raises:
          ValueError: ``num_samples`` < 1, ``num_burnin_steps`` < 0, a bad ``seed``.
        """
        num_samples = check_int(num_samples, "num_samples", 1)
        num_burnin_steps = check_int(num_burnin_steps, "num_burnin_steps", 0)
        run_seed = chunks.as_run_seed(seed)
        is_list = isinstance(init_state, (list, tuple))
        if is_list:
            init_state = [tf.convert_to_tensor(p) for p in init_state]
        else:
            init_state = tf.convert_to_tensor(init_state)
        plan = chunks.chunk_plan(num_samples, num_burnin_steps, self.thin, self.chunk_size)
        state, results = init_state, self.kernel.bootstrap_results(init_state)
        draws, traces = [], []
        timed_steps, timed_seconds = 0, 0.0
        t_start = time.perf_counter()
        with tqdm(
            total=sum(chunks.chunk_steps(k, n, self.thin) for k, n in plan),
            desc=desc,
            unit="step",
            leave=False,
            disable=not progress,
            dynamic_ncols=True,
        ) as bar:
            first_step = 0
            for kind, n in plan:
                program, fresh = self._program(kind, n)
                t0 = time.perf_counter()
                out = chunks.run_chunk(program, state, results, {}, run_seed, first_step)
                state, results = out.state, out.kernel_results
                if kind == "sample":
                    # .numpy() waits for the chunk, so the timing below is the chunk's own.
                    draws.append(tf.nest.map_structure(lambda x: x.numpy(), out.draws))
                    traces.append(tf.nest.map_structure(lambda x: x.numpy(), out.trace))
                else:
                    tf.nest.map_structure(lambda x: x.numpy(), state)
                steps = chunks.chunk_steps(kind, n, self.thin)
                first_step += steps
                if not fresh:  # a chunk that compiled its program is not a rate sample
                    timed_steps += steps
                    timed_seconds += time.perf_counter() - t0
                bar.update(steps)
        seconds = time.perf_counter() - t_start

        def cat(*xs: np.ndarray) -> np.ndarray:
            return np.concatenate(xs, 0)

        return ChainResult(
            states=tf.nest.map_structure(cat, *draws),
            trace=tf.nest.map_structure(cat, *traces),
            final_state=state,
            final_kernel_results=results,
            seconds=seconds,
            steps_per_second=timed_steps / timed_seconds if timed_seconds > 0 else float("nan"),
        )

    def __repr__(self) -> str:
        return (
            f"ChunkedChain(kernel={type(self.kernel).__name__}, chunk_size={self.chunk_size}, "
            f"thin={self.thin}, jit_compile={self.jit_compile})"
        )
