"""What the reference problems share: the training-set size, batch fractions, stored truths.

Their test metrics are [`predictive_metrics`][tfp_sgmcmc.diagnostics.predictive_metrics].
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from tfp_sgmcmc.internal.util import check_in_interval

__all__ = ["TrainSplitMixin", "read_ground_truth"]


def read_ground_truth(path: str) -> dict[str, Any] | None:
    """A stored ground-truth summary (JSON), or ``None`` if it has not been produced."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


class TrainSplitMixin:
    """``num_train`` (rows of ``x_train``) and the paper's batch fractions."""

    x_train: Any

    @property
    def num_train(self) -> int:
        return int(self.x_train.shape[0])

    def batch_size_from_fraction(self, fraction: float) -> int:
        """``n = ⌊τ N_train⌋`` (at least 1) for a fraction ``τ`` in ``(0, 1]`` (the paper's
        batch percentages / 100).

        Raises:
          ValueError: ``fraction`` is not a finite number in ``(0, 1]``.
        """
        check_in_interval(fraction, "fraction", 0.0, 1.0, low_open=True, scalar=True)
        return max(1, int(np.floor(float(fraction) * self.num_train)))
