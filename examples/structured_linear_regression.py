"""Structured SGLD on the paper's 3-coefficient linear-regression toy (Alexos et al., Fig. 1).

Model: ``y ~ N(wᵀx + b, 1)``, ``w = [1.5, −0.8, 1.3]``, ``b = 0.5``, N(0, 1)
priors, N = 100. The paper's covariate distribution is not given; we draw
``x ~ N(0, C_x)`` with correlations ``corr(x1, x2) = 0.9``, ``corr(x1, x3) =
0.7``, ``corr(x2, x3) = 0.6`` (data seed 0) so that the posterior has visible
correlations for the structured samplers to break.

Samplers (all SGLD, ε = 4e-4, batch 25, 8 chains pooled per row of the table): SGLD;
S-SGLD with groups {w1, w2}, {w3, b}; S-SGLD fully factorised; Sd-SGLD with
scalar groups, Bernoulli(ρ = 0.5) keep masks, K = 4. The table compares the
sample standard deviations and correlations with the exact ε → 0 fixed points
(posterior ``N(μ, Λ^{-1})``, ``Λ = AᵀA + I``): joint ``Λ^{-1}``, block mean field
``(Λ_BB)^{-1}``, and ``(diag Λ + ρ offdiag Λ)^{-1}`` for Sd-SGLD. Minibatch
noise and the O(ε) discretisation inflate all variances a little.

Run: ``python examples/structured_linear_regression.py [--quick]``
Writes ``studies/structured_linear_regression.md`` and
``figures/structured_linear_regression.png`` under ``--out`` (default
``out/structured_linear_regression/``; ``--write-docs`` for ``docs/``).
"""

from __future__ import annotations

import sys
import time

import _cli
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tqdm import tqdm

import tfp_sgmcmc as sg
from tfp_sgmcmc.estimators.partitions import (
    partition_from_group_ids,
    partition_fully_factorized,
)
from tfp_sgmcmc.estimators.structured import (
    StructuredDropoutEstimator,
    StructuredEstimator,
    trace_without_history,
)

NAMES = ["w1", "w2", "w3", "b"]


def make_data(n=100, seed=0):
    rng = np.random.default_rng(seed)
    cx = np.array([[1.0, 0.9, 0.7], [0.9, 1.0, 0.6], [0.7, 0.6, 1.0]])
    x = rng.multivariate_normal(np.zeros(3), cx, size=n)
    a = np.c_[x, np.ones(n)]
    y = a @ np.array([1.5, -0.8, 1.3, 0.5]) + rng.standard_normal(n)
    return a, y


def predictions(a, y, rho):
    lam = a.T @ a + np.eye(4)
    mu = np.linalg.solve(lam, a.T @ y)
    joint = np.linalg.inv(lam)
    block = np.zeros((4, 4))
    for idx in ([0, 1], [2, 3]):
        block[np.ix_(idx, idx)] = np.linalg.inv(lam[np.ix_(idx, idx)])
    ff = np.diag(1.0 / np.diag(lam))
    d = np.diag(np.diag(lam))
    sd = np.linalg.inv(d + rho * (lam - d))
    return mu, {
        "SGLD": joint,
        "S-SGLD {w1,w2},{w3,b}": block,
        "S-SGLD fully factorised": ff,
        "Sd-SGLD ρ=0.5, K=4": sd,
    }


def corr(c):
    s = np.sqrt(np.diag(c))
    return c / np.outer(s, s)


