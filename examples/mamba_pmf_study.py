"""The MAMBA paper's §4.2 PMF study (Tables 2, 6, 7) at CPU scale.

Bayesian PMF (d = 20, τ = (α, μ0, a0, b0) = (3, 0, 4, 5), ``tfp_sgmcmc/models/pmf.py``) on
the synthetic MovieLens-100K-shaped ratings (default) or a MovieLens file
(``--ratings u.data|ratings.csv``). Six samplers (SGLD, SGLD-CV, SGHMC, SGHMC-CV,
SGNHT, SGNHT-CV), each tuned by

* MAMBA-KSD over the paper's grid: log10 ε ∈ {−2, −2.5, …, −7.5} × batch
  {100, 10, 1}% [× L ∈ {5, 10} for SGHMC], η = 3, a total budget ``T``;
* grid search: 10% batch, the same step sizes [× L], a fixed budget per
  configuration from the MAP plus N(0, 1) noise (the paper's start), picking
  the lowest test RMSE;
* the heuristic: ε = 1/N_train (log10 ε = −4.9), 10% batch, L = 10;

then every tuned sampler runs a fixed budget from the MAP and we report KSD
(full-data scores), ξ(σ̂) = ‖σ̂ − σ_ref‖/‖σ_ref‖ over the posterior standard
deviations of the test predictions against the stored Gibbs reference
(synthetic data only; ``PMF.xi``), test RMSE, test log-likelihood and the number
of samples, beside the paper's Tables 2, 6 and 7. SGHMC uses the SGMCMCJax update
order (``order="explicit"``, friction 0.01) and SGNHT diffusion 0.01, as the
paper's code.

Budgets. The paper's are wall-clock times (MAMBA: R = 10 s for the surviving
arm; grid: 2,000 iterations per configuration; evaluation: 20 s), which make the
results depend on the machine and its load. The defaults here are deterministic:
per-example gradient evaluations (``tuning.gradient_evaluations``; one rating is
one example; an SGHMC step counts its L leapfrog gradients, a control-variate
step its two minibatch gradients), converted from seconds at SGLD's throughput
on this model at a 1% batch on an idle 2-core machine
(``IDLE_GRADIENTS_PER_SECOND``, measured with ``--throughput``; the options and
their conversion are shared with the BNN study, ``examples/_paper_tables.py``).
The time budgets remain available (``--budget``, ``--grid-seconds``,
``--eval-seconds``), and so are step counts (``--grid-steps``, the paper's unit
for the grid, and ``--eval-steps``).

Run::

    python examples/mamba_pmf_study.py --quick        # smoke test (SGLD, 9 arms)
    python examples/mamba_pmf_study.py                # full CPU-scale study (about 35 minutes)
    python examples/mamba_pmf_study.py --throughput   # gradients/s per batch size

The default budgets (``DEFAULT_*_GRADIENTS``) were chosen so that the full study fits
well within 50 minutes on a 2-core CPU: it took 35 minutes under ``nice -n 10`` at a
mean load average of 4.7 (``docs/studies/mamba_pmf.md``). ``--quick`` is a smoke
version: SGLD only, log10 ε ∈ {−3, −3.5, …, −7} × batch 1%, a 30-step MAP, KSD on 10
samples and budgets a fifteenth of the full run's or less. Most of the time is
compilation (one program per batch size and L, three to six per sampler) and KSD
evaluations, not sampling.

Writes ``studies/mamba_pmf.md``, ``studies/mamba_pmf.json`` (every number on the
page; rewritten after each row, so an interrupted run keeps its rows) and
``figures/mamba_pmf.png`` under ``--out`` (default ``out/mamba_pmf/``), or in
``docs/`` with ``--write-docs`` (``*_quick`` names with ``--quick``).
``--from-json FILE`` redraws the page and figure from a saved JSON without
running anything.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import _cli
import numpy as np
import tensorflow as tf
from _paper_tables import (
    SAMPLERS,
    LoadSampler,
    add_budget_options,
    arm_short,
    arm_throughput,
    budget_json,
    budget_text,
    budgets,
    kernel_class,
    mamba_cost_lines,
    mamba_figure_lines,
    mamba_json,
    num,
    plot_mamba_rounds,
    round0,
    run_throughput,
    tune_three_ways,
)

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning
from tfp_sgmcmc.models.pmf import pmf

STUDY_NAME = "mamba_pmf"
SCRIPT = "python examples/mamba_pmf_study.py"
#: The model's sections of docs/models.md, as the study page (in docs/studies/) links them.
MODEL_PAGE = "../models.md#modelspmf-bayesian-pmf-on-movielens-the-papers-42"
GROUND_TRUTH_PAGE = "../models.md#pmf-ground-truth"

#: Per-example likelihood gradients (one per rating) per second of SGLD on this model at
#: a 1% batch (800 ratings) on a 2-core CPU (``--throughput``: 8.9e5 at a load average
#: of 1.8-2.9), rounded. Converts the time budgets to the deterministic defaults below:
#: a gradient budget ``G`` is ``G / 9e5`` s of 1%-batch sampling. A step's cost here is
#: dominated by the prior and the update over all 52,580 parameters, not by the batch,
#: so larger batches run many more gradients per second (same measurement: 3.7e6 at
#: 10%, 1.7e7 at 100%) and for them the quoted idle seconds are upper bounds (a 10%
#: arm's ≈ 4x, a full-batch arm's ≈ 20x too long).
IDLE_GRADIENTS_PER_SECOND = 9e5

#: Default budgets (full, quick) in per-example gradient evaluations.
#: MAMBA: T ≈ 60 s / 2.2 s at a 1% batch (the paper's R = 10 s is T ≈ 83 s for 36 arms);
#: grid: 8e6 / 2e5 per configuration, 1,000 / 25 SGLD iterations at a 10% batch
#: (the paper: 2,000); evaluation: ≈ 20 s / 0.4 s at a 1% batch (the paper: 20 s).
DEFAULT_MAMBA_GRADIENTS = (60 * IDLE_GRADIENTS_PER_SECOND, 2e6)
DEFAULT_GRID_GRADIENTS = (8e6, 2e5)
DEFAULT_EVAL_GRADIENTS = (20 * IDLE_GRADIENTS_PER_SECOND, 4e5)
#: What ``--quick`` runs by default: one sampler, a 30-step MAP, KSD on 10 samples.
QUICK_SAMPLERS = "SGLD"
QUICK_MAP_STEPS = 30
QUICK_KSD_SAMPLES = 10

#: Paper Table 2 (KSD, ξ×100) and Table 7 (RMSE), Table 6 (log10 ε, batch %, L).
PAPER = {
    "MAMBA-KSD": {
        "SGLD": (213, 69.2, 1.13, "-5, 1%"),
        "SGLD-CV": (231, 72.1, 1.13, "-5, 1%"),
        "SGHMC": (438, 79.9, 1.13, "-6, 1%, L=5"),
        "SGHMC-CV": (543, 83.7, 1.10, "-6, 1%, L=5"),
        "SGNHT": (163, 40.8, 1.12, "-5, 10%"),
        "SGNHT-CV": (205, 38.5, 1.12, "-5, 10%"),
    },
    "Grid": {
        "SGLD": (429, 119.2, 1.25, "-3.5, 10%"),
        "SGLD-CV": (546, 133.0, 1.25, "-3.5, 10%"),
        "SGHMC": (3180, 51.2, 1.25, "-5, 10%, L=10"),
        "SGHMC-CV": (4289, 55.6, 1.25, "-5, 10%, L=10"),
        "SGNHT": (170, 44.2, 1.15, "-5.5, 10%"),
        "SGNHT-CV": (221, 46.8, 1.16, "-5.5, 10%"),
    },
    "Heuristic": {
        "SGLD": (237, 71.7, 1.13, "-4.9, 10%"),
        "SGLD-CV": (284, 75.0, 1.13, "-4.9, 10%"),
        "SGHMC": (3942, 50.3, 1.25, "-4.9, 10%, L=10"),
        "SGHMC-CV": (4546, 53.2, 1.25, "-4.9, 10%, L=10"),
        "SGNHT": (164, 40.6, 1.11, "-4.9, 10%"),
        "SGNHT-CV": (210, 38.7, 1.11, "-4.9, 10%"),
    },
}
METHODS = ("MAMBA-KSD", "Grid", "Heuristic")
#: Samples each evaluation run keeps (evenly thinned); ξ uses all of them, the test RMSE
#: and log-likelihood at most 200, the KSD at most ``--ksd-samples``.
EVAL_SAMPLES = 500
#: MAMBA's arms keep every 10th step, as the paper's code.
MAMBA_THIN = 10


def _parser() -> Any:
    ap = _cli.parser(STUDY_NAME, __doc__.split("\n\n")[0], "reduced grids and budgets (smoke)")
    ap.add_argument(
        "--samplers",
        default=None,
        help=f"comma-separated subset of {','.join(SAMPLERS)} (default: all six; quick "
        f"{QUICK_SAMPLERS})",
    )
    ap.add_argument("--ratings", default=None, help="u.data or ratings.csv (default: synthetic)")
    add_budget_options(ap, DEFAULT_MAMBA_GRADIENTS, DEFAULT_GRID_GRADIENTS, DEFAULT_EVAL_GRADIENTS)
    ap.add_argument(
        "--ksd-samples",
        type=_cli.positive_int,
        default=None,
        help=f"max samples per KSD (default 100, quick {QUICK_KSD_SAMPLES})",
    )
    ap.add_argument(
        "--map-steps",
        type=_cli.positive_int,
        default=None,
        help=f"L-BFGS steps for the MAP (default 500, quick {QUICK_MAP_STEPS})",
    )
    ap.add_argument(
        "--from-json",
        metavar="FILE",
        default=None,
        help="redraw the page and figure from a saved results JSON (runs nothing)",
    )
    ap.add_argument(
        "--throughput",
        action="store_true",
        help="measure SGLD's per-example gradients per second at 1%%, 10%% and 100%% batches "
        "(the conversion behind the default budgets) and exit",
    )
    return ap


def _budgets(args: Any) -> dict[str, tuning.Budget]:
    return budgets(args, DEFAULT_MAMBA_GRADIENTS, DEFAULT_GRID_GRADIENTS, DEFAULT_EVAL_GRADIENTS)


def _reference_rmse(prob: Any, gt: dict[str, Any] | None) -> float | None:
    """Test RMSE of the Gibbs reference's posterior-mean prediction (clipped), if any."""
    if gt is None:
        return None
    pred = np.asarray(gt["test_predictions"]["mean"], np.float64) + prob.mean_rating
    pred = np.clip(pred, prob.data.min_rating, prob.data.max_rating)
    r = prob.data.ratings[prob.test_idx].astype(np.float64)
    return float(np.sqrt(np.mean((pred - r) ** 2)))


