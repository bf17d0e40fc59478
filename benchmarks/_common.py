"""Small helpers shared by the benchmark scripts: timing with sync, environment, JSON.

Benchmarks compare speeds as ratios measured within one run (the machine is
shared and noisy): every timed call is synchronised by copying its outputs to
host memory, each configuration is compiled by a warm-up call first, and the
figure reported is the median over repeats.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "log",
    "make_data",
    "sync",
    "timed_call",
    "median",
    "load_average",
    "environment",
    "git_commit",
    "dump_json",
]


def sync(outputs: Any) -> Any:
    """Block until every tensor in ``outputs`` is computed; return them as numpy."""
    import tensorflow as tf

    return tf.nest.map_structure(
        lambda t: t.numpy() if hasattr(t, "numpy") else np.asarray(t), outputs
    )


def timed_call(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """Wall-clock seconds of ``fn(*args)`` including the copy of its outputs to host."""
    t0 = time.perf_counter()
    out = sync(fn(*args))
    return time.perf_counter() - t0, out


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (``os.getloadavg``)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux
        return []


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover
        pass
    return platform.processor() or "unknown"


def git_commit() -> str:
    """The checkout's short commit, marked when the library or the benchmarks differ
    from it (``"unknown"`` outside a git checkout)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    git = ["git", "-C", root]
    try:
        sha = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            [*git, "status", "--porcelain", "--", "benchmarks", "tfp_sgmcmc"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{sha} (with uncommitted changes)" if changed else sha


def environment() -> dict[str, Any]:
    """Versions and machine facts recorded next to every benchmark's numbers."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    import tfp_sgmcmc

    return {
        "commit": git_commit(),
        "versions": {
            "python": sys.version.split()[0],
            "tensorflow": tf.__version__,
            "tensorflow_probability": tfp.__version__,
            "numpy": np.__version__,
            "tfp_sgmcmc": tfp_sgmcmc.__version__,
        },
        "machine": {
            "nproc": os.cpu_count(),
            "cpu": _cpu_model(),
            "platform": platform.platform(),
            "gpus": len(tf.config.list_physical_devices("GPU")),
        },
    }


def dump_json(obj: Any, path: str | None = None) -> None:
    """Print ``obj`` as JSON on stdout (and write it to ``path`` if given)."""
    text = json.dumps(obj, indent=2, sort_keys=False)
    print(text)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


def log(msg: str) -> None:
    """Progress on stderr (stdout carries the JSON)."""
    print(msg, file=sys.stderr, flush=True)


def make_data(num_examples: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The benchmarks' logistic-regression data: x ~ N(0, I), θ ~ N(0, I), y ~ Bernoulli(σ(xθ))."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_examples, dim)).astype(np.float32)
    theta = rng.normal(0.0, 1.0, dim)
    y = (rng.random(num_examples) < 1.0 / (1.0 + np.exp(-(x @ theta)))).astype(np.float32)
    return x, y
