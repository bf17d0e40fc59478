"""The loop the MAMBA paper's Tables 1-3 share: six samplers, each tuned three ways.

Coullon, South & Nemeth (2023) tune SGLD, SGHMC and SGNHT, each with and without
control variates, by MAMBA-KSD, by a grid search on a test metric and by the
heuristic ε = 1/N, then evaluate every chosen arm from the MAP. The studies
(``mamba_logistic_study.py``, ``mamba_pmf_study.py``, ``mamba_mnist_bnn_study.py``)
differ in the model, the grid-search metric and what they report; this module
holds what they share, so each study states only that: the tuning loop, the
deterministic budget options, the load record, the MAMBA record and its figure.

Budgets. The paper's budgets are wall-clock seconds, which make the picks depend
on the machine and its load. The studies' defaults are per-example likelihood
gradient evaluations (``tuning.gradient_evaluations``: an SGHMC step counts its
``L`` leapfrog gradients, a control-variate step its two minibatch gradients),
converted from seconds at a model's measured idle throughput
(:func:`measure_throughput`); :func:`add_budget_options` gives every study the
same three option groups (MAMBA's total, each grid configuration's, each
evaluation's), each in gradients by default, or steps, or seconds.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
from _cli import positive_float, positive_int

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning
from tfp_sgmcmc.tuning.arms import arm_label
from tfp_sgmcmc.tuning.baselines import heuristic_arm, run_fixed
from tfp_sgmcmc.tuning.budget import steps_for
from tfp_sgmcmc.tuning.runner import gradient_cost_per_step

__all__ = [
    "SAMPLERS",
    "LoadSampler",
    "add_budget_options",
    "arm_short",
    "arm_throughput",
    "budget_option_group",
    "budget_json",
    "budget_text",
    "budgets",
    "kernel_class",
    "mamba_json",
    "measure_throughput",
    "num",
    "plot_mamba_rounds",
    "resolve_budget",
    "round0",
    "run_throughput",
    "tune_three_ways",
    "write_partial",
]

#: The paper's six samplers; "-CV" runs the same kernel on the control-variate estimator.
SAMPLERS = ["SGLD", "SGLD-CV", "SGHMC", "SGHMC-CV", "SGNHT", "SGNHT-CV"]


def kernel_class(name: str) -> tuple[type, dict[str, Any]]:
    """The kernel class and fixed keyword arguments of one of ``SAMPLERS``.

    SGHMC uses the paper code's update order (``order="explicit"``) and friction
    0.01; SGNHT its diffusion 0.01.
    """
    base = name.split("-")[0]
    if base == "SGLD":
        return sg.SGLD, {}
    if base == "SGHMC":
        return sg.SGHMC, {"order": "explicit", "friction": 0.01}
    if base == "SGNHT":
        return sg.SGNHT, {"diffusion": 0.01}
    raise ValueError(f"`name` must be one of {SAMPLERS}, got {name!r}.")


def tune_three_ways(
    name: str,
    *,
    base: Any,
    control_variate: Any,
    theta_map: Any,
    grid_start: Any,
    steps: list[float],
    fractions: list[float],
    leapfrogs: list[int],
    budget: float | tuning.Budget,
    ksd: Any,
    grid_metric: Any,
    grid_steps: int | tuning.Budget,
    num_train: int,
    eval_seconds: float | tuning.Budget,
    eval_samples: int | None = None,
    mamba_thin: int = 10,
    **run_kwargs: Any,
) -> Iterator[tuple[str, str, Any, Any]]:
    """Tunes one sampler by MAMBA-KSD, grid search and the heuristic; evaluates each pick.

    MAMBA searches ``steps × fractions`` (× ``leapfrogs`` for SGHMC) from
    ``theta_map`` with a total budget ``budget`` (sampling seconds ``T``, or a
    deterministic [`Budget`][tfp_sgmcmc.tuning.budget.Budget] such as
    ``tuning.gradient_evaluations(G)``); the grid search runs ``grid_steps``
    iterations (or a ``Budget``) per point at a 10% batch from ``grid_start``
    and keeps the best ``grid_metric``; the heuristic takes ε = 1/``num_train``,
    10% batch (L = 10 for SGHMC). Each chosen arm then runs ``eval_seconds``
    (or a ``Budget``, e.g. ``tuning.steps(n)``) from ``theta_map``, scored by
    ``ksd``; methods that chose the same arm share one evaluation. With a
    deterministic evaluation budget and ``eval_samples``, each evaluation keeps
    about that many samples (thinning ``max(1, steps // eval_samples)``, so an
    expensive arm that runs few steps still yields samples); otherwise every
    10th. MAMBA's metric sees every ``mamba_thin``-th step (the paper's 10 by
    default). ``run_kwargs`` (e.g. ``sampling=tuning.ArmSampling(thin=1)``) go to the
    grid search and the heuristic.

    Yields:
      ``(method, arm label, tuning result, evaluation result)`` per method.
    """
    cls, kw = kernel_class(name)
    est = control_variate if name.endswith("-CV") else base
    common = dict(kernel=tuning.KernelSpec(cls, est, **kw))
    axes: dict[str, list] = {"step_size": steps, "batch_fraction": fractions}
    if cls is sg.SGHMC:
        axes["num_leapfrog_steps"] = leapfrogs
    grid_budget = grid_steps if isinstance(grid_steps, tuning.Budget) else tuning.steps(grid_steps)
    eval_budget = (
        eval_seconds if isinstance(eval_seconds, tuning.Budget) else tuning.seconds(eval_seconds)
    )
    results = {
        "MAMBA-KSD": tuning.MAMBA(
            tuning.grid(**axes),
            theta_map,
            budget=budget,
            metric=ksd,
            progress=False,
            sampling=tuning.ArmSampling(thin=mamba_thin),
            **common,
        ).run(),
        "Grid": tuning.grid_search(
            tuning.grid(**{**axes, "batch_fraction": [0.1]}),
            grid_start,
            budget_per_arm=grid_budget,
            metric=grid_metric,
            progress=False,
            **run_kwargs,
            **common,
        ),
        "Heuristic": run_fixed(
            "heuristic",
            [heuristic_arm(num_train, 10 if cls is sg.SGHMC else None)],
            theta_map,
            budget_per_arm=tuning.steps(1),
            metric=grid_metric,
            progress=False,
            **run_kwargs,
            **common,
        ),
    }
    evaluations: dict[str, Any] = {}
    for method, result in results.items():
        label = arm_label(result.best_arm)
        if label not in evaluations:
            thin = 10
            if eval_samples is not None and eval_budget.deterministic:
                cost = gradient_cost_per_step(common["kernel"](**result.best_arm))
                n = steps_for(eval_budget.amount, eval_budget, cost)
                thin = max(1, n // eval_samples)
            evaluations[label] = run_fixed(
                "eval",
                [result.best_arm],
                theta_map,
                budget_per_arm=eval_budget,
                metric=ksd,
                progress=False,
                sampling=tuning.ArmSampling(thin=thin),
                **common,
            )
        yield method, label, result, evaluations[label]


def write_partial(out_dir: str, rows: list[dict]) -> None:
    """Writes the rows so far, so an interrupted study keeps its finished samplers."""
    with open(os.path.join(out_dir, "rows_partial.json"), "w") as f:
        json.dump(rows, f, indent=1)


# --------------------------------------------------------------------------- #
# Deterministic budgets: the option groups and their resolution.
# --------------------------------------------------------------------------- #


def budget_option_group(
    ap: Any,
    gradients_flag: str,
    defaults: tuple[float, float],
    what: str,
    steps: tuple[str, str] | None,
    seconds: tuple[str, str],
) -> None:
    """A mutually exclusive group: gradients (``what``, the default unit), [steps,] seconds.

    ``defaults`` are the (full, quick) gradient budgets quoted in the help;
    ``steps`` and ``seconds`` are ``(flag, help)`` pairs.
    """
    group = ap.add_mutually_exclusive_group()
    group.add_argument(
        gradients_flag,
        type=positive_float,
        default=None,
        help=f"{what} (default: {defaults[0]:.3g}, quick {defaults[1]:.3g})",
    )
    if steps is not None:
        group.add_argument(steps[0], type=positive_int, default=None, help=steps[1])
    group.add_argument(seconds[0], type=positive_float, default=None, help=seconds[1])


def add_budget_options(
    ap: Any,
    mamba: tuple[float, float],
    grid: tuple[float, float],
    evaluation: tuple[float, float],
) -> None:
    """The three budget groups every paper-table study takes, with (full, quick) defaults.

    * MAMBA's total ``T``: ``--budget-gradients`` | ``--budget`` (seconds);
    * each grid configuration: ``--grid-gradients`` | ``--grid-steps`` | ``--grid-seconds``;
    * each evaluation run: ``--eval-gradients`` | ``--eval-steps`` | ``--eval-seconds``.

    Read them back with :func:`budgets`.
    """
    budget_option_group(
        ap, "--budget-gradients", mamba,
        "MAMBA total budget T in per-example gradient evaluations", None,
        ("--budget", "MAMBA total sampling seconds T (wall clock)"),
    )  # fmt: skip
    budget_option_group(
        ap, "--grid-gradients", grid,
        "per-example gradient evaluations per grid configuration",
        ("--grid-steps", "iterations per grid configuration"),
        ("--grid-seconds", "sampling seconds per configuration"),
    )  # fmt: skip
    budget_option_group(
        ap, "--eval-gradients", evaluation,
        "per-example gradient evaluations of each evaluation run",
        ("--eval-steps", "steps of each evaluation run"),
        ("--eval-seconds", "sampling seconds of each evaluation"),
    )  # fmt: skip


def resolve_budget(
    gradients: float | None, steps: int | None, seconds: float | None, default: float
) -> tuning.Budget:
    """The budget an option group asked for (steps, seconds, else gradients)."""
    if steps is not None:
        return tuning.steps(steps)
    if seconds is not None:
        return tuning.seconds(seconds)
    return tuning.gradient_evaluations(default if gradients is None else gradients)


def budgets(
    args: Any,
    mamba: tuple[float, float],
    grid: tuple[float, float],
    evaluation: tuple[float, float],
) -> dict[str, tuning.Budget]:
    """``{"mamba", "grid", "eval"}`` budgets from :func:`add_budget_options`' arguments.

    ``args.quick`` selects the second of each (full, quick) default.
    """
    q = 1 if args.quick else 0
    return {
        "mamba": resolve_budget(args.budget_gradients, None, args.budget, mamba[q]),
        "grid": resolve_budget(args.grid_gradients, args.grid_steps, args.grid_seconds, grid[q]),
        "eval": resolve_budget(
            args.eval_gradients, args.eval_steps, args.eval_seconds, evaluation[q]
        ),
    }


def budget_json(b: tuning.Budget) -> dict[str, Any]:
    """``{"amount", "unit"}`` of a budget, as the results JSON stores it."""
    return {"amount": float(b.amount), "unit": b.unit}


def num(x: float) -> str:
    """``4.8e6`` for 4.8e+06 (3 significant digits)."""
    m, _, e = f"{x:.3g}".partition("e")
    return m + (f"e{int(e)}" if e else "")


def budget_text(b: dict[str, Any], rate: float, at: str = "1%") -> str:
    """A stored budget for a page: ``4.8e6 gradients (≈ 40 s idle at 1%)``, or its unit."""
    if b["unit"] == "seconds":
        return f"{b['amount']:g} s (wall clock)"
    if b["unit"] == "steps":
        return f"{b['amount']:g} steps"
    return f"{num(b['amount'])} gradients (≈ {b['amount'] / rate:.3g} s idle at {at})"


def arm_short(arm: dict[str, Any]) -> str:
    """``−5.5, 1%, L=5`` (the paper's Tables 6 and 8 form)."""
    out = f"{math.log10(arm['step_size']):.2g}, {100 * arm['batch_fraction']:g}%"
    if "num_leapfrog_steps" in arm:
        out += f", L={arm['num_leapfrog_steps']}"
    return out.replace("-", "−")


# --------------------------------------------------------------------------- #
# Throughput (the conversion behind the gradient budgets) and the load record.
# --------------------------------------------------------------------------- #


def measure_throughput(
    estimator: Any,
    init_state: Any,
    batch_size_from_fraction: Any,
    fractions: tuple[float, ...] = (0.01, 0.1, 1.0),
    seconds: float = 8.0,
) -> dict[str, Any]:
    """SGLD's steps/s and per-example gradients/s at each batch fraction.

    Each fraction runs 20 warm-up steps (compiling), then ``seconds`` of sampling
    at ε = 10⁻⁶ from ``init_state``; the rate is steps per *sampling* second
    (compilation excluded) times the batch size. ``estimator`` is the study's
    1%-batch estimator (the tuner rebuilds it per batch size).

    Returns:
      ``{"load_average_start", "<fraction>": {"steps_per_s", "gradients_per_s"},
      …, "load_average_end"}``.
    """
    zero = tuning.FunctionMetric(lambda s: 0.0, "none")
    common = dict(kernel=tuning.KernelSpec(sg.SGLD, estimator))
    out: dict[str, Any] = {"load_average_start": os.getloadavg()[0]}
    for frac in fractions:
        arm = {"step_size": 1e-6, "batch_fraction": frac}
        run_fixed(
            "warm-up", [arm], init_state, budget_per_arm=tuning.steps(20), metric=zero,
            progress=False, **common,
        )  # fmt: skip
        rec = run_fixed(
            "throughput", [arm], init_state, budget_per_arm=tuning.seconds(seconds),
            metric=zero, progress=False, **common,
        ).records[0]  # fmt: skip
        rate = rec.steps / rec.sampling_seconds
        out[f"{frac:g}"] = {
            "steps_per_s": rate,
            "gradients_per_s": rate * batch_size_from_fraction(frac),
        }
    out["load_average_end"] = os.getloadavg()[0]
    return out


def run_throughput(
    estimator: Any, init_state: Any, batch_size_from_fraction: Any, seconds: float = 8.0
) -> dict[str, Any]:
    """:func:`measure_throughput`, printed per batch size and as one JSON line."""
    out = measure_throughput(estimator, init_state, batch_size_from_fraction, seconds=seconds)
    for k, v in out.items():
        if isinstance(v, dict):
            print(
                f"batch {100 * float(k):g}%: {v['steps_per_s']:.1f} steps/s, "
                f"{v['gradients_per_s']:.3g} per-example gradients/s",
                flush=True,
            )
    print(json.dumps(out))
    return out


class LoadSampler:
    """Samples the 1-minute load average every ``period`` seconds in a daemon thread."""

    def __init__(self, period: float = 20.0) -> None:
        self.values = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period,), daemon=True)
        self._thread.start()

    def _run(self, period: float) -> None:
        while not self._stop.wait(period):
            self.values.append(os.getloadavg()[0])

    def summary(self) -> dict[str, float]:
        """Mean, min and max of the readings so far, and their number ``n``."""
        v = self.values + [os.getloadavg()[0]]
        return {"mean": float(np.mean(v)), "min": float(min(v)), "max": float(max(v)), "n": len(v)}

    def stop(self) -> None:
        self._stop.set()


