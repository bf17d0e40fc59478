"""Posterior-predictive probabilities and metrics of a ``KerasPosterior``'s weight
samples."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.diagnostics.calibration import model_averaged_probabilities, predictive_metrics
from tfp_sgmcmc.keras._inputs import as_inputs, class_ids, num_rows
from tfp_sgmcmc.keras._posterior import KerasPosterior

__all__ = ["posterior_predictive_metrics", "predictive_probabilities"]


def _sample_parts(posterior: KerasPosterior, samples: Any) -> list[np.ndarray]:
    """Weight samples as NumPy arrays ``[S, *weight shape]`` (tensors, arrays, a lone part)."""
    parts = list(samples) if isinstance(samples, (list, tuple)) else [samples]
    parts = [np.asarray(p) for p in parts]
    ranks = posterior._weight_ranks
    if len(parts) != len(ranks):
        raise ValueError(
            f"`samples` must hold one array per trainable weight ({len(ranks)}), got {len(parts)}."
        )
    num = parts[0].shape[0] if parts[0].ndim else 0
    for p, r in zip(parts, ranks):
        if p.ndim != r + 1 or p.shape[0] != num:
            raise ValueError(
                "`samples` parts must be [S, *weight shape] with the same S (flatten chain "
                f"dimensions first), got shapes {[q.shape for q in parts]}."
            )
    return parts


def predictive_probabilities(
    posterior: KerasPosterior, samples: Any, x: Any, batch_size: int = 2048
) -> np.ndarray:
    """Per-sample predictive probabilities ``[S, n, K]`` (softmax / sigmoid of the outputs).

    Args:
      posterior: the [`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior].
      samples: list of weight parts, each ``[S, ...]`` (NumPy arrays or tensors,
        e.g. ``sample_chain``'s output).
      x: inputs ``[n, ...]`` (a list/tuple/dict of them for a model with several inputs).
      batch_size: rows per forward pass. Default value: ``2048``.
    """
    samples = _sample_parts(posterior, samples)
    x = as_inputs(x, "x", posterior._float_dtype)
    fn = tf.function(lambda ws, xb: posterior.outputs(ws, xb), reduce_retracing=True)
    out = []
    num = samples[0].shape[0]
    for s in range(num):
        ws = [tf.constant(p[s]) for p in samples]
        rows = []
        for start in range(0, num_rows(x), batch_size):
            stop = start + batch_size
            xb = tf.nest.map_structure(
                lambda t, a=start, b=stop, d=ws[0].dtype: tf.constant(t[a:b], d), x
            )
            rows.append(fn(ws, xb).numpy())
        logits = np.concatenate(rows, 0).astype(np.float64)
        if not posterior.from_logits:  # the model outputs probabilities already
            p = logits.reshape(-1) if posterior.likelihood == "bernoulli" else logits
            out.append(np.stack([1 - p, p], -1) if posterior.likelihood == "bernoulli" else p)
        elif posterior.likelihood == "bernoulli":
            p1 = 1.0 / (1.0 + np.exp(-logits.reshape(-1)))
            out.append(np.stack([1 - p1, p1], -1))
        else:
            z = logits - logits.max(-1, keepdims=True)
            e = np.exp(z)
            out.append(e / e.sum(-1, keepdims=True))
    return np.stack(out, 0)


def posterior_predictive_metrics(
    posterior: KerasPosterior,
    samples: Any,
    x: Any,
    y: Any,
    num_bins: int = 10,
    method: str = "arithmetic",
    max_samples: int | None = 100,
) -> dict[str, float]:
    """Accuracy, log-loss, ECE and MCE of the model-averaged predictive.

    ``p̄(y|x) = (1/S) Σ_s p(y | x, W_s)`` (``method="arithmetic"``, the
    Bayesian model average) or the MAMBA code's geometric average; ECE/MCE
    with ``num_bins`` equal-width bins on [0, 1] (Guo et al. 2017), from
    [`tfp_sgmcmc.diagnostics`][tfp_sgmcmc.diagnostics].

    Args:
      posterior: the model.
      samples: weight samples ``[S, ...]`` (arrays or tensors, any ``S``).
      x: test inputs.
      y: test labels (class ids, or one-hot rows).
      num_bins: calibration bins. Default value: ``10``.
      method: ``"arithmetic"`` or ``"geometric"``. Default value: ``"arithmetic"``.
      max_samples: evenly thin the samples to at most this many.
        Default value: ``100``.
    """
    samples = _sample_parts(posterior, samples)
    num = samples[0].shape[0]
    if num == 0:
        raise ValueError("`samples` is empty.")
    if max_samples is not None and num > max_samples:
        idx = np.linspace(0, num - 1, max_samples).round().astype(int)
        samples = [p[idx] for p in samples]
    probs = predictive_probabilities(posterior, samples, x)
    pbar = model_averaged_probabilities(probs, method=method)
    if method == "geometric":
        pbar = pbar / pbar.sum(-1, keepdims=True)
    y = class_ids(np.asarray(y), pbar.shape[-1]).astype(int)
    if y.shape[0] != pbar.shape[0]:
        raise ValueError(f"`y` has {y.shape[0]} labels for {pbar.shape[0]} inputs `x`.")
    return predictive_metrics(pbar, y, num_bins=num_bins)
