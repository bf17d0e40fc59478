"""Mixing of SGLD, S-SGLD and Sd-SGLD against the number of groups (Alexos et al., §3-§4).

Alexos, Boyd & Mandt (2022) break the posterior correlations between parameter
groups: each group's gradient sees the other groups at values drawn from the
chain's own history, so the chain targets the block-factorised approximation of
the posterior and, when the correlations run between the groups, mixes faster.
This study measures that on a model whose posterior and fixed points are known
exactly.

Model: Bayesian linear regression ``y ~ N(Xw, 1)``, ``w ~ N(0, I_4)``, N = 1,000
rows, no intercept. The features are drawn from ``N(0, C)`` with
``corr(x1, x2) = corr(x3, x4) = 0.95`` and 0.5 between the pairs, so the
posterior ``N(μ, Λ^{-1})``, ``Λ = XᵀX + I``, is badly conditioned along
``w1 − w2`` and ``w3 − w4``. Groups (``partition_modulo``): M = 1 (one group,
i.e. SGLD), M = 2 ({w1, w3}, {w2, w4}: the strongly correlated pairs are split)
and M = 4 (fully factorised).

Samplers: SGLD; S-SGLD (``StructuredEstimator``) and Sd-SGLD
(``StructuredDropoutEstimator``, one Bernoulli(ρ = 0.5) keep mask per step) with
M = 1, 2, 4; all at the same step ``ε = 0.5/λ_max(Λ)``, minibatch 100, history of
2,000 states stored every 5th step. Each seed runs its own minibatches, noise
and initial states (4 chains per seed, started at draws from the exact posterior), burn-in then
kept steps, every step traced.

Metrics per seed (mean ± standard error over seeds):
ESS per 1,000 steps per chain (``tfp.mcmc.effective_sample_size``, the smallest
over the four coordinates and along the slow direction, the top eigenvector of
``Λ^{-1}``); the integrated autocorrelation time of the slow direction in steps
(``sg.integrated_autocorrelation_time``); the largest error of the posterior mean
in posterior standard deviations, ``max_j |w̄_j − μ_j| / σ_j``; and the sample
variances over the exact ones, ``var̂_j / σ_j²`` (their mean over j), beside the
ε → 0 fixed point of each sampler: ``Λ^{-1}`` for SGLD, the block mean field
``(Λ_BB)^{-1}`` for S-SGLD, ``(Λ_BB + ρ·(Λ − Λ_BB))^{-1}`` for Sd-SGLD.

Run: ``python examples/structured_mixing.py [--quick]``
Writes ``studies/structured_mixing.md`` and ``figures/structured_mixing.png`` under
``--out`` (default ``out/structured_mixing/``; ``--write-docs`` for ``docs/``).
"""

from __future__ import annotations

import os
import platform
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
from tfp_sgmcmc.estimators.partitions import partition_modulo
from tfp_sgmcmc.estimators.structured import (
    StructuredDropoutEstimator,
    StructuredEstimator,
    trace_without_history,
)

D = 4
RHO = 0.5
GROUPS = (1, 2, 4)


