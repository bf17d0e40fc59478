"""A small Bayesian neural network on scikit-learn's bundled digits (8×8 images).

``x ∈ [0, 1]^64`` (pixels / 16), 10 classes, 1,797 images split 75/25
(stratified, seeded). Network: 64 → ``hidden`` (tanh) → 10 logits, Keras 3
model sampled through [`tfp_sgmcmc.keras.KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior] with a
categorical likelihood and an ``N(0, 1)`` prior on every weight, as the MAMBA
paper's MNIST BNN (which uses 784-100-10; the digits set is what ships
offline). Nothing is downloaded.

#### References

[1]: Jeremie Coullon, Leah South and Christopher Nemeth. Stochastic gradient
     MCMC with multi-armed bandit tuning. _arXiv:2105.13059_, 2021. §4.3.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BNNDigits", "bnn_digits", "load_digits_split"]


def load_digits_split(test_fraction: float = 0.25, seed: int = 0):
    """``(x_train, y_train, x_test, y_test)``: stratified, seeded split of sklearn's digits."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int32)
    xtr, xte, ytr, yte = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    return xtr, ytr, xte, yte


@dataclass
class BNNDigits:
    """The BNN problem: posterior (Keras through ``KerasPosterior``) and the test split."""

    posterior: Any
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def num_train(self) -> int:
        return int(self.x_train.shape[0])


def bnn_digits(hidden: int = 32, seed: int = 0, test_fraction: float = 0.25,
               prior_scale: float = 1.0, scheme: str = "epoch") -> BNNDigits:
    """Builds the digits BNN (weights initialised by Keras with ``seed``)."""
    import keras

    from tfp_sgmcmc.keras import KerasPosterior

    xtr, ytr, xte, yte = load_digits_split(test_fraction, seed)
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(hidden, activation="tanh"),
            keras.layers.Dense(10),
        ]
    )
    post = KerasPosterior(model, (xtr, ytr), likelihood="categorical",
                          prior_scale=prior_scale, scheme=scheme)
    return BNNDigits(post, xtr, ytr, xte, yte)
