"""``tfp_sgmcmc.keras.BayesianModel``: a Keras model's posterior through fit / predict /
evaluate, fed as Keras users feed ``model.fit``.

The cases: a shuffled ``.batch(32)`` pipeline with a partial last batch, one-hot labels
and float64 features; ``jit_compile=True`` on a dataset; a repeating dataset; BatchNorm
and a softmax followed by a ``Reshape`` (sampled predictions within 2 points of
``model.fit``'s accuracy); Dropout's notice; a Gaussian with learned noise; callbacks;
blocks of steps per compiled call against one step per call.
Small models on synthetic data; the Fashion-MNIST check needs the Debian
``dataset-fashion-mnist`` files and is marked slow.
"""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc.keras import BayesianModel

FASHION = "/usr/share/datasets/fashion-mnist"


def _blobs(n: int, seed: int, k: int = 3, d: int = 6, spread: float = 1.0):
    """``k`` Gaussian classes in ``d`` dimensions, float64 features and int labels."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(123).normal(0, 1.6, (k, d))
    y = rng.integers(0, k, n)
    x = centres[y] + spread * rng.normal(size=(n, d))
    return x, y


def _mlp(d: int = 6, k: int = 3, *, head: list | None = None, seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((d,)), keras.layers.Dense(16, activation="relu")]
    layers += head if head is not None else [keras.layers.Dense(k)]
    return keras.Sequential(layers)


def _accuracy(probs: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(probs, -1) == y))


def _keras_fit_accuracy(make_model, x, y, x_test, y_test, loss, epochs: int) -> float:
    model = make_model()
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=loss)
    model.fit(x.astype("float32"), y, batch_size=32, epochs=epochs, verbose=0)
    out = model.predict(x_test.astype("float32"), verbose=0)
    return _accuracy(out.reshape(len(out), -1), y_test)


def test_shuffled_partial_batches_one_hot_float64_dataset():
    x, y = _blobs(500, 0)  # 500 = 15 x 32 + 20: a partial last batch
    x_test, y_test = _blobs(1000, 1)
    one_hot = np.eye(3, dtype="float32")[y]
    ds = tf.data.Dataset.from_tensor_slices((x, one_hot)).shuffle(500, seed=0).batch(32)
    assert ds.element_spec[0].dtype == tf.float64
    bayes = BayesianModel(_mlp(), "categorical", num_draws=20)
    history = bayes.fit(ds, epochs=4, sample_epochs=2, verbose=0)
    assert len(history.history["loss"]) == 6
    assert [p.shape[0] for p in bayes.draws] == [20] * len(bayes.draws)
    probs = bayes.predict(x_test)
    assert probs.shape == (1000, 3) and np.allclose(probs.sum(1), 1.0, atol=1e-5)
    metrics = bayes.evaluate(x_test, y_test)
    assert set(metrics) == {"accuracy", "nll", "ece"}
    assert metrics["accuracy"] > 0.8, metrics
    # The same data as arrays with one-hot labels give a posterior as good.
    arrays = BayesianModel(_mlp(), "categorical", num_draws=20)
    arrays.fit(x, one_hot, epochs=4, sample_epochs=2, verbose=0)
    assert abs(arrays.evaluate(x_test, y_test)["accuracy"] - metrics["accuracy"]) < 0.05


def test_jit_compile_with_a_dataset_and_a_repeating_dataset():
    x, y = _blobs(300, 2)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(300, seed=1).batch(32)
    bayes = BayesianModel(_mlp(), jit_compile=True, num_draws=10)
    bayes.fit(ds, epochs=2, sample_epochs=2, verbose=0)
    assert bayes.jit_compile is True
    assert np.isfinite(bayes.evaluate(ds)["nll"])

    repeating = ds.repeat()
    with pytest.raises(ValueError, match="steps_per_epoch"):
        BayesianModel(_mlp()).fit(repeating, epochs=1, verbose=0)
    rep = BayesianModel(_mlp(), jit_compile=False, num_draws=10)
    rep.fit(repeating, epochs=2, sample_epochs=2, steps_per_epoch=10, num_examples=300, verbose=0)
    assert rep.draws[0].shape[0] == 10


def test_xla_choice_is_probed_or_ruled():
    x, y = _blobs(200, 3)
    bayes = BayesianModel(_mlp(), num_draws=5)
    bayes.fit(x, y, epochs=1, sample_epochs=1, verbose=0)
    assert isinstance(bayes.jit_compile, bool)
    assert any("probe" in n for n in bayes.notes), bayes.notes

    keras.utils.set_random_seed(0)
    conv = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(2),
        ]
    )
    rng = np.random.default_rng(0)
    xi = rng.normal(size=(64, 8, 8, 1)).astype("float32")
    yi = (xi.mean((1, 2, 3)) > 0).astype(int)
    cb = BayesianModel(conv, num_draws=5)
    cb.fit(xi, yi, epochs=1, sample_epochs=1, verbose=0)
    if not tf.config.list_physical_devices("GPU"):
        assert cb.jit_compile is False
        assert any("convolutional" in n for n in cb.notes)


def test_batchnorm_statistics_fixed_and_accuracy_matches_keras_fit():
    x, y = _blobs(1200, 4, spread=1.3)
    x = 5.0 + 3.0 * x  # far from BatchNorm's initial statistics (0, 1)
    x_test, y_test = _blobs(2000, 5, spread=1.3)
    x_test = 5.0 + 3.0 * x_test

    def make():
        keras.utils.set_random_seed(0)
        return keras.Sequential(
            [
                keras.Input((6,)),
                keras.layers.Dense(16),
                keras.layers.BatchNormalization(),
                keras.layers.Activation("relu"),
                keras.layers.Dense(3),
            ]
        )

    fit_acc = _keras_fit_accuracy(
        make,
        x,
        y,
        x_test,
        y_test,
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        epochs=8,
    )
    bayes = BayesianModel(make(), num_draws=30)
    bayes.fit(x, y, epochs=8, sample_epochs=4, verbose=0)
    bn = [v for v in bayes.model.non_trainable_variables if "moving_mean" in v.path][0]
    assert np.abs(np.asarray(bn)).max() > 0.5  # set from the data, not left at zero
    assert any("BatchNormalization statistics" in n for n in bayes.notes)
    acc = bayes.evaluate(x_test, y_test)["accuracy"]
    assert acc > fit_acc - 0.02, (acc, fit_acc)


def test_softmax_then_reshape_is_read_as_probabilities():
    x, y = _blobs(1200, 6, spread=1.3)
    x_test, y_test = _blobs(2000, 7, spread=1.3)

    def make():
        return _mlp(head=[keras.layers.Dense(3, activation="softmax"), keras.layers.Reshape((3,))])

    fit_acc = _keras_fit_accuracy(
        make, x, y, x_test, y_test, "sparse_categorical_crossentropy", epochs=8
    )
    bayes = BayesianModel(make(), num_draws=30)
    bayes.fit(x, y, epochs=8, sample_epochs=4, verbose=0)
    assert bayes.from_logits is False
    assert any("probabilities" in n for n in bayes.notes)
    metrics = bayes.evaluate(x_test, y_test)
    assert metrics["accuracy"] > fit_acc - 0.02, (metrics, fit_acc)
    assert metrics["ece"] < 0.1, metrics


def test_dropout_notice_and_bernoulli_sigmoid():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(400, 4))
    y = (x[:, 0] - x[:, 1] + 0.3 * rng.normal(size=400) > 0).astype(int)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    bayes = BayesianModel(model, "bernoulli", num_draws=10, learning_rate=1e-2)
    bayes.fit(x, y, epochs=10, sample_epochs=2, verbose=0)
    assert bayes.from_logits is False
    assert any("Dropout" in n and "off while sampling" in n for n in bayes.notes)
    p = bayes.predict(x[:50])
    assert p.shape == (50, 1) and np.all((p >= 0) & (p <= 1))
    assert bayes.evaluate(x, y)["accuracy"] > 0.85


def test_gaussian_learned_noise_and_predictive_std():
    rng = np.random.default_rng(9)
    x = rng.uniform(-2, 2, size=(600, 1))
    y = 1.5 * x[:, 0] + 0.5 * rng.normal(size=600)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    bayes = BayesianModel(model, "gaussian", num_draws=40, learning_rate=0.05)
    bayes.fit(x, y, epochs=10, sample_epochs=4, verbose=0)
    sigma = bayes.noise_scale_draws
    assert sigma.shape == (40,) and abs(np.mean(sigma) - 0.5) < 0.08, np.mean(sigma)
    mean, std = bayes.predict(x[:5], return_std=True)
    assert mean.shape == (5, 1) and np.all(np.abs(std - 0.5) < 0.1)
    metrics = bayes.evaluate(x, y)
    assert set(metrics) == {"rmse", "nll"} and metrics["rmse"] < 0.6
    _, draws = bayes.predict(x[:5], return_draws=True)
    assert draws.shape == (40, 5, 1)


def test_callbacks_validation_and_errors():
    x, y = _blobs(200, 10)
    seen: list[str] = []

    class Record(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen.append("train_begin")

        def on_epoch_end(self, epoch, logs=None):
            seen.append(f"epoch_end:{epoch}:{sorted(logs)}")

        def on_train_end(self, logs=None):
            seen.append("train_end")

    bayes = BayesianModel(_mlp(), num_draws=5)
    with pytest.raises(ValueError, match="call `fit` first"):
        bayes.predict(x)
    bayes.fit(
        x, y, epochs=2, sample_epochs=2, validation_data=(x, y), callbacks=[Record()], verbose=0
    )
    assert seen[0] == "train_begin" and seen[-1] == "train_end"
    assert len([s for s in seen if s.startswith("epoch_end")]) == 4
    assert "val_accuracy" in seen[-2] and "val_loss" in seen[-2]
    assert "val_ece" in bayes.history.history

    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=0, min_delta=10.0)
    early = BayesianModel(_mlp(), num_draws=5)
    with pytest.warns(UserWarning, match="sampling runs its 3 epochs"):  # not cut short
        early.fit(x, y, epochs=5, sample_epochs=3, callbacks=[stop], verbose=0)
    assert any("MAP search stopped" in n for n in early.notes) and early.num_kept == 5

    with pytest.raises(ValueError, match="likelihood"):
        BayesianModel(_mlp(), "poisson")
    with pytest.raises(ValueError, match="noise_scale"):
        BayesianModel(_mlp(), "categorical", noise_scale=1.0)
    ds4 = tf.data.Dataset.from_tensor_slices((x, y, np.ones(200), np.ones(200))).batch(32)
    with pytest.raises(ValueError, match=r"\(x, y\) pairs or \(x, y, sample_weight\) triples"):
        BayesianModel(_mlp()).fit(ds4, verbose=0)


def test_epochs_zero_samples_around_a_model_trained_already():
    x, y = _blobs(400, 12)
    model = _mlp()
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(x.astype("float32"), y, batch_size=32, epochs=5, verbose=0)
    trained = [w.copy() for w in model.get_weights()]
    bayes = BayesianModel(model, num_draws=10)
    seen: list[int] = []
    numbers = keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: seen.append(e))
    bayes.fit(x, y, epochs=0, sample_epochs=2, callbacks=[numbers], verbose=0)
    # No MAP epoch ran (counted, not timed: the machine may be shared): the sampling
    # epochs are numbered from 0, also when a diverged start was restarted.
    assert seen[-2:] == [0, 1] and set(seen) <= {0, 1}
    for w, w0 in zip(model.get_weights(), trained):  # the model keeps its weights
        np.testing.assert_allclose(w, w0)
    assert bayes.evaluate(x, y)["accuracy"] > 0.8


def test_dict_inputs_from_a_dataset():
    x, y = _blobs(300, 11)
    a = keras.Input((3,), name="a")
    b = keras.Input((3,), name="b")
    keras.utils.set_random_seed(0)
    h = keras.layers.Dense(8, activation="relu")(keras.layers.Concatenate()([a, b]))
    model = keras.Model({"a": a, "b": b}, keras.layers.Dense(3)(h))
    feats = {"a": x[:, :3], "b": x[:, 3:]}
    ds = tf.data.Dataset.from_tensor_slices((feats, y)).shuffle(300, seed=0).batch(32)
    bayes = BayesianModel(model, num_draws=10, learning_rate=1e-2)
    bayes.fit(ds, epochs=4, sample_epochs=2, verbose=0)
    assert bayes.evaluate(feats, y)["accuracy"] > 0.8
    assert bayes.predict(ds).shape == (300, 3)


def _fashion_subset(n_train: int, n_test: int):
    from tfp_sgmcmc.models.data_files import load_mnist

    data = load_mnist(FASHION)
    return (
        data["x_train"][:n_train],
        data["y_train"][:n_train],
        data["x_test"][:n_test],
        data["y_test"][:n_test],
    )


@pytest.mark.slow
@pytest.mark.skipif(
    not os.path.isdir(FASHION),
    reason="Fashion-MNIST files absent (apt-get install dataset-fashion-mnist)",
)
def test_fashion_mnist_mlp_matches_keras_fit():
    x, y, x_test, y_test = _fashion_subset(10_000, 5_000)

    def make():
        keras.utils.set_random_seed(0)
        return keras.Sequential(
            [
                keras.Input((784,)),
                keras.layers.Dense(100, activation="relu"),
                keras.layers.Dense(10),
            ]
        )

    fit_acc = _keras_fit_accuracy(
        make,
        x,
        y,
        x_test,
        y_test,
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        epochs=5,
    )
    bayes = BayesianModel(make(), num_draws=50)
    bayes.fit(x, y, batch_size=32, epochs=5, verbose=0)
    metrics = bayes.evaluate(x_test, y_test)
    assert metrics["accuracy"] > fit_acc - 0.02, (metrics, fit_acc)


def test_blocks_of_steps_run_the_chain_of_single_steps():
    # A partial last batch (250 = 7 x 32 + 26), blocks cut at the kept draws and at the
    # epochs' ends: K steps per compiled call run the chain of one step per call.
    x, y = _blobs(250, 13)
    runs = {}
    for k in (1, None):
        bayes = BayesianModel(_mlp(), num_draws=6, jit_compile=False, steps_per_execution=k)
        bayes.fit(x, y, epochs=1, sample_epochs=2, verbose=0)
        runs[k] = bayes
    assert runs[1]._k == 1 and runs[None]._k == 8  # at most an epoch
    assert runs[None].step_size == runs[1].step_size
    for a, b in zip(runs[None].draws, runs[1].draws):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="steps_per_execution"):
        BayesianModel(_mlp(), steps_per_execution=0)
