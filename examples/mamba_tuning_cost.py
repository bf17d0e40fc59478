"""Tuning cost of MAMBA-KSD against exhaustive grid search with KSD (MAMBA paper §4.1).

On the paper's grid for the §4.1 logistic regression (14 step sizes 10^-1 ...
10^-7.5 × batch {100, 10, 1, 0.1}%, M = 56 arms, η = 3), the yardstick is an
exhaustive grid search in which *every* arm runs ``R`` -- the total sampling
time MAMBA gives its survivor -- split into ``C`` independent repeats
(``chains_per_arm = C`` chains side by side, each with its own minibatches),
from the MAP, scored with the same KSD (full-data scores, every 10th sample).
Each grid arm's value is the mean of its repeats' KSDs with its standard error
``sd/√C``. For each MAMBA run we look up the grid's mean KSD of the arm MAMBA
chose; the run *succeeds* when that arm is within 10% of the grid's best mean
KSD, or not distinguishable from it at two standard errors
(``|d| ≤ 2·√(se_1² + se_2²)``), at no more than a third of the grid's sampling
time.

Two MAMBAs are measured against the same yardstick, on the same seeds:
``C`` independent chains per arm (``chains_per_arm = C``, the arm's metric the
mean over its chains) and the paper's one chain per arm.

Run::

    python examples/mamba_tuning_cost.py                          # 4 samplers × 6 seeds
    python examples/mamba_tuning_cost.py --samplers SGLD --seeds 0 1
    python examples/mamba_tuning_cost.py --quick                  # smoke test

Writes ``studies/mamba_tuning_cost.md`` and ``studies/mamba_tuning_cost.jsonl`` (one
line per MAMBA run, written as it finishes) under ``--out`` (default
``out/mamba_tuning_cost/``; ``--write-docs`` for ``docs/``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

import _cli
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning
from tfp_sgmcmc.models.logistic_regression import logistic_regression

KERNELS = {
    "SGLD": (sg.SGLD, {}),
    "SGHMC": (sg.SGHMC, {"order": "explicit", "friction": 0.01, "num_leapfrog_steps": 5}),
    "SGNHT": (sg.SGNHT, {"diffusion": 0.01}),
}
SAMPLERS = ["SGLD", "SGLD-CV", "SGHMC-CV", "SGNHT"]


def success(chosen: tuple[float, float], best: tuple[float, float], time_ratio: float) -> bool:
    """Within 10% of the best mean, or within 2 SE of it; and ≤ 1/3 of the grid's time."""
    (m, s), (b, sb) = chosen, best
    if not math.isfinite(m):
        return False
    close = m <= 1.10 * b
    se = math.hypot(s, sb) if math.isfinite(s) and math.isfinite(sb) else math.nan
    indist = math.isfinite(se) and m - b <= 2 * se
    return (close or indist) and time_ratio <= 1 / 3


