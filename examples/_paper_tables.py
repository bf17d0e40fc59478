"""The loop the MAMBA paper's Tables 1-3 share: six samplers, each tuned three ways.

Coullon, South & Nemeth (2023) tune SGLD, SGHMC and SGNHT, each with and without
control variates, by MAMBA-KSD, by a grid search on a test metric and by the
heuristic ε = 1/N, then evaluate every chosen arm from the MAP. The studies
(``mamba_logistic_study.py``, ``mamba_pmf_study.py``, ``mamba_mnist_bnn_study.py``)
differ in the model, the grid-search metric and what they report; this module
holds what they share, so each study states only that.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning
from tfp_sgmcmc.tuning.baselines import run_fixed
from tfp_sgmcmc.tuning.budget import steps_for
from tfp_sgmcmc.tuning.runner import gradient_cost_per_step

__all__ = ["SAMPLERS", "kernel_class", "tune_three_ways", "write_partial"]

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
    default). ``run_kwargs`` (e.g. ``thin``) go to the grid search and the
    heuristic.

    Yields:
      ``(method, arm label, tuning result, evaluation result)`` per method.
    """
    cls, kw = kernel_class(name)
    est = control_variate if name.endswith("-CV") else base
    common = dict(make_kernel=tuning.KernelFactory(cls, est, kw), estimator=base, program_cache={})
    axes: dict[str, list] = {"step_size": steps, "batch_fraction": fractions}
    if cls is sg.SGHMC:
        axes["num_leapfrog_steps"] = leapfrogs
    grid_budget = grid_steps if isinstance(grid_steps, tuning.Budget) else tuning.steps(grid_steps)
    eval_budget = (
        eval_seconds if isinstance(eval_seconds, tuning.Budget) else tuning.seconds(eval_seconds)
    )
    results = {
        "MAMBA-KSD": tuning.mamba(
            tuning.grid(**axes),
            theta_map,
            budget=budget,
            metric=ksd,
            thin=mamba_thin,
            progress=False,
            **common,
        ),
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
            [tuning.heuristic_arm(num_train, 10 if cls is sg.SGHMC else None)],
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
        label = tuning.arm_label(result.best_arm)
        if label not in evaluations:
            thin = 10
            if eval_samples is not None and eval_budget.deterministic:
                cost = gradient_cost_per_step(common["make_kernel"](**result.best_arm))
                n = steps_for(eval_budget.amount, eval_budget, cost)
                thin = max(1, n // eval_samples)
            evaluations[label] = run_fixed(
                "eval",
                [result.best_arm],
                theta_map,
                budget_per_arm=eval_budget,
                metric=ksd,
                thin=thin,
                progress=False,
                **common,
            )
        yield method, label, result, evaluations[label]


def write_partial(out_dir: str, rows: list[dict]) -> None:
    """Writes the rows so far, so an interrupted study keeps its finished samplers."""
    with open(os.path.join(out_dir, "rows_partial.json"), "w") as f:
        json.dump(rows, f, indent=1)