def make_data(n: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features with strongly correlated pairs (x1, x2), (x3, x4); ``y = Xw + N(0, 1)``."""
    rng = np.random.default_rng(seed)
    c = np.full((D, D), 0.5)
    c[0, 1] = c[1, 0] = c[2, 3] = c[3, 2] = 0.95
    np.fill_diagonal(c, 1.0)
    x = rng.multivariate_normal(np.zeros(D), c, size=n)
    y = x @ np.array([1.0, -1.0, 0.5, 0.5]) + rng.standard_normal(n)
    return x, y


def group_ids(m: int) -> np.ndarray:
    """``partition_modulo``'s groups for 4 coordinates: coordinate j in group j mod m."""
    return np.arange(D) % m


def fixed_point_cov(lam: np.ndarray, kind: str, m: int) -> np.ndarray:
    """The ε → 0 stationary covariance: joint, block mean field or Sd's ρ-mixture."""
    g = group_ids(m)
    same = g[:, None] == g[None, :]
    if kind == "SGLD":
        return np.linalg.inv(lam)
    block = np.where(same, lam, 0.0)
    if kind == "S-SGLD":
        return np.linalg.inv(block)
    return np.linalg.inv(block + RHO * (lam - block))


def autocorrelation(x: np.ndarray, max_lag: int) -> np.ndarray:
    """Sample autocorrelation of each column of ``x`` ``[n, c]`` at lags ``0..max_lag``."""
    x = x - x.mean(0)
    n = len(x)
    f = np.fft.rfft(x, 2 * n, axis=0)
    r = np.fft.irfft(f * np.conj(f), axis=0)[: max_lag + 1]
    return r / r[0]


def machine_line() -> str:
    """Commit, versions and machine, as the page records them."""
    commit = _cli.commit()
    return (
        f"commit `{commit}`; Python {platform.python_version()}, "
        f"TensorFlow {tf.__version__}, TFP {tfp.__version__}, NumPy {np.__version__}; "
        f"{platform.machine()}, {os.cpu_count()} CPUs"
    )


def main(argv: list[str] | None = None) -> None:
    p = _cli.parser("structured_mixing", __doc__.splitlines()[0])
    p.add_argument(
        "--seeds", type=_cli.positive_int, default=None, help="seeds (default 6, quick 2)"
    )
    args = p.parse_args(argv)
    out = _cli.outputs(args)
    tf.get_logger().setLevel("ERROR")  # TFP's FFT autocorrelation warns about complex casts
    burn, keep = (500, 2000) if args.quick else (4000, 30000)
    num_seeds = args.seeds if args.seeds is not None else (2 if args.quick else 6)
    chains, batch, cap, thin = 4, 100, 2000, 5
    load_start = os.getloadavg()[0]

    x, y = make_data()
    lam = x.T @ x + np.eye(D)
    mu = np.linalg.solve(lam, x.T @ y)
    cov = np.linalg.inv(lam)
    sd = np.sqrt(np.diag(cov))
    chol = np.linalg.cholesky(cov)
    evals, evecs = np.linalg.eigh(cov)
    slow = evecs[:, -1]  # top-variance direction of the exact posterior
    eps = 0.5 / np.linalg.eigvalsh(lam).max()

    def loglik(w, b):
        xb, yb = b
        return -0.5 * (yb - tf.einsum("nd,...d->...n", xb, w)) ** 2

    def logprior(w):
        return -0.5 * tf.reduce_sum(w**2, -1)

    base = sg.MinibatchEstimator(loglik, (x, y), batch_size=batch, log_prior_fn=logprior)
    configs: list[tuple[str, int, object]] = [("SGLD", 1, base)]
    for m in GROUPS:
        part = partition_modulo([(D,)], m)
        configs.append(("S-SGLD", m, StructuredEstimator(base, part, cap, thin)))
    for m in GROUPS:
        configs.append(
            (
                "Sd-SGLD",
                m,
                StructuredDropoutEstimator(
                    base,
                    partition_modulo([(D,)], m),
                    num_masks=1,
                    keep_prob=RHO,
                    history_capacity=cap,
                    thinning=thin,
                ),
            )
        )

    rows = []
    curves = {}
    t_start = time.time()
    for name, m, est in tqdm(configs, desc="samplers", file=sys.stdout):
        kernel = sg.SGLD(est, eps)

        @tf.function(jit_compile=True)
        def run(init, seed, kernel=kernel):
            return tfp.mcmc.sample_chain(
                keep,
                init,
                kernel=kernel,
                num_burnin_steps=burn,
                trace_fn=trace_without_history,
                seed=seed,
            ).all_states

        per_seed = []
        acf = []
        for s in range(num_seeds):
            rng = np.random.default_rng(1000 + s)
            init = tf.constant(mu + rng.standard_normal((chains, D)) @ chol.T)
            w = run(init, tf.constant([s, 7])).numpy()  # [keep, chains, D]
            proj = (w - mu) @ slow  # [keep, chains]
            ess = tfp.mcmc.effective_sample_size(tf.constant(w)).numpy()  # [chains, D]
            ess_slow = tfp.mcmc.effective_sample_size(tf.constant(proj)).numpy()  # [chains]
            iat = sg.integrated_autocorrelation_time(tf.constant(proj)).per_parameter.numpy()
            mean = w.reshape(-1, D).mean(0)
            var = w.reshape(-1, D).var(0)
            per_seed.append(
                [
                    1000 * ess.min(1).mean() / keep,
                    1000 * ess_slow.mean() / keep,
                    iat.mean(),
                    np.max(np.abs(mean - mu) / sd),
                    np.mean(var / sd**2),
                ]
            )
            acf.append(autocorrelation(proj, 1000).mean(1))
        v = np.array(per_seed)
        se = v.std(0, ddof=1) / np.sqrt(num_seeds) if num_seeds > 1 else np.full(v.shape[1], np.nan)
        fp = fixed_point_cov(lam, name, m)
        label = name if name == "SGLD" else f"{name}, M = {m}"
        rows.append((label, v.mean(0), se, np.mean(np.diag(fp) / sd**2)))
        curves[label] = np.mean(acf, 0)
    seconds = time.time() - t_start
    load_end = os.getloadavg()[0]

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    for label, c in curves.items():
        style = "-" if label.startswith("S-") else ("--" if label.startswith("Sd") else "k-")
        ax1.plot(np.arange(len(c)), c, style, lw=1.2, label=label)
    ax1.axhline(0, color="grey", lw=0.5)
    ax1.set_xlabel("lag (steps)")
    ax1.set_ylabel("autocorrelation, slow direction")
    ax1.legend(fontsize=7)
    for j, name in enumerate(["S-SGLD", "Sd-SGLD"]):
        sel = [r for r in rows if r[0].startswith(name + ",")]
        ms = [int(r[0].split("= ")[1]) for r in sel]
        ax2.errorbar(
            np.array(ms) + 0.05 * (j - 0.5),
            [r[1][0] for r in sel],
            yerr=[r[2][0] for r in sel],
            marker="o",
            capsize=3,
            label=name,
        )
    sgld = rows[0]
    ax2.axhline(sgld[1][0], color="k", lw=1, label="SGLD")
    ax2.set_xscale("log", base=2)
    ax2.set_xticks(list(GROUPS), [str(g) for g in GROUPS])
    ax2.set_xlabel("groups M")
    ax2.set_ylabel("ESS per 1,000 steps (min coordinate)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig_path = out.figure("structured_mixing.png")
    fig.savefig(fig_path)

    def cell(mean: float, se: float, fmt: str) -> str:
        return f"{mean:{fmt}} ± {se:{fmt}}" if np.isfinite(se) else f"{mean:{fmt}}"

    table = [
        "| sampler | ESS / 1,000 steps (min coordinate) | ESS / 1,000 steps (slow direction) "
        "| IAT slow direction (steps) | max mean error (σ) | var̂ / σ² (mean over j) "
        "| fixed point var / σ² |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, mean, se, fpv in rows:
        table.append(
            f"| {label} | {cell(mean[0], se[0], '.1f')} | {cell(mean[1], se[1], '.1f')} | "
            f"{cell(mean[2], se[2], '.1f')} | {cell(mean[3], se[3], '.3f')} | "
            f"{cell(mean[4], se[4], '.3f')} | {fpv:.3f} |"
        )
    table_text = "\n".join(table)
    print(table_text)

    cond = np.linalg.cond(lam)

    def relax(m: int) -> float:
        g = group_ids(m)
        block = np.where(g[:, None] == g[None, :], lam, 0.0)
        return float(np.linalg.eigvals(np.linalg.solve(block, lam)).real.min())

    lam2, lam4 = relax(2), relax(4)
    md = f"""# Structured SG-MCMC: mixing against the number of groups (Alexos et al.)

Regenerate: `{_cli.command_line()}`

Run on {machine_line()}; load average {load_start:.1f} at the start, {load_end:.1f}
at the end; {seconds:.0f} s for all runs. Budgets are steps, so a rerun gives the
same table.

Alexos, Boyd & Mandt (2022) claim that structured SG-MCMC mixes faster the more
groups the parameters are split into, because each group's gradient sees the other
groups at values drawn from the chain's history instead of their current values.
The price is the target: the chain samples the block-factorised approximation of
the posterior, not the posterior. This page measures both on a model where the
posterior and every sampler's fixed point are known exactly.

**Model.** Bayesian linear regression `y ~ N(Xw, 1)`, `w ~ N(0, I₄)`, N = 1,000
rows; features from `N(0, C)` with corr(x1, x2) = corr(x3, x4) = 0.95 and 0.5
between the pairs. The posterior `N(μ, Λ⁻¹)`, `Λ = XᵀX + I`, has condition
number {cond:.0f}; its slow directions are w1 − w2 and w3 − w4. Groups from
`partition_modulo`: M = 1, M = 2 ({{w1, w3}}, {{w2, w4}}: the correlated pairs are
split) and M = 4 (fully factorised).

**Samplers.** SGLD; S-SGLD (`StructuredEstimator`) and Sd-SGLD
(`StructuredDropoutEstimator`, one Bernoulli(ρ = {RHO}) keep mask per step), M = 1, 2, 4;
all `sg.SGLD` at ε = 0.5/λ_max(Λ) = {eps:.2e}, minibatch {batch}, history of {cap:,}
states stored every {thin}th step. {num_seeds} seeds × {chains} chains, {burn:,} burn-in
and {keep:,} kept steps per chain, every step traced; chains start at draws from the
exact posterior.

**Metrics** (mean ± standard error over the {num_seeds} seeds): ESS per 1,000 steps per
chain (`tfp.mcmc.effective_sample_size`), the smallest over the 4 coordinates and
along the slow direction (the top eigenvector of Λ⁻¹); the integrated
autocorrelation time of the slow direction (`sg.integrated_autocorrelation_time`);
the largest error of the mean, `max_j |w̄_j − μ_j| / σ_j`; the sample variance over
the exact one, averaged over j; and the same ratio for the sampler's exact ε → 0
fixed point (Λ⁻¹ for SGLD, `(Λ_BB)⁻¹` for S-SGLD, `(Λ_BB + ρ(Λ − Λ_BB))⁻¹` for
Sd-SGLD, with Λ_BB the block-diagonal part).

![autocorrelation and ESS against M](../figures/{out.name("structured_mixing.png")})

{table_text}
"""
    by = {r[0]: r for r in rows}
    if not args.quick:
        s2, s4 = by["S-SGLD, M = 2"], by["S-SGLD, M = 4"]
        d2, d4 = by["Sd-SGLD, M = 2"], by["Sd-SGLD, M = 4"]

        def trend(x: float) -> str:
            return "falls" if x < sgld[1][2] else "rises"

        md += f"""
**Reading.** With M = 1 both structured samplers are SGLD (S-SGLD exactly; Sd-SGLD
with a random half of its steps doubled), and their rows agree with SGLD's.

*ESS per step: reproduced.* Splitting the correlated pairs (M = 2) raises the
smallest ESS per 1,000 steps from {sgld[1][0]:.1f} (SGLD) to {s2[1][0]:.1f} (S-SGLD)
and {d2[1][0]:.1f} (Sd-SGLD); M = 4 gives {s4[1][0]:.1f} and {d4[1][0]:.1f}. More
groups, higher ESS, as the paper says.

*The autocorrelation has a tail.* The plot shows why the autocorrelation time of the
slow direction does not follow the ESS: the structured chains' autocorrelation drops
within a few dozen steps and then levels off at a small positive value that decays
only on the time scale of the history. Sokal's windowed estimate (window at least 5
times the estimate) counts part of that tail; TFP's ESS cuts each chain's sum where
its estimated autocorrelation first turns negative, which the noise of a single
chain does early in a tail this low, so it mostly does not. With the tail counted,
the time {trend(s2[1][2])} from {sgld[1][2]:.0f} steps
(SGLD) to {s2[1][2]:.0f} (S-SGLD, M = 2) and {trend(s4[1][2])} to {s4[1][2]:.0f}
(M = 4), with large standard errors; for Sd-SGLD it is {d2[1][2]:.0f} and
{d4[1][2]:.0f}.

*Where the tail comes from, and what it costs.* The history holds the last
W = {cap * thin:,} steps. A deterministic mean-field argument (each group at its
block conditional given the history mean, the history mean following the chain)
gives the history mean a relaxation time of about W/λ steps, λ the smallest
eigenvalue of `Λ_BB⁻¹Λ` ({lam2:.3f} for M = 2, {lam4:.3f} for M = 4), i.e.
{cap * thin / lam4:,.0f} to {cap * thin / lam2:,.0f} steps, longer than the run. So
the chains fluctuate quickly around history means that wander slowly. That shows in
the estimates: the largest error of the mean is {s2[1][3]:.2f}σ and {s4[1][3]:.2f}σ
for S-SGLD and {d2[1][3]:.2f}σ and {d4[1][3]:.2f}σ for Sd-SGLD, against
{sgld[1][3]:.2f}σ for SGLD with its far lower ESS; and the pooled variances,
{s2[1][4]:.2f} and {s4[1][4]:.2f} (S-SGLD), {d2[1][4]:.2f} and {d4[1][4]:.2f}
(Sd-SGLD) of the exact ones, lie between the posterior's (1) and each sampler's
ε → 0 fixed point ({s2[3]:.2f}, {s4[3]:.2f}, {d2[3]:.2f}, {d4[3]:.2f}).

On a posterior whose correlations run between the groups, structured SG-MCMC
raises the ESS per step as claimed, but the higher ESS does not buy better
estimates at an equal number of steps: the chain targets a narrower distribution
than the posterior, and its history settles slowly.
"""
    md_path = out.write_study("structured_mixing.md", md)
    print("wrote", md_path, fig_path)


if __name__ == "__main__":
    main()
