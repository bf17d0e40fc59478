"""Stochastic against full-data KSD along SGLD arms (MAMBA paper, appendix B.2).

MAMBA scores its arms by the kernel Stein discrepancy of their thinned samples
with full-data scores ``∇ log π(θ) = ∇ log p(θ) + Σ_{i=1}^N ∇ log p(y_i | θ)``,
which costs a pass over the data per sample. The cheap alternative is the
*stochastic* KSD (Gorham, Raj & Mackey 2020): the same statistic with the
minibatch scores ``∇ log p(θ) + (N/n) Σ_{i∈B} ∇ log p(y_i | θ)`` an SGLD step
already computes. The MAMBA paper (appendix B.2) reports that the stochastic KSD
tracks the full-data KSD well enough to rank arms.

Here every arm of a grid (step size × batch size, SGLD) runs a fixed number of
steps from the MAP on the paper's logistic regression (N = 10⁵ rows by default),
keeps every 10th state, and both KSDs are computed at the same samples: the
full-data one with the estimator's full-data score, the stochastic one with the
minibatch score at the arm's own batch size (one fresh minibatch per sample,
rows drawn uniformly without replacement, as the step that produced the sample
would draw). Both are the IMQ V-statistic (``c = 1``, ``β = −½``) of
[`kernel_stein_discrepancy`][tfp_sgmcmc.diagnostics.kernel_stein_discrepancy], in the
paper's unit metric and in the samples' own metric (``preconditioner="sample"``,
the library's default for tuning). The page reports Spearman's rank correlation
between the two across arms (all arms, and within each batch size) and whether
both pick the same arm.

Run::

    python examples/stochastic_ksd_study.py --write-docs   # about 5 minutes on 2 busy cores
    python examples/stochastic_ksd_study.py --quick        # smoke test

Writes ``studies/stochastic_ksd.md`` and ``figures/stochastic_ksd.png`` under ``--out``
(default ``out/stochastic_ksd_study/``; ``--write-docs`` for ``docs/``).
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from typing import Any

import _cli
import numpy as np
import tensorflow as tf
from _paper_tables import LoadSampler

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning
from tfp_sgmcmc.models.logistic_regression import log_likelihood, log_prior, logistic_regression
from tfp_sgmcmc.tuning.arms import arm_label
from tfp_sgmcmc.tuning.baselines import run_fixed
from tfp_sgmcmc.tuning.metrics import FullDataScorer

METRICS = {"unit": None, "sample": "sample"}


def environment() -> dict[str, Any]:
    """Commit, library versions and machine of this run."""
    import tensorflow_probability as tfp
    from scipy import __version__ as scipy_version

    commit = _cli.commit()
    return {
        "commit": commit,
        "versions": (
            f"Python {sys.version.split()[0]}, TensorFlow {tf.__version__}, "
            f"TFP {tfp.__version__}, NumPy {np.__version__}, SciPy {scipy_version}, "
            f"tfp_sgmcmc {sg.__version__}"
        ),
        "machine": f"{os.cpu_count()} × {_cli.cpu_name()}, {platform.platform()}",
    }


def minibatch_scores(
    samples: np.ndarray, x: np.ndarray, y: np.ndarray, batch_size: int, seed: int
) -> np.ndarray:
    """``∇ log p(θ_s) + (N/n) Σ_{i∈B_s} ∇ log p(y_i | θ_s)`` for each sample ``θ_s``.

    ``B_s`` is a fresh set of ``n = batch_size`` rows drawn uniformly without
    replacement for each sample; returns ``[m, d]`` (float64).
    """
    rng = np.random.default_rng(seed)
    n_rows = x.shape[0]
    idx = np.stack([rng.choice(n_rows, batch_size, replace=False) for _ in samples])
    scale = n_rows / batch_size

    def one(args: tuple[tf.Tensor, tf.Tensor, tf.Tensor]) -> tf.Tensor:
        theta, xb, yb = args
        with tf.GradientTape() as tape:
            tape.watch(theta)
            lp = log_prior(theta) + scale * tf.reduce_sum(log_likelihood(theta, (xb, yb)))
        return tape.gradient(lp, theta)

    out = []
    for start in range(0, len(samples), 50):  # bounds the [block, n, d] gather
        sl = slice(start, start + 50)
        args = (
            tf.constant(samples[sl], tf.float64),
            tf.constant(x[idx[sl]], tf.float64),
            tf.constant(y[idx[sl]], tf.float64),
        )
        out.append(tf.vectorized_map(one, args).numpy())
    return np.concatenate(out)


def ksd(samples: np.ndarray, scores: np.ndarray, preconditioner: Any) -> float:
    """IMQ KSD (V-statistic, float64); ``+inf`` for a sample the metric cannot whiten."""
    return float(
        sg.kernel_stein_discrepancy(
            tf.constant(samples, tf.float64),
            tf.constant(scores, tf.float64),
            preconditioner=preconditioner,
        )
    )


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of two lists (NaN for fewer than 3 pairs)."""
    from scipy.stats import spearmanr

    if len(a) < 3:
        return math.nan
    return float(spearmanr(a, b).statistic)


