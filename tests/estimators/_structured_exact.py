"""Exact stationary mean/covariance of discretised (S-, Sd-)SGLD on a Gaussian posterior.

Posterior ``N(μ, Λ^{-1})`` with ``Λ = L + P`` (likelihood precision ``L`` from
full-batch data, prior precision ``P``), ``b = Aᵀy/σ²``. One step of SGLD (ε form,
temperature T) on a structured energy with K independent masks ``r_k`` (groups
``gid``), scale ``c`` and history draws ``θ̃_k`` (every group its own time index):

```none
θ' = θ + ε[−Pθ + c Σ_k R_k (b − L(R_k θ + (I − R_k) θ̃_k))] + √(2εT) ξ
```

with ``R_k = diag(r_k[gid])``. If the history is a sample of the chain's own
stationary law (mean m, covariance Σ) drawn independently per group (so
``Cov θ̃ = Σ`` restricted to within-group blocks) and independently of θ, the
augmented second moment ``S = E[z zᵀ]``, ``z = [θ; 1]``, obeys a fixed-point
equation we iterate to convergence. Plain SGLD: one all-ones mask, c = 1.
S-SGLD: K = M one-hot masks, c = 1. Sd-SGLD (Bernoulli ρ): K i.i.d. masks, c = 1/(Kρ).
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["exact_moments", "plain_spec", "s_spec", "sd_bernoulli_spec"]


def plain_spec(num_groups):
    return [(np.array([1.0]), np.ones((1, num_groups)))], 1.0


def s_spec(num_groups):
    eye = np.eye(num_groups)
    return [(np.array([1.0]), eye[i : i + 1]) for i in range(num_groups)], 1.0


def sd_bernoulli_spec(num_groups, keep_prob, num_masks):
    pats = np.array(list(itertools.product([0.0, 1.0], repeat=num_groups)))
    probs = np.prod(np.where(pats == 1.0, keep_prob, 1.0 - keep_prob), axis=1)
    return [(probs, pats)] * num_masks, 1.0 / (num_masks * keep_prob)


def exact_moments(L, b, P, eps, gid, spec, temperature=1.0, tol=1e-14, max_iter=500_000):
    """Returns (mean, covariance) of the stationary law of the discretised chain."""
    masks, c = spec
    d = len(b)
    gid = np.asarray(gid)
    same = (gid[:, None] == gid[None, :]).astype(float)
    eye = np.eye(d)
    # Per mask slot k: arrays over patterns of X (d×d), v (d), W (d×d).
    slots = []
    for probs, pats in masks:
        Rs = np.stack([np.diag(p[gid]) for p in pats])
        X = -eps * c * np.einsum("pij,jk,pkl->pil", Rs, L, Rs)
        v = eps * c * np.einsum("pij,j->pi", Rs, b)
        W = eps * c * np.einsum("pij,jk,pkl->pil", Rs, L, eye[None] - Rs)
        slots.append((probs, X, v, W))
    T0 = np.zeros((d + 1, d + 1))
    T0[:d, :d] = eye - eps * P
    T0[d, d] = 1.0
    noise = np.zeros((d + 1, d + 1))
    noise[:d, :d] = 2 * eps * temperature * eye
    mu = np.linalg.solve(L + P, b)
    S = np.zeros((d + 1, d + 1))
    S[:d, :d] = np.linalg.inv(L + P) + np.outer(mu, mu)
    S[:d, d] = S[d, :d] = mu
    S[d, d] = 1.0
    for _ in range(max_iter):
        m = S[:d, d]
        cov = S[:d, :d] - np.outer(m, m)
        ct = cov * same
        ED_tot = np.zeros_like(S)
        extra = np.zeros_like(S)
        for probs, X, v, W in slots:
            Dbar = np.zeros((len(probs), d + 1, d + 1))
            Dbar[:, :d, :d] = X
            Dbar[:, :d, d] = v - W @ m
            ED = np.einsum("p,pij->ij", probs, Dbar)
            EDSD = np.einsum("p,pij,jk,plk->il", probs, Dbar, S, Dbar)
            EDSD[:d, :d] += np.einsum("p,pij,jk,plk->il", probs, W, ct, W)
            ED_tot += ED
            extra += EDSD - ED @ S @ ED.T
        T = T0 + ED_tot
        S_new = T @ S @ T.T + extra + noise
        if np.max(np.abs(S_new - S)) < tol * max(1.0, np.max(np.abs(S))):
            S = S_new
            break
        S = S_new
    else:  # pragma: no cover
        raise RuntimeError("exact_moments did not converge")
    m = S[:d, d]
    return m, S[:d, :d] - np.outer(m, m)
