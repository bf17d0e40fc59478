"""Budget honesty of MAMBA's wall-clock budgets.

MAMBA (Algorithm 1 of Coullon et al.) gives every surviving arm a per-round
sampling time ``r_i``; the tuner's total sampling time should equal the budget
``T``, with compilation and metric time reported apart. This script runs
MAMBA-KSD on the paper's §4.1 logistic regression (``tfp_sgmcmc/models/logistic_regression.py``)
over the paper's grid (14 step sizes 10^-1 ... 10^-7.5 × batch {100, 10, 1, 0.1}%,
M = 56 arms, η = 3) for each sampler and budget, and reports

* ``sampling_s`` and ``deviation_pct`` = 100 (sampling_s − T) / T;
* ``honesty_non_diverged`` = sampling time / allotted time over the arm-rounds
  that did not diverge (a diverged chain stops early and leaves its time
  unspent, so the total can fall short of T for a grid with unstable arms);
* per round, the mean and max of (an arm's sampling time / its r_i);
* ``compile_s`` and ``metric_s`` (not charged to the budget).

Usage::

    python benchmarks/bench_mamba_budget.py                 # SGLD, SGHMC, SGNHT; T = 10, 20 s
    python benchmarks/bench_mamba_budget.py --quick         # smoke test (T = 2 s, 6 arms)
    python benchmarks/bench_mamba_budget.py --output benchmarks/results/bench_mamba_budget.json
"""

from __future__ import annotations

import argparse
import os
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import dump_json, environment, load_average, log  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import tuning  # noqa: E402
from tfp_sgmcmc.models.logistic_regression import logistic_regression  # noqa: E402

KERNELS = {
    "SGLD": (sg.SGLD, {}),
    "SGHMC": (sg.SGHMC, {"order": "explicit", "friction": 0.01, "num_leapfrog_steps": 5}),
    "SGNHT": (sg.SGNHT, {"diffusion": 0.01}),
}



def one_run(name: str, budget: float, quick: bool, base: Any, theta_map: tf.Tensor) -> dict:
    cls, kw = KERNELS[name]
    if quick:
        arms = tuning.grid(step_size=[1e-5, 1e-6, 1e-7], batch_fraction=[0.01, 0.001])
    else:
        arms = tuning.grid(step_size=tuning.log10_grid(-1, -7.5, 0.5),
                           batch_fraction=[1.0, 0.1, 0.01, 0.001])
    res = tuning.MAMBA(
        arms,
        theta_map,
        tuning.KernelSpec(cls, base, **kw),
        budget=tuning.seconds(budget),
        metric=tuning.KSDMetric(max_samples=50),
        progress=False,
    ).run()
    rounds = {}
    for rec in res.records:
        if rec.diverged:
            continue
        rounds.setdefault(rec.round, []).append(rec.sampling_seconds / rec.budget)
    return {
        "sampler": name,
        "budget_s": budget,
        "num_arms": len(arms),
        "sampling_s": round(res.total_sampling_seconds, 3),
        "deviation_pct": round(100 * (res.total_sampling_seconds - budget) / budget, 2),
        "honesty_non_diverged": round(res.budget_honesty(), 4),
        "diverged_arm_rounds": sum(r.diverged for r in res.records),
        "per_round_time_over_r": {
            str(k): {"mean": round(float(np.mean(v)), 3), "max": round(float(np.max(v)), 3)}
            for k, v in sorted(rounds.items())
        },
        "compile_s": round(res.total_compile_seconds, 1),
        "metric_s": round(res.total_metric_seconds, 1),
        "load_average_end": load_average(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="T = 2 s, 6 arms, SGLD only")
    p.add_argument("--samplers", nargs="+", default=None, choices=sorted(KERNELS))
    p.add_argument("--budgets", type=float, nargs="+", default=None, help="T in seconds")
    p.add_argument("--output", default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    samplers = args.samplers or (["SGLD"] if args.quick else ["SGLD", "SGHMC", "SGNHT"])
    budgets = args.budgets or ([2.0] if args.quick else [10.0, 20.0])
    for b in budgets:
        if not b > 0:
            raise ValueError(f"`--budgets` must be > 0, got {b}.")
    report: dict[str, Any] = {
        "benchmark": "bench_mamba_budget",
        "environment": environment(),
        "load_average_start": load_average(),
        "runs": [],
    }
    prob = logistic_regression()
    base = prob.estimator(prob.batch_size_from_fraction(0.01), scheme="random_window")
    theta_map = sg.find_map(base, tf.zeros([prob.num_features], tf.float32)).position
    for name in samplers:
        for b in budgets:
            run = one_run(name, b, args.quick, base, theta_map)
            log(f"{name} T={b:g}: sampling {run['sampling_s']} s ({run['deviation_pct']:+}%), "
                f"non-diverged honesty {run['honesty_non_diverged']}")
            report["runs"].append(run)
    report["load_average_end"] = load_average()
    dump_json(report, args.output)
    return report


if __name__ == "__main__":
    main()
