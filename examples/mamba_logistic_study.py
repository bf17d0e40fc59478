"""The MAMBA paper's §4.1 logistic-regression study at CPU scale (Tables 1, 4, 5).

Six samplers (SGLD, SGLD-CV, SGHMC, SGHMC-CV, SGNHT, SGNHT-CV) are each tuned by

* MAMBA-KSD  (the paper's grid: 14 step sizes 10^-1 ... 10^-7.5 × batch
  {100, 10, 1, 0.1}% [× L {5, 10}], i.e. M = 56 arms (112 for SGHMC),
  η = 3, budget T),
* MAMBA-FSSD (same grid, FSSD-opt),
* grid search (10% batch, the same step sizes [× L], a fixed budget per
  configuration, test log-loss, started from the MAP plus noise, as the paper),
* grid search with KSD (the MAMBA grid, every configuration run for R = the
  budget MAMBA-KSD's survivor received, as the journal paper),
* the heuristic (ε = 1/N with N = 10⁶, 10% batch, L = 10);

then every tuned sampler runs the same fixed budget from θ_true and we
report KSD (full-data scores, every 10th sample), ξ(σ̂) = ‖σ̂ − σ_HMC‖/‖σ_HMC‖
against the stored ground truth, predictive accuracy and samples drawn. It also
measures the tuning cost: exhaustive grid search with KSD (same grid as MAMBA,
one configuration = the survivor's budget R) vs MAMBA-KSD: the KSD of the two
chosen arms under the same evaluation run, and the two tuners' total
budgets.

Budgets. The paper's are wall-clock seconds; here they are per-example likelihood
gradient evaluations (``tuning.gradient_evaluations``; the options are
``_paper_tables.add_budget_options``'), converted from the paper's seconds at
``IDLE_GRADIENTS_PER_SECOND``, so a rerun gives the same table on any machine. The
time budgets remain available (``--budget``, ``--grid-seconds``, ``--eval-seconds``).

Run::

    python examples/mamba_logistic_study.py --quick   # smoke test (SGLD, 9 arms)
    python examples/mamba_logistic_study.py           # full (long on 2 busy cores)

Writes ``studies/mamba_logistic.md`` and ``figures/mamba_logistic_*.png`` under ``--out``
(default ``out/mamba_logistic_study/``; ``--write-docs`` for ``docs/``).
SGHMC uses the SGMCMCJax update order (``order="explicit"``) and friction
α = 0.01, SGNHT diffusion a = 0.01, as the paper's code.
"""

from __future__ import annotations

import os
import time
from typing import Any

import _cli
import numpy as np
import tensorflow as tf
from _paper_tables import (
    SAMPLERS,
    add_budget_options,
    budget_json,
    budget_text,
    budgets,
    kernel_class,
    num,
)

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning
from tfp_sgmcmc.models.logistic_regression import logistic_regression
from tfp_sgmcmc.tuning.arms import arm_label
from tfp_sgmcmc.tuning.baselines import heuristic_arm, run_fixed

#: Per-example likelihood gradients per second of SGLD on this model at a 1% batch
#: (8,000 rows) on an idle 2-core CPU, rounded: the rate at which the paper's time budgets
#: are converted to the deterministic defaults below (``mamba_tuning_cost.py``'s T =
#: 1.5e8 gradients is its 10 s).
IDLE_GRADIENTS_PER_SECOND = 1.5e7

#: Default budgets (full, quick) in per-example gradient evaluations. Full: the paper's
#: scale in seconds at that rate (T = 20 s, 1 s per grid configuration, 10 s per
#: evaluation); quick: a smoke-sized fraction of it.
DEFAULT_MAMBA_GRADIENTS = (20 * IDLE_GRADIENTS_PER_SECOND, 2e7)
DEFAULT_GRID_GRADIENTS = (1 * IDLE_GRADIENTS_PER_SECOND, 2e6)
DEFAULT_EVAL_GRADIENTS = (10 * IDLE_GRADIENTS_PER_SECOND, 4e6)
#: What ``--quick`` runs: one sampler on a 9-arm grid (two MAMBA rounds).
QUICK_SAMPLERS = "SGLD"


