"""MAMBA: the Multi-Armed MCMC Bandit Algorithm (successive halving over SG samplers).

Algorithm 1 of Coullon, South & Nemeth [1] (docs/algorithms.md#mamba): with ``M``
arms (hyperparameter settings of one SG sampler), pruning rate ``η`` and
budget ``T``,

```none
K = ⌊log_η M⌋ ;  S_0 = all arms
for i = 0 … K−1:
    r_i = T / (|S_i| · K)                 # per-arm budget this round
    run every arm in S_i for r_i           # continuing from its last θ
    compute the metric (KSD by default) of this round's thinned samples
    S_{i+1} = the ⌊|S_i|/η⌋ arms with the lowest metric (stable sort)
return the arm with the lowest metric in the last round
```

The reward is ``ν_s = −metric``; Theorem 1 of [1] bounds the probability of
missing the best arm by ``(2η−1) log_η M · exp(−ηT/(4σ²_KSD H₂(log_η M + 1)))``.

Implementation details that follow the authors' code [1, App. B/C]:

* every round starts a *fresh* sampler state (momentum, thermostat, minibatch
  position) from the arm's last θ;
* the metric uses this round's samples only, thinned by 10, with full-data
  scores ([`KSDMetric`][tfp_sgmcmc.tuning.metrics.KSDMetric]); its computation time
  is not charged to the budget;
* a NaN/Inf metric (or a diverged chain) becomes ``+∞``;
* ties keep grid order (stable sort).

Deviations (documented in ``docs/tuning.md``): ``K`` is computed with integer
arithmetic (the authors' floating-point ``int(log(M)/log(η))`` gives 4 for
``M = 243, η = 3``); compilation is excluded by a one-step warm-up call of the
compiled program whose output is discarded (the authors discard two
iterations); budgets in steps and gradient evaluations are offered for
determinism; a diverging chain stops early (its remaining time is not spent).

#### References

[1]: Jeremie Coullon, Leah South and Christopher Nemeth. Stochastic gradient
     MCMC with multi-armed bandit tuning. _arXiv:2105.13059_, 2021.
[2]: Jeremie Coullon, Leah South and Christopher Nemeth. Efficient and
     generalizable tuning strategies for stochastic gradient MCMC.
     _Statistics and Computing_, 2023.
[3]: Kevin Jamieson and Ameet Talwalkar. Non-stochastic best arm
     identification and hyperparameter optimization. In _AISTATS_, 2016.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tfp_sgmcmc.internal.util import AttributeView
from tfp_sgmcmc.tuning.arms import ArmSampling, KernelSpec
from tfp_sgmcmc.tuning.budget import Budget, num_rounds, per_arm_budgets, round_sizes
from tfp_sgmcmc.tuning.executors import (
    ArmPool,
    Executor,
    TuningProblem,
    make_job,
    resolve_executor,
)
from tfp_sgmcmc.tuning.halving import successive_halving
from tfp_sgmcmc.tuning.metrics import metric_name, resolve_metric
from tfp_sgmcmc.tuning.results import RoundRecord, TuningResult, warn_if_no_usable_arm

__all__ = ["MAMBA", "as_budget"]


def as_budget(budget: Budget | float | int) -> Budget:
    """A number is a wall-clock budget ``T`` in seconds."""
    if isinstance(budget, Budget):
        return budget
    if isinstance(budget, (int, float)) and not isinstance(budget, bool):
        return Budget(float(budget))
    raise ValueError(f"`budget` must be a Budget or a number of seconds, got {budget!r}.")


class MAMBA:
    """Successive-halving tuner for any SG-MCMC kernel (module docstring).

    The one entry point of the method: build it, then ``run()``. What to sample is
    one argument, ``kernel``; how each arm is sampled is one option object,
    ``sampling``.

    Args:
      arms: list of hyperparameter dicts (e.g. from
        [`grid`][tfp_sgmcmc.tuning.arms.grid]).
      init_state: the initial state of every arm (tensor or list of parts).
      kernel: what builds a kernel from an arm, one of

        * a [`KernelSpec`][tfp_sgmcmc.tuning.arms.KernelSpec]
          ``KernelSpec(kernel_class, estimator, **fixed_kwargs)``: the kernel is
          ``kernel_class(estimator.with_batch_size(n), **fixed_kwargs, **arm)``
          with ``n`` from the arm's ``batch_size`` or ``batch_fraction``; the
          Stein metrics use ``estimator``'s full-data score;
        * a function ``make_kernel(**arm) -> kernel``. Float hyperparameters
          arrive as tensors inside the compiled program; ints/bools/strings
          (batch size, ``num_leapfrog_steps``) as Python values. The Stein
          metrics use the first arm's estimator;
        * a [`TuningProblem`][tfp_sgmcmc.tuning.executors.TuningProblem]
          ``TuningProblem(build)``, whose ``build()`` returns one of the two
          above inside each worker of the executor (data and estimators are
          then built there; ``build`` must pickle).
      budget: a [`Budget`][tfp_sgmcmc.tuning.budget.Budget], or a number of
        seconds ``T``. Default value: ``60.`` (60 s of sampling).
      metric: ``"ksd"``, ``"fssd"`` or a callable ``metric(samples, trace,
        estimator) -> float`` (lower is better). Default value: ``"ksd"``.
      executor: where each round's arms run, an
        [`Executor`][tfp_sgmcmc.tuning.executors.Executor]:
        [`SequentialExecutor`][tfp_sgmcmc.tuning.executors.SequentialExecutor]
        or [`RayExecutor`][tfp_sgmcmc.tuning.ray_backend.RayExecutor]. The
        algorithm, seeds and records do not depend on it. Default value:
        ``None`` (sequential, in this process).
      eta: pruning rate ``η``, an int ≥ 2. Default value: ``3``.
      seed: integer seed in ``[0, 2**31)``. Default value: ``0``.
      progress: show a tqdm bar per round. Default value: ``True``.
      sampling: an [`ArmSampling`][tfp_sgmcmc.tuning.arms.ArmSampling]: thinning
        of the samples the metric sees, chains per arm, steps per compiled call,
        XLA, extra structural keys. Default value: ``ArmSampling()`` (thin 10,
        one chain per arm as in the paper).

    Raises:
      ValueError: ``eta < 2``, fewer arms than ``eta``, an invalid arm (the
        kernel's own validation, at construction), a ``kernel`` that cannot
        build a kernel from an arm (a kernel class, an estimator, ...: the
        message says what to pass), an unknown metric, a ``sampling`` that is
        not an ``ArmSampling``, or a deterministic budget too small to give any
        arm of round 0 one step; the executor's own errors (e.g. a
        ``TuningProblem`` Ray cannot pickle).
      TypeError: ``executor`` is not an ``Executor``.
    """

    def __init__(
        self,
        arms: Sequence[dict[str, Any]],
        init_state: Any,
        kernel: KernelSpec | TuningProblem | Callable[..., Any],
        *,
        budget: Budget | float = 60.0,
        metric: Any = "ksd",
        executor: Executor | None = None,
        eta: int = 3,
        seed: int = 0,
        progress: bool = True,
        sampling: ArmSampling | None = None,
    ) -> None:
        arms = list(arms)
        self.budget = as_budget(budget)
        self.eta = eta
        self.num_rounds = num_rounds(len(arms), eta) if arms else 0
        self.round_sizes = round_sizes(len(arms), eta) if arms else []
        self.per_arm_budgets = per_arm_budgets(len(arms), eta, self.budget)
        self.metric = resolve_metric(metric)
        self.executor = resolve_executor(executor)
        job, self.make_kernel = make_job(
            arms, init_state, metric, kernel, seed=seed, sampling=sampling
        )
        self.method = "MAMBA" + (f" ({self.executor.name})" if self.executor.name else "")
        self.progress = progress
        self._arms = job.arms
        self._single_part = not isinstance(init_state, (list, tuple))
        self.pool: ArmPool = self.executor.open(job)
        self.chains_per_arm = self.pool.chains_per_arm
        if self.budget.deterministic:
            r0 = self.per_arm_budgets[0]
            most = max(self.pool.steps_for(i, r0, self.budget) for i in range(len(arms)))
            if most < 1:
                # (An arm that cannot afford one step -- e.g. a full batch -- just gets an
                # infinite metric, as a too-slow arm does under a wall-clock budget.)
                self.pool.close()
                raise ValueError(
                    f"`budget` {self.budget} gives every arm 0 steps in round 0 (r_0 = {r0:g} "
                    f"{self.budget.unit}); increase it."
                )
            r_last = self.per_arm_budgets[-1]
            most = max(self.pool.steps_for(i, r_last, self.budget) for i in range(len(arms)))
            if most < job.thin:
                # The deciding round needs thinned samples: with fewer than `thin` steps
                # no arm has one, and the "best" arm would be the first in grid order.
                self.pool.close()
                raise ValueError(
                    f"`budget` {self.budget} gives every arm at most {most} step(s) in the "
                    f"last round (r = {r_last:g} {self.budget.unit}), fewer than `thin` = "
                    f"{job.thin}: no arm could yield a thinned sample; increase the budget "
                    "or lower `sampling.thin`."
                )

    arms = AttributeView[list[dict[str, Any]]]("_arms")

    def run(self) -> TuningResult:
        """Runs Algorithm 1 and returns a
        [`TuningResult`][tfp_sgmcmc.tuning.results.TuningResult]; then closes the
        executor's pool (a Ray executor's actors are released)."""
        try:
            result = self._run()
        finally:
            self.pool.close()
        warn_if_no_usable_arm(result)
        result.gradient_noise = best_arm_gradient_noise(result)
        return result

    def close(self) -> None:
        """Releases the executor's workers without running (``run`` does it too)."""
        self.pool.close()

    def __enter__(self) -> MAMBA:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _run(self) -> TuningResult:
        records: list[RoundRecord] = []
        last_samples: dict[int, list[np.ndarray]] = {}
        round_seconds: list[float] = []

        def run_round(i: int, survivors: list[int]) -> dict[int, float]:
            r_i = self.per_arm_budgets[i]
            t_round = time.perf_counter()
            metrics: dict[int, float] = {}
            round_records = []
            bar = _progress(
                self.progress,
                len(survivors),
                f"{self.method} round {i + 1}/{self.num_rounds} ({len(survivors)} arms, "
                f"r={_fmt_budget(r_i, self.budget.unit)} each)",
            )
            screening = i < self.num_rounds - 1  # every round but the deciding one
            for run in self.pool.run_round(i, survivors, r_i, self.budget, screening):
                rec = run.record
                metrics[rec.arm_index] = rec.metric
                last_samples[rec.arm_index] = run.samples
                round_records.append(rec)
                if bar is not None:
                    bar.set_postfix_str(f"best {min(metrics.values()):.4g}", refresh=False)
                    bar.update(1)
            if bar is not None:
                bar.close()
            # Arms may finish in any order (parallel executors): record them in grid order.
            round_records.sort(key=lambda r: survivors.index(r.arm_index))
            records.extend(round_records)
            round_seconds.append(time.perf_counter() - t_round)
            return metrics

        # Successive halving (the library's one rule): keep the ⌊|S_i|/η⌋ best of each
        # round, ties in grid order.
        halving = successive_halving(
            list(range(len(self.arms))), self.num_rounds, self.eta, run_round
        )
        for i, survivors in enumerate(halving.survivors):
            kept = set(
                halving.survivors[i + 1] if i + 1 < len(halving.survivors)
                else halving.ranked[: max(1, len(survivors) // self.eta)]
            )
            for rec in records:
                if rec.round == i:
                    rec.survived = rec.arm_index in kept
        best = halving.best
        return TuningResult(
            method=self.method,
            best_arm=dict(self.arms[best]),
            best_index=best,
            arms=[dict(a) for a in self.arms],
            records=records,
            samples=last_samples[best],
            final_states=self.pool.final_states(),
            metric_name=metric_name(self.metric),
            budget=str(self.budget),
            budget_unit=self.budget.unit,
            make_kernel=self.make_kernel,
            eta=self.eta,
            num_rounds=self.num_rounds,
            round_sizes=list(self.round_sizes),
            per_arm_budgets=list(self.per_arm_budgets),
            num_programs=self.pool.num_programs,
            single_part=self._single_part,
            round_seconds=round_seconds,
            chains_per_arm=self.chains_per_arm,
        )


def best_arm_gradient_noise(result: TuningResult, seed: int = 0) -> Any:
    """The gradient-noise ratio of the best arm at its final state; warns when too large.

    A small KSD ranks arms relative to each other; the ratio
    ([`gradient_noise_ratio`][tfp_sgmcmc.diagnostics.gradient_noise_ratio]) says
    whether the winner's minibatch noise is small enough for its posterior to be
    right at all.
    """
    from tfp_sgmcmc.diagnostics import gradient_noise_ratio

    state = result.best_state
    if state is None or result.make_kernel is None:
        return None
    kernel = result.kernel()
    if getattr(kernel, "estimator", None) is None:
        return None  # not an SG kernel: no minibatch noise to measure
    try:
        report = gradient_noise_ratio(kernel, state, seed=seed)
    except ValueError:  # a non-finite final state: the arm diverged
        return None
    if report is not None and report.violated:
        warnings.warn(f"MAMBA's best arm: {report.message()}", RuntimeWarning, stacklevel=3)
    return report


def _fmt_budget(x: float, unit: str) -> str:
    if unit == "seconds":
        return f"{x:.3g}s"
    return f"{x:.4g} {'steps' if unit == 'steps' else 'grad evals'}"


def _progress(enabled: bool, total: int, desc: str) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=True, dynamic_ncols=True)
