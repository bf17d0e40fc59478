"""Sparse Bayesian neural network on scikit-learn's diabetes data: SGHMC-SA vs SGHMC.

The UCI study of Deng et al. (2019), supplement Table 2 (``docs/algorithms.md#exp-uci``),
on the regression data set bundled with scikit-learn (442 rows, 10 features; the
UCI files are not available offline): an MLP with one hidden layer of 50 ReLU
units written in plain TF ops (state parts ``[W1, b1, W2, b2]``), random 90/10
splits, features and target standardised on the training split, batch 50,
SSGL prior on the weights only (biases: ``N(0, 10²)``), Gaussian likelihood
with variance σ² (regression form of the σ update).

Six methods, each one argument from the others (all start from the same
latents ``ρ = δ = 0.5, κ0 = 0, κ1 = 1, σ = 1``, i.e. an ``N(0, 1)`` prior on
the weights with unit noise):

* SGHMC: ω ≡ 0 (latents frozen: plain SGHMC with that Gaussian prior);
* SGHMC-EM: ω ≡ 1;  SGHMC-SA: ``ω_k = (100 + k)^{−0.7}`` (the authors' UCI code);
* A-…: the same with simulated annealing of the inverse temperature
  ``τ_k = τ_0 1.003^k`` (our ``temperature = GeometricAnnealing(τ_0, 1.003)``).

SGHMC is Deng's "SGD with momentum" form (``deng_sghmc``: friction 1 − μ = 0.1,
β̂ = η/2). Predictions average the network over the states kept in the second
half of the run. RMSE is on the original target scale.

Run: ``python examples/sparse_bnn_diabetes.py`` (``--quick`` for a smoke run).
Writes
``studies/sparse_bnn_diabetes.md`` and ``figures/sparse_bnn_diabetes.png``
under ``--out`` (default ``out/sparse_bnn_diabetes/``; ``--write-docs`` for ``docs/``).
"""

from __future__ import annotations

import os

import _cli
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_diabetes
from sparse_common import markdown_table

from tfp_sgmcmc.driver import ChunkedChain
from tfp_sgmcmc.kernels.stochastic_approximation import (
    StochasticApproximation,
    deng_sghmc,
)
from tfp_sgmcmc.priors import SpikeAndSlabGroupLasso, SSGLEstimator
from tfp_sgmcmc.schedules import GeometricAnnealing, SAStepSize

HIDDEN, BATCH = 50, 50


def forward(s, x):
    w1, b1, w2, b2 = s
    h = tf.nn.relu(tf.matmul(x, w1) + b1)
    return tf.linalg.matvec(h, w2) + b2


