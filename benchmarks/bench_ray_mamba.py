"""One 6-arm MAMBA round: sequential vs Ray (2 single-threaded actors on 2 cores).

The problem is the MAMBA paper's Bayesian logistic regression (N = 10⁶,
d = 10, ``tfp_sgmcmc/models/logistic_regression.py``), SGLD with a 1% minibatch (epoch
scheme), six step sizes ``10^-4.5 … 10^-7``, a deterministic budget of
``--steps`` sampler steps per arm, XLA, and the default metric (KSD with
full-data scores of the thinned samples, thin 10). A round is what MAMBA does
for each of its rounds: run every arm for its budget and score it
(``tuner.pool``, the executor's pool, runs the round's arms).

Three configurations, timed round-robin in one run (a load change on this
shared machine hits all of them alike):

* ``sequential``: :class:`tfp_sgmcmc.tuning.MAMBA` in this process with
  TensorFlow's default thread pools (what a user gets);
* ``ray``: ``MAMBA`` with a ``RayExecutor`` of 2 actors of 1
  CPU and 1 TensorFlow thread each;
* ``sequential_1thread``: the ``RayExecutor`` with ONE such actor, which runs the six
  arms one after another with 1 thread (the same code as the sequential tuner;
  the dispatch costs milliseconds per arm).

For each: ``startup_s`` (Ray: starting the actors, which import TensorFlow
and build the data; sequential: building the data), ``cold_round_s`` (the
first round: includes tracing/XLA compilation, per actor for Ray),
``warm_round_s`` (median of ``--repeats`` further rounds, chains continuing:
no compilation), with the round's summed sampling, compile and metric
seconds. Ratios: warm rounds = median over repeats of the per-repeat ratio
(sequential / Ray); cold round and cold round + startup = single ratios.
``same_best_arm`` and ``max_rel_metric_diff`` compare the first round's
per-arm metrics of the sequential and Ray runs (identical seeds and
deterministic budget: they must agree). Ray starts its workers at nice 15
(they yield to every other process of the node); the benchmark starts them at
nice 0 (``--ray-niceness``), the level of the sequential baseline, so that on
this shared machine both compete for the cores on equal terms. The load
average is recorded.

Usage::

    python benchmarks/bench_ray_mamba.py            # N = 10⁶, 2,000 steps per arm
    python benchmarks/bench_ray_mamba.py --quick    # N = 10⁵, 500 steps per arm (smoke)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import numpy as np
from _common import dump_json, environment, load_average  # noqa: E402

MODES = ("sequential", "ray", "sequential_1thread")
STEP_SIZES = [float(10.0**e) for e in (-4.5, -5.0, -5.5, -6.0, -6.5, -7.0)]


def make_problem(num_examples: int, batch_fraction: float) -> Any:
    """The tuner's kernel (built in the driver or in every Ray actor)."""
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.models.logistic_regression import logistic_regression
    from tfp_sgmcmc.tuning import KernelSpec

    lr = logistic_regression(num_examples=num_examples)
    est = lr.estimator(lr.batch_size_from_fraction(batch_fraction))
    return KernelSpec(sg.SGLD, est)


class ProblemFactory:
    """A picklable ``build`` of ``TuningProblem(build)`` (arguments travel, the data is
    built in each actor)."""

    def __init__(self, num_examples: int, batch_fraction: float) -> None:
        self.num_examples = num_examples
        self.batch_fraction = batch_fraction

    def __call__(self) -> Any:
        return make_problem(self.num_examples, self.batch_fraction)


