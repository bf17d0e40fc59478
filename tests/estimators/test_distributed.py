"""Data-parallel minibatch gradients (tf.distribute) against the single-device estimator.

The two-replica checks run once in a subprocess (``_distributed_worker.py``) that splits
the CPU into two logical devices before TensorFlow initialises; this process keeps its
own device configuration. In float64 the distributed estimate must equal the
single-device one on the same batch to 1e-10 (relative), and a chain under the
strategy must reproduce the single-device chain for the same seed to 1e-10. Not
bitwise: the replicas sum their shards separately, which changes the summation order.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.estimators.distributed import DistributedMinibatchEstimator

WORKER = Path(__file__).with_name("_distributed_worker.py")
MULTIWORKER = Path(__file__).with_name("_multiworker_worker.py")
RTOL = 1e-10
BATCH = 40  # the worker's batch size


def _run_worker(*sections: str) -> dict[str, Any]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, str(WORKER), *sections],
        capture_output=True, text=True, env=env, timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(f"distributed worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def two_replicas() -> dict[str, Any]:
    """Every section of the worker (about a minute): the slow tier's comparisons."""
    return _run_worker()


@pytest.fixture(scope="module")
def two_replicas_quick() -> dict[str, Any]:
    """The worker's warnings and errors only: what the CI tier's tests read."""
    return _run_worker("warnings", "errors")


def _close(actual: Any, desired: Any, rtol: float = RTOL) -> None:
    desired = np.asarray(desired, np.float64)
    atol = rtol * float(np.max(np.abs(desired)))  # relative to the estimate's own scale
    np.testing.assert_allclose(np.asarray(actual), desired, rtol=rtol, atol=atol)