def run_arms(args: Any) -> tuple[list[dict], dict[str, Any]]:
    """Runs every arm and computes its two KSDs in both metrics."""
    prob = logistic_regression(num_examples=args.num_examples)
    base = prob.estimator(prob.batch_size_from_fraction(0.01), scheme="random_window")
    theta_map = sg.find_map(base, tf.zeros([prob.num_features], tf.float32)).position
    scorer = FullDataScorer(base, block_size=100)
    x = np.asarray(prob.x_train, np.float64)
    y = np.asarray(prob.y_train, np.float64)
    kernel = tuning.KernelSpec(sg.SGLD, base)
    arms = tuning.grid(step_size=args.step_sizes, batch_fraction=args.batch_fractions)
    rows = []
    for i, arm in enumerate(arms):
        captured: dict[str, np.ndarray] = {}

        def keep(samples: list[np.ndarray], captured: dict = captured) -> float:
            captured["samples"] = np.asarray(samples[0], np.float64)
            return 0.0

        t0 = time.perf_counter()
        rec = run_fixed(
            "arm", [arm], theta_map, kernel,
            budget_per_arm=tuning.steps(args.steps),
            metric=tuning.FunctionMetric(keep, "samples"),
            seed=i, progress=False, sampling=tuning.ArmSampling(thin=args.thin),
        ).records[0]  # fmt: skip
        n = prob.batch_size_from_fraction(arm["batch_fraction"])
        row = {"arm": arm, "batch_size": n, "diverged": bool(rec.diverged)}
        s = captured.get("samples")
        if rec.diverged or s is None or not np.all(np.isfinite(s)):
            row["diverged"] = True
            row.update({f"{k}_{m}": math.inf for k in ("full", "stoch") for m in METRICS})
        else:
            full = np.asarray(scorer([s.astype(np.float32)])[0], np.float64)
            stoch = minibatch_scores(s, x, y, n, seed=1000 + i)
            for m, pre in METRICS.items():
                row[f"full_{m}"] = ksd(s, full, pre)
                row[f"stoch_{m}"] = ksd(s, stoch, pre)
            row["samples"] = int(s.shape[0])
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        print(
            f"{arm_label(arm)}: n = {n}, "
            + ("diverged" if row["diverged"] else
               f"KSD full {row['full_unit']:.4g} stoch {row['stoch_unit']:.4g} (unit); "
               f"full {row['full_sample']:.4g} stoch {row['stoch_sample']:.4g} (sample)")
            + f" [{row['seconds']:.1f} s]",
            flush=True,
        )  # fmt: skip
    return rows, {"num_train": prob.num_train}