def _parser() -> Any:
    ap = _cli.parser(
        "mamba_logistic_study",
        __doc__.split("\n\n")[0],
        "SGLD on a 9-arm grid with small gradient budgets (smoke)",
    )
    ap.add_argument(
        "--samplers",
        default=None,
        help=f"comma-separated subset of {','.join(SAMPLERS)} (default: all six; "
        f"quick {QUICK_SAMPLERS})",
    )
    add_budget_options(ap, DEFAULT_MAMBA_GRADIENTS, DEFAULT_GRID_GRADIENTS, DEFAULT_EVAL_GRADIENTS)
    return ap


def _budgets(args: Any) -> dict[str, tuning.Budget]:
    return budgets(args, DEFAULT_MAMBA_GRADIENTS, DEFAULT_GRID_GRADIENTS, DEFAULT_EVAL_GRADIENTS)


def main() -> None:
    ap = _parser()
    args = ap.parse_args()
    args.outputs = _cli.outputs(args)
    quick = args.quick
    if args.samplers is None:
        args.samplers = QUICK_SAMPLERS if quick else ",".join(SAMPLERS)
    samplers = [name.strip() for name in args.samplers.split(",") if name.strip()]
    unknown = [name for name in samplers if name not in SAMPLERS]
    if unknown or not samplers:
        ap.error(
            f"--samplers: unknown sampler(s) {unknown}; use a comma-separated subset of "
            f"{','.join(SAMPLERS)}"
        )
    bud = _budgets(args)
    steps = tuning.log10_grid(-5, -7, 0.25) if quick else tuning.log10_grid(-1, -7.5, 0.5)
    fractions = [0.01] if quick else [1.0, 0.1, 0.01, 0.001]
    leapfrogs = [5] if quick else [5, 10]

    t0 = time.time()
    prob = logistic_regression()
    big_n = prob.num_examples  # the authors' heuristic uses the full N = 1e6
    base = prob.estimator(prob.batch_size_from_fraction(0.01), scheme="random_window")
    theta_map = sg.find_map(base, tf.zeros([prob.num_features], tf.float32)).position
    cv = sg.ControlVariateEstimator(base, theta_map)
    theta_true = tf.constant(prob.theta_true, tf.float32)
    gt = prob.ground_truth()
    # The paper's KSD, as the paper ran it.
    ksd = tuning.KSDMetric(max_samples=200, preconditioner=None, check_validity=False)
    logloss = tuning.FunctionMetric(
        lambda s: prob.test_log_loss(s[0], max_samples=100), "test log-loss"
    )
    rows, cost_rows = [], []
    for name in samplers:
        cls, kw = kernel_class(name)
        est = cv if name.endswith("-CV") else base
        factory = tuning.KernelSpec(cls, est, **kw)
        axes = {"step_size": steps, "batch_fraction": fractions}
        if cls is sg.SGHMC:
            axes["num_leapfrog_steps"] = leapfrogs
        arms = tuning.grid(**axes)
        common = dict(kernel=factory, progress=False)
        res = {}
        res["MAMBA-KSD"] = tuning.MAMBA(
            arms, theta_map, budget=bud["mamba"], metric=ksd, **common
        ).run()
        res["MAMBA-FSSD"] = tuning.MAMBA(
            arms, theta_map, budget=bud["mamba"], metric=tuning.FSSDMetric(), **common
        ).run()
        grid_arms = tuning.grid(**{**axes, "batch_fraction": [0.1]})
        start = theta_map + 0.2 * tf.random.stateless_normal([prob.num_features], [1, 2])
        res["Grid"] = tuning.grid_search(
            grid_arms, start, budget_per_arm=bud["grid"], metric=logloss, **common
        )
        h_arm = heuristic_arm(big_n, 10 if cls is sg.SGHMC else None)
        res["Heuristic"] = run_fixed(
            "heuristic", [h_arm], theta_map, budget_per_arm=tuning.steps(1), metric=ksd, **common
        )
        res["MAMBA-KSD"].plot(
            args.outputs.figure(f"mamba_logistic_{name.lower()}.png"), title=f"MAMBA-KSD, {name}"
        )
        # Tuning cost: exhaustive grid with KSD, each configuration for R (the
        # survivor's budget in MAMBA, in the budget's unit), vs MAMBA-KSD's total.
        r_total = sum(res["MAMBA-KSD"].per_arm_budgets)
        res["Grid-KSD"] = tuning.grid_search(
            arms,
            theta_map,
            budget_per_arm=tuning.Budget(r_total, bud["mamba"].unit),
            metric=ksd,
            **common,
        )
        evals, by_arm = {}, {}
        for method, r in res.items():
            # An arm's evaluation is a property of the arm (same seed, same budget): two
            # methods that chose the same arm share one evaluation run, so their
            # numbers differ only where their choices do.
            key = arm_label(r.best_arm)
            if key not in by_arm:
                by_arm[key] = run_fixed(
                    "eval",
                    [r.best_arm],
                    theta_true,
                    budget_per_arm=bud["eval"],
                    metric=ksd,
                    **common,
                )
            ev = by_arm[key]
            rec = ev.records[0]
            s = np.asarray(ev.best_samples)
            if rec.diverged:
                xi, acc = float("inf"), float("nan")
            elif s.shape[0] < 2:  # too few thinned samples in the evaluation budget
                xi, acc = float("nan"), float("nan")
            else:
                xi = (
                    float(
                        np.linalg.norm(s.std(0) - np.asarray(gt["std"])) / np.linalg.norm(gt["std"])
                    )
                    if gt
                    else float("nan")
                )
                acc = prob.predictive_accuracy(s)
            evals[method] = rec.metric
            rows.append(
                (
                    name,
                    method,
                    arm_label(r.best_arm),
                    rec.metric,
                    xi,
                    acc,
                    rec.steps,
                    r.budget_used,
                    r.total_sampling_seconds,
                )
            )
            print(
                f"{name:9s} {method:11s} {arm_label(r.best_arm):55s} "
                f"KSD {rec.metric:10.4g}  xi {100 * xi:8.1f}%  acc {acc:.4f}  "
                f"samples {rec.steps}",
                flush=True,
            )
        cost_rows.append(
            (name, res["MAMBA-KSD"], res["Grid-KSD"], evals["MAMBA-KSD"], evals["Grid-KSD"])
        )
    wall = time.time() - t0
    write_report(rows, cost_rows, args, bud, gt, wall)


