"""SGLD fed from tf.data against SGLD on in-memory tensors, in one run.

Workload: the Bayesian logistic regression of ``bench_samplers.py`` (N = 1,000,000
examples, d = 10, prior N(0, 10 I), float32, one chain, CPU) at 1% (10,000) and
0.1% (1,000) minibatches. Per batch size it times

* ``in_memory``: SGLD on an :class:`tfp_sgmcmc.InMemoryData` (default ``"epoch"``
  scheme, and ``"random_window"``, the fastest), ``K`` steps of
  ``tfp.experimental.mcmc.sample_fold`` per ``tf.function(jit_compile=True)`` call;
* ``tf_data_chunked``: the same SGLD on a :class:`tfp_sgmcmc.DatasetData` fed by a
  :class:`tfp_sgmcmc.data.stream.StreamFeeder`: the same ``K``-step program, XLA
  compiled, reading ``K`` batches pulled (and prefetched) from the pipeline. The
  feeder starts the stream of stacked blocks before the bootstrap reads the first
  batch, as ``sg.sample`` does, so every chunk starts one batch into a block and
  reads across two blocks;
* ``tf_data_chunked_read_first``: the same, with the bootstrap reading the source
  before the feeder exists (its blocks then come from a compiled loop of single
  reads);
* ``tf_data_graph``: the step-by-step path (the iterator read inside a
  ``tf.function`` without ``jit_compile``);
* ``pipeline_alone``: batches/s the feeder's reader gets from the pipeline with
  no sampler running (the ceiling of the chunked path).

The pipeline is the fast one ``docs/estimators.md`` recommends: the rows batched
once, cached, shuffled *by batch* with a seed, repeated, prefetched. With
``--per-example-shuffle`` the slow alternative (a per-example shuffle buffer of
100,000 rows, then batching) is timed too, for the docs' warning.

Configurations are compiled by a warm-up call, then timed ``--repeats`` rounds in
round-robin order (so load drift on the shared machine hits all alike), each round
``CALLS_PER_ROUND`` calls back to back per configuration (so a fed program's reader
gets no idle time between calls that a sampling run would not give it); speeds are
medians, and each ratio is the median of the per-round ratios. One JSON document
on stdout (progress on stderr), with the load average before and after.

With ``--mamba`` it times a MAMBA arm instead (what the tuner, grid search and
the heuristic baseline run): the same SGLD arm on one
:class:`tfp_sgmcmc.tuning.runner.ArmRunner` per data source, each ``run`` a
wall-clock round of ``--round-seconds`` (bootstrap, budget-sized compiled calls
and their synchronisation, all counted as sampling time, as in the tuner). The
configurations are ``in_memory`` (the default ``"epoch"`` scheme) and
``in_memory_random_window`` (the fastest scheme),
``tf_data_chunked`` (``jit_compile=True``: XLA calls fed from prefetched blocks)
and ``tf_data_graph`` (``jit_compile=False``: the iterator read step by step);
steps/s is an arm's steps over its sampling seconds in a round.

Usage::

    python benchmarks/bench_tf_data.py                 # full run (~5 min on 2 cores)
    python benchmarks/bench_tf_data.py --quick         # smoke test: N = 20,000
    python benchmarks/bench_tf_data.py --pipelines-only  # the two pipelines alone
    python benchmarks/bench_tf_data.py --mamba         # a MAMBA arm (ArmRunner rounds)
    python benchmarks/bench_tf_data.py --mamba --tuner-seconds 20  # and a whole MAMBA run
    python benchmarks/bench_tf_data.py --output benchmarks/results/bench_tf_data.json
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import dump_json, environment, load_average, log, make_data, median, timed_call  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import tuning as tu  # noqa: E402
from tfp_sgmcmc.data.stream import StreamFeeder, stream_feeder  # noqa: E402
from tfp_sgmcmc.tuning.metrics import FullDataScorer  # noqa: E402
from tfp_sgmcmc.tuning.runner import ArmRunner  # noqa: E402

PRIOR_VARIANCE = 10.0
STEP_SIZE = 1e-6
#: Calls timed back to back per configuration and round (a sampling run's pattern).
CALLS_PER_ROUND = 8


def log_likelihood(theta: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
    x, y = batch
    return -tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=tf.linalg.matvec(x, theta))


def log_prior(theta: tf.Tensor) -> tf.Tensor:
    return -0.5 * tf.reduce_sum(tf.square(theta), axis=-1) / PRIOR_VARIANCE


def fast_pipeline(x: np.ndarray, y: np.ndarray, n: int, seed: int = 0) -> tf.data.Dataset:
    """Rows batched once, cached, shuffled by batch (seeded), repeated, prefetched."""
    num_batches = x.shape[0] // n
    return (
        tf.data.Dataset.from_tensor_slices((x, y))
        .batch(n, drop_remainder=True)
        .cache()
        .shuffle(num_batches, seed=seed)
        .repeat()
        .prefetch(tf.data.AUTOTUNE)
    )


def per_example_pipeline(x: np.ndarray, y: np.ndarray, n: int, seed: int = 0) -> tf.data.Dataset:
    """The slow pattern: a per-example shuffle of a large buffer, then batching."""
    return (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(100_000, seed=seed)
        .repeat()
        .batch(n, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )


def fold_fn(kernel: Any, steps: int) -> Callable[..., Any]:
    def chunk(state: tf.Tensor, results: Any, seed: tf.Tensor) -> Any:
        _, state, results = tfp.experimental.mcmc.sample_fold(
            steps, state, results, kernel, seed=seed
        )
        return state, results

    return chunk


class Config:
    """A stateful timed configuration: each call advances its chain by ``steps`` steps."""

    def __init__(self, fn: Callable[..., Any], kernel: Any, dim: int, steps: int) -> None:
        self.fn, self.steps = fn, steps
        self.state = tf.zeros([dim], tf.float32)
        self.results = kernel.bootstrap_results(self.state)
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        seconds, out = timed_call(self.fn, self.state, self.results, tf.constant([7, self.calls]))
        self.state, self.results = tf.nest.map_structure(tf.constant, out)
        return seconds


def build(
    x: np.ndarray, y: np.ndarray, n: int, steps: int, graph_steps: int, per_example: bool
) -> dict[str, Any]:
    big_n, dim = x.shape
    configs: dict[str, Any] = {}
    mem = sg.InMemoryData((x, y))
    for scheme in ("epoch", "random_window"):
        est = sg.MinibatchEstimator(log_likelihood, mem.with_scheme(scheme), n, log_prior)
        kernel = sg.SGLD(est, STEP_SIZE)
        fn = tf.function(fold_fn(kernel, steps), jit_compile=True, autograph=False)
        configs[f"in_memory_{scheme}"] = Config(fn, kernel, dim, steps)

    def stream(pipeline: tf.data.Dataset, name: str, read_first: bool = False) -> None:
        est = sg.MinibatchEstimator(log_likelihood, sg.DatasetData(pipeline, big_n), n, log_prior)
        kernel = sg.SGLD(est, STEP_SIZE)
        if read_first:
            # The bootstrap reads the element iterator before the feeder exists: the
            # blocks then come from a compiled loop of single reads.
            cfg = Config(None, kernel, dim, steps)
            with warnings.catch_warnings():  # the library's warning about this very order
                warnings.simplefilter("ignore", RuntimeWarning)
                cfg.fn = StreamFeeder(kernel, cfg.state, cfg.results).compile(
                    fold_fn(kernel, steps), steps
                )
        else:
            # As `sg.sample` does: the stream of stacked blocks starts before the
            # bootstrap reads its first batch (the feeder traces a step on
            # placeholder batches, reading none).
            feeder = stream_feeder(kernel, tf.zeros([dim], tf.float32))
            fn = feeder.compile(fold_fn(kernel, steps), steps)
            cfg = Config(fn, kernel, dim, steps)
        configs[name] = cfg

    stream(fast_pipeline(x, y, n), "tf_data_chunked")
    stream(fast_pipeline(x, y, n), "tf_data_chunked_read_first", read_first=True)
    if per_example:
        stream(per_example_pipeline(x, y, n), "tf_data_chunked_per_example_shuffle")
    est = sg.MinibatchEstimator(
        log_likelihood, sg.DatasetData(fast_pipeline(x, y, n), big_n), n, log_prior
    )
    kernel = sg.SGLD(est, STEP_SIZE)
    graph = tf.function(fold_fn(kernel, graph_steps), autograph=False)
    configs["tf_data_graph"] = Config(graph, kernel, dim, graph_steps)
    return configs


def pipeline_rate(x: np.ndarray, y: np.ndarray, n: int, block: int, blocks: int) -> float:
    """Batches/s of the fast pipeline read in stacked blocks, with no sampler running."""
    data = sg.DatasetData(fast_pipeline(x, y, n), x.shape[0])
    data.start_chunks(block)
    data.block_reader.take(block)[0].numpy()  # warm-up: trace, fill the cache
    t0 = time.perf_counter()
    for _ in range(blocks):
        data.block_reader.take(block)[0].numpy()
    return blocks * block / (time.perf_counter() - t0)


def pipeline_rates(x: np.ndarray, y: np.ndarray, n: int) -> dict[str, float]:
    """Batches/s of the two pipelines alone (Python ``next``), after one epoch of warm-up."""
    out = {}
    for name, make, reads in (
        ("batch_shuffle_cached", fast_pipeline, 300),
        ("per_example_shuffle", per_example_pipeline, 30),
    ):
        it = iter(make(x, y, n))
        for _ in range(x.shape[0] // n):  # fill the cache / the shuffle buffer
            next(it)
        t0 = time.perf_counter()
        for _ in range(reads):
            next(it)
        out[name] = round(reads / (time.perf_counter() - t0), 1)
        log(f"  pipeline {name}, batch {n}: {out[name]:,.1f} batches/s")
    return out


def run_group(
    x: np.ndarray, y: np.ndarray, frac: float, steps: int, repeats: int, per_example: bool
) -> dict[str, Any]:
    n = max(1, int(round(frac * x.shape[0])))
    graph_steps = max(1, steps // 4)
    log(f"batch {n}: building and compiling")
    configs = build(x, y, n, steps, graph_steps, per_example)
    compile_s = {}
    for name, cfg in configs.items():
        # Warm-up: compile, and let the cached pipelines see one epoch.
        t0 = time.perf_counter()
        cfg()
        compile_s[name] = round(time.perf_counter() - t0, 3)
        epoch_calls = int(np.ceil((x.shape[0] // n) / cfg.steps))
        for _ in range(min(epoch_calls, 20)):
            cfg()
    rates: dict[str, list[float]] = {k: [] for k in configs}
    for r in range(repeats):
        for name, cfg in configs.items():
            # Back-to-back calls, as a sampling run makes them: a fed program's reader
            # must prefetch each block while the previous call runs, not between rounds.
            seconds = sum(cfg() for _ in range(CALLS_PER_ROUND))
            rates[name].append(CALLS_PER_ROUND * cfg.steps / seconds)
        log(
            f"  round {r + 1}/{repeats}: "
            + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items())
        )
    ratio = {
        f"tf_data_chunked/{ref}": median(
            [a / b for a, b in zip(rates["tf_data_chunked"], rates[ref])]
        )
        for ref in ("in_memory_epoch", "in_memory_random_window")
    }
    ratio["tf_data_chunked_read_first/in_memory_random_window"] = median(
        [
            a / b
            for a, b in zip(rates["tf_data_chunked_read_first"], rates["in_memory_random_window"])
        ]
    )
    ratio["tf_data_graph/in_memory_epoch"] = median(
        [a / b for a, b in zip(rates["tf_data_graph"], rates["in_memory_epoch"])]
    )
    return {
        "batch_size": n,
        "steps_per_chunk": steps,
        "steps_per_second": {k: round(median(v), 1) for k, v in rates.items()},
        "ratio": {k: round(v, 3) for k, v in ratio.items()},
        "pipeline_alone_batches_per_second": round(pipeline_rate(x, y, n, steps, 10), 1),
        "compile_s": compile_s,
        "rounds": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
    }


def run_mamba_group(
    x: np.ndarray, y: np.ndarray, frac: float, round_seconds: float, repeats: int
) -> dict[str, Any]:
    """Steps/s of one SGLD arm's wall-clock rounds on in-memory data and on tf.data."""
    big_n, dim = x.shape
    n = max(1, int(round(frac * big_n)))
    arm = [{"step_size": STEP_SIZE}]
    start = tf.zeros([dim], tf.float32)
    mem = sg.InMemoryData((x, y))
    sources = {
        "in_memory": (mem, True),
        "in_memory_random_window": (mem.with_scheme("random_window"), True),
        "tf_data_chunked": (sg.DatasetData(fast_pipeline(x, y, n), big_n), True),
        "tf_data_graph": (sg.DatasetData(fast_pipeline(x, y, n, seed=1), big_n), False),
    }
    runners: dict[str, ArmRunner] = {}
    compile_s: dict[str, float] = {}
    budget = tu.seconds(round_seconds)
    log(f"MAMBA arm, batch {n}: compiling")
    for name, (data, jit) in sources.items():
        est = sg.MinibatchEstimator(log_likelihood, data, n, log_prior)
        runners[name] = ArmRunner(
            lambda step_size, est=est: sg.SGLD(est, step_size), arm, start, seed=0,
            jit_compile=jit,
        )
        out = runners[name].run(0, round_seconds, budget)  # compiles; warms the cache
        compile_s[name] = round(out.compile_seconds, 3)
        # One more epoch through the pipelines' caches before timing.
        runners[name].run(0, round_seconds, budget)
    rates: dict[str, list[float]] = {k: [] for k in runners}
    seconds: dict[str, list[float]] = {k: [] for k in runners}
    steps: dict[str, list[int]] = {k: [] for k in runners}
    for r in range(repeats):
        for name, runner in runners.items():
            out = runner.run(0, round_seconds, budget)
            rates[name].append(out.steps / out.sampling_seconds)
            seconds[name].append(round(out.sampling_seconds, 3))
            steps[name].append(out.steps)
        log(
            f"  round {r + 1}/{repeats}: "
            + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items())
        )
    fed = runners["tf_data_chunked"].arm_states[0]

    def ratio_of(num: str, den: str) -> float | None:
        pairs = [(a, b) for a, b in zip(rates[num], rates[den]) if b > 0]
        # None: the reference ran no step in any round (see its steps per round).
        return round(median([a / b for a, b in pairs]), 3) if pairs else None

    ratio = {
        f"{num}/{den}": ratio_of(num, den)
        for num in ("tf_data_chunked", "tf_data_graph")
        for den in ("in_memory", "in_memory_random_window")
    }
    return {
        "batch_size": n,
        "round_seconds": round_seconds,
        "steps_per_second": {k: round(median(v), 1) for k, v in rates.items()},
        "ratio": ratio,
        "sampling_seconds_per_round": seconds,
        "steps_per_round": steps,
        "compile_s": compile_s,
        "total_steps": {k: rn.arm_states[0].total_steps for k, rn in runners.items()},
        "fed_steps_per_call": max(
            prog.feed_steps for prog in runners["tf_data_chunked"]._programs.values()
        ),
        "fed_arm_diverged": fed.diverged,
        "rounds": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
    }


