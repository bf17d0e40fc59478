"""Ground-truth posterior of the §14.1 logistic regression by full-batch HMC.

Writes ``tfp_sgmcmc/models/ground_truth/logistic_regression.json`` with the posterior mean
and marginal standard deviation of θ, their Monte-Carlo standard errors (from
the effective sample size, ``tfp.mcmc.effective_sample_size`` pooled over
chains), R-hat, the exact command, library versions and seeds.

Method (docs/algorithms.md#exp-logistic: the paper uses NUTS; any exact MCMC serves): TFP's
``HamiltonianMonteCarlo`` (``--leapfrog`` steps, Metropolis-corrected) on the
whole 800,000-row training set in float64, on the
whitened parameter ``z`` with ``θ = θ̂ + L z``, where ``θ̂`` is the MAP (Newton's
method) and ``L L ᵀ`` the inverse Hessian of ``−log π`` at ``θ̂``. The map is
linear with a constant Jacobian, so the law of ``θ`` is exactly the posterior;
whitening only makes HMC mix in a few leapfrog steps (NUTS was tried
first and was too slow to compile and run on the 2 shared cores). The step size is adapted
by dual averaging during the warm-up, then frozen.

Usage::

    python models/make_ground_truth.py --chains 4 --warmup 500 --draws 2500
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

from tfp_sgmcmc.models.logistic_regression import PRIOR_VARIANCE, logistic_regression  # noqa: E402

__all__ = ["newton_map", "run"]


def newton_map(x: np.ndarray, y: np.ndarray, iters: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """MAP of the logistic posterior with prior N(0, 10 I) and the Hessian of −log π there."""
    d = x.shape[1]
    theta = np.zeros(d)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(x @ theta)))
        grad = x.T @ (y - p) - theta / PRIOR_VARIANCE
        hess = (x * (p * (1 - p))[:, None]).T @ x + np.eye(d) / PRIOR_VARIANCE
        step = np.linalg.solve(hess, grad)
        theta = theta + step
        if np.max(np.abs(step)) < 1e-12:
            break
    p = 1.0 / (1.0 + np.exp(-(x @ theta)))
    hess = (x * (p * (1 - p))[:, None]).T @ x + np.eye(d) / PRIOR_VARIANCE
    return theta, hess


def run(
    chains: int,
    warmup: int,
    draws: int,
    seed: int,
    data_seed: int,
    out: str,
    num_leapfrog_steps: int = 3,
) -> dict:
    problem = logistic_regression(seed=data_seed, dtype=np.float64)
    x, y = problem.x_train, problem.y_train
    t0 = time.time()
    theta_map, hess = newton_map(x, y)
    chol = np.linalg.cholesky(np.linalg.inv(hess))
    xt = tf.constant(x)
    yt = tf.constant(y)
    mu = tf.constant(theta_map)
    lt = tf.constant(chol)

    def target(z):  # z: [chains, d]
        theta = mu + tf.einsum("ij,cj->ci", lt, z)
        logits = tf.einsum("nd,cd->cn", xt, theta)
        ll = tf.reduce_sum(yt * logits - tf.nn.softplus(logits), axis=-1)
        return ll - 0.5 * tf.reduce_sum(theta**2, -1) / PRIOR_VARIANCE

    hmc = tfp.mcmc.HamiltonianMonteCarlo(
        target, step_size=0.8, num_leapfrog_steps=num_leapfrog_steps
    )
    adaptive = tfp.mcmc.DualAveragingStepSizeAdaptation(
        hmc, num_adaptation_steps=int(0.8 * warmup), target_accept_prob=0.8
    )

    @tf.function(jit_compile=True)
    def sample(init, seed):
        return tfp.mcmc.sample_chain(
            draws,
            init,
            kernel=adaptive,
            num_burnin_steps=warmup,
            trace_fn=lambda _, r: (r.inner_results.log_accept_ratio, r.new_step_size),
            seed=seed,
        )

    rng = np.random.default_rng(seed)
    init = tf.constant(rng.standard_normal((chains, x.shape[1])))
    t1 = time.time()
    z, (log_acc, step_sizes) = sample(init, tf.constant([seed, 0], tf.int32))
    z = z.numpy()  # [draws, chains, d]
    t_sample = time.time() - t1
    theta = theta_map + np.einsum("ij,scj->sci", chol, z)
    ess = tfp.mcmc.effective_sample_size(
        tf.constant(theta), cross_chain_dims=1
    ).numpy()  # [d]
    ess_sq = tfp.mcmc.effective_sample_size(
        tf.constant((theta - theta.reshape(-1, theta.shape[-1]).mean(0)) ** 2), cross_chain_dims=1
    ).numpy()
    rhat = tfp.mcmc.potential_scale_reduction(tf.constant(theta), independent_chain_ndims=1).numpy()
    flat = theta.reshape(-1, theta.shape[-1])
    mean = flat.mean(0)
    std = flat.std(0, ddof=1)
    # MCSE of the mean: σ/√ESS. MCSE of σ: delta method on the variance,
    # se(σ) ≈ se(σ²)/(2σ), se(σ²) = sd((θ−μ)²)/√ESS((θ−μ)²).
    mcse_mean = std / np.sqrt(ess)
    sq = (flat - mean) ** 2
    mcse_std = sq.std(0, ddof=1) / np.sqrt(ess_sq) / (2.0 * std)
    result = {
        "model": "logistic_regression (docs/algorithms.md#exp-logistic)",
        "num_examples": int(problem.num_examples),
        "num_train": int(problem.num_train),
        "seed": int(data_seed),
        "sampler": "tfp.mcmc.HamiltonianMonteCarlo + DualAveragingStepSizeAdaptation (warm-up), "
        "full batch, float64, whitened by the Laplace covariance at the Newton MAP",
        "chains": chains,
        "warmup": warmup,
        "draws_per_chain": draws,
        "sampler_seed": seed,
        "mean": mean.tolist(),
        "std": std.tolist(),
        "mcse_mean": mcse_mean.tolist(),
        "mcse_std": mcse_std.tolist(),
        "ess": ess.tolist(),
        "ess_squared_deviation": ess_sq.tolist(),
        "rhat": rhat.tolist(),
        "map": theta_map.tolist(),
        "laplace_std": np.sqrt(np.diag(np.linalg.inv(hess))).tolist(),
        "theta_true": problem.theta_true.tolist(),
        "mean_accept_prob": float(np.mean(np.exp(np.minimum(log_acc.numpy(), 0.0)))),
        "num_leapfrog_steps": num_leapfrog_steps,
        "step_size": float(np.mean(step_sizes.numpy()[-1])),
        "sampling_seconds": t_sample,
        "total_seconds": time.time() - t0,
        "command": "python " + " ".join(sys.argv),
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "tensorflow": tf.__version__,
            "tensorflow_probability": tfp.__version__,
        },
    }
    if out:
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=2500)
    parser.add_argument("--leapfrog", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data-seed", type=int, default=42)
    parser.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(__file__), "ground_truth", "logistic_regression.json"),
    )
    args = parser.parse_args()
    res = run(
        args.chains, args.warmup, args.draws, args.seed, args.data_seed, args.out, args.leapfrog
    )
    keys = ("std", "mcse_std", "ess", "rhat", "step_size", "sampling_seconds")
    print(json.dumps({k: res[k] for k in keys}, indent=1))


if __name__ == "__main__":
    main()