def summary(rows: list[dict], metric: str, fractions: list[float]) -> dict[str, Any]:
    """Spearman (all arms and per batch size) and the two picks in one metric."""
    ok = [
        r for r in rows
        if math.isfinite(r[f"full_{metric}"]) and math.isfinite(r[f"stoch_{metric}"])
    ]  # fmt: skip
    full = [r[f"full_{metric}"] for r in ok]
    stoch = [r[f"stoch_{metric}"] for r in ok]
    out: dict[str, Any] = {"arms": len(ok), "rho": spearman(full, stoch), "per_batch": {}}
    for f in fractions:
        sub = [r for r in ok if r["arm"]["batch_fraction"] == f]
        out["per_batch"][f] = spearman(
            [r[f"full_{metric}"] for r in sub], [r[f"stoch_{metric}"] for r in sub]
        )
    if ok:
        best_full = min(range(len(ok)), key=lambda j: full[j])
        best_stoch = min(range(len(ok)), key=lambda j: stoch[j])
        order = sorted(range(len(ok)), key=lambda j: full[j])
        out["best_full"] = ok[best_full]
        out["best_stoch"] = ok[best_stoch]
        out["same"] = best_full == best_stoch
        out["rank_of_stoch_pick"] = order.index(best_stoch) + 1
        out["ratio"] = full[best_stoch] / full[best_full]
    return out


