"""Ground-truth posterior of Bayesian PMF on the synthetic MovieLens-shaped data, by HMC.

Writes ``pmf_synthetic.json` in the package's `models/ground_truth` directory`: the posterior mean
and marginal standard deviation of every one of the 52,580 parameters (in the
sampled, unconstrained parametrisation ``[U, V, μ_U, log λ_U, μ_V, log λ_V]``),
their Monte-Carlo standard errors, ESS and R-hat (with summaries), the
acceptance rate, step size, the exact command, versions, seeds and times.

Method: TFP's ``HamiltonianMonteCarlo`` (Metropolis-corrected, full batch of
the 80,000 training ratings, float64), on the whitened parameter ``z`` with
``θ = θ̂ + s ⊙ z``, where ``θ̂`` is the MAP (L-BFGS from
:func:`tfp_sgmcmc.find_map`) and ``s_k = (−∂²log π/∂θ_k²)^{−1/2}`` at ``θ̂``,
the exact diagonal of the Hessian:

```none
U_ik:     α Σ_{j: (i,j) rated} V_jk² + λ_U,k         (and alike for V_jk)
μ_W,k:    (n_W + 1) λ_W,k
log λ_W,k: λ_W,k [ ½ Σ_r (W_rk − μ_W,k)² + ½ (μ_W,k − μ0)² + b0 ]
```

The map is linear with a constant Jacobian, so the law of ``θ`` is exactly
the posterior; the diagonal whitening lets HMC move every coordinate on one
step size. The step size is adapted by dual averaging during the warm-up,
then frozen; the draws run in chunks until ``--max-minutes`` is used up
(the paper's NUTS run took ~6 hours; this is the CPU-scale version, its
ESS is stored so the reader can judge it). Like any MCMC run on PMF it
explores one mode of the posterior (the latent space's symmetries are not
crossed), as the paper's NUTS reference does.

Usage::

    python models/make_pmf_ground_truth.py --chains 2 --warmup 300 --max-minutes 40
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

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.models import pmf as pm  # noqa: E402

__all__ = ["hessian_diagonal", "run"]


def hessian_diagonal(prob: pm.PMF, state: list[np.ndarray]) -> list[np.ndarray]:
    """The exact diagonal of ``−∇² log π`` at ``state`` (unconstrained parametrisation)."""
    u, v, mu_u, z_u, mu_v, z_v = state
    users, items, _ = prob.arrays("train")
    lam_u, lam_v = np.exp(z_u), np.exp(z_v)
    hu = np.zeros_like(u)
    np.add.at(hu, users, pm.ALPHA * v[items] ** 2)
    hv = np.zeros_like(v)
    np.add.at(hv, items, pm.ALPHA * u[users] ** 2)
    out = [hu + lam_u, hv + lam_v]
    for w, mu, lam in ((u, mu_u, lam_u), (v, mu_v, lam_v)):
        n = w.shape[0]
        s = 0.5 * np.sum((w - mu) ** 2, axis=0) + 0.5 * (mu - pm.MU0) ** 2 + pm.B0
        out += [(n + 1) * lam, lam * s]
    return [out[0], out[1], out[2], out[3], out[4], out[5]]


def _ess(flat: np.ndarray) -> np.ndarray:
    """Multi-chain ESS of ``flat`` ``[draws, chains, k]`` (TFP's estimator)."""
    return tfp.mcmc.effective_sample_size(tf.constant(flat), cross_chain_dims=1).numpy()


def _column_stats(flat: np.ndarray, block: int = 512) -> dict[str, np.ndarray]:
    """Mean, sd, MCSE of the sd, ESS and R-hat of every column of ``flat`` ``[draws, chains, k]``.

    Computed ``block`` columns at a time: the FFT autocorrelation pads the draws to
    a power of two in complex128, so all 33,640 columns of ``V`` over 13,000 draws
    at once need tens of GB; a block of 512 needs about 0.3 GB.
    """
    draws, chains, k = flat.shape
    out: dict[str, list[np.ndarray]] = {n: [] for n in ("mean", "std", "mcse_std", "ess", "rhat")}
    for j in range(0, k, block):
        x = np.ascontiguousarray(flat[..., j : j + block])
        pooled = x.reshape(draws * chains, -1)
        mean, std = pooled.mean(0), pooled.std(0, ddof=1)
        sq = (x - mean) ** 2
        # delta method: sd(σ̂) ≈ sd((θ − μ)²) / (√ESS((θ − μ)²) · 2σ)
        mcse = sq.reshape(draws * chains, -1).std(0, ddof=1) / np.sqrt(_ess(sq)) / (2.0 * std)
        rhat = (
            tfp.mcmc.potential_scale_reduction(tf.constant(x), independent_chain_ndims=1).numpy()
            if chains > 1
            else np.full(x.shape[-1], np.nan)
        )
        for name, v in zip(out, (mean, std, mcse, _ess(x), rhat)):
            out[name].append(v)
    return {n: np.concatenate(v) for n, v in out.items()}


def _summary(x: np.ndarray) -> dict[str, float]:
    return {"min": float(np.min(x)), "median": float(np.median(x)), "max": float(np.max(x))}


def run(
    chains: int,
    warmup: int,
    max_minutes: float,
    leapfrog: int,
    seed: int,
    data_seed: int,
    split_seed: int,
    chunk: int,
    out: str | None,
) -> dict:
    t0 = time.time()
    prob = pm.pmf(synthetic=True, data_seed=data_seed, split_seed=split_seed, dtype=np.float64)
    est = prob.estimator(prob.num_train)  # unconstrained state; `est.estimator` holds the data
    m = sg.find_map(est, prob.init_state(seed=seed), method="lbfgs", num_steps=1000)
    theta_map = [p.numpy() for p in m.position]
    scale = [h**-0.5 for h in hessian_diagonal(prob, theta_map)]
    t_map = time.time() - t0
    mu = [tf.constant(p) for p in theta_map]
    sc = [tf.constant(s) for s in scale]

    def target(*z):  # z parts: [chains, *shape]
        theta = [m_ + s_ * z_ for m_, s_, z_ in zip(mu, sc, z)]
        total = 0.0
        for batch in est.estimator.data.full_batches(None):
            total += tf.reduce_sum(pm.log_likelihood(theta, batch), axis=-1)
        return total + pm.log_prior(theta)

    hmc = tfp.mcmc.HamiltonianMonteCarlo(target, step_size=0.05, num_leapfrog_steps=leapfrog)
    adaptive = tfp.mcmc.DualAveragingStepSizeAdaptation(
        hmc, num_adaptation_steps=int(0.8 * warmup), target_accept_prob=0.75
    )

    def trace(_, r):
        return r.inner_results.log_accept_ratio

    @tf.function(jit_compile=True)
    def warm(init, seed):
        return tfp.mcmc.sample_chain(
            1,
            init,
            kernel=adaptive,
            num_burnin_steps=warmup - 1,
            trace_fn=trace,
            seed=seed,
            return_final_kernel_results=True,
        )

    @tf.function(jit_compile=True)
    def draw(init, seed, step):
        kernel = tfp.mcmc.HamiltonianMonteCarlo(target, step_size=step, num_leapfrog_steps=leapfrog)
        return tfp.mcmc.sample_chain(
            chunk, init, kernel=kernel, seed=seed, trace_fn=lambda _, r: r.log_accept_ratio
        )

    rng = np.random.default_rng(seed)
    init = [tf.constant(rng.standard_normal((chains,) + p.shape) * 0.5) for p in theta_map]
    t1 = time.time()
    w = warm(init, tf.constant([seed, 0], tf.int32))
    state = [s[-1] for s in w.all_states]
    step = tf.reduce_mean(w.final_kernel_results.new_step_size)
    t_warm = time.time() - t1
    draws: list[list[np.ndarray | None]] = []
    accs = []
    t2 = time.time()
    k = 0
    while True:
        res = draw(state, tf.constant([seed, k + 1], tf.int32), step)
        samples, log_acc = res.all_states, res.trace
        state = [s[-1] for s in samples]
        draws.append([s.numpy() for s in samples])
        accs.append(np.exp(np.minimum(log_acc.numpy(), 0.0)))
        k += 1
        print(
            f"chunk {k}: {k * chunk} draws/chain, {time.time() - t2:.0f} s, "
            f"accept {accs[-1].mean():.3f}",
            file=sys.stderr,
            flush=True,
        )
        if time.time() - t2 + (time.time() - t2) / k > 60 * max_minutes:
            break
    t_draw = time.time() - t2
    num_draws = sum(d[0].shape[0] for d in draws)
    result_parts = {}
    all_ess, all_rhat = [], []
    for i, name in enumerate(pm.PARAM_NAMES):
        # One part at a time, releasing its chunks as it goes: all draws of all parts in
        # float64 are several GB, and copies of them ran out of memory.
        z = np.concatenate([d[i] for d in draws], 0)  # [draws, chains, *shape]
        for d in draws:
            d[i] = None
        th = theta_map[i] + scale[i] * z
        del z
        stats = _column_stats(th.reshape(th.shape[0], chains, -1))
        shape = list(th.shape[2:])
        del th
        all_ess.append(stats["ess"])
        all_rhat.append(stats["rhat"])
        result_parts[name] = {
            "shape": shape,
            "mean": np.round(stats["mean"], 6).tolist(),
            "std": np.round(stats["std"], 6).tolist(),
            "mcse_std": np.round(stats["mcse_std"], 6).tolist(),
            "ess_min": float(stats["ess"].min()),
            "ess_median": float(np.median(stats["ess"])),
            "rhat_max": float(np.nanmax(stats["rhat"])) if chains > 1 else None,
        }
    ess_all = np.concatenate(all_ess)
    rhat_all = np.concatenate(all_rhat)
    std_all = np.concatenate([np.asarray(result_parts[n]["std"]) for n in pm.PARAM_NAMES])
    mcse_all = np.concatenate([np.asarray(result_parts[n]["mcse_std"]) for n in pm.PARAM_NAMES])
    result = {
        "model": "pmf (tfp_sgmcmc/models/pmf.py), tau = (alpha, mu0, a0, b0) = (3, 0, 4, 5), "
        "d = 20",
        "data": "synthetic_ratings(seed=data_seed): 943 users, 1682 items, 100000 ratings",
        "num_ratings": int(prob.data.num_ratings),
        "num_train": int(prob.num_train),
        "data_seed": int(data_seed),
        "split_seed": int(split_seed),
        "parametrisation": "unconstrained: " + ", ".join(pm.PARAM_NAMES),
        "sampler": "tfp.mcmc.HamiltonianMonteCarlo, full batch, float64, diagonal whitening by "
        "the exact Hessian diagonal at the L-BFGS MAP; dual-averaging step size "
        "during warm-up, then frozen",
        "chains": chains,
        "warmup": warmup,
        "draws_per_chain": int(num_draws),
        "num_leapfrog_steps": leapfrog,
        "step_size": float(step.numpy()),
        "mean_accept_prob": float(np.mean(np.concatenate(accs))),
        "sampler_seed": seed,
        "ess": _summary(ess_all),
        "rhat": _summary(rhat_all) if chains > 1 else None,
        "fraction_rhat_above_1.05": float(np.mean(rhat_all > 1.05)) if chains > 1 else None,
        "relative_mcse_of_std_norm": float(np.linalg.norm(mcse_all) / np.linalg.norm(std_all)),
        "parts": result_parts,
        "map_seconds": t_map,
        "warmup_seconds": t_warm,
        "sampling_seconds": t_draw,
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
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f)
        os.replace(tmp, out)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument(
        "--max-minutes", type=float, default=40.0, help="wall-clock bound of the post-warm-up draws"
    )
    ap.add_argument("--leapfrog", type=int, default=10)
    ap.add_argument("--chunk", type=int, default=25, help="draws per compiled call")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-seed", type=int, default=0)
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument(
        "--out",
        default=os.path.join(
            os.path.dirname(__file__),
            "..",
            "tfp_sgmcmc",
            "models",
            "ground_truth",
            "pmf_synthetic.json",
        ),
    )
    a = ap.parse_args()
    res = run(
        a.chains,
        a.warmup,
        a.max_minutes,
        a.leapfrog,
        a.seed,
        a.data_seed,
        a.split_seed,
        a.chunk,
        a.out,
    )
    keys = (
        "draws_per_chain",
        "step_size",
        "mean_accept_prob",
        "ess",
        "rhat",
        "relative_mcse_of_std_norm",
        "sampling_seconds",
    )
    print(json.dumps({k: res[k] for k in keys}, indent=1))


if __name__ == "__main__":
    main()