def _round(tuner: Any, amount: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    outs = list(tuner.pool._runs(list(range(len(tuner.arms))), amount, tuner.budget))
    wall = time.perf_counter() - t0
    outs.sort(key=lambda o: o[0])
    return {
        "wall_s": wall,
        "sampling_s": float(sum(o[1].sampling_seconds for o in outs)),
        "compile_s": float(sum(o[1].compile_seconds for o in outs)),
        "metric_s": float(sum(o[3] for o in outs)),
        "steps": [int(o[1].steps) for o in outs],
        "metrics": [float(o[2]) for o in outs],
    }


def _summary(cold: dict[str, Any], warm: list[dict[str, Any]], startup: float) -> dict:
    best = int(np.argmin(cold["metrics"]))
    return {
        "startup_s": startup,
        "cold_round_s": cold["wall_s"],
        "warm_round_s": statistics.median(w["wall_s"] for w in warm),
        "warm_round_all_s": [w["wall_s"] for w in warm],
        "warm_median_sampling_s": statistics.median(w["sampling_s"] for w in warm),
        "warm_median_metric_s": statistics.median(w["metric_s"] for w in warm),
        "cold": cold,
        "best_arm": STEP_SIZES[best],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="N = 1e5, 500 steps per arm")
    p.add_argument("--num-examples", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="sampler steps per arm per round")
    p.add_argument("--batch-fraction", type=float, default=0.01)
    p.add_argument("--repeats", type=int, default=3, help="warm rounds per configuration")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument(
        "--ray-niceness", type=int, default=0, help="nice level of the Ray workers (Ray: 15)"
    )
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args()
    if args.num_examples is None:
        args.num_examples = 100_000 if args.quick else 1_000_000
    if args.steps is None:
        args.steps = 500 if args.quick else 2000

    load_start = load_average()
    import ray
    import tensorflow as tf

    from tfp_sgmcmc import tuning as tu

    def log(msg: str) -> None:
        print(f"[bench_ray_mamba] {msg}", file=sys.stderr, flush=True)

    # Logical CPUs for the two pools (workers + 1); only one configuration
    # computes at a time. Ray renices its workers to 15 by default: on a machine
    # shared with other jobs (this one) the actors would then lose the cores to
    # any nice-0 process, while the sequential baseline competes at nice 0.
    ray.init(
        num_cpus=args.workers + 1,
        include_dashboard=False,
        log_to_driver=False,
        _system_config={"worker_niceness": args.ray_niceness},
    )
    arms = tu.grid(step_size=STEP_SIZES)
    init = np.zeros([10], np.float32)
    # eta = 6 arms: one round, r_0 = T / 6 = --steps per arm.
    kw = dict(budget=tu.steps(6 * args.steps), eta=6, seed=1, progress=False)
    factory = ProblemFactory(args.num_examples, args.batch_fraction)
    tuners: dict[str, Any] = {}
    startup: dict[str, float] = {}

    log("sequential: building the problem in this process")
    t0 = time.perf_counter()
    tuners["sequential"] = tu.MAMBA(arms, init, factory(), **kw)
    startup["sequential"] = time.perf_counter() - t0
    log(f"ray: starting {args.workers} actors")
    t0 = time.perf_counter()
    tuners["ray"] = tu.MAMBA(
        arms,
        init,
        tu.TuningProblem(factory),
        executor=tu.RayExecutor(num_workers=args.workers),
        **kw,
    )
    startup["ray"] = time.perf_counter() - t0
    log("sequential_1thread: starting 1 actor")
    t0 = time.perf_counter()
    tuners["sequential_1thread"] = tu.MAMBA(
        arms, init, tu.TuningProblem(factory), executor=tu.RayExecutor(num_workers=1), **kw
    )
    startup["sequential_1thread"] = time.perf_counter() - t0

    r_0 = tuners["sequential"].per_arm_budgets[0]
    cold = {}
    for name in MODES:
        log(f"{name}: cold round")
        cold[name] = _round(tuners[name], r_0)
    warm: dict[str, list] = {name: [] for name in MODES}
    for rep in range(args.repeats):  # round-robin: a load change hits every configuration
        for name in MODES:
            warm[name].append(_round(tuners[name], r_0))
        log(
            f"repeat {rep + 1}/{args.repeats}: "
            + ", ".join(f"{n} {warm[n][-1]['wall_s']:.2f} s" for n in MODES)
        )
    for name in ("ray", "sequential_1thread"):
        tuners[name].close()
    results = {name: _summary(cold[name], warm[name], startup[name]) for name in MODES}
    results["sequential"]["intra_op_threads"] = (
        tf.config.threading.get_intra_op_parallelism_threads()
    )
    results["ray"]["actor_intra_op_threads"] = tuners["ray"].pool.worker_info[0]["intra_op_threads"]

    def ratio(a: str, b: str) -> float:
        return statistics.median(x["wall_s"] / y["wall_s"] for x, y in zip(warm[a], warm[b]))

    seq, seq1, par = results["sequential"], results["sequential_1thread"], results["ray"]
    m_seq = np.asarray(seq["cold"]["metrics"])
    m_par = np.asarray(par["cold"]["metrics"])
    finite = np.isfinite(m_seq) & np.isfinite(m_par)
    rel = np.abs(m_par[finite] - m_seq[finite]) / np.abs(m_seq[finite])
    report = {
        "benchmark": "bench_ray_mamba",
        "problem": {
            "model": "logistic regression (tfp_sgmcmc/models/logistic_regression.py)",
            "num_examples": args.num_examples,
            "batch_fraction": args.batch_fraction,
            "kernel": "SGLD",
            "arms": [{"step_size": s} for s in STEP_SIZES],
            "steps_per_arm_per_round": args.steps,
            "metric": "KSD (full-data scores, thin 10)",
            "jit_compile": True,
            "ray_workers": args.workers,
            "ray_worker_niceness": args.ray_niceness,
            "repeats": args.repeats,
        },
        "results": results,
        "ratios": {
            "warm_round_sequential_over_ray": ratio("sequential", "ray"),
            "warm_round_sequential_1thread_over_ray": ratio("sequential_1thread", "ray"),
            "cold_round_sequential_over_ray": seq["cold_round_s"] / par["cold_round_s"],
            "cold_round_plus_startup_sequential_over_ray": (
                (seq["cold_round_s"] + seq["startup_s"]) / (par["cold_round_s"] + par["startup_s"])
            ),
        },
        "same_best_arm": seq["best_arm"] == par["best_arm"] == seq1["best_arm"],
        "same_diverged_arms": bool(np.array_equal(np.isfinite(m_seq), np.isfinite(m_par))),
        "max_rel_metric_diff": float(rel.max()) if rel.size else 0.0,
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "environment": environment(),
    }
    report["environment"]["versions"]["ray"] = ray.__version__
    dump_json(report, args.out)


if __name__ == "__main__":
    main()
