"""A Keras MLP's posterior on Fashion-MNIST with ``BayesianModel``, the README's path.

The network is the 784-100-10 MLP of ``docs/keras.md``; ``BayesianModel.fit`` finds the
MAP with Adam, samples the weights with preconditioned SGLD (the draws streamed to a run
directory under ``--out``) and ``predict``/``evaluate`` average over them. The study page
gives the test accuracy, NLL and ECE of the posterior predictive beside the MAP network's,
and the figure is the reliability diagram of both.

Run::

    python examples/keras_fashion_mnist.py --quick
    python examples/keras_fashion_mnist.py

Needs the Debian package ``dataset-fashion-mnist`` (``/usr/share/datasets/fashion-mnist``);
without its files the script says so in one line and exits. Writes the study page (in
``studies/``), the figure (in ``figures/``) and the draws (in ``runs/``) under ``--out``
(default ``out/keras_fashion_mnist/``).
"""

from __future__ import annotations

import os
import sys

import _cli
import numpy as np

FASHION = "/usr/share/datasets/fashion-mnist"


def reliability(probs: np.ndarray, y: np.ndarray, bins: int = 10) -> tuple[list, list]:
    """Mean confidence and accuracy in equal-width confidence bins (the non-empty ones)."""
    conf, hit = probs.max(1), probs.argmax(1) == y
    idx = np.minimum((conf * bins).astype(int), bins - 1)
    pairs = [(conf[idx == b].mean(), hit[idx == b].mean()) for b in range(bins) if (idx == b).any()]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def main() -> None:
    parser = _cli.parser("keras_fashion_mnist", __doc__.splitlines()[0])
    args = parser.parse_args()
    if not os.path.isdir(FASHION):
        print(f"skipped: no Fashion-MNIST at {FASHION} (apt-get install dataset-fashion-mnist)")
        return
    out = _cli.outputs(args)
    import keras

    from tfp_sgmcmc.diagnostics.calibration import predictive_metrics
    from tfp_sgmcmc.keras import BayesianModel
    from tfp_sgmcmc.models.data_files import load_mnist

    n_train, n_test, epochs = (5_000, 2_000, 1) if args.quick else (60_000, 10_000, 5)
    data = load_mnist(FASHION)
    x_train, y_train = data["x_train"][:n_train], data["y_train"][:n_train]
    x_test, y_test = data["x_test"][:n_test], data["y_test"][:n_test]
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((784,)), keras.layers.Dense(100, activation="relu"), keras.layers.Dense(10)]
    )

    # The five lines.
    bayes = BayesianModel(model, likelihood="categorical", num_draws=20 if args.quick else 50)
    bayes.fit(
        x_train,
        y_train,
        batch_size=128,
        epochs=epochs,
        verbose=2,
        run_dir=out.run_dir("keras_fashion_mnist"),
    )
    probs = bayes.predict(x_test)
    scores = bayes.evaluate(x_test, y_test)

    # The MAP network (the model's own weights after fit) for comparison.
    logits = model.predict(x_test.astype("float32"), batch_size=1024, verbose=0)
    p_map = np.exp(logits - logits.max(1, keepdims=True))
    p_map /= p_map.sum(1, keepdims=True)
    m_map = predictive_metrics(p_map.astype(np.float64), y_test)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.2, 4))
    ax.plot([0, 1], [0, 1], color="0.7", lw=1)
    for p, label in ((p_map, "MAP network"), (probs, "posterior predictive")):
        c, a = reliability(p, y_test)
        ax.plot(c, a, marker="o", label=label)
    ax.set(xlabel="confidence", ylabel="accuracy", title="Fashion-MNIST test set")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out.figure("keras_fashion_mnist.png"), dpi=110)

    study = f"""# A Keras MLP's posterior on Fashion-MNIST

{n_train:,} training and {n_test:,} test images, the 784-100-10 MLP, `BayesianModel.fit`
with batch size 128 and {epochs} MAP epoch(s), then {bayes.num_kept} draws.

| | accuracy | NLL | ECE |
|---|---|---|---|
| MAP network | {m_map["accuracy"]:.3f} | {m_map["log_loss"]:.3f} | {m_map["ece"]:.3f} |
| posterior predictive | {scores["accuracy"]:.3f} | {scores["nll"]:.3f} | {scores["ece"]:.3f} |

Step size {bayes.step_size:.3g}; XLA {"on" if bayes.jit_compile else "off"}; draws in
`{bayes.run_dir}`; times (s): {", ".join(f"{k} {v:.1f}" for k, v in bayes.timings.items())}.

![reliability](../figures/{out.name("keras_fashion_mnist.png")})

Command: `{_cli.command_line()}`
"""
    path = out.write_study("keras_fashion_mnist", study)
    print(study)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
