"""MAMBA with its arms run in parallel on Ray (a local machine or a cluster).

The tuner is Algorithm 1 of Coullon, South & Nemeth [1] unchanged
(docs/algorithms.md#mamba, [`tfp_sgmcmc.tuning.mamba`][tfp_sgmcmc.tuning.mamba]): ``K = ⌊log_η M⌋``
rounds; round ``i`` runs each surviving arm for ``r_i = T/(|S_i| K)``
(seconds, steps or gradient evaluations), scores it by the metric of this
round's thinned samples, and keeps the ``⌊|S_i|/η⌋`` best (stable sort). Only
the execution of a round changes: the ``|S_i|`` runs of a round are
independent, so they go to a pool of Ray actors and run concurrently.

```none
driver:   S_0 = all arms; chain_j = (θ_0, seed_j, counter_j) for every arm j
for i = 0 … K−1:
    for j in S_i (as actors free up):  actor.run(j, chain_j, r_i)   # in parallel
    gather (metric_j, samples_j, chain_j) of every j in S_i          # ray.wait
    S_{i+1} = the ⌊|S_i|/η⌋ arms with the lowest metric
actor.run(j, chain, r):  continue arm j's chain for r with ArmRunner,
                         evaluate the metric (KSD …) on this round's samples
```

Every actor builds the problem once (from a picklable *factory*, since data,
estimators and compiled programs live in its own process), holds one
`ArmRunner` with all the arms (so its
structural keys, seeds and program cache are exactly the sequential ones) and
compiles each structural key once. It runs an arm with the very code of the
sequential tuner and evaluates the metric where the samples are (the
full-data scores of KSD/FSSD are the expensive part and run in parallel
too). Between rounds the *whole* chain of an arm is small: every MAMBA round
restarts the sampler state (momentum, thermostat, minibatch position) from
the arm's last ``θ``, as the authors' code does, so an arm's chain is
``(θ, seed, call counter)``. It comes back to the driver with the round's
result; the driver sends it with the next run. Hence

* under a deterministic budget (steps or gradient evaluations) the Ray tuner
  reproduces the sequential one: same per-round metrics (up to floating-point
  reassociation, see below) and the same best arm;
* a survivor can continue on any actor (idle actors take the next queued
  arm; an arm goes back to the actor that ran it when that actor is free, so
  programs are reused), and an actor that dies (node lost, out of memory)
  costs only a rerun of its arm from the gathered chain on another actor.

Each actor reserves ``num_cpus_per_worker`` CPUs (default 1) and limits
TensorFlow to as many intra-/inter-op threads, so on a 2-core machine two arms
run at once without oversubscription. (An actor per arm, as one might first
write it, does not fit Ray's resource model: an actor reserves its CPUs for
its whole life, so six 1-CPU arm actors cannot exist on two CPUs; and six
0-CPU actors would each import TensorFlow, build the data and compile XLA
while time-sharing two cores.)

Wall-clock budgets: each actor spends its per-arm per-round budget ``r_i`` of
sampling time, measured in its own process (the arms of a round then run
concurrently, so a round takes about ``|S_i| r_i / workers`` seconds plus
compilation and metrics); `TuningResult.round_seconds` gives the wall
time of each round and `TuningResult.total_sampling_seconds` the sum
over arms.

Floating point: the actors run TensorFlow with 1 thread (by default), the
sequential tuner with TensorFlow's default thread pool; reductions split
across threads may differ in the last bits, so per-round metrics agree to
about ``1e-6`` relative, not bit for bit. Compare like with like: XLA and
non-XLA (``jit_compile``) give different numbers for the same seed.

#### References

[1]: Jeremie Coullon, Leah South and Christopher Nemeth. Stochastic gradient
     MCMC with multi-armed bandit tuning. _arXiv:2105.13059_, 2021.
[2]: Philipp Moritz, Robert Nishihara, Stephanie Wang et al. Ray: a
     distributed framework for emerging AI applications. In _OSDI_, 2018.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfp_sgmcmc.internal.util import as_parts
from tfp_sgmcmc.tuning.arms import split_arm, structural_keys
from tfp_sgmcmc.tuning.budget import Budget, num_rounds, per_arm_budgets, round_sizes
from tfp_sgmcmc.tuning.mamba import MAMBA, as_budget, evaluate_metric, resolve_make_kernel
from tfp_sgmcmc.tuning.metrics import resolve_metric
from tfp_sgmcmc.tuning.results import TuningResult
from tfp_sgmcmc.tuning.runner import ArmRunner, ArmState, RunOutput

__all__ = ["RayMAMBA", "ray_mamba", "TuningProblem", "import_ray"]

_INSTALL_HINT = 'The Ray backend of MAMBA needs Ray: pip install "tfp-sgmcmc[ray]"'


def import_ray() -> Any:
    """Imports Ray (only this module does), with an install hint if it is missing.

    Raises:
      ImportError: Ray is not installed.
    """
    try:
        import ray
    except ImportError as e:  # pragma: no cover - ray is in the test extra
        raise ImportError(f"{_INSTALL_HINT} ({e}).") from e
    return ray


@dataclass
class TuningProblem:
    """What a problem factory returns: how to build a kernel from an arm.

    Exactly one of ``make_kernel`` and ``kernel_class`` (as for
    [`MAMBA`][tfp_sgmcmc.tuning.mamba.MAMBA]).

    Args:
      make_kernel: ``make_kernel(**arm) -> kernel``. Default value: ``None``.
      kernel_class: a kernel class, built as ``kernel_class(estimator
        .with_batch_size(n), **kernel_kwargs, **arm)``. Default value: ``None``.
      estimator: the base estimator for ``kernel_class``, and the target whose
        full-data score the Stein metrics use. Default value: ``None`` (the
        first arm's estimator).
      kernel_kwargs: fixed kernel arguments for ``kernel_class``.
        Default value: ``None``.
    """

    make_kernel: Callable[..., Any] | None = None
    kernel_class: type | None = None
    estimator: Any = None
    kernel_kwargs: dict[str, Any] | None = None


def _build_problem(factory: Callable[[], Any]) -> tuple[Callable[..., Any], Any]:
    """``(make_kernel, estimator or None)`` from a problem factory."""
    problem = factory()
    if isinstance(problem, dict):
        problem = TuningProblem(**problem)
    if not isinstance(problem, TuningProblem):
        raise ValueError(
            "`problem` must return a TuningProblem (or a dict of its fields), got "
            f"{type(problem).__name__}."
        )
    make_kernel = resolve_make_kernel(
        problem.make_kernel, problem.kernel_class, problem.estimator, problem.kernel_kwargs
    )
    return make_kernel, problem.estimator


class _DriverMakeKernel:
    """``make_kernel`` for
    [`TuningResult.kernel`][tfp_sgmcmc.tuning.ray_backend.TuningResult.kernel] on the driver, built
    on first use."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory
        self._make_kernel: Callable[..., Any] | None = None

    def __call__(self, **arm: Any) -> Any:
        if self._make_kernel is None:
            self._make_kernel, _ = _build_problem(self.factory)
        return self._make_kernel(**arm)

    def __repr__(self) -> str:
        return f"make_kernel from {getattr(self.factory, '__qualname__', self.factory)!r}"


class ArmWorker:
    """The body of one Ray actor: a problem, its compiled programs, and arm runs.

    Built inside the actor's process: it limits TensorFlow's thread pools
    first (before any TensorFlow op runs there), then calls the factory and
    builds an `ArmRunner` over *all* arms.
    Construction never raises (Ray would only report a dead actor):
    `describe` returns the error instead.
    """

    def __init__(
        self,
        factory: Callable[[], Any],
        arms: list[dict[str, Any]],
        init_state: Any,
        metric: Any,
        runner_kwargs: dict[str, Any],
        threads: int,
    ) -> None:
        import tensorflow as tf

        self.threads_set = True
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:  # the runtime was initialised already in this process
            self.threads_set = False
        self.error: str | None = None
        self.value_error = False
        try:
            make_kernel, estimator = _build_problem(factory)
            self.runner = ArmRunner(make_kernel, arms, init_state, **runner_kwargs)
            self.estimator = estimator if estimator is not None else self.runner.reference_estimator
            self.metric = resolve_metric(metric)
        except Exception as e:  # reported by describe(): construction must not kill the actor
            self.error = f"{type(e).__name__}: {e}"
            self.value_error = isinstance(e, ValueError)

    def describe(self) -> dict[str, Any]:
        """Costs per arm and the process it runs in, or the construction error."""
        if self.error is not None:
            return {"error": self.error, "value_error": self.value_error}
        import tensorflow as tf

        return {
            "error": None,
            "costs": list(self.runner.costs),
            "initial_states": list(self.runner.arm_states),
            "pid": os.getpid(),
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "threads_set": self.threads_set,
        }

    def run(
        self, index: int, chain: ArmState, amount: float, budget: Budget, screening: bool = False
    ) -> tuple[RunOutput, ArmState, float, float, str]:
        """Continues arm ``index`` from ``chain`` for ``amount``; scores the round."""
        self.runner.arm_states[index] = chain
        out = self.runner.run(index, amount, budget, screening)
        value, mt, note = evaluate_metric(self.metric, out, self.estimator)
        return out, self.runner.arm_states[index], value, mt, note

    def pid(self) -> int:
        return os.getpid()


class RayMAMBA(MAMBA):
    """MAMBA (Algorithm 1 of [1]) with each round's arms run in parallel on Ray.

    Same algorithm, budgets, seeding and
    [`TuningResult`][tfp_sgmcmc.tuning.results.TuningResult] as
    [`MAMBA`][tfp_sgmcmc.tuning.mamba.MAMBA] (module
    docstring); the kernel is described by a picklable factory because every
    actor builds its own copy of the data, estimator and compiled programs.

    Args:
      problem: a picklable callable ``problem() -> TuningProblem`` (or a dict
        of its fields), called once in every actor: a module-level function
        (importable on every node: ship the package with ``runtime_env``) or a
        function/closure defined in the driver script (pickled by value).
        Build data and estimators *inside* it.
      arms: list of hyperparameter dicts.
      init_state: the initial state of every arm (array/tensor or list of parts).
      budget: a [`Budget`][tfp_sgmcmc.tuning.budget.Budget], or a number of
        seconds ``T``. Default value: ``60.``.
      eta: pruning rate ``η``. Default value: ``3``.
      metric: ``"ksd"``, ``"fssd"`` or a picklable callable ``metric(samples,
        trace, estimator) -> float``, evaluated in the actors.
        Default value: ``"ksd"``.
      thin: thinning of the samples the metric sees. Default value: ``10``.
      seed: integer seed (arm ``j`` gets the sequential tuner's stream
        ``(seed, j)``). Default value: ``0``.
      static_keys: extra structural hyperparameter names. Default value: ``()``.
      max_steps_per_call: steps per compiled call. Default value: ``2000``.
      jit_compile: XLA-compile the sampling programs. Default value: ``True``.
      progress: a tqdm bar per round. Default value: ``True``.
      num_workers: actors in the pool. Default value: ``None`` (the cluster's
        CPUs divided by ``num_cpus_per_worker``, at most the number of arms).
      num_cpus_per_worker: CPUs each actor reserves; its TensorFlow intra- and
        inter-op thread pools get ``max(1, ⌊num_cpus_per_worker⌋)`` threads.
        Default value: ``1``.
      runtime_env: Ray ``runtime_env`` of the actors (e.g. ``{"pip":
        ["tfp-sgmcmc[ray]"]}`` or ``{"py_modules": [...]}`` on a cluster).
        Default value: ``None``.
      actor_options: other ``ray.remote`` options of the actors (``memory``,
        ``resources``, ``scheduling_strategy``). Default value: ``None``.
      address: passed to ``ray.init`` if Ray is not initialised yet (``None``
        starts a local Ray or joins the cluster of ``RAY_ADDRESS``; ``"auto"``
        joins the cluster this node belongs to). Default value: ``None``.

    Raises:
      ImportError: Ray is not installed.
      ValueError: as [`MAMBA`][tfp_sgmcmc.tuning.mamba.MAMBA] (``eta``, too few
        arms, an invalid arm, an unknown metric, a deterministic budget too
        small); a ``problem`` or ``metric`` that cannot be pickled, or a
        ``problem`` that is not callable or fails to build; bad
        ``num_workers``/``num_cpus_per_worker``, or more CPUs asked for than
        the cluster has.
      RuntimeError: an actor could not start (e.g. it cannot import the
        factory's module).
    """

    method = "MAMBA (Ray)"

    def __init__(
        self,
        problem: Callable[[], Any],
        arms: Sequence[dict[str, Any]],
        init_state: Any,
        budget: Budget | float = 60.0,
        eta: int = 3,
        metric: Any = "ksd",
        thin: int = 10,
        seed: int = 0,
        static_keys: Sequence[str] = (),
        max_steps_per_call: int = 2000,
        jit_compile: bool = True,
        progress: bool = True,
        num_workers: int | None = None,
        num_cpus_per_worker: float = 1,
        runtime_env: dict[str, Any] | None = None,
        actor_options: dict[str, Any] | None = None,
        address: str | None = None,
    ) -> None:
        ray = import_ray()
        if not callable(problem):
            raise ValueError("`problem` must be a callable () -> TuningProblem.")
        arms = [dict(a) for a in arms]
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise ValueError(f"`seed` must be an int, got {seed!r}.")
        if not isinstance(num_cpus_per_worker, (int, float)) or num_cpus_per_worker <= 0:
            raise ValueError(
                f"`num_cpus_per_worker` must be a number > 0, got {num_cpus_per_worker!r}."
            )
        if num_workers is not None and (
            not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 1
        ):
            raise ValueError(f"`num_workers` must be an int >= 1, got {num_workers!r}.")
        self.budget = as_budget(budget)
        self.eta = eta
        self.num_rounds = num_rounds(len(arms), eta) if arms else 0
        self.round_sizes = round_sizes(len(arms), eta) if arms else []
        self.per_arm_budgets = per_arm_budgets(len(arms), eta, self.budget)
        self.metric = resolve_metric(metric)
        self.progress = progress
        self.problem = problem
        self.make_kernel = _DriverMakeKernel(problem)
        self._arms = arms
        self._static = structural_keys(arms, tuple(static_keys))
        self._used_keys: set = set()
        self._single = not isinstance(init_state, (list, tuple))
        parts = [np.asarray(p.numpy() if hasattr(p, "numpy") else p) for p in as_parts(init_state)]
        state = parts[0] if self._single else parts
        for what, obj in (("problem", problem), ("metric", metric)):
            _check_picklable(ray, what, obj)

        if not ray.is_initialized():
            ray.init(address=address)
        cpus = float(ray.cluster_resources().get("CPU", 0.0))
        if num_workers is None:
            num_workers = max(1, int(cpus // num_cpus_per_worker))
        num_workers = min(num_workers, len(arms))
        if num_workers * num_cpus_per_worker > cpus:
            # Ray would keep the extra actors pending forever (actors hold their CPUs).
            raise ValueError(
                f"`num_workers` × `num_cpus_per_worker` = {num_workers} × "
                f"{num_cpus_per_worker} CPUs, but the Ray cluster has {cpus:g}."
            )
        threads = max(1, int(num_cpus_per_worker))
        options = dict(actor_options or {})
        options["num_cpus"] = num_cpus_per_worker
        if runtime_env is not None:
            options["runtime_env"] = runtime_env
        actor_cls = ray.remote(ArmWorker).options(**options)
        runner_kwargs = dict(
            thin=thin,
            seed=int(seed),
            static_keys=tuple(static_keys),
            max_steps_per_call=max_steps_per_call,
            jit_compile=jit_compile,
        )
        self._ray = ray
        self._workers = [
            actor_cls.remote(problem, arms, state, metric, runner_kwargs, threads)
            for _ in range(num_workers)
        ]
        self._alive = list(range(num_workers))
        #: ``(arm index, error)`` of every arm run lost with its actor and rerun.
        self.reruns: list[tuple[int, str]] = []
        try:
            infos = ray.get([w.describe.remote() for w in self._workers])
        except ray.exceptions.RayActorError as e:
            self.shutdown()
            raise RuntimeError(
                "A Ray worker could not be started. If it could not import the module of "
                "`problem` (or of `metric`), make that module importable on every node "
                "(install it, or pass runtime_env={'py_modules': [...]} or "
                "{'working_dir': ...}), or define the factory in the driver script. "
                f"Ray said: {e}"
            ) from e
        except BaseException:
            self.shutdown()
            raise
        bad = next((d for d in infos if d["error"] is not None), None)
        if bad is not None:
            self.shutdown()
            kind = ValueError if bad["value_error"] else RuntimeError
            raise kind(f"Building the problem in a Ray worker failed: {bad['error']}")
        self.worker_info = infos
        self.costs = infos[0]["costs"]
        self.chains: list[ArmState] = infos[0]["initial_states"]
        self._home = {j: j % num_workers for j in range(len(arms))}
        if self.budget.deterministic:
            r0 = self.per_arm_budgets[0]
            worst = min(self._steps_for(j, r0) for j in range(len(arms)))
            if worst < 1:
                self.shutdown()
                raise ValueError(
                    f"`budget` {self.budget} gives some arm 0 steps in round 0 (r_0 = {r0:g} "
                    f"{self.budget.unit}); increase it."
                )

    # -- MAMBA hooks -------------------------------------------------------- #
    @property
    def arms(self) -> list[dict[str, Any]]:
        return self._arms

    @property
    def num_workers(self) -> int:
        """Actors still alive in the pool."""
        return len(self._alive)

    def run(self) -> TuningResult:
        """Runs Algorithm 1 on the actors, then releases them (see `shutdown`)."""
        try:
            return super().run()
        finally:
            self.shutdown()

    def _run_arms(
        self, survivors: list[int], amount: float, screening: bool = False
    ) -> Iterator[tuple[int, RunOutput, float, float, str]]:
        ray = self._ray
        if not self._workers:
            raise RuntimeError("The Ray workers were shut down; build a new RayMAMBA.")
        queue = list(survivors)
        free = list(self._alive)
        pending: dict[Any, tuple[int, int]] = {}

        def dispatch() -> None:
            while queue and free:
                w = free.pop(0)
                # Prefer an arm this actor ran before (its program is compiled there).
                k = next((n for n, j in enumerate(queue) if self._home[j] == w), 0)
                j = queue.pop(k)
                self._used_keys.add(split_arm(self._arms[j], self._static)[0])
                ref = self._workers[w].run.remote(
                    j, self.chains[j], amount, self.budget, screening
                )
                pending[ref] = (w, j)

        dispatch()
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            w, j = pending.pop(ref)
            try:
                out, chain, value, mt, note = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                # The actor (or its node) died: rerun the arm from its gathered
                # chain on another actor; the result is the same.
                self._alive.remove(w)
                self.reruns.append((j, f"{type(e).__name__}: {e}"))
                if not self._alive:
                    raise RuntimeError(f"Every Ray worker died; the last error: {e}") from e
                queue.insert(0, j)
                dispatch()
                continue
            self.chains[j] = chain
            self._home[j] = w
            free.append(w)
            dispatch()
            yield j, out, value, mt, note

    def _final_states(self) -> list[Any]:
        return [None if c.diverged else c.state for c in self.chains]

    def _num_programs(self) -> int:
        return len(self._used_keys)

    def _single_part(self) -> bool:
        return self._single

    def _cost(self, idx: int) -> int:
        return self.costs[idx]

    def _steps_for(self, index: int, amount: float) -> int:
        if self.budget.unit == "steps":
            return int(np.floor(amount))
        return int(np.floor(amount / self.costs[index]))

    # -- lifecycle ---------------------------------------------------------- #
    def shutdown(self) -> None:
        """Kills the actors (frees their CPUs and memory). `run` calls it."""
        ray = self._ray
        for w in self._workers:
            try:
                ray.kill(w)
            except Exception:  # already dead
                pass
        self._workers = []
        self._alive = []

    def __enter__(self) -> RayMAMBA:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


def ray_mamba(*args: Any, **kwargs: Any) -> TuningResult:
    """``RayMAMBA(*args, **kwargs).run()`` (see
    [`RayMAMBA`][tfp_sgmcmc.tuning.ray_backend.RayMAMBA])."""
    return RayMAMBA(*args, **kwargs).run()


def _check_picklable(ray: Any, what: str, obj: Any) -> None:
    try:
        ray.cloudpickle.dumps(obj)
    except Exception as e:
        raise ValueError(
            f"`{what}` cannot be pickled to ship it to the Ray workers "
            f"({type(e).__name__}: {e}). Build data, estimators and other TensorFlow "
            "objects inside the factory, and make it a module-level function or a "
            "function defined in the driver script."
        ) from e
