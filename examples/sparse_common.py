"""Shared pieces of the sparse (SGLD-SA / SGHMC-SA) examples.

* :func:`toeplitz_design` — rows ``x ~ N_p(0, Σ)``, ``Σ_ij = r^{|i−j|}`` (Deng et al.'s
  large-p-small-n simulations, ``docs/algorithms.md#exp-sparse-linear``, ``#exp-sparse-logistic``);
* :func:`sa_chains` — one :class:`tfp_sgmcmc.driver.ChunkedChain` per SA weight ω
  (SGLD-SA / -EM / plain), tracing the latent σ and divergence;
* :func:`markdown_table` — the studies' table form.

Chains run through :class:`tfp_sgmcmc.driver.ChunkedChain` (compiled chunks kept
in memory). Data that change between repetitions are held in ``tf.Variable``s read
by the likelihood (the minibatches are row *indices*), so one runner's compiled
chunks serve every repetition of a method.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tfp_sgmcmc.driver import ChunkedChain
from tfp_sgmcmc.kernels.stochastic_approximation import StochasticApproximation

__all__ = ["toeplitz_design", "sa_chains", "markdown_table"]


def toeplitz_design(rng: np.random.Generator, n: int, p: int, r: float) -> np.ndarray:
    """``n`` rows of ``N_p(0, Σ)`` with ``Σ_ij = r^{|i−j|}`` (an AR(1) process: exact,
    no p×p Cholesky)."""
    x = np.empty((n, p))
    x[:, 0] = rng.standard_normal(n)
    s = np.sqrt(1 - r * r)
    for j in range(1, p):
        x[:, j] = r * x[:, j - 1] + s * rng.standard_normal(n)
    return x


def sa_chains(
    inner: Any, weights: Mapping[str, Any], chunk_steps: int, thin: int, jit_compile: bool
) -> dict[str, ChunkedChain]:
    """Per method, a chunked runner of ``StochasticApproximation(inner, ω)``.

    Chunks of ``chunk_steps`` steps keep every ``thin``-th state and trace
    ``(σ, diverged)``; the runner keeps its compiled chunks, so one per method
    serves every repetition (data set, grid point).
    """

    def trace_fn(_, r):
        return r.latents.sigma, r.diverged

    return {
        m: ChunkedChain(
            StochasticApproximation(inner, w),
            chunk_size=chunk_steps // thin,
            thin=thin,
            trace_fn=trace_fn,
            jit_compile=jit_compile,
        )
        for m, w in weights.items()
    }


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)
