"""Cost of independent chains: one minibatch per chain against one shared batch.

Bayesian logistic regression (N = 1,000,000, d = 10, float32), SGLD through
``tfp.mcmc.sample_chain`` inside ``tf.function(jit_compile=True)``, ``C`` chains
in one program, batches of 1% and 0.1%, schemes ``random_window`` and
``epoch``. For every (C, batch, scheme) the shared-batch estimator
(``independent_chains=False``) and the per-chain one (``True``) are timed
round-robin; the figure is the median per-step time and the ratio
independent / shared (the cost of independence), plus the one-chain time for
reference (the cost of a chain run in its own program).

Run::

    python benchmarks/bench_independent_chains.py --out results.json
    python benchmarks/bench_independent_chains.py --quick
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import (  # noqa: E402
    dump_json,
    environment,
    load_average,
    log,
    make_data,
    median,
    timed_call,
)

import tfp_sgmcmc as sg  # noqa: E402


def log_likelihood(theta: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
    x, y = batch
    logits = tf.linalg.matvec(x, theta)  # [n], or [C, n] for C chains on a shared batch
    return y * logits - tf.nn.softplus(logits)


def log_prior(theta: tf.Tensor) -> tf.Tensor:
    return -0.05 * tf.reduce_sum(theta**2, axis=-1)


def make_run(estimator: sg.MinibatchEstimator, num_steps: int):
    kernel = sg.SGLD(estimator, step_size=1e-6)

    @tf.function(jit_compile=True)
    def run(init: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        return tfp.mcmc.sample_chain(
            num_steps,
            init,
            kernel=kernel,
            trace_fn=None,
            seed=seed,
            num_burnin_steps=0,
        )[-1]

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None, help="also write the JSON there")
    args = ap.parse_args()
    n_total = 20_000 if args.quick else 1_000_000
    steps = 50 if args.quick else 500
    chains_list = [4] if args.quick else [4, 16]
    fractions = [0.01] if args.quick else [0.01, 0.001]
    schemes = ["random_window"] if args.quick else ["random_window", "epoch"]
    x, y = make_data(n_total, 10)
    data = (tf.constant(x), tf.constant(y))
    out = {
        "environment": environment(),
        "load_start": load_average(),
        "steps": steps,
        "num_examples": n_total,
        "results": [],
    }
    for scheme in schemes:
        source = sg.InMemoryData(data, scheme=scheme)
        for frac in fractions:
            n = max(1, int(frac * n_total))
            shared = sg.MinibatchEstimator(log_likelihood, source, n, log_prior_fn=log_prior)
            indep = shared.with_independent_chains(True)
            one = make_run(shared, steps)
            t_one = []
            for chains in chains_list:
                init = tf.zeros([chains, 10])
                runs = {"shared": make_run(shared, steps), "independent": make_run(indep, steps)}
                seed = tf.constant([1, 2], tf.int32)
                for fn in runs.values():  # compile
                    timed_call(fn, init, seed)
                timed_call(one, tf.zeros([10]), seed)
                times: dict[str, list[float]] = {k: [] for k in runs}
                for _ in range(args.repeats):  # round-robin
                    for k, fn in runs.items():
                        times[k].append(timed_call(fn, init, seed)[0] / steps)
                    t_one.append(timed_call(one, tf.zeros([10]), seed)[0] / steps)
                ratios = [a / b for a, b in zip(times["independent"], times["shared"])]
                row = {
                    "scheme": scheme,
                    "batch_fraction": frac,
                    "batch_size": n,
                    "chains": chains,
                    "shared_us_per_step": 1e6 * median(times["shared"]),
                    "independent_us_per_step": 1e6 * median(times["independent"]),
                    "one_chain_us_per_step": 1e6 * median(t_one),
                    "independent_over_shared": median(ratios),
                    "independent_over_C_separate_chains": median(times["independent"])
                    / (chains * median(t_one)),
                    "load": load_average(),
                }
                log(str(row))
                out["results"].append(row)
    out["load_end"] = load_average()
    dump_json(out, args.out)


if __name__ == "__main__":
    main()
