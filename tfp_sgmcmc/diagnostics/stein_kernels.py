r"""Base kernels and their Langevin–Stein kernels, as pure tensor functions.

For a target with score ``s(x) = ∇ log π(x)`` and a base kernel ``k``, the
Langevin–Stein kernel (Liu, Lee & Jordan 2016; Gorham & Mackey 2017) is

``k_π(x, y) = s_xᵀ s_y k + s_xᵀ ∇_y k + s_yᵀ ∇_x k + ∇_x · ∇_y k``.

With ``r = x − y``:

* **IMQ** ``k = (c² + ‖r‖²)^β`` (``c > 0``, ``β ∈ (−1, 0)``), ``B = c² + ‖r‖²``:
  ``k_π = s_xᵀs_y B^β − 2β B^{β−1} (s_x − s_y)ᵀ r − 2dβ B^{β−1}
  − 4β(β−1) ‖r‖² B^{β−2}``; on the diagonal ``k_π(x, x) = ‖s_x‖² c^{2β} −
  2dβ c^{2(β−1)}`` (``docs/algorithms.md#ksd``).
* **RBF** ``k = exp(−‖r‖² / (2h²))``:
  ``k_π = k [s_xᵀs_y + (s_x − s_y)ᵀ r / h² + d/h² − ‖r‖²/h⁴]``; diagonal
  ``‖s_x‖² + d/h²``.

Blocks are computed with matrix products only: with ``X, Y`` the sample blocks
and ``S_X, S_Y`` their scores, one product ``[X; S_X][Y; S_Y]ᵀ`` yields
``XYᵀ, XS_Yᵀ, S_XYᵀ, S_XS_Yᵀ``, then ``‖r‖² = ‖x‖² + ‖y‖² − 2xᵀy``,
``s_xᵀr = s_x·x − s_x·y`` and ``s_yᵀr = s_y·x − s_y·y``. A block of ``b × m``
pairs therefore costs one ``2b × d × 2m`` matmul plus O(bm) elementwise work.

#### References

1. Q. Liu, J. D. Lee, M. I. Jordan. A kernelized Stein discrepancy for
   goodness-of-fit tests. ICML 2016.
2. J. Gorham, L. Mackey. Measuring sample quality with kernels. ICML 2017.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.internal.stein_inputs import as_dtype, check_imq_parameters

__all__ = [
    "STEIN_KERNELS",
    "validate_kernel_args",
    "stein_kernel_matrix",
    "stein_kernel_block",
    "stein_kernel_diagonal",
    "median_heuristic",
]

#: Names accepted by ``kernel=`` in the KSD functions.
STEIN_KERNELS = ("imq", "rbf")


def validate_kernel_args(
    kernel: str, c: Any, beta: Any, bandwidth: Any, kernels: tuple[str, ...] = STEIN_KERNELS
) -> None:
    """Raise ``ValueError`` naming the argument for an invalid kernel choice.

    ``kernels`` are the names the caller accepts: the IMQ kernel (set by ``c`` and
    ``beta``) and one with a ``bandwidth`` (``"rbf"`` for KSD, ``"gaussian"`` for FSSD).
    """
    if kernel not in kernels:
        raise ValueError(f"`kernel` must be one of {kernels}, got {kernel!r}.")
    if kernel == "imq":
        check_imq_parameters(c, beta)
        if bandwidth is not None:
            others = " or ".join(repr(k) for k in kernels if k != "imq")
            raise ValueError(
                f"`bandwidth` applies to the {others} kernel only; the IMQ kernel is set by "
                "`c` and `beta`."
            )
    elif bandwidth is not None:
        if isinstance(bandwidth, (tf.Tensor, tf.Variable)):
            if bandwidth.shape.rank not in (None, 0):
                raise ValueError(f"`bandwidth` must be a scalar, got shape {bandwidth.shape}.")
            if not hasattr(bandwidth, "numpy") or not tf.executing_eagerly():
                return  # a traced value: checked where it is known
            value = bandwidth.numpy().item()
        else:
            value = bandwidth
        b = np.asarray(value, dtype=float)
        if b.ndim != 0 or not np.isfinite(b) or b <= 0:
            raise ValueError(f"`bandwidth` must be a finite scalar > 0, got {value!r}.")


def _products(x: tf.Tensor, y: tf.Tensor, sx: tf.Tensor, sy: tf.Tensor):
    """``XYᵀ, XS_Yᵀ, S_XYᵀ, S_XS_Yᵀ`` from one stacked matrix product."""
    b = tf.shape(x)[0]
    m = tf.shape(y)[0]
    p = tf.matmul(tf.concat([x, sx], 0), tf.concat([y, sy], 0), transpose_b=True)
    return p[:b, :m], p[:b, m:], p[b:, :m], p[b:, m:]


def stein_kernel_block(
    x: tf.Tensor,
    y: tf.Tensor,
    sx: tf.Tensor,
    sy: tf.Tensor,
    kernel: str,
    c: Any,
    beta: Any,
    bandwidth: Any,
) -> tf.Tensor:
    """The ``[b, m]`` matrix ``k_π(x_i, y_j)`` by matrix products.

    The building block of the KSD functions, which validate the kernel arguments and
    apply their defaults first: every argument is required here.

    Args:
      x: samples ``[b, d]``.
      y: samples ``[m, d]``.
      sx: scores at ``x``, ``[b, d]``.
      sy: scores at ``y``, ``[m, d]``.
      kernel: ``"imq"`` or ``"rbf"``.
      c: IMQ scale ``c > 0`` (used by ``"imq"``).
      beta: IMQ exponent ``β ∈ (−1, 0)`` (used by ``"imq"``).
      bandwidth: RBF length scale ``h`` (used by ``"rbf"``).

    Returns:
      ``[b, m]`` tensor of Stein-kernel values (equation in the module docstring).
    """
    dtype = x.dtype
    d = tf.cast(tf.shape(x)[-1], dtype)
    xy, xsy, sxy, sxsy = _products(x, y, sx, sy)
    nx = tf.reduce_sum(x * x, -1)[:, None]
    ny = tf.reduce_sum(y * y, -1)[None, :]
    # ‖r‖² by the norm expansion can round slightly below zero.
    r2 = tf.maximum(nx + ny - 2.0 * xy, 0.0)
    sxr = tf.reduce_sum(sx * x, -1)[:, None] - sxy  # s_xᵀ(x − y)
    syr = xsy - tf.reduce_sum(sy * y, -1)[None, :]  # s_yᵀ(x − y)
    if kernel == "imq":
        c2 = as_dtype(c, dtype) ** 2
        be = as_dtype(beta, dtype)
        base = c2 + r2
        bb = tf.pow(base, be)
        bb1 = bb / base
        bb2 = bb1 / base
        return (
            sxsy * bb
            - 2.0 * be * bb1 * (sxr - syr)
            - 2.0 * d * be * bb1
            - 4.0 * be * (be - 1.0) * r2 * bb2
        )
    if kernel == "rbf":
        if bandwidth is None:
            raise ValueError("`bandwidth` is required for the RBF Stein kernel block.")
        h2 = as_dtype(bandwidth, dtype) ** 2
        k = tf.exp(-r2 / (2.0 * h2))
        return k * (sxsy + (sxr - syr) / h2 + d / h2 - r2 / (h2 * h2))
    raise ValueError(f"`kernel` must be one of {STEIN_KERNELS}, got {kernel!r}.")


def stein_kernel_diagonal(
    s: tf.Tensor, kernel: str = "imq", c: Any = 1.0, beta: Any = -0.5, bandwidth: Any = None
) -> tf.Tensor:
    """``k_π(x_i, x_i)`` in closed form (depends on the score only).

    IMQ: ``‖s‖² c^{2β} − 2dβ c^{2(β−1)}``; RBF: ``‖s‖² + d/h²``.
    """
    dtype = s.dtype
    d = tf.cast(tf.shape(s)[-1], dtype)
    ss = tf.reduce_sum(s * s, -1)
    if kernel == "imq":
        cc = as_dtype(c, dtype)
        be = as_dtype(beta, dtype)
        return ss * cc ** (2.0 * be) - 2.0 * d * be * cc ** (2.0 * (be - 1.0))
    h2 = as_dtype(bandwidth, dtype) ** 2
    return ss + d / h2


def stein_kernel_matrix(
    samples: Any,
    scores: Any,
    kernel: str = "imq",
    c: Any = 1.0,
    beta: Any = -0.5,
    bandwidth: Any = None,
) -> tf.Tensor:
    """The full ``[n, n]`` Stein-kernel Gram matrix (small ``n`` only: O(n²) memory).

    Args:
      samples: tensor ``[n, d]`` or list of parts ``[n, ...]``.
      scores: ``∇ log π`` at ``samples``, same structure and shapes.
      kernel: ``"imq"`` or ``"rbf"``. Default value: ``"imq"``.
      c: IMQ scale. Default value: ``1.``.
      beta: IMQ exponent. Default value: ``-0.5``.
      bandwidth: RBF length scale ``h``; ``None`` = median heuristic.
        Default value: ``None``.
    """
    from tfp_sgmcmc.internal.stein_inputs import flatten_samples_and_scores

    validate_kernel_args(kernel, c, beta, bandwidth)
    x, s = flatten_samples_and_scores(samples, scores)
    if kernel == "rbf" and bandwidth is None:
        bandwidth = median_heuristic(x)
    return stein_kernel_block(x, x, s, s, kernel, c, beta, bandwidth)


def median_heuristic(
    x: tf.Tensor, max_points: int = 1000, num_valid: Any = None
) -> tf.Tensor:
    """Median pairwise Euclidean distance of (at most ``max_points``) rows of ``x``.

    Rows are taken evenly spaced (deterministic) when ``n > max_points``; pairs
    ``i < j`` only; an even number of pairs takes the midpoint of the two middle
    distances. This is the RBF length-scale default of Liu, Lee & Jordan
    (2016) and Jitkrittum et al. (2017) (``med``; the Gaussian width ``σ² = med²``).
    The subsample is centred before the distances are formed, so that float32
    samples far from the origin keep their distances. Fewer than two rows, or
    all rows equal, give ``1``.

    Args:
      x: ``[n, d]`` samples.
      max_points: subsample size bound (an int ``≥ 2``). Default value: ``1000``.
      num_valid: only the first ``num_valid`` rows of ``x`` count (a scalar
        tensor; the others are ignored, as in a partly filled buffer).
        Default value: ``None`` (all rows).
    """
    x = tf.convert_to_tensor(x)
    max_points = int(max_points)
    if max_points < 2:
        raise ValueError(f"`max_points` must be an int >= 2, got {max_points!r}.")
    if tf.executing_eagerly():
        if num_valid is not None:
            num_valid = tf.convert_to_tensor(num_valid, tf.int32)
        return _median_graph(x, max_points, num_valid)
    return _median_impl(x, max_points, num_valid)


def _median_impl(x: tf.Tensor, max_points: int, num_valid: Any) -> tf.Tensor:
    if x.shape[0] is None:  # (also when the eager entry point's trace relaxed the shape)
        if num_valid is not None:
            x = x[: tf.maximum(tf.cast(num_valid, tf.int32), 0)]
        return _median_dynamic(x, max_points)
    cap = int(x.shape[0])
    k = tf.constant(cap, tf.int32) if num_valid is None else tf.cast(num_valid, tf.int32)
    k = tf.clip_by_value(k, 0, cap)
    # Static slots for the subsample; slot j < m holds row round(j (k-1)/(m-1)), as
    # np.linspace(0, k - 1, m) rounded half to even (tf.round does the same).
    big_m = max(min(cap, max_points), 1)
    m = tf.minimum(k, big_m)
    step = tf.cast(k - 1, tf.float64) / tf.cast(tf.maximum(m - 1, 1), tf.float64)
    slots = tf.range(big_m)
    idx = tf.cast(tf.round(tf.cast(slots, tf.float64) * step), tf.int32)
    idx = tf.minimum(idx, cap - 1)
    valid = slots < m
    z = tf.gather(x, idx)
    # Centre on the subsample's mean: distances are translation invariant, and
    # the Gram form below loses them in float32 far from the origin otherwise.
    wv = tf.cast(valid, z.dtype)
    z = z - tf.reduce_sum(z * wv[:, None], 0) / tf.maximum(tf.reduce_sum(wv), 1.0)
    iu, ju = np.triu_indices(big_m, k=1)
    if big_m <= 200:
        diff = tf.gather(z, iu) - tf.gather(z, ju)
        vals = tf.reduce_sum(diff * diff, -1)
    else:
        sq = tf.reduce_sum(z * z, -1)
        d2 = sq[:, None] + sq[None, :] - 2.0 * tf.matmul(z, z, transpose_b=True)
        vals = tf.maximum(tf.gather_nd(d2, np.stack([iu, ju], -1)), 0.0)
    # Pairs with an ignored row sort last; the median is taken over the first P.
    pair_ok = tf.logical_and(tf.gather(valid, iu), tf.gather(valid, ju))
    vals = tf.sort(tf.where(pair_ok, vals, tf.constant(np.inf, vals.dtype)))
    return _sorted_median(vals, m * (m - 1) // 2)


def _median_dynamic(x: tf.Tensor, max_points: int) -> tf.Tensor:
    """The same for a number of rows unknown until run time (not under XLA)."""
    n = tf.shape(x)[0]
    m = tf.minimum(n, max_points)
    idx = tf.cast(
        tf.round(tf.linspace(tf.constant(0.0, tf.float64), tf.cast(n - 1, tf.float64), m)),
        tf.int32,
    )
    z = tf.gather(x, idx)
    z = z - tf.reduce_mean(z, 0)
    sq = tf.reduce_sum(z * z, -1)
    d2 = tf.maximum(sq[:, None] + sq[None, :] - 2.0 * tf.matmul(z, z, transpose_b=True), 0.0)
    upper = tf.linalg.band_part(tf.ones_like(d2), 0, -1) - tf.linalg.band_part(
        tf.ones_like(d2), 0, 0
    )
    vals = tf.sort(tf.boolean_mask(d2, upper > 0))
    return _sorted_median(vals, tf.size(vals))


def _sorted_median(vals: tf.Tensor, num_pairs: tf.Tensor) -> tf.Tensor:
    """``sqrt`` of the median of the first ``num_pairs`` of the sorted squared
    distances ``vals`` (the midpoint of the two middle ones for an even count)."""
    lo = tf.maximum((num_pairs - 1) // 2, 0)
    hi = tf.maximum(num_pairs // 2, 0)
    safe = tf.concat([vals, tf.ones([1], vals.dtype)], 0)  # indexable when empty
    med = tf.sqrt(0.5 * (tf.gather(safe, lo) + tf.gather(safe, hi)))
    # No pair, or all rows equal, would give inf or 0: fall back to 1.
    ok = tf.logical_and(num_pairs > 0, med > 0)
    return tf.where(ok, med, tf.ones_like(med))


_median_graph = tf.function(_median_impl, reduce_retracing=True)  # one trace per (shape, m)
