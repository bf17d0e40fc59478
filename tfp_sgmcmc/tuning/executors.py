"""Executors: where the arms of a tuning round run.

[`MAMBA`][tfp_sgmcmc.tuning.mamba.MAMBA],
[`grid_search`][tfp_sgmcmc.tuning.baselines.grid_search] and
[`heuristic`][tfp_sgmcmc.tuning.baselines.heuristic] decide *what* runs: which
arms, for how long (``r_i = T/(|S_i| K)`` in round ``i`` of Algorithm 1 of
Coullon, South & Nemeth [1], docs/algorithms.md#mamba), and which survive.
An executor decides *where* the runs of one round go. The runs of a round are
independent (each arm continues its own chain from its last ``θ`` with its own
seed stream), so they can go anywhere:

```none
pool = executor.open(job)            # job: arms, start state, problem, metric, seed, ...
for each round i:
    for record in pool.run_round(i, S_i, r_i, budget):   # any completion order
        ...                          # the tuner ranks the arms, keeps the best
pool.close()
```

* [`SequentialExecutor`][tfp_sgmcmc.tuning.executors.SequentialExecutor]
  (the default) runs the arms one after another in this process with one
  [`ArmRunner`][tfp_sgmcmc.tuning.runner.ArmRunner];
* [`RayExecutor`][tfp_sgmcmc.tuning.ray_backend.RayExecutor] (the ``ray``
  extra) runs them on a pool of Ray actors [2], each holding an ``ArmRunner``
  over the same arms, so seeds and records are those of the sequential run.

An arm's seed stream is ``(seed, j)`` for arm ``j``: step ``t`` of its chain
(counted over all its rounds) draws from ``fold_in((seed, j), t)`` and the
bootstrap of its ``c``-th round from ``(7919·seed + c, j)``. It depends on the
arm and its own history, never on which worker runs it, in what order, or how
its steps are split into compiled calls, which is why any executor reproduces
the sequential records under a deterministic budget.

A new executor subclasses [`Executor`][tfp_sgmcmc.tuning.executors.Executor]
(``open(job) -> ArmPool``) and [`ArmPool`][tfp_sgmcmc.tuning.executors.ArmPool]
(``_runs``, ``final_states``, ``num_programs``, ``close``); the pool's
``run_round`` turns each run into a
[`RoundRecord`][tfp_sgmcmc.tuning.results.RoundRecord] the same way for all.

#### References

[1]: Jeremie Coullon, Leah South and Christopher Nemeth. Stochastic gradient
     MCMC with multi-armed bandit tuning. _arXiv:2105.13059_, 2021.
[2]: Philipp Moritz, Robert Nishihara, Stephanie Wang et al. Ray: a
     distributed framework for emerging AI applications. In _OSDI_, 2018.
"""

from __future__ import annotations

import abc
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfp_sgmcmc.internal.util import AttributeView
from tfp_sgmcmc.tuning.arms import ArmSampling, KernelSpec
from tfp_sgmcmc.tuning.budget import Budget, steps_for
from tfp_sgmcmc.tuning.metrics import DisqualifiedSample, resolve_metric
from tfp_sgmcmc.tuning.results import RoundRecord
from tfp_sgmcmc.tuning.runner import ArmRunner, RunOutput

__all__ = [
    "Executor",
    "ArmPool",
    "ArmRun",
    "TuningJob",
    "TuningProblem",
    "SequentialExecutor",
    "check_kernel",
    "resolve_kernel",
    "make_job",
    "build_problem",
    "evaluate_metric",
    "evaluate_metric_with_se",
]


# --------------------------------------------------------------------------- #
# The kernel: how to build a kernel from an arm
# --------------------------------------------------------------------------- #
class TuningProblem:
    """A ``kernel`` built inside each worker of an executor: ``TuningProblem(build)``.

    ``build()`` returns what a tuner's ``kernel`` otherwise is: a
    [`KernelSpec`][tfp_sgmcmc.tuning.arms.KernelSpec] or a function
    ``make_kernel(**arm) -> kernel``. An executor with workers in other processes
    ([`RayExecutor`][tfp_sgmcmc.tuning.ray_backend.RayExecutor]) calls it in each of
    them, so data, estimators and compiled programs are built there; ``build`` must
    then pickle (a module-level function importable on every node, or a function
    defined in the driver script, pickled by value). The tuner calls it in its own
    process too, on first use (for
    [`TuningResult.kernel`][tfp_sgmcmc.tuning.results.TuningResult.kernel]).

    Args:
      build: a callable ``() -> KernelSpec | make_kernel``.

    Raises:
      ValueError: ``build`` is not callable.
    """

    def __init__(self, build: Callable[[], Any]) -> None:
        if isinstance(build, (TuningProblem, KernelSpec)) or not callable(build):
            raise ValueError(
                "`build` must be a callable () -> KernelSpec | make_kernel, got "
                f"{type(build).__name__}."
            )
        self.build = build

    def __repr__(self) -> str:
        return f"TuningProblem({getattr(self.build, '__qualname__', self.build)!r})"


