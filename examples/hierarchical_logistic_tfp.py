"""Study: a TFP hierarchical logistic regression with constrained scales, SG-MCMC vs NUTS.

Data: scikit-learn's breast-cancer set (569 tumours, 30 standardised
features, shipped with scikit-learn, no download). Its features come in three
groups of ten (mean, standard error and "worst" value of ten cell-nucleus
measurements); each group g has its own prior scale ``τ_g``:

```none
α ~ N(0, 5²),  τ_g ~ HalfNormal(1) (g = 1..3),  β̃_j ~ N(0, 1),  β_j = τ_{g(j)} β̃_j,
y_i | α, β ~ Bernoulli(logit⁻¹(α + x_iᵀβ))
```

written as a ``tfd.JointDistributionNamedAutoBatched`` and sampled through
:class:`tfp_sgmcmc.JointPosterior` on the unconstrained space (``τ`` through
TFP's default ``Softplus``). Ground truth: full-batch NUTS from TFP on the
same unconstrained density (``JointPosterior.target_log_prob_fn``), dual
averaging during warm-up. Samplers: SGLD-CV (control variates at the MAP),
SGHMC and MAMBA-tuned SGLD, each started at the MAP, four chains. Reported:
ξ, the relative error of the posterior standard deviations (constrained
space, all 34 parameters, against NUTS), and the KSD (IMQ, full-data
unconstrained scores, 500 thinned draws pooled over chains).

Run::

    nice -n 10 python examples/hierarchical_logistic_tfp.py            # ~10 min, 2 cores
    nice -n 10 python examples/hierarchical_logistic_tfp.py --quick    # smoke run

Writes ``results.json``, ``table.txt`` (a Markdown table) and ``sd_vs_nuts.png`` under ``--out``
(default ``out/hierarchical_logistic_tfp/``); ``--write-docs`` also writes the
study page and figure under ``docs/``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import _cli  # first: quiet TensorFlow start-up
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import tuning  # noqa: E402

tfd = tfp.distributions
NAME = "hierarchical_logistic_tfp"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def load_data() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    x = (x - x.mean(0)) / x.std(0)
    return x.astype(np.float64), y.astype(np.float64)


def make_posterior(x: np.ndarray, y: np.ndarray, batch_size: int) -> sg.JointPosterior:
    d = x.shape[1]
    groups = np.repeat(np.arange(3), d // 3)  # mean / s.e. / worst
    one = tf.constant(1.0, tf.float64)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            alpha=tfd.Normal(0.0 * one, 5.0 * one),
            tau=tfd.HalfNormal(tf.ones([3], tf.float64)),
            # Non-centred: β = τ_g(j) β̃ with β̃ ~ N(0, 1). The centred form β ~ N(0, τ²) has
            # no mode (its density grows without bound as τ → 0 with β → 0, the funnel's
            # neck), so a MAP start, NUTS warm-up and SG chains all collapse into the neck.
            beta_raw=tfd.Normal(tf.zeros([d], tf.float64), 1.0),
        )
    )

    def likelihood(p, batch):
        xb, _ = batch
        beta = tf.gather(p["tau"], groups, axis=-1) * p["beta_raw"]
        logits = p["alpha"][..., None] + tf.einsum("nd,...d->...n", xb, beta)
        return tfd.Bernoulli(logits=logits)

    return sg.JointPosterior(prior, likelihood, (x, y), batch_size=batch_size)


def run_nuts(post: sg.JointPosterior, init: list, num_warmup: int, num_results: int, seed):
    kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
        tfp.mcmc.NoUTurnSampler(post.target_log_prob_fn, step_size=0.05),
        num_adaptation_steps=int(0.8 * num_warmup),
    )

    @tf.function(jit_compile=True)
    def run():
        return tfp.mcmc.sample_chain(
            num_results,
            init,
            kernel=kernel,
            num_burnin_steps=num_warmup,
            trace_fn=lambda _, r: r.inner_results.is_accepted,
            seed=seed,
        )

    return run()


def run_sg(kernel, init: list, num_steps: int, seed):
    @tf.function(jit_compile=True)
    def run():
        return tfp.mcmc.sample_chain(
            num_steps, init, kernel=kernel, trace_fn=lambda _, r: r.diverged, seed=seed
        )

    return run()


def summarise(post, z, nuts_sd, num_burn, max_ksd, score_fn):
    """ξ on the constrained draws and KSD on the unconstrained ones."""
    kept = [p[num_burn:] for p in z]
    theta = post.constrain(kept, as_dict=False)
    flat = np.concatenate(
        [np.reshape(t.numpy(), (t.shape[0] * t.shape[1], -1)) for t in theta], axis=1
    )
    sd = flat.std(0)
    xi = float(sg.relative_std_error(sd, nuts_sd))
    pooled = [tf.reshape(p, [-1, *p.shape[2:]]) for p in kept]
    n = int(pooled[0].shape[0])
    idx = np.linspace(0, n - 1, min(max_ksd, n)).astype(int)
    sub = [tf.gather(p, idx) for p in pooled]
    ksd = float(sg.kernel_stein_discrepancy(sub, score_fn(sub)))
    return xi, ksd, sd


def page(table: str, rows: list, timings: dict, suffix: str, args: argparse.Namespace) -> str:
    title = "TFP hierarchical logistic regression: SG-MCMC against NUTS"
    title += " (quick run)" if suffix else ""
    return f"""# {title}

