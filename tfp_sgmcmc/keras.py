"""Keras 3 models as SG-MCMC targets, and posterior-predictive helpers.

The ONLY module of the package that imports Keras. A Keras 3 model (TF
backend) becomes a posterior over its trainable weights:

```none
log π(W) = log p(W) + Σ_i log p(y_i | f_W(x_i))
```

The chain state is the list of trainable weights (one state part per
weight tensor); the network is evaluated with
``model.stateless_call(weights, non_trainable, x)`` so the weights are plain
tensors the kernels can differentiate and move (``model(x)`` reads Keras
variables and gives ``None`` gradients, as Keras 3 does). Data come as
arrays (an [`InMemoryData`][tfp_sgmcmc.data.InMemoryData], XLA-compilable) or as a
batched ``tf.data.Dataset`` (a [`DatasetData`][tfp_sgmcmc.data.DatasetData]; graph
mode only, ``jit_compile=False``).

Likelihoods: ``"categorical"`` (softmax logits), ``"bernoulli"`` (one logit),
``"gaussian"`` (mean, with ``noise_scale``) or a callable
``(y, outputs) -> per-example log-likelihood``. Prior: isotropic
``N(0, prior_scale² I)`` on every weight (the MAMBA BNN uses ``N(0, 1)``) or a
callable on the list of weights.

Chains: ``stateless_call`` evaluates one set of weights; states with leading
chain/sample dimensions (e.g. a block of posterior samples whose full-data
scores the KSD needs) are mapped over with ``tf.map_fn``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data import DatasetData, InMemoryData
from tfp_sgmcmc.diagnostics import calibration_errors, model_averaged_probabilities
from tfp_sgmcmc.estimators import MinibatchEstimator

__all__ = [
    "KerasPosterior",
    "predictive_probabilities",
    "posterior_predictive_metrics",
]

_LIKELIHOODS = ("categorical", "bernoulli", "gaussian")


class KerasPosterior:
    """A Keras 3 model + likelihood + prior + data as a target for the kernels.

    Args:
      model: a built Keras 3 model (TF backend).
      data: ``(x, y)`` arrays, an [`InMemoryData`][tfp_sgmcmc.data.InMemoryData], or a
        batched ``tf.data.Dataset`` of ``(x, y)``.
      likelihood: ``"categorical"``, ``"bernoulli"``, ``"gaussian"`` or a
        callable ``(y, outputs) -> [n]``. Default value: ``"categorical"``.
      prior_scale: standard deviation of the isotropic Gaussian prior, or a
        callable ``list_of_weights -> log p``. Default value: ``1.``.
      noise_scale: observation noise of the ``"gaussian"`` likelihood.
        Default value: ``1.``.
      num_examples: ``N`` for a ``tf.data`` dataset. Default value: ``None``.
      scheme: minibatch scheme of in-memory data. Default value: ``"epoch"``.

    Raises:
      ValueError: a model that is not built, an unknown likelihood, a
        non-positive ``prior_scale``, a dataset without ``num_examples``.
    """

    def __init__(
        self,
        model: Any,
        data: Any,
        likelihood: str | Callable[[tf.Tensor, tf.Tensor], tf.Tensor] = "categorical",
        prior_scale: float | Callable[[list], tf.Tensor] = 1.0,
        noise_scale: float = 1.0,
        num_examples: int | None = None,
        scheme: str = "epoch",
    ) -> None:
        if not isinstance(model, keras.Model):
            raise ValueError(f"`model` must be a Keras 3 model, got {type(model).__name__}.")
        if not model.built or not model.trainable_variables:
            raise ValueError("`model` must be built (call it once on an input) with weights.")
        if isinstance(likelihood, str) and likelihood not in _LIKELIHOODS:
            raise ValueError(f"`likelihood` must be one of {_LIKELIHOODS} or a callable.")
        if not callable(prior_scale) and not float(prior_scale) > 0:
            raise ValueError(f"`prior_scale` must be > 0 or a callable, got {prior_scale!r}.")
        self.model = model
        self.likelihood = likelihood
        self.prior_scale = prior_scale
        self.noise_scale = float(noise_scale)
        if isinstance(data, tf.data.Dataset):
            if num_examples is None:
                raise ValueError("`num_examples` is required with a tf.data dataset.")
            self.data = DatasetData(data, num_examples)
        elif isinstance(data, (InMemoryData, DatasetData)):
            self.data = data
        else:
            x, y = data
            x = np.asarray(x, np.float32)
            self.data = InMemoryData((x, np.asarray(y)), scheme=scheme)
        self._non_trainable = [tf.convert_to_tensor(v.value) for v in model.non_trainable_variables]
        self._weight_ranks = [len(v.shape) for v in model.trainable_variables]

    # -- state -------------------------------------------------------------- #
    def init_state(self) -> list[tf.Tensor]:
        """The model's current trainable weights (a list of tensors)."""
        return [tf.convert_to_tensor(v.value) for v in self.model.trainable_variables]

    @property
    def num_parameters(self) -> int:
        return int(sum(np.prod(v.shape) for v in self.model.trainable_variables))

    # -- model pieces ---------------------------------------------------------- #
    def outputs(self, weights: list[tf.Tensor], x: tf.Tensor) -> tf.Tensor:
        """``f_W(x)`` for one set of weights via ``stateless_call``."""
        out, _ = self.model.stateless_call(list(weights), self._non_trainable, x, training=False)
        return out

    def _extra_dims(self, weights: list[tf.Tensor]) -> int:
        return (weights[0].shape.rank or 0) - self._weight_ranks[0]

    def _map_chains(self, fn: Callable[[list], tf.Tensor], weights: list[tf.Tensor]) -> tf.Tensor:
        extra = self._extra_dims(weights)
        if extra == 0:
            return fn(weights)
        lead = tf.shape(weights[0])[:extra]
        flat = [tf.reshape(w, tf.concat([[-1], tf.shape(w)[extra:]], 0)) for w in weights]
        out = tf.map_fn(lambda ws: fn(list(ws)), flat, fn_output_signature=weights[0].dtype)
        return tf.reshape(out, tf.concat([lead, tf.shape(out)[1:]], 0))

    def per_example_log_likelihood(self, y: tf.Tensor, outputs: tf.Tensor) -> tf.Tensor:
        lik = self.likelihood
        if callable(lik):
            return lik(y, outputs)
        if lik == "categorical":
            logp = tf.nn.log_softmax(outputs, axis=-1)
            idx = tf.cast(tf.reshape(y, [-1]), tf.int32)
            return tf.gather(logp, idx, axis=-1, batch_dims=1)
        if lik == "bernoulli":
            logit = tf.reshape(outputs, [-1])
            yy = tf.cast(tf.reshape(y, [-1]), outputs.dtype)
            return yy * logit - tf.nn.softplus(logit)
        mu = tf.reshape(outputs, [-1])
        yy = tf.cast(tf.reshape(y, [-1]), outputs.dtype)
        s = tf.constant(self.noise_scale, outputs.dtype)
        return -0.5 * tf.square((yy - mu) / s) - tf.math.log(s) - 0.5 * np.log(2 * np.pi)

    def log_likelihood_fn(self, state: Any, batch: Any) -> tf.Tensor:
        """Per-example ``log p(y_i | f_W(x_i))``, ``[..., n]`` (the estimator's protocol)."""
        x, y = batch
        weights = list(state)
        x = tf.cast(x, weights[0].dtype)

        def one(ws: list) -> tf.Tensor:
            return self.per_example_log_likelihood(y, self.outputs(ws, x))

        return self._map_chains(one, weights)

    def log_prior_fn(self, state: Any) -> tf.Tensor:
        """``log N(W; 0, σ² I)`` up to a constant (or the user's prior)."""
        weights = list(state)
        if callable(self.prior_scale):
            return self.prior_scale(weights)
        extra = self._extra_dims(weights)
        s2 = tf.constant(float(self.prior_scale) ** 2, weights[0].dtype)
        total = 0.0
        for w, r in zip(weights, self._weight_ranks):
            axes = list(range(extra, extra + r))
            total = total + tf.reduce_sum(tf.square(w), axis=axes) if axes else total + tf.square(w)
        return -0.5 * total / s2

    def estimator(self, batch_size: int | None = None) -> MinibatchEstimator:
        """A [`MinibatchEstimator`][tfp_sgmcmc.MinibatchEstimator] of this posterior."""
        if batch_size is None:
            batch_size = getattr(self.data, "batch_size", None)
            if batch_size is None:
                raise ValueError("`batch_size` is required with in-memory data.")
        return MinibatchEstimator(
            self.log_likelihood_fn, self.data, int(batch_size), log_prior_fn=self.log_prior_fn
        )

    def load_weights(self, state: Any) -> None:
        """Write a state (list of weights) into the Keras model's variables."""
        for v, w in zip(self.model.trainable_variables, list(state)):
            v.assign(np.asarray(w))