def _is_estimator(obj: Any) -> bool:
    return hasattr(obj, "bootstrap") and hasattr(obj, "full_log_prob_and_gradient")


def check_kernel(kernel: Any, name: str = "kernel") -> None:
    """Refuses what cannot build a kernel from an arm, with a hint.

    Raises:
      ValueError: ``kernel`` is a kernel class, an estimator, a kernel instance or
        not callable (the message names ``name``).
    """
    if isinstance(kernel, (KernelSpec, TuningProblem)):
        return
    what = None
    if isinstance(kernel, type):
        what = (
            f"the class {kernel.__name__}; wrap it with its estimator: "
            f"tuning.KernelSpec({kernel.__name__}, estimator, **fixed_kwargs)"
        )
    elif _is_estimator(kernel):
        what = (
            f"an estimator ({type(kernel).__name__}); pair it with a kernel class: "
            "tuning.KernelSpec(sg.SGLD, estimator, **fixed_kwargs)"
        )
    elif hasattr(kernel, "one_step") and hasattr(kernel, "bootstrap_results"):
        what = (
            f"a kernel instance ({type(kernel).__name__}); give what builds one per arm: "
            "tuning.KernelSpec(kernel_class, estimator) or a function (**arm) -> kernel"
        )
    elif not callable(kernel):
        what = (
            f"{type(kernel).__name__}; give tuning.KernelSpec(kernel_class, estimator, "
            "**fixed_kwargs), a function (**arm) -> kernel, or tuning.TuningProblem(build)"
        )
    if what is not None:
        raise ValueError(f"`{name}` must build a kernel from an arm, got {what}.")


def build_problem(factory: Callable[[], Any]) -> tuple[Callable[..., Any], Any]:
    """``(make_kernel, metric estimator or None)`` from a job's factory.

    Raises:
      ValueError: the factory returns something that cannot build a kernel (see
        [`check_kernel`][tfp_sgmcmc.tuning.executors.check_kernel]) or a
        ``TuningProblem``.
    """
    kernel = factory()
    if isinstance(kernel, TuningProblem):
        raise ValueError(
            "`kernel`: TuningProblem(build)'s build() must return a KernelSpec or a "
            "function (**arm) -> kernel, got a TuningProblem."
        )
    check_kernel(kernel, "kernel")
    return kernel, (kernel.estimator if isinstance(kernel, KernelSpec) else None)


class _GivenKernel:
    """A factory that returns a kernel built in this process: workers in other
    processes receive it pickled."""

    def __init__(self, kernel: Callable[..., Any]) -> None:
        self.kernel = kernel

    def __call__(self) -> Callable[..., Any]:
        return self.kernel


