"""Steps/second of SGLD with data-parallel minibatch gradients on 2 logical CPU devices.

Bayesian logistic regression (N = 1,000,000, d = 10, prior N(0, 10 I), one float32
chain, minibatches of 1% and 10%). The process splits its one physical CPU into two
logical devices *before* TensorFlow initialises, then times, round-robin in one run:

- `single_graph`: `SGLD(MinibatchEstimator)` in `tfp.mcmc.sample_chain` inside
  `tf.function`;
- `distributed_graph`: the same with `DistributedMinibatchEstimator(...,
  MirroredStrategy(["/cpu:0", "/cpu:1"]))`;
- `single_xla`, `distributed_xla`: the same two under `tf.function(jit_compile=True)`;
- `grad_single`, `grad_distributed`: the estimator alone at a fixed θ (a fresh batch per
  step), summed in one `tf.while_loop` inside `tf.function`.

Larger batches get proportionally fewer steps per timed call.

Both logical devices share the machine's cores, so the replicas can only overlap through
TensorFlow's inter-op thread pool. `speedup_*` are medians of per-round ratios
(distributed / single steps per second).

```bash
python benchmarks/bench_distributed.py            # full run
python benchmarks/bench_distributed.py --quick    # smoke test (N = 20,000)
```
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from typing import Any  # noqa: E402

import tensorflow as tf  # noqa: E402

# Logical devices must exist before any op runs (TF initialises its devices once).
_CPUS = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _CPUS[0], [tf.config.LogicalDeviceConfiguration()] * 2
)

import numpy as np  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import dump_json, environment, load_average, log, make_data, median, timed_call  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.data.in_memory import SCHEMES  # noqa: E402
from tfp_sgmcmc.estimators.distributed import DistributedMinibatchEstimator  # noqa: E402

warnings.filterwarnings("ignore", message=".*not calibrated.*")




def log_likelihood(theta: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
    x, y = batch
    logits = tf.einsum("nd,...d->...n", x, theta)
    return -tf.nn.sigmoid_cross_entropy_with_logits(tf.broadcast_to(y, tf.shape(logits)), logits)


def log_prior(theta: tf.Tensor) -> tf.Tensor:
    return -0.5 * tf.reduce_sum(tf.square(theta), -1) / 10.0


def make_chain(kernel: tfp.mcmc.TransitionKernel, num_results: int, jit: bool):
    @tf.function(jit_compile=jit)
    def run(init: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        return tfp.mcmc.sample_chain(num_results, init, kernel=kernel, trace_fn=None, seed=seed)[-1]

    return run


def make_grad_loop(estimator: sg.estimators.GradientEstimator, num_steps: int):
    """The estimator's gradient at a fixed θ for ``num_steps`` seeds in one graph loop."""

    @tf.function
    def run(theta: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        state = estimator.bootstrap(theta)

        def body(i, acc):
            s = tf.random.experimental.stateless_fold_in(seed, i)
            est, _ = estimator(theta, state, s)
            return i + 1, acc + est.grads_target_log_prob[0]

        return tf.while_loop(lambda i, a: i < num_steps, body, (0, tf.zeros_like(theta)))[1]

    return run


def run_batch(
    args: argparse.Namespace, x: np.ndarray, y: np.ndarray, batch_size: int, steps: int,
    strategy: tf.distribute.Strategy,
) -> dict[str, Any]:
    base = sg.MinibatchEstimator(
        log_likelihood, sg.InMemoryData((x, y), scheme=args.scheme), batch_size,
        log_prior_fn=log_prior,
    )
    dist = DistributedMinibatchEstimator(base, strategy)
    step = 1e-6
    fns = {
        "single_graph": make_chain(sg.SGLD(base, step), steps, False),
        "distributed_graph": make_chain(sg.SGLD(dist, step), steps, False),
        "single_xla": make_chain(sg.SGLD(base, step), steps, True),
        "distributed_xla": make_chain(sg.SGLD(dist, step), steps, True),
        "grad_single": make_grad_loop(base, steps),
        "grad_distributed": make_grad_loop(dist, steps),
    }
    init = tf.zeros([x.shape[1]], tf.float32)
    seed = tf.constant([1, 2], tf.int32)
    compile_s = {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        timed_call(fn, init, seed)
        compile_s[name] = time.perf_counter() - t0
    times: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(args.repeats):
        for name, fn in fns.items():  # round-robin: a load change hits every config alike
            times[name].append(timed_call(fn, init, seed)[0])
        log(f"  batch {batch_size}: round {r + 1}/{args.repeats}")
    sps = {k: steps / median(v) for k, v in times.items()}
    ratio = lambda a, b: median([tb / ta for ta, tb in zip(times[a], times[b])])  # noqa: E731
    return {
        "batch_size": batch_size,
        "steps_per_call": steps,
        "steps_per_s": {k: round(v, 1) for k, v in sps.items()},
        "speedup_graph": round(ratio("distributed_graph", "single_graph"), 3),
        "speedup_xla": round(ratio("distributed_xla", "single_xla"), 3),
        "speedup_gradient": round(ratio("grad_distributed", "grad_single"), 3),
        "compile_s": {k: round(v, 2) for k, v in compile_s.items()},
        "load_average": load_average(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke test: N = 20,000, few steps")
    p.add_argument("--num-examples", type=int, default=None, help="N (default 1,000,000)")
    p.add_argument("--dim", type=int, default=10)
    p.add_argument("--batch-fractions", type=float, nargs="+", default=[0.01, 0.1])
    p.add_argument("--scheme", default="epoch", choices=list(SCHEMES))
    p.add_argument(
        "--steps", type=int, default=None,
        help="steps per timed call at a 1%% batch (scaled down for larger batches)",
    )
    p.add_argument("--repeats", type=int, default=None, help="timed calls per config (>= 3)")
    p.add_argument("--output", default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    n_ex = args.num_examples or (20_000 if args.quick else 1_000_000)
    args.steps = args.steps or (50 if args.quick else 500)
    args.repeats = max(3, args.repeats or 3)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x, y = make_data(n_ex, args.dim)
    report: dict[str, Any] = {
        "benchmark": "bench_distributed",
        "command": "python benchmarks/bench_distributed.py" + (" --quick" if args.quick else ""),
        "environment": environment(),
        "logical_devices": [d.name for d in tf.config.list_logical_devices("CPU")],
        "replicas": strategy.num_replicas_in_sync,
        "num_examples": n_ex,
        "dim": args.dim,
        "scheme": args.scheme,
        "repeats": args.repeats,
        "load_average_start": load_average(),
        "results": [],
    }
    for frac in args.batch_fractions:
        n = max(2, int(round(frac * n_ex)) // 2 * 2)  # divisible by the 2 replicas
        # Larger batches get fewer steps per call (about the same rows touched per call).
        steps = max(20, round(args.steps * min(1.0, 0.01 / frac)))
        log(f"batch {n} ({frac:.1%}), {steps} steps per call")
        report["results"].append(run_batch(args, x, y, n, steps, strategy))
    report["load_average_end"] = load_average()
    dump_json(report, args.output)
    return report


if __name__ == "__main__":
    main()
