"""Bayesian regression with a Keras MLP: learned noise and 90% predictive intervals.

A 1-32-32-1 tanh network on ``y = sin(3x) + x/2 + ε``, ``ε ~ N(0, 0.2²)``, with no
training data in ``0.3 < x < 1.1``. ``BayesianModel(model, "gaussian")`` learns the
noise scale ``σ`` with the weights, and ``predict(x, interval=0.9)`` gives the central
90% interval of the posterior predictive of a new ``y`` (the mixture over the draws of
``N(f_W(x), σ²)``). The figure shows the data, the mean and the interval, wider in the
gap; the study page gives the learned ``σ`` and the interval's coverage on held-out
points.

Run::

    python examples/keras_regression.py --quick
    python examples/keras_regression.py

Writes the study page (in ``studies/``) and the figure (in ``figures/``) under ``--out``
(default ``out/keras_regression/``).
"""

from __future__ import annotations

import _cli
import numpy as np


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    x = x[(x < 0.3) | (x > 1.1)]  # a gap without data
    y = np.sin(3 * x) + x / 2 + 0.2 * rng.normal(size=x.size)
    return x[:, None], y


def main() -> None:
    parser = _cli.parser("keras_regression", __doc__.splitlines()[0])
    args = parser.parse_args()
    out = _cli.outputs(args)
    import keras

    from tfp_sgmcmc.keras import BayesianModel

    x, y = make_data(1_000, 0)
    x_test, y_test = make_data(2_000, 1)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((1,)),
            keras.layers.Dense(32, activation="tanh"),
            keras.layers.Dense(32, activation="tanh"),
            keras.layers.Dense(1),
        ]
    )
    epochs = 30 if args.quick else 200
    bayes = BayesianModel(model, "gaussian", num_draws=50, learning_rate=1e-2)
    bayes.fit(x, y, batch_size=32, epochs=epochs, sample_epochs=epochs // 2, verbose=0)

    grid = np.linspace(-2.5, 2.5, 201)[:, None]
    mean, lower, upper = bayes.predict(grid, interval=0.9)
    _, lo_t, hi_t = bayes.predict(x_test, interval=0.9)
    inside = (y_test >= lo_t[:, 0]) & (y_test <= hi_t[:, 0])
    sigma = bayes.noise_scale_draws

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.scatter(x[:, 0], y, s=4, color="0.6", label="training data")
    ax.fill_between(grid[:, 0], lower[:, 0], upper[:, 0], alpha=0.3, label="90% interval")
    ax.plot(grid[:, 0], mean[:, 0], label="predictive mean")
    ax.plot(grid[:, 0], np.sin(3 * grid[:, 0]) + grid[:, 0] / 2, "k--", lw=1, label="truth")
    ax.set(xlabel="x", ylabel="y")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(out.figure("keras_regression.png"), dpi=110)

    study = f"""# Bayesian regression with a Keras MLP

Command: `{_cli.command_line()}`

{_cli.provenance()}

{len(x)} training points, {epochs} MAP epochs, {epochs // 2} sampling epochs,
{bayes.num_kept} draws.

* learned noise scale σ: {sigma.mean():.3f} ± {sigma.std():.3f} over the draws (truth 0.2);
* coverage of the 90% predictive interval on {len(y_test)} held-out points:
  {inside.mean():.3f} (standard error {np.sqrt(0.09 / len(y_test)):.3f}).

![intervals](../figures/{out.name("keras_regression.png")})
"""
    out.write_study("keras_regression", study)
    print(study)


if __name__ == "__main__":
    main()
