"""Deprecated location of the Keras bridge; use [`tfp_sgmcmc.keras`][tfp_sgmcmc.keras].

The bridge is how a Keras user builds any posterior, not a part of the tuner, so it moved to
its own module (``docs/conventions.md``, "Names"). This module re-exports it for one release
and warns on import.
"""

import warnings

from tfp_sgmcmc.keras import (
    KerasPosterior,
    posterior_predictive_metrics,
    predictive_probabilities,
)

__all__ = ["KerasPosterior", "predictive_probabilities", "posterior_predictive_metrics"]

warnings.warn(
    "tfp_sgmcmc.tuning.keras is deprecated; import from tfp_sgmcmc.keras instead.",
    DeprecationWarning,
    stacklevel=2,
)
