"""Large-p-small-n logistic regression: SGLD-SA vs SGLD-EM vs SGLD over (v0, σ_init).

Reproduces the supplement's Table 1 of Deng et al. (2019)
(``docs/algorithms.md#exp-sparse-logistic``):
``n = 500``, ``p = 1000``, ``Σ_ij = 0.3^{|i−j|}``, ``β = (β1, β2, β3, 0, …)`` with
``β1..3 ~ N((3, 2, 1), 0.2²)``, ``y ~ Bernoulli(1/(1 + exp(−Xβ − η)))`` with
``η ~ N(0, I/2)``; ``ε_k = 0.001 k^{−1/3}`` for all three algorithms,
``ω_k = 10 (k + 1000)^{−0.7}`` for SA, ω ≡ 1 for EM, ω ≡ 0 for SGLD (κ0 = κ1 = 1,
σ fixed at σ_init); SSGL ``v1 = 10, a = 1, b = p, ν = λ = 1`` with the
classification form of the σ update; grid ``v0 ∈ {0.01, 0.001}``,
``σ_init ∈ {1, 2}``. Unspecified in the paper and chosen here: the test set
(250 new rows, n/2 as in the linear study), the iteration count (reduced, see
the study file), full-data gradients, and MAE/MSE between the posterior-mean
predicted probability ``mean_s sigmoid(x β_s)`` and the 0/1 test labels.

Run: ``python examples/sparse_logistic_regression.py`` (``--quick`` for a smoke
run). Writes
``studies/sparse_logistic_regression.md`` and ``figures/sparse_logistic_beta123.png``
under ``--out`` (default ``out/sparse_logistic_regression/``; ``--write-docs`` for ``docs/``).
"""

from __future__ import annotations

import _cli
import numpy as np
import tensorflow as tf
from sparse_common import markdown_table, sa_chains, toeplitz_design
from sparse_linear_regression import plot_beta123

import tfp_sgmcmc as sg
from tfp_sgmcmc.priors import SpikeAndSlabGroupLasso, SSGLEstimator
from tfp_sgmcmc.schedules import PolynomialDecay, SAStepSize

N_TRAIN, N_TEST, P = 500, 250, 1000
GRID = [(0.01, 1.0), (0.001, 1.0), (0.01, 2.0), (0.001, 2.0)]
PAPER = {
    "SGLD-SA": ["0.177 / 0.108", "0.188 / 0.114", "0.182 / 0.116", "0.187 / 0.113"],
    "SGLD-EM": ["0.207 / 0.131", "0.361 / 0.346", "0.204 / 0.132", "0.376 / 0.360"],
    "SGLD": ["0.295 / 0.272", "0.335 / 0.301", "0.350 / 0.338", "0.337 / 0.319"],
}
METHODS = {"SGLD-SA": SAStepSize(10.0, 1000.0, 0.7), "SGLD-EM": 1.0, "SGLD": 0.0}


def make_data(seed: int):
    rng = np.random.default_rng(seed)
    beta = np.zeros(P)
    beta[:3] = rng.normal([3.0, 2.0, 1.0], 0.2)
    x = toeplitz_design(rng, N_TRAIN + N_TEST, P, 0.3)
    logits = x @ beta + rng.normal(0.0, np.sqrt(0.5), N_TRAIN + N_TEST)
    y = (rng.random(N_TRAIN + N_TEST) < 1 / (1 + np.exp(-logits))).astype(float)
    return x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:], beta