@pytest.mark.slow
@pytest.mark.subprocess
def test_two_replicas_each_get_half_the_batch_on_their_own_device(two_replicas):
    assert two_replicas["logical_cpus"] == 2
    assert two_replicas["replicas"] == 2
    # (replica-id device, device of the replica's log-likelihood, rows) recorded at trace time.
    replica_traces = [t for t in two_replicas["trace_log"] if t[0] is not None]
    devices = sorted(t[1].rsplit("/", 1)[-1] for t in replica_traces)
    assert devices == ["device:CPU:0", "device:CPU:1"]
    assert all(t[2] == BATCH // 2 for t in replica_traces)
    # The single-device estimator saw the whole batch once.
    assert [t[2] for t in two_replicas["trace_log"] if t[0] is None] == [BATCH]


@pytest.mark.parametrize(
    "case", ["epoch", "with_replacement", "random_window", "eager", "full_batch", "dataset"]
)
@pytest.mark.slow
@pytest.mark.subprocess
def test_gradients_equal_single_device(two_replicas, case):
    """Same seed, same batch state: value and every gradient part agree to 1e-10 (float64)."""
    out = two_replicas["estimates"][case]
    single, dist = out["single"], out["distributed"]
    assert len(single) == len(dist) >= 1
    for s, d in zip(single, dist):
        _close(d["value"], s["value"])
        assert len(d["grads"]) == len(s["grads"]) == 2
        for gd, gs in zip(d["grads"], s["grads"]):
            _close(gd, gs)
    if len(single) > 1:
        # Power: consecutive batches differ, so a distributed estimate on the wrong batch
        # (or with a wrong N/n scaling) would fail the comparison above.
        with pytest.raises(AssertionError):
            _close(dist[1]["grads"][0], single[0]["grads"][0])


@pytest.mark.slow
@pytest.mark.parametrize("case", ["sgld_graph", "sghmc_graph", "sgld_xla"])
@pytest.mark.subprocess
def test_chain_under_strategy_reproduces_single_device_chain(two_replicas, case):
    """50 steps, same seed: the traces agree to 1e-10 (rounding only, not bitwise)."""
    out = two_replicas["chains"][case]
    _assert_same_moving_traces(out["single"], out["distributed"], 50)


@pytest.mark.subprocess
def test_driver_run_under_strategy_reproduces_single_device_run(two_replicas):
    """``driver.sample(jit_compile=False)``: 20 draws in two chunks, both parts, 1e-10."""
    single, dist = two_replicas["driver"]["single"], two_replicas["driver"]["distributed"]
    assert len(single) == len(dist) == 2
    _assert_same_moving_traces(single, dist, 20)


def _assert_same_moving_traces(single, dist, num_draws: int) -> None:
    """Part by part: ``num_draws`` finite draws, equal to 1e-10 (rounding only), and the
    chain moved (so the comparison is not of two constant traces)."""
    for s, d in zip(single, dist):
        s, d = np.asarray(s), np.asarray(d)
        assert s.shape[0] == num_draws and np.all(np.isfinite(s))
        np.testing.assert_allclose(d, s, rtol=0, atol=1e-10)
        assert np.max(np.abs(s[-1] - s[0])) > 1e-2


@pytest.mark.subprocess
def test_warns_under_xla_only(two_replicas_quick):
    chains = two_replicas_quick["chains"]
    assert chains["sgld_xla"]["warnings_distributed"]
    assert all("jit_compile" in m for m in chains["sgld_xla"]["warnings_distributed"])
    for case in ("sgld_graph", "sghmc_graph"):
        assert chains[case]["warnings_distributed"] == []
    assert chains["sgld_xla"]["warnings_single"] == []


@pytest.mark.slow
@pytest.mark.subprocess
def test_chains_in_every_mode_warn_only_when_distributed_under_xla(two_replicas):
    """The full chains of the comparisons above: none warns but the distributed XLA one."""
    chains = two_replicas["chains"]
    assert chains["sgld_xla"]["warnings_distributed"]
    for case in ("sgld_graph", "sghmc_graph"):
        assert chains[case]["warnings_distributed"] == []
    assert all(c["warnings_single"] == [] for c in chains.values())


@pytest.mark.subprocess
def test_bad_batch_sizes_and_nesting_raise(two_replicas_quick):
    errors = two_replicas_quick["errors"]
    assert errors["indivisible"][0] == "ValueError" and "`batch_size`" in errors["indivisible"][1]
    assert errors["with_batch_size"][0] == "ValueError"
    assert "`batch_size`" in errors["with_batch_size"][1]
    assert errors["with_batch_size_ok"] == 4
    assert errors["nested"][0] == "RuntimeError" and "strategy.run" in errors["nested"][1]


def _free_ports(k: int) -> list[int]:
    socks = [socket.socket() for _ in range(k)]
    try:
        for s in socks:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.mark.slow
@pytest.mark.subprocess
def test_multiworker_strategy_on_two_local_processes():
    """MultiWorkerMirroredStrategy, 2 workers (gRPC on localhost): both hold the same chain,
    equal to the single-device chain to 1e-10."""
    ports = ",".join(map(str, _free_ports(2)))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    procs = [
        subprocess.Popen(
            [sys.executable, str(MULTIWORKER), str(i), ports],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for i in range(2)
    ]
    outs = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=600)
            if p.returncode != 0:
                pytest.fail(f"worker failed ({p.returncode}):\n{stderr[-4000:]}")
            outs.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [o["index"] for o in outs] == [0, 1]
    assert all(o["replicas"] == 2 for o in outs)
    for o in outs:
        for s, d in zip(o["single"], o["distributed"]):
            s, d = np.asarray(s), np.asarray(d)
            assert s.shape[0] == 50
            np.testing.assert_allclose(d, s, rtol=0, atol=1e-10)
            assert np.max(np.abs(s[-1] - s[0])) > 1e-2
    # The workers never broadcast the state: they stay identical because they share the
    # reduced gradient and the noise seed.
    for a, b in zip(outs[0]["distributed"], outs[1]["distributed"]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# --------------------------------------------------------------------------- #
# In-process checks (one replica: no device reconfiguration needed).
# --------------------------------------------------------------------------- #


def _log_likelihood(theta, batch):
    x, y = batch
    logits = tf.einsum("nd,...d->...n", x, theta)
    return -tf.nn.sigmoid_cross_entropy_with_logits(tf.broadcast_to(y, tf.shape(logits)), logits)


def _base(rng, batch_size=10):
    x = rng.standard_normal((50, 3))
    y = (rng.random(50) < 0.5).astype(np.float64)
    return sg.MinibatchEstimator(
        _log_likelihood, (x, y), batch_size,
        log_prior_fn=lambda t: -0.5 * tf.reduce_sum(tf.square(t), -1),
    )


def test_constructor_validates_arguments(rng):
    base = _base(rng)
    with pytest.raises(ValueError, match="`base`"):
        DistributedMinibatchEstimator(sg.NoisyGradientEstimator(lambda t: -t**2))
    with pytest.raises(ValueError, match="`strategy`"):
        DistributedMinibatchEstimator(base, strategy="mirrored")
    est = DistributedMinibatchEstimator(base)  # no scope: the default, one-replica strategy
    assert est.num_replicas == 1 and est.shard_size == 10
    assert est.batch_size == 10 and est.num_examples == 50 and est.dtype == tf.float64
    assert est.with_batch_size(5).batch_size == 5


def test_one_device_strategy_matches_base_and_full_data_is_delegated(rng):
    base = _base(rng)
    est = DistributedMinibatchEstimator(base, tf.distribute.OneDeviceStrategy("/cpu:0"))
    theta = tf.constant(rng.standard_normal((2, 3)))
    state = est.bootstrap(theta)
    run = tf.function(lambda e, s: e(theta, state, s))
    for k in range(3):
        seed = tf.constant([k, 1])
        a, next_a = run(base, seed)
        b, next_b = run(est, seed)
        _close(b.target_log_prob.numpy(), a.target_log_prob.numpy(), 1e-12)
        _close(b.grads_target_log_prob[0].numpy(), a.grads_target_log_prob[0].numpy(), 1e-12)
        tf.nest.map_structure(np.testing.assert_array_equal, next_b, next_a)
    full_a = base.full_log_prob_and_gradient(theta)
    full_b = est.full_log_prob_and_gradient(theta)
    np.testing.assert_array_equal(full_b.target_log_prob, full_a.target_log_prob)


def test_chains_draw_what_the_base_draws():
    """The wrapper said nothing about per-chain batches: MAMBA then ran several chains on
    one shared minibatch, and the driver could not warn."""
    x = np.random.default_rng(0).normal(size=(40, 2))
    base = sg.MinibatchEstimator(lambda t, b: -0.5 * tf.reduce_sum((b - t[..., None, :]) ** 2, -1),
                                 x, 8)
    shared = DistributedMinibatchEstimator(base)
    assert shared.independent_chains is False
    own = shared.with_independent_chains()
    assert isinstance(own, DistributedMinibatchEstimator) and own.independent_chains is True
    assert own.chain_shape(tf.zeros([3, 2], tf.float64)) == [3]
    with pytest.raises(ValueError, match="independent chains"):
        sg.MAMBA(
            [{"step_size": e} for e in (1e-3, 2e-3, 3e-3)],
            tf.zeros([2], tf.float64),
            sg.tuning.KernelSpec(sg.SGLD, shared),
            budget=sg.tuning.steps(60),
            progress=False,
            sampling=sg.tuning.ArmSampling(chains_per_arm=2),
        ).run()
