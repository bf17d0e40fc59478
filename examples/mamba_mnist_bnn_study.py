"""The MAMBA paper's §4.3 BNN study (Tables 3, 8) at CPU scale.

The 784-100-10 network with a softmax hidden layer and N(0, 1) priors
(``tfp_sgmcmc/models/mnist_bnn.py``, plain TF) on the synthetic MNIST-shaped
images (default) or MNIST files (``--mnist DIR|mnist.npz``). Six samplers
(SGLD, SGLD-CV, SGHMC, SGHMC-CV, SGNHT, SGNHT-CV), each tuned by

* MAMBA-KSD over the paper's grid: log10 ε ∈ {−2, −2.5, …, −7.5} × batch
  {100, 10, 1}% [× L ∈ {5, 10} for SGHMC], η = 3, a total budget ``T``;
* grid search: 10% batch, the same step sizes [× L], a fixed budget per
  configuration from the MAP plus N(0, 1) noise (the paper's start), picking
  the highest test accuracy (every 20th sample, as the paper's code);
* the heuristic: ε = 1/N (log10 ε = −4.8), 10% batch, L = 10;

then every tuned sampler runs a fixed budget from the MAP and we report the test
accuracy, ECE and MCE (10 equal-width bins, Bayesian model average) and KSD,
beside the paper's Table 3.

Budgets. The paper's are wall-clock times (MAMBA: R = 10 s for the surviving
arm; evaluation: 300 s), which make the results depend on the machine and its
load. The defaults here are deterministic: per-example gradient evaluations
(``tuning.gradient_evaluations``; an SGHMC step counts its L leapfrog
gradients, a control-variate step its two minibatch gradients), converted from
seconds at the throughput of an idle 2-core machine
(``IDLE_GRADIENTS_PER_SECOND``, measured with ``--throughput``). The time
budgets remain available (``--budget``, ``--grid-seconds``, ``--eval-seconds``),
and so are step counts (``--grid-steps``, the paper's unit for the grid, and
``--eval-steps``).

Run::

    python examples/mamba_mnist_bnn_study.py --quick     # smoke test (minutes per sampler)
    python examples/mamba_mnist_bnn_study.py             # full CPU-scale study
    python examples/mamba_mnist_bnn_study.py --throughput   # gradients/s per batch size

Writes ``studies/mamba_mnist_bnn.md``, ``studies/mamba_mnist_bnn.json`` (every
number on the page; rewritten after each row, so an interrupted run keeps its
rows) and ``figures/mamba_mnist_bnn.png`` under ``--out`` (default
``out/mamba_mnist_bnn/``), or in ``docs/`` with ``--write-docs``.
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
from tfp_sgmcmc.models import mnist_bnn as mb

STUDY_NAME = "mamba_mnist_bnn"
SCRIPT = "python examples/mamba_mnist_bnn_study.py"
#: The model's section of docs/models.md, as the study page (in docs/studies/) links it.
MODEL_PAGE = "../" + "models.md#modelsmnist_bnn-the-784-100-10-bnn-the-papers-43"

#: Per-example likelihood gradients per second of SGLD on this model at a 1% batch on
#: an idle 2-core CPU (``--throughput``: 1.23e5), rounded. Converts the time budgets to
#: the deterministic defaults below: a gradient budget ``G`` is ``G / 1.2e5`` s of
#: 1%-batch sampling. Larger batches use the cores better (``--throughput`` at a load
#: average of 3: 1.19e5, 1.67e5 and 1.85e5 gradients/s at 1%, 10% and 100%), so for
#: them the time equivalent is an upper bound.
IDLE_GRADIENTS_PER_SECOND = 1.2e5

#: Default budgets (full, quick) in per-example gradient evaluations.
#: MAMBA: T ≈ 40 s / 10 s; grid: ≈ 3 s / 1 s per configuration (60 / 20 SGLD
#: steps at a 10% batch); evaluation: ≈ 8 s / 4 s per chosen arm.
DEFAULT_MAMBA_GRADIENTS = (40 * IDLE_GRADIENTS_PER_SECOND, 10 * IDLE_GRADIENTS_PER_SECOND)
DEFAULT_GRID_GRADIENTS = (3 * IDLE_GRADIENTS_PER_SECOND, 1 * IDLE_GRADIENTS_PER_SECOND)
DEFAULT_EVAL_GRADIENTS = (8 * IDLE_GRADIENTS_PER_SECOND, 4 * IDLE_GRADIENTS_PER_SECOND)

#: Paper Table 3 (ECE %, MCE %) and Table 8 (log10 ε, batch %, L).
PAPER = {
    "MAMBA-KSD": {
        "SGLD": (1.0, 36.4, "-5.5, 1%"),
        "SGLD-CV": (0.9, 15.7, "-5.5, 1%"),
        "SGHMC": (0.7, 47.1, "-6.5, 1%, L=5"),
        "SGHMC-CV": (0.7, 21.3, "-6, 1%, L=5"),
        "SGNHT": (9.3, 45.7, "-5, 1%"),
        "SGNHT-CV": (0.9, 27.4, "-7.5, 1%"),
    },
    "Grid": {
        "SGLD": (14.6, 42.1, "-3.5, 10%"),
        "SGLD-CV": (8.8, 40.7, "-3.5, 10%"),
        "SGHMC": (20.1, 65.5, "-5, 10%, L=10"),
        "SGHMC-CV": (25.1, 55.2, "-5, 10%, L=10"),
        "SGNHT": (5.4, 42.2, "-5, 10%"),
        "SGNHT-CV": (7.7, 42.3, "-4.5, 10%"),
    },
    "Heuristic": {
        "SGLD": (0.8, 23.3, "-4.8, 10%"),
        "SGLD-CV": (0.7, 22.0, "-4.8, 10%"),
        "SGHMC": (50.9, 71.6, "-4.8, 10%, L=10"),
        "SGHMC-CV": (40.8, 74.8, "-4.8, 10%, L=10"),
        "SGNHT": (6.2, 43.2, "-4.8, 10%"),
        "SGNHT-CV": (7.0, 51.5, "-4.8, 10%"),
    },
}
METHODS = ("MAMBA-KSD", "Grid", "Heuristic")
#: Samples each evaluation run keeps (evenly thinned; the metrics use all of them).
EVAL_SAMPLES = 50
#: MAMBA's arms keep every step (the paper thins by 10): at these budgets a 10% arm runs
#: fewer than 10 steps in round 0 and would be pruned for having no sample, not for its
#: quality. The KSD still uses at most ``--ksd-samples`` evenly spaced ones.
MAMBA_THIN = 1


def _parser() -> Any:
    ap = _cli.parser(STUDY_NAME, __doc__.split("\n\n")[0], "reduced grids and budgets (smoke)")
    ap.add_argument("--samplers", default=",".join(SAMPLERS))
    ap.add_argument("--mnist", default=None, help="IDX directory or mnist.npz (default: synthetic)")
    # One group per budget (MAMBA's, each grid configuration's, each evaluation's): a
    # per-example gradient count by default, or steps, or wall-clock seconds.
    add_budget_options(ap, DEFAULT_MAMBA_GRADIENTS, DEFAULT_GRID_GRADIENTS, DEFAULT_EVAL_GRADIENTS)
    ap.add_argument("--ksd-samples", type=_cli.positive_int, default=None,
        help="max samples per KSD")
    ap.add_argument("--map-steps", type=_cli.positive_int, default=None,
        help="Adam steps for the MAP")
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


def throughput(seconds: float = 8.0) -> None:
    """Prints SGLD's steps/s and per-example gradients/s at 1%, 10% and 100% batches."""
    prob = mb.mnist_bnn(synthetic=True)
    base = prob.estimator(prob.batch_size_from_fraction(0.01))
    run_throughput(base, mb.init_state(), prob.batch_size_from_fraction, seconds=seconds)


