"""Statistical helpers shared by every Monte Carlo test (one place, one convention).

A test runs many independent chains, averages a few statistics over time in
each chain, and compares the mean over chains with the exact value under the
stationary law of the discretised chain. The standard error comes from the
spread of the per-chain averages (valid whatever the autocorrelation within a
chain, as long as the chains are independent). Each statistic must lie within
``Z`` standard errors; the power check runs the same comparison against a
perturbed law (e.g. a 10%-off covariance) and requires it to fail.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

__all__ = [
    "Z",
    "chain_moments",
    "gaussian_moment_targets",
    "moment_z_scores",
    "mean_and_se",
    "z_scores",
    "two_sample_z",
    "assert_within",
    "assert_rejects",
]

#: Two-sided Φ⁻¹(0.9995) ≈ 3.29: a 0.1% false-alarm rate per statistic.
Z: float = float(norm.ppf(0.9995))


def chain_moments(samples: np.ndarray, with_mean: bool = True) -> np.ndarray:
    """Per-chain time averages of ``θ₀², θ₀θ₁, θ₁²`` (and ``θ₀, θ₁``).

    Args:
      samples: ``[steps, chains, 2]``.
      with_mean: also average ``θ₀`` and ``θ₁``.

    Returns:
      ``[chains, 3]`` or ``[chains, 5]``.
    """
    x = np.asarray(samples)
    cols = [x[..., 0] ** 2, x[..., 0] * x[..., 1], x[..., 1] ** 2]
    if with_mean:
        cols += [x[..., 0], x[..., 1]]
    return np.stack(cols, -1).mean(0)


def gaussian_moment_targets(cov: np.ndarray, with_mean: bool = True) -> np.ndarray:
    """The values :func:`chain_moments` estimates under ``N(0, cov)``."""
    out = [cov[0, 0], cov[0, 1], cov[1, 1]]
    return np.array(out + [0.0, 0.0] if with_mean else out)


def mean_and_se(per_chain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over independent chains and its standard error (``sd / √chains``)."""
    per_chain = np.asarray(per_chain)
    return per_chain.mean(0), per_chain.std(0, ddof=1) / np.sqrt(per_chain.shape[0])


def z_scores(per_chain: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``(mean − target) / SE`` with the SE from the spread across independent chains.

    Args:
      per_chain: ``[chains, k]`` per-chain estimates.
      target: ``[k]`` exact values.
    """
    mean, se = mean_and_se(per_chain)
    return (mean - np.asarray(target)) / se


def two_sample_z(per_chain: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """z-scores of the difference of two independent sets of per-chain estimates
    (e.g. a sampler against a long NumPy simulation of the same recursion)."""
    a, sa = mean_and_se(per_chain)
    b, sb = mean_and_se(reference)
    return (a - b) / np.hypot(sa, sb)


def moment_z_scores(samples: np.ndarray, cov: np.ndarray, with_mean: bool = True) -> np.ndarray:
    """z-scores of the second moments (and mean) of ``samples`` against ``N(0, cov)``."""
    return z_scores(chain_moments(samples, with_mean), gaussian_moment_targets(cov, with_mean))


def assert_within(z: np.ndarray, z_max: float = Z, what: str = "") -> None:
    """Every |z| below ``z_max``."""
    z = np.asarray(z)
    assert np.all(np.abs(z) < z_max), f"{what} z-scores {np.round(z, 2)} exceed {z_max:.2f}"


def assert_rejects(z: np.ndarray, z_max: float = Z, what: str = "power check") -> None:
    """Power: at least one |z| above ``z_max`` (a perturbed law must be rejected)."""
    z = np.asarray(z)
    assert np.any(np.abs(z) > z_max), f"{what} passed wrongly: z-scores {np.round(z, 2)}"