def main() -> None:
    ap = _cli.parser(
        "mamba_tuning_cost", __doc__.split("\n\n")[0], quick_help="6 arms, T = 3 s, SGLD, one seed"
    )
    ap.add_argument(
        "--samplers",
        nargs="+",
        default=None,
        help="from SGLD, SGLD-CV, SGHMC, SGHMC-CV, SGNHT, SGNHT-CV",
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="MAMBA seeds (6)")
    ap.add_argument(
        "--unit",
        default="gradient_evaluations",
        choices=["seconds", "gradient_evaluations"],
        help="budget unit (gradient_evaluations: deterministic, unaffected by the machine's load)",
    )
    ap.add_argument(
        "--budget",
        type=_cli.positive_float,
        default=None,
        help="MAMBA's T (default 1.5e8 gradient evaluations, or 10 s)",
    )
    ap.add_argument("--chains", type=_cli.positive_int, default=4, help="chains per arm C (4)")
    ap.add_argument(
        "--max-samples",
        type=int,
        default=80,
        help="thinned samples (pooled over an arm's chains) the KSD uses (80)",
    )
    ap.add_argument(
        "--paper-seeds",
        type=int,
        nargs="*",
        default=None,
        help="seeds of the paper's one-chain MAMBA (default: the first three)",
    )
    args = ap.parse_args()
    args.outputs = _cli.outputs(args)
    samplers = args.samplers or (["SGLD"] if args.quick else SAMPLERS)  # nargs="+": never empty
    valid = {*KERNELS, *(k + "-CV" for k in KERNELS)}
    for name in samplers:
        if name not in valid:
            ap.error(f"--samplers: unknown sampler {name!r}; use {sorted(valid)}")
    if args.chains < 2:
        ap.error("--chains must be >= 2 (the yardstick needs a standard error)")
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2, 3, 4, 5])  # nargs="+": never empty
    if args.unit == "seconds":
        budget = args.budget if args.budget is not None else (3.0 if args.quick else 10.0)
        make_budget = tuning.seconds
    else:
        budget = args.budget if args.budget is not None else (3e7 if args.quick else 1.5e8)
        make_budget = tuning.gradient_evaluations
    paper_seeds = seeds[:3] if args.paper_seeds is None else args.paper_seeds
    if args.quick:
        arms = tuning.grid(step_size=[1e-5, 1e-6, 1e-7], batch_fraction=[0.01, 0.001])
    else:
        arms = tuning.grid(
            step_size=tuning.log10_grid(-1, -7.5, 0.5), batch_fraction=[1.0, 0.1, 0.01, 0.001]
        )
    jsonl = args.outputs.study("mamba_tuning_cost.jsonl")
    os.makedirs(os.path.dirname(jsonl), exist_ok=True)

    t0 = time.time()
    prob = logistic_regression()
    base = prob.estimator(
        prob.batch_size_from_fraction(0.01), scheme="random_window", independent_chains=True
    )
    theta_map = sg.find_map(base, tf.zeros([prob.num_features], tf.float32)).position
    cv = sg.ControlVariateEstimator(base, theta_map)
    ksd = tuning.KSDMetric(
        max_samples=args.max_samples, score_block_size=128, preconditioner=None,
        check_validity=False,
    )
    # Algorithm 1's survivor runs R = Σ_i r_i; every grid arm gets the same R.
    r_total = sum(tuning.per_arm_budgets(len(arms), 3, make_budget(budget)))
    rows = []
    for name in samplers:
        cls, kw = KERNELS[name.split("-")[0]]
        factory = tuning.KernelSpec(cls, cv if name.endswith("-CV") else base, **kw)
        grid = tuning.grid_search(
            arms,
            theta_map,
            factory,
            budget_per_arm=make_budget(r_total),
            metric=ksd,
            seed=10_000,
            progress=False,
            sampling=tuning.ArmSampling(chains_per_arm=args.chains),
        )
        table = {r.arm_index: (r.metric, r.metric_se) for r in grid.records}
        best = table[grid.best_index]
        print(
            f"{name}: grid best {tuning.arm_label(grid.best_arm)} KSD {best[0]:.4g} ± "
            f"{best[1]:.2g} ({grid.total_sampling_seconds:.1f} s sampling)",
            flush=True,
        )
        for s in seeds:
            variants = [("C chains", args.chains)] + ([("paper", 1)] if s in paper_seeds else [])
            for variant, chains in variants:
                m = tuning.MAMBA(
                    arms,
                    theta_map,
                    factory,
                    budget=make_budget(budget),
                    metric=ksd,
                    seed=s,
                    progress=False,
                    sampling=tuning.ArmSampling(chains_per_arm=chains),
                ).run()
                chosen = table[m.best_index]
                tr = m.total_sampling_seconds / grid.total_sampling_seconds
                # The criterion's cost ratio is in the budget's unit: MAMBA's total spend over
                # the grid's (sampling seconds measured on a shared machine move with its load).
                cost = m.budget_used / grid.budget_used
                row = {
                    "sampler": name,
                    "seed": s,
                    "variant": variant,
                    "chains": chains,
                    "arm": tuning.arm_label(m.best_arm),
                    "mamba_ksd": m.best_metric,
                    "grid_ksd": chosen[0],
                    "grid_se": chosen[1],
                    "best_arm": tuning.arm_label(grid.best_arm),
                    "best_ksd": best[0],
                    "best_se": best[1],
                    "ratio": chosen[0] / best[0],
                    "z": (chosen[0] - best[0]) / math.hypot(chosen[1], best[1])
                    if chosen[0] != best[0]
                    else 0.0,
                    "time_ratio": tr,
                    "cost_ratio": cost,
                    "unit": args.unit,
                    "ok": success(chosen, best, cost),
                    "grid_seconds": grid.total_sampling_seconds,
                    "mamba_seconds": m.total_sampling_seconds,
                }
                rows.append(row)
                with open(jsonl, "a") as f:
                    f.write(json.dumps(row) + "\n")
                print(
                    f"{name} seed {s} [{variant}]: {row['arm']} -> grid KSD "
                    f"{chosen[0]:.4g} ± {chosen[1]:.2g}; ratio {row['ratio']:.2f}, "
                    f"{row['z']:.1f} SE; cost ratio {cost:.2f}, time ratio {tr:.2f}; "
                    f"{'OK' if row['ok'] else 'miss'}",
                    flush=True,
                )
    write_report(rows, args, budget, len(arms), time.time() - t0)