def main() -> None:
    args = _parser().parse_args()
    outs = _cli.outputs(args)
    if args.throughput:
        throughput()
        return
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            results = json.load(f)
        publish(results, outs)
        return
    quick = args.quick
    samplers = args.samplers.split(",")
    for s in samplers:
        kernel_class(s)  # ValueError naming `name` for an unknown sampler
    bud = _budgets(args)
    ksd_n = args.ksd_samples if args.ksd_samples is not None else (5 if quick else 8)
    map_steps = args.map_steps if args.map_steps is not None else (500 if quick else 3000)
    steps = tuning.log10_grid(-3, -7, 1.0) if quick else tuning.log10_grid(-2, -7.5, 0.5)
    fractions = [0.1, 0.01] if quick else [1.0, 0.1, 0.01]
    leapfrogs = [5] if quick else [5, 10]

    t0 = time.time()
    load = LoadSampler()
    prob = mb.mnist_bnn(path=args.mnist) if args.mnist else mb.mnist_bnn(synthetic=True)
    base = prob.estimator(prob.batch_size_from_fraction(0.01))
    theta_map = sg.find_map(
        base, mb.init_state(), method="adam", num_steps=map_steps, learning_rate=1e-3
    ).position
    map_m = prob.metrics([p.numpy() for p in theta_map])
    cv = sg.ControlVariateEstimator(base, theta_map)
    ksd = tuning.KSDMetric(max_samples=ksd_n, score_block_size=2, preconditioner=None,
                           check_validity=False)
    neg_acc = tuning.FunctionMetric(
        lambda s: (
            -prob.metrics([p[::20] if p.shape[0] >= 40 else p for p in s], max_samples=20)[
                "accuracy"
            ]
        ),
        "-accuracy",
    )
    rng = np.random.default_rng(1)
    noisy_map = [p + tf.constant(rng.standard_normal(p.shape), p.dtype) for p in theta_map]
    n_heur = prob.num_train  # 1/60,000: log10 ε = −4.8 as the paper
    config = {
        "budgets": {k: budget_json(b) for k, b in bud.items()},
        "idle_gradients_per_second": IDLE_GRADIENTS_PER_SECOND,
        "ksd_max_samples": ksd_n,
        "mamba_thin": MAMBA_THIN,
        "eval_samples": EVAL_SAMPLES,
        "map_steps": map_steps,
        "step_grid_log10": [float(np.log10(x)) for x in steps],
        "batch_fractions": fractions,
        "leapfrogs": leapfrogs,
        "samplers": samplers,
        "quick": quick,
        "data": prob.source,
        "num_train": prob.num_train,
        "map_metrics": map_m,
        "command": _cli.command_line(),
        "provenance": _cli.provenance(),
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
            grid_metric=neg_acc,
            grid_steps=bud["grid"],
            num_train=n_heur,
            eval_seconds=bud["eval"],
            eval_samples=EVAL_SAMPLES,
            mamba_thin=MAMBA_THIN,
            sampling=tuning.ArmSampling(thin=1),
        ):
            rec = ev.records[0]
            s = [np.asarray(p) for p in ev.best_samples]
            ok = not rec.diverged and s[0].shape[0] >= 1
            m = (
                prob.metrics(s, max_samples=50)
                if ok
                else {k: float("nan") for k in ("accuracy", "log_loss", "ece", "mce")}
            )
            row = {
                "sampler": name,
                "method": method,
                "arm": {
                    k: (float(v) if isinstance(v, float) else v) for k, v in r.best_arm.items()
                },
                "label": key,
                "ksd": rec.metric if ok else float("inf"),
                **{k: float(v) for k, v in m.items()},
                "eval_steps": int(rec.steps),
                "eval_samples": int(s[0].shape[0]),
                "eval_sampling_s": float(rec.sampling_seconds),
                "eval_diverged": bool(rec.diverged),
                "tuning_sampling_s": float(r.total_sampling_seconds),
                "tuning_steps": int(r.total_steps),
            }
            if method == "MAMBA-KSD":
                results["mamba"][name] = mamba_json(r)
            results["rows"].append(row)
            save()
            print(
                f"{name:9s} {method:10s} {key:55s} KSD {row['ksd']:10.4g} "
                f"acc {m['accuracy']:.4f} ECE {100 * m['ece']:.1f}% MCE {100 * m['mce']:.1f}% "
                f"steps {row['eval_steps']} samples {row['eval_samples']} "
                f"[{(time.time() - t0) / 60:.1f} min, load {os.getloadavg()[0]:.1f}]",
                flush=True,
            )
    results["finished"] = True
    load.stop()
    save()
    publish(results, outs)


