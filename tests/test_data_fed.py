"""``FedBatches``: minibatches a caller feeds a compiled program, a stacked block a call."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.data.fed import FedBatches
from tfp_sgmcmc.loop import run_steps


def _block(k: int, n: int, start: float) -> tuple[tf.Tensor, tf.Tensor]:
    """``k`` batches of ``n`` rows: batch ``j`` holds the value ``start + j``."""
    x = np.repeat((start + np.arange(k, dtype=np.float32))[:, None], n, axis=1)
    return tf.constant(x), tf.ones([k, n], tf.float32)


def test_the_jth_draw_reads_batch_j_in_one_program_for_every_block():
    """An estimator whose log-density is the batch sum times θ (times N/n): a chain
    of SGLD at temperature 0 moves by ε · (N/n Σ batch) per step, so the states say which
    batches the steps read. One XLA program serves blocks of one shape."""
    n, k = 4, 5
    data = FedBatches(num_examples=8, batch_size=n, float_dtype=tf.float32)
    est = sg.MinibatchEstimator(lambda th, b: b[0] * b[1] * th[..., None], data, n)
    kernel = sg.SGLD(est, step_size=1.0, temperature=0.0)
    traces = []

    @tf.function(jit_compile=True, autograph=False)
    def run(x, mask, count):
        traces.append(1)
        with data.feeding((x, mask)):
            results = kernel.bootstrap_results(tf.constant(0.0))
            out = run_steps(kernel, tf.constant(0.0), results, count, tf.constant([0, 1]),
                            num_slots=k)
            return out.draws, data.batches_fed()

    draws, read = run(*_block(k, n, 1.0), tf.constant(3))
    # bootstrap reads batch 0 (value 1): step 1 moves by N·1 = 8; step 2 by N·2 (batch 1)...
    np.testing.assert_allclose(draws.numpy()[:3], [8.0, 24.0, 48.0])
    assert int(read) == 4
    draws, read = run(*_block(k, n, 10.0), tf.constant(2))
    np.testing.assert_allclose(draws.numpy()[:2], [80.0, 168.0])
    assert int(read) == 3 and len(traces) == 1
    # Power: a block whose batches are in another order gives other states.
    x, mask = _block(k, n, 1.0)
    draws, _ = run(tf.reverse(x, [0]), mask, tf.constant(3))
    assert not np.allclose(draws.numpy()[:3], [8.0, 24.0, 48.0])


def test_errors_name_the_fix():
    data = FedBatches(10, 5)
    with pytest.raises(RuntimeError, match="feeding"):
        data.sample_batch(5, data.init_batch_state(), tf.constant([0, 0]))
    with pytest.raises(ValueError, match=r"\[K, 5, \.\.\.\]"):
        with data.feeding(tf.zeros([3, 4])):
            pass
    with pytest.raises(ValueError, match="batch_size"):
        FedBatches(10, 11)
    with pytest.raises(ValueError, match="num_examples"):
        FedBatches(0, 1)
    with pytest.raises(ValueError, match="differs"):
        sg.MinibatchEstimator(lambda th, b: b * th, data, 4)
    with pytest.raises(NotImplementedError, match="no full data"):
        next(iter(data.full_batches()))
