"""The MAMBA paper's baselines: grid search and the step-size heuristic.

* **Grid search** [1, App. B.1/C; docs/algorithms.md#mamba-baselines]: every configuration
  runs the same fixed budget (the paper: 10% batch, 5,000 iterations for the
  logistic regression, from the MAP plus noise) and the one with the lowest
  metric wins. The paper's metric is a predictive one (test log-loss /
  RMSE / accuracy); the journal version also runs "grid search with KSD"
  (1 s per configuration, tuning step and batch) [2]. Any metric plugs in.
* **Heuristic** [1]: step ``ε = 1/N`` (``N`` = the full data size in the
  authors' code, e.g. 10⁶ for the logistic regression although 8·10⁵ rows
  train), a 10% batch and ``L = 10`` leapfrog steps for SGHMC (Brosse et al.'s
  scaling of the stiffness with ``N``).

#### References

[1]: Jeremie Coullon, Leah South and Christopher Nemeth. Stochastic gradient
     MCMC with multi-armed bandit tuning. _arXiv:2105.13059_, 2021.
[2]: Jeremie Coullon, Leah South and Christopher Nemeth. Efficient and
     generalizable tuning strategies for stochastic gradient MCMC.
     _Statistics and Computing_, 2023.
[3]: Nicolas Brosse, Alain Durmus and Eric Moulines. The promises and pitfalls
     of stochastic gradient Langevin dynamics. In _NeurIPS_, 2018.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from tfp_sgmcmc.internal.util import check_int
from tfp_sgmcmc.tuning.arms import ArmSampling, KernelSpec
from tfp_sgmcmc.tuning.budget import Budget
from tfp_sgmcmc.tuning.executors import Executor, TuningProblem, make_job, resolve_executor
from tfp_sgmcmc.tuning.mamba import as_budget
from tfp_sgmcmc.tuning.metrics import metric_name, resolve_metric
from tfp_sgmcmc.tuning.results import TuningResult, warn_if_no_usable_arm

__all__ = ["grid_search", "heuristic", "heuristic_arm", "run_fixed"]


def heuristic_arm(
    num_examples: int,
    num_leapfrog_steps: int | None = None,
    batch_fraction: float = 0.1,
) -> dict[str, Any]:
    """The heuristic hyperparameters: ``step_size = 1/N``, 10% batch (``L = 10`` for SGHMC).

    Args:
      num_examples: ``N`` (the authors use the full data size).
      num_leapfrog_steps: ``L`` for SGHMC (the paper uses 10); ``None`` for
        samplers without leapfrog steps. Default value: ``None``.
      batch_fraction: Default value: ``0.1``.
    """
    num_examples = check_int(num_examples, "num_examples", 1)
    arm: dict[str, Any] = {"step_size": 1.0 / num_examples, "batch_fraction": batch_fraction}
    if num_leapfrog_steps is not None:
        arm["num_leapfrog_steps"] = int(num_leapfrog_steps)
    return arm


def grid_search(
    arms: Sequence[dict[str, Any]],
    init_state: Any,
    kernel: KernelSpec | TuningProblem | Callable[..., Any],
    *,
    budget_per_arm: Budget | float = 1.0,
    metric: Any = "ksd",
    executor: Executor | None = None,
    seed: int = 0,
    progress: bool = True,
    sampling: ArmSampling | None = None,
    method: str = "grid search",
) -> TuningResult:
    """Exhaustive grid search: every arm runs ``budget_per_arm``; lowest metric wins.

    One round of ``len(arms)`` runs (ties keep grid order); with
    ``ArmSampling(chains_per_arm=C)``, ``C > 1``, each arm runs ``C`` independent
    repeats (chains side by side in the arm's budget) and its metric comes with a
    standard error over them (see
    [`evaluate_metric_with_se`][tfp_sgmcmc.tuning.executors.evaluate_metric_with_se]).

    Args:
      arms: as [`MAMBA`][tfp_sgmcmc.tuning.mamba.MAMBA]; so are ``init_state``,
        ``kernel``, ``metric``, ``executor`` (e.g. a
        [`RayExecutor`][tfp_sgmcmc.tuning.ray_backend.RayExecutor] runs the
        arms in parallel with the same records), ``seed``, ``progress`` and
        ``sampling``.
      budget_per_arm: a [`Budget`][tfp_sgmcmc.tuning.budget.Budget] whose
        ``amount`` each configuration runs (e.g. ``steps(5000)``), or seconds.
        Default value: ``1.`` (1 s each, the journal's grid search with KSD).
      method: the name in the result. Default value: ``"grid search"``.

    Returns:
      A [`TuningResult`][tfp_sgmcmc.tuning.results.TuningResult] (one round).

    Raises:
      ValueError: as [`MAMBA`][tfp_sgmcmc.tuning.mamba.MAMBA].
    """
    budget = as_budget(budget_per_arm)
    metric_fn = resolve_metric(metric)
    executor = resolve_executor(executor)
    job, mk = make_job(arms, init_state, metric, kernel, seed=seed, sampling=sampling)
    arms = job.arms
    pool = executor.open(job)
    if executor.name:
        method = f"{method} ({executor.name})"
    amount = float(budget.amount)
    try:
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(
                total=len(arms),
                desc=f"{method} ({len(arms)} arms, {budget.amount:g} {budget.unit} each)",
            )
        runs = {}
        for run in pool.run_round(0, range(len(arms)), amount, budget):
            runs[run.record.arm_index] = run
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        final_states = pool.final_states()
        num_programs = pool.num_programs
    finally:
        pool.close()
    records = [runs[j].record for j in range(len(arms))]
    best = min(range(len(arms)), key=lambda j: (records[j].metric, j))
    records[best].survived = True
    result = TuningResult(
        method=method,
        best_arm=dict(arms[best]),
        best_index=best,
        arms=[dict(a) for a in arms],
        records=records,
        samples=runs[best].samples,
        final_states=final_states,
        metric_name=metric_name(metric_fn),
        budget=f"{budget.amount:g} {budget.unit} per arm",
        budget_unit=budget.unit,
        make_kernel=mk,
        num_rounds=1,
        round_sizes=[len(arms)],
        per_arm_budgets=[amount],
        num_programs=num_programs,
        single_part=not isinstance(init_state, (list, tuple)),
        chains_per_arm=pool.chains_per_arm,
    )
    warn_if_no_usable_arm(result)
    return result


def run_fixed(
    method: str, arms: Sequence[dict[str, Any]], init_state: Any, kernel: Any, **options: Any
) -> TuningResult:
    """Every arm runs the same budget; named ``method`` in the result.

    [`grid_search`][tfp_sgmcmc.tuning.baselines.grid_search] (its other
    arguments, by keyword) under another name, e.g. ``"eval"`` for a long run
    of one chosen arm.
    """
    return grid_search(arms, init_state, kernel, method=method, **options)


def heuristic(
    num_examples: int,
    init_state: Any,
    kernel: KernelSpec | TuningProblem | Callable[..., Any],
    *,
    num_leapfrog_steps: int | None = None,
    batch_fraction: float = 0.1,
    budget: Budget | float = 1.0,
    progress: bool = False,
    **options: Any,
) -> TuningResult:
    """Run the heuristic arm ([`heuristic_arm`][tfp_sgmcmc.tuning.baselines.heuristic_arm]) for
    ``budget`` and score it.

    Args:
      num_examples: ``N``, as [`heuristic_arm`][tfp_sgmcmc.tuning.baselines.heuristic_arm];
        so are ``num_leapfrog_steps`` and ``batch_fraction``.
      init_state: the chain's start.
      kernel: as [`MAMBA`][tfp_sgmcmc.tuning.mamba.MAMBA].
      budget: a [`Budget`][tfp_sgmcmc.tuning.budget.Budget] or seconds.
        Default value: ``1.``.
      progress: show a progress bar. Default value: ``False``.
      **options: ``metric``, ``executor``, ``seed`` and ``sampling``, as
        [`grid_search`][tfp_sgmcmc.tuning.baselines.grid_search] takes them.

    Returns:
      A one-arm [`TuningResult`][tfp_sgmcmc.tuning.results.TuningResult] (metric ``inf`` if
      the heuristic diverges, as heuristic SGHMC does on the paper's logistic
      regression).

    Raises:
      ValueError: an option ``grid_search`` does not take, named.
    """
    unknown = set(options) - {"metric", "executor", "seed", "sampling"}
    if unknown:
        raise ValueError(
            f"heuristic() got unknown option(s) {sorted(unknown)}; it takes `metric`, "
            "`executor`, `seed` and `sampling` as grid_search does."
        )
    arm = heuristic_arm(num_examples, num_leapfrog_steps, batch_fraction)
    res = grid_search(
        [arm],
        init_state,
        kernel,
        budget_per_arm=budget,
        progress=progress,
        method="heuristic",
        **options,
    )
    if not math.isfinite(res.records[0].metric):
        res.records[0].survived = True
    return res