# --------------------------------------------------------------------------- #
# MAMBA's record: JSON, round-0 summary, throughput in its arms, the figure.
# --------------------------------------------------------------------------- #


def mamba_json(r: Any) -> dict[str, Any]:
    """A MAMBA result's rounds and per-arm records as the results JSON stores them."""
    return {
        "best_index": int(r.best_index),
        "round_sizes": list(r.round_sizes),
        "per_arm_budgets": [float(x) for x in r.per_arm_budgets],
        "records": [
            {
                "round": int(q.round),
                "arm_index": int(q.arm_index),
                "batch_fraction": float(q.arm["batch_fraction"]),
                "metric": float(q.metric),
                "steps": int(q.steps),
                "samples": int(q.samples),
                "spent": float(q.spent),
                "sampling_s": float(q.sampling_seconds),
                "metric_s": float(q.metric_seconds),
                "diverged": bool(q.diverged),
            }
            for q in r.records
        ],
        "compile_s": float(r.total_compile_seconds),
        "metric_s": float(r.total_metric_seconds),
    }


def round0(results: dict[str, Any]) -> dict[float, tuple[int, int, int, int]]:
    """Round 0 of MAMBA over all samplers, per batch fraction: (min steps, max steps,
    arms without a sample, arms)."""
    out: dict[float, list[int]] = {}
    for m in results["mamba"].values():
        for q in m["records"]:
            if q["round"] == 0:
                a = out.setdefault(q["batch_fraction"], [10**9, 0, 0, 0])
                a[0], a[1] = min(a[0], q["steps"]), max(a[1], q["steps"])
                a[2] += int(q["samples"] == 0 and not q["diverged"])
                a[3] += 1
    return {f: tuple(a) for f, a in sorted(out.items())}


