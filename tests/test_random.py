"""The Threefry-2x32 normals the kernels draw their noise from (tfp_sgmcmc/internal/random.py)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from tfp_sgmcmc.internal import random as rnd

# Known-answer vectors of Random123's threefry2x32 (20 rounds): key, counter, output.
KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("key, counter, expected", KAT)
def test_threefry_known_answers(key, counter, expected):
    y0, y1 = rnd.threefry2x32(
        tf.constant(key, tf.uint32),
        tf.constant([counter[0]], tf.uint32),
        tf.constant([counter[1]], tf.uint32),
    )
    assert (int(y0.numpy()[0]), int(y1.numpy()[0])) == expected


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_same_uniforms_eagerly_in_graphs_and_under_xla(dtype):
    seed = tf.constant([3, -7])
    eager = rnd.uniform([37, 5], seed, dtype).numpy()
    graph = tf.function(lambda s: rnd.uniform([37, 5], s, dtype))(seed).numpy()
    xla = tf.function(lambda s: rnd.uniform([37, 5], s, dtype), jit_compile=True)(seed).numpy()
    np.testing.assert_array_equal(eager, graph)
    np.testing.assert_array_equal(eager, xla)
    assert eager.dtype == dtype.as_numpy_dtype and eager.min() >= 0 and eager.max() < 1
    # Normals: the same up to the two erf⁻¹ implementations' rounding.
    z = rnd.standard_normal([37, 5], seed, dtype).numpy()
    zx = tf.function(lambda s: rnd.standard_normal([37, 5], s, dtype), jit_compile=True)(seed)
    np.testing.assert_allclose(z, zx.numpy(), rtol=1e-4 if dtype == tf.float32 else 1e-10)
    # Another seed, another stream.
    assert not np.array_equal(eager, rnd.uniform([37, 5], tf.constant([3, -6]), dtype).numpy())


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_normals_are_standard_normal(dtype):
    """KS test on 200,000 draws; the same test rejects N(0, 1.02²) (power check)."""
    z = rnd.standard_normal([200_000], tf.constant([11, 5]), dtype).numpy().astype(np.float64)
    assert np.all(np.isfinite(z))
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert stats.kstest(z, "norm", args=(0.0, 1.02)).pvalue < 1e-3
    # Mean and variance within 4 Monte Carlo standard errors.
    assert abs(z.mean()) < 4 / np.sqrt(z.size)
    assert abs(z.var() - 1.0) < 4 * np.sqrt(2.0 / z.size)


def test_dynamic_shape_and_bad_dtype():
    f = tf.function(
        lambda n: rnd.standard_normal(tf.stack([n, 3]), tf.constant([1, 2])),
        input_signature=[tf.TensorSpec([], tf.int32)],
    )
    out = f(tf.constant(4)).numpy()
    np.testing.assert_array_equal(out, rnd.standard_normal([4, 3], tf.constant([1, 2])).numpy())
    with pytest.raises(TypeError, match="dtype"):
        rnd.standard_normal([3], tf.constant([1, 2]), tf.int32)
