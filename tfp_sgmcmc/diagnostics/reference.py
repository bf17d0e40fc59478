r"""A reference value for the KSD: the KSD of exact-ish samples of the same size.

A kernel Stein discrepancy has no absolute scale: it depends on the dimension,
the posterior's curvature and, as a V-statistic, on the number of samples
``M`` (for exact i.i.d. samples ``E[KSD²] = E[k_p(x, x)] / M``). A value only
means something beside the value the same statistic takes on samples known to
be right.
[`laplace_ksd_reference`][tfp_sgmcmc.diagnostics.laplace_ksd_reference]
draws ``M`` i.i.d. samples from the Laplace approximation at the MAP,

```none
θ̂ = argmax log π(θ),   H = −∇² log π(θ̂),   θ_m ~ N(θ̂, H⁻¹)   (m = 1..M),
```

and returns their KSD with full-data scores. For a Gaussian posterior these
are exact posterior samples; otherwise the reference is that of the best
Gaussian around the mode (a lower bound on what a good sampler of a skewed
posterior reaches, since the Laplace samples are themselves slightly off). How
to read it: a sampler's KSD within a small factor (≈ 1-2×) of the reference is
as close to the posterior as ``M`` exact samples can show; several times the
reference is a biased or unmixed run (``docs/diagnostics.md``). Thinned MCMC
draws are autocorrelated, which raises their KSD a little above an i.i.d.
sample of the same size.

The Hessian is the Jacobian of the full-data score (``d`` reverse-mode passes
over the data), so the reference is limited to ``d ≤ max_dim`` parameters.

#### References

[1]: Jackson Gorham and Lester Mackey. Measuring sample quality with kernels.
     In _ICML_, 2017.
[2]: Luke Tierney and Joseph B. Kadane. Accurate approximations for posterior
     moments and marginal densities. _JASA_, 81(393), 1986 (Laplace).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.diagnostics.ksd import kernel_stein_discrepancy

__all__ = ["KSDReference", "laplace_ksd_reference", "full_data_scores"]


@dataclasses.dataclass
class KSDReference:
    """The KSD of ``num_samples`` i.i.d. draws of the Laplace approximation.

    Attributes:
      ksd: the reference KSD.
      num_samples: ``M``.
      map_state: the MAP (list of parts, no chain dimensions).
      laplace_sd: the Laplace standard deviations, flattened over parameters.
    """

    ksd: float
    num_samples: int
    map_state: list[np.ndarray]
    laplace_sd: np.ndarray


def full_data_scores(estimator: Any, parts: list[np.ndarray], block: int = 64) -> list[np.ndarray]:
    """Full-data scores ``∇ log π`` of ``parts`` (``[n, *event]`` each), in blocks of rows."""
    single = len(parts) == 1

    @tf.function(autograph=False, reduce_retracing=True)
    def score(xs: list[tf.Tensor]) -> list[tf.Tensor]:
        out = estimator.full_log_prob_and_gradient(xs[0] if single else list(xs))
        return out.grads_target_log_prob

    n = parts[0].shape[0]
    out: list[list[np.ndarray]] = [[] for _ in parts]
    for start in range(0, n, block):
        blk = [p[start : start + block] for p in parts]
        k = blk[0].shape[0]
        if k < block:  # pad so one trace serves every block
            blk = [np.concatenate([x, np.repeat(x[-1:], block - k, 0)]) for x in blk]
        for i, g in enumerate(score([tf.constant(x) for x in blk])):
            out[i].append(np.asarray(g)[:k])
    return [np.concatenate(o) for o in out]


def laplace_ksd_reference(
    estimator: Any,
    initial_state: list[np.ndarray],
    num_samples: int,
    seed: int = 0,
    max_dim: int = 500,
) -> KSDReference | None:
    """The KSD of ``num_samples`` draws from the Laplace approximation (module docstring).

    Args:
      estimator: the model's estimator (full-data log-density and score).
      initial_state: start of the MAP search, list of parts without chain
        dimensions (e.g. the posterior mean of the draws).
      num_samples: ``M``, the size of the sample whose KSD is being judged.
      seed: NumPy seed of the Laplace draws. Default value: ``0``.
      max_dim: largest number of parameters for which the ``d × d`` Hessian is
        formed. Default value: ``500``.

    Returns:
      A [`KSDReference`][tfp_sgmcmc.diagnostics.KSDReference], or ``None``
      when ``d > max_dim`` or the Hessian at the MAP is not negative definite
      (no Laplace approximation).

    Raises:
      ValueError: ``num_samples < 2``.
    """
    from tfp_sgmcmc.estimators import find_map

    if not isinstance(num_samples, int) or num_samples < 2:
        raise ValueError(f"`num_samples` must be an int >= 2, got {num_samples!r}.")
    parts0 = [np.asarray(p) for p in initial_state]
    shapes = [p.shape for p in parts0]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    dim = sum(sizes)
    if dim > max_dim:
        return None
    dtype = tf.as_dtype(parts0[0].dtype)
    single = len(parts0) == 1
    start = [tf.constant(p) for p in parts0]
    result = find_map(estimator, start[0] if single else start)
    map_parts = [np.asarray(p) for p in (result.position if not single else [result.position])]
    flat_map = np.concatenate([p.ravel() for p in map_parts])

    def unflatten(v: tf.Tensor) -> list[tf.Tensor]:
        pieces = tf.split(v, sizes)
        return [tf.reshape(x, s) for x, s in zip(pieces, shapes)]

    @tf.function(autograph=False)
    def hessian(v: tf.Tensor) -> tf.Tensor:
        # persistent=True: a non-persistent tape under tf.function differentiates the
        # score of `tfp.math.value_and_gradient` wrongly through lgamma/lbeta terms.
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(v)
            parts = unflatten(v)
            grads = estimator.full_log_prob_and_gradient(parts[0] if single else parts)
            g = tf.concat([tf.reshape(x, [-1]) for x in grads.grads_target_log_prob], 0)
        return tape.jacobian(g, v, experimental_use_pfor=False)

    h = np.asarray(hessian(tf.constant(flat_map, dtype)), np.float64)
    h = 0.5 * (h + h.T)
    try:
        chol = np.linalg.cholesky(-h)  # -H = L Lᵀ, Laplace covariance (-H)⁻¹
    except np.linalg.LinAlgError:
        return None
    z = np.random.default_rng(seed).standard_normal((num_samples, dim))
    # θ = θ̂ + L⁻ᵀ z has covariance (L Lᵀ)⁻¹ = (-H)⁻¹.
    draws = flat_map + np.linalg.solve(chol.T, z.T).T
    cov_diag = np.sum(np.linalg.inv(chol) ** 2, axis=0)
    offsets = np.cumsum([0] + sizes)
    parts = [
        draws[:, offsets[i] : offsets[i + 1]]
        .reshape((num_samples,) + shapes[i])
        .astype(parts0[i].dtype)
        for i in range(len(shapes))
    ]
    scores = full_data_scores(estimator, parts)
    ksd = kernel_stein_discrepancy(parts[0] if single else parts, scores[0] if single else scores)
    return KSDReference(
        ksd=float(ksd),
        num_samples=num_samples,
        map_state=map_parts,
        laplace_sd=np.sqrt(cov_diag),
    )
