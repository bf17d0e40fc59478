"""Compiles of a whole tuning job: the MAMBA quickstart's tuning and its final draws.

Workload: ``examples/quickstart_mamba.py``'s job. The paper's logistic regression
(N = 10⁶, d = 10), its MAP by L-BFGS, then MAMBA (η = 3, KSD on at most 100 samples)
over 24 arms of SGLD with control variates at the MAP (8 step sizes × batch fractions
10%, 1% and 0.1%) on a wall-clock sampling budget, then 1,000 final draws with the
chosen arm's kernel from its last state:

* ``result_sample``: ``result.sample(1000, seed=...)``, which runs the best arm's tuning
  program (where the library has it);
* ``sample_chain``: ``tf.function(jit_compile=True)`` around
  ``sg.sample_chain(1000, result.best_state, kernel=result.kernel(), seed=...)``, the
  path a user took before ``result.sample`` existed.

Counted per phase (MAP, tuning, each final sampling):

* ``xla_compiles``: XLA executables built, read from TensorFlow's log
  (``TF_CPP_VMODULE=device_compiler=1,device_compilation_profiler=1``: one "Compilation
  of XLA executable" line per compile), their compile seconds as logged and the Python
  functions compiled (``chunk_fn``: a tuner arm program; ``score``: the KSD metric's
  full-data score; ``final``: the ``sample_chain`` function);
* ``traces``: Python traces of the tuner's chunk programs (their
  ``experimental_get_tracing_count``) and of the ``sample_chain`` function;
* ``seconds``: wall-clock seconds of the phase (compiling and running).

The job runs in a child process (the log is its stderr) that imports ``tfp_sgmcmc`` from
``--library`` (default: this checkout), so the same script measures an older checkout
(``git worktree add /tmp/old HEAD``, then ``--library /tmp/old``). One JSON document on
stdout, progress on stderr.

Usage::

    python -m benchmarks.bench_compile_counts            # ~2 min on 2 cores
    python -m benchmarks.bench_compile_counts --quick    # a 4 s budget
    python -m benchmarks.bench_compile_counts --library /tmp/old --label before
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

#: The log line TensorFlow writes for every XLA executable it builds (device_compiler.h).
_COMPILE_LINE = re.compile(r"Compilation of XLA executable time: [^(]*\((\d+) us\)")
_NAME_LINE = re.compile(r"Compiled __inference_(\S+?)_\d+ \d+ times")
_PHASE_LINE = re.compile(r"^@@phase (\S+)$")
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _job(quick: bool, budget: float, seed: int, num_draws: int) -> dict[str, Any]:
    """The quickstart's job in this process; phases are announced on stderr."""
    import numpy as np
    import tensorflow as tf

    import tfp_sgmcmc as sg
    from tfp_sgmcmc import tuning
    from tfp_sgmcmc.models.logistic_regression import logistic_regression

    out: dict[str, Any] = {"library": os.path.dirname(os.path.dirname(sg.__file__))}

    def phase(name: str) -> float:
        print(f"@@phase {name}", file=sys.stderr, flush=True)
        return time.perf_counter()

    t0 = phase("data_and_map")
    problem = logistic_regression()
    base = problem.estimator(
        batch_size=problem.batch_size_from_fraction(0.01), scheme="random_window"
    )
    theta_map = sg.find_map(base, tf.zeros([problem.num_features], tf.float32)).position
    cv = sg.ControlVariateEstimator(base, theta_map)
    out["data_and_map"] = {"seconds": round(time.perf_counter() - t0, 2)}

    steps = tuning.log10_grid(-4, -7.5, 0.5)  # the quickstart's 8 step sizes
    fractions = [0.1, 0.01, 0.001]
    arms = tuning.grid(step_size=steps, batch_fraction=fractions)
    n = int(cv.num_examples)
    estimators = {f: cv.with_batch_size(max(1, int(np.floor(f * n)))) for f in fractions}

    def make_kernel(step_size: Any, batch_fraction: float) -> Any:
        return sg.SGLD(estimators[batch_fraction], step_size)

    t0 = phase("tuning")
    # The kernel factory is the third argument: `make_kernel` or `kernel` in every
    # version of MAMBA's signature this script measures.
    mamba = tuning.MAMBA(
        arms,
        theta_map,
        make_kernel,
        budget=tuning.seconds(budget),
        eta=3,
        metric=tuning.KSDMetric(max_samples=100),
        seed=seed,
        progress=False,
    )
    result = mamba.run()
    runner = getattr(result, "runner", None) or mamba.pool.runner

    def chunk_traces() -> int:
        return sum(p.chunk_fn.experimental_get_tracing_count() for p in runner._programs.values())

    out["tuning"] = {
        "seconds": round(time.perf_counter() - t0, 2),
        "arms": len(arms),
        "best_arm": {k: float(v) for k, v in result.best_arm.items()},
        "programs": int(runner.num_programs),
        "traces": chunk_traces(),
        "compile_seconds_reported": round(result.total_compile_seconds, 2),
    }

    if hasattr(result, "sample"):
        before = chunk_traces()
        t0 = phase("result_sample")
        draws = np.asarray(result.sample(num_draws, seed=seed))
        out["result_sample"] = {
            "seconds": round(time.perf_counter() - t0, 2),
            "traces": chunk_traces() - before,
            "draws": list(draws.shape),
            "finite": bool(np.all(np.isfinite(draws))),
        }

    kernel = result.kernel()

    @tf.function(jit_compile=True, autograph=False)
    def final(state: tf.Tensor, chain_seed: tf.Tensor) -> tf.Tensor:
        return sg.sample_chain(num_draws, state, kernel=kernel, seed=chain_seed)

    t0 = phase("sample_chain")
    draws = final(tf.constant(result.best_state), tf.constant([0, seed], tf.int32)).numpy()
    out["sample_chain"] = {
        "seconds": round(time.perf_counter() - t0, 2),
        "traces": final.experimental_get_tracing_count(),
        "draws": list(draws.shape),
        "finite": bool(np.all(np.isfinite(draws))),
    }
    phase("end")
    del quick
    return out


