"""Subprocess half of ``test_distributed.py``: runs on two logical CPU devices.

TensorFlow fixes its devices when it initialises, so the split of the CPU into two
logical devices must happen before any op runs -- in a fresh process, never in the
pytest process (that would change the devices every other test sees). This script
computes single-device and ``tf.distribute`` results side by side and prints them as
one JSON object on the last line of stdout; the assertions live in the test file.

Run by hand: ``python tests/estimators/_distributed_worker.py [SECTION ...]``, where a
section is one of ``estimates``, ``chains``, ``warnings`` (the chains' warnings only),
``driver`` and ``errors`` (all but ``warnings`` when none is named): the CI
tier asks only for what its tests read.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from typing import Any  # noqa: E402

import tensorflow as tf  # noqa: E402

_CPUS = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _CPUS[0], [tf.config.LogicalDeviceConfiguration()] * 2
)

import numpy as np  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _distributed_model import (  # noqa: E402  (this script's own directory is on sys.path)
    BATCH,
    STEPS,
    TRACE_LOG,
    N,
    init_state,
    log_likelihood,
    log_prior,
    make_data,
)

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.driver import sample  # noqa: E402
from tfp_sgmcmc.estimators.distributed import DistributedMinibatchEstimator  # noqa: E402

warnings.filterwarnings("ignore", message=".*not calibrated.*")
warnings.filterwarnings("ignore", message=".*MirroredStrategy eagerly.*")

def as_lists(estimate: sg.GradientEstimate) -> dict[str, Any]:
    return {
        "value": estimate.target_log_prob.numpy().tolist(),
        "grads": [g.numpy().tolist() for g in estimate.grads_target_log_prob],
    }


def estimates(single: Any, dist: Any, calls: int, mode: str) -> dict[str, Any]:
    """``calls`` consecutive estimates (carrying the batch state) of both estimators."""
    state = init_state()
    seeds = [tf.constant([11, k], tf.int32) for k in range(calls)]

    def run(est: Any, s: Any, bs: Any, seed: tf.Tensor) -> Any:
        return est(s, bs, seed)

    out = {}
    for name, est in (("single", single), ("distributed", dist)):
        fn = run if mode == "eager" else tf.function(run)
        bs = est.bootstrap(state)
        rows = []
        for seed in seeds:
            e, bs = fn(est, state, bs, seed)
            rows.append(as_lists(e))
        out[name] = rows
    return out


def chain(
    kernel: tfp.mcmc.TransitionKernel, jit: bool, steps: int = STEPS
) -> tuple[list[Any], list[str]]:
    @tf.function(jit_compile=jit)
    def run(seed: tf.Tensor) -> list[tf.Tensor]:
        return tfp.mcmc.sample_chain(steps, init_state(), kernel=kernel, trace_fn=None, seed=seed)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        samples = run(tf.constant([3, 4], tf.int32))
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    return [s.numpy().tolist() for s in samples], msgs


def as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def error_message(fn: Any) -> list[str] | None:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - reported to the test, which checks the type
        return [type(e).__name__, str(e)]
    return None


SECTIONS = ("estimates", "chains", "warnings", "driver", "errors")


def main(sections: tuple[str, ...] = SECTIONS) -> None:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x, y = make_data()
    result: dict[str, Any] = {
        "logical_cpus": len(tf.config.list_logical_devices("CPU")),
        "replicas": strategy.num_replicas_in_sync,
        "estimates": {},
    }

    def pair(data: Any, batch_size: int = BATCH) -> tuple[Any, Any]:
        base = sg.MinibatchEstimator(log_likelihood, data, batch_size, log_prior_fn=log_prior)
        return base, DistributedMinibatchEstimator(base, strategy)

    if "estimates" in sections:
        run_estimates(result, pair, strategy, x, y)
    base, dist = pair(sg.InMemoryData((x, y)))
    if "chains" in sections:
        run_chains(result, base, dist)
    elif "warnings" in sections:
        run_warnings(result, base, dist)
    if "driver" in sections:
        run_driver(result, base, dist)
    if "errors" in sections:
        run_errors(result, pair, strategy, x, y, dist)
    sys.stdout.flush()
    print(json.dumps(result))


def run_estimates(result: dict[str, Any], pair: Any, strategy: Any, x: Any, y: Any) -> None:
    """Estimates on the same seeds, every InMemoryData scheme, 3 consecutive calls."""
    for scheme in ("epoch", "with_replacement", "random_window"):
        base, dist = pair(sg.InMemoryData((x, y), scheme=scheme))
        TRACE_LOG.clear()
        result["estimates"][scheme] = estimates(base, dist, 3, "graph")
        if scheme == "epoch":
            result["trace_log"] = list(TRACE_LOG)
    base, dist = pair(sg.InMemoryData((x, y)))
    result["estimates"]["eager"] = estimates(base, dist, 2, "eager")
    base_full, dist_full = pair(sg.InMemoryData((x, y)), N)
    result["estimates"]["full_batch"] = estimates(base_full, dist_full, 1, "graph")
    # A seeded tf.data pipeline: two identical pipelines give the same batch sequence.
    def dataset_source() -> sg.DatasetData:
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N, seed=5).batch(
            BATCH, drop_remainder=True)
        return sg.DatasetData(ds, N)

    dbase = sg.MinibatchEstimator(log_likelihood, dataset_source(), BATCH, log_prior_fn=log_prior)
    ddist = DistributedMinibatchEstimator(
        sg.MinibatchEstimator(log_likelihood, dataset_source(), BATCH, log_prior_fn=log_prior),
        strategy,
    )
    result["estimates"]["dataset"] = estimates(dbase, ddist, 3, "graph")


def run_chains(result: dict[str, Any], base: Any, dist: Any, steps: int = STEPS) -> None:
    """Chains: same kernel, same seed, single-device vs distributed estimator."""
    result["chains"] = {}
    kernels = {
        "sgld": lambda e: sg.SGLD(e, 1e-3),
        "sghmc": lambda e: sg.SGHMC(e, 1e-3, num_leapfrog_steps=2),
    }
    for name, make in kernels.items():
        for jit in (False, True) if name == "sgld" else (False,):
            key = f"{name}_{'xla' if jit else 'graph'}"
            single, w_single = chain(make(base), jit, steps)
            distributed, w_dist = chain(make(dist), jit, steps)
            result["chains"][key] = {
                "single": single,
                "distributed": distributed,
                "warnings_single": w_single,
                "warnings_distributed": w_dist,
            }


def run_warnings(result: dict[str, Any], base: Any, dist: Any) -> None:
    """The chains' warnings alone, from two-step chains (a warning is raised when the step is
    traced, whatever the number of steps): the distributed estimator under each kernel and
    mode, and the single-device one under XLA."""
    result["chains"] = {
        "sgld_graph": {"warnings_distributed": chain(sg.SGLD(dist, 1e-3), False, 2)[1]},
        "sghmc_graph": {
            "warnings_distributed": chain(sg.SGHMC(dist, 1e-3, num_leapfrog_steps=2), False, 2)[1]
        },
        "sgld_xla": {
            "warnings_distributed": chain(sg.SGLD(dist, 1e-3), True, 2)[1],
            "warnings_single": chain(sg.SGLD(base, 1e-3), True, 2)[1],
        },
    }


def run_driver(result: dict[str, Any], base: Any, dist: Any) -> None:
    """The long-run driver (tf.function chunks without XLA) with either estimator."""
    with tempfile.TemporaryDirectory() as tmp:
        draws = {}
        for name, est in (("single", base), ("distributed", dist)):
            run = sample(
                sg.SGLD(est, 1e-3), init_state(), num_samples=20, run_dir=os.path.join(tmp, name),
                seed=9, chunk_size=10, jit_compile=False, progress=False,
            )
            draws[name] = [np.asarray(p).tolist() for p in as_list(run.samples())]
        result["driver"] = draws


def run_errors(
    result: dict[str, Any], pair: Any, strategy: Any, x: Any, y: Any, dist: Any
) -> None:
    """The errors of bad batch sizes and of a nested ``strategy.run``."""
    result["errors"] = {
        "indivisible": error_message(lambda: pair(sg.InMemoryData((x, y)), 41)),
        "with_batch_size": error_message(lambda: dist.with_batch_size(7)),
        "with_batch_size_ok": dist.with_batch_size(8).shard_size,
        "nested": error_message(
            lambda: strategy.run(
                lambda: dist(init_state(), dist.bootstrap(None), tf.constant([1, 2]))
            )
        ),
    }


if __name__ == "__main__":
    unknown = sorted(set(sys.argv[1:]) - set(SECTIONS))
    if unknown:
        sys.exit(f"unknown sections {unknown}; choose from {SECTIONS}")
    main(tuple(sys.argv[1:]) or tuple(s for s in SECTIONS if s != "warnings"))