class _DriverMakeKernel:
    """``make_kernel`` of a ``TuningProblem`` in the tuner's own process (for
    [`TuningResult.kernel`][tfp_sgmcmc.tuning.results.TuningResult.kernel]),
    built on first use."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory
        self._make_kernel: Callable[..., Any] | None = None

    def __call__(self, **arm: Any) -> Any:
        if self._make_kernel is None:
            self._make_kernel, _ = build_problem(self.factory)
        return self._make_kernel(**arm)

    def __repr__(self) -> str:
        return f"make_kernel from {getattr(self.factory, '__qualname__', self.factory)!r}"


def resolve_kernel(kernel: Any) -> tuple[Callable[..., Any], Callable[[], Any], str]:
    """The tuner's ``(make_kernel, factory, what the factory was made from)`` for ``kernel``.

    A ``TuningProblem``'s ``build`` is the factory (called in every worker; the
    tuner's own ``make_kernel`` builds it on first use); any other ``kernel`` is
    wrapped in a factory that returns it.

    Raises:
      ValueError: see [`check_kernel`][tfp_sgmcmc.tuning.executors.check_kernel].
    """
    check_kernel(kernel)
    if isinstance(kernel, TuningProblem):
        return _DriverMakeKernel(kernel.build), kernel.build, "`kernel` (a TuningProblem)"
    return kernel, _GivenKernel(kernel), "`kernel`"


# --------------------------------------------------------------------------- #
# Scoring one arm's round
# --------------------------------------------------------------------------- #
#: Contiguous blocks a single chain is split into for the metric's standard error.
SE_BLOCKS = 4


def evaluate_metric(
    metric: Callable[..., float], out: RunOutput, estimator: Any
) -> tuple[float, float, str]:
    """``(value, seconds, note)``; non-finite input/output or an exception → ``+inf``.

    The metric's standard error (see
    [`evaluate_metric_with_se`][tfp_sgmcmc.tuning.executors.evaluate_metric_with_se])
    is stored in ``out.extras["metric_se"]``.
    """
    value, se, dt, note = evaluate_metric_with_se(metric, out, estimator)
    out.extras["metric_se"] = se
    return value, dt, note


def _groups(out: RunOutput) -> list[list[np.ndarray]]:
    """The arm's chains, or (one chain) ``SE_BLOCKS`` contiguous blocks of it."""
    if out.num_chains > 1:
        return [[s[:, c] for s in out.samples] for c in range(out.num_chains)]
    m = out.samples[0].shape[0]
    edges = np.linspace(0, m, min(SE_BLOCKS, m) + 1).round().astype(int)
    return [[s[a:b] for s in out.samples] for a, b in zip(edges[:-1], edges[1:])]


def evaluate_metric_with_se(
    metric: Callable[..., float], out: RunOutput, estimator: Any
) -> tuple[float, float, float, str]:
    """``(value, standard error, seconds, note)`` of an arm's round.

    A diverged arm, one without samples or with non-finite samples, and one the
    metric disqualifies (`DisqualifiedSample`: it did not move, or it is far
    from the posterior) score ``+∞`` with the reason as the note.

    * A metric with ``value_and_se(groups, estimator)`` (the KSD) is computed
      on the pooled samples of the arm's ``C`` independent chains -- or of
      its one chain, unchanged -- and its standard error is the jackknife
      over the chains (over ``SE_BLOCKS`` contiguous blocks of one chain).
    * Any other metric: with ``C > 1`` chains, the mean of the chains' values
      with standard error ``sd/√C`` (the chains are i.i.d. runs of the arm);
      with one chain, the value and ``nan``.
    """
    t0 = time.perf_counter()
    nan = math.nan
    if out.diverged:
        return math.inf, nan, 0.0, "diverged"
    if out.samples[0].shape[0] == 0:
        return math.inf, nan, 0.0, "no thinned sample (budget too small for this arm)"
    if not all(np.all(np.isfinite(s)) for s in out.samples):
        return math.inf, nan, 0.0, "non-finite samples"
    chains = int(out.num_chains)
    try:
        if hasattr(metric, "value_and_se"):
            value, se = metric.value_and_se(_groups(out), estimator)
        elif chains == 1:
            value = float(metric(out.samples, {"target_log_prob": out.target_log_prob}, estimator))
            se = nan
        else:
            values = [
                float(
                    metric(
                        [s[:, c] for s in out.samples],
                        {"target_log_prob": out.target_log_prob[:, c]},
                        estimator,
                    )
                )
                for c in range(chains)
            ]
            value = float(np.mean(values))
            se = float(np.std(values, ddof=1) / math.sqrt(chains))
    except DisqualifiedSample as e:  # the reason is the note: "did not move ..."
        return math.inf, nan, time.perf_counter() - t0, str(e)
    except Exception as e:  # a failing metric prunes the arm, never the run
        return math.inf, nan, time.perf_counter() - t0, f"metric failed: {type(e).__name__}: {e}"
    dt = time.perf_counter() - t0
    if not math.isfinite(value):
        return math.inf, nan, dt, "non-finite metric"
    return float(value), float(se), dt, ""


