"""The epoch permutation: Feistel (ours) vs ``tf.random.experimental.index_shuffle``.

Both map a batch's positions ``[k·n, (k+1)·n)`` to example indices of one keyed
permutation of ``[0, N)`` without materialising it. Measured under XLA (the
sampler's hot path is one ``tf.function(jit_compile=True)``):

* correctness: the map of all of ``[0, N)`` is a bijection (every index once),
  different seeds give different permutations, and the first batch's indices
  look uniform (χ² over 100 bins of ``idx·100/N`` across many seeds);
* speed: one compiled program draws ``steps`` consecutive batches (a
  ``tf.while_loop``, as in a sampling chunk), at 1% and 0.1% batches of
  ``N = 10^6``; the median over repeats, per batch. Under XLA where the op
  compiles, and in a plain graph for both (the like-for-like comparison).

Finding (TF 2.21, CPU): ``RandomIndexShuffle`` has no XLA kernel
(``No registered 'RandomIndexShuffle' OpKernel for XLA_CPU_JIT``), so it
cannot sit inside the sampler's compiled step at all; the JSON records that
(``xla_supported``) and the graph-mode timings.

Prints one JSON document (see ``docs/benchmarks.md``). Reproduce with
``nice -n 10 python benchmarks/bench_permutation.py --out results.json``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf
from _common import dump_json, environment, load_average, log, median, sync
from scipy import stats

from tfp_sgmcmc.data.permutation import feistel_permutation


def index_shuffle(pos: tf.Tensor, num_items: int, seed: tf.Tensor) -> tf.Tensor:
    # index_shuffle takes an inclusive max_index and (on CPU) int64 indices.
    return tf.random.experimental.index_shuffle(
        tf.cast(pos, tf.int64), tf.cast(seed, tf.int64), tf.constant(num_items - 1, tf.int64)
    )


METHODS = {"feistel": feistel_permutation, "index_shuffle": index_shuffle}


def _bijection(method, num_items: int, seed, jit: bool) -> dict:
    fn = tf.function(
        lambda s: method(tf.range(num_items, dtype=tf.int64), num_items, s), jit_compile=jit
    )
    idx = fn(tf.constant(seed, tf.int32)).numpy()
    other = fn(tf.constant([seed[0] + 1, seed[1]], tf.int32)).numpy()
    return {
        "bijection": bool(np.array_equal(np.sort(idx), np.arange(num_items))),
        "in_range": bool(idx.min() >= 0 and idx.max() < num_items),
        "differs_across_seeds": bool(np.mean(idx != other) > 0.99),
    }


def _uniformity(method, num_items: int, batch: int, num_seeds: int, jit: bool) -> float:
    fn = tf.function(
        lambda s: method(tf.range(batch, dtype=tf.int64), num_items, s), jit_compile=jit
    )
    counts = np.zeros(100)
    for i in range(num_seeds):
        idx = fn(tf.constant([i, 7], tf.int32)).numpy()
        counts += np.bincount(idx * 100 // num_items, minlength=100)
    return float(stats.chisquare(counts).pvalue)


def _xla_supported(method) -> bool | str:
    fn = tf.function(lambda s: method(tf.range(8, dtype=tf.int64), 100, s), jit_compile=True)
    try:
        fn(tf.constant([1, 2], tf.int32))
        return True
    except tf.errors.InvalidArgumentError as err:
        return str(err).splitlines()[0][:200]


def _speed(method, num_items: int, batch: int, steps: int, repeats: int, jit: bool) -> float:
    @tf.function(jit_compile=jit)
    def run(seed):
        def body(k, acc):
            pos = tf.cast(k, tf.int64) * batch + tf.range(batch, dtype=tf.int64)
            idx = method(tf.math.floormod(pos, num_items), num_items, seed)
            return k + 1, acc + tf.reduce_sum(idx)

        return tf.while_loop(lambda k, _: k < steps, body, (0, tf.constant(0, tf.int64)))[1]

    sync(run(tf.constant([1, 2], tf.int32)))  # compile
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        sync(run(tf.constant([r, 3], tf.int32)))
        times.append((time.perf_counter() - t0) / steps)
    return median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-items", type=int, default=10**6)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    big_n = a.num_items
    out: dict = {"num_items": big_n, "environment": environment(), "load_before": load_average()}
    for name, method in METHODS.items():
        xla = _xla_supported(method)
        res: dict = {"xla_supported": xla}
        jit = xla is True
        log(f"{name}: correctness (XLA: {jit})")
        res.update(_bijection(method, big_n, [11, 5], jit))
        res["uniformity_chi2_p"] = _uniformity(method, big_n, big_n // 100, 50, jit)
        for frac in (0.01, 0.001):
            batch = int(big_n * frac)
            for mode in (["xla"] if jit else []) + ["graph"]:
                log(f"{name}: speed at batch {batch} ({mode})")
                res[f"seconds_per_batch_{frac}_{mode}"] = _speed(
                    method, big_n, batch, a.steps, a.repeats, mode == "xla"
                )
        out[name] = res
    for frac in (0.01, 0.001):
        key = f"seconds_per_batch_{frac}_graph"
        out[f"graph_feistel_over_index_shuffle_{frac}"] = (
            out["feistel"][key] / out["index_shuffle"][key]
        )
    out["load_after"] = load_average()
    dump_json(out, a.out)


if __name__ == "__main__":
    main()
