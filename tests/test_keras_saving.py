"""Keeping a ``BayesianModel``: ``save`` / ``BayesianModel.load`` and reopened run
directories.

A saved posterior read back by a new Python process must predict exactly what it
predicted before saving (the same draws, model, likelihood, fixed BatchNormalization
statistics and compiled program): compared with ``np.array_equal``, not a tolerance.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import warnings

import h5py
import keras
import numpy as np
import pytest

from tfp_sgmcmc.keras import BayesianModel, KerasSaveError

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAST = dict(epochs=1, sample_epochs=1, verbose=0, batch_size=16)


def _data(n: int = 64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 3)).astype("float32")
    labels = (x[:, 0] + x[:, 1] > 0).astype("int32")
    target = (x @ np.array([1.0, -0.5, 0.2]) + 0.3 * rng.normal(size=n)).astype("float32")
    return x, labels, target


def _classifier() -> keras.Model:
    # BatchNormalization: its statistics are fixed while sampling and must be kept.
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(4),
            keras.layers.BatchNormalization(),
            keras.layers.Dense(2),
        ]
    )


def _regressor() -> keras.Model:
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A classifier with BatchNorm (draws in memory) and a learned-noise Gaussian fitted
    with a ``run_dir``."""
    x, labels, target = _data()
    clf = BayesianModel(_classifier(), "categorical", num_draws=5, jit_compile=False)
    clf.fit(x, labels, **FAST)
    run_dir = tmp_path_factory.mktemp("run") / "gaussian"
    reg = BayesianModel(
        _regressor(), "gaussian", num_draws=6, learning_rate=0.05, jit_compile=False
    )
    with warnings.catch_warnings():  # one sampling epoch: the noise has not converged
        warnings.simplefilter("ignore", UserWarning)
        reg.fit(x, target, run_dir=run_dir, **FAST)
    return clf, reg, run_dir


def _predictions(clf, reg, x, labels, target) -> dict[str, np.ndarray]:
    """What the two fitted models predict and score on the training data."""
    mean, lower, upper, per_draw = reg.predict(x, interval=0.9, return_draws=True)
    return {
        "clf": clf.predict(x),
        "clf_draws": clf.predict(x, return_draws=True)[1],
        "clf_eval": np.array(list(clf.evaluate(x, labels).values())),
        "reg_mean": mean,
        "reg_lower": lower,
        "reg_upper": upper,
        "reg_draws": per_draw,
        "reg_sigma": reg.noise_scale_draws,
        "reg_eval": np.array(list(reg.evaluate(x, target).values())),
        "where": np.array([clf.run_dir is None, reg.draws is None, clf.num_kept, reg.num_kept]),
    }


def _saved_pair(fitted, tmp_path):
    clf, _, run_dir = fitted
    saved = tmp_path / "classifier"
    clf.save(saved)
    assert sorted(os.listdir(saved)) == ["bayesian_model.json", "model.keras", "samples.h5"]
    # The run directory of a fit is a saved model already: reopened as it is.
    assert {"bayesian_model.json", "model.keras", "samples.h5"} <= set(os.listdir(run_dir))
    manifest = json.loads((saved / "bayesian_model.json").read_text())
    assert manifest["format"] == "tfp_sgmcmc.keras.BayesianModel"
    assert manifest["format_version"] == 1 and manifest["likelihood"] == "categorical"
    with h5py.File(saved / "samples.h5", "r") as f:
        assert len(f["statistics"]) == 2  # BatchNorm's moving mean and variance
    return saved, run_dir


