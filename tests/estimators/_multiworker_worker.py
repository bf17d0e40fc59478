"""One worker of a two-process ``MultiWorkerMirroredStrategy`` cluster on localhost.

Usage: ``python _multiworker_worker.py INDEX PORT0,PORT1``. Each worker sets
``TF_CONFIG`` before TensorFlow starts, builds the strategy (one CPU replica per
worker, two in sync), runs 50 SGLD steps with the single-device and the distributed
estimator from the same seed, and prints a JSON line with both final states. The test
(``test_distributed.py``) starts both workers and compares them.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

INDEX = int(sys.argv[1])
PORTS = sys.argv[2].split(",")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_CONFIG"] = json.dumps(
    {
        "cluster": {"worker": [f"localhost:{p}" for p in PORTS]},
        "task": {"type": "worker", "index": INDEX},
    }
)

import tensorflow as tf  # noqa: E402

# The strategy must be created before any op runs (it starts the worker's gRPC server).
STRATEGY = tf.distribute.MultiWorkerMirroredStrategy()

import tensorflow_probability as tfp  # noqa: E402
from _distributed_model import (  # noqa: E402
    BATCH,
    STEPS,
    init_state,
    log_likelihood,
    log_prior,
    make_data,  # noqa: E402
)

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.estimators.distributed import DistributedMinibatchEstimator  # noqa: E402

warnings.filterwarnings("ignore", message=".*not calibrated.*")


def main() -> None:
    base = sg.MinibatchEstimator(log_likelihood, make_data(), BATCH, log_prior_fn=log_prior)
    dist = DistributedMinibatchEstimator(base, STRATEGY)
    out = {"index": INDEX, "replicas": STRATEGY.num_replicas_in_sync}
    for name, est in (("single", base), ("distributed", dist)):
        kernel = sg.SGLD(est, 1e-3)

        @tf.function
        def run(seed: tf.Tensor, kernel: sg.SGLD = kernel) -> list[tf.Tensor]:
            return tfp.mcmc.sample_chain(
                STEPS, init_state(), kernel=kernel, trace_fn=None, seed=seed
            )

        out[name] = [s.numpy().tolist() for s in run(tf.constant([3, 4], tf.int32))]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
