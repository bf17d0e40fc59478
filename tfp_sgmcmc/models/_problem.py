"""What the reference problems share: the training-set size, batch fractions, stored truths."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

__all__ = ["TrainSplitMixin", "classification_metrics", "read_ground_truth"]


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
        """``n = ⌊τ N_train⌋`` for a fraction ``τ`` (the paper's batch percentages / 100)."""
        return max(1, int(np.floor(fraction * self.num_train)))


def classification_metrics(
    pbar: np.ndarray, y: np.ndarray, num_bins: int = 10, paper_compatible: bool = False
) -> dict[str, float]:
    """Accuracy, log-loss, ECE and MCE of predictive class probabilities ``pbar [n, K]``.

    ECE/MCE from [`calibration_errors`][tfp_sgmcmc.diagnostics.calibration_errors]
    (``num_bins`` equal-width bins, or the MAMBA code's binning with
    ``paper_compatible``); the log-loss floors ``p(y|x)`` at ``1e-300``.
    """
    from tfp_sgmcmc.diagnostics import calibration_errors

    y = np.asarray(y).astype(int)
    ece, mce = calibration_errors(pbar, y, num_bins=num_bins, paper_compatible=paper_compatible)
    p_true = np.clip(pbar[np.arange(y.size), y], 1e-300, 1.0)
    return {
        "accuracy": float(np.mean(np.argmax(pbar, -1) == y)),
        "log_loss": float(-np.mean(np.log(p_true))),
        "ece": float(ece),
        "mce": float(mce),
    }