def main() -> None:
    args = _parser().parse_args()
    outs = _cli.outputs(args)
    if args.throughput:
        prob = pmf(ratings=args.ratings) if args.ratings else pmf(synthetic=True)
        est = prob.estimator(prob.batch_size_from_fraction(0.01))
        run_throughput(est, prob.init_state(), prob.batch_size_from_fraction)
        return
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            results = json.load(f)
        publish(results, outs)
        return
    publish(run(args, outs), outs)


def run(args: Any, outs: Any) -> dict[str, Any]:
    """Runs the study that ``args`` (from `_parser`) describe; returns the results JSON.

    The JSON is rewritten under ``outs`` after each row, so an interrupted run keeps
    its rows.
    """
    quick = args.quick
    if args.samplers is None:
        args.samplers = QUICK_SAMPLERS if quick else ",".join(SAMPLERS)
    if args.map_steps is None:
        args.map_steps = QUICK_MAP_STEPS if quick else 500
    samplers = args.samplers.split(",")
    for s in samplers:
        kernel_class(s)  # ValueError naming `name` for an unknown sampler
    bud = _budgets(args)
    ksd_n = (
        args.ksd_samples if args.ksd_samples is not None else (QUICK_KSD_SAMPLES if quick else 100)
    )
    steps = tuning.log10_grid(-3, -7, 0.5) if quick else tuning.log10_grid(-2, -7.5, 0.5)
    fractions = [0.01] if quick else [1.0, 0.1, 0.01]
    leapfrogs = [5] if quick else [5, 10]

    t0 = time.time()
    load = LoadSampler()
    prob = pmf(ratings=args.ratings) if args.ratings else pmf(synthetic=True)
    gt = prob.ground_truth()
    base = prob.estimator(prob.batch_size_from_fraction(0.01))
    theta_map = sg.find_map(
        base, prob.init_state(), method="lbfgs", num_steps=args.map_steps
    ).position
    map_rmse = prob.test_rmse([p.numpy() for p in theta_map])
    cv = prob.control_variate_estimator(theta_map, prob.batch_size_from_fraction(0.01))
    ksd = tuning.KSDMetric(
        max_samples=ksd_n, score_block_size=16, preconditioner=None, check_validity=False
    )
    rmse = tuning.FunctionMetric(lambda s: prob.test_rmse(s, max_samples=100), "test RMSE")
    rng = np.random.default_rng(1)
    noisy_map = [p + tf.constant(rng.standard_normal(p.shape), p.dtype) for p in theta_map]
    n_heur = prob.num_train  # the authors' 1/N with N = 80,000 (log10 ε = −4.9)
    config = {
        "budgets": {k: budget_json(b) for k, b in bud.items()},
        "idle_gradients_per_second": IDLE_GRADIENTS_PER_SECOND,
        "ksd_max_samples": ksd_n,
        "mamba_thin": MAMBA_THIN,
        "eval_samples": EVAL_SAMPLES,
        "map_steps": args.map_steps,
        "step_grid_log10": [float(np.log10(x)) for x in steps],
        "batch_fractions": fractions,
        "leapfrogs": leapfrogs,
        "samplers": samplers,
        "quick": quick,
        "data": prob.data.source,
        "num_train": prob.num_train,
        "map_test_rmse": map_rmse,
        "reference_test_rmse": _reference_rmse(prob, gt),
        # gt: read once at the start, so the config reports the reference every row used
        "ground_truth": None
        if gt is None
        else {
            k: gt[k]
            for k in (
                "method",
                "chains",
                "draws_per_chain",
                "ess",
                "rhat",
                "relative_mcse_of_std_norm",
            )
        },  # fmt: skip
        "command": _cli.command_line(),
        "provenance": _cli.provenance(),
        "niceness": os.nice(0),
    }
    results: dict[str, Any] = {"config": config, "rows": [], "mamba": {}, "finished": False}
    json_path = outs.study(f"{STUDY_NAME}.json")

    def save() -> None:
        config["wall_s"] = time.time() - t0
        config["provenance"] = _cli.provenance()
        config["load_average"] = load.summary()
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1, allow_nan=True)

    for name in samplers:
        for method, key, r, ev in tune_three_ways(
            name,
            base=base,
            control_variate=cv,
            theta_map=theta_map,
            grid_start=noisy_map,
            steps=steps,
            fractions=fractions,
            leapfrogs=leapfrogs,
            budget=bud["mamba"],
            ksd=ksd,
            grid_metric=rmse,
            grid_steps=bud["grid"],
            num_train=n_heur,
            eval_seconds=bud["eval"],
            eval_samples=EVAL_SAMPLES,
            mamba_thin=MAMBA_THIN,
        ):
            rec = ev.records[0]
            s = [np.asarray(p) for p in ev.best_samples]
            ok = not rec.diverged and s[0].shape[0] >= 2
            row = {
                "sampler": name,
                "method": method,
                "arm": {
                    k: (float(v) if isinstance(v, float) else v) for k, v in r.best_arm.items()
                },
                "label": key,
                "ksd": rec.metric if ok else float("inf"),
                "xi": prob.xi(s, gt) if ok else float("inf"),
                "rmse": prob.test_rmse(s, max_samples=200) if ok else float("nan"),
                "test_loglik": prob.test_log_likelihood(s, max_samples=200) if ok else float("nan"),
                "eval_steps": int(rec.steps),
                "eval_samples": int(s[0].shape[0]),
                "eval_sampling_s": float(rec.sampling_seconds),
                "eval_diverged": bool(rec.diverged),
                "tuning_sampling_s": float(r.total_sampling_seconds),
                "tuning_steps": int(r.total_steps),
                "elapsed_s": time.time() - t0,
            }
            if method == "MAMBA-KSD":
                results["mamba"][name] = mamba_json(r)
            results["rows"].append(row)
            save()
            print(
                f"{name:9s} {method:10s} {key:55s} KSD {row['ksd']:10.4g} "
                f"xi {100 * row['xi']:7.1f}% RMSE {row['rmse']:.4f} "
                f"steps {row['eval_steps']} samples {row['eval_samples']} "
                f"[{(time.time() - t0) / 60:.1f} min, load {os.getloadavg()[0]:.1f}]",
                flush=True,
            )
    results["finished"] = True
    load.stop()
    save()
    return results