def main() -> None:
    ap = _cli.parser("sparse_logistic_regression", __doc__.split("\n")[0])
    ap.add_argument("--steps", type=_cli.positive_int, default=50_000)
    ap.add_argument("--datasets", type=int, default=1)
    args = ap.parse_args()
    out = _cli.outputs(args)
    steps, thin, n_data = (1000, 10, 1) if args.quick else (args.steps, 100, args.datasets)
    grid = GRID[:1] if args.quick else GRID
    chunk = min(steps, 10_000)

    xv = tf.Variable(tf.zeros([N_TRAIN, P], tf.float32))
    yv = tf.Variable(tf.zeros([N_TRAIN], tf.float32))
    # v0 and σ_init are variables too: one compiled program per method covers the grid.
    v0 = tf.Variable(0.01, dtype=tf.float32)
    sigma0 = tf.Variable(1.0, dtype=tf.float32)

    def loglik(b, idx):
        logits = tf.linalg.matvec(tf.gather(xv, idx), b)
        return -tf.nn.sigmoid_cross_entropy_with_logits(tf.gather(yv, idx), logits)

    prior = SpikeAndSlabGroupLasso(v0=v0, v1=10.0, a=1.0, b=None, sigma_form="classification")
    est = SSGLEstimator(
        prior,
        np.arange(N_TRAIN, dtype=np.int32),
        N_TRAIN,
        log_likelihood_fn=loglik,
        initial_latents={"sigma": sigma0},
    )
    inner = sg.SGLD(est, step_size=PolynomialDecay(1e-3, 0.0, 1.0 / 3.0, one_based=True))

    # One chunked runner per method: its compiled chunks serve every data set and grid point.
    chains = sa_chains(inner, METHODS, chunk, thin, jit_compile=not args.quick)

    res = {(m, g): [] for m in METHODS for g in grid}
    beta123, true123 = {}, None
    for d in range(n_data):
        xtr, ytr, xte, yte, beta = make_data(2000 + d)
        xv.assign(xtr.astype(np.float32))
        yv.assign(ytr.astype(np.float32))
        b0 = np.random.default_rng(d).normal(0, 0.1, P).astype(np.float32)
        for g in grid:
            v0.assign(g[0])
            sigma0.assign(g[1])
            for m, chain in chains.items():
                run = chain.run(
                    tf.constant(b0),
                    steps // thin,
                    seed=d,
                    progress=True,
                    desc=f"data {d} v0={g[0]} σ={g[1]} {m}",
                )
                states, (sig, div) = run.states, run.trace
                if div.any():
                    print(f"warning: {m} diverged at {g}")
                kept = states[len(states) // 5 :]
                prob = (1 / (1 + np.exp(-(kept @ xte.T)))).mean(0)
                res[(m, g)].append(
                    (
                        np.mean(np.abs(prob - yte)),
                        np.mean((prob - yte) ** 2),
                        int(np.sum(np.abs(kept.mean(0)) > 0.1)),
                        float(sig[-1]),
                    )
                )
                if d == 0 and g == (0.01, 1.0):
                    beta123[m], true123 = kept[:, :3], beta[:3]

    cols = [f"v0={g[0]}, σ={g[1]:g}" for g in grid]
    rows = []
    for m in METHODS:
        cells = []
        for g in grid:
            a = np.array(res[(m, g)])
            cells.append(f"{a[:, 0].mean():.3f} / {a[:, 1].mean():.3f}")
        rows.append([m] + cells)
    table = markdown_table(["MAE / MSE"] + cols, rows)
    paper = markdown_table(["paper"] + cols, [[m] + PAPER[m][: len(grid)] for m in METHODS])
    extra_rows = []
    for m in METHODS:
        extra_rows.append(
            [m]
            + [
                f"{np.mean([r[2] for r in res[(m, g)]]):.1f} / "
                f"{np.mean([r[3] for r in res[(m, g)]]):.3f}"
                for g in grid
            ]
        )
    extra = markdown_table(["#|β̄_j|>0.1 / final σ"] + cols, extra_rows)
    print(table)
    print()
    print(paper)
    print()
    print(extra)
    fig = out.figure("sparse_logistic_beta123.png")
    plot_beta123(beta123, true123, fig, "logistic regression (n=500, p=1000), v0=0.01, σ_init=1")
    post = {m: [round(float(a), 3) for a in s.mean(0)] for m, s in beta123.items()}
    lines = [
        "# Sparse logistic regression, large p small n (Deng et al. 2019 supplement Table 1)",
        "",
        f"Command: `{_cli.command_line()}` ({steps:,} iterations per run, "
        f"every {thin}th kept, first 20 % discarded; {n_data} simulated data set(s); full-data "
        "gradients; test set 250 rows; MAE/MSE of the posterior-mean predicted probability "
        "against the 0/1 labels).",
        "",
        _cli.provenance(),
        "",
        f"![posterior of β1..β3](../figures/{out.name('sparse_logistic_beta123.png')})",
        "",
        "Measured:",
        "",
        table,
        "",
        "Paper (supplement Table 1):",
        "",
        paper,
        "",
        "Selected variables (|β̄_j| > 0.1) and final σ:",
        "",
        extra,
        "",
        f"Posterior means of β1..β3 (v0 = 0.01, σ_init = 1; true drawn values "
        f"{[round(float(a), 3) for a in true123]}): {post}",
        "",
    ]
    path = out.write_study("sparse_logistic_regression.md", "\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
