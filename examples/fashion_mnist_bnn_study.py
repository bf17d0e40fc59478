"""The MAMBA paper's 784-100-10 BNN on Fashion-MNIST against Keras baselines, at equal time.

The network of the paper's §4.3 (``tfp_sgmcmc/models/mnist_bnn.py``: softmax hidden
layer, N(0, 1) priors, 79,510 weights) on the real Fashion-MNIST images (60,000 training,
10,000 test). Each of the paper's six SG-MCMC samplers (SGLD, SGLD-CV, SGHMC,
SGHMC-CV, SGNHT, SGNHT-CV; a -CV sampler on the control-variate estimator centred at
the MAP) is

1. started from a MAP (Adam), then
2. tuned by MAMBA-KSD (η = 3, a budget in per-example gradient evaluations) over the
   paper's grid: log10 ε ∈ {−2, −2.5, …, −7.5} × batch {100%, 10%, 1%} [× L ∈ {5, 10}
   for SGHMC(-CV)]; SGNHT(-CV) on the paper's rerun grid log10 ε ∈ {−5, …, −7.5}, as
   its larger steps diverge on this network, then
3. run with the chosen arm from the MAP until its wall-clock budget ``--seconds`` (MAP and
   tuning included) is spent; the prediction is the Bayesian model average of its samples.

The baselines a Keras user would try get the same wall time as the slowest SG-MCMC run
(MAP and tuning included), on the same network:

* **Keras MAP**: ``model.fit`` with Adam and the N(0, 1) prior as L2 weight decay;
* **MC dropout**: the same network with dropout after the hidden layer, predictions
  averaged over dropout masks at test time;
* **deep ensemble**: five independently initialised MAP networks, each trained for a
  fifth of the time, their predictive probabilities averaged.

Every method reports test accuracy, negative log-likelihood (NLL), expected calibration
error (ECE, 10 equal-width bins, ``sg.expected_calibration_error``) and its wall seconds
(training, tuning and sampling; test-set predictions are not counted), and the test
accuracy and NLL along the way (the figure).

Run::

    python examples/fashion_mnist_bnn_study.py --quick   # a subset, trimmed grid, minutes
    python examples/fashion_mnist_bnn_study.py           # the full study (about 30 minutes)

Writes ``studies/fashion_mnist_bnn.md``, ``studies/fashion_mnist_bnn.json`` and
``figures/fashion_mnist_bnn.png`` under ``--out`` (default ``out/fashion_mnist_bnn/``),
or in ``docs/`` with ``--write-docs``; ``--from-json FILE`` redraws the page and figure
from a saved JSON. Without the Fashion-MNIST files (``--data``) it prints why and exits.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import _cli
import numpy as np
import tensorflow as tf
from _paper_tables import SAMPLERS, LoadSampler, arm_short, kernel_class

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning
from tfp_sgmcmc.models import mnist_bnn as mb
from tfp_sgmcmc.tuning.runner import gradient_cost_per_step

STUDY_NAME = "fashion_mnist_bnn"
SCRIPT = "python examples/fashion_mnist_bnn_study.py"
#: The model's section of docs/models.md, as the study page (in docs/studies/) links it.
MODEL_PAGE = "../" + "models.md#modelsmnist_bnn-the-784-100-10-bnn-the-papers-43"
#: Where the Fashion-MNIST IDX files are looked for by default.
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
IDX_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)
#: Per-method wall-clock budget of an SG-MCMC run in seconds (full, quick).
DEFAULT_SECONDS = (180.0, 25.0)
#: MAMBA's total budget T in per-example gradient evaluations (full, quick).
DEFAULT_MAMBA_GRADIENTS = (2e6, 6e4)
#: Share of an SG-MCMC run's seconds spent on its MAP (Adam at a 1% batch, in calls of
#: ``MAP_CHUNK`` steps until that time has passed).
MAP_FRACTION = 0.15
MAP_CHUNK = (250, 100)
#: Training subset and test subset of the quick run.
QUICK_SIZES = (10_000, 2_000)
#: MAMBA's KSD: this many evenly spaced samples per arm-round, scored on this share of
#: the training images (scaled by N/n) rather than all of them.
KSD_SAMPLES = 3
KSD_SUBSET = 0.1
MC_DROPOUT_RATE = 0.2
MC_DROPOUT_MASKS = 30
ENSEMBLE_SIZE = 5
KERAS_BATCH = 128
KERAS_LEARNING_RATE = 1e-3
NUM_BINS = 10
SAMPLER_NAMES = tuple(SAMPLERS)
#: The paper's grid for the network (§4.3): log10 ε from ``STEP_GRID[0]`` down to
#: ``STEP_GRID[1]`` every 0.5 (12 values), SGNHT(-CV) on its rerun grid (its large steps
#: diverged on the BNN), batch fractions, SGHMC's leapfrog counts; and the quick run's.
STEP_GRID = (-2.0, -7.5)
SGNHT_STEP_GRID = (-5.0, -7.5)
BATCH_FRACTIONS = (1.0, 0.1, 0.01)
LEAPFROGS = (5, 10)
QUICK_STEP_GRID = (-4.0, -6.0)
QUICK_BATCH_FRACTIONS = (0.1, 0.01)
QUICK_LEAPFROGS = (5,)
#: XLA-compile the tuning and sampling programs (never in the quick run). Off: the
#: full grid needs a program per batch size [× L], and XLA's compile of each costs
#: more than it saves in a run of a few minutes. The KSD is always XLA-compiled (as a
#: graph it is many times slower). The most steps one compiled call runs (each
#: program holds a sample buffer of that many states):
XLA = False
STEPS_PER_CALL = 250


def _parser() -> Any:
    ap = _cli.parser(
        STUDY_NAME, __doc__.split("\n\n")[0], "a 10,000-image subset (minutes, mostly compiling)"
    )
    ap.add_argument("--data", default=DEFAULT_DATA, help="folder of the Fashion-MNIST IDX files")
    ap.add_argument(
        "--seconds",
        type=_cli.positive_float,
        default=None,
        help=f"wall seconds of each SG-MCMC run, MAP and tuning included "
        f"(default {DEFAULT_SECONDS[0]:g}, quick {DEFAULT_SECONDS[1]:g})",
    )
    ap.add_argument(
        "--samplers",
        default=",".join(SAMPLER_NAMES),
        help=f"comma-separated subset of {', '.join(SAMPLER_NAMES)} (default all six)",
    )
    ap.add_argument(
        "--from-json",
        metavar="FILE",
        default=None,
        help="redraw the page and figure from a saved results JSON (runs nothing)",
    )
    return ap


# --------------------------------------------------------------------------- #
# Metrics
# --------------------------------------------------------------------------- #
def metrics(probs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Accuracy, NLL and ECE (10 equal-width bins) of predictive probabilities ``[n, K]``."""
    p = np.asarray(probs, np.float64)
    p = p / p.sum(-1, keepdims=True)
    y = np.asarray(labels).astype(int)
    p_true = np.clip(p[np.arange(y.size), y], 1e-300, 1.0)
    return {
        "accuracy": float(np.mean(p.argmax(-1) == y)),
        "nll": float(-np.mean(np.log(p_true))),
        "ece": float(sg.expected_calibration_error(p, y, num_bins=NUM_BINS)),
    }


