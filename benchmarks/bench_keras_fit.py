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
  compilation and the XLA probe included), the posterior-predictive accuracy, NLL and
  ECE, and its notes (XLA choice, step size).

Steps/s are compared side by side: before each sampling epoch a callback runs one epoch
of Keras's ``fit`` on a clone of the model (compiled, past its first epoch), so each
sampling epoch has a Keras epoch under the same load beside it. Reported for both: wall
steps/s over those epochs, steps/s per window of 64 steps (median and 90th percentile),
and process CPU seconds per step (the least sensitive to other processes on a shared
machine); ``ratios`` divides the sampler's by Keras's (CPU: Keras's per-step CPU
over the sampler's, so above 1 means the sampler does less work per step). The Keras
epochs are subtracted from the ``BayesianModel`` times.

One JSON document on stdout (progress on stderr), with the load average before and
after and at each sampling epoch. Command for the docs' table::

    python benchmarks/bench_keras_fit.py --n-train 60000 --epochs 2 --batch-size 128 \
        --num-draws 20 --out keras_fit.json
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
        return keras.Sequential(
            [
                keras.Input((784,)),
                keras.layers.Dense(100, activation="relu"),
                keras.layers.Dense(10),
            ]
        ), True
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
        ), False
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


def _keras_fit(model, init, logits, x, y, xt, yt, args) -> dict:
    import keras

    model.set_weights(init)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=logits),
        jit_compile=args.keras_jit,
        steps_per_execution=args.keras_steps_per_execution,
    )
    timer = _StepTimer()
    t0 = time.perf_counter()
    model.fit(
        x, y, batch_size=args.batch_size, epochs=args.epochs, verbose=0, callbacks=[timer.callback]
    )
    fit_time = time.perf_counter() - t0
    out = model.predict(xt, batch_size=1024, verbose=0)
    if logits:
        out = np.exp(out - out.max(1, keepdims=True))
        out /= out.sum(1, keepdims=True)
    return {"seconds": fit_time, "steps_per_second": timer.rate(), **_metrics(out, yt)}


WINDOW = 64  # steps per timing window


class _Windows:
    """Wall-clock steps/s over windows of at least ``WINDOW`` steps, and process CPU
    seconds per step, for one phase (its steps reported as they end)."""

    def __init__(self):
        self.rates: list[float] = []
        self.steps = 0
        self.cpu = 0.0
        self.wall = 0.0

    def start(self):
        self._t = self._w0 = time.perf_counter()
        self._c = time.process_time()
        self._n = 0

    def ended(self, steps: int):
        self._n += steps
        if self._n >= WINDOW:
            t = time.perf_counter()
            self.rates.append(self._n / (t - self._w0))
            self._w0, self._n = t, 0

    def stop(self, steps: int):
        self.steps += steps
        self.wall += time.perf_counter() - self._t
        self.cpu += time.process_time() - self._c

    def summary(self) -> dict:
        return {
            "steps_per_second": self.steps / self.wall,
            "cpu_seconds_per_step": self.cpu / self.steps,
            "window_steps_per_second_p90": float(np.percentile(self.rates, 90)),
            "window_steps_per_second_median": float(np.median(self.rates)),
            "windows": len(self.rates),
        }