# --------------------------------------------------------------------------- #
# The page and the figure, from the results JSON alone.
# --------------------------------------------------------------------------- #


def _f(x: float, fmt: str = ".3f") -> str:
    return "–" if x is None or not math.isfinite(x) else format(x, fmt)


def _checks(results: dict[str, Any]) -> list[str]:
    """The paper's Table 2 findings, counted on our rows and on the paper's."""
    rows = {(r["sampler"], r["method"]): r for r in results["rows"]}
    names = [s for s in results["config"]["samplers"] if all((s, m) in rows for m in METHODS)]
    if not names:
        return ["- No sampler finished all three methods."]
    n = len(names)

    def val(s: str, m: str, k: str) -> float:
        x = rows[(s, m)][k]
        return x if math.isfinite(x) else math.inf

    col = {"ksd": 0, "xi": 1, "rmse": 2}
    out = []
    ours = [s for s in names if rows[(s, "MAMBA-KSD")]["arm"]["batch_fraction"] == 0.01]
    paper = [s for s in names if PAPER["MAMBA-KSD"][s][3].split(", ")[1] == "1%"]
    out.append(
        f"- MAMBA-KSD picks a 1% batch for {len(ours)} of {n} samplers "
        f"(paper: {len(paper)} of {n})."
    )

    def log_step(method: str, s: str) -> tuple[float, float]:
        return (
            math.log10(rows[(s, method)]["arm"]["step_size"]),
            float(PAPER[method][s][3].split(", ")[0]),
        )

    ours = [s for s in names if log_step("Grid", s)[0] > log_step("MAMBA-KSD", s)[0] + 1e-6]
    paper = [s for s in names if log_step("Grid", s)[1] > log_step("MAMBA-KSD", s)[1]]
    out.append(
        f"- The RMSE grid picks a larger step than MAMBA-KSD for {len(ours)} of {n} samplers "
        f"(paper: {len(paper)} of {n})."
    )
    ours = [
        s for s in names if all(val(s, "MAMBA-KSD", "ksd") <= val(s, m, "ksd") for m in METHODS)
    ]
    paper = [s for s in names if all(PAPER["MAMBA-KSD"][s][0] <= PAPER[m][s][0] for m in METHODS)]
    out.append(
        f"- MAMBA-KSD's arm has the lowest KSD of the three for {len(ours)} of {n} samplers "
        f"(paper: {len(paper)} of {n}): {', '.join(ours) or 'none'}."
    )
    for other in ("Grid", "Heuristic"):
        for k, what in (("xi", "ξ"), ("rmse", "test RMSE")):
            ours = [s for s in names if val(s, "MAMBA-KSD", k) < val(s, other, k)]
            paper = [s for s in names if PAPER["MAMBA-KSD"][s][col[k]] < PAPER[other][s][col[k]]]
            out.append(
                f"- MAMBA-KSD's {what} is lower than the {other.lower()}'s for {len(ours)} of "
                f"{n} samplers (paper: {len(paper)} of {n}): {', '.join(ours) or 'none'}."
            )
    same = [
        s for s in names if rows[(s, "MAMBA-KSD")]["label"] == rows[(s, "Grid")]["label"]
    ]  # fmt: skip
    if same:
        out.append(f"- MAMBA-KSD and the grid chose the same arm for {', '.join(same)}.")
    for s in ("SGHMC", "SGHMC-CV"):
        if s in names:
            h = rows[(s, "Heuristic")]
            p = PAPER["Heuristic"][s]
            what = (
                f"diverged after {h['eval_steps']} steps"
                if h["eval_diverged"]
                else f"KSD {h['ksd']:.4g}, ξ×100 {_f(100 * h['xi'], '.1f')}, RMSE {_f(h['rmse'])}"
            )
            out.append(
                f"- Heuristic {s} (ε = 1/N, 10% batch, L = 10; paper KSD {p[0]}, ξ×100 {p[1]}): "
                f"{what}."
            )
    for method in METHODS:
        xs = [rows[(s, method)]["xi"] for s in names]
        fin = [x for x in xs if math.isfinite(x)]
        mean = f"{100 * np.mean(fin):.1f}" if fin else "–"
        extra = f" ({n - len(fin)} without samples or diverged)" if len(fin) < n else ""
        rm = [rows[(s, method)]["rmse"] for s in names]
        rm = [x for x in rm if math.isfinite(x)]
        over = f" over the {len(rm)} with samples" if len(rm) < n else ""
        out.append(
            f"- Mean ξ×100 of {method}: {mean}{extra} "
            f"(paper: {np.mean([PAPER[method][s][1] for s in names]):.1f}); mean test RMSE"
            f"{over} {_f(float(np.mean(rm)) if rm else math.nan)} "
            f"(paper: {np.mean([PAPER[method][s][2] for s in names]):.2f})."
        )
    cfg = results["config"]
    ref = cfg.get("reference_test_rmse")
    out.append(
        f"- For scale: the MAP's test RMSE is {cfg['map_test_rmse']:.3f}"
        + (
            f", the exact posterior's (the Gibbs reference's posterior-mean prediction) {ref:.3f}."
            if ref is not None
            else "."
        )
    )
    return out


