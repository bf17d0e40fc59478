"""MAMBA on a Keras posterior: the same data as arrays and as a shuffled, batched
``tf.data`` pipeline pick the same arm.

``BayesianModel.fit(tune=...)`` tunes array inputs only
(``tests/test_bayesian_model_tune.py``), so the tuner here is MAMBA on a
[`KerasPosterior`]. With a dataset, the arms'
full-data Stein scores stream the data: ``KerasPosterior`` reads ``full_dataset`` (or,
for a finite pipeline, the pipeline's own pass over the rows) once per scoring pass.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
from tfp_sgmcmc.keras import KerasPosterior

N, BATCH = 240, 24
# From weights far from the mode, ε = 1e-6 barely moves in an arm's 1000 steps, and
# ε = 0.05 (εN = 12) samples a distribution much wider than the posterior, its
# minibatch noise dominating: ε = 3e-3 is the arm to find.
STEP_SIZES = [1e-6, 3e-3, 0.05]


def _data():
    rng = np.random.default_rng(0)
    centres = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    y = rng.integers(0, 3, N)
    x = (centres[y] + rng.normal(size=(N, 2))).astype("float32")
    return x, y.astype("int32")


def _model() -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)])


def _tune(post: KerasPosterior):
    est = post.estimator(batch_size=BATCH)
    init = [tf.constant(w) + 2.0 for w in post.init_state()]  # far from the mode
    return tu.MAMBA(
        tu.grid(step_size=STEP_SIZES),
        init,
        lambda step_size: sg.SGLD(est, step_size),
        budget=tu.steps(3000),
        eta=3,
        seed=0,
        progress=False,
    ).run()


@pytest.mark.slow
def test_mamba_picks_the_same_arm_on_arrays_and_on_a_shuffled_pipeline():
    x, y = _data()
    arrays = _tune(KerasPosterior(_model(), (x, y)))
    pipeline = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(N, seed=1)
        .batch(BATCH, drop_remainder=True)
        .repeat()
    )
    full = tf.data.Dataset.from_tensor_slices((x, y)).batch(60)
    streamed = _tune(KerasPosterior(_model(), pipeline, num_examples=N, full_dataset=full))
    for res in (arrays, streamed):
        round0 = {r.arm_index: r for r in res.records if r.round == 0}
        assert len(round0) == 3
        # No arm is +inf silently: an infinite score comes with its reason (a diverged
        # chain, or samples the Stein discrepancy cannot rank), and the right arm's
        # score is finite.
        for r in round0.values():
            assert math.isfinite(r.metric) or r.diverged or r.note, r
        assert math.isfinite(round0[1].metric), round0[1]
        assert res.best_index == 1 and math.isfinite(res.best_metric), res.records
    assert arrays.best_index == streamed.best_index


def test_a_dataset_without_a_full_pass_is_named():
    x, y = _data()
    pipeline = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH, drop_remainder=True).repeat()
    post = KerasPosterior(_model(), pipeline, num_examples=N)
    with pytest.raises(ValueError, match="full_dataset"):
        post.estimator(batch_size=BATCH).full_log_prob_and_gradient(post.init_state())


def test_a_finite_pipeline_is_its_own_full_pass():
    x, y = _data()
    pipeline = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(N, seed=2)
        .batch(BATCH, drop_remainder=True)
    )
    post = KerasPosterior(_model(), pipeline, num_examples=N)
    reference = KerasPosterior(_model(), (x, y))
    state = post.init_state()
    got = post.estimator(batch_size=BATCH).full_log_prob_and_gradient(state)
    want = reference.estimator(batch_size=BATCH).full_log_prob_and_gradient(state)
    np.testing.assert_allclose(got.target_log_prob, want.target_log_prob, rtol=1e-5)
    for g, w in zip(got.grads_target_log_prob, want.grads_target_log_prob):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    # A pass that drops rows is refused, not read as the full data.
    short = tf.data.Dataset.from_tensor_slices((x, y)).batch(50, drop_remainder=True)
    post = KerasPosterior(_model(), short, num_examples=N)
    with pytest.raises(ValueError, match="num_examples"):
        post.estimator(batch_size=50).full_log_prob_and_gradient(post.init_state())


def test_a_float64_pipeline_feeds_a_float32_model():
    """NumPy arrays give float64 features; the dataset's floating elements follow the
    weights' dtype, as arrays do, and the estimator agrees with the arrays' one."""
    x, y = _data()
    x64 = x.astype(np.float64)
    pipeline = tf.data.Dataset.from_tensor_slices((x64, y)).batch(BATCH, drop_remainder=True)
    post = KerasPosterior(_model(), pipeline.repeat(), num_examples=N, full_dataset=pipeline)
    est = post.estimator(batch_size=BATCH)
    state = post.init_state()
    assert est.dtype == tf.float32
    sg.SGLD(est, 1e-3).bootstrap_results(state)  # refused before: float64 data
    want = KerasPosterior(_model(), (x, y)).estimator(batch_size=BATCH)
    got = est.full_log_prob_and_gradient(state).target_log_prob
    np.testing.assert_allclose(
        got, want.full_log_prob_and_gradient(state).target_log_prob, rtol=1e-5
    )