def _child_main(argv: list[str]) -> None:
    args = json.loads(argv[0])
    print(json.dumps(_job(**args)), flush=True)


def _measure(library: str, job: dict[str, Any]) -> dict[str, Any]:
    """Runs the job in a child importing ``tfp_sgmcmc`` from ``library``; adds the XLA
    compiles and their logged seconds per phase."""
    env = dict(os.environ)
    env["PYTHONPATH"] = library
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"
    env["TF_CPP_VMODULE"] = "device_compiler=1,device_compilation_profiler=1"
    code = (
        "import runpy, sys; m = runpy.run_path(sys.argv[1], run_name='child'); "
        "m['_child_main'](sys.argv[2:])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, os.path.abspath(__file__), json.dumps(job)],
        cwd=library,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"the job failed (exit {proc.returncode})")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    counts: dict[str, list[int]] = {}
    names: dict[str, list[str]] = {}
    current = None
    for line in proc.stderr.splitlines():
        m = _PHASE_LINE.match(line.strip())
        if m:
            current = m.group(1)
            continue
        if current is None:
            continue
        m = _COMPILE_LINE.search(line)
        if m:
            counts.setdefault(current, []).append(int(m.group(1)))
        m = _NAME_LINE.search(line)
        if m:  # the compiled function, by its Python name
            names.setdefault(current, []).append(m.group(1))
    for name, us in counts.items():
        if name in result:
            result[name]["xla_compiles"] = len(us)
            result[name]["xla_compile_seconds"] = round(sum(us) / 1e6, 2)
            result[name]["xla_compiled_functions"] = sorted(names.get(name, []))
    for name in ("data_and_map", "tuning", "result_sample", "sample_chain"):
        if name in result:
            result[name].setdefault("xla_compiles", 0)
    return result


def main() -> None:
    from benchmarks._common import dump_json, environment, load_average, log

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a 4 s sampling budget")
    p.add_argument("--budget", type=float, default=None, help="sampling seconds (default 20)")
    p.add_argument("--draws", type=int, default=1000, help="final draws")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--library", default=_REPO, help="checkout whose tfp_sgmcmc is measured")
    p.add_argument("--label", default="", help="a name for this checkout in the JSON")
    p.add_argument("--output", default=None, help="also write the JSON here")
    args = p.parse_args()
    budget = args.budget if args.budget is not None else (4.0 if args.quick else 20.0)
    job = dict(quick=args.quick, budget=budget, seed=args.seed, num_draws=args.draws)
    log(f"compile counts: {args.library} ({args.label or 'this checkout'}), budget {budget:g} s")
    load = load_average()
    t0 = time.perf_counter()
    measured = _measure(os.path.abspath(args.library), job)
    final = "result_sample" if "result_sample" in measured else "sample_chain"
    total = measured["tuning"]["xla_compiles"] + measured[final]["xla_compiles"]
    dump_json(
        {
            "benchmark": "bench_compile_counts",
            "label": args.label,
            "args": vars(args) | {"budget": budget},
            "job_xla_compiles_tuning_plus_final": total,
            "final_path": final,
            "measured": measured,
            "wall_seconds": round(time.perf_counter() - t0, 1),
            "load_average": {"before": load, "after": load_average()},
            "environment": environment(),
        },
        args.output,
    )


if __name__ == "__main__":
    main()