def _budgets_bullet(results: dict[str, Any]) -> str:
    cfg = results["config"]
    text = (
        "* **The budgets.** The paper ran on a GPU with R = 10 s for MAMBA's survivor "
        "(T ≈ 83 s for 36 arms), 2,000 grid iterations per configuration and 20 s per "
        "evaluation."
    )
    r0 = round0(results)
    if r0:
        parts = [
            (f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}")
            + f" steps at a {100 * f:g}% batch"
            + (f" ({none} of {k} arms without a thinned sample)" if none else "")
            for f, (lo, hi, none, k) in sorted(r0.items())
        ]
        text += (
            " Here round 0 of MAMBA (over all samplers, L and step sizes) gave an arm "
            + ", ".join(parts)
            + f", keeping every {cfg['mamba_thin']}th: an arm without a sample is pruned for "
            "its cost, not its quality."
        )
    tp = (
        arm_throughput(results) if cfg["budgets"]["mamba"]["unit"] == "gradient_evaluations" else {}
    )
    if 0.01 in tp and 0.1 in tp:
        text += (
            " A gradient budget charges a 10% batch ten times a 1% one, but on this model a "
            "step's cost is dominated by the prior and the update over all 52,580 parameters: "
            f"in this run's MAMBA arms a 10% step took {10 * tp[0.01] / tp[0.1]:.1f} times as "
            "long as a 1% step, so a 10% arm runs fewer steps here than it would under the "
            "paper's time budget."
        )
    b = cfg["budgets"]["eval"]
    if b["unit"] == "gradient_evaluations":
        text += (
            f" Each evaluation is {b['amount'] / cfg['num_train']:.0f} epochs' worth of "
            "per-example gradients from the MAP."
        )
    return text