Command: `{_cli.command_line()}`

{_cli.provenance()}

A TFP model as a TFP user writes it, a `tfd.JointDistributionNamedAutoBatched` prior with three
positive group scales and a Bernoulli likelihood, sampled through `tfp_sgmcmc.JointPosterior`
(the chain runs on the unconstrained space; `τ` through TFP's default `Softplus`), against a
full-batch NUTS ground truth from `tfp.mcmc.NoUTurnSampler` on the same density.

```none
α ~ N(0, 5²),  τ_g ~ HalfNormal(1) (g = 1..3),  β̃_j ~ N(0, 1),  β_j = τ_g(j) β̃_j,
y_i ~ Bernoulli(logit⁻¹(α + x_iᵀβ))
```

Data: scikit-learn's breast-cancer set (N = 569, 30 standardised features in three groups of
ten: mean, standard error and worst value of ten nucleus measurements), shipped with
scikit-learn. Four chains per sampler, all started at the MAP. ξ is the relative error of the
34 posterior standard deviations in the constrained space against NUTS,
`‖σ̂ − σ_NUTS‖₂ / ‖σ_NUTS‖₂` (`tfp_sgmcmc.relative_std_error`); KSD is the IMQ kernel Stein
discrepancy of 500 draws (evenly thinned, pooled over chains) with full-data scores of the
unconstrained density the chains target (`JointPosterior.score_fn`).

![posterior sd of every parameter, SG samplers against NUTS](../figures/{NAME}{suffix}.png)

{table}
Budgets are sampler steps, so a rerun gives the same table; the seconds column is wall time on
the machine named above, for information only.