def predictive_probabilities(
    posterior: KerasPosterior, samples: list[np.ndarray], x: Any, batch_size: int = 2048
) -> np.ndarray:
    """Per-sample predictive probabilities ``[S, n, K]`` (softmax / sigmoid of the outputs).

    Args:
      posterior: the [`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior].
      samples: list of weight parts, each ``[S, ...]``.
      x: inputs ``[n, ...]``.
      batch_size: rows per forward pass. Default value: ``2048``.
    """
    x = np.asarray(x, np.float32)
    fn = tf.function(lambda ws, xb: posterior.outputs(ws, xb), reduce_retracing=True)
    out = []
    num = samples[0].shape[0]
    for s in range(num):
        ws = [tf.constant(p[s]) for p in samples]
        rows = []
        for start in range(0, x.shape[0], batch_size):
            xb = tf.constant(x[start : start + batch_size], ws[0].dtype)
            rows.append(fn(ws, xb).numpy())
        logits = np.concatenate(rows, 0).astype(np.float64)
        if posterior.likelihood == "bernoulli":
            p1 = 1.0 / (1.0 + np.exp(-logits.reshape(-1)))
            out.append(np.stack([1 - p1, p1], -1))
        else:
            z = logits - logits.max(-1, keepdims=True)
            e = np.exp(z)
            out.append(e / e.sum(-1, keepdims=True))
    return np.stack(out, 0)