# --------------------------------------------------------------------------- #
# The page and the figure, from the results JSON alone.
# --------------------------------------------------------------------------- #


def _pct(x: float) -> str:
    return "–" if not math.isfinite(x) else f"{100 * x:.1f}"


def _checks(results: dict[str, Any]) -> list[str]:
    """The paper's qualitative findings, counted on our rows and on the paper's."""
    rows = {(r["sampler"], r["method"]): r for r in results["rows"]}
    names = [s for s in results["config"]["samplers"] if all((s, m) in rows for m in METHODS)]
    if not names:
        return ["- No sampler finished all three methods."]
    n = len(names)

    def paper_arm(method: str, s: str) -> tuple[float, float]:
        parts = PAPER[method][s][2].split(", ")
        return float(parts[0]), float(parts[1].rstrip("%")) / 100

    out = []
    ours = [s for s in names if rows[(s, "MAMBA-KSD")]["arm"]["batch_fraction"] == 0.01]
    paper = [s for s in names if paper_arm("MAMBA-KSD", s)[1] == 0.01]
    out.append(
        f"- MAMBA-KSD picks a 1% batch for {len(ours)} of {n} samplers "
        f"(paper: {len(paper)} of {n})."
    )
    ours = [
        s
        for s in names
        if rows[(s, "Grid")]["arm"]["step_size"]
        > rows[(s, "MAMBA-KSD")]["arm"]["step_size"] * 1.0001
    ]
    paper = [s for s in names if paper_arm("Grid", s)[0] > paper_arm("MAMBA-KSD", s)[0]]
    out.append(
        f"- The accuracy grid picks a larger step than MAMBA-KSD for {len(ours)} of {n} "
        f"samplers (paper: {len(paper)} of {n})."
    )

    def ece(s: str, m: str) -> float:
        x = rows[(s, m)]["ece"]
        return x if math.isfinite(x) else math.inf

    ours = [s for s in names if ece(s, "MAMBA-KSD") < ece(s, "Grid")]
    paper = [s for s in names if PAPER["MAMBA-KSD"][s][0] < PAPER["Grid"][s][0]]
    out.append(
        f"- MAMBA-KSD's arm has a lower ECE than the grid's for {len(ours)} of {n} "
        f"samplers (paper: {len(paper)} of {n}): {', '.join(ours) or 'none'}."
    )
    ours = [s for s in names if ece(s, "MAMBA-KSD") < ece(s, "Heuristic")]
    paper = [s for s in names if PAPER["MAMBA-KSD"][s][0] < PAPER["Heuristic"][s][0]]
    out.append(
        f"- … and than the heuristic's for {len(ours)} of {n} "
        f"(paper: {len(paper)} of {n}): {', '.join(ours) or 'none'}."
    )
    for s in ("SGHMC", "SGHMC-CV"):
        if s in names:
            h = rows[(s, "Heuristic")]
            what = (
                "diverged"
                if h["eval_diverged"]
                else f"ECE {_pct(h['ece'])}%, accuracy {h['accuracy']:.3f}"
            )
            out.append(
                f"- Heuristic {s} (ε = 1/N, L = 10; paper ECE {PAPER['Heuristic'][s][0]}%): {what}."
            )
    for method in METHODS:
        e = [rows[(s, method)]["ece"] for s in names]
        fin = [x for x in e if math.isfinite(x)]
        mean = f"{100 * np.mean(fin):.1f}%" if fin else "–"
        extra = f" ({n - len(fin)} diverged)" if len(fin) < n else ""
        out.append(
            f"- Mean ECE of {method}: {mean}{extra} "
            f"(paper: {np.mean([PAPER[method][s][0] for s in names]):.1f}%)."
        )
    mm = results["config"]["map_metrics"]
    out.append(
        f"- For scale: the MAP alone has ECE {_pct(mm['ece'])}% and accuracy "
        f"{mm['accuracy']:.3f} on the same test set."
    )
    return out