Settings: SGLD-CV uses control variates at the MAP (`JointPosterior.control_variates`);
SGHMC the minibatch estimator; MAMBA tunes SGLD's step size (6 values) and batch size
(16, 32, 64) by successive halving on KSD with a budget in sampler steps; MAP by L-BFGS on
the full data ({timings["map"]:.0f} s).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs (smoke test)")
    parser.add_argument("--out", default=None, help=f"output directory (default out/{NAME}/)")
    parser.add_argument(
        "--write-docs", action="store_true", help="also write the docs/studies page and figure"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = args.out or os.path.join("out", NAME + ("_quick" if args.quick else ""))
    os.makedirs(out, exist_ok=True)

    q = args.quick
    chains = 4
    nuts_warmup, nuts_results = (200, 200) if q else (1000, 1000)
    sg_steps, sg_burn = (2_000, 500) if q else (20_000, 5_000)
    batch = 32
    x, y = load_data()
    n_data = x.shape[0]
    post = make_posterior(x, y, batch_size=batch)
    score_fn = post.score_fn()
    timings = {}

    t0 = time.perf_counter()
    z_map = post.find_map()
    init = [tf.stack([p] * chains) for p in z_map]
    timings["map"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    z_nuts, accepted = run_nuts(post, init, nuts_warmup, nuts_results, (args.seed, 1))
    timings["nuts"] = time.perf_counter() - t0
    theta_nuts = post.constrain(z_nuts, as_dict=False)
    nuts_flat = np.concatenate(
        [np.reshape(t.numpy(), (t.shape[0] * t.shape[1], -1)) for t in theta_nuts], axis=1
    )
    nuts_sd = nuts_flat.std(0)
    nuts_ksd = summarise(post, z_nuts, nuts_sd, 0, 500, score_fn)[1]
    ess = tfp.mcmc.effective_sample_size(z_nuts, cross_chain_dims=[1, 1, 1])
    min_ess = float(min(tf.reduce_min(e) for e in ess))

    rows = [
        {
            "sampler": "NUTS (full batch, reference)",
            "hyperparameters": f"dual averaging, {nuts_warmup} warm-up",
            "xi": 0.0,
            "ksd": nuts_ksd,
            "seconds": timings["nuts"],
            "note": f"acceptance {float(tf.reduce_mean(tf.cast(accepted, tf.float64))):.2f}, "
            f"min ESS {min_ess:.0f}",
        }
    ]
    sds = {}

    # SGLD-CV: control variates at the MAP; step size 1/N (the MAMBA paper's heuristic).
    cv = post.control_variates(z_map)
    kernels = {
        "SGLD-CV": (sg.SGLD(cv, step_size=1.0 / n_data), f"ε = 1/N, n = {batch}, CV at MAP"),
        "SGHMC": (
            sg.SGHMC(post.estimator, step_size=0.1 / n_data, num_leapfrog_steps=5),
            f"ε = 0.1/N, L = 5, n = {batch}",
        ),
    }
    # MAMBA-tuned SGLD: step size × batch size by successive halving on KSD.
    t0 = time.perf_counter()
    arms = tuning.grid(
        step_size=[10.0**k for k in (-2.5, -3.0, -3.5, -4.0, -4.5, -5.0)],
        batch_size=[16, 32, 64],
    )
    tuned = tuning.MAMBA(
        arms,
        z_map,
        tuning.KernelSpec(sg.SGLD, post.estimator),
        budget=tuning.steps(30_000 if q else 300_000),
        metric=tuning.KSDMetric(max_samples=200),
        seed=args.seed,
        progress=False,
    ).run()
    timings["mamba"] = time.perf_counter() - t0
    arm = tuned.best_arm
    kernels["MAMBA-SGLD"] = (
        tuned.kernel(),
        f"ε = {arm['step_size']:.2g}, n = {arm['batch_size']} (MAMBA, {timings['mamba']:.0f} s)",
    )

    for i, (name, (kernel, hyper)) in enumerate(kernels.items()):
        t0 = time.perf_counter()
        z, diverged = run_sg(kernel, init, sg_steps, (args.seed, 10 + i))
        secs = time.perf_counter() - t0
        if bool(tf.reduce_any(diverged)):
            rows.append(
                dict(
                    sampler=name,
                    hyperparameters=hyper,
                    xi=float("nan"),
                    ksd=float("nan"),
                    seconds=secs,
                    note="diverged",
                )
            )
            continue
        xi, ksd, sd = summarise(post, z, nuts_sd, sg_burn, 500, score_fn)
        sds[name] = sd
        rows.append(
            dict(
                sampler=name,
                hyperparameters=hyper,
                xi=xi,
                ksd=ksd,
                seconds=secs,
                note=f"{sg_steps} steps, {sg_burn} burn-in",
            )
        )
        print(f"{name:12s} xi = {xi:.3f}  KSD = {ksd:.3g}  ({secs:.0f} s)", flush=True)

    header = (
        "| sampler | hyperparameters | ξ (sd error) | KSD | seconds | note |\n"
        "|---|---|---|---|---|---|\n"
    )
    table = header + "".join(
        f"| {r['sampler']} | {r['hyperparameters']} | {r['xi']:.3f} | {r['ksd']:.3g} | "
        f"{r['seconds']:.0f} | {r['note']} |\n"
        for r in rows
    )
    print(table)
    names = ["alpha"] + [f"tau[{g}]" for g in range(3)] + [f"beta[{j}]" for j in range(30)]
    # The state is in post.names order (sorted keys: alpha, beta, tau); constrain keeps it.
    order = post.names
    labels = []
    for part in order:
        labels += [n for n in names if n.startswith(part)]
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(
            {
                "rows": rows,
                "timings": timings,
                "nuts_sd": dict(zip(labels, nuts_sd.tolist())),
                "sg_sd": {k: dict(zip(labels, v.tolist())) for k, v in sds.items()},
                "settings": dict(
                    chains=chains,
                    nuts=[nuts_warmup, nuts_results],
                    sg=[sg_steps, sg_burn],
                    batch=batch,
                    seed=args.seed,
                ),
            },
            f,
            indent=1,
        )
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(table)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    lim = [0.8 * nuts_sd.min(), 1.2 * nuts_sd.max()]
    ax.plot(lim, lim, "k:", lw=1)
    for (name, sd), marker in zip(sds.items(), "os^"):
        ax.scatter(nuts_sd, sd, s=18, marker=marker, label=name, alpha=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("posterior sd, NUTS (full batch)")
    ax.set_ylabel("posterior sd, SG sampler")
    ax.set_title("Breast cancer, hierarchical logistic (34 parameters)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "sd_vs_nuts.png"), dpi=120)
    if args.write_docs:
        suffix = "_quick" if q else ""
        fig.savefig(os.path.join(ROOT, "docs", "figures", f"{NAME}{suffix}.png"), dpi=120)
        with open(os.path.join(ROOT, "docs", "studies", f"{NAME}{suffix}.md"), "w") as f:
            f.write(page(table, rows, timings, suffix, args))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
