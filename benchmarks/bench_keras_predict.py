"""``BayesianModel.predict`` (the draws' forward passes batched) beside Keras's
``model.predict`` run once per draw, in one run.

For each model (``--models``): a 784-100-10 MLP and a small convnet (Conv2D 32,
MaxPool, Conv2D 64, MaxPool, Flatten, Dropout 0.5, Dense 10 softmax, the Keras MNIST
example's). ``BayesianModel(model).fit`` runs on ``--n-train`` random images (no MAP
epochs, one sampling epoch of batch 8, ``--num-draws`` draws); timings do not depend
on the pixel values. Then, on ``--n-test`` inputs, the fastest of ``--repeats`` timings
(after one warm-up call each) of:

* ``batched``: ``bayes.predict(x)``, many draws per compiled call (a loop over the
  stacked draws inside the program);
* ``one_draw_per_call``: the same with one draw per compiled call (the
  ``_PREDICT_BYTES`` budget set to 1 byte), as ``predict`` ran before batching;
* ``keras_predict_x_draws``: for each draw, its weights assigned to the model and
  ``model.predict(x)`` called (compiled, past its first call), the per-draw
  probabilities averaged: what a Keras user writes by hand;
* ``keras_predict_once``: one ``model.predict(x)``, the cost of a single network.

``ratios`` divides each within the run: ``keras_x_draws_over_batched`` above 1 means the
batched predict is faster than ``model.predict`` x draws; ``batched_over_one_predict`` is
the batched predict's cost in single ``model.predict`` calls. The batched and per-draw
predictions are checked equal (``max_abs_diff``). One JSON document on stdout (progress
on stderr), the load average before and after. Command for the docs' table::

    python benchmarks/bench_keras_predict.py --num-draws 20 --n-test 2000 --repeats 3 \\
        --out keras_predict.json
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import dump_json, environment, load_average, log


def _model(name: str):
    import keras

    if name == "mlp":
        return keras.Sequential(
            [
                keras.Input((784,)),
                keras.layers.Dense(100, activation="relu"),
                keras.layers.Dense(10),
            ]
        )
    if name == "convnet":
        return keras.Sequential(
            [
                keras.Input((28, 28, 1)),
                keras.layers.Conv2D(32, 3, activation="relu"),
                keras.layers.MaxPooling2D(2),
                keras.layers.Conv2D(64, 3, activation="relu"),
                keras.layers.MaxPooling2D(2),
                keras.layers.Flatten(),
                keras.layers.Dropout(0.5),
                keras.layers.Dense(10, activation="softmax"),
            ]
        )
    raise ValueError(f"unknown model {name!r}")


def _time(fn, repeats: int) -> tuple[float, object]:
    """The fastest of ``repeats`` calls after a warm-up (compilation and tracing
    excluded): on a shared machine the other processes only ever add time."""
    out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def _bench(name: str, args: argparse.Namespace) -> dict:
    import keras

    import tfp_sgmcmc.keras._model as keras_model_module
    from tfp_sgmcmc.keras import BayesianModel

    rng = np.random.default_rng(0)
    shape = (784,) if name == "mlp" else (28, 28, 1)
    x_train = rng.uniform(0, 1, (args.n_train, *shape)).astype("float32")
    y_train = rng.integers(0, 10, args.n_train)
    x_test = rng.uniform(0, 1, (args.n_test, *shape)).astype("float32")
    keras.utils.set_random_seed(0)
    model = _model(name)
    bayes = BayesianModel(model, num_draws=args.num_draws, seed=0)
    t0 = time.perf_counter()
    bayes.fit(x_train, y_train, batch_size=8, epochs=0, sample_epochs=1, verbose=0)
    log(f"{name}: fit {time.perf_counter() - t0:.1f} s, {bayes.num_kept} draws")
    draws = bayes.num_kept
    bs = args.batch_size

    t_batched, p_batched = _time(lambda: bayes.predict(x_test, batch_size=bs), args.repeats)
    per_call = bayes._draws_per_call(min(bs, args.n_test), draws)
    log(f"{name}: batched {t_batched:.3f} s ({per_call} draws per call)")

    saved = keras_model_module._PREDICT_BYTES
    keras_model_module._PREDICT_BYTES = 1
    try:
        t_single, p_single = _time(lambda: bayes.predict(x_test, batch_size=bs), args.repeats)
    finally:
        keras_model_module._PREDICT_BYTES = saved
    log(f"{name}: one draw per call {t_single:.3f} s")

    for var, value in zip(model.non_trainable_variables, bayes._non_trainable):
        var.assign(value)
    from_logits = bayes.from_logits

    def keras_loop() -> np.ndarray:
        total = 0.0
        for s in range(draws):
            for var, part in zip(model.trainable_variables, bayes.draws):
                var.assign(part[s])
            out = model.predict(x_test, batch_size=bs, verbose=0).astype(np.float64)
            if from_logits:
                out = np.exp(out - out.max(-1, keepdims=True))
                out /= out.sum(-1, keepdims=True)
            total = total + out
        return total / draws

    t_keras, p_keras = _time(keras_loop, args.repeats)
    log(f"{name}: model.predict x {draws} draws {t_keras:.3f} s")
    t_once, _ = _time(lambda: model.predict(x_test, batch_size=bs, verbose=0), args.repeats)
    return {
        "draws": draws,
        "draws_per_call": per_call,
        "seconds": {
            "batched": t_batched,
            "one_draw_per_call": t_single,
            "keras_predict_x_draws": t_keras,
            "keras_predict_once": t_once,
        },
        "ratios": {
            "keras_x_draws_over_batched": t_keras / t_batched,
            "one_draw_per_call_over_batched": t_single / t_batched,
            "batched_over_one_predict": t_batched / t_once,
            "one_draw_per_call_over_one_predict": t_single / t_once,
        },
        "max_abs_diff": {
            "batched_vs_one_draw_per_call": float(np.abs(p_batched - p_single).max()),
            "batched_vs_keras": float(np.abs(p_batched - p_keras).max()),
        },
        "jit_compile": bayes.jit_compile,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp,convnet")
    parser.add_argument("--num-draws", type=int, default=20)
    parser.add_argument("--n-train", type=int, default=512)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    result = {
        "benchmark": "keras_predict",
        "args": vars(args),
        "environment": environment(),
        "load_before": load_average(),
        "models": {},
    }
    for name in args.models.split(","):
        result["models"][name] = _bench(name, args)
    result["load_after"] = load_average()
    dump_json(result, args.out)


if __name__ == "__main__":
    main()