class _Interleave:
    """A ``BayesianModel.fit`` callback that runs one epoch of Keras's ``fit`` (on a
    clone of the model) before each sampling epoch, so that both are timed under the
    same load: wall steps/s per epoch and per window of ``WINDOW`` steps, and process
    CPU seconds per step."""

    def __init__(self, clone, x, y, args, map_epochs: int):
        import keras

        outer = self
        self.keras = _Windows()
        self.sampling = _Windows()
        self.keras_rates: list[float] = []
        self.sampling_rates: list[float] = []
        self.keras_seconds = 0.0
        self.loads: list[list[float]] = []

        class KerasSteps(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if batch == 0:
                    outer.keras.start()
                    self.t0 = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                outer.keras.ended(1)

            def on_epoch_end(self, epoch, logs=None):
                steps = self.params["steps"]
                outer.keras.stop(steps)
                outer.keras_rates.append(steps / (time.perf_counter() - self.t0))

        class CB(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                if epoch < map_epochs:
                    return
                t = time.perf_counter()
                clone.fit(
                    x, y, batch_size=args.batch_size, epochs=1, verbose=0, callbacks=[KerasSteps()]
                )
                outer.loads.append(load_average())
                outer.keras_seconds += time.perf_counter() - t
                self.last = -1
                self.t0 = time.perf_counter()
                outer.sampling.start()

            def on_train_batch_end(self, batch, logs=None):
                if hasattr(self, "t0"):
                    outer.sampling.ended(batch - self.last)
                    self.last = batch

            def on_epoch_end(self, epoch, logs=None):
                if epoch >= map_epochs:
                    outer.sampling.stop(self.last + 1)
                    outer.sampling_rates.append((self.last + 1) / (time.perf_counter() - self.t0))

        self.callback = CB()


def _bayes_fit(model, init, logits, x, y, xt, yt, args) -> dict:
    import keras

    from tfp_sgmcmc.keras import BayesianModel

    # The clone that runs Keras's epochs between the sampling epochs, compiled and
    # past its first (compiling) epoch before the sampler starts.
    clone = keras.models.clone_model(model)
    clone.set_weights(init)
    clone.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=logits),
        jit_compile=args.keras_jit,
        steps_per_execution=args.keras_steps_per_execution,
    )
    clone.fit(x, y, batch_size=args.batch_size, epochs=1, verbose=0)
    inter = _Interleave(clone, x, y, args, args.epochs)

    model.set_weights(init)
    extra = (
        {}
        if args.steps_per_execution is None
        else {"steps_per_execution": args.steps_per_execution}
    )
    bayes = BayesianModel(model, num_draws=args.num_draws, seed=args.seed, **extra)
    t0 = time.perf_counter()
    bayes.fit(
        x,
        y,
        batch_size=args.batch_size,
        epochs=args.epochs,
        sample_epochs=args.sample_epochs,
        verbose=0,
        callbacks=[inter.callback],
    )
    first_posterior = time.perf_counter() - t0 - inter.keras_seconds
    probs = bayes.predict(xt)
    timings = dict(bayes.timings)
    timings["sampling"] -= inter.keras_seconds
    timings["total"] -= inter.keras_seconds
    ratios = [b / k for b, k in zip(inter.sampling_rates, inter.keras_rates)]
    ks, bs = inter.keras.summary(), inter.sampling.summary()
    return {
        "time_to_first_posterior": first_posterior,
        "sampling_steps_per_second_per_epoch": inter.sampling_rates,
        "interleaved_keras_steps_per_second_per_epoch": inter.keras_rates,
        "steps_per_second_ratio_per_epoch": ratios,
        "interleaved_keras": ks,
        "sampling": bs,
        "ratios": {
            "steps_per_second": bs["steps_per_second"] / ks["steps_per_second"],
            "window_p90": bs["window_steps_per_second_p90"] / ks["window_steps_per_second_p90"],
            "window_median": (
                bs["window_steps_per_second_median"] / ks["window_steps_per_second_median"]
            ),
            "cpu_per_step_keras_over_sampling": (
                ks["cpu_seconds_per_step"] / bs["cpu_seconds_per_step"]
            ),
        },
        "load_per_epoch": inter.loads,
        "timings": timings,
        "step_size": bayes.step_size,
        "jit_compile": bayes.jit_compile,
        "notes": bayes.notes,
        **_metrics(probs, yt),
    }


def run(name: str, data: dict, args: argparse.Namespace) -> dict:
    import keras

    x, y, xt, yt = data["x"], data["y"], data["xt"], data["yt"]
    if name == "convnet":
        x, xt = x.reshape(-1, 28, 28, 1), xt.reshape(-1, 28, 28, 1)
    keras.utils.set_random_seed(args.seed)
    model, logits = _models(name)
    init = [w.copy() for w in model.get_weights()]
    log(f"[{name}] keras fit, {args.epochs} epochs")
    keras_row = _keras_fit(model, init, logits, x, y, xt, yt, args)
    log(f"[{name}] keras: {keras_row}")
    log(f"[{name}] BayesianModel fit, {args.epochs} epochs + sampling, Keras epochs between")
    bayes_row = _bayes_fit(model, init, logits, x, y, xt, yt, args)
    bayes_row["time_ratio_to_keras_fit"] = (
        bayes_row["time_to_first_posterior"] / keras_row["seconds"]
    )
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
    p.add_argument("--keras-steps-per-execution", type=int, default=1)
    p.add_argument(
        "--steps-per-execution",
        type=int,
        default=None,
        help="BayesianModel's steps per compiled call (default: its own choice)",
    )
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
    result = {
        "environment": environment(),
        "load_before": load_average(),
        "arguments": {k: v for k, v in vars(args).items()},
        "models": {},
    }
    for name in args.models.split(","):
        result["models"][name] = run(name, data, args)
    result["load_after"] = load_average()
    dump_json(result, args.out)


if __name__ == "__main__":
    main()