# --------------------------------------------------------------------------- #
# The executor interface
# --------------------------------------------------------------------------- #
@dataclass
class TuningJob:
    """Everything an executor needs to run a tuner's arms.

    Built by the tuner; ``problem`` is always a factory (``problem() ->
    KernelSpec | make_kernel``), so a worker in another process can build its
    own kernels, and ``problem_source`` names the tuner argument it came from
    (for error messages).
    """

    arms: list[dict[str, Any]]
    init_state: Any
    problem: Callable[[], Any]
    metric: Any
    thin: int = 10
    seed: int = 0
    static_keys: tuple = ()
    max_steps_per_call: int = 2000
    jit_compile: bool = True
    chains_per_arm: int = 1
    program_cache: dict | None = None
    problem_source: str = "`problem`"

    def runner_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of [`ArmRunner`][tfp_sgmcmc.tuning.runner.ArmRunner]
        (without the process-local program cache)."""
        return dict(
            thin=self.thin,
            seed=self.seed,
            static_keys=tuple(self.static_keys),
            max_steps_per_call=self.max_steps_per_call,
            jit_compile=self.jit_compile,
            chains_per_arm=self.chains_per_arm,
        )


def make_job(
    arms: Sequence[dict[str, Any]],
    init_state: Any,
    metric: Any,
    kernel: Any,
    seed: int = 0,
    sampling: ArmSampling | None = None,
) -> tuple[TuningJob, Callable[..., Any]]:
    """A tuner's ``(job, make_kernel)`` from its arguments (see
    [`resolve_kernel`][tfp_sgmcmc.tuning.executors.resolve_kernel]).

    Raises:
      ValueError: ``arms`` holds something other than dicts, a wrong ``kernel``,
        or ``sampling`` is not an ``ArmSampling``.
    """
    arms = list(arms)
    for a in arms:  # (ArmRunner checks the same; the records need copies made here)
        if not isinstance(a, dict):
            raise ValueError(f"`arms` must hold dicts, got {type(a).__name__}.")
    if sampling is None:
        sampling = ArmSampling()
    if not isinstance(sampling, ArmSampling):
        raise ValueError(
            "`sampling` must be a tuning.ArmSampling(thin=..., chains_per_arm=..., ...), got "
            f"{type(sampling).__name__}."
        )
    mk, factory, source = resolve_kernel(kernel)
    job = TuningJob(
        [dict(a) for a in arms],
        init_state,
        factory,
        metric,
        thin=sampling.thin,
        seed=seed,
        static_keys=sampling.static_keys,
        max_steps_per_call=sampling.max_steps_per_call,
        jit_compile=sampling.jit_compile,
        chains_per_arm=sampling.chains_per_arm,
        # A KernelSpec keeps its compiled programs for every run in this process.
        program_cache=kernel._programs if isinstance(kernel, KernelSpec) else None,
        problem_source=source,
    )
    return job, mk


@dataclass
class ArmRun:
    """One arm's round as an executor returns it: the record and its thinned samples."""

    record: RoundRecord
    samples: list[np.ndarray] = field(default_factory=list)


class ArmPool(abc.ABC):
    """An executor opened for one tuning job: runs rounds of its arms.

    Subclasses set ``costs`` (per-example gradient evaluations per step of
    each arm, over its ``chains_per_arm`` chains) and ``chains_per_arm``, and
    implement ``_runs``, ``final_states`` and ``num_programs``.
    """

    costs: list[int]
    chains_per_arm: int = 1

    def __init__(self, job: TuningJob) -> None:
        self.job = job

    @abc.abstractmethod
    def _runs(
        self, indices: Sequence[int], amount: float, budget: Budget, screening: bool = False
    ) -> Iterator[tuple[int, RunOutput, float, float, str]]:
        """Runs every arm in ``indices`` for ``amount``; yields ``(index, output,
        metric, metric seconds, note)`` per arm as it finishes. ``screening``
        goes to [`ArmRunner.run`][tfp_sgmcmc.tuning.runner.ArmRunner.run]."""

    @abc.abstractmethod
    def final_states(self) -> list[Any]:
        """Each arm's last state (``None`` for a diverged arm)."""

    @property
    @abc.abstractmethod
    def num_programs(self) -> int:
        """Distinct compiled programs (structural keys) the runs used."""

    def close(self) -> None:  # noqa: B027 - optional hook: most pools hold nothing to free
        """Releases the pool's workers (nothing to release by default)."""

    def steps_for(self, index: int, amount: float, budget: Budget) -> int:
        """Steps arm ``index`` runs for ``amount`` of a deterministic budget."""
        return steps_for(amount, budget, self.costs[index], self.chains_per_arm)

    def run_round(
        self,
        round_index: int,
        indices: Sequence[int],
        amount: float,
        budget: Budget,
        screening: bool = False,
    ) -> Iterator[ArmRun]:
        """Runs every arm in ``indices`` for ``amount`` (in ``budget.unit``) and
        yields one [`ArmRun`][tfp_sgmcmc.tuning.executors.ArmRun] per arm as it
        finishes (in any order).

        ``screening``: the round only decides which arms go on (MAMBA's rounds
        but the last); see [`ArmRunner.run`][tfp_sgmcmc.tuning.runner.ArmRunner.run].
        """
        for idx, out, value, mt, note in self._runs(list(indices), amount, budget, screening):
            if budget.unit == "seconds":
                spent = out.sampling_seconds
            elif budget.unit == "steps":
                spent = float(out.steps * out.num_chains)
            else:
                spent = float(out.steps * self.costs[idx])
            record = RoundRecord(
                round=round_index,
                arm_index=idx,
                arm=self.job.arms[idx],
                metric=value,
                metric_se=float(out.extras.get("metric_se", math.nan)),
                steps=out.steps,
                samples=int(out.samples[0].shape[0]) * int(out.num_chains),
                sampling_seconds=out.sampling_seconds,
                compile_seconds=out.compile_seconds,
                metric_seconds=mt,
                budget=amount,
                diverged=out.diverged,
                note=note,
                spent=spent,
            )
            yield ArmRun(record, out.samples)


