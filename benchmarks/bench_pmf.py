"""SG-MCMC steps per second on Bayesian PMF with MovieLens-100K's shape.

Workload: :func:`tfp_sgmcmc.models.pmf.synthetic_ratings` (943 users, 1,682 items,
100,000 ratings; 80,000 for training), d = 20 (52,580 parameters), float32, one
chain, batches of 1% (800 ratings) and 10% (8,000), SGLD, SGLD-CV and SGNHT
through ``tfp.mcmc.sample_chain`` in one ``tf.function(jit_compile=True)``,
1,000 steps per call, the final state stored. It also times the same SGLD on
a grid with the same users + items but 25x the users × items (the sparse
likelihood gathers rows, so the two should run at the same speed).

Usage::

    python benchmarks/bench_pmf.py [--repeats 5] [--output FILE]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import dump_json, environment, load_average, log, median, timed_call  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.models import pmf as pm  # noqa: E402


def _time(kernel, init, steps: int, repeats: int) -> dict:
    @tf.function(jit_compile=True)
    def run(s, seed):
        return tfp.mcmc.sample_chain(
            1, s, kernel=kernel, trace_fn=None, seed=seed, num_burnin_steps=steps - 1
        )

    first, _ = timed_call(run, init, tf.constant([0, 0]))
    times = [timed_call(run, init, tf.constant([r + 1, 3]))[0] for r in range(repeats)]
    med = median(times)
    return {
        "steps_per_s": steps / med,
        "s_per_call_median": med,
        "s_min": min(times),
        "s_max": max(times),
        "compile_s_est": first - med,
        "repeats": repeats,
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--output", default=None)
    ap.add_argument("--no-grids", action="store_true", help="skip the users x items grids")
    a = ap.parse_args(argv)
    report = {"environment": environment(), "loadavg_start": load_average(), "runs": []}
    prob = pm.pmf(synthetic=True)
    init = prob.init_state()
    for frac in (0.01, 0.1):
        n = prob.batch_size_from_fraction(frac)
        est = prob.estimator(n)
        m = sg.find_map(est, init, method="adam", num_steps=200).position
        cv = prob.control_variate_estimator(m, n)  # control variates in θ, as SGLD-CV runs
        for name, kernel in (
            ("SGLD", sg.SGLD(est, step_size=1e-5)),
            ("SGLD-CV", sg.SGLD(cv, step_size=1e-5)),
            ("SGNHT", sg.SGNHT(est, step_size=1e-5, diffusion=0.01)),
        ):
            rec = {
                "sampler": name,
                "batch": n,
                "batch_fraction": frac,
                **_time(kernel, init, a.steps, a.repeats),
            }
            log(f"[pmf] {name} batch {n}: {rec['steps_per_s']:.0f} steps/s")
            report["runs"].append(rec)
    for nu, ni in () if a.no_grids else ((50, 4950), (943, 1682), (2500, 2500)):
        data = pm.synthetic_ratings(nu, ni, 100_000, min_per_user=1, seed=0)
        p = pm.pmf(data)
        rec = {
            "sampler": "SGLD",
            "grid": [nu, ni],
            "users_x_items": nu * ni,
            "batch": 800,
            **_time(sg.SGLD(p.estimator(800), step_size=1e-5), p.init_state(), a.steps, a.repeats),
        }
        log(f"[pmf grid] {nu} x {ni}: {rec['steps_per_s']:.0f} steps/s")
        report["runs"].append(rec)
    report["loadavg_end"] = load_average()
    dump_json(report, a.output)
    return report


if __name__ == "__main__":
    main()