def main(argv=None):
    p = _cli.parser("structured_linear_regression", __doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=17)
    args = p.parse_args(argv)
    out = _cli.outputs(args)
    burn, keep, chains = (1000, 3000, 4) if args.quick else (10000, 40000, 8)
    # Small ε and batch 25: the shared minibatch's gradient noise is correlated across
    # groups and inflates variances by O(ε·N²/n); keep it well below the structure effect.
    eps, batch, rho, k = 4e-4, 25, 0.5, 4

    a, y = make_data()
    mu, pred = predictions(a, y, rho)

    def loglik(theta, b):
        ab, yb = b
        return -0.5 * (yb - tf.einsum("nd,...d->...n", ab, theta)) ** 2

    def logprior(theta):
        return -0.5 * tf.reduce_sum(theta**2, -1)

    base = sg.MinibatchEstimator(loglik, (a, y), batch_size=batch, log_prior_fn=logprior)
    ff = partition_fully_factorized([(4,)])
    # A long window (capacity × thinning = 50,000 steps ≫ the IAT of ~25 steps): the
    # history mean then wanders little along the poorly conditioned directions (docs).
    cap, thin = 10000, 5
    estimators = {
        "SGLD": base,
        "S-SGLD {w1,w2},{w3,b}": StructuredEstimator(
            base, partition_from_group_ids([np.array([0, 0, 1, 1])]), cap, thin
        ),
        "S-SGLD fully factorised": StructuredEstimator(base, ff, cap, thin),
        "Sd-SGLD ρ=0.5, K=4": StructuredDropoutEstimator(
            base, ff, num_masks=k, keep_prob=rho, history_capacity=cap, thinning=thin
        ),
    }
    init = tf.constant(np.tile(mu, (chains, 1)))
    results = {}
    for name, est in tqdm(estimators.items(), desc="samplers", file=sys.stdout):
        kernel = sg.SGLD(est, eps)

        @tf.function(jit_compile=True)
        def run(seed, kernel=kernel):
            return tfp.mcmc.sample_chain(
                keep,
                init,
                kernel=kernel,
                num_burnin_steps=burn,
                trace_fn=trace_without_history,
                seed=seed,
            )

        t0 = time.time()
        samples = run(tf.constant([args.seed, 0])).all_states.numpy()
        dt = time.time() - t0
        results[name] = (samples, dt)

    rows = []
    header = (
        "| sampler | sd w1 | sd w2 | sd w3 | sd b | pred. sd (ε→0) | corr(w1,w2) | "
        "pred. | corr(w1,w3) | pred. | corr(w3,b) | pred. | pooled sd w1, w2 | "
        "sd of chain means w1 |"
    )
    rows.append(header)
    rows.append("|" + "---|" * 14)
    for name, (samples, _) in results.items():
        # Within-chain moments (each chain around its own mean), averaged over chains.
        cen = samples - samples.mean(0)
        c = np.einsum("tci,tcj->ij", cen, cen) / (cen.shape[0] * cen.shape[1])
        pooled = np.cov(samples.reshape(-1, 4), rowvar=False)
        cp = pred[name]
        r, rp = corr(c), corr(cp)
        rows.append(
            f"| {name} | "
            + " | ".join(f"{np.sqrt(c[i, i]):.3f}" for i in range(4))
            + " | "
            + ", ".join(f"{np.sqrt(cp[i, i]):.3f}" for i in range(4))
            + f" | {r[0, 1]:+.2f} | {rp[0, 1]:+.2f} | {r[0, 2]:+.2f} | {rp[0, 2]:+.2f}"
            + f" | {r[2, 3]:+.2f} | {rp[2, 3]:+.2f}"
            + f" | {np.sqrt(pooled[0, 0]):.3f}, {np.sqrt(pooled[1, 1]):.3f}"
            + f" | {samples.mean(0)[:, 0].std(ddof=1):.3f} |"
        )
    means = "| sampler | " + " | ".join(NAMES) + " |\n|---|---|---|---|---|\n"
    means += "| exact posterior mean | " + " | ".join(f"{m:.3f}" for m in mu) + " |\n"
    for name, (samples, _) in results.items():
        means += f"| {name} | " + " | ".join(f"{m:.3f}" for m in samples.reshape(-1, 4).mean(0))
        means += " |\n"
    table = "\n".join(rows)
    print(table)
    print()
    print(means)

    # Figure: pairwise posteriors like the paper's Figure 1.
    fig, axes = plt.subplots(2, 4, figsize=(11, 5), sharex="row", sharey="row")
    for j, (name, (samples, _)) in enumerate(results.items()):
        flat = samples.reshape(-1, 4)
        sub = flat[np.random.default_rng(0).choice(len(flat), min(3000, len(flat)), False)]
        for i, (a_i, b_i) in enumerate([(0, 1), (0, 2)]):
            ax = axes[i, j]
            ax.scatter(sub[:, a_i], sub[:, b_i], s=1, alpha=0.3, rasterized=True)
            ax.plot(mu[a_i], mu[b_i], "r+", ms=10)
            if i == 0:
                ax.set_title(name, fontsize=9)
            ax.set_xlabel(NAMES[a_i])
            if j == 0:
                ax.set_ylabel(NAMES[b_i])
    fig.tight_layout()
    fig_path = out.figure("structured_linear_regression.png")
    fig.savefig(fig_path, dpi=70)
    md = (
        f"""# Structured SGLD on the linear-regression toy (Alexos et al., Figure 1)

Command: `{_cli.command_line()}` (seed {args.seed}; {chains} chains × {keep} kept steps after
{burn} burn-in; SGLD ε = {eps}, batch {batch} of N = 100; history capacity {cap}, thinning
{thin}).

{_cli.provenance()}

Data: `y ~ N(wᵀx + b, 1)`, w = [1.5, −0.8, 1.3], b = 0.5, N(0, 1) priors. The paper does not
give its covariate law; we use **x ~ N(0, C_x)** with corr(x1,x2) = 0.9, corr(x1,x3) = 0.7,
corr(x2,x3) = 0.6 (NumPy seed 0), so the joint posterior is clearly correlated.

Standard deviations and correlations are *within-chain* (each chain around its own mean,
averaged over the {chains} chains); "pooled" also includes the spread of the chain means.
Predicted columns are the exact ε → 0 fixed points for a Gaussian posterior N(μ, Λ⁻¹),
Λ = AᵀA + I: SGLD → Λ⁻¹; S-SGLD → block mean field (Λ_BB)⁻¹; Sd-SGLD (scalar groups,
Bernoulli(ρ) keep masks) → (diag Λ + ρ·offdiag Λ)⁻¹. Measured values include minibatch noise
and the O(ε) SGLD bias (a few per cent). The exact discretised law is checked statistically in
`tests/estimators/test_structured_gaussian.py`.

![pairwise posteriors](../figures/{out.name("structured_linear_regression.png")})

{table}

Posterior means (all samplers share the mean μ of the exact posterior):

{means}
Finding (history-mean memory): the structured chains' *means* differ from chain to chain
more than plain SGLD's. The history mean m̂ enters the drift; with q̂ uniform over the
past, m̂ is a stochastic-approximation average whose error decays like t^(−λ), λ the smallest
eigenvalue of D^(−1/2) Λ D^(−1/2) (D = block diagonal of Λ; here λ = 0.078 for scalar groups).
For λ < 1/2 the noise of the first few samples is forgotten only very slowly, so each chain
keeps a nearly frozen offset along the strongly correlated direction (w1, w2). The
within-chain moments match the fixed point; the pooled ones are inflated by that offset.
This is a property of the algorithm (the paper's q̂), not of the implementation: the exact
discretised law is matched in `tests/estimators/test_structured_gaussian.py`.

What it shows: S-SGLD with {{w1,w2}},{{w3,b}} keeps the w1–w2 correlation and removes the w1–w3
one; fully factorised S-SGLD removes all correlations and has the smallest variances
(mean-field variance shrinkage, as in the paper); Sd-SGLD (ρ = 0.5) lies in between.
Wall time per sampler (incl. XLA compile): """
        + ", ".join(f"{n}: {dt:.1f} s" for n, (_, dt) in results.items())
        + "\n"
    )
    md_path = out.write_study("structured_linear_regression.md", md)
    print(f"wrote {fig_path} and {md_path}")


if __name__ == "__main__":
    main()