def _checks(rows: list, samplers: list[str]) -> list[str]:
    """The paper's qualitative claims (docs/algorithms.md#exp-logistic), checked on our table."""
    ksd = {(r[0], r[1]): r[3] for r in rows}
    out = []
    pairs = [
        (s, s + "-CV")
        for s in ("SGLD", "SGHMC", "SGNHT")
        if s in samplers and s + "-CV" in samplers
    ]
    for s, cv in pairs:
        a, b = ksd[(s, "MAMBA-KSD")], ksd[(cv, "MAMBA-KSD")]
        out.append(
            f"- CV lowers the KSD of MAMBA-KSD's arm for {s}: {a:.4g} → {b:.4g} "
            f"({'yes' if b < a else 'NO'})."
        )
    for s in ("SGHMC", "SGHMC-CV"):
        if s in samplers:
            h = ksd[(s, "Heuristic")]
            out.append(
                f"- Heuristic {s} blows up (paper: KSD ≳ 5·10⁴): KSD {h:.4g} "
                f"({'yes' if not np.isfinite(h) or h > 1e4 else 'NO'})."
            )
    wins = [
        s for s in samplers if ksd[(s, "MAMBA-KSD")] <= min(ksd[(s, "Grid")], ksd[(s, "Heuristic")])
    ]
    out.append(
        f"- MAMBA-KSD's KSD ≤ both grid (log-loss) and heuristic for {len(wins)} of "
        f"{len(samplers)} samplers (paper: 5 of 6): {', '.join(wins) or 'none'}."
    )
    return out