def report_lines(
    rows: list[dict],
    cmd: str,
    budget: float,
    num_arms: int,
    chains: int,
    max_samples: int,
    wall: float,
    unit: str,
) -> list[str]:
    """The markdown report of the study's rows (also used to merge separate runs)."""
    lines = [
        "# MAMBA-KSD against exhaustive grid search with KSD: tuning cost",
        "",
        f"Command: `{cmd}` (wall time {wall:.0f} s on a shared 2-core machine).",
        "",
        f"M = {num_arms} arms, η = 3, T = {budget:g} {unit.replace('_', ' ')}; KSD on at most "
        f"{max_samples} thinned samples (thin 10) pooled over an arm's chains, ± its jackknife "
        "standard error over the chains (over 4 blocks for one chain). Yardstick: grid search "
        f"runs every arm for R (what MAMBA's survivor gets) split over C = {chains} independent "
        "chains (repeats) and reports each arm's KSD ± standard error. \"grid KSD of MAMBA's "
        "arm\" is the yardstick's value of the arm MAMBA chose; ratio = that / the grid's best; "
        "z = the gap in standard errors. A run succeeds (OK) when ratio ≤ 1.10 or z ≤ 2, at a "
        "cost ratio ≤ 1/3 (MAMBA's total budget spent / the grid's, in the budget's unit). The "
        "time ratio is the measured sampling-time ratio (compilation and metric excluded; it "
        "moves with the shared machine's load).",
        "",
        "| sampler | seed | MAMBA | MAMBA's arm | grid KSD of MAMBA's arm | grid's best arm "
        "| grid's best KSD | ratio | z | cost ratio | time ratio | OK |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        label = f"C = {r['chains']}" if r["chains"] > 1 else "paper (1 chain)"
        lines.append(
            f"| {r['sampler']} | {r['seed']} | {label} | {r['arm']} | {r['grid_ksd']:.4g} ± "
            f"{r['grid_se']:.2g} | {r['best_arm']} | {r['best_ksd']:.4g} ± {r['best_se']:.2g} "
            f"| {r['ratio']:.2f} | {r['z']:.1f} | {r['cost_ratio']:.2f} | {r['time_ratio']:.2f} | "
            f"{'yes' if r['ok'] else 'no'} |"
        )
    lines += [
        "",
        "Seeds × samplers (OK / runs):",
        "",
        "| MAMBA | " + " | ".join(dict.fromkeys(r["sampler"] for r in rows)) + " |",
        "|---|" + "---|" * len(dict.fromkeys(r["sampler"] for r in rows)),
    ]
    for chains_label in dict.fromkeys(r["chains"] for r in rows):
        cells = []
        for name in dict.fromkeys(r["sampler"] for r in rows):
            sub = [r for r in rows if r["sampler"] == name and r["chains"] == chains_label]
            cells.append(f"{sum(r['ok'] for r in sub)}/{len(sub)}")
        label = f"C = {chains_label}" if chains_label > 1 else "paper (1 chain)"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def write_report(rows, args, budget, num_arms, wall) -> None:
    cmd = ("python examples/mamba_tuning_cost.py " + " ".join(sys.argv[1:])).strip()
    lines = report_lines(
        rows, cmd, budget, num_arms, args.chains, args.max_samples, wall, args.unit
    )
    path = args.outputs.write_study("mamba_tuning_cost.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
