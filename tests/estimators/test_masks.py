"""Mask laws of the structured-dropout energy: TFP-drawn, stateless, XLA-compiled, right law."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from _stats import assert_rejects, assert_within
from scipy import stats

import tfp_sgmcmc as sg
from tfp_sgmcmc.estimators import (
    BernoulliMask,
    BetaMask,
    MaskDistribution,
    StructuredDropoutEstimator,
    UniformMask,
)
from tfp_sgmcmc.estimators.partitions import partition_fully_factorized

MASKS = [
    (BernoulliMask(0.3), stats.bernoulli(0.3)),
    (UniformMask(), stats.uniform(0.0, 1.0)),
    (BetaMask(2.0, 5.0), stats.beta(2.0, 5.0)),
    (BetaMask(0.5, 0.5), stats.beta(0.5, 0.5)),
]


@pytest.mark.statistical
@pytest.mark.parametrize("mask, law", MASKS, ids=[repr(m) for m, _ in MASKS])
def test_draws_are_stateless_compiled_and_follow_the_law(mask, law):
    """One XLA program called with seeds a, a, b: equal draws for equal seeds. Mean and
    variance against the exact law (SEs from its exact moments); power: the same draws
    must reject a law with a 10%-off mean."""
    n = 100_000
    draw = tf.function(lambda s: mask.sample([n], s, tf.float64), jit_compile=True)
    x = draw(tf.constant([7, 3])).numpy()
    np.testing.assert_array_equal(x, draw(tf.constant([7, 3])))
    assert not np.array_equal(x, draw(tf.constant([8, 3])))
    assert x.dtype == np.float64 and np.all((x >= 0) & (x <= 1))
    assert mask.sample([4], tf.constant([1, 2]), tf.float32).dtype == tf.float32
    assert mask.mean == pytest.approx(law.mean())
    mean, var = law.mean(), law.var()
    mu4 = law.expect(lambda t: (t - mean) ** 4)
    se_mean, se_var = np.sqrt(var / n), np.sqrt((mu4 - var**2) / n)
    z = np.array([(x.mean() - mean) / se_mean, (x.var(ddof=1) - var) / se_var])
    assert_within(z, what=repr(mask))
    assert_rejects((x.mean() - 1.1 * mean) / se_mean)


def test_beta_masks_run_inside_a_compiled_step():
    """Beta masks come from ``tfd.Beta``; a ratio of ``stateless_gamma`` draws has no XLA
    kernel on CPU, so this step would not compile with it."""
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((30, 3)), rng.standard_normal(30))

    def loglik(w, batch):
        x, y = batch
        return -0.5 * (y - tf.einsum("nd,...d->...n", x, w)) ** 2

    base = sg.MinibatchEstimator(loglik, data, batch_size=10)
    est = StructuredDropoutEstimator(
        base, partition_fully_factorized([(3,)]), num_masks=2, mask=BetaMask(2.0, 3.0)
    )
    kernel = sg.SGLD(est, 1e-3)
    state = tf.zeros([3], tf.float64)
    results = kernel.bootstrap_results(state)
    step = tf.function(lambda s, r, seed: kernel.one_step(s, r, seed=seed), jit_compile=True)
    new, _ = step(state, results, tf.constant([1, 2]))
    again, _ = step(state, results, tf.constant([1, 2]))
    np.testing.assert_array_equal(new, again)
    assert np.all(np.isfinite(new)) and not np.allclose(new, 0.0)


def test_custom_masks_and_bad_parameters():
    class Half(MaskDistribution):
        mean = 0.5

        def sample(self, shape, seed, dtype):
            return tf.fill(shape, tf.constant(0.5, dtype))

    assert np.all(Half().sample([2], tf.constant([0, 0]), tf.float64).numpy() == 0.5)

    class NoLaw(MaskDistribution):
        mean = 0.5

    with pytest.raises(NotImplementedError, match="distribution"):
        NoLaw().sample([2], tf.constant([0, 0]), tf.float64)
    for bad in (0.0, 1.5, float("nan"), True, "0.5", None):
        with pytest.raises(ValueError, match="keep_prob"):
            BernoulliMask(bad)
    for bad in (0.0, -1.0, float("inf"), False):
        with pytest.raises(ValueError, match="concentration0"):
            BetaMask(1.0, bad)