def broadcast_log_likelihood(theta: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
    """``log_likelihood`` broadcasting over leading sample dimensions (the KSD scores blocks)."""
    x, y = batch
    logits = tf.reduce_sum(x * theta[..., tf.newaxis, :], axis=-1)
    labels = tf.broadcast_to(y, tf.shape(logits))
    return -tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)


def score_block_seconds(
    x: np.ndarray, y: np.ndarray, n: int, full_cache_bytes: int | None, blocks: int = 3
) -> dict[str, Any]:
    """Seconds of one 64-sample block of full-data scores (the KSD's unit of work).

    ``full_cache_bytes=-1``: the reference, an ``InMemoryData`` of the same rows.
    """
    big_n, dim = x.shape
    if full_cache_bytes == -1:
        data = sg.InMemoryData((x, y))
    else:
        full = tf.data.Dataset.from_tensor_slices((x, y))
        data = sg.DatasetData(
            fast_pipeline(x, y, n), big_n, full_dataset=full, full_cache_bytes=full_cache_bytes
        )
    scorer = FullDataScorer(sg.MinibatchEstimator(broadcast_log_likelihood, data, n, log_prior))
    theta = np.random.default_rng(0).normal(0.0, 0.1, (64, dim)).astype(np.float32)
    first, _ = timed_call(lambda: scorer([theta])[0])  # traces, compiles, keeps the rows
    times = [timed_call(lambda: scorer([theta])[0])[0] for _ in range(blocks)]
    return {
        "full_in_memory": getattr(data, "full_in_memory", True),
        "xla": scorer.jit_compile,
        "first_call_seconds": round(first, 3),
        "seconds_per_block": round(median(times), 3),
    }