def arm_throughput(results: dict[str, Any]) -> dict[float, float]:
    """Per-example gradients per sampling second by batch fraction, over all MAMBA arm-rounds
    (meaningful for a gradient-evaluation budget, where ``spent`` counts gradients)."""
    spent: dict[float, list[float]] = {}
    for m in results["mamba"].values():
        for q in m["records"]:
            if q["sampling_s"] > 0 and not q["diverged"] and q["steps"] > 0:
                acc = spent.setdefault(q["batch_fraction"], [0.0, 0.0])
                acc[0] += q["spent"]
                acc[1] += q["sampling_s"]
    return {f: a[0] / a[1] for f, a in sorted(spent.items()) if a[1] > 0}


def plot_mamba_rounds(results: dict[str, Any], path: str) -> None:
    """MAMBA-KSD's KSD of every arm by round, one panel per sampler (the chosen arm in red)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    names = [s for s in results["config"]["samplers"] if s in results["mamba"]]
    if not names:
        return
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.5 * rows), dpi=80, squeeze=False)
    colours = {1.0: "C0", 0.1: "C2", 0.01: "C1"}
    for ax, name in zip(axes.flat, names):
        m = results["mamba"][name]
        finite = [q["metric"] for q in m["records"] if math.isfinite(q["metric"])]
        top = max(finite) * 3 if finite else 1.0
        by_arm: dict[int, list[dict]] = {}
        for q in m["records"]:
            by_arm.setdefault(q["arm_index"], []).append(q)
        for idx, qs in by_arm.items():
            best = idx == m["best_index"]
            ys = [q["metric"] if math.isfinite(q["metric"]) else top for q in qs]
            colour = "C3" if best else colours.get(qs[0]["batch_fraction"], "0.6")
            ax.plot(
                [q["round"] for q in qs],
                ys,
                "-o",
                color=colour,
                lw=2 if best else 0.6,
                ms=3 if best else 1.5,
                alpha=1 if best else 0.6,
                zorder=3 if best else 1,
            )
            for q in qs:
                if not math.isfinite(q["metric"]):
                    ax.plot([q["round"]], [top], "x", color=colour, ms=4)
        if finite and min(finite) > 0:
            ax.set_yscale("log")
        ax.set_xticks(range(len(m["round_sizes"])))
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes.flat[len(names) :]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("KSD (x: no sample / diverged)", fontsize=7)
    for ax in axes[-1, :]:
        ax.set_xlabel("round", fontsize=8)
    handles = [matplotlib.lines.Line2D([], [], color=c, lw=1) for c in colours.values()]
    handles.append(matplotlib.lines.Line2D([], [], color="C3", lw=2, marker="o", ms=3))
    fig.legend(
        handles,
        ["100% batch", "10% batch", "1% batch", "chosen arm"],
        fontsize=7,
        loc="lower center",
        ncol=4 if cols > 1 else 2,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.06 if cols > 1 else 0.12, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def mamba_figure_lines(figure: str | None) -> list[str]:
    """MAMBA-KSD's figure (KSD of every arm by round) with its caption; empty without one.

    The study pages put it above the wide results table, so that the plot comes first.
    """
    if not figure:
        return []
    return [
        f"![MAMBA-KSD by round]({figure})",
        "",
        "MAMBA-KSD's KSD of every arm by round (colour: batch size; red: the chosen "
        "arm; arms plotted at the top had no thinned sample in their budget or "
        "diverged).",
        "",
    ]


def mamba_cost_lines(results: dict[str, Any], tp: dict[float, float], machine: str) -> list[str]:
    """The page's note on shared evaluations and MAMBA-KSD's tuning-cost table.

    ``tp`` is :func:`arm_throughput` (empty when the budgets are not in gradients);
    ``machine`` describes the machine the seconds were measured on ("loaded", "shared").
    The figure is :func:`mamba_figure_lines`, placed above the results table.
    """
    lines: list[str] = []
    lines += [
        "",
        "Methods that chose the same arm share one evaluation run (same seed, same budget), so "
        "their rows differ only where their choices do.",
        "",
    ]
    if results["mamba"]:
        lines += [
            "MAMBA-KSD's tuning cost per sampler (the budget is in gradients; seconds are "
            f"this run's, on the {machine} machine):",
            "",
            "| sampler | rounds (arms) | sampling s | gradients/s | KSD s | compile s |",
            "|---|---|---|---|---|---|",
        ]
        for s, m in results["mamba"].items():
            samp = sum(q["sampling_s"] for q in m["records"])
            grads = sum(q["spent"] for q in m["records"])
            gps = num(grads / samp) if tp and samp > 0 else "–"
            lines.append(
                f"| {s} | {len(m['round_sizes'])} "
                f"({' → '.join(str(x) for x in m['round_sizes'])}) | {samp:.1f} | {gps} | "
                f"{m['metric_s']:.1f} | {m['compile_s']:.1f} |"
            )
        lines.append("")
    return lines