def reliability(probs: np.ndarray, labels: np.ndarray) -> dict[str, list[float]]:
    """Per-bin mean confidence, accuracy and count (the bins of the ECE)."""
    p = np.asarray(probs, np.float64)
    conf, pred = p.max(-1), p.argmax(-1)
    correct = pred == np.asarray(labels).astype(int)
    idx = np.minimum((conf * NUM_BINS).astype(int), NUM_BINS - 1)
    out: dict[str, list[float]] = {"confidence": [], "accuracy": [], "count": []}
    for b in range(NUM_BINS):
        m = idx == b
        out["count"].append(int(m.sum()))
        out["confidence"].append(float(conf[m].mean()) if m.any() else float("nan"))
        out["accuracy"].append(float(correct[m].mean()) if m.any() else float("nan"))
    return out


class Clock:
    """Wall seconds of a method, with the test-set evaluations left out (``paused``)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.excluded = 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.start - self.excluded

    def paused(self, fn: Callable[[], Any]) -> Any:
        t = time.perf_counter()
        try:
            return fn()
        finally:
            self.excluded += time.perf_counter() - t


# --------------------------------------------------------------------------- #
# SG-MCMC: MAP, MAMBA, then sampling until the budget is spent
# --------------------------------------------------------------------------- #
def _bnn_probs(state: list[Any], x: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax(mb.logits_fn(state, x), -1)


def subset_estimator(prob: mb.MnistBNN) -> Any:
    """The posterior with its likelihood estimated on a fixed random ``KSD_SUBSET`` of the
    training images, scaled by ``N / n``: its full-data score
    ``∇ log p(θ) + (N/n) Σ_{i ∈ subset} ∇ log p(y_i | x_i, θ)`` is the KSD's score."""
    n_all = prob.num_train
    n = max(1, int(KSD_SUBSET * n_all))
    idx = np.random.default_rng(3).choice(n_all, n, replace=False)
    scale = n_all / n

    def log_likelihood(state: Any, batch: Any) -> tf.Tensor:
        return scale * mb.log_likelihood(state, batch)

    data = sg.InMemoryData((prob.x_train[idx], prob.y_train[idx]), name="ksd_subset")
    return sg.MinibatchEstimator(log_likelihood, data, n, log_prior_fn=mb.log_prior)


def grid_axes(name: str, quick: bool) -> dict[str, list]:
    """MAMBA's grid for sampler ``name``: step sizes × batch fractions [× L for SGHMC]."""
    cls, _ = kernel_class(name)  # ValueError naming `name` for an unknown sampler
    if quick:
        hi, lo = QUICK_STEP_GRID
        fractions, leapfrogs = QUICK_BATCH_FRACTIONS, QUICK_LEAPFROGS
    else:
        hi, lo = SGNHT_STEP_GRID if cls is sg.SGNHT else STEP_GRID
        fractions, leapfrogs = BATCH_FRACTIONS, LEAPFROGS
    axes: dict[str, list] = {
        "step_size": tuning.log10_grid(hi, lo, 1.0 if quick else 0.5),
        "batch_fraction": list(fractions),
    }
    if cls is sg.SGHMC:
        axes["num_leapfrog_steps"] = list(leapfrogs)
    return axes


def _batch_key(arm: dict[str, Any]) -> str:
    return f"{100 * float(arm['batch_fraction']):g}%"