def write_report(rows, cost_rows, args, bud, gt, wall) -> None:
    samplers = list(dict.fromkeys(r[0] for r in rows))
    rate = IDLE_GRADIENTS_PER_SECOND
    b = {k: budget_json(x) for k, x in bud.items()}
    trims = (
        " This quick run is a smoke version: one sampler (SGLD), log10 ε ∈ {−5, −5.25, …, −7} "
        "× batch 1% (9 arms instead of 56), budgets at most a seventh of the full run's; "
        "its picks are not the paper's comparison."
        if args.quick
        else ""
    )
    lines = [
        "# MAMBA study: logistic regression (paper §4.1, CPU scale"
        + (", quick run)" if args.quick else ")"),
        "",
        f"Regenerate: `{_cli.command_line()}`",
        "",
        _cli.provenance(),
        "",
        f"MAMBA budget T = {budget_text(b['mamba'], rate)} per tuning run (η = 3) over the "
        f"grid; grid search (log-loss) {budget_text(b['grid'], rate)} per configuration "
        "at 10% batch from the MAP plus N(0, 0.2²) noise; grid search with KSD runs every MAMBA "
        "arm for R, the budget of MAMBA-KSD's survivor. Each tuned sampler then runs "
        f"{budget_text(b['eval'], rate)} from θ_true (the same seed for every method; methods "
        "that chose the same arm share one evaluation run). KSD: IMQ, full-data scores, every "
        "10th sample (at most 200 evenly spaced). ξ(σ̂) = ‖σ̂ − σ_HMC‖/‖σ_HMC‖ vs the stored "
        "HMC ground truth" + ("" if gt else " (ground truth missing: NaN)") + "; samples = "
        "steps of the evaluation run. The budgets are per-example likelihood gradient "
        "evaluations (a control-variate step counts its two minibatch gradients), so every "
        "number except the seconds is the same on any machine and load; the idle seconds "
        f"quoted convert at {num(rate)} gradients/s (SGLD at a 1% batch)." + trims,
        "",
        f"Wall time of this run: {wall:.0f} s.",
        "",
        # The plots come before the wide table: one per sampler, tiled in one paragraph.
        "MAMBA-KSD's KSD of every arm by round, one plot per sampler (colour: batch size; "
        "red: the chosen arm; arms plotted at the top had no thinned sample in their budget "
        "or diverged):",
        "",
        " ".join(
            f"![MAMBA-KSD, {n}](../figures/"
            f"{args.outputs.name(f'mamba_logistic_{n.lower()}.png')})"
            for n in samplers
        ),
        "",
        "| sampler | method | chosen arm | KSD | ξ(σ̂) % | accuracy | samples | tuning budget spent "
        "| tuning sampling s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, method, arm, k, xi, acc, n, spent, ts in rows:
        lines.append(
            f"| {name} | {method} | {arm} | {k:.4g} | {100 * xi:.1f} | {acc:.4f} | {n} "
            f"| {num(spent)} | {ts:.1f} |"
        )
    lines += ["", "## The paper's qualitative claims", ""] + _checks(rows, samplers)
    lines += [
        "",
        "## Tuning cost: MAMBA-KSD vs exhaustive grid search with KSD",
        "",
        "KSD of each tuner's chosen arm in the evaluation run above (same seed, same "
        "budget); cost = the tuner's total per-example gradient evaluations (sampling "
        "seconds, compile and metric time excluded, are given for information).",
        "",
        "| sampler | MAMBA-KSD arm KSD | grid-KSD arm KSD | KSD ratio | MAMBA gradients "
        "| grid-KSD gradients | cost ratio | same arm | MAMBA sampling s "
        "| grid-KSD sampling s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m, g, km, kg in cost_rows:
        lines.append(
            f"| {name} | {km:.4g} | {kg:.4g} | {km / kg:.2f} | {num(m.budget_used)} | "
            f"{num(g.budget_used)} | {m.budget_used / g.budget_used:.3f} | "
            f"{'yes' if m.best_arm == g.best_arm else 'no'} | "
            f"{m.total_sampling_seconds:.1f} | {g.total_sampling_seconds:.1f} |"
        )
    t = float(bud["mamba"].amount)
    lines += [
        "",
        "Budget honesty (MAMBA-KSD): the budget spent vs T, with sampling, compile "
        "and metric seconds reported apart.",
        "",
        "| sampler | T | spent | deviation % | sampling s | compile s | metric s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m, _g, _km, _kg in cost_rows:
        dev = 100 * (m.budget_used - t) / t
        lines.append(
            f"| {name} | {num(t)} | {num(m.budget_used)} | {dev:+.1f} | "
            f"{m.total_sampling_seconds:.1f} | {m.total_compile_seconds:.1f} | "
            f"{m.total_metric_seconds:.1f} |"
        )
    lines += [
        "",
        "(A diverged arm stops early and leaves its budget unspent, and each arm "
        "runs whole steps, so the spent budget falls short of T.)",
    ]
    name = "mamba_logistic.md"
    if args.samplers != (QUICK_SAMPLERS if args.quick else ",".join(SAMPLERS)):
        name = "mamba_logistic_" + args.samplers.lower().replace(",", "_") + ".md"
    path = args.outputs.write_study(name, "\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
