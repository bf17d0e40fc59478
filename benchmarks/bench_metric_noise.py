"""Noise of MAMBA's metrics: spread of KSD and FSSD over independent repeats of one arm.

One arm of the MAMBA paper's §4.1 logistic regression (SGLD, step size 1e-6,
batch 1%, from the MAP) runs ``R`` independent chains side by side
(``independent_chains=True``: each chain is an independent repeat) for a
fixed number of steps, keeping every state. From these repeats we measure how
the metric's run-to-run spread (standard deviation over repeats, and as a
coefficient of variation, sd/mean) falls with

* the number ``m`` of thinned samples the metric sees (thin 10);
* the thinning (``m = 100`` samples at thin 1, 10, 50);
* the number ``c`` of independent chains pooled per value (``m = 100`` in
  total, i.e. ``100/c`` per chain, thin 10),

and compare the jackknife standard error the tuner reports (over the ``c``
chains, or over 4 blocks of one chain) with the measured spread. The KSD is
the tuner's (IMQ, full-data scores, V-statistic); the FSSD is the paper's
FSSD-opt (``fssd_opt(mode="mamba")``, value ``FSSD²_U``).

Run::

    python benchmarks/bench_metric_noise.py --out metric_noise.json
    python benchmarks/bench_metric_noise.py --quick
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import dump_json, environment, load_average, log  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import tuning  # noqa: E402
from tfp_sgmcmc.models.logistic_regression import logistic_regression  # noqa: E402


class CachedKSD(tuning.KSDMetric):
    """The tuner's KSD with full-data scores looked up from one precomputed pass."""

    def fill(self, rows: np.ndarray, scores: np.ndarray) -> None:
        self._table = {r.tobytes(): g for r, g in zip(rows, scores)}

    def scores(self, samples: list[np.ndarray], estimator) -> list[np.ndarray]:
        return [np.stack([self._table[r.tobytes()] for r in samples[0]])]


def spread(values: list[float]) -> dict:
    v = np.asarray(values, np.float64)
    return {
        "mean": float(v.mean()),
        "sd": float(v.std(ddof=1)),
        "cv": float(v.std(ddof=1) / abs(v.mean())),
        "repeats": len(v),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=32, help="independent chains R (32)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    reps = 8 if args.quick else args.repeats
    ms = [25, 50] if args.quick else [25, 50, 100, 200]
    thins = [1, 10] if args.quick else [1, 10, 50]
    cs = [1, 2, 4] if args.quick else [1, 2, 4, 8]
    steps = max(10 * max(ms), 100 * max(thins))

    prob = logistic_regression()
    base = prob.estimator(
        prob.batch_size_from_fraction(0.01), scheme="random_window", independent_chains=True
    )
    theta_map = sg.find_map(base, tf.zeros([prob.num_features], tf.float32)).position
    kernel = sg.SGLD(base, step_size=1e-6)
    init = tf.broadcast_to(theta_map, [reps, prob.num_features])

    @tf.function(jit_compile=True)
    def run(seed):
        return tfp.mcmc.sample_chain(steps, init, kernel=kernel, trace_fn=None, seed=seed)

    log(f"sampling {reps} chains x {steps} steps")
    draws = run(tf.constant([3, 4], tf.int32)).numpy()  # [steps, R, d]
    ksd = CachedKSD(max_samples=None, score_block_size=128)
    # Score every sample any configuration uses once, in one pass.
    need = sorted(
        {i for t in thins for i in range(t - 1, 100 * t, t)} | set(range(9, 10 * max(ms), 10))
    )
    rows = draws[need].reshape(-1, draws.shape[-1])
    log(f"scoring {rows.shape[0]} samples")
    ksd.fill(rows, tuning.KSDMetric(score_block_size=128).scores([rows], base)[0])
    out = {
        "environment": environment(),
        "load_start": load_average(),
        "arm": {"sampler": "SGLD", "step_size": 1e-6, "batch_fraction": 0.01},
        "steps": steps,
        "repeats": reps,
        "by_samples": [],
        "by_thinning": [],
        "by_chains": [],
    }

    def thinned(chain: int, thin: int, m: int) -> np.ndarray:
        return draws[thin - 1 : thin * m : thin, chain]

    # Metric vs m (one chain per value, thin 10): KSD, its 4-block jackknife SE, FSSD.
    for m in ms:
        vals, ses, fssd = [], [], []
        for r in range(reps):
            x = thinned(r, 10, m)
            blocks = [[b] for b in np.array_split(x, 4)]
            v, se = ksd.value_and_se(blocks, base)
            vals.append(v)
            ses.append(se)
            scores = ksd.scores([x], base)  # cached
            res = sg.fssd_opt(
                tf.constant(x, tf.float64),
                tf.constant(scores[0], tf.float64),
                mode="mamba",
                seed=(r, 1),
            )
            fssd.append(float(res.value))
        row = {
            "m": m,
            "thin": 10,
            "chains": 1,
            "ksd": spread(vals),
            "ksd_mean_jackknife_se": float(np.mean(ses)),
            "fssd": spread(fssd),
        }
        log(str(row))
        out["by_samples"].append(row)
    # Metric vs thinning at m = 100 (one chain per value).
    for thin in thins:
        vals = [ksd.value_and_se([[thinned(r, thin, 100)]], base)[0] for r in range(reps)]
        row = {"m": 100, "thin": thin, "chains": 1, "ksd": spread(vals)}
        log(str(row))
        out["by_thinning"].append(row)
    # Metric vs chains per value at m = 100 in total (100/c per chain, thin 10).
    for c in cs:
        vals, ses = [], []
        for g in range(reps // c):
            groups = [[thinned(g * c + j, 10, 100 // c)] for j in range(c)]
            if c == 1:
                groups = [[b] for b in np.array_split(groups[0][0], 4)]
            v, se = ksd.value_and_se(groups, base)
            vals.append(v)
            ses.append(se)
        row = {
            "m": 100,
            "thin": 10,
            "chains": c,
            "ksd": spread(vals),
            "ksd_mean_jackknife_se": float(np.mean(ses)),
        }
        log(str(row))
        out["by_chains"].append(row)
    out["load_end"] = load_average()
    dump_json(out, args.out)


if __name__ == "__main__":
    main()