def round_summary(result: Any) -> list[dict[str, Any]]:
    """Per MAMBA round: arms, per-arm budget, the most steps an arm of each batch
    fraction ran, and how many arms scored +inf (no sample, diverged)."""
    out = []
    for i in range(result.num_rounds):
        recs = [r for r in result.records if r.round == i]
        steps: dict[str, int] = {}
        for r in recs:
            steps[_batch_key(r.arm)] = max(steps.get(_batch_key(r.arm), 0), int(r.steps))
        out.append(
            {
                "arms": len(recs),
                "budget": float(result.per_arm_budgets[i]),
                "max_steps": steps,
                "infinite": sum(math.isinf(r.metric) for r in recs),
                "diverged": sum(bool(r.diverged) for r in recs),
            }
        )
    return out


def compile_by_batch(result: Any) -> dict[str, float]:
    """MAMBA's compile seconds, summed per batch fraction."""
    out: dict[str, float] = {}
    for r in result.records:
        out[_batch_key(r.arm)] = out.get(_batch_key(r.arm), 0.0) + float(r.compile_seconds)
    return out


def sgmcmc_run(
    name: str,
    prob: mb.MnistBNN,
    theta_map: list[tf.Tensor],
    map_seconds: float,
    seconds: float,
    quick: bool,
    mamba_gradients: float,
) -> dict[str, Any]:
    """MAMBA-tunes ``name`` from the MAP, then samples until ``seconds`` (MAP included).

    A ``-CV`` sampler runs its kernel on the control-variate estimator centred at the
    MAP (Baker et al., 2019): ``∇̂ log π(θ) = ∇ log π(θ̂) + (N/n) Σ_{i∈S} [∇ log p(y_i |
    x_i, θ) − ∇ log p(y_i | x_i, θ̂)]``, whose full-data gradient at ``θ̂`` is charged
    to the run.
    """
    clock = Clock()
    clock.start -= map_seconds  # the MAP is part of this run's time
    cls, fixed = kernel_class(name)
    axes = grid_axes(name, quick)
    base = prob.estimator(prob.batch_size_from_fraction(0.01))
    est = sg.ControlVariateEstimator(base, theta_map) if name.endswith("-CV") else base
    jit = XLA and not quick
    ksd_unit = tuning.KSDMetric(
        max_samples=KSD_SAMPLES,
        score_block_size=KSD_SAMPLES,
        jit_compile=True,
        preconditioner=None,
        check_validity=False,
    )
    scorer = subset_estimator(prob)

    def ksd(samples: list[np.ndarray], trace: Any, estimator: Any) -> float:
        """The paper's unit-metric KSD (IMQ kernel, c = 1, β = −½, V-statistic) of at
        most ``KSD_SAMPLES`` evenly spaced samples, with scores from the fixed scoring
        subset."""
        return ksd_unit(samples, trace, scorer)

    common = dict(budget=tuning.gradient_evaluations(mamba_gradients), metric=ksd, progress=False)
    spec = tuning.KernelSpec(cls, est, **fixed)
    tuner = tuning.MAMBA(
        tuning.grid(**axes),
        theta_map,
        spec,
        sampling=tuning.ArmSampling(thin=1, jit_compile=jit, max_steps_per_call=STEPS_PER_CALL),
        **common,
    )
    result = tuner.run()
    tuning_s = clock.elapsed() - map_seconds
    arm = dict(result.best_arm)
    cost = gradient_cost_per_step(spec(**arm))
    thin = max(1, round(prob.num_train / 2 / cost))  # one sample per half epoch of gradients
    per_call = 4  # samples per call (the budget is checked between calls)
    x_test = tf.constant(prob.x_test)
    probs_fn = tf.function(_bnn_probs, reduce_retracing=True)
    state = [np.asarray(p) for p in theta_map]
    total = np.zeros((prob.x_test.shape[0], 10))
    count, calls, diverged = 0, 0, False
    curve: list[dict[str, float]] = []
    while True:
        # The chosen arm's own program from MAMBA, continued from the last draw.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            draws = result.sample(per_call, seed=calls, thin=thin, initial_state=state)
        calls += 1
        draws = [np.asarray(d) for d in draws]
        if not all(np.all(np.isfinite(d)) for d in draws):
            diverged = True
            break
        state = [d[-1] for d in draws]

        def accumulate(draws: list[np.ndarray] = draws) -> None:
            nonlocal total, count
            for i in range(per_call):
                total += probs_fn([tf.constant(d[i]) for d in draws], x_test).numpy()
                count += 1
            curve.append({"seconds": clock.elapsed(), **metrics(total / count, prob.y_test)})

        clock.paused(accumulate)
        if clock.elapsed() >= seconds:
            break
    wall = clock.elapsed()
    row: dict[str, Any] = {
        "method": f"{name} (MAMBA-KSD)",
        "kind": "sgmcmc",
        "arm": {k: (float(v) if isinstance(v, float) else v) for k, v in arm.items()},
        "grid": {k: [v if isinstance(v, int) else float(v) for v in vs] for k, vs in axes.items()},
        "rounds": round_summary(result),
        "compile_by_batch": compile_by_batch(result),
        "wall_s": wall,
        "map_s": map_seconds,
        "tuning_s": tuning_s,
        "sampling_s": wall - map_seconds - tuning_s,
        "tuning_rounds": list(result.round_sizes),
        "tuning_sampling_s": float(result.total_sampling_seconds),
        "tuning_metric_s": float(result.total_metric_seconds),
        "tuning_compile_s": float(result.total_compile_seconds),
        "samples": count,
        "steps": calls * per_call * thin,
        "thin": thin,
        "diverged": diverged,
        "curve": curve,
    }
    if count:
        pbar = total / count
        row.update(metrics(pbar, prob.y_test))
        row["reliability"] = reliability(pbar, prob.y_test)
    else:
        row.update({"accuracy": float("nan"), "nll": float("nan"), "ece": float("nan")})
    return row


