"""Keras's own ``fit`` arguments on ``tfp_sgmcmc.keras.BayesianModel``: ``sample_weight``
(arrays and ``(x, y, w)`` datasets), ``class_weight``, ``validation_split``,
``initial_epoch``, and ``summary()``.

The weight checks compare whole runs: with one full batch per step the weighted target
``Σ_i w_i log p(y_i | x_i)`` with every ``w_i = 2`` is the duplicated data's target
exactly (the same gradients, step size and noise), so the draws agree to float
rounding, while the unweighted run's differ at the 0.1 level.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc.keras import BayesianModel, KerasDataError

N = 60
FAST = dict(epochs=2, sample_epochs=2, verbose=0)


def _data(n: int = N, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)).astype("float32")
    y = (x[:, 0] + 0.5 * rng.normal(size=n) > 0).astype("int64")
    return x, y


def _bayes(likelihood: str = "categorical", out: int = 2) -> BayesianModel:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(out)])
    return BayesianModel(
        model, likelihood, num_draws=4, learning_rate=0.05, jit_compile=False, seed=3
    )


def _draws(x, y, batch_size: int, **kw) -> np.ndarray:
    bayes = _bayes()
    bayes.fit(x, y, batch_size=batch_size, shuffle=False, **FAST, **kw)
    return bayes._flat_draws


def test_weight_two_on_every_example_equals_duplicating_the_data():
    x, y = _data()
    weighted = _draws(x, y, N, sample_weight=np.full(N, 2.0))
    doubled = _draws(np.concatenate([x, x]), np.concatenate([y, y]), 2 * N)
    plain = _draws(x, y, N)
    scale = np.abs(doubled).max()
    np.testing.assert_allclose(weighted, doubled, atol=1e-5 * scale)
    # Power: the weights matter (ignoring them gives other draws).
    assert np.abs(plain - doubled).max() > 0.02 * scale

    # The same weights from a dataset's (x, y, w) triples.
    ds = tf.data.Dataset.from_tensor_slices((x, y, np.full(N, 2.0, "float32"))).batch(N)
    bayes = _bayes()
    bayes.fit(ds, **FAST)
    np.testing.assert_allclose(bayes._flat_draws, doubled, atol=1e-5 * scale)


def test_class_weight_equals_the_matching_sample_weight():
    x, y = _data()
    table = {0: 3.0, 1: 0.5}
    by_class = _draws(x, y, 16, class_weight=table)
    by_sample = _draws(x, y, 16, sample_weight=np.where(y == 0, 3.0, 0.5))
    np.testing.assert_allclose(by_class, by_sample, rtol=0, atol=1e-6)
    assert np.abs(by_class - _draws(x, y, 16)).max() > 0.02  # the weights matter


def test_validation_split_scores_the_last_rows():
    x, y = _data()
    split = int(np.floor(N * 0.75))  # Keras's rule: the first floor(N(1 - f)) rows train
    a = _bayes()
    ha = a.fit(x, y, batch_size=16, validation_split=0.25, **FAST)
    b = _bayes()
    hb = b.fit(x[:split], y[:split], batch_size=16, validation_data=(x[split:], y[split:]), **FAST)
    assert {"val_loss", "val_accuracy", "val_ece"} <= set(ha.history)
    assert len(ha.history["val_loss"]) == 4
    np.testing.assert_allclose(ha.history["val_loss"], hb.history["val_loss"], rtol=1e-6)
    np.testing.assert_array_equal(a._flat_draws, b._flat_draws)
    # Power: the first rows held out instead score differently.
    c = _bayes()
    hc = c.fit(x[N - split :], y[N - split :], validation_data=(x[:15], y[:15]), **FAST)
    assert not np.allclose(ha.history["val_loss"], hc.history["val_loss"], rtol=1e-3)


def test_initial_epoch_resumes_the_map_epochs():
    x, y = _data()
    seen = []
    record = keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: seen.append(e))
    history = _bayes().fit(
        x, y, epochs=5, initial_epoch=3, sample_epochs=2, verbose=0, callbacks=[record]
    )
    assert seen == [3, 4, 5, 6] and history.epoch == [3, 4, 5, 6]
    with pytest.raises(ValueError, match="`initial_epoch` \\(6\\).*at most `epochs` \\(5\\)"):
        _bayes().fit(x, y, epochs=5, initial_epoch=6, verbose=0)


def test_summary_gives_the_model_and_the_posterior_settings():
    x, y = _data()
    bayes = _bayes()
    lines: list[str] = []
    bayes.summary(print_fn=lambda text, **_: lines.append(text))
    text = "\n".join(lines)
    assert "dense" in text.lower() and "not fitted yet" in text
    assert "prior: N(0, 1^2) on each of the 10 trainable weights" in text
    bayes.fit(x, y, batch_size=N, **FAST)
    lines.clear()
    bayes.summary(print_fn=lambda text, **_: lines.append(text))
    text = "\n".join(lines)
    assert "likelihood: categorical, outputs read as logits" in text
    assert f"draws: {bayes.num_kept} kept of 4 asked, in memory" in text
    assert f"step size {bayes.step_size:.3g}" in text


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            dict(sample_weight=np.r_[np.ones(N - 1), -1.0]),
            KerasDataError,
            "`sample_weight`.*row 59",
        ),
        (
            dict(sample_weight=np.r_[np.nan, np.ones(N - 1)]),
            KerasDataError,
            "`sample_weight`.*row 0",
        ),
        (dict(sample_weight=np.ones(N - 2)), KerasDataError, "`sample_weight` has shape"),
        (dict(class_weight={0: 1.0, 2: 1.0}), KerasDataError, "names class 2"),
        (dict(class_weight={0: -1.0}), KerasDataError, "`class_weight\\[0\\]`"),
        (dict(class_weight={"a": 1.0}), KerasDataError, "integer class ids"),
        (dict(validation_split=1.5), ValueError, "`validation_split` must be a fraction"),
        (dict(validation_split=0.99), KerasDataError, "leaves no training rows"),
    ],
)
def test_bad_weights_and_splits_are_named(kwargs, error, match):
    x, y = _data()
    with pytest.raises(error, match=match):
        _bayes().fit(x, y, **FAST, **kwargs)


def test_weights_refused_where_they_do_not_apply():
    x, y = _data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    with pytest.raises(KerasDataError, match="`validation_split` needs arrays"):
        _bayes().fit(ds, validation_split=0.2, **FAST)
    with pytest.raises(ValueError, match="yield \\(x, y, sample_weight\\) triples"):
        _bayes().fit(ds, sample_weight=np.ones(N), **FAST)
    bad = tf.data.Dataset.from_tensor_slices((x, y, -np.ones(N, "float32"))).batch(16)
    with pytest.raises(KerasDataError, match="`sample_weight`.*negative"):
        _bayes().fit(bad, **FAST)
    with pytest.raises(ValueError, match="`class_weight`.*'gaussian'.*`sample_weight`"):
        _bayes("gaussian", 1).fit(x, y.astype("float32"), class_weight={0: 2.0}, **FAST)
