r"""Windowed adaptation of a whitening preconditioner from the chains' own draws.

A fixed preconditioner ``z = m + L w`` (`WhitenedEstimator`) from the Laplace
approximation is exact for a Gaussian posterior; for a skewed or heavy-tailed one
the draws ``w`` are not unit-scale, so one step size is too small in some
directions and the runaway radius too close in others. As in the warm-up of Stan
and of TFP's ``windowed_adaptive_nuts``, the chains' draws of a burn-in window
estimate the covariance ``S`` of ``w`` and the map is refined to

```none
L ← L C,     C Cᵀ = Ŝ,     w ← C⁻¹ w          (z = m + L w is unchanged)
```

with ``Ŝ`` shrunk towards the identity, the covariance the Laplace fit predicts
(Ledoit & Wolf 2004, with the target ``I``):

```none
Ŝ = α I + (1 − α) S,     α = min(1, β / ‖S − I‖²_F),
β = (n / n_eff) · (1/n²) Σ_k ‖x_k x_kᵀ − S‖²_F
```

``x_k`` the centred draws of the window, ``n`` their number and ``n_eff`` their
effective number (the median over coordinates of TFP's cross-chain ESS), so that
the autocorrelated draws of a short window move the map only as far as they
carry information. A diagonal map (``d`` above the dense limit) adapts the
per-coordinate variances the same way. The window's answer is kept only when it
changes some direction's variance by more than ``tolerance`` (default a factor
``1.5``): a preconditioner that fits needs no change. A window whose chains have
not settled (split R̂ above ``1.1``: its spread is the drift of a burn-in, not the
posterior's) changes nothing, and one window changes a variance by at most a
factor ``max_change`` (default ``4``): on a skewed posterior the overall spread
can be far wider than the curvature on its steep side allows for the same step
size, so the map grows in steps the next window can check. ``docs/algorithms.md#preconditioning``.

#### References

[1]: Olivier Ledoit and Michael Wolf. A well-conditioned estimator for
     large-dimensional covariance matrices. _Journal of Multivariate Analysis_
     88(2), 2004.
[2]: Stan Development Team. _Stan Reference Manual_, "HMC algorithm parameters:
     automatic parameter tuning" (windowed adaptation).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.linalg
import tensorflow_probability as tfp

from tfp_sgmcmc.estimators.whitened import WhitenedEstimator
from tfp_sgmcmc.internal.quiet import quiet_real_part_cast

__all__ = ["WindowAdaptation", "adapt_whitening", "rewhiten", "shrunk_covariance"]


class WindowAdaptation(NamedTuple):
    """What one window changed.

    Attributes:
      changed: whether the map was refined.
      reason: why not, when it was not ("fits", "not settled (split R-hat ...)").
      transform: ``C`` (``[d, d]`` lower triangular, or ``[d]`` for a diagonal
        map), the identity when nothing changed; `rewhiten` maps states to the
        new coordinates, ``w ← C⁻¹ w``.
      variance_range: the smallest and largest eigenvalue (variance) of ``Ŝ``.
      effective_draws: ``n_eff`` of the window.
    """

    changed: bool
    reason: str
    transform: np.ndarray
    variance_range: tuple[float, float]
    effective_draws: float


def shrunk_covariance(x: np.ndarray, effective_draws: float, diagonal: bool = False) -> np.ndarray:
    """``Ŝ`` of centred-or-not draws ``x`` ``[n, d]``, shrunk towards the identity
    (module docstring); ``[d]`` variances when ``diagonal``.

    Raises:
      ValueError: ``x`` is not ``[n, d]`` with ``n ≥ 2``, or not finite.
    """
    x = np.asarray(x, np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or not np.isfinite(x).all():
        raise ValueError(f"`x` must be finite draws [n >= 2, d], got shape {list(x.shape)}.")
    n = x.shape[0]
    xc = x - x.mean(axis=0)
    inflation = n / max(1.0, min(float(effective_draws), float(n)))
    if diagonal:
        s = np.mean(xc * xc, axis=0)
        beta = inflation * np.mean((xc * xc - s) ** 2, axis=0) / n
        delta = (s - 1.0) ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = np.where(delta > 0, np.minimum(1.0, beta / delta), 1.0)
        return alpha + (1.0 - alpha) * s
    s = xc.T @ xc / n
    sq = np.einsum("kd,kd->k", xc, xc)
    beta = inflation * max(0.0, (np.sum(sq**2) / n - np.sum(s * s))) / n
    delta = float(np.sum((s - np.eye(s.shape[0])) ** 2))
    alpha = 1.0 if delta <= 0 else min(1.0, beta / delta)
    return alpha * np.eye(s.shape[0]) + (1.0 - alpha) * s


def _effective_draws(w: np.ndarray) -> float:
    """Median over coordinates of the cross-chain ESS of draws ``[T, C, d]``."""
    with quiet_real_part_cast():
        ess = tfp.mcmc.effective_sample_size(w, cross_chain_dims=1).numpy()
    ess = np.asarray(ess, np.float64)
    ess = ess[np.isfinite(ess)]
    return float(np.median(ess)) if ess.size else 1.0


def _split_rhat(w: np.ndarray) -> float:
    """The largest split R̂ over coordinates of draws ``[T, C, d]``."""
    half = w.shape[0] // 2
    if half < 2:
        return 1.0
    split = np.concatenate([w[:half], w[half : 2 * half]], axis=1)
    with quiet_real_part_cast():
        rhat = tfp.mcmc.potential_scale_reduction(split, independent_chain_ndims=1).numpy()
    rhat = np.asarray(rhat, np.float64)
    return float(np.max(rhat)) if np.isfinite(rhat).all() else math.inf


def adapt_whitening(
    estimator: WhitenedEstimator,
    w: np.ndarray,
    tolerance: float = 1.5,
    max_change: float = 4.0,
) -> WindowAdaptation:
    """Refine ``estimator``'s map in place from a window of whitened draws ``w``
    ``[T, C, d]`` (module docstring), when some variance of ``Ŝ`` lies outside
    ``[1/tolerance, tolerance]``.

    Returns:
      A `WindowAdaptation`: map the chains' current states with ``transform``
      (`WindowAdaptation`) when ``changed``.

    Raises:
      ValueError: ``w`` is not ``[T ≥ 2, C, d]`` with the estimator's ``d``, or
        not finite; ``tolerance ≤ 1``.
    """
    w = np.asarray(w, np.float64)
    d = estimator.dimension
    if w.ndim != 3 or w.shape[0] < 2 or w.shape[-1] != d:
        raise ValueError(f"`w` must be draws [T >= 2, C, {d}], got shape {list(w.shape)}.")
    if not np.isfinite(w).all():
        raise ValueError("`w` must be finite.")
    if not tolerance > 1.0:
        raise ValueError(f"`tolerance` must be > 1, got {tolerance!r}.")
    if not max_change >= tolerance:
        raise ValueError(f"`max_change` must be >= `tolerance`, got {max_change!r}.")
    identity = np.ones(d) if estimator.scale.ndim == 1 else np.eye(d)
    rhat = _split_rhat(w)
    if rhat > 1.1:
        return WindowAdaptation(
            False, f"not settled (split R-hat {rhat:.3g} > 1.1)", identity, (1.0, 1.0), 0.0
        )
    n_eff = _effective_draws(w)
    x = w.reshape(-1, d)
    scale = estimator.scale
    diagonal = scale.ndim == 1
    s_hat = shrunk_covariance(x, n_eff, diagonal=diagonal)
    if diagonal:
        eig = s_hat
    else:
        eig, vec = np.linalg.eigh(s_hat)
    lo, hi = float(np.min(eig)), float(np.max(eig))
    if max(abs(math.log(lo)), abs(math.log(hi))) <= math.log(tolerance):
        return WindowAdaptation(False, "fits", identity, (lo, hi), n_eff)
    eig = np.clip(eig, 1.0 / max_change, max_change)
    if diagonal:
        c = np.sqrt(eig)
        estimator.set_scale(scale * c)
    else:
        c = np.linalg.cholesky((vec * eig) @ vec.T)
        estimator.set_scale(np.tril(scale @ c))
    return WindowAdaptation(True, "", c, (lo, hi), n_eff)


def rewhiten(w: np.ndarray, adaptation: WindowAdaptation) -> np.ndarray:
    """States ``w`` ``[..., d]`` in the coordinates after ``adaptation``: ``C⁻¹ w``."""
    w = np.asarray(w, np.float64)
    c = adaptation.transform
    if c.ndim == 1:
        return w / c
    flat = w.reshape(-1, c.shape[0])
    out = scipy.linalg.solve_triangular(c, flat.T, lower=True).T
    return out.reshape(w.shape)