def main() -> None:
    ap = _cli.parser("sparse_bnn_diabetes", __doc__.split("\n")[0])
    ap.add_argument("--seeds", type=_cli.positive_int, default=20)
    ap.add_argument("--epochs", type=int, default=400)
    ap.add_argument("--lr", type=float, default=2e-4, help="SGHMC learning rate η")
    ap.add_argument("--v0", type=float, default=0.1)
    ap.add_argument("--tau0", type=float, default=1.0, help="initial inverse temperature τ0")
    args = ap.parse_args()
    out = _cli.outputs(args)

    x_all, y_all = load_diabetes(return_X_y=True)
    n_all, d = x_all.shape
    n_train = int(round(0.9 * n_all))
    steps_per_epoch = n_train // BATCH
    epochs, n_seeds = (60, 2) if args.quick else (args.epochs, args.seeds)
    steps = epochs * steps_per_epoch
    thin = steps_per_epoch

    xv = tf.Variable(tf.zeros([n_train, d], tf.float32))
    yv = tf.Variable(tf.zeros([n_train], tf.float32))

    def residual(s, idx):
        return tf.gather(yv, idx) - forward(s, tf.gather(xv, idx))

    prior = SpikeAndSlabGroupLasso(v0=args.v0, v1=10.0, a=1.0, b=10.0, nu=1.0, lam=1.0)
    est = SSGLEstimator(
        prior,
        np.arange(n_train, dtype=np.int32),
        BATCH,
        residual_fn=residual,
        sparse_parts=[True, False, True, False],
        dense_prior_scale=10.0,
        initial_latents={"kappa0": 0.0, "kappa1": 1.0, "sigma": 1.0},
    )
    omegas = {"SGHMC": 0.0, "SGHMC-EM": 1.0, "SGHMC-SA": SAStepSize(1.0, 100.0, 0.7)}
    methods = {}
    for name, w in omegas.items():
        for annealed in (False, True):
            temp = GeometricAnnealing(args.tau0, 1.003) if annealed else 1.0 / args.tau0
            inner = deng_sghmc(est, args.lr, momentum=0.9, temperature=temp)
            methods[("A-" if annealed else "") + name] = StochasticApproximation(inner, w)
    if args.quick:
        methods = {k: v for k, v in methods.items() if k in ("SGHMC", "SGHMC-SA")}

    def trace_fn(_, r):
        lat = r.latents
        return lat.sigma, lat.rho[0], lat.rho[1], r.diverged

    # One compiled chunk (the whole run) per method, reused for every seed.
    chains = {
        m: ChunkedChain(
            k, chunk_size=steps // thin, thin=thin, trace_fn=trace_fn, jit_compile=not args.quick
        )
        for m, k in methods.items()
    }

    res = {m: {"rmse": [], "rho_sparse": [], "small_w": []} for m in methods}
    curves = {}
    for seed in range(n_seeds):
        rng = np.random.default_rng(seed)
        perm = rng.permutation(n_all)
        tr, te = perm[:n_train], perm[n_train:]
        mx, sx = x_all[tr].mean(0), x_all[tr].std(0)
        my, sy = y_all[tr].mean(), y_all[tr].std()
        xv.assign(((x_all[tr] - mx) / sx).astype(np.float32))
        yv.assign(((y_all[tr] - my) / sy).astype(np.float32))
        xte = ((x_all[te] - mx) / sx).astype(np.float32)
        init = [
            (rng.standard_normal((d, HIDDEN)) / np.sqrt(d)).astype(np.float32),
            np.zeros(HIDDEN, np.float32),
            (rng.standard_normal(HIDDEN) / np.sqrt(HIDDEN)).astype(np.float32),
            np.zeros((), np.float32),
        ]
        for m, chain in chains.items():
            run = chain.run(
                [tf.constant(v) for v in init],
                steps // thin,
                seed=seed,
                progress=True,
                desc=f"seed {seed} {m}",
            )
            states, (sig, rho1, rho2, div) = run.states, run.trace
            if div.any():
                print(f"warning: {m} diverged (seed {seed})")
            half = len(states[0]) // 2
            preds = np.stack(
                [forward([s[i] for s in states], xte).numpy() for i in range(half, len(states[0]))]
            )
            pred = preds.mean(0) * sy + my
            res[m]["rmse"].append(float(np.sqrt(np.mean((pred - y_all[te]) ** 2))))
            rho = np.concatenate([rho1[-1].ravel(), rho2[-1].ravel()])
            res[m]["rho_sparse"].append(float(np.mean(rho < 0.5)))
            w_last = np.concatenate([states[0][-1].ravel(), states[2][-1].ravel()])
            res[m]["small_w"].append(float(np.mean(np.abs(w_last) < 0.01)))
            if seed == 0:
                curves[m] = sig

    rows = []
    base = np.array(res["SGHMC"]["rmse"])
    for m in methods:
        r = res[m]
        diff = np.array(r["rmse"]) - base  # paired by split: the split dominates the spread
        se = np.std(diff, ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
        rows.append(
            [
                m,
                f"{np.mean(r['rmse']):.2f} ± {np.std(r['rmse']):.2f}",
                f"{np.mean(diff):+.2f} ± {se:.2f}",
                f"{100 * np.mean(r['rho_sparse']):.1f} %",
                f"{100 * np.mean(r['small_w']):.1f} %",
            ]
        )
    header = [
        "method",
        "test RMSE (mean ± sd)",
        "paired Δ vs SGHMC (± s.e.)",
        "weights with ρ < 0.5",
        "weights with |w| < 0.01",
    ]
    table = markdown_table(header, rows)
    print(table)
    plot(curves, steps_per_epoch, out.figure("sparse_bnn_diabetes.png"))
    lines = [
        "# Sparse BNN on scikit-learn's diabetes data (Deng et al. 2019, Table 2 protocol)",
        "",
        f"Command: `{_cli.command_line()}`",
        "",
        _cli.provenance(),
        "",
        f"MLP 10-50-1 (ReLU), {n_train}/{n_all - n_train} random splits ({n_seeds} seeds), "
        f"batch "
        f"{BATCH}, {epochs} epochs ({steps} iterations), SGHMC η = {args.lr}, μ = 0.9, "
        f"SSGL v0 = {args.v0}, v1 = b = 10, a = ν = λ = 1 on the weights, N(0, 10²) on the "
        f"biases; τ0 = {args.tau0}; annealing τ_k = τ0·1.003^k. Prediction: average of the "
        "network over one state per epoch in the second half. Sparsity: fraction of the "
        f"{d * HIDDEN + HIDDEN} weights with final ρ < 0.5 (frozen at 0.5 for ω ≡ 0) and "
        "with |w| < 0.01 in the final state.",
        "",
        f"![σ over the run (seed 0)](../figures/{out.name('sparse_bnn_diabetes.png')})",
        "",
        table,
        "",
        "Paper (UCI data sets, 20 seeds, RMSE): e.g. Boston SGHMC 2.783, A-SGHMC 2.848, "
        "SGHMC-EM 2.813, A-SGHMC-EM 2.767, SGHMC-SA 2.779, A-SGHMC-SA 2.692.",
        "",
    ]
    path = out.write_study("sparse_bnn_diabetes.md", "\n".join(lines))
    print(f"wrote {path}")


def plot(curves, steps_per_epoch, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    for m, s in curves.items():
        ax.plot(np.arange(1, len(s) + 1), s, label=m, lw=1)
    ax.set_xlabel("epoch")
    ax.set_ylabel("σ (standardised target)")
    ax.set_title("SSGL latent σ, seed 0", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


if __name__ == "__main__":
    main()
