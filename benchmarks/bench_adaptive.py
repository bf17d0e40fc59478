"""Steps per second of MSGLD and ASGLD relative to SGLD, on the core workload.

Workload (the core benchmark's, ``bench_samplers.py``): Bayesian logistic
regression, N = 1,000,000 examples, d = 10, prior N(0, 10 I), minibatches of
1% (10,000) and 0.1% (1,000) rows drawn ``with_replacement`` (and ``epoch``),
one chain, float32, CPU. Every kernel runs through ``tfp.mcmc.sample_chain``
inside ``tf.function(jit_compile=True)`` with ``trace_fn=None``.

Kernels: SGLD, MSGLD (a = 1, β1 = 0.9), ASGLD (a = 1, β1 = 0.9, β2 = 0.999),
and the variants AdaMax-SGLD, Adadelta-SGLD, pSGLD and pSGLD + momentum.
Each is compiled by a warm-up call, then timed ``--repeats`` times in
round-robin order within its (scheme, batch) group so load drift on the shared
machine hits all alike. Speeds are medians; the ratios ``X/SGLD`` are medians
of the per-round ratios (measured in the same run), from wall-clock time and,
more robust on a loaded machine, from the process's CPU time. One JSON document is
printed on stdout (progress on stderr).

Usage::

    python benchmarks/bench_adaptive.py            # full run (a few minutes)
    python benchmarks/bench_adaptive.py --quick    # smoke test (small N, few steps)
    python benchmarks/bench_adaptive.py --output benchmarks/results/adaptive.json
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import dump_json, environment, load_average, log, make_data, median, timed_call  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.kernels.adaptive import (  # noqa: E402
    ASGLD,
    MSGLD,
    AdadeltaSGLD,
    AdaMaxSGLD,
    PreconditionedMomentumSGLD,
)

PRIOR_VARIANCE = 10.0




def log_likelihood(theta: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
    x, y = batch
    logits = tf.linalg.matvec(x, theta)
    return -tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits)


def log_prior(theta: tf.Tensor) -> tf.Tensor:
    return -0.5 * tf.reduce_sum(tf.square(theta), axis=-1) / PRIOR_VARIANCE


def kernels(est: sg.MinibatchEstimator, eps: float, variants: bool) -> dict[str, Any]:
    out = {
        "sgld": sg.SGLD(est, eps),
        "msgld": MSGLD(est, eps, a=1.0, beta1=0.9),
        "asgld": ASGLD(est, eps, a=1.0, beta1=0.9, beta2=0.999),
    }
    if variants:
        out.update(
            adamax_sgld=AdaMaxSGLD(est, eps),
            adadelta_sgld=AdadeltaSGLD(est, eps),
            psgld=sg.PSGLD(est, eps),
            psgld_momentum=PreconditionedMomentumSGLD(est, eps),
        )
    return out


def make_runner(kernel: Any, dim: int, num_steps: int):
    @tf.function(jit_compile=True)
    def run(seed: tf.Tensor) -> tf.Tensor:
        return tfp.mcmc.sample_chain(
            num_steps, tf.zeros([dim], tf.float32), kernel=kernel, trace_fn=None, seed=seed
        )

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small N and few steps (smoke test)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--schemes", default="with_replacement,epoch")
    ap.add_argument("--no-variants", action="store_true", help="time only SGLD, MSGLD, ASGLD")
    ap.add_argument("--output", default=None)
    args = ap.parse_args()

    num_examples = 20_000 if args.quick else 1_000_000
    dim = 10
    repeats = args.repeats or (2 if args.quick else 7)
    x, y = make_data(num_examples, dim)
    results: dict[str, Any] = {
        "benchmark": "bench_adaptive",
        "workload": {
            "model": "logistic regression, prior N(0, 10 I)",
            "num_examples": num_examples,
            "dim": dim,
            "dtype": "float32",
            "chains": 1,
            "xla": True,
        },
        "repeats": repeats,
        "environment": environment(),
        "load_average_start": load_average(),
        "groups": [],
    }
    for scheme in args.schemes.split(","):
        data = sg.InMemoryData((x, y), scheme=scheme)
        for frac in (0.01, 0.001):
            n = int(frac * num_examples)
            # Steps per timed call: enough for ~0.5-2 s per call on this machine.
            num_steps = (
                (200 if args.quick else 2000) if frac == 0.01 else (1000 if args.quick else 10000)
            )
            est = sg.MinibatchEstimator(log_likelihood, data, batch_size=n, log_prior_fn=log_prior)
            ks = kernels(est, 1.0 / num_examples, not args.no_variants)
            runners = {k: make_runner(v, dim, num_steps) for k, v in ks.items()}
            compile_s = {}
            for k, run in runners.items():
                t_first, _ = timed_call(run, tf.constant([0, 1]))
                t_second, out = timed_call(run, tf.constant([0, 2]))
                assert np.all(np.isfinite(out)), k
                compile_s[k] = round(t_first - t_second, 2)
                log(f"[{scheme} n={n}] compiled {k} ({compile_s[k]} s)")
            times: dict[str, list[float]] = {k: [] for k in runners}
            cpu: dict[str, list[float]] = {k: [] for k in runners}
            for r in range(repeats):
                for k, run in runners.items():
                    c0 = time.process_time()
                    t, _ = timed_call(run, tf.constant([r + 3, 7]))
                    cpu[k].append(time.process_time() - c0)
                    times[k].append(t)
                log(f"[{scheme} n={n}] round {r + 1}/{repeats}")
            speeds = {k: round(num_steps / median(v), 1) for k, v in times.items()}
            ratios = {
                f"{k}/sgld": round(
                    median([times["sgld"][i] / times[k][i] for i in range(repeats)]), 3
                )
                for k in runners
                if k != "sgld"
            }
            # CPU seconds of this process (all threads): robust to waiting for a
            # core on a loaded machine, which inflates wall-clock times at random.
            cpu_ratios = {
                f"{k}/sgld": round(median([cpu["sgld"][i] / cpu[k][i] for i in range(repeats)]), 3)
                for k in runners
                if k != "sgld"
            }
            results["groups"].append(
                {
                    "scheme": scheme,
                    "batch_size": n,
                    "batch_fraction": frac,
                    "steps_per_call": num_steps,
                    "steps_per_second_median": speeds,
                    "ratio_vs_sgld_median": ratios,
                    "cpu_time_ratio_vs_sgld_median": cpu_ratios,
                    "cpu_steps_per_cpu_second_median": {
                        k: round(num_steps / median(v), 1) for k, v in cpu.items()
                    },
                    "compile_s": compile_s,
                }
            )
    results["load_average_end"] = load_average()
    dump_json(results, args.output)


if __name__ == "__main__":
    main()
