"""What the loop around a kernel costs under XLA: flat loop, nested loop, TFP's drivers.

Workload: the Bayesian logistic regression of ``bench_samplers.py`` (N = 1,000,000,
d = 10, ``InMemoryData(pack_rows=True)``, default ``"epoch"`` scheme), at 1% and 0.1%
batches, one chain, float32. The same kernel (SGLD, ε = 1e-6, and default SGHMC,
L = 5, ε = 1e-7) runs the same number of steps inside one
``tf.function(jit_compile=True)`` through each loop:

* ``flat``: ``tf.while_loop`` over steps, ``kernel.one_step`` with
  ``stateless_fold_in(seed, t)`` (the reference);
* ``flat_with_results``: the flat loop, also returning the last kernel results (so
  every field of them must be computed at every step, as a reader of them would need);
* ``nested_dynamic``: the flat loop with each step inside an inner ``tf.while_loop``
  whose trip count (1) is read from a tensor, as ``tfp.mcmc.sample_chain`` does;
* ``nested_static``: the same inner loop with the constant trip count 1;
* ``tfp_sample_chain``: ``tfp.mcmc.sample_chain(trace_fn=None)``;
* ``tfp_sample_fold``: ``tfp.experimental.mcmc.sample_fold`` (what the driver's chunks
  ran before they ran the library's loop);
* ``sg_sample_chain``: ``tfp_sgmcmc.sample_chain`` with its default seed rule (the
  library's one loop, ``tfp_sgmcmc.loop.run_steps``; step ``t`` takes
  ``stateless_fold_in(seed, t)``);
* ``sg_sample_chain_tfp``: ``tfp_sgmcmc.sample_chain(seed_rule="tfp")``, the same loop
  with ``tfp.mcmc.sample_chain``'s split seeds (the flat loop ``sample_chain`` ran before
  the seed rule was shared);
* ``driver_chunk``: one sampling chunk of the driver (``sample``, ``ChunkedChain``):
  ``tfp_sgmcmc.driver.chunks.compile_chunk``, which also returns the kernel results.

Under XLA a flat loop lets the compiler drop every step's work whose result nothing
reads (with ``trace_fn=None``: the minibatch log-density and the divergence flag; for
SGHMC also the last leapfrog step's minibatch and gradient, which set only the momentum
the next sample redraws and the score in the results); ``flat_with_results`` keeps it,
as does the inner loop with a tensor trip count.

With ``--thin K`` the recorded loops keep every K-th state (``num_steps_between_results
= K - 1``; the flat reference runs the same number of steps).

With ``--compile-counts`` it also counts the distinct XLA programs (compared as HLO) that
serve calls with other seeds, first steps and, for the tuner, step sizes: the chain seed,
the step index and the tuner's float hyperparameters are runtime inputs, so each count
should be 1.

Configurations are timed round-robin (``--repeats`` rounds, after one compiling call);
speeds are medians and ratios (to ``flat``) medians of the per-round ratios, so load drift
hits every loop alike. One JSON document on stdout, progress on stderr.

Usage::

    python benchmarks/bench_loops.py                       # ~4 min on 2 idle cores
    python benchmarks/bench_loops.py --thin 1 5 --output benchmarks/results/bench_loops.json
    python benchmarks/bench_loops.py --loops flat sg_sample_chain sg_sample_chain_tfp \
        driver_chunk --compile-counts
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import dump_json, environment, load_average, log, make_data, median, timed_call  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import tuning as tu  # noqa: E402
from tfp_sgmcmc.driver import chunks  # noqa: E402
from tfp_sgmcmc.tuning.runner import ArmRunner  # noqa: E402

LOOPS = (
    "flat", "flat_with_results", "nested_dynamic", "nested_static", "tfp_sample_chain",
    "tfp_sample_fold", "sg_sample_chain", "sg_sample_chain_tfp", "driver_chunk",
)


def log_likelihood(theta: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
    x, y = batch
    return -tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=tf.linalg.matvec(x, theta))


def log_prior(theta: tf.Tensor) -> tf.Tensor:
    return -0.05 * tf.reduce_sum(tf.square(theta), axis=-1)


def make_loop(
    loop: str, kernel: tfp.mcmc.TransitionKernel, num_results: int, thin: int
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """One compiled program: ``num_results · thin`` steps of ``kernel`` through ``loop``."""
    steps = num_results * thin

    if loop == "tfp_sample_chain":
        def run(init, seed):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "not calibrated"
                return tfp.mcmc.sample_chain(
                    num_results, init, kernel=kernel, trace_fn=None, seed=seed,
                    num_steps_between_results=thin - 1,
                )
    elif loop == "sg_sample_chain":
        def run(init, seed):
            return sg.sample_chain(
                num_results, init, kernel=kernel, seed=seed, num_steps_between_results=thin - 1
            )
    elif loop == "sg_sample_chain_tfp":
        def run(init, seed):
            return sg.sample_chain(
                num_results, init, kernel=kernel, seed=seed, num_steps_between_results=thin - 1,
                seed_rule="tfp",
            )
    elif loop == "driver_chunk":
        program = chunks.compile_chunk(kernel, "sample", num_results, thin=thin)

        def run(init, seed):  # the chunk program, inlined in the timed one
            return program.fn(init, kernel.bootstrap_results(init), {}, seed, tf.constant(0))[3]
    elif loop == "tfp_sample_fold":
        def run(init, seed):
            tracer = tfp.experimental.mcmc.TracingReducer(
                trace_fn=lambda s, r: s, size=num_results
            )
            out, _, _ = tfp.experimental.mcmc.sample_fold(
                num_results, init, kernel=kernel, reducer=tracer, seed=seed,
                num_steps_between_results=thin - 1,
            )
            return out
    else:
        trips = tf.ones([steps], tf.int32)  # read inside the program: not a constant to XLA

        def run(init, seed):
            def one(i, state, results):
                return kernel.one_step(
                    state, results, tf.random.experimental.stateless_fold_in(seed, i)
                )

            def body(i, state, results):
                if loop in ("flat", "flat_with_results"):
                    state, results = one(i, state, results)
                else:
                    count = trips[i] if loop == "nested_dynamic" else 1
                    _, state, results = tf.while_loop(
                        lambda j, *_: j < count,
                        lambda j, s, r: (j + 1, *one(i, s, r)),
                        (tf.constant(0), state, results),
                    )
                return i + 1, state, results

            _, state, results = tf.while_loop(
                lambda i, *_: i < steps, body,
                (tf.constant(0), init, kernel.bootstrap_results(init)),
            )
            if loop == "flat_with_results":
                return state, results
            return state

    return tf.function(run, jit_compile=True, autograph=False)


def time_group(
    fns: dict[str, Callable[..., Any]], init: tf.Tensor, steps: int, repeats: int, label: str
) -> dict[str, Any]:
    for name, fn in fns.items():
        t, _ = timed_call(fn, init, tf.constant([1, 2]))
        log(f"  [{label}] {name}: first call {t:.1f} s")
    rates: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(repeats):
        for name, fn in fns.items():
            t, _ = timed_call(fn, init, tf.constant([r + 10, 3]))
            rates[name].append(steps / t)
        log(f"  [{label}] round {r + 1}/{repeats}, load {load_average()}")
    return {
        name: {
            "steps_per_s": round(median(v), 1),
            "steps_per_s_repeats": [round(x, 1) for x in v],
            "ratio_to_flat": round(median([a / b for a, b in zip(v, rates["flat"])]), 3),
        }
        for name, v in rates.items()
    }


def _programs(fn: Any, calls: list[tuple]) -> int:
    """Distinct XLA programs (as HLO) that ``fn`` compiles for ``calls``."""
    return len({fn.experimental_get_compiler_ir(*a)(stage="hlo") for a in calls})


def compile_counts(est: sg.MinibatchEstimator, init: tf.Tensor) -> dict[str, Any]:
    """Distinct compiled programs over seeds, first steps and (tuner) step sizes."""
    kernel = sg.SGLD(est, 1e-6)
    seeds = [tf.constant([s, 3], tf.int32) for s in range(4)]

    chain = tf.function(
        lambda init, seed: sg.sample_chain(50, init, kernel=kernel, seed=seed),
        jit_compile=True, autograph=False,
    )
    program = chunks.compile_chunk(kernel, "sample", 50, thin=2)
    results = kernel.bootstrap_results(init)
    starts = [tf.constant(t, tf.int32) for t in (0, 100, 1_000, 10_000)]

    runner = ArmRunner(lambda step_size: sg.SGLD(est, step_size),
                       [{"step_size": e} for e in (1e-7, 3e-7, 1e-6, 3e-6)], init,
                       thin=2, seed=1, max_steps_per_call=40)
    t0 = time.perf_counter()
    for i in range(4):
        runner.run(i, 30, tu.steps(1))
    (prog,) = runner._programs.values()
    runner_calls = [
        ([init], prog.init_fn([init], s, {"step_size": tf.constant(e)}), s, tf.constant(9),
         tf.constant(0), t, tf.constant(2), {"step_size": tf.constant(e)})
        for s, t, e in zip(seeds, starts, (1e-7, 3e-7, 1e-6, 3e-6))
    ]
    return {
        "sg_sample_chain_over_4_seeds": _programs(chain, [(init, s) for s in seeds]),
        "driver_chunk_over_4_seeds_and_first_steps": _programs(
            program.fn, [(init, results, {}, s, t) for s, t in zip(seeds, starts)]
        ),
        "tuner_over_4_step_sizes_seeds_and_first_steps": _programs(prog.chunk_fn, runner_calls),
        "tuner_structural_programs_for_4_arms": runner.num_programs,
        "tuner_4_arms_seconds_with_compile": round(time.perf_counter() - t0, 2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--num-examples", type=int, default=1_000_000)
    p.add_argument("--batch-fractions", type=float, nargs="+", default=[0.01, 0.001])
    p.add_argument("--kernels", nargs="+", default=["sgld", "sghmc_L5"],
                   choices=["sgld", "sghmc_L5"])
    p.add_argument("--thin", type=int, nargs="+", default=[1], help="keep every K-th state")
    p.add_argument("--loops", nargs="+", default=list(LOOPS), choices=LOOPS)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--seconds", type=float, default=0.5, help="target seconds per timed call")
    p.add_argument("--output", default=None, help="also write the JSON here")
    p.add_argument("--compile-counts", action="store_true",
                   help="also count the distinct compiled programs over seeds and step sizes")
    a = p.parse_args(argv)
    if any(k < 1 for k in a.thin) or a.repeats < 1 or a.num_examples < 100:
        p.error("--thin and --repeats must be >= 1 and --num-examples >= 100")
    if "flat" not in a.loops:
        a.loops = ["flat", *a.loops]  # the reference of every ratio

    env, load_start, t0 = environment(), load_average(), time.perf_counter()
    x, y = make_data(a.num_examples, 10)
    data = sg.InMemoryData((x, y), pack_rows=True)
    init = tf.zeros([10], tf.float32)
    groups = []
    for frac in a.batch_fractions:
        n = max(1, int(round(frac * a.num_examples)))
        est = sg.MinibatchEstimator(log_likelihood, data, n, log_prior)
        for kname in a.kernels:
            kernel = sg.SGLD(est, 1e-6) if kname == "sgld" else sg.SGHMC(
                est, 1e-7, num_leapfrog_steps=5
            )
            # About --seconds per call at this machine kind's SGLD speed (~2,900 steps/s at 1%).
            per_s = 2_900 * (10_000 / n) ** 0.77 / (5 if kname == "sghmc_L5" else 1)
            for thin in a.thin:
                num_results = max(20, int(a.seconds * per_s / thin))
                label = f"{kname}, n={n}, thin={thin}"
                log(f"group {label}: {num_results * thin} steps per call")
                fns = {loop: make_loop(loop, kernel, num_results, thin) for loop in a.loops}
                res = time_group(fns, init, num_results * thin, a.repeats, label)
                groups.append({"kernel": kname, "batch_size": n, "thin": thin,
                               "steps_per_call": num_results * thin, "results": res})
    counts = None
    if a.compile_counts:
        n = max(1, int(round(a.batch_fractions[-1] * a.num_examples)))
        counts = compile_counts(sg.MinibatchEstimator(log_likelihood, data, n, log_prior), init)
        log(f"compile counts: {counts}")
    report = {
        "benchmark": "bench_loops: the loop around a kernel under XLA, steps/s",
        "workload": {"num_examples": a.num_examples, "dim": 10, "scheme": "epoch",
                     "pack_rows": True, "repeats": a.repeats},
        **env,
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "groups": groups,
        "compile_counts": counts,
        "total_seconds": round(time.perf_counter() - t0, 1),
    }
    dump_json(report, a.output)
    return report


if __name__ == "__main__":
    main()