def _budgets_bullet(results: dict[str, Any]) -> str:
    cfg = results["config"]
    text = (
        "* **The budgets.** The paper ran on a GPU with R = 10 s for MAMBA's survivor "
        "(T ≈ 83 s for 36 arms) and 300 s per evaluation."
    )
    r0 = round0(results)
    if r0:
        parts = [
            (f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}")
            + f" steps at a {100 * f:g}% batch"
            + (f" ({none} of {n} arms without a sample)" if none else "")
            for f, (lo, hi, none, n) in sorted(r0.items(), reverse=False)
        ]
        text += (
            " Here round 0 of MAMBA (over all samplers, L and step sizes) gave an arm "
            + ", ".join(parts)
            + ": the early rounds rank arms on the KSD of a handful of samples near the MAP, "
            "and an arm that cannot complete a step there is pruned for its cost, not its "
            "quality (as under a time budget)."
        )
    b = cfg["budgets"]["eval"]
    if b["unit"] == "gradient_evaluations":
        text += (
            f" Each evaluation is {b['amount'] / cfg['num_train']:.0f} epochs' worth of "
            "per-example gradients, not 300 s of GPU time: the metrics describe the first "
            "epochs after the MAP, where a small-step arm has moved little from the MAP and "
            "keeps much of its calibration, good or bad."
        )
    return text


