"""Chain-quality metrics: ESS, integrated autocorrelation time, relative std error.

* **ESS**: delegated to ``tfp.mcmc.effective_sample_size``
  (``N / [1 + 2 Σ_{k≥1} (1 − k/N) R_k]``, truncated at the first negative
  ``R_k``) — the estimator the structured-SGMCMC paper says it used.
* **IAC** ``τ_f = 1 + 2 Σ_{τ≥1} ρ_f(τ)`` with ``ρ̂(τ) = ĉ(τ)/ĉ(0)``,
  ``ĉ(τ) = (1/(N−τ)) Σ_{n=1}^{N−τ} (f_n − μ)(f_{n+τ} − μ)`` computed by FFT
  zero-padded to ≥ 2N (no circular wrap), truncated by Sokal's automatic
  window: the smallest ``M`` with ``M ≥ c·τ̂(M)``, ``c = 5``
  (``docs/algorithms.md#metrics``; the paper gives neither window nor aggregation, so
  we report per parameter and their mean).
* **Relative std error** ``ξ(σ̂) = ‖σ̂ − σ_ref‖₂ / ‖σ_ref‖₂`` over the vector
  of marginal standard deviations (MAMBA tables show ×100).

#### References

1. A. D. Sokal. Monte Carlo methods in statistical mechanics: foundations and
   new algorithms. In *Functional Integration*, Springer, 1997.
2. A. Alexos, A. J. Boyd, S. Mandt. Structured stochastic gradient MCMC. ICML 2022.
3. J. Coullon, L. South, C. Nemeth. Efficient and generalizable tuning
   strategies for stochastic gradient MCMC. Statistics and Computing, 2023.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.internal.quiet import quiet_real_part_cast
from tfp_sgmcmc.internal.stein_inputs import check_finite_eager, check_finite_result
from tfp_sgmcmc.internal.util import check_positive, is_list_like

__all__ = [
    "effective_sample_size",
    "integrated_autocorrelation_time",
    "IntegratedAutocorrelationTime",
    "relative_std_error",
]


def _check_samples(samples: Any) -> list[tf.Tensor]:
    parts = [tf.convert_to_tensor(p) for p in (samples if is_list_like(samples) else [samples])]
    for p in parts:
        if p.shape.rank is None or p.shape.rank < 1:
            raise ValueError(f"`samples` must be [n, ...], got shape {p.shape}.")
        if p.shape[0] is not None and p.shape[0] < 2:
            raise ValueError(f"`samples` must hold at least 2 draws, got {p.shape[0]}.")
        check_finite_eager(p, "samples")
    return parts


def effective_sample_size(samples: Any, **kwargs: Any) -> Any:
    """``tfp.mcmc.effective_sample_size`` with input checks (draws on axis 0).

    Args:
      samples: ``[n, ...]`` tensor or list of parts.
      **kwargs: passed through (``filter_threshold``, ``filter_beyond_lag``,
        ``filter_beyond_positive_pairs``, ``cross_chain_dims``, ...).

    Returns:
      ESS with the structure of ``samples`` and shape ``[...]`` (NaN for a
      constant coordinate: its autocorrelation is undefined).

    Raises:
      ValueError: fewer than 2 draws or non-finite values (eager).
    """
    parts = _check_samples(samples)
    if not is_list_like(samples):
        # A single tensor goes to TFP as one: per-part arguments such as a scalar
        # `cross_chain_dims` must keep matching the structure of its input.
        with quiet_real_part_cast():
            return tfp.mcmc.effective_sample_size(parts[0], **kwargs)
    with quiet_real_part_cast():
        return list(tfp.mcmc.effective_sample_size(parts, **kwargs))


class IntegratedAutocorrelationTime(NamedTuple):
    """Result of
    [`integrated_autocorrelation_time`][tfp_sgmcmc.diagnostics.metrics.integrated_autocorrelation_time].

    Attributes:
      per_parameter: ``τ̂`` per coordinate, structure and event shape of the
        samples (NaN for a constant coordinate).
      mean: mean of ``per_parameter`` over all coordinates.
      window: Sokal window ``M`` per coordinate (int32, same structure).
    """

    per_parameter: Any
    mean: tf.Tensor
    window: Any


def _iac_1d(x: tf.Tensor, c: float) -> tuple[tf.Tensor, tf.Tensor]:
    """IAC of every column of ``x`` ``[n, m]`` (float64)."""
    n = tf.shape(x)[0]
    # TFP's FFT estimate, the module docstring's ρ̂: centred, divided by n − τ, over ρ̂(0).
    rho = tf.transpose(tfp.stats.auto_correlation(x, axis=0))  # [m, n]
    tau_m = 1.0 + 2.0 * tf.cumsum(rho[:, 1:], axis=1)  # τ̂(M), M = 1..n-1
    m_vals = tf.cast(tf.range(1, n), tf.float64)
    ok = m_vals[None, :] >= c * tau_m
    any_ok = tf.reduce_any(ok, axis=1)
    first = tf.argmax(tf.cast(ok, tf.int32), axis=1, output_type=tf.int32)
    idx = tf.where(any_ok, first, tf.fill(tf.shape(first), n - 2))
    tau = tf.gather(tau_m, idx, batch_dims=1)
    # Short or anti-correlated series can give τ̂ ≤ 0 (n = 2: τ̂ = 1 + 2ρ̂(1) = −1);
    # floor it at 1/n so n/τ̂ stays a (capped, ≤ n²) positive ESS.
    tau = tf.maximum(tau, 1.0 / tf.cast(n, tf.float64))
    # A constant coordinate has no autocorrelation (ρ̂ is 0/0): NaN, documented.
    varying = tf.math.reduce_variance(x, 0) > 0
    tau = tf.where(varying, tau, tf.constant(float("nan"), tf.float64))
    return tau, idx + 1


def integrated_autocorrelation_time(samples: Any, c: float = 5.0) -> IntegratedAutocorrelationTime:
    """Integrated autocorrelation time per parameter, FFT + Sokal's window.

    ``τ̂ = 1 + 2 Σ_{τ=1}^{M} ρ̂(τ)`` with the smallest ``M ≥ c·τ̂(M)`` (if none,
    ``M = n − 1``); see the module docstring for ``ρ̂``, computed by
    ``tfp.stats.auto_correlation``. ``n / τ̂`` is the corresponding effective
    sample size; ``τ̂`` is floored at ``1/n`` (very short or anti-correlated
    series) and is NaN for a constant coordinate.

    Args:
      samples: ``[n, ...]`` draws (tensor or list of parts); every trailing
        coordinate is its own series.
      c: Sokal's window constant. Default value: ``5.``.

    Returns:
      [`IntegratedAutocorrelationTime`][tfp_sgmcmc.diagnostics.metrics.IntegratedAutocorrelationTime].

    Raises:
      ValueError: ``c <= 0``, fewer than 2 draws, non-finite values (eager).

    #### References

    1. A. D. Sokal. Monte Carlo methods in statistical mechanics. 1997.
    """
    check_positive(c, "c", scalar=True)
    parts = _check_samples(samples)
    taus, windows = [], []
    for p in parts:
        x = tf.reshape(tf.cast(p, tf.float64), [tf.shape(p)[0], -1])
        t, w = _iac_1d(x, float(c))
        taus.append(tf.reshape(t, tf.shape(p)[1:]))
        windows.append(tf.reshape(w, tf.shape(p)[1:]))
    flat = tf.concat([tf.reshape(t, [-1]) for t in taus], 0)
    mean = tf.reduce_mean(flat)
    if is_list_like(samples):
        return IntegratedAutocorrelationTime(taus, mean, windows)
    return IntegratedAutocorrelationTime(taus[0], mean, windows[0])


def relative_std_error(samples_or_std: Any, reference_std: Any) -> tf.Tensor:
    """``ξ(σ̂) = ‖σ̂ − σ_ref‖₂ / ‖σ_ref‖₂`` (MAMBA paper, §5; tables show ×100).

    Args:
      samples_or_std: draws ``[n, ...]`` (one more leading dim than
        ``reference_std``; ``σ̂`` = their standard deviation over axis 0 with
        divisor n, as ``np.std``) or the estimated stds themselves (same shape as
        ``reference_std``). Tensor or list of parts.
      reference_std: reference marginal stds (e.g. from NUTS), same structure.

    Returns:
      Scalar float64 tensor.

    Raises:
      ValueError: shapes incompatible, zero reference, non-finite values (eager).
    """
    est_parts = samples_or_std if is_list_like(samples_or_std) else [samples_or_std]
    ref_parts = reference_std if is_list_like(reference_std) else [reference_std]
    if len(est_parts) != len(ref_parts):
        raise ValueError("`samples_or_std` and `reference_std` must have the same parts.")
    sig, ref = [], []
    for e, r in zip(est_parts, ref_parts):
        e = _as_float64(e, "samples_or_std")
        r = _as_float64(r, "reference_std")
        check_finite_eager(e, "samples_or_std")
        check_finite_eager(r, "reference_std")
        if tf.executing_eagerly() and bool(tf.reduce_any(r < 0)):
            raise ValueError("`reference_std` must be >= 0.")
        if e.shape.rank == r.shape.rank + 1:
            if e.shape[0] is not None and e.shape[0] < 2:
                raise ValueError(f"`samples_or_std` must hold at least 2 draws, got {e.shape[0]}.")
            e = tf.math.reduce_std(e, axis=0)
        if not e.shape.is_compatible_with(r.shape):
            raise ValueError(
                f"`samples_or_std` (std shape {e.shape}) does not match `reference_std` "
                f"(shape {r.shape})."
            )
        sig.append(tf.reshape(e, [-1]))
        ref.append(tf.reshape(r, [-1]))
    sig_v = tf.concat(sig, 0)
    ref_v = tf.concat(ref, 0)
    den = tf.norm(ref_v)
    if tf.executing_eagerly() and float(den) == 0.0:
        raise ValueError("`reference_std` must not be all zeros.")
    return check_finite_result(
        tf.norm(sig_v - ref_v) / den, "relative error", "`samples_or_std`/`reference_std`"
    )


def _as_float64(x: Any, name: str) -> tf.Tensor:
    """``x`` as a float64 tensor; ``TypeError`` naming ``name`` if it is not numeric."""
    try:
        t = tf.convert_to_tensor(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"`{name}` must be numeric, got {x!r}.") from e
    if not (t.dtype.is_floating or t.dtype.is_integer) or t.dtype == tf.bool:
        raise TypeError(f"`{name}` must be numeric, got dtype {t.dtype.name}.")
    return tf.cast(t, tf.float64)
