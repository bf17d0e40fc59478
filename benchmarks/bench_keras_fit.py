"""``BayesianModel.fit`` beside Keras's ``model.fit``, side by side in one run.

For each model (``--models``): a 784-100-10 MLP and the Keras MNIST convnet
(Conv2D 32, MaxPool, Conv2D 64, MaxPool, Flatten, Dropout 0.5, Dense 10 softmax), on
Fashion-MNIST (the Debian ``dataset-fashion-mnist`` files, ``--data``; the first
``--n-train`` training and ``--n-test`` test images, pixels / 255). Both start from the
same initial weights and see the same batch size. Reported per model:

* ``keras_fit``: ``model.fit(epochs=E)`` (Adam 1e-3, ``jit_compile`` as ``--keras-jit``):
  wall time, train steps/s over the epochs after the first (compilation excluded),
  and test accuracy, NLL and ECE of the trained network;
* ``bayesian_model``: ``BayesianModel(model).fit(epochs=E)`` (E epochs of Adam to the MAP,
  then ``sample_epochs`` of sampling): time to the first posterior (the whole ``fit``,
  compilation and the XLA probe included), sampling steps/s, the posterior-predictive
  accuracy, NLL and ECE, and its notes (XLA choice, step size).

One JSON document on stdout (progress on stderr), with the load average before and
after. Command for the docs' table::

    python benchmarks/bench_keras_fit.py --n-train 60000 --epochs 3 --out keras_fit.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from _common import dump_json, environment, load_average, log

FASHION = "/usr/share/datasets/fashion-mnist"


def _models(name: str):
    import keras

    if name == "mlp":
        return keras.Sequential([
            keras.Input((784,)), keras.layers.Dense(100, activation="relu"),
            keras.layers.Dense(10),
        ]), True
    if name == "convnet":
        return keras.Sequential([
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"), keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(64, 3, activation="relu"), keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(), keras.layers.Dropout(0.5),
            keras.layers.Dense(10, activation="softmax"),
        ]), False
    raise ValueError(f"unknown model {name!r}")


def _metrics(probs: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from tfp_sgmcmc.diagnostics.calibration import predictive_metrics

    m = predictive_metrics(probs.astype(np.float64), y)
    return {"accuracy": m["accuracy"], "nll": m["log_loss"], "ece": m["ece"]}


class _StepTimer:
    """Times train batches after the first epoch (compilation excluded)."""

    def __init__(self):
        import keras

        outer = self
        self.t0 = None
        self.steps = 0

        class CB(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                if epoch == 1:
                    outer.t0 = time.perf_counter()

            def on_train_end(self, logs=None):
                outer.t1 = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                if outer.t0 is not None:
                    outer.steps += 1

        self.callback = CB()

    def rate(self) -> float:
        return self.steps / (self.t1 - self.t0) if self.t0 is not None else float("nan")


def run(name: str, data: dict, args: argparse.Namespace) -> dict:
    import keras

    from tfp_sgmcmc.keras import BayesianModel

    x, y, xt, yt = data["x"], data["y"], data["xt"], data["yt"]
    if name == "convnet":
        x, xt = x.reshape(-1, 28, 28, 1), xt.reshape(-1, 28, 28, 1)
    keras.utils.set_random_seed(args.seed)
    model, logits = _models(name)
    init = [w.copy() for w in model.get_weights()]

    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=logits),
        jit_compile=args.keras_jit,
    )
    timer = _StepTimer()
    log(f"[{name}] keras fit, {args.epochs} epochs")
    t0 = time.perf_counter()
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, verbose=0,
              callbacks=[timer.callback])
    fit_time = time.perf_counter() - t0
    out = model.predict(xt, batch_size=1024, verbose=0)
    if logits:
        out = np.exp(out - out.max(1, keepdims=True))
        out /= out.sum(1, keepdims=True)
    keras_row = {"seconds": fit_time, "steps_per_second": timer.rate(), **_metrics(out, yt)}
    log(f"[{name}] keras: {keras_row}")

    model.set_weights(init)
    bayes = BayesianModel(model, num_draws=args.num_draws, seed=args.seed)
    log(f"[{name}] BayesianModel fit, {args.epochs} epochs + sampling")
    t0 = time.perf_counter()
    bayes.fit(x, y, batch_size=args.batch_size, epochs=args.epochs,
              sample_epochs=args.sample_epochs, verbose=0)
    first_posterior = time.perf_counter() - t0
    steps = args.sample_epochs_resolved * (-(-len(x) // args.batch_size))
    probs = bayes.predict(xt)
    bayes_row = {
        "time_to_first_posterior": first_posterior,
        "ratio_to_keras_fit": first_posterior / fit_time,
        "sampling_steps_per_second": steps / bayes.timings["sampling"],
        "steps_per_second_ratio": (steps / bayes.timings["sampling"]) / timer.rate(),
        "timings": bayes.timings,
        "step_size": bayes.step_size,
        "jit_compile": bayes.jit_compile,
        "notes": bayes.notes,
        **_metrics(probs, yt),
    }
    log(f"[{name}] bayes: {bayes_row}")
    return {"keras_fit": keras_row, "bayesian_model": bayes_row}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=FASHION)
    p.add_argument("--models", default="mlp,convnet")
    p.add_argument("--n-train", type=int, default=60_000)
    p.add_argument("--n-test", type=int, default=10_000)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--sample-epochs", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--num-draws", type=int, default=50)
    p.add_argument("--keras-jit", default="auto", choices=["auto", "true", "false"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    args.keras_jit = {"auto": "auto", "true": True, "false": False}[args.keras_jit]
    args.sample_epochs_resolved = args.sample_epochs or max(2, args.epochs)
    if not os.path.isdir(args.data):
        sys.exit(f"no Fashion-MNIST at {args.data} (apt-get install dataset-fashion-mnist)")
    from tfp_sgmcmc.models.data_files import load_mnist

    raw = load_mnist(args.data)
    data = {
        "x": raw["x_train"][: args.n_train].astype(np.float32),
        "y": raw["y_train"][: args.n_train],
        "xt": raw["x_test"][: args.n_test].astype(np.float32),
        "yt": raw["y_test"][: args.n_test],
    }
    result = {"environment": environment(), "load_before": load_average(),
              "arguments": {k: v for k, v in vars(args).items()}, "models": {}}
    for name in args.models.split(","):
        result["models"][name] = run(name, data, args)
    result["load_after"] = load_average()
    dump_json(result, args.out)


if __name__ == "__main__":
    main()