# --------------------------------------------------------------------------- #
# Keras baselines
# --------------------------------------------------------------------------- #
def keras_model(num_train: int, dropout: float, seed: int) -> Any:
    """784-100-10 with a softmax hidden layer (the BNN's network) and the N(0, 1) prior as
    L2 decay ``½‖θ‖²/N`` per example (so the loss is the negative log-posterior / N)."""
    import keras

    keras.utils.set_random_seed(seed)
    reg = keras.regularizers.l2(0.5 / num_train)
    layers = [
        keras.Input((mb.LAYER_SIZES[0],)),
        keras.layers.Dense(
            mb.LAYER_SIZES[1], activation="softmax", kernel_regularizer=reg, bias_regularizer=reg
        ),
    ]
    if dropout:
        layers.append(keras.layers.Dropout(dropout))
    layers.append(
        keras.layers.Dense(mb.LAYER_SIZES[2], kernel_regularizer=reg, bias_regularizer=reg)
    )
    model = keras.Sequential(layers)
    model.compile(
        optimizer=keras.optimizers.Adam(KERAS_LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=False,
    )
    return model


def keras_probs(model: Any, x: np.ndarray, masks: int = 0) -> np.ndarray:
    """Softmax predictions; with ``masks``, averaged over that many dropout masks."""
    xt = tf.constant(x)
    if not masks:
        return tf.nn.softmax(model(xt, training=False), -1).numpy()
    return np.mean([tf.nn.softmax(model(xt, training=True), -1).numpy() for _ in range(masks)], 0)


def fit_for(
    model: Any,
    prob: mb.MnistBNN,
    seconds: float,
    clock: Clock,
    on_epoch: Callable[[], None] | None = None,
    every: float = 0.0,
) -> int:
    """``model.fit`` until ``seconds`` of ``clock`` have passed (checked after each batch);
    ``on_epoch`` runs (paused) after an epoch at least ``every`` seconds after the last."""
    import keras

    deadline = clock.elapsed() + seconds
    epochs = [0]
    last = [-math.inf]

    class Stop(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if clock.elapsed() >= deadline:
                self.model.stop_training = True

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            epochs[0] += 1
            if on_epoch is not None and clock.elapsed() - last[0] >= every:
                last[0] = clock.elapsed()
                clock.paused(on_epoch)

    model.fit(
        prob.x_train,
        prob.y_train,
        batch_size=KERAS_BATCH,
        epochs=10_000,
        verbose=0,
        callbacks=[Stop()],
    )
    return epochs[0]


def keras_single(prob: mb.MnistBNN, seconds: float, dropout: float) -> dict[str, Any]:
    """Keras MAP (``dropout == 0``) or MC dropout, trained for ``seconds``."""
    clock = Clock()
    model = keras_model(prob.num_train, dropout, seed=0)
    masks = MC_DROPOUT_MASKS if dropout else 0
    curve: list[dict[str, float]] = []

    def evaluate() -> None:
        curve.append(
            {
                "seconds": clock.elapsed(),
                **metrics(keras_probs(model, prob.x_test, masks), prob.y_test),
            }
        )

    epochs = fit_for(model, prob, seconds, clock, evaluate, every=seconds / 12)
    wall = clock.elapsed()
    p = keras_probs(model, prob.x_test, masks)
    return {
        "method": "MC dropout" if dropout else "Keras MAP (model.fit)",
        "kind": "keras",
        "wall_s": wall,
        "epochs": epochs,
        "curve": curve + [{"seconds": wall, **metrics(p, prob.y_test)}],
        "reliability": reliability(p, prob.y_test),
        **metrics(p, prob.y_test),
    }


def keras_ensemble(prob: mb.MnistBNN, seconds: float) -> dict[str, Any]:
    """``ENSEMBLE_SIZE`` MAP networks, each trained for ``seconds / ENSEMBLE_SIZE``."""
    clock = Clock()
    total = np.zeros((prob.x_test.shape[0], 10))
    curve: list[dict[str, float]] = []
    epochs = []
    for k in range(ENSEMBLE_SIZE):
        model = keras_model(prob.num_train, 0.0, seed=k)
        epochs.append(fit_for(model, prob, seconds / ENSEMBLE_SIZE, clock))

        def add(model: Any = model, k: int = k) -> None:
            nonlocal total
            total += keras_probs(model, prob.x_test)
            curve.append({"seconds": clock.elapsed(), **metrics(total / (k + 1), prob.y_test)})

        clock.paused(add)
    p = total / ENSEMBLE_SIZE
    return {
        "method": f"deep ensemble ({ENSEMBLE_SIZE} members)",
        "kind": "ensemble",
        "wall_s": clock.elapsed(),
        "epochs": epochs,
        "curve": curve,
        "reliability": reliability(p, prob.y_test),
        **metrics(p, prob.y_test),
    }


# --------------------------------------------------------------------------- #
# Provenance
# --------------------------------------------------------------------------- #
def environment() -> dict[str, Any]:
    import keras
    import tensorflow_probability as tfp

    return {
        "commit": _cli.commit(),
        "versions": {
            "python": sys.version.split()[0],
            "tensorflow": tf.__version__,
            "tensorflow_probability": tfp.__version__,
            "keras": keras.__version__,
            "numpy": np.__version__,
            "tfp_sgmcmc": sg.__version__,
        },
        "machine": f"{os.cpu_count()} × {_cli.cpu_name()}, {platform.platform()}",
    }


# --------------------------------------------------------------------------- #
# The study
# --------------------------------------------------------------------------- #
def data_missing(folder: str) -> list[str]:
    """The Fashion-MNIST files not found in ``folder`` (plain or ``.gz``)."""
    return [
        f
        for f in IDX_FILES
        if not (
            os.path.isfile(os.path.join(folder, f))
            or os.path.isfile(os.path.join(folder, f[: -len(".gz")]))
        )
    ]


def load(folder: str, quick: bool) -> mb.MnistBNN:
    prob = mb.mnist_bnn(path=folder)
    if quick:
        n_train, n_test = QUICK_SIZES
        prob = mb.MnistBNN(
            prob.x_train[:n_train],
            prob.y_train[:n_train],
            prob.x_test[:n_test],
            prob.y_test[:n_test],
            source=prob.source,
        )
    return prob


def main() -> None:
    args = _parser().parse_args()
    outs = _cli.outputs(args)
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            publish(json.load(f), outs)
        return
    missing = data_missing(args.data)
    if missing:
        print(f"skipped: Fashion-MNIST not found in {args.data} (missing {', '.join(missing)}).")
        return
    samplers = [s.strip() for s in args.samplers.split(",") if s.strip()]
    bad = [s for s in samplers if s not in SAMPLER_NAMES]
    if bad or not samplers:
        raise ValueError(
            f"`--samplers` must be a comma-separated subset of {', '.join(SAMPLER_NAMES)}, "
            f"got {args.samplers!r}."
        )
    q = 1 if args.quick else 0
    seconds = args.seconds if args.seconds is not None else DEFAULT_SECONDS[q]
    t0 = time.time()
    loads = LoadSampler()
    prob = load(args.data, args.quick)
    config: dict[str, Any] = {
        "command": _cli.command_line(),
        "quick": args.quick,
        "data": args.data,
        "num_train": prob.num_train,
        "num_test": int(prob.x_test.shape[0]),
        "seconds": seconds,
        "mamba_gradients": DEFAULT_MAMBA_GRADIENTS[q],
        "map_seconds": MAP_FRACTION * seconds,
        "map_chunk": MAP_CHUNK[q],
        "samplers": samplers,
        **environment(),
    }
    results: dict[str, Any] = {"config": config, "rows": [], "finished": False}
    json_path = outs.study(f"{STUDY_NAME}.json")

    def save() -> None:
        config["wall_s"] = time.time() - t0
        config["load_average"] = loads.summary()
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1, allow_nan=True)

    def report(row: dict[str, Any]) -> None:
        results["rows"].append(row)
        save()
        print(
            f"{row['method']:28s} acc {row['accuracy']:.4f} NLL {row['nll']:.4f} "
            f"ECE {100 * row['ece']:.2f}% wall {row['wall_s']:.1f} s "
            f"[{(time.time() - t0) / 60:.1f} min, load {os.getloadavg()[0]:.1f}]",
            flush=True,
        )

    # The SG-MCMC runs share one MAP; each is charged its time.
    t_map = time.perf_counter()
    base = prob.estimator(prob.batch_size_from_fraction(0.01))
    theta_map, map_steps = mb.init_state(), 0
    while time.perf_counter() - t_map < config["map_seconds"]:
        theta_map = sg.find_map(
            base,
            theta_map,
            method="adam",
            num_steps=MAP_CHUNK[q],
            learning_rate=1e-3,
            seed=map_steps,
        ).position
        map_steps += MAP_CHUNK[q]
    map_seconds = time.perf_counter() - t_map
    config["map_steps"] = map_steps
    p_map = _bnn_probs(theta_map, tf.constant(prob.x_test)).numpy()
    config["map"] = {"seconds": map_seconds, **metrics(p_map, prob.y_test)}
    for name in samplers:
        report(
            sgmcmc_run(
                name, prob, theta_map, map_seconds, seconds, args.quick, config["mamba_gradients"]
            )
        )
    equal = max([r["wall_s"] for r in results["rows"]], default=seconds)
    config["baseline_seconds"] = equal
    report(keras_single(prob, equal, 0.0))
    report(keras_single(prob, equal, MC_DROPOUT_RATE))
    report(keras_ensemble(prob, equal))
    results["finished"] = True
    loads.stop()
    save()
    publish(results, outs)


# --------------------------------------------------------------------------- #
# The page and the figure, from the results JSON alone
# --------------------------------------------------------------------------- #
#: Figure colours: one per sampler family (its -CV variant dashed), one per baseline.
FAMILY_COLOURS = {"SGLD": "C0", "SGHMC": "C1", "SGNHT": "C2"}
BASELINE_STYLES = {"keras": ("C3", "-"), "ensemble": ("C4", "-o")}


def _style(row: dict[str, Any]) -> tuple[str, str]:
    """(colour, line style) of a method in the figure."""
    name = row["method"].split(" ")[0]
    if row["kind"] == "sgmcmc":
        return FAMILY_COLOURS.get(name.split("-")[0], "C7"), "--" if "-CV" in name else "-"
    if row["method"] == "MC dropout":
        return "C5", "-"
    return BASELINE_STYLES.get(row["kind"], ("0.3", "-"))


def plot(results: dict[str, Any], path: str) -> None:
    """Test accuracy and NLL against wall seconds, and the reliability diagram."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 4.4), dpi=80)
    for r in results["rows"]:
        colour, style = _style(r)
        c = r.get("curve", [])
        if c:
            t = [p["seconds"] for p in c]
            axes[0].plot(t, [p["accuracy"] for p in c], style, color=colour, ms=3, lw=1.2,
                         label=r["method"])  # fmt: skip
            axes[1].plot(t, [p["nll"] for p in c], style, color=colour, ms=3, lw=1.2)
        rel = r.get("reliability")
        if rel:
            xs = [x for x, n in zip(rel["confidence"], rel["count"]) if n]
            ys = [y for y, n in zip(rel["accuracy"], rel["count"]) if n]
            axes[2].plot(xs, ys, style if "o" in style else style + "o", color=colour, ms=3,
                         lw=1.0)  # fmt: skip
    axes[2].plot([0, 1], [0, 1], ":", color="0.5")
    eq = results["config"].get("baseline_seconds")
    for ax in axes[:2]:
        if eq:
            ax.axvline(eq, color="0.6", lw=0.8, ls="--")
        ax.set_xlabel("wall seconds (training, tuning, sampling)")
    axes[0].set_ylabel("test accuracy")
    axes[1].set_ylabel("test NLL")
    axes[1].set_yscale("log")
    axes[2].set_xlabel("confidence (bin mean)")
    axes[2].set_ylabel("accuracy in bin")
    axes[2].set_title("reliability at the end", fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def _f(x: float, fmt: str) -> str:
    return "–" if x is None or not math.isfinite(x) else format(x, fmt)


def _reading(results: dict[str, Any]) -> list[str]:
    """Where the SG-MCMC runs win and where they do not, with the numbers."""
    rows = results["rows"]
    sgs = [r for r in rows if r["kind"] == "sgmcmc" and math.isfinite(r["accuracy"])]
    others = [r for r in rows if r["kind"] != "sgmcmc"]
    if not sgs or not others:
        return ["- Not enough finished rows to compare."]
    out = []
    for key, label, better in (
        ("accuracy", "accuracy", max),
        ("nll", "NLL", min),
        ("ece", "ECE", min),
    ):
        best_sg = better(sgs, key=lambda r: r[key])
        best_other = better(others, key=lambda r: r[key])
        fmt = ".2%" if key != "nll" else ".4f"
        won = better(best_sg[key], best_other[key]) == best_sg[key] and (
            best_sg[key] != best_other[key]
        )
        verdict = "SG-MCMC wins" if won else "SG-MCMC does not win"
        out.append(
            f"- **{label}: {verdict}.** Best SG-MCMC: {best_sg['method']} "
            f"{format(best_sg[key], fmt)}; best baseline: {best_other['method']} "
            f"{format(best_other[key], fmt)}."
        )
    by_name = {r["method"].split(" ")[0]: r for r in sgs}
    for fam in FAMILY_COLOURS:
        a, b = by_name.get(fam), by_name.get(f"{fam}-CV")
        if a and b:
            out.append(
                f"- {fam} against {fam}-CV: accuracy {a['accuracy']:.2%} / "
                f"{b['accuracy']:.2%}, NLL {a['nll']:.4f} / {b['nll']:.4f}, ECE "
                f"{a['ece']:.2%} / {b['ece']:.2%} (arms {arm_short(a['arm'])} / "
                f"{arm_short(b['arm'])})."
            )
    mp = results["config"].get("map")
    smallest = [
        r
        for r in sgs
        if r.get("grid") and math.isclose(r["arm"]["step_size"], min(r["grid"]["step_size"]))
    ]
    if smallest and mp:
        accs = [r["accuracy"] for r in smallest]
        out.append(
            f"- MAMBA-KSD chose the smallest step size of its grid for {len(smallest)} of "
            f"{len(sgs)} samplers ({', '.join(r['method'].split(' ')[0] for r in smallest)}). "
            "With the paper's unit-metric KSD a chain that barely leaves the MAP scores "
            "well when the posterior is narrow (a chain frozen at the mode has KSD² ≈ d, "
            "m exact draws KSD² ≈ d/(σ²m), with d = 79,510 weights and σ the posterior's "
            "scale), so these runs' model averages stay close to the MAP: "
            f"accuracy {min(accs):.2%}–{max(accs):.2%} against the MAP's {mp['accuracy']:.2%}."
        )
    if mp:
        out.append(
            "- For scale, the MAP the SG-MCMC runs start from "
            f"({results['config']['map_steps']:,} Adam steps, {mp['seconds']:.1f} s): "
            f"accuracy {mp['accuracy']:.2%}, NLL "
            f"{mp['nll']:.4f}, ECE {mp['ece']:.2%}."
        )
    for r in sgs:
        overhead = r["map_s"] + r["tuning_s"]
        out.append(
            f"- {r['method']} spent {overhead:.1f} of its {r['wall_s']:.1f} s before its "
            f"first sample (MAP {r['map_s']:.1f} s, MAMBA {r['tuning_s']:.1f} s, of which "
            f"{r['tuning_compile_s']:.1f} s compiling and {r['tuning_metric_s']:.1f} s of "
            f"KSD), and sampled for {r['sampling_s']:.1f} s ({r['samples']} samples): "
            f"accuracy {r['accuracy']:.2%} against its MAP's "
            f"{mp['accuracy']:.2%}, NLL {r['nll']:.4f} against {mp['nll']:.4f}."
            if mp
            else f"- {r['method']} spent {overhead:.1f} of its {r['wall_s']:.1f} s before "
            "its first sample."
        )
    ens = [r for r in others if r["kind"] == "ensemble"]
    single = [r for r in others if r["kind"] == "keras" and r["method"].startswith("Keras")]
    if ens and single:
        e, k = ens[0], single[0]
        verdict = "beats" if e["nll"] < k["nll"] else "does not beat"
        out.append(
            f"- The deep ensemble {verdict} one network trained for the whole time on NLL: "
            f"{e['nll']:.4f} against {k['nll']:.4f}, accuracy {e['accuracy']:.2%} against "
            f"{k['accuracy']:.2%} (members of {min(e['epochs'])}-{max(e['epochs'])} "
            f"epochs against {k['epochs']})."
        )
    return out


def _grid_text(results: dict[str, Any]) -> str:
    """The grids the run searched, and what MAMBA's rounds made of them."""
    cfg = results["config"]
    if cfg.get("quick"):
        return "a trimmed grid (quick run): log10 ε ∈ {−4, −5, −6} × batch {10, 1}% (SGHMC: L = 5)"
    return (
        "the paper's grid for the network: log10 ε ∈ {−2, −2.5, …, −7.5} (12 values) × "
        "batch {100, 10, 1}%, × L ∈ {5, 10} for SGHMC(-CV) (36 arms; 72 for SGHMC), and "
        "for SGNHT(-CV) the paper's rerun grid log10 ε ∈ {−5, …, −7.5} (6 values, 18 "
        "arms), which the paper used because SGNHT diverged at the larger steps on this "
        "network"
    )


def _round_lines(results: dict[str, Any]) -> list[str]:
    """What the deterministic gradient budget gave each batch size in MAMBA's rounds."""
    sgs = [r for r in results["rows"] if r["kind"] == "sgmcmc" and r.get("rounds")]
    if not sgs:
        return []
    out = [
        "",
        "**MAMBA's rounds.** The budget is split as in the paper, r_i = T / (|S_i| K) "
        "per arm in round i (K rounds), so a wide grid leaves each arm of the first "
        "round little: an arm that cannot afford one step (or one sample) scores +∞ "
        "and is pruned, as a too-slow arm is under a wall-clock budget. Most steps any "
        "arm of each batch size ran, per round (arms in the round; arms scoring +∞), "
        "and the compile seconds each batch size's programs cost:",
        "",
        "| sampler | rounds: most steps by batch (arms; +∞) | compile s by batch |",
        "|---|---|---|",
    ]
    for r in sgs:
        rounds = "; ".join(
            f"{i + 1}: "
            + ", ".join(f"{k} {v}" for k, v in rd["max_steps"].items())
            + f" ({rd['arms']}; {rd['infinite']})"
            for i, rd in enumerate(r["rounds"])
        )
        comp = ", ".join(f"{k} {v:.1f}" for k, v in r.get("compile_by_batch", {}).items())
        out.append(f"| {r['method'].split(' ')[0]} | {rounds} | {comp} |")
    return out


def render(results: dict[str, Any], figure: str | None) -> str:
    cfg = results["config"]
    quick = cfg.get("quick", False)
    la = cfg.get("load_average", {})
    eq = cfg.get("baseline_seconds", cfg["seconds"])
    lines = [
        "# The 784-100-10 BNN on Fashion-MNIST: MAMBA-tuned SG-MCMC against Keras baselines"
        + (" (quick run)" if quick else ""),
        "",
        "Regenerate this page (and its figure) with:",
        "",
        "```bash",
        f"{SCRIPT}{' --quick' if quick else ''} --write-docs",
        "```",
        "",
        f"This run: `{cfg['command']}`, commit {cfg['commit']}; Python "
        f"{cfg['versions']['python']}, TensorFlow {cfg['versions']['tensorflow']}, TFP "
        f"{cfg['versions']['tensorflow_probability']}, Keras {cfg['versions']['keras']}, "
        f"NumPy {cfg['versions']['numpy']}; machine {cfg['machine']}, CPU only, shared with "
        f"other jobs: 1-minute load average {_f(la.get('mean'), '.1f')} on "
        f"{os.cpu_count() or 2} cores during the run (min {_f(la.get('min'), '.1f')}, max "
        f"{_f(la.get('max'), '.1f')}). Whole study: {cfg['wall_s'] / 60:.1f} min"
        + (" (interrupted: partial rows)" if not results["finished"] else "")
        + ".",
        "",
        f"**Budget.** Each SG-MCMC run has {cfg['seconds']:g} s of wall time, MAP and "
        "tuning included (it samples at least once after tuning and stops at the first "
        "check past the budget, so a run whose tuning alone overruns it takes longer); "
        "every baseline gets the "
        f"wall time of the slowest SG-MCMC run, {eq:.1f} s (the ensemble a fifth of it per "
        "member). Test-set predictions are not counted. The paper gave each sampler "
        "300 s on its hardware; the default here is sized so the six samplers and three "
        "baselines take about half an hour on a 2-core CPU (`--quick`: a 10,000-image "
        "subset, 25 s per SG-MCMC run and a trimmed grid, no XLA, the baselines then "
        "get the SG-MCMC runs' longer wall time). On a loaded "
        "machine each method does less work in its seconds, so its numbers get worse, "
        "not its run time longer.",
        "",
        f"**Data.** Fashion-MNIST from `{cfg['data']}`: {cfg['num_train']:,} training and "
        f"{cfg['num_test']:,} test images, pixels scaled to [0, 1].",
        "",
        "**Model.** The MAMBA paper's network (§4.3, "
        f"[`models.mnist_bnn`]({MODEL_PAGE})): 784-100-10 with a softmax hidden layer, "
        "79,510 weights, N(0, 1) priors. Every method uses this network, so the comparison "
        "is between ways of fitting and averaging it; a ReLU network would be more "
        "accurate for all of them.",
        "",
        "**Methods.**",
        "",
        f"* SG-MCMC: a MAP (Adam, learning rate 1e-3, 1% batch, for {100 * MAP_FRACTION:g}% "
        f"of the budget: {cfg['map_steps']:,} steps, restarting Adam's moments every "
        f"{cfg['map_chunk']} steps) shared by the samplers and charged to each; "
        f"MAMBA-KSD (η = 3, the paper's unit-metric KSD on {KSD_SAMPLES} samples per "
        f"arm-round, its scores on a fixed random {100 * KSD_SUBSET:g}% of the training "
        "images scaled by N/n rather than on all of them, a total budget of "
        f"{cfg['mamba_gradients']:.3g} per-example "
        "gradient evaluations, counting an SGHMC step's L leapfrog gradients and a "
        "control-variate step's two minibatch gradients) over "
        + _grid_text(results)
        + ". SGHMC uses friction 0.01 and the paper code's update order, SGNHT diffusion "
        "0.01; a -CV sampler runs the same kernel on the control-variate estimator "
        "centred at the MAP (its full-data gradient there is charged to the run). The "
        "samplers run as TensorFlow graphs without XLA (the grid needs one program per "
        "batch size [× L], and XLA's compile of each costs more than it saves in a run "
        "of a few minutes); the KSD is XLA-compiled. Then "
        "the chosen arm from the MAP (in the program MAMBA compiled for it), one sample "
        "per half epoch of per-example gradients, predictions averaged over all samples "
        "(Bayesian model average).",
        f"* Keras MAP: `model.fit`, Adam (learning rate {KERAS_LEARNING_RATE:g}), batch "
        f"{KERAS_BATCH}, the prior as L2 decay (the loss is the negative log-posterior / N).",
        f"* MC dropout: the same with dropout {MC_DROPOUT_RATE:g} after the hidden layer, "
        f"predictions averaged over {MC_DROPOUT_MASKS} dropout masks.",
        f"* Deep ensemble: {ENSEMBLE_SIZE} Keras MAP networks with different initial "
        f"weights, each trained for {eq / ENSEMBLE_SIZE:.1f} s, probabilities averaged.",
        "",
        "Metrics on the test set: accuracy, negative log-likelihood (NLL, nats per image) "
        f"and ECE ({NUM_BINS} equal-width confidence bins, `sg.expected_calibration_error`).",
        "",
        "## Results",
        "",
    ]
    if figure:
        lines += [
            f"![accuracy and NLL against time; reliability]({figure})",
            "",
            "Left and middle: test accuracy and NLL against wall seconds (SG-MCMC: the "
            "model average of the samples so far, from the end of tuning; Keras: after "
            "each epoch; ensemble: after each member). Dashed line: the baselines' budget. "
            "Right: reliability at the end (accuracy against mean confidence per bin; the "
            "dotted diagonal is perfect calibration).",
            "",
        ]
    lines += [
        "| method | accuracy | NLL | ECE % | wall s | details |",
        "|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        if r["kind"] == "sgmcmc":
            detail = (
                f"arm {arm_short(r['arm'])}; MAP {r['map_s']:.1f} s + tuning "
                f"{r['tuning_s']:.1f} s (sampling {r['tuning_sampling_s']:.1f}, KSD "
                f"{r['tuning_metric_s']:.1f}, compiling {r['tuning_compile_s']:.1f}) + "
                f"sampling {r['sampling_s']:.1f} s; "
                f"{r['samples']} samples" + (" (diverged)" if r["diverged"] else "")
            )
        elif r["kind"] == "ensemble":
            detail = f"epochs per member: {', '.join(str(e) for e in r['epochs'])}"
        else:
            detail = f"{r['epochs']} epochs"
        lines.append(
            f"| {r['method']} | {_f(r['accuracy'], '.4f')} | {_f(r['nll'], '.4f')} | "
            f"{_f(100 * r['ece'], '.2f')} | {r['wall_s']:.1f} | {detail} |"
        )
    lines += _round_lines(results)
    lines += ["", "## Reading", ""]
    lines += _reading(results)
    lines += [
        "",
        "The time budget is short, so the ranking says which method makes the best use "
        "of a few minutes of a shared CPU, not which is best at convergence (the curves "
        "above show which methods had levelled off when their budget ended). SG-MCMC "
        "pays for its MAP, MAMBA's compiles and its KSD scores out of the same budget "
        "and starts sampling late. A longer budget (`--seconds`) may rank them "
        "differently; this page reports only the one it ran.",
    ]
    return "\n".join(lines) + "\n"


def publish(results: dict[str, Any], outs: Any) -> None:
    """Writes the figure, the JSON and the page under ``outs``."""
    plot(results, outs.figure(f"{STUDY_NAME}.png"))
    figure = f"../figures/{outs.name(f'{STUDY_NAME}.png')}"
    with open(outs.study(f"{STUDY_NAME}.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, allow_nan=True)
    path = outs.write_study(STUDY_NAME, render(results, figure))
    print(f"wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
