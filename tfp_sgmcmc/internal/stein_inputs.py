"""Input handling shared by the Stein diagnostics and the tuner's Stein metrics: parts →
matrix, validation.

A chain state may be a single tensor or a list of parts, each ``[n, ...]``
(``n`` samples first). The Stein statistics see one vector per sample, so every
part's event dimensions are flattened (row-major) and the parts concatenated in
list order; samples and scores are flattened the same way, so coordinate ``k``
of a sample is paired with coordinate ``k`` of its score.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.internal.util import is_list_like

__all__ = [
    "flatten_parts",
    "flatten_samples_and_scores",
    "check_finite_eager",
    "check_imq_parameters",
    "as_dtype",
]


def as_dtype(value: Any, dtype: tf.DType) -> tf.Tensor:
    """``value`` as a tensor of ``dtype`` without a float32 detour.

    ``tf.cast(1.7, tf.float64)`` first makes a float32 tensor (1.70000005); a
    Python number must be converted directly.
    """
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return tf.cast(value, dtype)
    return tf.convert_to_tensor(np.asarray(value, dtype=dtype.as_numpy_dtype))


def flatten_parts(x: Any, arg_name: str, sample_ndims: int = 1) -> tf.Tensor:
    """A tensor or list of parts ``[*S, ...]`` as one matrix ``[*S, d]``.

    Args:
      x: tensor or list/tuple of tensors sharing the ``sample_ndims`` leading
        dimensions ``S``.
      arg_name: name used in error messages.
      sample_ndims: number of leading (sample/chain) dimensions kept.
        Default value: ``1``.

    Raises:
      ValueError: empty list, non-floating parts, mixed dtypes, leading
        dimensions that differ between parts, or no coordinates at all (every
        event shape empty).
    """
    parts = list(x) if is_list_like(x) else [x]
    if not parts:
        raise ValueError(f"`{arg_name}` must not be an empty list.")
    parts = [tf.convert_to_tensor(p) for p in parts]
    dtypes = {p.dtype for p in parts}
    if len(dtypes) > 1:
        raise ValueError(
            f"`{arg_name}` parts must share one dtype, got {sorted(d.name for d in dtypes)}."
        )
    if not parts[0].dtype.is_floating:
        raise ValueError(f"`{arg_name}` must be floating point, got {parts[0].dtype.name}.")
    flat, sizes = [], []
    lead = None
    for p in parts:
        if p.shape.rank is not None and p.shape.rank < sample_ndims:
            raise ValueError(
                f"`{arg_name}` parts must have at least {sample_ndims} leading sample "
                f"dimension(s), got shape {p.shape}."
            )
        this_lead = p.shape[:sample_ndims]
        if lead is not None and this_lead.is_fully_defined() and lead.is_fully_defined():
            if this_lead != lead:
                raise ValueError(
                    f"`{arg_name}` parts disagree on the leading dimensions: {lead} vs {this_lead}."
                )
        lead = this_lead
        event = p.shape[sample_ndims:]
        if event.is_fully_defined():
            size = int(np.prod(event.as_list())) if event.rank else 1
        else:
            size = -1
        sizes.append(size)
        new_shape = tf.concat([tf.shape(p)[:sample_ndims], [size]], axis=0)
        flat.append(tf.reshape(p, new_shape))
    if sum(sizes) == 0 and all(z == 0 for z in sizes):
        shapes = [p.shape.as_list() if p.shape.rank is not None else None for p in parts]
        raise ValueError(
            f"`{arg_name}` has no coordinates: every event shape is empty (shapes {shapes})."
        )
    return flat[0] if len(flat) == 1 else tf.concat(flat, axis=-1)


def flatten_samples_and_scores(
    samples: Any, scores: Any, sample_ndims: int = 1
) -> tuple[tf.Tensor, tf.Tensor]:
    """Flatten ``samples`` and ``scores`` consistently and check they match.

    Raises:
      ValueError: the two structures or shapes differ, or dtypes differ.
    """
    if is_list_like(samples) != is_list_like(scores) or (
        is_list_like(samples) and len(samples) != len(scores)
    ):
        raise ValueError("`scores` must have the same structure (parts) as `samples`.")
    s_parts = list(samples) if is_list_like(samples) else [samples]
    g_parts = list(scores) if is_list_like(scores) else [scores]
    for a, b in zip(s_parts, g_parts):
        a_shape = tf.TensorShape(getattr(a, "shape", np.shape(a)))
        b_shape = tf.TensorShape(getattr(b, "shape", np.shape(b)))
        if not a_shape.is_compatible_with(b_shape):
            raise ValueError(
                f"`samples` and `scores` must have the same shapes, got {a_shape} and {b_shape}."
            )
    x = flatten_parts(samples, "samples", sample_ndims)
    s = flatten_parts(scores, "scores", sample_ndims)
    if x.dtype != s.dtype:
        raise ValueError(
            f"`samples` and `scores` must share a dtype, got {x.dtype.name} and {s.dtype.name}."
        )
    return x, s


def check_finite_eager(x: tf.Tensor, arg_name: str) -> None:
    """Raise ``ValueError`` if an eager (concrete) ``x`` holds NaN or Inf.

    Inside a traced function values are unknown; the statistics then return NaN
    (see each function's docstring) instead of a silently wrong number.
    """
    if isinstance(x, np.ndarray):
        x = tf.convert_to_tensor(x)
    if not x.dtype.is_floating:
        return
    if tf.executing_eagerly():
        # Reduced in TF: no host copy of a possibly large array.
        finite = tf.math.is_finite(x)
        if not bool(tf.reduce_all(finite)):
            bad = int(tf.size(x)) - int(tf.math.count_nonzero(finite))
            raise ValueError(f"`{arg_name}` contains {bad} non-finite value(s) (NaN or Inf).")


def check_imq_parameters(c: Any, beta: Any) -> None:
    """``c > 0`` and ``β ∈ (−1, 0)`` (Gorham & Mackey 2017, Theorem 8)."""
    c_v = np.asarray(c, dtype=float)
    if c_v.ndim != 0 or not np.isfinite(c_v) or c_v <= 0:
        raise ValueError(f"`c` must be a finite scalar > 0, got {c!r}.")
    b_v = np.asarray(beta, dtype=float)
    if b_v.ndim != 0 or not np.isfinite(b_v) or not (-1.0 < b_v < 0.0):
        raise ValueError(f"`beta` must lie in (-1, 0), got {beta!r}.")


def check_finite_result(
    value: tf.Tensor, what: str, inputs: str = "`samples`/`scores`"
) -> tf.Tensor:
    """Eagerly, raise ``ValueError`` naming the ``inputs`` if finite inputs gave a
    non-finite statistic (they are too large: the sums overflowed); a huge number
    must not come back as a silent ``inf``."""
    if tf.executing_eagerly() and not bool(tf.reduce_all(tf.math.is_finite(value))):
        raise ValueError(
            f"{inputs} too large: the {what} overflowed to {value.numpy()!r} "
            "(rescale them, or pass them in float64)."
        )
    return value
