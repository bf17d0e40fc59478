"""Calibration of a posterior predictive: model averaging, ECE and MCE.

With ``M`` bins ``B_b`` of the confidences (the model-averaged probability of
the predicted class),

``ECE = Σ_b (|B_b|/n) |acc(B_b) − conf(B_b)|``,  ``MCE = max_b |acc(B_b) − conf(B_b)|``

(Guo et al. 2017; ``docs/algorithms.md#metrics``). Default: equal-width bins on
``[0, 1]`` (``((b−1)/M, b/M]``, a confidence of exactly 0 joins the first bin),
empty bins skipped, on the arithmetic Bayesian model average of the
per-sample class probabilities.

``paper_compatible=True`` reproduces the MAMBA code (``get_ECE_MCE`` in
the BNN model file of the authors' ``SGMCMC_bandit_tuning`` repository): the predictive
is ``exp(mean_s log p_s)`` (an unnormalised geometric mean; pass its output of
[`model_averaged_probabilities`][tfp_sgmcmc.diagnostics.calibration.model_averaged_probabilities]
with ``method="geometric"``), the bin
edges come from ``np.histogram`` over ``[min conf, max conf]``, every bin is
half-open ``[e_{b−1}, e_b)`` so the largest confidence falls in no bin but
still counts in ``n``, an empty bin makes ECE NaN, and MCE is Python's
``max`` over the per-bin gaps (NaN only if the first bin is empty).

#### References

1. C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger. On calibration of modern
   neural networks. ICML 2017.
2. J. Coullon, L. South, C. Nemeth. Efficient and generalizable tuning
   strategies for stochastic gradient MCMC. Statistics and Computing, 2023.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfp_sgmcmc.internal.util import check_int

__all__ = [
    "model_averaged_probabilities",
    "expected_calibration_error",
    "maximum_calibration_error",
    "calibration_errors",
    "predictive_metrics",
]

#: Largest ``num_bins`` accepted (the bins are materialised).
MAX_BINS = 100_000


def model_averaged_probabilities(
    per_sample: Any, method: str = "arithmetic", log_inputs: bool = False
) -> np.ndarray:
    """Average per-posterior-sample class probabilities over samples (axis 0).

    * ``"arithmetic"`` (Bayesian model average): ``p̄ = (1/S) Σ_s p_s``.
    * ``"geometric"`` (the MAMBA LR/NN evaluation code): ``p̄ = exp((1/S) Σ_s
      log p_s)``, not renormalised.

    Args:
      per_sample: ``[S, n, K]`` (or ``[S, n]`` binary class-1) probabilities,
        or log-probabilities if ``log_inputs``.
      method: ``"arithmetic"`` or ``"geometric"``. Default value: ``"arithmetic"``.
      log_inputs: inputs are log-probabilities. Default value: ``False``.

    Returns:
      ``[n, K]`` (or ``[n]``) float64 array.

    Raises:
      ValueError: unknown ``method``, fewer than 2 dims, non-finite values,
        probabilities outside [0, 1].
    """
    if method not in ("arithmetic", "geometric"):
        raise ValueError(f"`method` must be 'arithmetic' or 'geometric', got {method!r}.")
    p = np.asarray(per_sample, dtype=np.float64)
    if p.ndim < 2:
        raise ValueError(f"`per_sample` must be [S, n, ...], got shape {p.shape}.")
    if log_inputs:
        if np.any(np.isnan(p)) or np.any(p == np.inf):
            raise ValueError("`per_sample` log-probabilities contain NaN or +Inf.")
        if method == "geometric":
            return np.exp(np.mean(p, axis=0))
        return np.mean(np.exp(p), axis=0)
    if not np.all(np.isfinite(p)):
        raise ValueError("`per_sample` contains non-finite values (NaN or Inf).")
    if np.any(p < 0) or np.any(p > 1):
        raise ValueError("`per_sample` probabilities must lie in [0, 1].")
    if method == "geometric":
        with np.errstate(divide="ignore"):
            return np.exp(np.mean(np.log(p), axis=0))
    return np.mean(p, axis=0)


def _class_indices(labels: Any, n: int, k: int) -> np.ndarray:
    """``labels`` (``[n]`` class ids in ``[0, k)`` or ``[n, k]`` one-hot) as ``[n]`` ints."""
    y = np.asarray(labels)
    if y.ndim == 2:  # one-hot
        if y.shape != (n, k) or not np.all((y == 0) | (y == 1)) or np.any(y.sum(-1) != 1):
            raise ValueError(
                f"`labels` given as [n, K] must be one-hot with n = {n}, K = {k}, got shape "
                f"{y.shape} (or rows that are not one-hot)."
            )
        return np.argmax(y, axis=-1)
    if y.shape != (n,):
        raise ValueError(
            f"`labels` must be [n] class indices or [n, K] one-hot for n = {n}, "
            f"got shape {y.shape}."
        )
    if y.dtype.kind == "b":
        y = y.astype(np.int64)
    if y.dtype.kind not in "iu":
        if y.dtype.kind != "f" or not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
            raise ValueError(f"`labels` must be integer class ids, got dtype {y.dtype}.")
        y = y.astype(np.int64)
    if y.size and (y.min() < 0 or y.max() >= k):
        raise ValueError(
            f"`labels` must lie in [0, {k}) for {k} classes, got values in "
            f"[{y.min()}, {y.max()}]."
        )
    return y.astype(np.int64)


def _confidence_and_correct(probs: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim == 1:  # binary: probability of class 1
        p = np.stack([1.0 - p, p], axis=-1)
    if p.ndim != 2 or p.shape[0] == 0:
        raise ValueError(f"`probs` must be [n, K] or [n] with n >= 1, got shape {p.shape}.")
    if p.shape[1] == 0:
        raise ValueError(f"`probs` must have at least one class, got shape {p.shape}.")
    if not np.all(np.isfinite(p)):
        raise ValueError("`probs` contains non-finite values (NaN or Inf).")
    if np.any(p < 0) or np.any(p > 1):
        raise ValueError("`probs` must lie in [0, 1].")
    y = _class_indices(labels, p.shape[0], p.shape[1])
    pred = np.argmax(p, axis=-1)
    conf = p[np.arange(p.shape[0]), pred]
    return conf, (pred == y).astype(np.float64)


def calibration_errors(
    probs: Any, labels: Any, num_bins: int = 10, paper_compatible: bool = False
) -> tuple[float, float]:
    """``(ECE, MCE)`` of model-averaged predictive probabilities (module docstring).

    Args:
      probs: ``[n, K]`` model-averaged class probabilities, or ``[n]`` binary
        probabilities of class 1 (see
        [`model_averaged_probabilities`][tfp_sgmcmc.diagnostics.calibration.model_averaged_probabilities]).
      labels: ``[n]`` true class indices or ``[n, K]`` one-hot.
      num_bins: ``M``. Default value: ``10``.
      paper_compatible: the MAMBA code's binning instead of equal-width
        ``[0, 1]`` bins. Default value: ``False``.

    Raises:
      ValueError: ``num_bins`` not an int in ``[1, MAX_BINS]``, shape mismatch,
        non-finite ``probs`` or outside ``[0, 1]``, ``labels`` not integer class
        ids in ``[0, K)`` (``K = 2`` for binary ``probs``) nor one-hot rows.
    """
    # The bins are materialised (histogram edges): bound them.
    num_bins = check_int(num_bins, "num_bins", 1, maximum=MAX_BINS)
    conf, correct = _confidence_and_correct(probs, labels)
    n = conf.size
    if paper_compatible:
        _, edges = np.histogram(conf, bins=num_bins)
        ece_terms, gaps = [], []
        for b in range(1, num_bins + 1):
            m = (conf < edges[b]) & (conf >= edges[b - 1])
            with np.errstate(invalid="ignore"):
                acc = np.mean(correct[m]) if m.any() else np.nan
                cb = np.mean(conf[m]) if m.any() else np.nan
            ece_terms.append(m.sum() * abs(acc - cb))
            gaps.append(abs(acc - cb))
        return float(np.sum(ece_terms) / n), float(max(gaps))
    # Bin b holds confidences in ((b-1)/M, b/M]; 0 joins bin 0. Compared with the
    # edges b/M themselves: ceil(conf * M) misplaces some edges (0.56 * 25 > 14).
    edges = np.arange(num_bins + 1) / num_bins
    idx = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, num_bins - 1)
    ece, mce = 0.0, 0.0
    for b in np.unique(idx):  # only occupied bins contribute
        m = idx == b
        gap = abs(correct[m].mean() - conf[m].mean())
        ece += m.sum() / n * gap
        mce = max(mce, gap)
    return float(ece), float(mce)


def expected_calibration_error(
    probs: Any, labels: Any, num_bins: int = 10, paper_compatible: bool = False
) -> float:
    """``ECE = Σ_b (|B_b|/n)|acc(B_b) − conf(B_b)|`` (Guo et al. 2017).

    Args and binning as
    [`calibration_errors`][tfp_sgmcmc.diagnostics.calibration.calibration_errors].
    """
    return calibration_errors(probs, labels, num_bins, paper_compatible)[0]


def maximum_calibration_error(
    probs: Any, labels: Any, num_bins: int = 10, paper_compatible: bool = False
) -> float:
    """``MCE = max_b |acc(B_b) − conf(B_b)|`` over non-empty bins (Guo et al. 2017).

    Args and binning as
    [`calibration_errors`][tfp_sgmcmc.diagnostics.calibration.calibration_errors].
    """
    return calibration_errors(probs, labels, num_bins, paper_compatible)[1]


def predictive_metrics(
    probs: Any,
    labels: Any,
    num_bins: int = 10,
    paper_compatible: bool = False,
    min_probability: float = 1e-300,
) -> dict[str, float]:
    """Accuracy, log-loss, ECE and MCE of a predictive ``p̄`` on labelled test data.

    ``accuracy = (1/n) Σ_i 1[argmax_k p̄_ik = y_i]``,
    ``log_loss = −(1/n) Σ_i log max(p̄_{i y_i}, min_probability)``; ECE and MCE as
    [`calibration_errors`][tfp_sgmcmc.diagnostics.calibration.calibration_errors]
    (``num_bins``, ``paper_compatible``).

    Args:
      probs: ``[n, K]`` class probabilities (e.g. from
        [`model_averaged_probabilities`][tfp_sgmcmc.diagnostics.calibration.model_averaged_probabilities]).
      labels: ``[n]`` integer class ids in ``[0, K)``, or ``[n, K]`` one-hot.
      num_bins: calibration bins. Default value: ``10``.
      paper_compatible: the MAMBA code's binning. Default value: ``False``.
      min_probability: floor of the true class's probability in the log-loss, so a
        zero does not give an infinite loss (the loss is computed in float64, so a
        float32 predictive is floored at this value too). Default value: ``1e-300``.

    Returns:
      ``{"accuracy", "log_loss", "ece", "mce"}`` as Python floats.

    Raises:
      ValueError: ``probs`` is not ``[n, K]``, or the arguments
        [`calibration_errors`][tfp_sgmcmc.diagnostics.calibration.calibration_errors]
        rejects.
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"`probs` must be [n, K] class probabilities, got shape {p.shape}.")
    ece, mce = calibration_errors(p, labels, num_bins=num_bins, paper_compatible=paper_compatible)
    y = _class_indices(labels, p.shape[0], p.shape[1])
    p_true = np.clip(p[np.arange(y.size), y], min_probability, 1.0)
    return {
        "accuracy": float(np.mean(np.argmax(p, -1) == y)),
        "log_loss": float(-np.mean(np.log(p_true))),
        "ece": float(ece),
        "mce": float(mce),
    }
