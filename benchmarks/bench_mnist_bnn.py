"""SGLD steps per second on the MAMBA paper's 784-100-10 BNN (softmax hidden layer).

The peers' MLP workload, reproduced exactly: N = 60,000 examples with
``X ~ U(0, 1)^784`` and labels from a random linear teacher (the peers'
``mlp_data(seed=1)``), batch 600, SGLD step 1e-6, N(0, 1) prior on all 79,510
weights, float32, initial weights ``N(0, 10⁻⁴)``, 1,000 steps per call with
**every** state stored (as SGMCMCJax's sampler and the peers' BlackJAX
loop do). Configurations:

* ``plain_tf``: :func:`tfp_sgmcmc.models.mnist_bnn.log_likelihood` (matmuls)
  through :class:`tfp_sgmcmc.SGLD` and ``tfp.mcmc.sample_chain`` in one
  ``tf.function(jit_compile=True)``, for each minibatch scheme;
* ``keras``: the same network as a Keras 3 ``Sequential`` through
  :class:`tfp_sgmcmc.keras.KerasPosterior` (``stateless_call``), same loop.

First call = trace + compile + run; then ``--repeats`` timed calls with fresh
seeds; the figure is the median. Prints one JSON document (progress on stderr).

Usage::

    python benchmarks/bench_mnist_bnn.py                 # ~3 min on 2 idle cores
    python benchmarks/bench_mnist_bnn.py --quick         # N = 6,000, batch 60, 20 steps
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import dump_json, environment, load_average, log, median, timed_call  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.models import mnist_bnn as mb  # noqa: E402


def peers_mlp_data(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The peers' synthetic MLP data (same generator calls, labels as int32)."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, 784), dtype=np.float32)
    w = rng.standard_normal((784, 10)).astype(np.float32) / np.sqrt(784)
    labels = np.argmax(x @ w + 0.5 * rng.standard_normal((n, 10)), axis=1)
    return x, labels.astype(np.int32)


def make_run(kernel: tfp.mcmc.TransitionKernel, num_steps: int):
    @tf.function(jit_compile=True)
    def run(init, seed):
        return tfp.mcmc.sample_chain(num_steps, init, kernel=kernel, trace_fn=None, seed=seed)

    return run


def time_config(name: str, estimator, init, num_steps: int, repeats: int) -> dict:
    kernel = sg.SGLD(estimator, step_size=1e-6)
    run = make_run(kernel, num_steps)
    first, out = timed_call(run, init, tf.constant([0, 0], tf.int32))
    times, cpu = [], []
    for r in range(repeats):
        c0 = time.process_time()
        t, out = timed_call(run, init, tf.constant([r + 1, 7], tf.int32))
        cpu.append(time.process_time() - c0)
        times.append(t)
    med = median(times)
    finite = all(bool(np.all(np.isfinite(o))) for o in out)
    rec = {
        "config": name,
        "steps_per_s": num_steps / med,
        "s_per_call_median": med,
        "s_min": min(times),
        "s_max": max(times),
        "repeats": repeats,
        "first_call_s": first,
        "compile_s_est": first - med,
        "finite": finite,
        "stored_floats_per_call": int(sum(np.prod(o.shape) for o in out)),
    }
    log(f"[ours {name}] {rec['steps_per_s']:.1f} steps/s (compile ~{rec['compile_s_est']:.1f} s)")
    return rec


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--configs",
        default="plain_tf:random_window,plain_tf:with_replacement,"
        "plain_tf:epoch,keras:random_window",
    )
    ap.add_argument("--output", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    n, batch, steps = (6_000, 60, 20) if args.quick else (60_000, 600, 1_000)
    x, y = peers_mlp_data(n)
    init = mb.init_state(seed=3, scale=1e-2)
    report = {
        "workload": {
            "N": n,
            "batch": batch,
            "steps_per_call": steps,
            "sampler": "SGLD",
            "step_size": 1e-6,
            "n_params": 79_510,
            "store": "every state",
        },
        "environment": environment(),
        "loadavg_start": load_average(),
        "runs": [],
    }
    prob = mb.MnistBNN(x, y, x[:10], y[:10], source="peers_mlp_data")
    for cfg in args.configs.split(","):
        impl, scheme = cfg.split(":")
        if impl == "plain_tf":
            est = prob.estimator(batch, scheme=scheme)
            state = init
        else:
            post = mb.keras_posterior(prob, scheme=scheme)
            est = post.estimator(batch)
            state = [tf.constant(np.asarray(p)) for p in init]
        report["runs"].append(time_config(cfg, est, state, steps, args.repeats))
    report["loadavg_end"] = load_average()
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    dump_json(report, args.output)
    return report


if __name__ == "__main__":
    main()
