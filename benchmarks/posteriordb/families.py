"""posteriordb's non-regression posteriors transcribed from Stan into TFP form.

The hierarchical, Gaussian-process, time-series (AR, ARMA, GARCH), hidden-Markov, mixture and
ODE posteriors of this folder, each a builder returning a `Posterior` (see ``common.py``), in
`BUILDERS` by posteriordb name; ``models.py`` merges them into its registry, so
``models.load(name)`` reaches every posterior.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

try:
    from benchmarks._load import load as _load_module
except ImportError:  # run by path: the repository root is not on sys.path
    _spec = importlib.util.spec_from_file_location(
        "_benchmarks__load", Path(__file__).resolve().parents[1] / "_load.py"
    )
    _loader = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_loader)
    _load_module = _loader.load

_common = _load_module("posteriordb.common")
Posterior = _common.Posterior

__all__ = ["BUILDERS"]

#: posteriordb name -> builder.
BUILDERS: dict[str, Callable[..., Posterior]] = {}
