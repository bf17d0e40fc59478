"""``BayesianModel.predict`` and ``evaluate`` run the draws' forward passes batched:
several draws per compiled call (a loop over the stacked draws inside the program), with
``num_draws=`` to use an evenly thinned subset.

The reference is Keras itself: each draw's weights (and the fixed BatchNormalization
statistics) assigned to the model's variables and ``model(x, training=False)`` called,
one draw at a time, on a network with BatchNormalization and Dropout, so inference
mode is checked too.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tfp_sgmcmc.keras._prediction as keras_model_module
from tfp_sgmcmc.keras import BayesianModel


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 5)).astype("float32")
    y = (x[:, 0] - x[:, 1] > 0).astype("int64")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((5,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.BatchNormalization(),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(3),
        ]
    )
    bayes = BayesianModel(model, num_draws=9, learning_rate=0.02, jit_compile=False)
    bayes.fit(x, y, batch_size=30, epochs=2, sample_epochs=3, verbose=0)
    return bayes, x, y


def _keras_per_draw(bayes: BayesianModel, x: np.ndarray) -> np.ndarray:
    """Each draw's class probabilities from the Keras model called draw by draw."""
    model = bayes.model
    saved = [v.numpy() for v in model.variables]
    for var, value in zip(model.non_trainable_variables, bayes._non_trainable):
        var.assign(value)
    out = []
    try:
        for s in range(bayes.num_kept):
            for var, draw in zip(model.trainable_variables, bayes.draws):
                var.assign(draw[s])
            out.append(_softmax(np.asarray(model(x, training=False), np.float64)))
    finally:
        for var, value in zip(model.variables, saved):
            var.assign(value)
    return np.stack(out)


def test_batched_draws_give_keras_predictions_in_one_call(fitted, monkeypatch):
    bayes, x, _ = fitted
    want = _keras_per_draw(bayes, x[:50])
    forward = bayes._forward()
    calls = []
    monkeypatch.setattr(forward, "_fn", _counting(forward._fn, calls))
    forward._cache.clear()
    mean, draws = bayes.predict(x[:50], return_draws=True)
    np.testing.assert_allclose(draws, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(mean, want.mean(0), rtol=1e-5, atol=1e-7)
    # All 9 draws over the 50 rows in one compiled call, not one call per draw.
    assert bayes.num_kept == 9 and len(calls) == 1

    # Few draws per call (the last group padded): the same predictions.
    monkeypatch.setattr(keras_model_module, "PREDICT_BYTES", 1)
    _, draws_one = bayes.predict(x[:50], return_draws=True, batch_size=20)
    np.testing.assert_allclose(draws_one, want, rtol=1e-5, atol=1e-7)
    monkeypatch.setattr(keras_model_module, "PREDICT_BYTES", 4000)
    assert bayes._draws_per_call(50, 9) == 4  # groups of 4, 4 and 1 (padded to 4)
    _, draws_some = bayes.predict(x[:50], return_draws=True)
    np.testing.assert_allclose(draws_some, want, rtol=1e-5, atol=1e-7)


def _counting(concrete_source, calls: list):
    class Counting:
        def get_concrete_function(self, *args):
            fn = concrete_source.get_concrete_function(*args)

            def call(*a):
                calls.append(1)
                return fn(*a)

            return call

    return Counting()


def test_num_draws_thins_evenly_and_keeps_the_last(fitted):
    bayes, x, y = fitted
    want = _keras_per_draw(bayes, x[:20])
    idx = [0, 4, 8]  # 3 of 9, evenly spaced, the last included
    np.testing.assert_allclose(bayes.predict(x[:20], num_draws=3), want[idx].mean(0), rtol=1e-5)
    _, draws = bayes.predict(x[:20], num_draws=1, return_draws=True)
    np.testing.assert_allclose(draws[0], want[8], rtol=1e-5, atol=1e-7)
    few, every = bayes.evaluate(x, y, num_draws=2), bayes.evaluate(x, y)
    assert few.keys() == every.keys() and few != every
    assert bayes.evaluate(x, y, num_draws=9) == every
    with pytest.raises(ValueError, match="`num_draws` \\(10\\) is more than the 9 draws"):
        bayes.predict(x, num_draws=10)
    with pytest.raises(ValueError, match="num_draws"):
        bayes.evaluate(x, y, num_draws=0)


def test_num_draws_reads_the_thinned_draws_from_a_run_dir(fitted, tmp_path, monkeypatch):
    bayes, x, y = fitted
    disk = BayesianModel(bayes.model, num_draws=9, learning_rate=0.02, jit_compile=False)
    keras.utils.set_random_seed(0)
    disk.fit(x, y, batch_size=10, epochs=0, sample_epochs=1, verbose=0, run_dir=tmp_path)
    memory = BayesianModel(bayes.model, num_draws=9, learning_rate=0.02, jit_compile=False)
    memory.fit(x, y, batch_size=10, epochs=0, sample_epochs=1, verbose=0)
    monkeypatch.setattr(keras_model_module, "READ_BYTES", 1)  # one draw per read
    for k in (2, 5, None):
        np.testing.assert_allclose(
            disk.predict(x[:10], num_draws=k), memory.predict(x[:10], num_draws=k), rtol=1e-6
        )
