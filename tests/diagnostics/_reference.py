"""Brute-force float64 NumPy references for the Stein statistics (tests only).

Written term by term from the equations (``docs/algorithms.md#ksd``, ``#fssd``), with
explicit pairwise differences ``r = x_i − x_j`` — deliberately unlike the
matrix-product code under test.
"""

from __future__ import annotations

import numpy as np

__all__ = ["stein_matrix_ref", "ksd_ref", "fssd_tau_ref", "fssd_ref"]


def stein_matrix_ref(x, s, kernel="imq", c=1.0, beta=-0.5, h=None):
    x = np.asarray(x, np.float64)
    s = np.asarray(s, np.float64)
    n, d = x.shape
    k = np.empty((n, n))
    for i in range(n):
        r = x[i] - x  # [n, d]
        r2 = np.sum(r * r, -1)
        sxsy = s @ s[i]
        if kernel == "imq":
            base = c * c + r2
            grad_y = -2 * beta * base[:, None] ** (beta - 1) * r  # ∇_y k
            grad_x = -grad_y
            div = -2 * d * beta * base ** (beta - 1)
            div = div - 4 * beta * (beta - 1) * r2 * base ** (beta - 2)
            kb = base**beta
        else:
            kb = np.exp(-r2 / (2 * h * h))
            grad_x = -r / (h * h) * kb[:, None]
            grad_y = -grad_x
            div = (d / h**2 - r2 / h**4) * kb
        k[i] = sxsy * kb + np.sum(s[i] * grad_y, -1) + np.sum(s * grad_x, -1) + div
    return k


def ksd_ref(x, s, statistic="v", **kw):
    k = stein_matrix_ref(x, s, **kw)
    n = k.shape[0]
    if statistic == "v":
        return np.sqrt(k.sum()) / n
    return (k.sum() - np.trace(k)) / (n * (n - 1))


def fssd_tau_ref(x, s, v, kernel="gaussian", sigma=1.0, c=1.0, beta=-0.5):
    x = np.asarray(x, np.float64)
    s = np.asarray(s, np.float64)
    v = np.asarray(v, np.float64)
    n, d = x.shape
    j = v.shape[0]
    tau = np.zeros((n, j, d))
    for a in range(j):
        diff = x - v[a]
        r2 = np.sum(diff**2, -1)[:, None]
        if kernel == "gaussian":
            k = np.exp(-r2 / (2 * sigma**2))
            tau[:, a] = s * k - diff / sigma**2 * k
        else:
            k = (c * c + r2) ** beta
            tau[:, a] = s * k + 2 * beta * (c * c + r2) ** (beta - 1) * diff
    return tau.reshape(n, j * d) / np.sqrt(d * j)


def fssd_ref(x, s, v, **kw):
    tau = fssd_tau_ref(x, s, v, **kw)
    n = tau.shape[0]
    total = 0.0
    for i in range(n):  # explicit Σ_{i≠j} τ_iᵀτ_j
        total += tau[i] @ (tau.sum(0) - tau[i])
    return total / (n * (n - 1))