def _grid_bullet(results: dict[str, Any]) -> str:
    cfg = results["config"]
    b = cfg["budgets"]["grid"]
    if b["unit"] == "gradient_evaluations":
        its = b["amount"] / (0.1 * cfg["num_train"])
        what = f"{num(b['amount'])} per-example gradients per configuration ({its:,.0f} SGLD "
        what += "iterations at a 10% batch, 1/L of that for SGHMC, half for the control variates)"
    else:
        what = f"{budget_text(b, cfg['idle_gradients_per_second'])} per configuration"
    return (
        f"* **The grid search** has {what} where the paper has 2,000 iterations. It starts "
        "from MAP + N(0, 1) noise, about ten times the scale of the MAP's factors, and scores "
        "the test RMSE of the posterior-mean prediction, so it rewards the arm that recovers "
        "fastest from that noise; every evaluation then starts from the MAP itself."
    )


def _start_bullet(results: dict[str, Any]) -> str:
    """How many evaluations ended near the MAP's test RMSE (barely moved from it)."""
    cfg = results["config"]
    rows = [r for r in results["rows"] if math.isfinite(r["rmse"])]
    near = [r for r in rows if abs(r["rmse"] - cfg["map_test_rmse"]) < 0.01]
    text = (
        "* **Where the chains start.** Every evaluation starts at the MAP, where the "
        "hierarchical prior has shrunk the rows (precision λ ≈ 90 against λ ≈ 5 in the "
        "posterior), so ξ and the test RMSE improve only as far as a chain travels towards "
        "the posterior's spread in its budget."
    )
    if rows:
        text += (
            f" {len(near)} of the {len(rows)} evaluations with samples end with a test RMSE "
            f"within 0.01 of the MAP's ({cfg['map_test_rmse']:.3f}): a small step, or a 10% "
            "batch that runs a tenth of a 1% batch's steps, has not left the MAP's "
            "neighbourhood, and their ξ stays large whatever the KSD says about the "
            "samples' local fit."
        )
    return text


