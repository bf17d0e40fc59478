"""First-call seconds of the library's compiled programs in a fresh process.

Workload: the logistic regression of ``tfp_sgmcmc.models.logistic_regression`` with
N = 2,500 (2,000 training rows), d = 5, a ``MinibatchEstimator`` of batch 50
(``random_window``). In one fresh process, in this order:

* ``laplace``: ``find_mode`` from the origin, then ``laplace_approximation`` at the mode;
* ``runner``: the automatic sampler's compiled SGLD (``tfp_sgmcmc.automatic._Runner`` on
  a ``WhitenedEstimator``, XLA), 10 draws of 4 chains, thinning 2;
* ``arm``: one tuning round of ``ArmRunner`` (SGLD, 20 steps, XLA).

Each is called twice: ``first_s`` is the first call (tracing, AutoGraph conversion where
it is on, XLA compilation, running), ``second_s`` the second (``laplace`` builds its
functions per call, so its second call traces them again, without the conversions).
The paths share the library's loop and kernels, so a conversion paid by one is not paid
again by the next: the per-path split depends on the order, ``total_first_s`` does not.

Two modes, each in its own child process, alternated ``--repeats`` times:

* ``library``: the library as it is (its programs traced without AutoGraph, the user's
  functions converted where they are called);
* ``autograph_everywhere``: every ``tf.function`` forced to ``autograph=True`` (the
  library's code converted too, as when its programs were traced with AutoGraph).

``ratio`` = library / autograph_everywhere of the median totals. One JSON document on
stdout, progress on stderr.

Usage::

    python -m benchmarks.bench_first_call               # ~40 s on 2 cores
    python -m benchmarks.bench_first_call --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("library", "autograph_everywhere")


def _child(mode: str) -> dict[str, Any]:
    """The three paths in this (fresh) process; seconds per path."""
    import tensorflow as tf

    if mode == "autograph_everywhere":
        original = tf.function

        def forced(func: Any = None, **kwargs: Any) -> Any:
            kwargs["autograph"] = True
            return original(func, **kwargs) if func is not None else original(**kwargs)

        tf.function = forced  # before the library builds any of its programs

    import numpy as np

    import tfp_sgmcmc as sg
    from tfp_sgmcmc.automatic import _Chain, _Runner
    from tfp_sgmcmc.estimators.laplace import find_mode, laplace_approximation
    from tfp_sgmcmc.loop import chain_seed
    from tfp_sgmcmc.models.logistic_regression import logistic_regression
    from tfp_sgmcmc.tuning import steps
    from tfp_sgmcmc.tuning.runner import ArmRunner

    prob = logistic_regression(num_examples=2500, num_features=5)
    data = sg.InMemoryData((prob.x_train, prob.y_train), scheme="random_window")
    est = sg.MinibatchEstimator(prob.log_likelihood_fn, data, 50, log_prior_fn=prob.log_prior_fn)
    out: dict[str, Any] = {}

    def twice(name: str, fn: Any) -> None:
        t0 = time.perf_counter()
        fn(0)
        t1 = time.perf_counter()
        fn(1)
        out[name] = {"first_s": t1 - t0, "second_s": time.perf_counter() - t1}

    def laplace(_: int) -> None:
        mode_ = find_mode(est, [[tf.zeros([5])]], num_examples=2000)
        laplace_approximation(est, mode_.position)

    twice("laplace", laplace)
    runner = _Runner(sg.WhitenedEstimator(est, [tf.zeros([5])], np.eye(5)), True)
    chain = _Chain(np.zeros([4, 5], np.float32), chain_seed(0))
    twice("runner", lambda _: runner(chain, 0.1, 10, 2))
    arms = ArmRunner(
        lambda step_size: sg.SGLD(est, step_size),
        [{"step_size": 1e-3}, {"step_size": 3e-3}],
        tf.zeros([5]),
        thin=2,
        seed=5,
        max_steps_per_call=20,
    )
    twice("arm", lambda i: arms.run(i, 20, steps(1)))
    out["total_first_s"] = sum(v["first_s"] for v in out.values())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child)))
        return

    from benchmarks._common import dump_json, environment, load_average, log, median

    env = dict(os.environ, PYTHONPATH=_REPO, TF_CPP_MIN_LOG_LEVEL="2")
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for r in range(max(1, args.repeats)):
        for mode in MODES:  # round-robin: a load change hits both modes alike
            log(f"round {r}: {mode}")
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.bench_first_call", "--child", mode],
                cwd=_REPO, env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
    totals = {m: median([r["total_first_s"] for r in runs[m]]) for m in MODES}
    dump_json(
        {
            "benchmark": "first_call",
            "environment": environment(),
            "load_average_end": load_average(),
            "runs": runs,
            "median_total_first_s": totals,
            "ratio": totals["library"] / totals["autograph_everywhere"],
        },
        args.out,
    )


if __name__ == "__main__":
    main()