def _batch_bullet(results: dict[str, Any]) -> str:
    """Why MAMBA's batch sizes may differ from the paper's (all 1%)."""
    rows = [r for r in results["rows"] if r["method"] == "MAMBA-KSD"]
    picks = [r["arm"]["batch_fraction"] for r in rows]
    n1, n10 = picks.count(0.01), picks.count(0.1)
    thin = results["config"].get("mamba_thin", 10)
    text = (
        f"* **Batch size.** MAMBA-KSD chose a 1% batch for {n1} and a 10% batch for {n10} of "
        f"{len(rows)} samplers; the paper chose 1% for all six, under a time budget and "
        "thinning by 10."
    )
    if thin == 1 and round0(results).get(0.1, (0, 0, 0, 0))[1] < 10:
        text += (
            " Here every step is kept, so a 10% arm's handful of round-0 steps counts as "
            "samples and it competes on its KSD; with the paper's thinning it would have had "
            "none and the 1% arms would have won by default. A gradient budget also gives a "
            "1% arm ten times the steps of a 10% arm, as a time budget does only where the "
            "step time scales with the batch."
        )
    return text


def _grid_bullet(results: dict[str, Any]) -> str:
    cfg = results["config"]
    b = cfg["budgets"]["grid"]
    if b["unit"] == "gradient_evaluations":
        its = b["amount"] / (0.1 * cfg["num_train"])
        what = f"{num(b['amount'])} per-example gradients per configuration ({its:.0f} SGLD "
        what += "iterations at a 10% batch, fewer for SGHMC and the control variates)"
    else:
        what = f"{budget_text(b, cfg['idle_gradients_per_second'])} per configuration"
    return (
        f"* **The grid search** has {what} where the paper has 1,000 iterations, from MAP + "
        "N(0, 1) noise: noise of the prior's scale on every weight wrecks the network, and in "
        "so few iterations only large steps recover accuracy, which pushes the grid towards "
        "the largest stable step."
    )


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
    lines = [
        "# MAMBA study: the 784-100-10 BNN (paper §4.3, CPU scale"
        + (", quick run)" if quick else ")"),
        "",
        "The paper's Table 3 (ECE, MCE) and Table 8 (chosen hyperparameters) on the network of",
        f"[`models.mnist_bnn`]({MODEL_PAGE}):",
        "softmax hidden layer, N(0, 1) priors, 79,510 weights, on the synthetic MNIST-shaped",
        "images (60,000/10,000 of 28×28) or on the MNIST files. This page is written by the",
        "study script from its results JSON (every number below comes from the run it names).",
        "",
        "```bash",
        f"{SCRIPT}                  # full CPU-scale study → out/mamba_mnist_bnn/",
        f"{SCRIPT} --mnist ~/data/mnist    # IDX files or mnist.npz",
        f"{SCRIPT} --quick          # smoke run (minutes per sampler)",
        f"{SCRIPT} --throughput     # gradients/s per batch size (the budget conversion)",
        f"{SCRIPT} --from-json out/mamba_mnist_bnn/studies/mamba_mnist_bnn.json --write-docs",
        "```",
        "",
        "## Design and budgets",
        "",
        "| | paper | this run |",
        "|---|---|---|",
        "| samplers | SGLD, SGLD-CV, SGHMC, SGHMC-CV, SGNHT, SGNHT-CV | "
        f"{', '.join(cfg['samplers'])} |",
        f"| MAMBA-KSD grid | log10 ε −2 … −7.5 (12) × batch {{100, 10, 1}}% [× L {{5, 10}}], η = 3 "
        f"| log10 ε {sg_grid[0]:g} … {sg_grid[-1]:g} ({len(sg_grid)}) × batch ".replace("-", "−")
        + f"{{{', '.join(f'{100 * f:g}' for f in cfg['batch_fractions'])}}}% "
        f"[× L {{{', '.join(str(x) for x in cfg['leapfrogs'])}}}]: {n_arms} "
        f"[{n_arms * len(cfg['leapfrogs'])}] arms, η = 3 |",
        f"| MAMBA budget | R = 10 s for the surviving arm (T ≈ 83 s for 36 arms) "
        f"| T = {budget_text(b['mamba'], rate)} |",
        "| grid search | 10% batch, 1,000 iterations per configuration from MAP + N(0, 1), "
        f"highest test accuracy (every 20th sample) | same, {budget_text(b['grid'], rate)} "
        "per configuration |",
        "| heuristic | ε = 1/60,000 (log10 ε = −4.8), 10% batch, L = 10 | same |",
        f"| evaluation | 300 s from the MAP | {budget_text(b['eval'], rate)} from the MAP |",
        "| metrics | ECE, MCE (authors' binning) | accuracy, ECE, MCE (10 equal-width bins, "
        f"Bayesian model average of ≤ 50 thinned samples), KSD on ≤ {cfg['ksd_max_samples']} "
        "thinned samples |",
        "",
        f"The MAP is {cfg['map_steps']:,} Adam steps (learning rate 1e-3) at a 1% batch. SGHMC "
        'uses the paper code\'s update order (`order="explicit"`, friction 0.01), SGNHT '
        "diffusion 0.01. MAMBA's arms keep every step (the paper: every 10th; at these budgets "
        "a 10% arm runs fewer than 10 steps in round 0 and would be pruned for having no "
        "sample rather than for its quality), the grid search every step (scored "
        f"on every 20th), and each evaluation run about {EVAL_SAMPLES} evenly thinned samples "
        "(every step when it runs fewer).",
        "",
        "**Why gradient evaluations.** The paper's budgets are wall-clock seconds. Here the "
        "machine is shared, so a time budget would make the picks depend on the load. A budget "
        "of G per-example likelihood gradients is deterministic (an SGHMC step counts its L "
        "leapfrog gradients, a control-variate step its two minibatch gradients) and, unlike a "
        "step count, still charges a 10% batch ten times a 1% one, roughly as time does. The "
        "defaults convert seconds at "
        f"{num(rate)} gradients/s, SGLD's throughput on this model at a 1% batch on an idle "
        "2-core CPU; larger batches use the cores better and run more gradients per second, "
        "so for them the quoted idle seconds are upper bounds (measure yours with "
        "`--throughput`; this run's own throughput is below). A step-count evaluation "
        "(`--eval-steps`) would give "
        "an SGHMC arm with L = 10 ten times the compute of an SGLD arm, and a 10% arm ten "
        "times a 1% one, so the default evaluation is in gradients too. The time budgets of the "
        "paper remain available (`--budget`, `--grid-seconds`, `--eval-seconds`).",
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
    lines += [
        "## Results" + (" (partial)" if partial else ""),
        "",
        f"Command: `{cfg['command']}` — {status}. Wall time {cfg['wall_s'] / 60:.1f} min; "
        f"1-minute load average during the run {la.get('mean', float('nan')):.1f} on 2 cores "
        f"(min {la.get('min', float('nan')):.1f}, max {la.get('max', float('nan')):.1f}, "
        f"{la.get('n', 0)} readings)."
        + (f" {cfg['provenance']}" if cfg.get("provenance") else "")
        + (
            " Throughput in MAMBA's arms over all samplers, per-example gradients per "
            "sampling second: "
            + ", ".join(f"{num(x)} at a {100 * f:g}% batch" for f, x in tp.items())
            + f" (the idle SGLD figure behind the defaults: {num(rate)})."
            if tp
            else ""
        ),
        "",
        f"Data: {cfg['data']}. MAP: accuracy {cfg['map_metrics']['accuracy']:.4f}, ECE "
        f"{_pct(cfg['map_metrics']['ece'])}%, MCE {_pct(cfg['map_metrics']['mce'])}%.",
        "",
    ]
    lines += mamba_figure_lines(figure)
    lines += [
        "| sampler | method | chosen arm (log10 ε, batch, L) | accuracy | ECE % | MCE % | KSD "
        "| eval. steps | paper: arm | paper ECE % | paper MCE % |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        p = PAPER.get(r["method"], {}).get(r["sampler"], ("–", "–", "–"))
        acc = "–" if not math.isfinite(r["accuracy"]) else f"{r['accuracy']:.4f}"
        k = (
            "diverged"
            if r["eval_diverged"]
            else ("no sample" if r["eval_samples"] == 0 else f"{r['ksd']:.4g}")
        )
        lines.append(
            f"| {r['sampler']} | {r['method']} | {arm_short(r['arm'])} | {acc} | "
            f"{_pct(r['ece'])} | {_pct(r['mce'])} | {k} | {r['eval_steps']:,} | "
            f"{p[2].replace('-', '−')} | {p[0]} | {p[1]} |"
        )
    lines += mamba_cost_lines(results, tp, "loaded")
    lines += ["## Reading", "", "Counted on the table above (samplers with all three rows):", ""]
    lines += _checks(results)
    lines += [
        "",
        "Why our numbers differ from the paper's, beyond sampling noise:",
        "",
        "* **The data.** "
        + (
            "The synthetic stand-in is not MNIST: ten glyph families blended into genuinely "
            "ambiguous images, so the same network reaches a much lower test accuracy (MAP: "
            f"{cfg['map_metrics']['accuracy']:.3f}) and the calibration problem is a "
            "different one. ECE values are not comparable in absolute terms; what carries "
            "over is the comparison between methods for one sampler, and the paper's "
            "qualitative pattern."
            if cfg["data"] == "synthetic"
            else f"Data: {cfg['data']}."
        ),
        _budgets_bullet(results),
        _batch_bullet(results),
        _grid_bullet(results),
        "* **KSD** is estimated on at most "
        f"{cfg['ksd_max_samples']} thinned samples (each needs a full-data score: a forward and "
        "backward pass over 60,000 images), so MAMBA's ranking of close arms is noisy.",
        "* **ECE/MCE binning**: 10 equal-width bins over the model-averaged predictive; the "
        "authors' code bins differently (`paper_compatible=True` in `MnistBNN.metrics`). MCE, the "
        "worst bin, is dominated by sparsely filled bins and varies widely.",
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
