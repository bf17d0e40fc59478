"""Reference posterior of Bayesian PMF on the synthetic MovieLens-shaped data.

Writes ``pmf_synthetic.json`` in the package's ``models/ground_truth`` directory: the
posterior mean and standard deviation of the latent prediction ``f_ij = U_iᵀV_j`` of
every test rating (the 20,000 pairs of the 80/20 split, in the order of
``PMF.arrays("test")``), their Monte-Carlo standard errors, ESS and R-hat, the same
diagnostics for a fixed subset of the parameters, the exact command, versions, seeds
and times.

Why predictions and not the 52,580 parameters: the factors are not identified. The
likelihood depends on ``U`` and ``V`` only through ``U Vᵀ``, and with a diagonal prior
whose precisions are nearly equal the posterior is nearly invariant under rotations
and permutations of the latent space, so chains started at the same MAP drift apart
along it (R-hat of the factors in the tens) while agreeing on every prediction. A
per-parameter standard deviation is then a property of how far a run drifted, not of
the posterior; the predictions' standard deviations are (``docs/studies/mamba_pmf.md``).

Two exact (full-batch, unbiased) samplers, every chain started at the same L-BFGS MAP
(:func:`tfp_sgmcmc.find_map`), so that all chains explore the mode the SG samplers
start in (the latent space's sign and permutation symmetries are not crossed, as in
the paper's NUTS reference):

``--method gibbs`` (default)
    The model is conditionally conjugate, so
    :class:`tfp_sgmcmc.models.pmf_gibbs.PMFGibbs` draws the hyperparameters, the user
    rows and the item rows from their exact full conditionals (Salakhutdinov & Mnih
    2008). Each sweep moves whole blocks, which mixes far better than HMC here.

``--method hmc``
    TFP's ``HamiltonianMonteCarlo`` (Metropolis-corrected, float64) on the whitened
    parameter ``z`` with ``θ = θ̂ + s ⊙ z``, where ``s_k = (−∂²log π/∂θ_k²)^{−1/2}`` at
    the MAP ``θ̂`` is the exact Hessian diagonal:

    ```none
    U_ik:     α Σ_{j: (i,j) rated} V_jk² + λ_U,k         (and alike for V_jk)
    μ_W,k:    (n_W + 1) λ_W,k
    log λ_W,k: λ_W,k [ ½ Σ_r (W_rk − μ_W,k)² + ½ (μ_W,k − μ0)² + b0 ]
    ```

    The step size is adapted by dual averaging during the warm-up, then frozen; the
    draws run in chunks until ``--max-minutes`` is used up. On this posterior it
    mixes slowly (``docs/studies/mamba_pmf.md`` gives a 40-minute run's R-hat).

Usage::

    python models/make_pmf_ground_truth.py --chains 4 --burnin 500 --sweeps 3000
    python models/make_pmf_ground_truth.py --method hmc --chains 2 --warmup 300 --max-minutes 40
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Iterator

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.models import pmf as pm  # noqa: E402
from tfp_sgmcmc.models.pmf_gibbs import PMFGibbs  # noqa: E402

__all__ = ["hessian_diagonal", "draw_gibbs", "draw_hmc", "summarise", "run"]


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
        x = np.ascontiguousarray(flat[..., j : j + block], dtype=np.float64)
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


def _problem_and_map(seed: int, data_seed: int, split_seed: int, map_steps: int = 1000):
    prob = pm.pmf(synthetic=True, data_seed=data_seed, split_seed=split_seed, dtype=np.float64)
    est = prob.estimator(prob.num_train)  # unconstrained state; `est.estimator` holds the data
    m = sg.find_map(est, prob.init_state(seed=seed), method="lbfgs", num_steps=map_steps)
    return prob, est, [p.numpy() for p in m.position]


def _progress(done: int, total: int, t_start: float, what: str) -> None:
    elapsed = time.time() - t_start
    rate = done / max(elapsed, 1e-9)
    eta = (total - done) / max(rate, 1e-9)
    print(f"{what} {done}/{total}: {rate:.1f}/s, {elapsed:.0f} s, ETA {eta:.0f} s",
          file=sys.stderr, flush=True)


def draw_gibbs(
    prob: pm.PMF, theta_map: list[np.ndarray], chains: int, burnin: int, sweeps: int,
    seed: int, thin: int, chunk: int, info: dict,
) -> Iterator[list[np.ndarray]]:
    """Gibbs chains from the MAP, in lockstep; yields chunks of kept draws.

    Each chunk is one array ``[k, chains, *shape]`` per part (unconstrained
    parametrisation); ``info`` receives the run's settings and times.
    """
    gibbs = PMFGibbs(prob)
    start = gibbs.to_constrained(theta_map)
    states = [list(start) for _ in range(chains)]
    rngs = [np.random.default_rng([seed, c]) for c in range(chains)]
    t0 = time.time()
    total = burnin + sweeps
    buffer: list[list[list[np.ndarray]]] = []
    for k in range(total):
        states = [gibbs.sweep(th, rng) for th, rng in zip(states, rngs)]
        if not all(np.all(np.isfinite(p)) for th in states for p in th):
            raise FloatingPointError(f"Gibbs sweep {k} produced a non-finite value.")
        if k >= burnin and (k - burnin + 1) % thin == 0:
            buffer.append([gibbs.to_unconstrained(th) for th in states])
        if len(buffer) == chunk or (k == total - 1 and buffer):
            # [k, chains, *shape] per part
            yield [np.stack([np.stack([d[c][i] for c in range(chains)]) for d in buffer])
                   for i in range(len(pm.PARAM_NAMES))]
            buffer = []
        if (k + 1) % 100 == 0:
            _progress(k + 1, total, t0, f"{chains} chains, sweep")
    info.update(
        sampler="blocked Gibbs sampler with exact full conditionals "
        "(tfp_sgmcmc.models.pmf_gibbs.PMFGibbs), float64, every chain from the L-BFGS MAP",
        burnin_sweeps=burnin,
        thin=thin,
        draws_per_chain=sweeps // thin,
        sampling_seconds=time.time() - t0,
    )


def draw_hmc(
    prob: pm.PMF, est, theta_map: list[np.ndarray], chains: int, warmup: int,
    max_minutes: float, leapfrog: int, seed: int, chunk: int, info: dict,
) -> Iterator[list[np.ndarray]]:
    """Whitened HMC chains near the MAP; yields chunks of draws like `draw_gibbs`."""
    scale = [h**-0.5 for h in hessian_diagonal(prob, theta_map)]
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
    accs = []
    t2 = time.time()
    k = 0
    num_draws = 0
    while True:
        res = draw(state, tf.constant([seed, k + 1], tf.int32), step)
        samples, log_acc = res.all_states, res.trace
        state = [s[-1] for s in samples]
        num_draws += int(samples[0].shape[0])
        yield [m_ + s_ * z.numpy() for m_, s_, z in zip(theta_map, scale, samples)]
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
    info.update(
        sampler="tfp.mcmc.HamiltonianMonteCarlo, full batch, float64, diagonal whitening by "
        "the exact Hessian diagonal at the L-BFGS MAP; dual-averaging step size "
        "during warm-up, then frozen",
        warmup=warmup,
        draws_per_chain=num_draws,
        num_leapfrog_steps=leapfrog,
        step_size=float(step.numpy()),
        mean_accept_prob=float(np.mean(np.concatenate(accs))),
        warmup_seconds=t_warm,
        sampling_seconds=time.time() - t2,
    )


#: Rows of U and of V whose parameters are summarised as diagnostics (not as a reference).
DIAGNOSTIC_ROWS = 64


def summarise(prob: pm.PMF, chunks: Iterator[list[np.ndarray]], chains: int) -> dict:
    """Reference statistics of the test predictions, diagnostics of a parameter subset.

    Each chunk's ``f_ij = U_iᵀV_j`` at the test pairs and its parameter subset
    (the first `DIAGNOSTIC_ROWS` rows of ``U`` and ``V``, all hyperparameters)
    are kept in float32 and the chunk released, so memory grows with the
    predictions (20,000 per draw), not with the 52,580 parameters.
    """
    users, items, _ = prob.arrays("test")
    preds, subset = [], []
    for parts in chunks:
        u, v = parts[0], parts[1]  # [k, chains, rows, d]
        preds.append(np.einsum("kcnd,kcnd->kcn", u[:, :, users], v[:, :, items]).astype(np.float32))
        k = u.shape[0]
        subset.append(np.concatenate(
            [u[:, :, :DIAGNOSTIC_ROWS].reshape(k, chains, -1),
             v[:, :, :DIAGNOSTIC_ROWS].reshape(k, chains, -1)]
            + [p.reshape(k, chains, -1) for p in parts[2:]], axis=-1).astype(np.float32))
    f = np.concatenate(preds, 0)
    del preds
    st = _column_stats(f)
    del f
    d = prob.latent_dim
    sub = _column_stats(np.concatenate(subset, 0))
    sizes = [DIAGNOSTIC_ROWS * d, DIAGNOSTIC_ROWS * d, d, d, d, d]
    bounds = np.cumsum([0] + sizes)
    diagnostics = {}
    for name, a, b in zip(pm.PARAM_NAMES, bounds[:-1], bounds[1:]):
        diagnostics[name] = {
            "parameters": int(b - a),
            "ess": _summary(sub["ess"][a:b]),
            "rhat": _summary(sub["rhat"][a:b]) if chains > 1 else None,
        }
    rhat = st["rhat"]
    return {
        "reference": "latent test predictions f_ij = U_i.V_j (centred ratings: add "
        "mean_rating for the rating scale), in the order of PMF.arrays('test')",
        "num_test": int(users.shape[0]),
        "test_predictions": {
            "mean": np.round(st["mean"], 6).tolist(),
            "std": np.round(st["std"], 6).tolist(),
            "mcse_std": np.round(st["mcse_std"], 6).tolist(),
        },
        "ess": _summary(st["ess"]),
        "rhat": _summary(rhat) if chains > 1 else None,
        "fraction_rhat_above_1.05": float(np.mean(rhat > 1.05)) if chains > 1 else None,
        "fraction_rhat_above_1.01": float(np.mean(rhat > 1.01)) if chains > 1 else None,
        "relative_mcse_of_std_norm": float(
            np.linalg.norm(st["mcse_std"]) / np.linalg.norm(st["std"])
        ),
        "parameter_diagnostics": {
            "note": f"the first {DIAGNOSTIC_ROWS} rows of U and V and every hyperparameter; "
            "the factors are not identified (see the script's docstring), so these are "
            "diagnostics, not a reference",
            **diagnostics,
        },
    }


def run(args: argparse.Namespace) -> dict:
    t0 = time.time()
    prob, est, theta_map = _problem_and_map(
        args.seed, args.data_seed, args.split_seed, args.map_steps
    )
    t_map = time.time() - t0
    info: dict = {}
    if args.method == "gibbs":
        chunks = draw_gibbs(
            prob, theta_map, args.chains, args.burnin, args.sweeps, args.seed, args.thin,
            args.chunk, info,
        )
    else:
        chunks = draw_hmc(
            prob, est, theta_map, args.chains, args.warmup, args.max_minutes, args.leapfrog,
            args.seed, args.chunk, info,
        )
    stats = summarise(prob, chunks, args.chains)
    result = {
        "model": "pmf (tfp_sgmcmc/models/pmf.py), tau = (alpha, mu0, a0, b0) = (3, 0, 4, 5), "
        f"d = {prob.latent_dim}",
        "latent_dim": int(prob.latent_dim),  # PMF.ground_truth() compares it
        "data": "synthetic_ratings(seed=data_seed): 943 users, 1682 items, 100000 ratings",
        "num_ratings": int(prob.data.num_ratings),
        "num_train": int(prob.num_train),
        "data_seed": int(args.data_seed),
        "split_seed": int(args.split_seed),
        "parametrisation": "unconstrained: " + ", ".join(pm.PARAM_NAMES),
        "method": args.method,
        "chains": args.chains,
        "sampler_seed": args.seed,
        **info,
        **stats,
        "map_seconds": t_map,
        "total_seconds": time.time() - t0,
        "command": "python " + " ".join(sys.argv),
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "tensorflow": tf.__version__,
            "tensorflow_probability": tfp.__version__,
        },
    }
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f)
        os.replace(tmp, args.out)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", choices=("gibbs", "hmc"), default="gibbs")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-seed", type=int, default=0)
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--map-steps", type=int, default=1000, help="L-BFGS iterations for the MAP")
    g = ap.add_argument_group("gibbs")
    g.add_argument("--burnin", type=int, default=500, help="sweeps discarded per chain")
    g.add_argument("--sweeps", type=int, default=3000, help="sweeps kept per chain (before --thin)")
    g.add_argument("--thin", type=int, default=1)
    h = ap.add_argument_group("hmc")
    h.add_argument("--warmup", type=int, default=300)
    h.add_argument(
        "--max-minutes", type=float, default=40.0, help="wall-clock bound of the post-warm-up draws"
    )
    h.add_argument("--leapfrog", type=int, default=10)
    ap.add_argument("--chunk", type=int, default=25, help="draws per chunk (per compiled call)")
    ap.add_argument(
        "--out",
        default=os.path.join(
            os.path.dirname(__file__), "..", "tfp_sgmcmc", "models", "ground_truth",
            "pmf_synthetic.json",
        ),
    )
    a = ap.parse_args()
    for name in ("chains", "burnin", "sweeps", "thin", "warmup", "leapfrog", "chunk", "map_steps"):
        if getattr(a, name) < (0 if name == "burnin" else 1):
            ap.error(f"--{name} must be positive, got {getattr(a, name)}")
    res = run(a)
    keys = ("method", "draws_per_chain", "ess", "rhat", "fraction_rhat_above_1.05",
            "relative_mcse_of_std_norm", "sampling_seconds")
    print(json.dumps({k: res.get(k) for k in keys}, indent=1))


if __name__ == "__main__":
    main()