def run_mamba_tuner(
    x: np.ndarray, y: np.ndarray, frac: float, budget_seconds: float,
    full_cache_bytes: int | None = None,
) -> dict:
    """One MAMBA-KSD run on a DatasetData: budget honesty, compile and metric time, the pick."""
    big_n, dim = x.shape
    n = max(1, int(round(frac * big_n)))
    full = tf.data.Dataset.from_tensor_slices((x, y))
    data = sg.DatasetData(
        fast_pipeline(x, y, n), big_n, full_dataset=full, full_cache_bytes=full_cache_bytes
    )
    est = sg.MinibatchEstimator(broadcast_log_likelihood, data, n, log_prior)
    arms = tu.grid(step_size=tu.log10_grid(-4, -7))
    log(f"MAMBA run on tf.data: batch {n}, {len(arms)} arms, T = {budget_seconds:g} s")
    t0 = time.perf_counter()
    res = tu.MAMBA(
        arms,
        tf.zeros([dim], tf.float32),
        tu.KernelSpec(sg.SGLD, est),
        budget=tu.seconds(budget_seconds),
        eta=3,
        progress=False,
    ).run()
    return {
        "batch_size": n,
        "num_arms": len(arms),
        "budget_seconds": budget_seconds,
        "fed_xla": data.chunked,
        "full_data_in_memory": data.full_in_memory,
        "total_sampling_seconds": round(res.total_sampling_seconds, 3),
        "budget_honesty": round(res.budget_honesty(), 4),
        "total_compile_seconds": round(res.total_compile_seconds, 3),
        "total_metric_seconds": round(sum(r.metric_seconds for r in res.records), 3),
        "wall_seconds": round(time.perf_counter() - t0, 3),
        "best_arm": res.best_arm,
        "records": [
            {"round": r.round, "arm": r.arm_index, "metric": r.metric, "steps": r.steps,
             "sampling_seconds": round(r.sampling_seconds, 3)}
            for r in res.records
        ],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke test: N = 20,000, 3 rounds")
    p.add_argument("--num-examples", type=int, default=None, help="N (default 1,000,000)")
    p.add_argument("--dim", type=int, default=10)
    p.add_argument("--repeats", type=int, default=None, help="timed rounds (default 9)")
    p.add_argument(
        "--per-example-shuffle",
        action="store_true",
        help="also time the slow per-example-shuffle pipeline",
    )
    p.add_argument(
        "--pipelines-only",
        action="store_true",
        help="only time the two pipelines alone (no sampler)",
    )
    p.add_argument(
        "--mamba",
        action="store_true",
        help="time a MAMBA arm (ArmRunner wall-clock rounds) on tf.data against in memory",
    )
    p.add_argument(
        "--round-seconds", type=float, default=2.0, help="--mamba: seconds per arm round"
    )
    p.add_argument(
        "--tuner-seconds",
        type=float,
        default=0.0,
        help="--mamba: first run MAMBA-KSD (7 step sizes, 1%% batch) on tf.data with this "
        "budget T and report its budget honesty",
    )
    p.add_argument(
        "--full-cache-bytes",
        type=int,
        default=None,
        help="--tuner-seconds: DatasetData(full_cache_bytes=...) of the MAMBA run (default: "
        "the library's, which keeps the default workload's 44 MB of full data in memory; 0 "
        "streams them)",
    )
    p.add_argument("--output", default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    big_n = args.num_examples or (20_000 if args.quick else 1_000_000)
    repeats = args.repeats or (3 if args.quick else 9)
    x, y = make_data(big_n, args.dim)
    report: dict[str, Any] = {
        "benchmark": "bench_tf_data",
        "command": "python benchmarks/bench_tf_data.py"
        + (" --quick" if args.quick else "")
        + (" --per-example-shuffle" if args.per_example_shuffle else ""),
        "workload": {
            "num_examples": big_n,
            "dim": args.dim,
            "kernel": "SGLD",
            "step_size": STEP_SIZE,
            "repeats": repeats,
        },
        "environment": environment(),
        "load_average_before": load_average(),
        "groups": [],
    }
    if args.mamba:
        report["command"] = "python benchmarks/bench_tf_data.py --mamba" + (
            " --quick" if args.quick else ""
        )
        report["workload"]["round_seconds"] = args.round_seconds
        if args.tuner_seconds:
            report["command"] += f" --tuner-seconds {args.tuner_seconds:g}"
            keep = args.full_cache_bytes
            if keep is not None:
                report["command"] += f" --full-cache-bytes {keep}"
            n = max(1, int(round(0.01 * big_n)))
            log("full-data scores of a 64-sample block: in memory, tf.data kept, streamed")
            report["full_data_score_block"] = {
                "in_memory": score_block_seconds(x, y, n, -1),
                "kept": score_block_seconds(x, y, n, None),
                "streamed": score_block_seconds(x, y, n, 0, blocks=1),
            }
            report["mamba_run"] = run_mamba_tuner(x, y, 0.01, args.tuner_seconds, keep)
        for frac in (0.01, 0.001):
            report["groups"].append(
                run_mamba_group(x, y, frac, args.round_seconds, repeats)
            )
        report["load_average_after"] = load_average()
        dump_json(report, args.output)
        return report
    if args.pipelines_only:
        report["command"] = "python benchmarks/bench_tf_data.py --pipelines-only"
        report["pipelines_batches_per_second"] = {
            str(n): pipeline_rates(x, y, n) for n in (big_n // 100, big_n // 1000)
        }
        report["load_average_after"] = load_average()
        dump_json(report, args.output)
        return report
    # Steps per chunk: ~40 MB of stacked float32 batches at either batch size.
    for frac, steps in ((0.01, 100), (0.001, 1000)):
        report["groups"].append(run_group(x, y, frac, steps, repeats, args.per_example_shuffle))
    report["load_average_after"] = load_average()
    dump_json(report, args.output)
    return report


if __name__ == "__main__":
    main()