def plot(rows: list[dict], fractions: list[float], path: str) -> None:
    """Stochastic against full-data KSD (log-log), one panel per metric."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6), dpi=80)
    for ax, (metric, title) in zip(
        axes, [("unit", "unit metric (the paper's KSD)"), ("sample", "samples' own metric")]
    ):
        lo, hi = math.inf, 0.0
        for k, f in enumerate(fractions):
            sub = [
                r for r in rows
                if r["arm"]["batch_fraction"] == f and math.isfinite(r[f"full_{metric}"])
                and math.isfinite(r[f"stoch_{metric}"])
            ]  # fmt: skip
            if not sub:
                continue
            xs = [r[f"full_{metric}"] for r in sub]
            ys = [r[f"stoch_{metric}"] for r in sub]
            lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
            ax.scatter(xs, ys, s=14 + 10 * np.log10([r["arm"]["step_size"] / 1e-8 for r in sub]),
                       color=f"C{k}", label=f"batch {100 * f:g}%", alpha=0.8)  # fmt: skip
        if hi > 0:
            ax.plot([lo, hi], [lo, hi], "k:", lw=0.8, label="y = x")
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel("full-data KSD", fontsize=8)
        ax.set_ylabel("stochastic KSD", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, frameon=False)
    fig.suptitle("SGLD arms (marker size grows with the step size)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def page(rows, info, args, env, load, wall, figure) -> list[str]:
    """The study's markdown page."""
    fr = args.batch_fractions
    sums = {m: summary(rows, m, fr) for m in METRICS}
    n_div = sum(r["diverged"] for r in rows)
    lines = [
        "# Stochastic against full-data KSD along SGLD arms",
        "",
        f"Command: `{_cli.command_line()}` (wall time {wall:.0f} s).",
        "",
        f"Commit {env['commit']}; {env['versions']}; {env['machine']}; load average "
        f"{load['mean']:.1f} (min {load['min']:.1f}, max {load['max']:.1f}) during the run.",
        "",
        f"The MAMBA paper's logistic regression (`tfp_sgmcmc.models.logistic_regression`) with "
        f"N = {args.num_examples:,} rows ({info['num_train']:,} for training), d = 10. Each of "
        f"{len(rows)} SGLD arms (step sizes {', '.join(f'{s:.3g}' for s in args.step_sizes)} × "
        f"batch {', '.join(f'{100 * f:g}%' for f in fr)}) runs {args.steps} steps from the MAP "
        f"(a fixed step count, so a rerun gives the same samples and the same table) and keeps "
        f"every {args.thin}th state. At those samples the full-data KSD uses "
        "`∇ log p(θ) + Σ_i ∇ log p(y_i | θ)` over all training rows, the stochastic KSD the "
        "minibatch score `∇ log p(θ) + (N/n) Σ_{i∈B} ∇ log p(y_i | θ)` at the arm's own batch "
        "size n (one fresh minibatch per sample). Both are the IMQ V-statistic (c = 1, β = −½) "
        "of `sg.kernel_stein_discrepancy`, in the unit metric (the paper's KSD, "
        '`preconditioner=None`) and in the samples\' own metric (`preconditioner="sample"`, '
        "the tuner's default up to d = 100). Spearman's ρ is over the arms that did not "
        "diverge "
        f"({len(rows) - n_div} of {len(rows)}). The MAMBA paper (appendix B.2) reports that "
        "the stochastic KSD tracks the full-data KSD well enough to rank arms.",
        "",
        f"![stochastic against full-data KSD]({figure})",
        "",
        "Stochastic against full-data KSD of every arm that did not diverge (log-log; colour: "
        "batch size; the dotted line is y = x).",
        "",
        "| metric | Spearman ρ, all arms | "
        + " | ".join(f"ρ within batch {100 * f:g}%" for f in fr)
        + " | full KSD's pick | stochastic KSD's pick | same arm | full-KSD rank of the "
        "stochastic pick | its full KSD / the best |",
        "|---|---|" + "---|" * len(fr) + "---|---|---|---|---|",
    ]
    for m, s in sums.items():
        if "best_full" not in s:
            continue
        lines.append(
            f"| {m} | {s['rho']:.3f} | "
            + " | ".join(f"{s['per_batch'][f]:.3f}" for f in fr)
            + f" | {arm_label(s['best_full']['arm'])} | "
            f"{arm_label(s['best_stoch']['arm'])} | {'yes' if s['same'] else 'no'} | "
            f"{s['rank_of_stoch_pick']} of {s['arms']} | {s['ratio']:.3g} |"
        )
    lines += [
        "",
        'Every arm (KSD values; "diverged": the chain left the floats):',
        "",
        "| step size | batch | n | full KSD (unit) | stochastic KSD (unit) | full KSD (sample) "
        "| stochastic KSD (sample) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a = r["arm"]
        head = f"| {a['step_size']:.3g} | {100 * a['batch_fraction']:g}% | {r['batch_size']} |"
        if r["diverged"]:
            lines.append(head + " diverged | diverged | diverged | diverged |")
        else:
            lines.append(
                head + f" {r['full_unit']:.4g} | {r['stoch_unit']:.4g} | {r['full_sample']:.4g} "
                f"| {r['stoch_sample']:.4g} |"
            )
    return lines


def main() -> None:
    ap = _cli.parser(
        "stochastic_ksd_study",
        __doc__.split("\n\n")[0],
        quick_help="N = 2·10^4, 6 arms of 1000 steps (under a minute)",
    )
    ap.add_argument("--num-examples", type=_cli.positive_int, default=None,
                    help="N, rows in total (default 100000; quick 20000)")  # fmt: skip
    ap.add_argument("--steps", type=_cli.positive_int, default=None,
                    help="SGLD steps per arm (default 5000; quick 1000)")  # fmt: skip
    ap.add_argument("--thin", type=_cli.positive_int, default=10, help="keep every k-th state")
    args = ap.parse_args()
    outputs = _cli.outputs(args)
    quick = args.quick
    args.num_examples = args.num_examples or (20_000 if quick else 100_000)
    args.steps = args.steps or (1000 if quick else 5000)
    if args.steps < 3 * args.thin:
        ap.error("--steps must give at least 3 thinned samples (steps >= 3 * thin)")
    args.step_sizes = (
        [1e-5, 10**-5.5, 1e-6] if quick else [float(10**e) for e in np.arange(-4.0, -7.01, -0.5)]
    )
    args.batch_fractions = [0.01, 0.001] if quick else [0.1, 0.01, 0.001]
    env = environment()
    load = LoadSampler(period=10.0)
    t0 = time.time()
    rows, info = run_arms(args)
    wall = time.time() - t0
    load.stop()
    fig_path = outputs.figure("stochastic_ksd.png")
    plot(rows, args.batch_fractions, fig_path)
    lines = page(rows, info, args, env, load.summary(), wall,
                 f"../figures/{os.path.basename(fig_path)}")  # fmt: skip
    path = outputs.write_study("stochastic_ksd.md", "\n".join(lines))
    print("\n".join(lines[lines.index("") + 1 :]))
    print(f"wrote {path} and {fig_path}")


if __name__ == "__main__":
    main()