class Executor(abc.ABC):
    """Where a tuner's arms run: ``open(job)`` returns an
    [`ArmPool`][tfp_sgmcmc.tuning.executors.ArmPool] for one tuning run.

    An executor is a reusable description (e.g. how many workers); the pool
    it opens holds the resources of one run and is closed by the tuner.
    ``name`` is appended to the tuner's method in its result (``"MAMBA
    (Ray)"``); empty for the sequential executor.
    """

    name: str = ""

    @abc.abstractmethod
    def open(self, job: TuningJob) -> ArmPool:
        """Starts the workers of ``job`` (building and validating every arm)."""


class _SequentialPool(ArmPool):
    def __init__(self, job: TuningJob) -> None:
        super().__init__(job)
        make_kernel, estimator = build_problem(job.problem)
        self.runner = ArmRunner(
            make_kernel,
            job.arms,
            job.init_state,
            program_cache=job.program_cache,
            **job.runner_kwargs(),
        )
        self.costs = self.runner.costs
        self.chains_per_arm = self.runner.chains_per_arm
        self.estimator = estimator if estimator is not None else self.runner.reference_estimator
        self.metric = resolve_metric(job.metric)

    def _runs(
        self, indices: Sequence[int], amount: float, budget: Budget, screening: bool = False
    ) -> Iterator[tuple[int, RunOutput, float, float, str]]:
        for idx in indices:
            out = self.runner.run(idx, amount, budget, screening)
            value, mt, note = evaluate_metric(self.metric, out, self.estimator)
            yield idx, out, value, mt, note

    def final_states(self) -> list[Any]:
        return [None if s.diverged else s.state for s in self.runner.arm_states]

    num_programs = AttributeView[int]("runner.num_programs")


class SequentialExecutor(Executor):
    """Runs a round's arms one after another in this process (the default).

    One [`ArmRunner`][tfp_sgmcmc.tuning.runner.ArmRunner] holds every arm's
    chain and compiles each structural key once (once per
    [`KernelSpec`][tfp_sgmcmc.tuning.arms.KernelSpec] object, for all the runs
    that reuse it).

    Example:

    ```python
    import tensorflow as tf
    import tfp_sgmcmc as sg
    from tfp_sgmcmc import tuning

    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), noise_scale=0.1)
    result = tuning.MAMBA(
        tuning.grid(step_size=[1e-3, 0.1, 50.0]), tf.fill([2], 3.0),
        lambda step_size: sg.SGLD(est, step_size),
        budget=tuning.steps(600), progress=False,
        executor=tuning.SequentialExecutor(),  # the default
    ).run()
    assert result.best_arm == {"step_size": 0.1}
    ```
    """

    def open(self, job: TuningJob) -> ArmPool:
        return _SequentialPool(job)

    def __repr__(self) -> str:
        return "SequentialExecutor()"


def resolve_executor(executor: Executor | None) -> Executor:
    """``executor``, or a [`SequentialExecutor`][tfp_sgmcmc.tuning.executors.SequentialExecutor].

    Raises:
      TypeError: ``executor`` is not an
        [`Executor`][tfp_sgmcmc.tuning.executors.Executor].
    """
    if executor is None:
        return SequentialExecutor()
    if not isinstance(executor, Executor):
        raise TypeError(
            "`executor` must be an Executor (SequentialExecutor(), RayExecutor(...)), got "
            f"{type(executor).__name__}."
        )
    return executor
