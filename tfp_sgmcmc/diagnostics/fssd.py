r"""Finite-set Stein discrepancy (FSSD) at given test locations.

For test locations ``v_1..v_J`` and a base kernel ``k``, the Stein feature of
a sample is ``ξ(x, v) = s(x) k(x, v) + ∇_x k(x, v) ∈ R^d`` and
``τ(x) = vec_j ξ(x, v_j) / √(dJ) ∈ R^{dJ}``. Then ``FSSD² = ‖E τ(x)‖²`` and the
unbiased linear-time estimator is

``FSSD²_U = (‖Σ_i τ_i‖² − Σ_i ‖τ_i‖²) / (n(n − 1))``  (may be negative),

which needs only ``(n, Σ τ_i, Σ ‖τ_i‖²)``: O(J·d) memory, so it streams
([`FSSDReducer`][tfp_sgmcmc.diagnostics.FSSDReducer]). Kernels: Gaussian
``exp(−‖x − v‖²/(2σ²))`` (``σ`` = ``bandwidth``, Jitkrittum's ``gwidth = σ²``)
and IMQ ``(c² + ‖x − v‖²)^β``. ``docs/algorithms.md#fssd``.

Choosing the locations (and the Gaussian width) by optimisation is
[`fssd_opt`][tfp_sgmcmc.diagnostics.fssd_opt.fssd_opt] (its own module).

**Preconditioned FSSD** (``preconditioner=``; default ``None``, the unit metric).
With ``Σ = L Lᵀ`` the statistic is taken of the whitened samples
``w_i = L⁻¹(x_i − x̄)``, whitened scores ``s_{w,i} = Lᵀ s_i`` and whitened
locations ``L⁻¹(v_j − x̄)`` (the locations are given in the original coordinates):
the FSSD of the target pushed through the whitening map, with the diffusion Stein
operator of constant matrix ``M``, ``M Mᵀ = Σ`` (Gorham et al. 2019). It is
invariant to affine reparametrisation when ``Σ`` and the locations transform with
the samples. See [`tfp_sgmcmc.diagnostics.metric`][tfp_sgmcmc.diagnostics.metric].

#### References

1. W. Jitkrittum, W. Xu, Z. Szabó, K. Fukumizu, A. Gretton. A linear-time
   kernel goodness-of-fit test. NeurIPS 2017.
2. K. Chwialkowski, H. Strathmann, A. Gretton. A kernel test of goodness of
   fit. ICML 2016.
3. J. Gorham, A. B. Duncan, S. J. Vollmer, L. Mackey. Measuring sample quality
   with diffusions. Annals of Applied Probability 29(5), 2019.
4. M. Riabiz, W. Y. Chen, J. Cockayne, P. Swietach, S. A. Niederer, L. Mackey,
   C. J. Oates. Optimal thinning of MCMC output. JRSS Series B 84(4), 2022.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.diagnostics.metric import (
    check_preconditioner,
    warn_if_degenerate,
    whitening_map,
)
from tfp_sgmcmc.diagnostics.stein_kernels import median_heuristic, validate_kernel_args
from tfp_sgmcmc.internal.stein_inputs import (
    as_dtype,
    check_finite_eager,
    check_finite_result,
    flatten_parts,
    flatten_samples_and_scores,
)
from tfp_sgmcmc.internal.util import is_list_like

__all__ = [
    "FSSD_KERNELS",
    "fssd",
    "fssd_features",
    "fssd_statistic_from_sums",
    "validate_fssd_kernel",
]

FSSD_KERNELS = ("gaussian", "imq")


def validate_fssd_kernel(kernel: str, bandwidth: Any, c: Any, beta: Any) -> None:
    """Raise ``ValueError`` naming the argument for an invalid kernel choice."""
    validate_kernel_args(kernel, c, beta, bandwidth, kernels=FSSD_KERNELS)


def fssd_features(
    x: tf.Tensor,
    s: tf.Tensor,
    locations: tf.Tensor,
    kernel: str = "gaussian",
    bandwidth: Any = 1.0,
    c: Any = 1.0,
    beta: Any = -0.5,
) -> tf.Tensor:
    """Stein features ``τ(x)`` as ``[..., J, d]`` (already divided by ``√(dJ)``).

    Gaussian: ``ξ = k (s − (x − v)/σ²)``, ``k = exp(−‖x − v‖²/(2σ²))``;
    IMQ: ``ξ = s B^β + 2β B^{β−1}(x − v)``, ``B = c² + ‖x − v‖²``.

    Args:
      x: samples ``[..., d]`` (any leading dims: samples and/or chains).
      s: scores ``[..., d]``.
      locations: ``[J, d]``.
      kernel: ``"gaussian"`` or ``"imq"``. Default value: ``"gaussian"``.
      bandwidth: Gaussian ``σ``. Default value: ``1.``.
      c: IMQ scale. Default value: ``1.``.
      beta: IMQ exponent. Default value: ``-0.5``.
    """
    dtype = x.dtype
    v = tf.cast(locations, dtype)
    j = tf.cast(tf.shape(v)[0], dtype)
    d = tf.cast(tf.shape(v)[1], dtype)
    diff = x[..., None, :] - v  # [..., J, d]
    r2 = tf.reduce_sum(diff * diff, -1, keepdims=True)
    if kernel == "gaussian":
        sig2 = as_dtype(bandwidth, dtype) ** 2
        k = tf.exp(-r2 / (2.0 * sig2))
        xi = k * (s[..., None, :] - diff / sig2)
    else:
        be = as_dtype(beta, dtype)
        base = as_dtype(c, dtype) ** 2 + r2
        kb = tf.pow(base, be)
        xi = s[..., None, :] * kb + 2.0 * be * (kb / base) * diff
    return xi / tf.sqrt(d * j)


def fssd_statistic_from_sums(n: tf.Tensor, sum_tau: tf.Tensor, sum_sq: tf.Tensor) -> tf.Tensor:
    """``(‖Σ τ‖² − Σ ‖τ‖²) / (n(n − 1))`` from the streaming sums.

    ``sum_tau`` is ``[..., J, d]``; the two trailing axes are reduced.
    """
    sq = tf.reduce_sum(sum_tau * sum_tau, axis=[-2, -1])
    n = tf.cast(n, sq.dtype)
    return (sq - sum_sq) / (n * (n - 1.0))


def _sums(
    x: tf.Tensor, s: tf.Tensor, v: tf.Tensor, kernel: str, bandwidth: Any, c: Any, beta: Any,
    chunk_size: int,
) -> tuple[tf.Tensor, tf.Tensor]:
    """``Σ τ_i`` (float64 ``[J, d]``) and ``Σ‖τ_i‖²`` in chunks of ``chunk_size`` rows."""
    n = x.shape[0]
    acc = tf.float64
    jd = tf.shape(v)
    sum_tau = tf.zeros(jd, acc)
    sum_sq = tf.constant(0.0, acc)
    for start in range(0, n, chunk_size):
        t = tf.cast(
            fssd_features(x[start:start + chunk_size], s[start:start + chunk_size], v, kernel,
                          bandwidth, c, beta),
            acc,
        )
        sum_tau += tf.reduce_sum(t, 0)
        sum_sq += tf.reduce_sum(t * t)
    return sum_tau, sum_sq


def _sums_dynamic(
    x: tf.Tensor, s: tf.Tensor, v: tf.Tensor, kernel: str, bandwidth: Any, c: Any, beta: Any,
    chunk_size: int,
) -> tuple[tf.Tensor, tf.Tensor]:
    """``_sums`` for a number of rows known at run time only (a while loop over chunks)."""
    n = tf.shape(x)[0]
    acc = tf.float64

    def body(start, sum_tau, sum_sq):
        stop = tf.minimum(start + chunk_size, n)
        t = tf.cast(
            fssd_features(x[start:stop], s[start:stop], v, kernel, bandwidth, c, beta), acc
        )
        return start + chunk_size, sum_tau + tf.reduce_sum(t, 0), sum_sq + tf.reduce_sum(t * t)

    _, sum_tau, sum_sq = tf.while_loop(
        lambda start, *_: start < n, body,
        [tf.constant(0), tf.zeros(tf.shape(v), acc), tf.constant(0.0, acc)],
    )
    return sum_tau, sum_sq


# Eager calls run the chunk loop as one graph (per-op dispatch dominated at small d).
_sums_graph = tf.function(_sums)


def fssd(
    samples: Any,
    scores: Any,
    locations: Any,
    kernel: str = "gaussian",
    bandwidth: Any = None,
    c: float = 1.0,
    beta: float = -0.5,
    chunk_size: int = 4096,
    name: str | None = None,
    *,
    preconditioner: Any = None,
) -> tf.Tensor:
    """Unbiased linear-time ``FSSD²_U`` of ``samples`` at fixed ``locations``.

    ``FSSD²_U = (‖Σ_i τ_i‖² − Σ_i ‖τ_i‖²)/(n(n−1))`` with
    ``τ(x) = vec_j [s(x) k(x, v_j) + ∇_x k(x, v_j)] / √(dJ)`` [1, 2].

    With a ``preconditioner`` ``Σ = L Lᵀ`` the same statistic is taken of
    ``w_i = L⁻¹(x_i − x̄)``, ``s_{w,i} = Lᵀ s_i`` and the locations
    ``L⁻¹(v_j − x̄)`` [3, 4] (module docstring); ``bandwidth`` and ``c`` are then in
    whitened units and the median heuristic runs on the whitened samples.

    Args:
      samples: tensor ``[n, d]`` or list of parts ``[n, ...]``.
      scores: ``∇ log π`` at ``samples``, same structure/shapes/dtype.
      locations: test locations ``[J, d]`` (flattened like the samples) or a
        list of parts ``[J, ...]`` matching ``samples``.
      kernel: ``"gaussian"`` or ``"imq"``. Default value: ``"gaussian"``.
      bandwidth: Gaussian ``σ`` (``k = exp(−‖x−v‖²/(2σ²))``); ``None`` = median
        pairwise distance of the samples. Must be ``None`` for IMQ.
        Default value: ``None``.
      c: IMQ scale ``c > 0``. Default value: ``1.``.
      beta: IMQ exponent ``β ∈ (−1, 0)``. Default value: ``-0.5``.
      chunk_size: rows per feature chunk (memory O(chunk·J·d)). Default value: ``4096``.
      name: name scope. Default value: ``None``.
      preconditioner: the metric ``Σ`` (keyword only): ``None`` (unit metric);
        ``"sample"`` (the samples' covariance: dense up to ``d = 100``, the
        per-coordinate variances above); ``"curvature"`` (the diagonal Gaussian
        fitted to the scores, see
        [`tfp_sgmcmc.diagnostics.metric`][tfp_sgmcmc.diagnostics.metric]);
        ``"auto"``; a ``[d]`` array of standard deviations; or
        a ``[d, d]`` symmetric positive-definite covariance, in the flattened
        coordinates of ``samples``. With ``"sample"``,
        samples with a zero-variance coordinate give ``+inf`` and, eagerly, a
        ``RuntimeWarning`` naming the coordinates. Default value: ``None``.

    Returns:
      Scalar ``FSSD²_U`` in the samples' dtype (accumulated in float64).

    Raises:
      ValueError: bad ``kernel``/``bandwidth``/``c``/``beta``/``preconditioner``,
        mismatched ``samples``/``scores``/``locations``, ``n < 2``, ``J < 1``,
        non-finite values. (A number of samples known only at run time, in a traced
        function, gives NaN for ``n < 2`` instead.)

    #### References

    1. W. Jitkrittum et al. A linear-time kernel goodness-of-fit test. NeurIPS 2017.
    2. K. Chwialkowski, H. Strathmann, A. Gretton. A kernel test of goodness of
       fit. ICML 2016.
    3. J. Gorham, A. B. Duncan, S. J. Vollmer, L. Mackey. Measuring sample
       quality with diffusions. Annals of Applied Probability, 2019.
    4. M. Riabiz et al. Optimal thinning of MCMC output. JRSS Series B, 2022.
    """
    validate_fssd_kernel(kernel, bandwidth, c, beta)
    metric = check_preconditioner(preconditioner)
    if not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"`chunk_size` must be a positive int, got {chunk_size!r}.")
    with tf.name_scope(name or "fssd"):
        x, s = flatten_samples_and_scores(samples, scores)
        v = _flat_locations(locations, x)
        n = x.shape[0]
        if n is not None and n < 2:
            raise ValueError(f"`samples` must hold at least 2 samples, got {n}.")
        for arr, nm in ((x, "samples"), (s, "scores"), (v, "locations")):
            check_finite_eager(arr, nm)
        metric = check_preconditioner(metric, x.shape[-1])
        wmap = None
        if metric is not None:
            # One map for samples and locations: the locations are given in the
            # samples' original coordinates.
            wmap = whitening_map(x, metric, scores=s)
            x, s, v = wmap.samples(x), wmap.scores(s), wmap.samples(v)
        if kernel == "gaussian" and bandwidth is None:
            bandwidth = median_heuristic(x)
        bw = None if bandwidth is None else as_dtype(bandwidth, x.dtype)
        args = (x, s, v, kernel, bw, float(c), float(beta), int(chunk_size))
        if n is None:  # known at run time only (a traced function without a static n)
            sum_tau, sum_sq = _sums_dynamic(*args)
            n_run = tf.shape(x)[0]
            value = tf.cast(fssd_statistic_from_sums(n_run, sum_tau, sum_sq), x.dtype)
            # Fewer than 2 samples: NaN, as the static check cannot run.
            value = tf.where(n_run >= 2, value, tf.constant(np.nan, x.dtype))
        else:
            sums = _sums_graph if tf.executing_eagerly() else _sums
            sum_tau, sum_sq = sums(*args)
            value = tf.cast(fssd_statistic_from_sums(n, sum_tau, sum_sq), x.dtype)
        value = check_finite_result(value, "FSSD")
        if wmap is not None:
            warn_if_degenerate(wmap, "FSSD")
            value = tf.where(wmap.degenerate, tf.constant(np.inf, value.dtype), value)
        return value


def _flat_locations(locations: Any, x: tf.Tensor) -> tf.Tensor:
    if not is_list_like(locations):
        rank = getattr(locations, "shape", np.shape(locations))
        rank = tf.TensorShape(rank).rank
        if rank is not None and rank < 2 and x.shape.rank == 2 and x.shape[1] != 1:
            raise ValueError(
                "`locations` must be [J, d] (one location is [1, d]), got shape "
                f"{tf.TensorShape(getattr(locations, 'shape', np.shape(locations)))}."
            )
    v = flatten_parts(locations, "locations")
    if v.dtype != x.dtype:
        v = tf.cast(v, x.dtype)
    if v.shape.rank != 2 or v.shape[0] == 0:
        raise ValueError(f"`locations` must be [J, d] with J >= 1, got shape {v.shape}.")
    if v.shape[1] is not None and x.shape[1] is not None and v.shape[1] != x.shape[1]:
        raise ValueError(
            f"`locations` must have the samples' flattened dimension {x.shape[1]}, "
            f"got {v.shape[1]}."
        )
    return v
