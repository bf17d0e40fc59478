"""Shared pieces of the sparse (SGLD-SA / SGHMC-SA) examples.

* :func:`toeplitz_design` — rows ``x ~ N_p(0, Σ)``, ``Σ_ij = r^{|i−j|}`` (Deng et al.'s
  large-p-small-n simulations, ``docs/algorithms.md#exp-sparse-linear``, ``#exp-sparse-logistic``);
* :func:`run_chain` — runs a kernel in compiled chunks (XLA) with a tqdm bar,
  keeping every ``thin``-th state;
* :func:`markdown_table` — the studies' table form.

Data that change between repetitions are held in ``tf.Variable``s read by the
likelihood (the minibatches are row *indices*), so one compiled program serves
every repetition of a method.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover - tqdm is a dependency of the examples only
    tqdm = None

__all__ = ["toeplitz_design", "run_chain", "markdown_table", "Timer"]


def toeplitz_design(rng: np.random.Generator, n: int, p: int, r: float) -> np.ndarray:
    """``n`` rows of ``N_p(0, Σ)`` with ``Σ_ij = r^{|i−j|}`` (an AR(1) process: exact,
    no p×p Cholesky)."""
    x = np.empty((n, p))
    x[:, 0] = rng.standard_normal(n)
    s = np.sqrt(1 - r * r)
    for j in range(1, p):
        x[:, j] = r * x[:, j - 1] + s * rng.standard_normal(n)
    return x


class Timer:
    def __enter__(self) -> Timer:
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self.t0


def run_chain(
    kernel: tfp.mcmc.TransitionKernel,
    init_state: Any,
    num_steps: int,
    thin: int,
    seed: int,
    trace_fn: Callable[[Any, Any], Any],
    chunk_steps: int | None = None,
    desc: str = "",
    compiled: dict | None = None,
    jit: bool = True,
) -> tuple[Any, Any, dict]:
    """Run ``num_steps`` steps keeping every ``thin``-th state (and its trace).

    ``compiled`` caches the compiled chunk function across calls with the same
    kernel (pass the same dict). Returns ``(states, traces, info)`` as NumPy
    with ``info = {"seconds", "steps_per_second"}`` (excluding the first chunk,
    which includes compilation). ``jit=False`` compiles a plain graph (faster to
    build, slower per step: what the ``--quick`` smoke runs use).
    """
    chunk_steps = chunk_steps or min(num_steps, 20 * thin if num_steps >= 20 * thin else num_steps)
    if num_steps % chunk_steps or chunk_steps % thin:
        raise ValueError("num_steps must be a multiple of chunk_steps, chunk_steps of thin")
    if compiled is None:
        compiled = {}
    key = (chunk_steps, thin)
    if key not in compiled:

        @tf.function(jit_compile=jit)
        def boot(state):
            return kernel.bootstrap_results(state)

        @tf.function(jit_compile=jit)
        def chunk(state, results, seed):
            out = tfp.mcmc.sample_chain(
                num_results=chunk_steps // thin,
                current_state=state,
                previous_kernel_results=results,
                kernel=kernel,
                num_steps_between_results=thin - 1,
                trace_fn=trace_fn,
                return_final_kernel_results=True,
                seed=seed,
            )
            return out.all_states, out.trace, out.final_kernel_results

        compiled[key] = (boot, chunk)
    boot, chunk = compiled[key]
    state = init_state
    results = boot(state)
    seeds = tfp.random.split_seed(tf.constant([seed, 0]), n=num_steps // chunk_steps)
    all_states, all_traces = [], []
    n_chunks = num_steps // chunk_steps
    bar = tqdm(total=num_steps, desc=desc, unit="step", leave=False) if tqdm else None
    t_first = t0 = time.perf_counter()
    for i in range(n_chunks):
        s, tr, results = chunk(state, results, seeds[i])
        state = tf.nest.map_structure(lambda x: x[-1], s)
        all_states.append(tf.nest.map_structure(lambda x: x.numpy(), s))
        all_traces.append(tf.nest.map_structure(lambda x: x.numpy(), tr))
        if i == 0:
            t0 = time.perf_counter()
        if bar:
            bar.update(chunk_steps)
    if bar:
        bar.close()
    t1 = time.perf_counter()
    cat = lambda *xs: np.concatenate(xs, 0)  # noqa: E731
    states = tf.nest.map_structure(cat, *all_states)
    traces = tf.nest.map_structure(cat, *all_traces)
    timed = (n_chunks - 1) * chunk_steps
    info = {
        "seconds": t1 - t_first,
        "steps_per_second": timed / (t1 - t0) if timed > 0 and t1 > t0 else float("nan"),
    }
    return states, traces, info


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)
