"""The Ray executor: a tuning round's arms run in parallel on Ray actors.

[`RayExecutor`][tfp_sgmcmc.tuning.ray_backend.RayExecutor] plugs into
[`MAMBA`][tfp_sgmcmc.tuning.mamba.MAMBA],
[`grid_search`][tfp_sgmcmc.tuning.baselines.grid_search] and
[`heuristic`][tfp_sgmcmc.tuning.baselines.heuristic] as ``executor=`` (see
[`tfp_sgmcmc.tuning.executors`][tfp_sgmcmc.tuning.executors]; install with
``pip install "tfp-sgmcmc[ray]"``). The tuner is Algorithm 1 of Coullon, South
& Nemeth [1] unchanged (docs/algorithms.md#mamba): ``K = ⌊log_η M⌋`` rounds;
round ``i`` runs each surviving arm for ``r_i = T/(|S_i| K)`` (seconds, steps
or gradient evaluations), scores it by the metric of this round's thinned
samples, and keeps the ``⌊|S_i|/η⌋`` best (stable sort). Only the execution of
a round changes: the ``|S_i|`` runs of a round are independent, so they go to
a pool of Ray actors and run concurrently.

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

* under a deterministic budget (steps or gradient evaluations) a tuner with
  the Ray executor reproduces the sequential one: same per-round metrics (up to floating-point
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
from typing import Any

import numpy as np

from tfp_sgmcmc.internal.util import as_parts
from tfp_sgmcmc.tuning.arms import split_arm, structural_keys
from tfp_sgmcmc.tuning.budget import Budget
from tfp_sgmcmc.tuning.executors import (
    ArmPool,
    Executor,
    TuningJob,
    build_problem,
    evaluate_metric,
)
from tfp_sgmcmc.tuning.metrics import resolve_metric
from tfp_sgmcmc.tuning.runner import ArmRunner, ArmState, RunOutput

__all__ = ["RayExecutor", "import_ray"]

_INSTALL_HINT = 'The Ray executor needs Ray: pip install "tfp-sgmcmc[ray]"'


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
            make_kernel, estimator = build_problem(factory)
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


class RayExecutor(Executor):
    """Runs each round's arms in parallel on a pool of Ray actors [2].

    Same algorithm, budgets, seeding and
    [`TuningResult`][tfp_sgmcmc.tuning.results.TuningResult] as the
    [`SequentialExecutor`][tfp_sgmcmc.tuning.executors.SequentialExecutor]
    (module docstring): every actor holds an
    [`ArmRunner`][tfp_sgmcmc.tuning.runner.ArmRunner] over all the arms, and an
    arm's chain ``(θ, seed, call counter)`` travels with its run. The tuner's
    ``kernel`` is shipped to the actors pickled: a
    [`TuningProblem`][tfp_sgmcmc.tuning.executors.TuningProblem]
    ``TuningProblem(build)`` builds data and estimators inside each actor
    (``build``: a module-level function importable on every node, or a
    function defined in the driver script, pickled by value); a
    ``KernelSpec`` or a ``make_kernel`` function works too if it pickles.

    Args:
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
        joins the cluster this node belongs to; ``"ray://host:10001"`` or
        ``"host:6379"`` connects to a cluster). Default value: ``None``.

    Raises:
      ImportError: Ray is not installed (with the install command).
      ValueError: bad ``num_workers``/``num_cpus_per_worker``. When a tuner
        opens it: a ``kernel`` or metric that cannot be pickled, a ``kernel`` that
        fails to build in the actors (an invalid arm), or more CPUs asked for
        than the cluster has.
      RuntimeError: an actor could not start (e.g. it cannot import the
        factory's module), or every actor died during a run.

    Example (a local 2-CPU Ray; the factory builds the data in each actor):

    ```python
    import ray
    import tensorflow as tf
    import tfp_sgmcmc as sg
    from tfp_sgmcmc import tuning

    def build():
        est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1),
                                        noise_scale=0.1)
        return lambda step_size: sg.SGLD(est, step_size)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    result = tuning.MAMBA(
        tuning.grid(step_size=[1e-3, 0.1, 50.0]), tf.fill([2], 3.0),
        tuning.TuningProblem(build), budget=tuning.steps(600), progress=False,
        executor=tuning.RayExecutor(num_workers=2),
    ).run()
    ray.shutdown()
    assert result.best_arm == {"step_size": 0.1} and result.method == "MAMBA (Ray)"
    ```
    """

    name = "Ray"

    def __init__(
        self,
        num_workers: int | None = None,
        num_cpus_per_worker: float = 1,
        runtime_env: dict[str, Any] | None = None,
        actor_options: dict[str, Any] | None = None,
        address: str | None = None,
    ) -> None:
        import_ray()  # fail here, with the install hint, not in the tuner
        if (
            not isinstance(num_cpus_per_worker, (int, float))
            or isinstance(num_cpus_per_worker, bool)
            or not num_cpus_per_worker > 0
        ):
            raise ValueError(
                f"`num_cpus_per_worker` must be a number > 0, got {num_cpus_per_worker!r}."
            )
        if num_workers is not None and (
            not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 1
        ):
            raise ValueError(f"`num_workers` must be an int >= 1, got {num_workers!r}.")
        if address is not None and not isinstance(address, str):
            raise TypeError(f"`address` must be a string, got {type(address).__name__}.")
        self.num_workers = num_workers
        self.num_cpus_per_worker = num_cpus_per_worker
        self.runtime_env = runtime_env
        self.actor_options = dict(actor_options or {})
        self.address = address

    def open(self, job: TuningJob) -> _RayPool:
        return _RayPool(self, job)

    def __repr__(self) -> str:
        return (
            f"RayExecutor(num_workers={self.num_workers}, "
            f"num_cpus_per_worker={self.num_cpus_per_worker}, address={self.address!r})"
        )


class _RayPool(ArmPool):
    """The actors of one tuning run (module docstring)."""

    def __init__(self, executor: RayExecutor, job: TuningJob) -> None:
        super().__init__(job)
        ray = import_ray()
        self._ray = ray
        self._workers: list[Any] = []
        self._alive: list[int] = []
        #: ``(arm index, error)`` of every arm run lost with its actor and rerun.
        self.reruns: list[tuple[int, str]] = []
        seed = job.seed
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise ValueError(f"`seed` must be an int, got {seed!r}.")
        arms = job.arms
        self._static = structural_keys(arms, tuple(job.static_keys))
        self._used_keys: set = set()
        single = not isinstance(job.init_state, (list, tuple))
        parts = [
            np.asarray(p.numpy() if hasattr(p, "numpy") else p) for p in as_parts(job.init_state)
        ]
        state = parts[0] if single else parts
        _check_picklable(ray, job.problem_source, job.problem)
        _check_picklable(ray, "`metric`", job.metric)

        if not ray.is_initialized():
            ray.init(address=executor.address)
        cpus = float(ray.cluster_resources().get("CPU", 0.0))
        per = executor.num_cpus_per_worker
        num_workers = executor.num_workers
        if num_workers is None:
            num_workers = max(1, int(cpus // per))
        num_workers = min(num_workers, len(arms))
        if num_workers * per > cpus:
            # Ray would keep the extra actors pending forever (actors hold their CPUs).
            raise ValueError(
                f"`num_workers` × `num_cpus_per_worker` = {num_workers} × {per} CPUs, but "
                f"the Ray cluster has {cpus:g}."
            )
        threads = max(1, int(per))
        options = dict(executor.actor_options)
        options["num_cpus"] = per
        if executor.runtime_env is not None:
            options["runtime_env"] = executor.runtime_env
        actor_cls = ray.remote(ArmWorker).options(**options)
        runner_kwargs = job.runner_kwargs()
        runner_kwargs["seed"] = int(seed)
        self._workers = [
            actor_cls.remote(job.problem, arms, state, job.metric, runner_kwargs, threads)
            for _ in range(num_workers)
        ]
        self._alive = list(range(num_workers))
        try:
            infos = ray.get([w.describe.remote() for w in self._workers])
        except ray.exceptions.RayActorError as e:
            self.close()
            raise RuntimeError(
                "A Ray worker could not be started. If it could not import the module of "
                "the TuningProblem's `build` (or of `metric`), make that module importable on "
                "every node "
                "(install it, or pass runtime_env={'py_modules': [...]} or "
                "{'working_dir': ...}), or define the factory in the driver script. "
                f"Ray said: {e}"
            ) from e
        except BaseException:
            self.close()
            raise
        bad = next((d for d in infos if d["error"] is not None), None)
        if bad is not None:
            self.close()
            kind = ValueError if bad["value_error"] else RuntimeError
            raise kind(f"Building `kernel` in a Ray worker failed: {bad['error']}")
        #: What each actor reported at start: ``pid``, ``intra_op_threads``, ``costs``, ...
        self.worker_info = infos
        self.costs = infos[0]["costs"]
        self.chains_per_arm = int(job.chains_per_arm)
        self.chains: list[ArmState] = infos[0]["initial_states"]
        self._home = {j: j % num_workers for j in range(len(arms))}

    @property
    def num_workers(self) -> int:
        """Actors still alive in the pool."""
        return len(self._alive)

    def _runs(
        self, indices: Sequence[int], amount: float, budget: Budget, screening: bool = False
    ) -> Iterator[tuple[int, RunOutput, float, float, str]]:
        ray = self._ray
        if not self._workers:
            raise RuntimeError("The Ray workers were shut down; open the executor again.")
        queue = list(indices)
        free = list(self._alive)
        pending: dict[Any, tuple[int, int]] = {}

        def dispatch() -> None:
            while queue and free:
                w = free.pop(0)
                # Prefer an arm this actor ran before (its program is compiled there).
                k = next((n for n, j in enumerate(queue) if self._home[j] == w), 0)
                j = queue.pop(k)
                self._used_keys.add(split_arm(self.job.arms[j], self._static)[0])
                ref = self._workers[w].run.remote(j, self.chains[j], amount, budget, screening)
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

    def final_states(self) -> list[Any]:
        return [None if c.diverged else c.state for c in self.chains]

    @property
    def num_programs(self) -> int:
        return len(self._used_keys)

    def close(self) -> None:
        """Kills the actors (frees their CPUs and memory). The tuner's ``run`` calls it."""
        for w in self._workers:
            try:
                self._ray.kill(w)
            except Exception:  # already dead
                pass
        self._workers = []
        self._alive = []


def _check_picklable(ray: Any, what: str, obj: Any) -> None:
    try:
        ray.cloudpickle.dumps(obj)
    except Exception as e:
        raise ValueError(
            f"{what} cannot be pickled to ship it to the Ray workers "
            f"({type(e).__name__}: {e}). Pass kernel=tuning.TuningProblem(build), where "
            "build() returns a KernelSpec or a make_kernel function and builds data, "
            "estimators and other TensorFlow objects inside the worker; make `build` a "
            "module-level function or a function defined in the driver script."
        ) from e
