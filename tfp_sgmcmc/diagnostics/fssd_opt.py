r"""FSSD with optimised test locations (FSSD-opt): two location searches.

[`fssd_opt`][tfp_sgmcmc.diagnostics.fssd_opt.fssd_opt] chooses the locations (and the Gaussian
width) for [`fssd`][tfp_sgmcmc.diagnostics.fssd.fssd] (``docs/algorithms.md#fssd``):

* ``mode="jitkrittum"`` (Jitkrittum et al. 2017, code ``kernel-gof``): split the
  sample 20 % / 80 %; on the 20 % draw J locations from a Gaussian fit
  (``cov + 1e-6 I``), pick ``σ²`` on the grid ``med²·2^{linspace(−3, 3, 5)}``
  by the power criterion ``FSSD²_U / √(σ̂²_H1 + γ)``, ``σ̂²_H1 =
  4[(1/n)Σ_i (τ_iᵀμ̂)² − (μ̂ᵀμ̂)²]``, ``γ = 0.01``, then maximise it over
  ``(√σ², V)`` with L-BFGS-B; report ``FSSD²_U`` on the held-out 80 % with the
  test statistic ``n·FSSD²_U`` and its spectral null p-value.
* ``mode="mamba"`` (Coullon, South & Nemeth 2023, App. C.1.3 and their
  ``tuning/ksd.py``): IMQ (c = 1, β = −½), J = 10 locations drawn
  **independently** from ``N(mean, cov + 1e-10 I)`` of the samples (the
  reference code reused one key, so its J locations coincided), then 100 Adam
  steps (lr 1e-3) ascending ``FSSD²_U`` itself on all samples (no split, no
  variance normalisation); the value is ``FSSD²_U`` at the final locations.

#### References

1. W. Jitkrittum, W. Xu, Z. Szabó, K. Fukumizu, A. Gretton. A linear-time
   kernel goodness-of-fit test. NeurIPS 2017.
2. J. Coullon, L. South, C. Nemeth. Efficient and generalizable tuning
   strategies for stochastic gradient MCMC. Statistics and Computing, 2023.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.diagnostics.fssd import (
    FSSD_KERNELS,
    fssd_features,
)
from tfp_sgmcmc.diagnostics.stein_kernels import median_heuristic
from tfp_sgmcmc.internal.adam import adam_ascent_step, adam_init
from tfp_sgmcmc.internal.stein_inputs import (
    check_finite_eager,
    flatten_samples_and_scores,
)
from tfp_sgmcmc.internal.util import stateless_seed

__all__ = ["FSSDOptResult", "fssd_opt"]


class FSSDOptResult(NamedTuple):
    """Result of [`fssd_opt`][tfp_sgmcmc.diagnostics.fssd_opt.fssd_opt].

    Attributes:
      value: ``FSSD²_U`` at the optimised locations (held-out split for
        ``mode="jitkrittum"``, all samples for ``mode="mamba"``).
      locations: optimised locations ``[J, d]`` (flattened coordinates).
      bandwidth: optimised Gaussian ``σ`` (``None`` for IMQ).
      test_statistic: ``n_test · FSSD²_U`` (Jitkrittum's test statistic).
      p_value: spectral null p-value of ``test_statistic`` (``nan`` when not
        computed: ``mode="mamba"`` or ``d·J > max_null_dim``).
      objective: final value of the optimised objective (power criterion or
        ``FSSD²_U``) on the optimisation data.
      num_train: samples used to optimise.
      num_test: samples used for ``value``.
    """

    value: tf.Tensor
    locations: tf.Tensor
    bandwidth: tf.Tensor | None
    test_statistic: tf.Tensor
    p_value: float
    objective: float
    num_train: int
    num_test: int


def _stat_and_variance(tau: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``FSSD²_U`` and ``σ̂²_H1 = 4[(1/n)Σ(τ_iᵀμ̂)² − (μ̂ᵀμ̂)²]`` of a ``[n, dJ]`` τ."""
    n = tf.cast(tf.shape(tau)[0], tau.dtype)
    mu = tf.reduce_mean(tau, 0)
    st = tf.reduce_sum(tau, 0)
    stat = (tf.reduce_sum(st * st) - tf.reduce_sum(tau * tau)) / (n * (n - 1.0))
    var = 4.0 * (tf.reduce_mean(tf.linalg.matvec(tau, mu) ** 2) - tf.reduce_sum(mu * mu) ** 2)
    return stat, var


def _gaussian_fit_draws(x: tf.Tensor, num: int, jitter: float, seed: Any) -> tf.Tensor:
    """``num`` independent draws from ``N(mean(x), cov(x) + jitter I)`` (float64)."""
    x64 = tf.cast(x, tf.float64)
    n = tf.cast(tf.shape(x64)[0], tf.float64)
    mean = tf.reduce_mean(x64, 0)
    xc = x64 - mean
    cov = tf.matmul(xc, xc, transpose_a=True) / tf.maximum(n - 1.0, 1.0)
    cov += jitter * tf.eye(tf.shape(cov)[0], dtype=tf.float64)
    # Symmetric square root by eigh: robust when n < d makes cov near-singular.
    evals, evecs = tf.linalg.eigh(cov)
    root = evecs * tf.sqrt(tf.maximum(evals, 0.0))[None, :]
    z = tf.random.stateless_normal(
        [num, tf.shape(cov)[0]], seed=tf.cast(seed, tf.int32), dtype=tf.float64, alg="philox"
    )
    return mean + tf.matmul(z, root, transpose_b=True)


def fssd_opt(
    samples: Any,
    scores: Any,
    num_locations: int | None = None,
    mode: str = "jitkrittum",
    kernel: str | None = None,
    seed: Any = (0, 0),
    train_fraction: float = 0.2,
    reg: float = 1e-2,
    max_iter: int = 100,
    num_steps: int = 100,
    learning_rate: float = 1e-3,
    locations_bound_std: float = 10.0,
    num_null_samples: int = 2000,
    max_null_dim: int = 2000,
) -> FSSDOptResult:
    """FSSD with optimised test locations (``mode="jitkrittum"`` or ``"mamba"``).

    See the module docstring for both procedures. Computation runs in float64
    (inputs are cast); the returned ``value`` has the samples' dtype.

    Args:
      samples: tensor ``[n, d]`` or list of parts ``[n, ...]``.
      scores: ``∇ log π`` at ``samples``.
      num_locations: J. Default value: ``None`` (5 for ``"jitkrittum"``,
        10 for ``"mamba"``).
      mode: ``"jitkrittum"`` (split, power criterion, L-BFGS-B on locations
        and Gaussian width) or ``"mamba"`` (IMQ, Adam on FSSD², no split).
        Default value: ``"jitkrittum"``.
      kernel: ``"jitkrittum"`` mode: ``"gaussian"`` (width optimised too) or
        ``"imq"`` (c = 1, β = −½ fixed; locations only); ``"mamba"`` mode:
        ``"imq"`` only. Default value: ``None`` (Gaussian / IMQ).
      seed: stateless seed (an int or a pair; split, location draws, null
        simulation). Default value: ``(0, 0)``.
      train_fraction: share of samples used to optimise (``"jitkrittum"``).
        Default value: ``0.2``.
      reg: γ in the power criterion. Default value: ``1e-2``.
      max_iter: L-BFGS-B iterations. Default value: ``100``.
      num_steps: Adam steps (``"mamba"``). Default value: ``100``.
      learning_rate: Adam learning rate (``"mamba"``). Default value: ``1e-3``.
      locations_bound_std: locations are bounded to the data range ± this many
        per-coordinate standard deviations (``"jitkrittum"``). Default value: ``10.``.
      num_null_samples: draws of the spectral null distribution. Default value: ``2000``.
      max_null_dim: skip the p-value (``nan``) when ``d·J`` exceeds this (the
        eigen-decomposition is O((dJ)³)). Default value: ``2000``.

    Returns:
      [`FSSDOptResult`][tfp_sgmcmc.diagnostics.fssd_opt.FSSDOptResult].

    Raises:
      ValueError: bad ``mode``, ``kernel``, ``num_locations`` (< 1),
        ``train_fraction``, too few samples, mismatched or non-finite inputs.

    #### References

    1. W. Jitkrittum et al. A linear-time kernel goodness-of-fit test. NeurIPS 2017.
    2. J. Coullon, L. South, C. Nemeth. Efficient and generalizable tuning
       strategies for stochastic gradient MCMC. Statistics and Computing, 2023.
    """
    if mode not in ("jitkrittum", "mamba"):
        raise ValueError(f"`mode` must be 'jitkrittum' or 'mamba', got {mode!r}.")
    if kernel is None:
        kernel = "gaussian" if mode == "jitkrittum" else "imq"
    if kernel not in FSSD_KERNELS or (mode == "mamba" and kernel != "imq"):
        raise ValueError(f"`kernel` {kernel!r} is not available for mode={mode!r}.")
    if num_locations is None:
        num_locations = 5 if mode == "jitkrittum" else 10
    if not isinstance(num_locations, (int, np.integer)) or num_locations < 1:
        raise ValueError(f"`num_locations` must be an int >= 1, got {num_locations!r}.")
    if not 0.0 < float(train_fraction) < 1.0:
        raise ValueError(f"`train_fraction` must lie in (0, 1), got {train_fraction!r}.")
    x, s = flatten_samples_and_scores(samples, scores)
    check_finite_eager(x, "samples")
    check_finite_eager(s, "scores")
    out_dtype = x.dtype
    x = tf.cast(x, tf.float64)
    s = tf.cast(s, tf.float64)
    n = int(x.shape[0])
    seed_split, seed_locs, seed_null = tf.unstack(
        tfp.random.split_seed(stateless_seed(seed), n=3, salt="fssd_opt")
    )
    if mode == "mamba":
        if n < 2:
            raise ValueError(f"`samples` must hold at least 2 samples, got {n}.")
        return _fssd_opt_mamba(x, s, num_locations, seed_locs, num_steps, learning_rate,
                               out_dtype)
    n_tr = int(np.floor(train_fraction * n))
    if n_tr < 2 or n - n_tr < 2:
        raise ValueError(
            f"`samples` too small to split: {n} samples give {n_tr} train / {n - n_tr} test."
        )
    perm = tf.random.experimental.stateless_shuffle(tf.range(n), seed=seed_split)
    tr, te = perm[:n_tr], perm[n_tr:]
    x_tr, s_tr, x_te, s_te = (tf.gather(a, i) for a, i in ((x, tr), (s, tr), (x, te), (s, te)))
    v0 = _gaussian_fit_draws(x_tr, num_locations, 1e-6, seed_locs)
    med = float(median_heuristic(x_tr))
    d = int(x.shape[1])

    def criterion(sig, v):
        tau = tf.reshape(fssd_features(x_tr, s_tr, v, kernel, sig), [n_tr, -1])
        stat, var = _stat_and_variance(tau)
        return stat / tf.sqrt(var + reg)

    @tf.function
    def neg_obj_and_grad(params):
        with tf.GradientTape() as tape:
            tape.watch(params)
            if kernel == "gaussian":
                sig, v = params[0], tf.reshape(params[1:], [num_locations, d])
            else:
                sig, v = tf.constant(1.0, tf.float64), tf.reshape(params, [num_locations, d])
            obj = -criterion(sig, v)
        return obj, tape.gradient(obj, params)

    xmin = tf.reduce_min(x_tr, 0).numpy()
    xmax = tf.reduce_max(x_tr, 0).numpy()
    xstd = tf.math.reduce_std(x_tr, 0).numpy()
    v_lo = np.tile(xmin - locations_bound_std * xstd, num_locations)
    v_hi = np.tile(xmax + locations_bound_std * xstd, num_locations)
    v_init = v0.numpy().ravel()
    if kernel == "gaussian":
        grid = med**2 * 2.0 ** np.linspace(-3, 3, 5)
        scores_grid = [float(criterion(tf.constant(np.sqrt(g)), v0)) for g in grid]
        g0 = grid[int(np.nanargmax(scores_grid))]
        gw_lo = max(0.01 * med**2, 1e-3)
        gw_hi = min(100.0 * med**2, 1e5)
        p0 = np.concatenate([[np.sqrt(np.clip(g0, gw_lo, gw_hi))], v_init])
        bounds = [(np.sqrt(gw_lo), np.sqrt(gw_hi))] + list(zip(v_lo, v_hi))
    else:
        p0 = v_init
        bounds = list(zip(v_lo, v_hi))

    from scipy.optimize import minimize  # scipy is a core dependency; imported lazily.

    def fun(p):
        f, g = neg_obj_and_grad(tf.constant(p, tf.float64))
        f, g = float(f), g.numpy()
        if not np.isfinite(f):
            return 1e10, np.zeros_like(p)
        return f, g

    res = minimize(fun, p0, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": int(max_iter), "ftol": 1e-5})
    p = tf.constant(res.x, tf.float64)
    if kernel == "gaussian":
        sig = p[0]
        v = tf.reshape(p[1:], [num_locations, d])
    else:
        sig = None
        v = tf.reshape(p, [num_locations, d])
    n_te = n - n_tr
    tau_te = tf.reshape(fssd_features(x_te, s_te, v, kernel, 1.0 if sig is None else sig),
                        [n_te, -1])
    stat_te, _ = _stat_and_variance(tau_te)
    test_stat = n_te * stat_te
    p_value = float("nan")
    if d * num_locations <= max_null_dim:
        tau_np = tau_te.numpy()
        cov = np.cov(tau_np, rowvar=False).reshape(d * num_locations, d * num_locations)
        lam = np.linalg.eigvalsh(cov)
        z = tf.random.stateless_normal([int(num_null_samples), lam.size], seed=tf.cast(
            seed_null, tf.int32), dtype=tf.float64).numpy()
        sim = (z**2 - 1.0) @ lam
        p_value = float(np.mean(sim > float(test_stat)))
    return FSSDOptResult(
        value=tf.cast(stat_te, out_dtype),
        locations=tf.cast(v, out_dtype),
        bandwidth=None if sig is None else tf.cast(sig, out_dtype),
        test_statistic=tf.cast(test_stat, out_dtype),
        p_value=p_value,
        objective=float(-res.fun),
        num_train=n_tr,
        num_test=n_te,
    )


def _fssd_opt_mamba(x, s, num_locations, seed, num_steps, lr, out_dtype) -> FSSDOptResult:
    n = int(x.shape[0])
    v0 = _gaussian_fit_draws(x, num_locations, 1e-10, seed)
    v, _ = _adam_ascent(x, s, v0, tf.constant(lr, tf.float64), int(num_steps))
    tau = tf.reshape(fssd_features(x, s, v, "imq"), [n, -1])
    stat, _ = _stat_and_variance(tau)
    return FSSDOptResult(
        value=tf.cast(stat, out_dtype),
        locations=tf.cast(v, out_dtype),
        bandwidth=None,
        test_statistic=tf.cast(n * stat, out_dtype),
        p_value=float("nan"),
        objective=float(stat),
        num_train=n,
        num_test=n,
    )


@tf.function(reduce_retracing=True)
def _adam_ascent(x, s, v0, lr, num_steps: int):
    """Adam (β₁ = 0.9, β₂ = 0.999, ε = 1e-8, optax defaults) ascending FSSD²_U in V."""
    n = tf.shape(x)[0]

    def objective(v):
        tau = tf.reshape(fssd_features(x, s, v, "imq"), [n, -1])
        return _stat_and_variance(tau)[0]

    def body(v, adam, _):
        with tf.GradientTape() as tape:
            tape.watch(v)
            f = objective(v)
        (v,), adam = adam_ascent_step([v], [tape.gradient(f, v)], adam, lr)
        return v, adam, f

    v, _, f = tf.while_loop(
        lambda v, adam, _: adam.step < num_steps,
        body,
        (v0, adam_init([v0]), tf.constant(0.0, tf.float64)),
    )
    return v, f