def render(results: dict[str, Any], figure: str | None) -> str:
    """The study page (markdown) from the results JSON."""
    cfg = results["config"]
    rate = cfg["idle_gradients_per_second"]
    b = cfg["budgets"]
    done = list(dict.fromkeys(r["sampler"] for r in results["rows"]))
    complete = [s for s in done if len([r for r in results["rows"] if r["sampler"] == s]) == 3]
    partial = not results["finished"]
    la = cfg.get("load_average", {})
    sg_grid = cfg["step_grid_log10"]
    n_arms = len(sg_grid) * len(cfg["batch_fractions"])
    quick = cfg.get("quick", False)
    gt = cfg.get("ground_truth")
    lines = [
        "# MAMBA study: Bayesian PMF (paper §4.2, CPU scale" + (", quick run)" if quick else ")"),
        "",
        f"Regenerate: `{cfg['command']}`",
        "",
        *([cfg["provenance"], ""] if cfg.get("provenance") else []),
        "The paper's Table 2 (KSD and ξ(σ̂)), Table 6 (chosen hyperparameters) and Table 7 "
        f"(test RMSE) on the model of [`models.pmf`]({MODEL_PAGE}):",
        "d = 20, τ = (α, μ0, a0, b0) = (3, 0, 4, 5), 52,580 parameters, on the synthetic",
        "MovieLens-100K-shaped ratings (943 users, 1,682 items, 100,000 ratings, 80/20 split) or",
        "on a MovieLens file. This page is written by the study script from its results JSON",
        "(every number below comes from the run it names).",
        "",
        "```bash",
        f"{SCRIPT}                  # full CPU-scale study → out/mamba_pmf/",
        f"{SCRIPT} --ratings ml-100k/u.data",
        f"{SCRIPT} --quick          # smoke run (SGLD, 9 arms)",
        f"{SCRIPT} --throughput     # gradients/s per batch size (the budget conversion)",
        f"{SCRIPT} --from-json out/mamba_pmf/studies/mamba_pmf.json --write-docs",
        "```",
        "",
        "## Design and budgets",
        "",
        "| | paper | this run |",
        "|---|---|---|",
        "| samplers | SGLD, SGLD-CV, SGHMC, SGHMC-CV, SGNHT, SGNHT-CV | "
        f"{', '.join(cfg['samplers'])} |",
        "| MAMBA-KSD grid | log10 ε −2 … −7.5 (12) × batch {100, 10, 1}% [× L {5, 10}], η = 3 "
        + f"| log10 ε {sg_grid[0]:g} … {sg_grid[-1]:g} ({len(sg_grid)}) × batch ".replace("-", "−")
        + f"{{{', '.join(f'{100 * f:g}' for f in cfg['batch_fractions'])}}}% "
        f"[× L {{{', '.join(str(x) for x in cfg['leapfrogs'])}}}]: {n_arms} "
        f"[{n_arms * len(cfg['leapfrogs'])}] arms, η = 3 |",
        "| MAMBA budget | R = 10 s for the surviving arm (T ≈ 83 s for 36 arms), every 10th "
        f"sample | T = {budget_text(b['mamba'], rate)}, every {cfg['mamba_thin']}th sample |",
        "| grid search | 10% batch, 2,000 iterations per configuration from MAP + N(0, 1), "
        f"lowest test RMSE | same, {budget_text(b['grid'], rate)} per configuration |",
        "| heuristic | ε = 1/N_train (log10 ε = −4.9), 10% batch, L = 10 | same |",
        f"| evaluation | 20 s from the MAP | {budget_text(b['eval'], rate)} from the MAP, "
        f"≈ {cfg['eval_samples']} evenly thinned samples |",
        "| metrics | KSD, ξ over the parameters (against long SGLD runs), test RMSE | KSD on ≤ "
        f"{cfg['ksd_max_samples']} samples (full-data scores), ξ over the test predictions' "
        "posterior sd against an exact Gibbs reference, test RMSE and log-likelihood of the "
        "posterior-mean predictive (≤ 200 samples) |",
        "",
        'SGHMC uses the SGMCMCJax update order (`order="explicit"`, friction 0.01) and SGNHT '
        "diffusion 0.01, as the paper's code. The MAP is "
        f"{cfg.get('map_steps', 500):,} L-BFGS steps. ξ is computed over "
        "the posterior standard deviations of the 20,000 test predictions `U_iᵀV_j` "
        "(`PMF.xi`) against the Gibbs reference `pmf_synthetic.json` in the package's "
        "`models/ground_truth` directory, on the synthetic data set it was computed on "
        "(see [below](#ground-truth): the paper's ξ is over the parameters, which PMF does "
        "not identify).",
        "",
        "**Why gradient evaluations.** The paper's budgets are wall-clock seconds. Here the "
        "machine is shared, so a time budget would make the picks depend on the load. A budget "
        "of G per-example likelihood gradients (one per rating) is deterministic (an SGHMC "
        "step counts its L leapfrog gradients, a control-variate step its two minibatch "
        "gradients) and, unlike a step count, still charges a 10% batch more than a 1% one. "
        f"The defaults convert seconds at {num(rate)} gradients/s, SGLD's throughput on this "
        "model at a 1% batch on a 2-core CPU (`--throughput`). On PMF a step's cost is "
        "dominated by the prior and the update over all parameters, so larger batches run "
        "far more gradients per second (3.7e6 at 10%, 1.7e7 at 100% in the same measurement) "
        "and for them the quoted idle seconds are upper bounds. The default MAMBA and "
        "evaluation budgets are the paper's scale in seconds (T ≈ 60 s; 20 s per evaluation) "
        "converted at that rate; the grid's default is 1,000 SGLD iterations at a 10% batch, "
        "half the paper's 2,000, so that the full study stays well within 50 minutes on two "
        "cores. The options and their "
        "conversion are the BNN study's ([MNIST BNN](mamba_mnist_bnn.md)); the time budgets "
        "of the paper remain available (`--budget`, `--grid-seconds`, `--eval-seconds`), and "
        "step counts (`--grid-steps`, `--eval-steps`).",
        "",
    ]
    tp = arm_throughput(results) if b["mamba"]["unit"] == "gradient_evaluations" else {}
    status = (
        (
            "partial: the run had not finished when this page was drawn; samplers with all "
            "three rows: " + (", ".join(complete) or "none")
        )
        if partial
        else "complete"
    )
    ref = cfg.get("reference_test_rmse")
    lines += [
        "## Results" + (" (partial)" if partial else ""),
        "",
        f"Command: `{cfg['command']}`"
        + (f" (run at niceness {cfg['niceness']})" if cfg.get("niceness") else "")
        + f" — {status}. Wall time {cfg['wall_s'] / 60:.1f} min; "
        f"1-minute load average during the run {la.get('mean', float('nan')):.1f} on 2 cores "
        f"(min {la.get('min', float('nan')):.1f}, max {la.get('max', float('nan')):.1f}, "
        f"{la.get('n', 0)} readings)."
        + (
            " Throughput in MAMBA's arms over all samplers, per-example gradients per "
            "sampling second: "
            + ", ".join(f"{num(x)} at a {100 * f:g}% batch" for f, x in tp.items())
            + f" (the SGLD figure behind the defaults: {num(rate)} at 1%)."
            if tp
            else ""
        ),
        "",
        f"Data: {cfg['data']}. MAP test RMSE {cfg['map_test_rmse']:.3f}"
        + (f"; exact posterior (Gibbs reference) {ref:.3f}." if ref is not None else ".")
        + " ξ×100 has a Monte Carlo floor of about "
        + (f"{100 * gt['relative_mcse_of_std_norm']:.1f}" if gt else "–")
        + " from the reference alone.",
        "",
    ]
    lines += mamba_figure_lines(figure)
    lines += [
        "| sampler | method | chosen arm (log10 ε, batch, L) | KSD | ξ(σ̂)×100 | test RMSE "
        "| test log-lik | eval. steps | paper: arm | paper KSD | paper ξ×100 | paper RMSE |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        p = PAPER.get(r["method"], {}).get(r["sampler"], ("–", "–", "–", "–"))
        k = (
            "diverged"
            if r["eval_diverged"]
            else ("no sample" if r["eval_samples"] < 2 else f"{r['ksd']:.4g}")
        )
        xi = _f(100 * r["xi"], ".1f") if math.isfinite(r["xi"]) else "–"
        lines.append(
            f"| {r['sampler']} | {r['method']} | {arm_short(r['arm'])} | {k} | {xi} | "
            f"{_f(r['rmse'])} | {_f(r['test_loglik'])} | {r['eval_steps']:,} | "
            f"{p[3].replace('-', '−')} | {p[0]} | {p[1]} | "
            + (f"{p[2]:.2f}" if isinstance(p[2], float) else str(p[2]))
            + " |"
        )
    lines += mamba_cost_lines(results, tp, "shared")
    rmses = [r["rmse"] for r in results["rows"] if math.isfinite(r["rmse"])]
    lines += ["## Reading", "", "Counted on the table above (samplers with all three rows):", ""]
    lines += _checks(results)
    lines += [
        "",
        "Why our numbers differ from the paper's, beyond sampling noise:",
        "",
        "* **The data.** "
        + (
            "The synthetic ratings are drawn from a PMF of the same form (then rounded to the "
            "1–5 scale), so the model fits them better than it fits MovieLens"
            + (
                f": every test RMSE here (at most {max(rmses):.3f}; the MAP's "
                f"{cfg['map_test_rmse']:.3f}) sits below the paper's 1.10–1.25"
                if rmses and max(rmses) < 1.10
                else ""
            )
            + ". The KSD values, which grow with the number of ratings and the scale of the "
            "scores, are not directly comparable. What carries over is the comparison between "
            "methods for one sampler."
            if cfg["data"] == "synthetic"
            else f"Data: {cfg['data']}."
        ),
        "* **ξ is over the test predictions**, against an exact Gibbs reference; the paper's "
        "ξ is over the parameters against long SGLD runs, which for PMF measures the run as "
        "much as the posterior (the factors are identified only up to rotations: "
        "[below](#ground-truth)). The two ξ share a definition, not a reference.",
        _start_bullet(results),
        _budgets_bullet(results),
        _grid_bullet(results),
        f"* **KSD** is estimated on at most {cfg['ksd_max_samples']} thinned samples, each "
        "with a full-data score (80,000 ratings), so MAMBA's ranking of close arms is noisy.",
        "",
        "## Ground truth",
        "",
        "The reference is the posterior of the test predictions from the exact blocked Gibbs "
        f"sampler ([models]({GROUND_TRUTH_PAGE}): the command, the diagnostics and the reason)."
        + (
            f" {gt['chains']} chains from the L-BFGS MAP, {gt['draws_per_chain']:,} sweeps "
            f"each after burn-in: R-hat at most {gt['rhat']['max']:.3f} and ESS at least "
            f"{gt['ess']['min']:,.0f} over all 20,000 predictions, relative MCSE of the sd "
            f"vector {100 * gt['relative_mcse_of_std_norm']:.2f}%."
            if gt
            else ""
        ),
        "",
        "**Why not the parameters.** Earlier attempts stored a per-parameter reference from "
        "full-batch HMC (`python models/make_pmf_ground_truth.py --method hmc --chains 2 "
        "--warmup 300 --leapfrog 20 --max-minutes 35`, on an idle machine: 6,850 draws per "
        "chain, acceptance 0.83):",
        "",
        "| | ESS min | ESS median | R-hat max |",
        "|---|---|---|---|",
        "| `U` (943 × 20) | 2.5 | 14 | 7.6 |",
        "| `V` (1,682 × 20) | 2.4 | 20 | 8.5 |",
        "| `mu_U`, `mu_V` (20 each) | 5.3, 4.3 | 16, 20 | 1.9, 2.3 |",
        "| `log_lambda_U`, `log_lambda_V` (20 each) | 12, 19 | 80, 91 | 1.33, 1.16 |",
        "",
        "The Gibbs sampler, whose sweeps move whole rows at once, disagrees across chains on "
        "the factors too (R-hat of `U` up to 5.3) while agreeing on every prediction. Both "
        "samplers point to the same cause: the factors are identified only up to "
        "near-rotations and permutations of the latent space, so no finite run has a "
        "per-parameter standard deviation that is a property of the posterior. Note also "
        "that those HMC runs started from the random initial state, not a MAP: until "
        "`find_map`'s first L-BFGS step was scaled, its line search failed on this model and "
        "returned the start unchanged.",
    ]
    return "\n".join(lines) + "\n"


def publish(results: dict[str, Any], outs: Any) -> None:
    """Writes the figure and the page under ``outs`` (``docs/`` with ``--write-docs``)."""
    fig_name = outs.name(f"{STUDY_NAME}.png")
    figure = None
    if results["mamba"]:
        plot_mamba_rounds(results, outs.figure(f"{STUDY_NAME}.png"))
        figure = f"../figures/{fig_name}"
    with open(outs.study(f"{STUDY_NAME}.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, allow_nan=True)
    text = render(results, figure)
    path = outs.write_study(STUDY_NAME, text)
    print(text)
    print(f"wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