def _assert_same(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key in want:
        assert np.array_equal(got[key], want[key]), key


def test_a_saved_posterior_predicts_the_same_when_loaded(fitted, tmp_path):
    clf, reg, _ = fitted
    saved, run_dir = _saved_pair(fitted, tmp_path)
    x, labels, target = _data()
    back_clf, back_reg = BayesianModel.load(saved), BayesianModel.load(run_dir)
    assert back_reg.run_dir == os.fspath(run_dir)
    _assert_same(
        _predictions(back_clf, back_reg, x, labels, target),
        _predictions(clf, reg, x, labels, target),
    )


_RELOAD = """
import sys
import numpy as np
from tfp_sgmcmc.keras import BayesianModel

tests, saved, run_dir, data, out = sys.argv[1:]
sys.path.insert(0, tests)
from test_keras_saving import _predictions

x, labels, target = (np.load(data)[k] for k in ("x", "labels", "target"))
np.savez(out, **_predictions(BayesianModel.load(saved), BayesianModel.load(run_dir),
                             x, labels, target))
"""


@pytest.mark.slow
def test_a_saved_posterior_predicts_the_same_in_a_new_process(fitted, tmp_path):
    # Slow tier: a new process imports TensorFlow (about 10 s); the test above is its fast
    # counterpart, loading in this process.
    clf, reg, _ = fitted
    saved, run_dir = _saved_pair(fitted, tmp_path)
    x, labels, target = _data()
    np.savez(tmp_path / "data.npz", x=x, labels=labels, target=target)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    out = tmp_path / "out.npz"
    args = [str(ROOT / "tests"), str(saved), str(run_dir), str(tmp_path / "data.npz"), str(out)]
    res = subprocess.run(
        [sys.executable, "-c", _RELOAD, *args],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    got = np.load(out)
    _assert_same({k: got[k] for k in got.files}, _predictions(clf, reg, x, labels, target))


def test_load_keeps_the_settings_and_what_fit_chose(fitted, tmp_path):
    clf, _, _ = fitted
    clf.save(tmp_path / "m")
    back = BayesianModel.load(tmp_path / "m")
    for name in ("likelihood", "prior_scale", "num_draws", "seed", "from_logits",
                 "jit_compile", "step_size", "num_kept", "notes", "timings"):  # fmt: skip
        assert getattr(back, name) == getattr(clf, name), name
    for got, want in zip(back.draws, clf.draws):
        assert np.array_equal(got, want)
    # Saving the loaded model again gives the same directory's contents.
    back.save(tmp_path / "again")
    assert np.array_equal(BayesianModel.load(tmp_path / "again").predict(_data()[0]),
                          clf.predict(_data()[0]))  # fmt: skip


@pytest.fixture(scope="module")
def saved_dir(fitted, tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "model"
    fitted[0].save(path)
    return path


def _broken(saved_dir, tmp_path, name, damage):
    path = tmp_path / name
    shutil.copytree(saved_dir, path)
    damage(path)
    return path


def _write(rel: str, data: bytes):
    return lambda p: (p / rel).write_bytes(data)


def _manifest(**changes):
    def damage(p):
        m = json.loads((p / "bayesian_model.json").read_text())
        m.update(changes)
        (p / "bayesian_model.json").write_text(json.dumps(m))

    return damage


DAMAGES = [
    ("no_manifest", lambda p: (p / "bayesian_model.json").unlink(), "no bayesian_model.json"),
    ("bad_json", _write("bayesian_model.json", b"{not json"), "cannot be read"),
    ("not_ours", _write("bayesian_model.json", b"[1, 2]"), "not a BayesianModel manifest"),
    ("future", _manifest(format_version=99), "format version 99"),
    ("no_settings", _manifest(settings={"prior_scale": 1.0, "bogus": 2}), "settings"),
    ("no_model", lambda p: (p / "model.keras").unlink(), "model.keras is missing"),
    ("bad_model", _write("model.keras", b"PK not a zip"), "Keras cannot load"),
    ("no_draws", lambda p: (p / "samples.h5").unlink(), "samples.h5 .* missing"),
    ("bad_draws", _write("samples.h5", b"\x00" * 64), "samples.h5 cannot be read"),
    ("unknown_likelihood", _manifest(likelihood="poisson"), "likelihood entry"),
    ("unregistered", _manifest(likelihood={"registered": "nowhere>f"}), "not registered"),
]


@pytest.mark.parametrize("name, damage, match", DAMAGES, ids=[d[0] for d in DAMAGES])
def test_load_names_a_missing_damaged_or_unknown_directory(saved_dir, tmp_path, name, damage,
                                                           match):  # fmt: skip
    path = _broken(saved_dir, tmp_path, name, damage)
    with pytest.raises(KerasSaveError, match=match):
        BayesianModel.load(path)


def test_load_names_a_path_that_is_not_a_saved_model(tmp_path):
    with pytest.raises(KerasSaveError, match="does not exist"):
        BayesianModel.load(tmp_path / "nothing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(KerasSaveError, match="is a file"):
        BayesianModel.load(tmp_path / "file")
    with pytest.raises(KerasSaveError, match="no bayesian_model.json"):
        BayesianModel.load(tmp_path)


def test_save_refuses_what_it_cannot_keep(fitted, tmp_path):
    clf, _, _ = fitted
    with pytest.raises(ValueError, match="call `fit` first"):
        BayesianModel(_classifier(), "categorical").save(tmp_path / "unfitted")
    (tmp_path / "file").write_text("x")
    with pytest.raises(KerasSaveError, match="is a file"):
        clf.save(tmp_path / "file")
    foreign = tmp_path / "driver_run"
    foreign.mkdir()
    with h5py.File(foreign / "samples.h5", "w") as f:
        f.attrs["writer"] = "someone else"
    with pytest.raises(KerasSaveError, match="did not write"):
        clf.save(foreign)


def test_pickle_and_deepcopy_point_to_save(fitted):
    clf, _, _ = fitted
    for copier in (pickle.dumps, copy.deepcopy):
        with pytest.raises(KerasSaveError, match=r"bayes\.save\(path\)"):
            copier(clf)


@keras.saving.register_keras_serializable(package="tests_keras_saving")
def _bernoulli_log_lik(y, logits):
    import tensorflow as tf

    y = tf.cast(tf.reshape(y, [-1]), logits.dtype)
    logit = tf.reshape(logits, [-1])
    return y * logit - tf.nn.softplus(logit)


def test_a_callable_likelihood_is_kept_by_its_registered_name_or_refused(tmp_path):
    x, labels, _ = _data()
    keras.utils.set_random_seed(2)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    unregistered = BayesianModel(model, lambda y, out: _bernoulli_log_lik(y, out), num_draws=3,
                                 jit_compile=False)  # fmt: skip
    unregistered.fit(x, labels, run_dir=tmp_path / "run", **FAST)
    # Refused at save, naming the fix; the run directory keeps its draws, with a note.
    with pytest.raises(KerasSaveError, match="register_keras_serializable"):
        unregistered.save(tmp_path / "lambda")
    assert not (tmp_path / "lambda").exists()
    assert any("cannot be reopened" in note for note in unregistered.notes)
    with pytest.raises(KerasSaveError, match="no bayesian_model.json"):
        BayesianModel.load(tmp_path / "run")

    registered = BayesianModel(model, _bernoulli_log_lik, num_draws=3, jit_compile=False)
    registered.fit(x, labels, **FAST)
    registered.save(tmp_path / "named")
    manifest = json.loads((tmp_path / "named" / "bayesian_model.json").read_text())
    assert manifest["likelihood"] == {"registered": "tests_keras_saving>_bernoulli_log_lik"}
    back = BayesianModel.load(tmp_path / "named")
    assert back.likelihood is _bernoulli_log_lik
    assert np.array_equal(back.predict(x), registered.predict(x))
    assert back.evaluate(x, labels) == registered.evaluate(x, labels)


def test_a_run_dir_fit_again_replaces_its_draws_and_reopens(tmp_path):
    # The second fit into the same run directory replaces the first's draws (its own
    # samples.h5 is not taken for a foreign one), and the directory reopens on the new.
    x, _, target = _data()
    run_dir = tmp_path / "run"
    bayes = BayesianModel(_regressor(), "gaussian", noise_scale=0.3, num_draws=4,
                          jit_compile=False)  # fmt: skip
    bayes.fit(x, target, run_dir=run_dir, **FAST)
    bayes.seed = 5
    bayes.fit(x, target, run_dir=run_dir, **FAST)
    back = BayesianModel.load(run_dir)
    assert back.run_dir == os.fspath(run_dir) and back.draws is None
    assert np.array_equal(back.predict(x), bayes.predict(x))
