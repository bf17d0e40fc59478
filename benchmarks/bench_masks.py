"""Sd-SGMCMC mask draws: hand-written stateless samplers vs TFP's distributions.

The structured-dropout energy draws ``K × M × chains`` i.i.d. mask values per step
inside the sampler's compiled step. Two ways to draw them from a stateless seed:

* ``handwritten``: ``stateless_uniform < ρ`` (Bernoulli), ``stateless_uniform``
  (uniform), and a ratio of two ``stateless_gamma`` draws (Beta);
* ``tfp``: ``tfd.Bernoulli(probs=ρ)``, ``tfd.Uniform(0, 1)``, ``tfd.Beta(α, β)``,
  each ``.sample(shape, seed=seed)`` with a ``[2]`` int seed.

Measured for each, under ``tf.function(jit_compile=True)``:

* ``xla_supported`` and ``deterministic`` (the same seed twice gives the same
  draws in one compiled program and across two calls: no stateful RNG);
* the law: mean and variance z-scores against the exact ``E[r]``, ``Var[r]`` from
  ``n`` draws (float64), and a Kolmogorov-Smirnov p-value for the continuous laws;
* cost: one compiled program draws ``steps`` masks of shape ``[K, M, chains]``
  (float32) in a ``tf.while_loop``, as a sampling chunk would. The two programs are
  timed in alternation (so both see the same load) and ``tfp_over_handwritten`` is
  the median of the per-repeat ratios; ``hlo_instructions`` counts the instructions
  of the optimized HLO, a cost proxy that does not depend on the machine's load.

Prints one JSON document. Reproduce with
``nice -n 10 python benchmarks/bench_masks.py --out masks.json``.
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from _common import dump_json, environment, load_average, log, median, sync
from scipy import stats

tfd = tfp.distributions

#: name -> (exact scipy law, handwritten sampler, TFP sampler); samplers: (shape, seed, dtype).
LAWS = {
    "bernoulli_0.3": (
        stats.bernoulli(0.3),
        lambda shape, seed, dtype: tf.cast(
            tf.random.stateless_uniform(shape, seed=seed, dtype=dtype) < tf.cast(0.3, dtype), dtype
        ),
        lambda shape, seed, dtype: tfd.Bernoulli(probs=tf.cast(0.3, dtype), dtype=dtype).sample(
            shape, seed=seed
        ),
    ),
    "uniform": (
        stats.uniform(0.0, 1.0),
        lambda shape, seed, dtype: tf.random.stateless_uniform(shape, seed=seed, dtype=dtype),
        lambda shape, seed, dtype: tfd.Uniform(tf.cast(0.0, dtype), tf.cast(1.0, dtype)).sample(
            shape, seed=seed
        ),
    ),
}


def _beta_pair(a: float, b: float) -> tuple:
    def handwritten(shape, seed, dtype):
        s1, s0 = tfp.random.split_seed(seed, 2, salt="beta_mask")
        g1 = tf.random.stateless_gamma(shape, seed=s1, alpha=a, dtype=dtype)
        g0 = tf.random.stateless_gamma(shape, seed=s0, alpha=b, dtype=dtype)
        return g1 / (g1 + g0)

    def tfp_beta(shape, seed, dtype):
        return tfd.Beta(tf.cast(a, dtype), tf.cast(b, dtype)).sample(shape, seed=seed)

    return stats.beta(a, b), handwritten, tfp_beta


LAWS["beta_2_5"] = _beta_pair(2.0, 5.0)
LAWS["beta_0.5_0.5"] = _beta_pair(0.5, 0.5)


def _xla_and_determinism(fn) -> dict:
    @tf.function(jit_compile=True)
    def twice(seed):
        return fn([64], seed, tf.float64), fn([64], seed, tf.float64)

    try:
        a, b = twice(tf.constant([4, 2]))
        c, _ = twice(tf.constant([4, 2]))
        d, _ = twice(tf.constant([5, 2]))
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError) as err:
        ops = sorted(set(re.findall(r"Stateless\w+", str(err)))) or [str(err)[:200]]
        return {"xla_supported": False, "xla_error_ops": ops}
    return {
        "xla_supported": True,
        "deterministic": bool(np.array_equal(a, b) and np.array_equal(a, c)),
        "differs_across_seeds": bool(not np.array_equal(a, d)),
    }


def _law(fn, law, n: int) -> dict:
    x = tf.function(lambda s: fn([n], s, tf.float64), jit_compile=True)(tf.constant([9, 1]))
    x = x.numpy()
    mean, var = law.mean(), law.var()
    # SE of the sample variance: sqrt((μ4 − σ⁴)/n) with the exact fourth central moment.
    mu4 = law.expect(lambda t: (t - mean) ** 4)
    out = {
        "mean_z": float((x.mean() - mean) / np.sqrt(var / n)),
        "var_z": float((x.var(ddof=1) - var) / np.sqrt((mu4 - var**2) / n)),
    }
    if not hasattr(law.dist, "pmf"):
        out["ks_p"] = float(stats.kstest(x, law.cdf).pvalue)
    return out


def _program(fn, shape: list[int], steps: int):
    """One compiled program drawing ``steps`` masks in a ``tf.while_loop`` (a chunk's shape)."""

    @tf.function(jit_compile=True)
    def run(seed):
        def body(k, acc):
            r = fn(shape, tf.random.experimental.stateless_fold_in(seed, k), tf.float32)
            return k + 1, acc + tf.reduce_sum(r)

        return tf.while_loop(lambda k, _: k < steps, body, (0, tf.constant(0.0)))[1]

    sync(run(tf.constant([1, 2])))  # compile
    return run


def _hlo_instructions(run) -> int:
    """Instructions in the optimized HLO of the program (a load-independent cost proxy)."""
    hlo = run.experimental_get_compiler_ir(tf.constant([1, 2]))(stage="optimized_hlo")
    return sum(1 for line in hlo.splitlines() if " = " in line)


def _paired_speed(runs: dict, steps: int, repeats: int) -> dict:
    """Seconds per draw of each program, timed in alternation (A B A B ...) so that both
    see the same machine load; the median over repeats and the median of the ratios."""
    times: dict = {k: [] for k in runs}
    for r in range(repeats):
        for name, run in runs.items():
            t0 = time.perf_counter()
            sync(run(tf.constant([r, 3])))
            times[name].append((time.perf_counter() - t0) / steps)
    out = {f"seconds_per_draw_{k}": median(v) for k, v in times.items()}
    if len(runs) == 2:
        a, b = (times[k] for k in runs)
        out["tfp_over_handwritten"] = median([y / x for x, y in zip(a, b)])
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=int, nargs=3, default=[4, 100, 16], help="K M chains")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--draws", type=int, default=200_000, help="draws for the law checks")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    out: dict = {
        "shape": a.shape,
        "steps": a.steps,
        "environment": environment(),
        "load_before": load_average(),
    }
    for name, (law, handwritten, tfp_fn) in LAWS.items():
        res: dict = {}
        runs = {}
        for impl, fn in (("handwritten", handwritten), ("tfp", tfp_fn)):
            log(f"{name}: {impl}")
            r = _xla_and_determinism(fn)
            if r["xla_supported"] is True:
                r.update(_law(fn, law, a.draws))
                runs[impl] = _program(fn, list(a.shape), a.steps)
                r["hlo_instructions"] = _hlo_instructions(runs[impl])
            res[impl] = r
        res.update(_paired_speed(runs, a.steps, a.repeats))
        out[name] = res
    out["load_after"] = load_average()
    dump_json(out, a.out)


if __name__ == "__main__":
    main()
