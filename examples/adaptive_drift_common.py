"""Shared plumbing of the adaptive-drift studies (``examples/adaptive_drift_*.py``).

* :func:`run_chain`: a long chain through :class:`tfp_sgmcmc.driver.ChunkedChain`
  (XLA-compiled chunks, each resuming from the previous chunk's state and kernel
  results, with a tqdm bar: rate/ETA);
* :class:`timer`: wall-clock seconds of a block;
* :func:`sgld_msgld_asgld`: the three samplers the many-chain studies (Gaussian,
  mixture) compare.

Where the studies write (``--out``, ``--write-docs``) is decided by ``_cli.py``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import _cli  # noqa: F401  (first: quiet TensorFlow start-up)
import matplotlib

matplotlib.use("Agg")
# SG-MCMC kernels are uncalibrated by design; TFP warns on every sample_chain call.
warnings.filterwarnings("ignore", message="supplied `TransitionKernel` is not calibrated")

import tensorflow_probability as tfp  # noqa: E402  (after matplotlib.use)

from tfp_sgmcmc.driver import ChunkedChain  # noqa: E402

__all__ = [
    "run_chain",
    "timer",
    "sgld_msgld_asgld",
]


def run_chain(
    kernel: tfp.mcmc.TransitionKernel,
    init: Any,
    num_steps: int,
    seed: int,
    trace_fn: Callable[[Any, Any], Any] | None = None,
    num_chunks: int = 10,
    desc: str = "",
) -> Any:
    """``num_steps`` steps of ``kernel`` from ``init``; returns the stacked trace.

    The trace is ``trace_fn(state, results)`` (default: the state) of every
    step, concatenated over chunks along axis 0. The chain runs through
    [`ChunkedChain`][tfp_sgmcmc.driver.ChunkedChain] in ``num_chunks`` XLA chunks.
    """
    num_chunks = max(1, min(num_chunks, num_steps))
    chain = ChunkedChain(kernel, chunk_size=-(-num_steps // num_chunks), trace_fn=trace_fn)
    out = chain.run(init, num_steps, seed=seed, progress=True, desc=desc)
    return out.states if trace_fn is None else out.trace


class timer:
    """Context manager measuring wall-clock seconds in ``.seconds``."""

    def __enter__(self) -> timer:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self._t0


def sgld_msgld_asgld(
    estimator: Any, step_size: float, a_momentum: float, a_adam: float
) -> dict[str, tfp.mcmc.TransitionKernel]:
    """SGLD, MSGLD and ASGLD at one step size (``β1 = 0.9``, ``β2 = 0.999``; bias factors
    ``a_momentum`` and ``a_adam``): the comparison of Kim, Song & Liang's §4 examples."""
    import tfp_sgmcmc as sg

    return {
        "SGLD": sg.SGLD(estimator, step_size),
        "MSGLD": sg.MSGLD(estimator, step_size, a=a_momentum, beta1=0.9),
        "ASGLD": sg.ASGLD(estimator, step_size, a=a_adam, beta1=0.9, beta2=0.999),
    }
