"""One 6-arm MAMBA round: sequential vs Ray (2 single-threaded actors on 2 cores).

The problem is the MAMBA paper's Bayesian logistic regression (N = 10⁶,
d = 10, ``models/logistic_regression.py``), SGLD with a 1% minibatch (epoch
scheme), six step sizes ``10^-4.5 … 10^-7``, a deterministic budget of
``--steps`` sampler steps per arm, XLA, and the default metric (KSD with
full-data scores of the thinned samples, thin 10). A round is what MAMBA does
for each of its rounds: run every arm for its budget and score it
(``MAMBA._run_arms``, the hook the Ray backend overrides).

Three configurations, each in its own process (TensorFlow's thread pools are
fixed when its runtime starts):

* ``sequential``: :class:`tfp_sgmcmc.tuning.MAMBA` with TensorFlow's default
  thread pools (what a user gets);
* ``sequential_1thread``: the same with 1 intra-op and 1 inter-op thread;
* ``ray``: :class:`tfp_sgmcmc.tuning.ray_backend.RayMAMBA` on a local Ray with
  2 CPUs (2 actors, 1 CPU and 1 thread each).

For each: ``startup_s`` (Ray: starting the actors, which import TensorFlow
and build the data; sequential: building the data), ``cold_round_s`` (the
first round: includes tracing/XLA compilation, per actor for Ray),
``warm_round_s`` (median of ``--repeats`` further rounds, chains continuing:
no compilation), with the round's summed sampling, compile and metric
seconds. Ratios = sequential time / Ray time, for the warm round (the
speed-up of every round after the first), the cold round and cold round +
startup. ``same_best_arm`` and ``max_rel_metric_diff`` compare the first
round's per-arm metrics of the sequential and Ray runs (identical seeds and
deterministic budget: they must agree). The load average is recorded: the
machine is shared, and a busy neighbour takes cores from the 2 actors. Ray
starts its workers at nice 15 (they yield to every other process of the
node); the benchmark starts them at nice 0 (``--ray-niceness``), the level of
the sequential baseline, so both compete for the shared cores on equal terms.

Usage::

    python benchmarks/bench_ray_mamba.py            # N = 10⁶, 2,000 steps per arm
    python benchmarks/bench_ray_mamba.py --quick    # N = 10⁵, 500 steps per arm (smoke)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import dump_json, environment, load_average  # noqa: E402

MODES = ("sequential", "sequential_1thread", "ray")
STEP_SIZES = [float(10.0**e) for e in (-4.5, -5.0, -5.5, -6.0, -6.5, -7.0)]


def make_problem(num_examples: int, batch_fraction: float) -> Any:
    """The tuning problem (called in the driver or in every Ray actor)."""
    import tfp_sgmcmc as sg
    from models.logistic_regression import logistic_regression
    from tfp_sgmcmc.tuning.ray_backend import TuningProblem

    lr = logistic_regression(num_examples=num_examples)
    est = lr.estimator(lr.batch_size_from_fraction(batch_fraction))
    return TuningProblem(kernel_class=sg.SGLD, estimator=est)


class ProblemFactory:
    """A picklable ``problem()`` (arguments travel, the data is built in each actor)."""

    def __init__(self, num_examples: int, batch_fraction: float) -> None:
        self.num_examples = num_examples
        self.batch_fraction = batch_fraction

    def __call__(self) -> Any:
        return make_problem(self.num_examples, self.batch_fraction)


def _round(tuner: Any, amount: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    outs = list(tuner._run_arms(list(range(len(tuner.arms))), amount))
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


def child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    import tensorflow as tf

    if mode == "sequential_1thread":
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    from tfp_sgmcmc import tuning as tu

    arms = tu.grid(step_size=STEP_SIZES)
    init = np.zeros([10], np.float32)
    # eta = 6 arms: one round, r_0 = T / 6 = --steps per arm.
    kw = dict(budget=tu.steps(6 * args.steps), eta=6, seed=1, progress=False, jit_compile=True)
    factory = ProblemFactory(args.num_examples, args.batch_fraction)
    t0 = time.perf_counter()
    if mode == "ray":
        import ray

        from tfp_sgmcmc.tuning.ray_backend import RayMAMBA

        # Ray renices its workers to 15 by default: on a machine shared with other
        # jobs (this one) the actors would then lose the cores to any nice-0
        # process while the sequential baseline competes at nice 0.
        ray.init(
            num_cpus=args.workers,
            include_dashboard=False,
            log_to_driver=False,
            _system_config={"worker_niceness": args.ray_niceness},
        )
        t0 = time.perf_counter()
        tuner = RayMAMBA(factory, arms, init, num_workers=args.workers, **kw)
    else:
        problem = factory()
        tuner = tu.MAMBA(
            arms, init, kernel_class=problem.kernel_class, estimator=problem.estimator, **kw
        )
    startup = time.perf_counter() - t0
    r_0 = tuner.per_arm_budgets[0]
    cold = _round(tuner, r_0)
    warm = [_round(tuner, r_0) for _ in range(args.repeats)]
    if mode == "ray":
        tuner.shutdown()
    best = int(np.argmin(cold["metrics"]))
    return {
        "mode": mode,
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "startup_s": startup,
        "cold_round_s": cold["wall_s"],
        "warm_round_s": statistics.median(w["wall_s"] for w in warm),
        "warm_round_all_s": [w["wall_s"] for w in warm],
        "cold": cold,
        "warm_median_sampling_s": statistics.median(w["sampling_s"] for w in warm),
        "warm_median_metric_s": statistics.median(w["metric_s"] for w in warm),
        "best_arm": STEP_SIZES[best],
        "load_average_end": load_average(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="N = 1e5, 500 steps per arm")
    p.add_argument("--num-examples", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="sampler steps per arm per round")
    p.add_argument("--batch-fraction", type=float, default=0.01)
    p.add_argument("--repeats", type=int, default=3, help="warm rounds (median)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument(
        "--ray-niceness", type=int, default=0, help="nice level of the Ray workers (Ray: 15)"
    )
    p.add_argument("--out", default=None, help="also write the JSON here")
    p.add_argument("--child", choices=MODES, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.num_examples is None:
        args.num_examples = 100_000 if args.quick else 1_000_000
    if args.steps is None:
        args.steps = 500 if args.quick else 2000

    if args.child is not None:
        print(json.dumps(child(args.child, args)))
        return

    load_start = load_average()
    results = {}
    for mode in MODES:
        print(f"[bench_ray_mamba] {mode} ...", file=sys.stderr, flush=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", mode]
        cmd += ["--num-examples", str(args.num_examples), "--steps", str(args.steps)]
        cmd += ["--batch-fraction", str(args.batch_fraction), "--repeats", str(args.repeats)]
        cmd += ["--workers", str(args.workers), "--ray-niceness", str(args.ray_niceness)]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if out.returncode != 0:
            sys.stderr.write(out.stderr[-4000:])
            raise SystemExit(f"{mode} failed")
        results[mode] = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"[bench_ray_mamba] {mode}: warm round {results[mode]['warm_round_s']:.2f} s",
            file=sys.stderr,
            flush=True,
        )
    seq, seq1, par = results["sequential"], results["sequential_1thread"], results["ray"]
    m_seq = np.asarray(seq["cold"]["metrics"])
    m_par = np.asarray(par["cold"]["metrics"])
    finite = np.isfinite(m_seq) & np.isfinite(m_par)
    rel = np.abs(m_par[finite] - m_seq[finite]) / np.abs(m_seq[finite])
    report = {
        "benchmark": "bench_ray_mamba",
        "problem": {
            "model": "logistic regression (models/logistic_regression.py)",
            "num_examples": args.num_examples,
            "batch_fraction": args.batch_fraction,
            "kernel": "SGLD",
            "arms": [{"step_size": s} for s in STEP_SIZES],
            "steps_per_arm_per_round": args.steps,
            "metric": "KSD (full-data scores, thin 10)",
            "jit_compile": True,
            "ray_workers": args.workers,
            "ray_worker_niceness": args.ray_niceness,
        },
        "results": results,
        "ratios": {
            "warm_round_sequential_over_ray": seq["warm_round_s"] / par["warm_round_s"],
            "warm_round_sequential_1thread_over_ray": seq1["warm_round_s"] / par["warm_round_s"],
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
    import ray

    report["environment"]["versions"]["ray"] = ray.__version__
    dump_json(report, args.out)


if __name__ == "__main__":
    main()