def posterior_predictive_metrics(
    posterior: KerasPosterior,
    samples: list[np.ndarray],
    x: Any,
    y: Any,
    num_bins: int = 10,
    method: str = "arithmetic",
    max_samples: int | None = 100,
) -> dict[str, float]:
    """Accuracy, log-loss, ECE and MCE of the model-averaged predictive.

    ``p̄(y|x) = (1/S) Σ_s p(y | x, W_s)`` (``method="arithmetic"``, the
    Bayesian model average) or the MAMBA code's geometric average; ECE/MCE
    with ``num_bins`` equal-width bins on [0, 1] (Guo et al. 2017), from
    [`tfp_sgmcmc.diagnostics`][tfp_sgmcmc.diagnostics].

    Args:
      posterior: the model.
      samples: weight samples ``[S, ...]``.
      x: test inputs.
      y: test labels.
      num_bins: calibration bins. Default value: ``10``.
      method: ``"arithmetic"`` or ``"geometric"``. Default value: ``"arithmetic"``.
      max_samples: evenly thin the samples to at most this many.
        Default value: ``100``.
    """
    num = samples[0].shape[0]
    if num == 0:
        raise ValueError("`samples` is empty.")
    if max_samples is not None and num > max_samples:
        idx = np.linspace(0, num - 1, max_samples).round().astype(int)
        samples = [p[idx] for p in samples]
    probs = predictive_probabilities(posterior, samples, x)
    pbar = model_averaged_probabilities(probs, method=method)
    if method == "geometric":
        pbar = pbar / pbar.sum(-1, keepdims=True)
    y = np.asarray(y).astype(int).reshape(-1)
    ece, mce = calibration_errors(pbar, y, num_bins=num_bins)
    p_true = np.clip(pbar[np.arange(y.size), y], 1e-12, 1.0)
    return {
        "accuracy": float(np.mean(np.argmax(pbar, -1) == y)),
        "log_loss": float(-np.mean(np.log(p_true))),
        "ece": float(ece),
        "mce": float(mce),
    }
