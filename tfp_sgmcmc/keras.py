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
batched ``tf.data.Dataset`` (a [`DatasetData`][tfp_sgmcmc.data.DatasetData]; the
driver feeds it to XLA-compiled chunks, and it also runs step by step in graph mode).

Likelihoods: ``"categorical"`` (softmax logits), ``"bernoulli"`` (one logit),
``"gaussian"`` (mean, with ``noise_scale``) or a callable
``(y, outputs) -> per-example log-likelihood``. The contract (see
[`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior]): the model outputs
**logits** (no final softmax or sigmoid, or ``from_logits=False`` to say it
outputs probabilities), labels are
**integer class ids** (one-hot rows are accepted and converted). Prior: isotropic
``N(0, prior_scale² I)`` on every weight (the MAMBA BNN uses ``N(0, 1)``) or a
callable on the list of weights.

Chains: ``stateless_call`` evaluates one set of weights; states with leading
chain/sample dimensions (e.g. a block of posterior samples whose full-data
scores the KSD needs) are mapped over with ``tf.map_fn``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data import DatasetData, InMemoryData
from tfp_sgmcmc.diagnostics import model_averaged_probabilities
from tfp_sgmcmc.diagnostics.calibration import predictive_metrics
from tfp_sgmcmc.estimators import MinibatchEstimator
from tfp_sgmcmc.internal.util import check_int, check_positive

__all__ = [
    "KerasPosterior",
    "output_activation",
    "predictive_probabilities",
    "posterior_predictive_metrics",
]

_LIKELIHOODS = ("categorical", "bernoulli", "gaussian")
_PROBABILITY_ACTIVATIONS = ("softmax", "sigmoid")


def output_activation(model: Any) -> str | None:
    """The activation the model's last layer applies to its output (``"softmax"``,
    ``"sigmoid"``, another name, or ``None`` for a linear output).

    Looks at ``model.layers[-1]``: a layer with an ``activation`` (``Dense``,
    ``Conv*``), a ``keras.layers.Softmax``, or a ``keras.layers.Activation``;
    nested models are followed to their last layer.
    """
    layer = model
    while isinstance(layer, keras.Model) and layer.layers:
        layer = layer.layers[-1]
    if isinstance(layer, keras.layers.Softmax):
        return "softmax"
    act = getattr(layer, "activation", None)
    if act is None:
        return None
    name = act if isinstance(act, str) else getattr(act, "__name__", type(act).__name__)
    return None if name == "linear" else name


def _class_ids(y: np.ndarray, num_classes: int | None) -> np.ndarray:
    """Integer class ids ``[N]`` from ids (any int/float dtype holding integers) or one-hot."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] > 1:  # one-hot rows -> ids
        if not (np.all((y == 0) | (y == 1)) and np.all(y.sum(1) == 1)):
            raise ValueError(
                f"`data` labels have shape {y.shape}: two-dimensional labels must be one-hot "
                "rows (a single 1 per row); otherwise pass integer class ids of shape [N]."
            )
        y = np.argmax(y, axis=1)
    y = y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
    if y.ndim != 1:
        raise ValueError(f"`data` labels must be class ids [N] or one-hot [N, K], got {y.shape}.")
    if not np.all(np.isfinite(y.astype(np.float64))) or not np.all(y == np.round(y)):
        raise ValueError(
            "`data` labels must be integer class ids (e.g. 0..K-1), got non-integer values; "
            "probabilistic (soft) labels need a callable `likelihood`."
        )
    ids = y.astype(np.int64)
    if ids.size and (ids.min() < 0 or (num_classes is not None and ids.max() >= num_classes)):
        raise ValueError(
            f"`data` labels must lie in [0, {num_classes}) (the model's {num_classes} outputs), "
            f"got values in [{ids.min()}, {ids.max()}]."
        )
    return ids.astype(np.int32)


class KerasPosterior:
    """A Keras 3 model + likelihood + prior + data as a target for the kernels.

    The contract:

    * **Outputs are logits.** ``"categorical"`` applies ``log_softmax`` to the
      model's ``[n, K]`` output and ``"bernoulli"`` reads its ``[n]``/``[n, 1]``
      output as the logit of ``p(y = 1)``. A model whose last layer already
      applies ``softmax``/``sigmoid`` (``Dense(K, activation="softmax")``,
      ``keras.layers.Softmax()``, ``Activation("sigmoid")``) is refused unless
      ``from_logits=False`` says so: then the outputs are read as probabilities
      (``log p`` is taken of them, clipped at the float's ``tiny``). Remove the
      activation for the numerically better path.
    * **Labels are integer class ids**, ``y`` of shape ``[N]`` (or ``[N, 1]``)
      in ``0..K-1`` for ``"categorical"`` and in ``{0, 1}`` for
      ``"bernoulli"``; float arrays holding integers are accepted, and one-hot
      rows ``[N, K]`` are converted to ids. Anything else (soft labels, ids out
      of range) is a ``ValueError``. The check runs on in-memory data; a
      ``tf.data`` dataset must yield ids already. ``K`` is read from
      ``model.outputs`` or, for a subclassed model without them, from a
      forward pass on the first row.
    * **One output** for the built-in likelihoods; a model with several outputs
      needs a callable ``likelihood`` (it receives the list of outputs).
    * **Shapes and dtypes**: ``x`` ``[N, ...]`` and floating ``y`` arrays are
      cast to the dtype of the model's weights (float64 weights give float64
      data), the state is the list of trainable weights, optionally with
      leading chain dimensions.

    Args:
      model: a built Keras 3 model (TF backend).
      data: ``(x, y)`` arrays (``x`` a list/tuple/dict of arrays for a model with
        several inputs), an [`InMemoryData`][tfp_sgmcmc.data.InMemoryData], or a
        batched ``tf.data.Dataset`` of ``(x, y)``.
      likelihood: ``"categorical"``, ``"bernoulli"``, ``"gaussian"`` or a
        callable ``(y, outputs) -> [n]``. Default value: ``"categorical"``.
      from_logits: whether the model outputs logits (``True``) or
        probabilities (``False``), for ``"categorical"``/``"bernoulli"``.
        Default value: ``None`` (logits, and a final softmax/sigmoid layer is
        an error).
      prior_scale: standard deviation of the isotropic Gaussian prior (a
        positive finite scalar), or a callable ``list_of_weights -> log p``.
        Default value: ``1.``.
      noise_scale: observation noise of the ``"gaussian"`` likelihood (a
        positive finite scalar). Default value: ``1.``.
      num_examples: ``N``, required for a ``tf.data`` dataset; with arrays or a
        data source it may only repeat their number of rows.
        Default value: ``None``.
      scheme: minibatch scheme of ``(x, y)`` arrays. An ``InMemoryData`` keeps
        its own (``data.with_scheme(...)`` changes it) and a dataset has none,
        so another ``scheme`` with them is an error. Default value: ``None``
        (``"epoch"``).

    Raises:
      ValueError: a model that is not built, an unknown likelihood, a
        ``prior_scale`` or ``noise_scale`` that is not a positive finite
        scalar, a dataset without ``num_examples``, a ``num_examples`` or
        ``scheme`` that the data cannot take, several model outputs with a
        built-in likelihood, a final softmax/sigmoid without
        ``from_logits=False`` (or with ``from_logits=True``), labels that are
        not class ids.
    """

    def __init__(
        self,
        model: Any,
        data: Any,
        likelihood: str | Callable[[tf.Tensor, tf.Tensor], tf.Tensor] = "categorical",
        prior_scale: float | Callable[[list], tf.Tensor] = 1.0,
        noise_scale: float = 1.0,
        num_examples: int | None = None,
        scheme: str | None = None,
        from_logits: bool | None = None,
    ) -> None:
        if not isinstance(model, keras.Model):
            raise ValueError(f"`model` must be a Keras 3 model, got {type(model).__name__}.")
        if not model.built or not model.trainable_variables:
            raise ValueError("`model` must be built (call it once on an input) with weights.")
        if isinstance(likelihood, str) and likelihood not in _LIKELIHOODS:
            raise ValueError(f"`likelihood` must be one of {_LIKELIHOODS} or a callable.")
        if not callable(prior_scale):
            check_positive(prior_scale, "prior_scale", scalar=True)
        check_positive(noise_scale, "noise_scale", scalar=True)
        if num_examples is not None:
            num_examples = check_int(num_examples, "num_examples", minimum=1)
        classification = likelihood in ("categorical", "bernoulli")
        activation = output_activation(model) if classification else None
        if activation in _PROBABILITY_ACTIVATIONS and from_logits is not False:
            raise ValueError(
                f"`model`'s last layer applies {activation}, but likelihood={likelihood!r} "
                "expects logits: remove the activation (e.g. Dense(K) instead of "
                f"Dense(K, activation={activation!r})) or pass from_logits=False to read the "
                "outputs as probabilities."
            )
        if from_logits is not None and not isinstance(from_logits, bool):
            raise ValueError(f"`from_logits` must be True, False or None, got {from_logits!r}.")
        self.from_logits = from_logits is not False
        self.model = model
        self.likelihood = likelihood
        self.prior_scale = prior_scale
        self.noise_scale = float(noise_scale)
        # Keras passes ``training`` through ``stateless_call`` to ``call`` as is, so a
        # ``call`` without that argument (valid in Keras) must not receive it.
        self._call_kwargs = {"training": False} if _call_accepts_training(model) else {}
        # Data follow the weights' dtype so that the state and the data agree.
        dtype = np.dtype(tf.as_dtype(model.trainable_variables[0].dtype).as_numpy_dtype)
        self._float_dtype = dtype
        if isinstance(data, tf.data.Dataset):
            if num_examples is None:
                raise ValueError("`num_examples` is required with a tf.data dataset.")
            if scheme is not None:
                raise ValueError(
                    f"`scheme` applies to in-memory data, not to a tf.data dataset, got {scheme!r}."
                )
            self.data = DatasetData(data, num_examples)
            self._check_outputs(model, None, likelihood)
        elif isinstance(data, (InMemoryData, DatasetData)):
            if num_examples is not None and num_examples != data.num_examples:
                raise ValueError(
                    f"`num_examples` = {num_examples} differs from the data's "
                    f"N = {data.num_examples}; leave it out with a data source."
                )
            data_scheme = getattr(data, "scheme", None)
            if scheme is not None and scheme != data_scheme:
                raise ValueError(
                    f"`scheme` = {scheme!r} does not apply to data given as "
                    f"{type(data).__name__} (its scheme is {data_scheme!r}); pass "
                    f"data.with_scheme({scheme!r}) for an InMemoryData instead."
                )
            self.data = data
            self._check_outputs(model, None, likelihood)
        else:
            if not isinstance(data, (tuple, list)) or len(data) != 2:
                raise ValueError(
                    "`data` must be (x, y) arrays, an InMemoryData/DatasetData, or a tf.data "
                    f"dataset, got {type(data).__name__}."
                )
            x, y = data
            x = _as_inputs(x, "data", dtype)
            y = np.asarray(y)
            n = _num_rows(x)
            if y.ndim == 0 or y.shape[0] != n:
                raise ValueError(f"`data`: {n} inputs but labels of shape {y.shape}.")
            if num_examples is not None and num_examples != n:
                raise ValueError(
                    f"`num_examples` = {num_examples} differs from the {n} rows of `data` "
                    "(it is only needed with a tf.data dataset)."
                )
            num_outputs = self._check_outputs(model, x, likelihood)
            if classification:
                y = _class_ids(y, 2 if likelihood == "bernoulli" else num_outputs)
            elif np.issubdtype(y.dtype, np.floating):
                y = y.astype(dtype)
            self.data = InMemoryData((x, y), scheme="epoch" if scheme is None else scheme)
        self._non_trainable = [tf.convert_to_tensor(v.value) for v in model.non_trainable_variables]
        self._weight_ranks = [len(v.shape) for v in model.trainable_variables]

    @staticmethod
    def _check_outputs(model: Any, x: Any, likelihood: Any) -> int | None:
        """The size of the model's last output axis (``None`` if unknown); a
        ``ValueError`` for several outputs with a built-in likelihood."""
        shapes = _output_shapes(model, x)
        if shapes is None:
            return None
        if isinstance(likelihood, str) and len(shapes) != 1:
            raise ValueError(
                f"`model` has {len(shapes)} outputs {shapes}, but likelihood={likelihood!r} "
                "reads a single output: pass a callable `likelihood` (y, outputs) -> [n] "
                "that combines them."
            )
        last = shapes[0][-1] if shapes[0] else None
        return None if last is None else int(last)

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
        out, _ = self.model.stateless_call(
            list(weights), self._non_trainable, x, **self._call_kwargs
        )
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
            if self.from_logits:
                logp = tf.nn.log_softmax(outputs, axis=-1)
            else:
                logp = tf.math.log(tf.maximum(outputs, np.finfo(outputs.dtype.as_numpy_dtype).tiny))
            idx = tf.cast(tf.reshape(y, [-1]), tf.int32)
            return tf.gather(logp, idx, axis=-1, batch_dims=1)
        if lik == "bernoulli":
            yy = tf.cast(tf.reshape(y, [-1]), outputs.dtype)
            if not self.from_logits:
                tiny = np.finfo(outputs.dtype.as_numpy_dtype).tiny
                p1 = tf.reshape(outputs, [-1])
                return yy * tf.math.log(tf.maximum(p1, tiny)) + (1 - yy) * tf.math.log(
                    tf.maximum(1 - p1, tiny)
                )
            logit = tf.reshape(outputs, [-1])
            return yy * logit - tf.nn.softplus(logit)
        mu = tf.reshape(outputs, [-1])
        yy = tf.cast(tf.reshape(y, [-1]), outputs.dtype)
        s = tf.constant(self.noise_scale, outputs.dtype)
        return -0.5 * tf.square((yy - mu) / s) - tf.math.log(s) - 0.5 * np.log(2 * np.pi)

    def log_likelihood_fn(self, state: Any, batch: Any) -> tf.Tensor:
        """Per-example ``log p(y_i | f_W(x_i))``, ``[..., n]`` (the estimator's protocol)."""
        x, y = batch
        weights = list(state)
        x = tf.nest.map_structure(lambda t: tf.cast(t, weights[0].dtype), x)

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


def _sample_parts(posterior: KerasPosterior, samples: Any) -> list[np.ndarray]:
    """Weight samples as NumPy arrays ``[S, *weight shape]`` (tensors, arrays, a lone part)."""
    parts = list(samples) if isinstance(samples, (list, tuple)) else [samples]
    parts = [np.asarray(p) for p in parts]
    ranks = posterior._weight_ranks
    if len(parts) != len(ranks):
        raise ValueError(
            f"`samples` must hold one array per trainable weight ({len(ranks)}), got {len(parts)}."
        )
    num = parts[0].shape[0] if parts[0].ndim else 0
    for p, r in zip(parts, ranks):
        if p.ndim != r + 1 or p.shape[0] != num:
            raise ValueError(
                "`samples` parts must be [S, *weight shape] with the same S (flatten chain "
                f"dimensions first), got shapes {[q.shape for q in parts]}."
            )
    return parts


def _call_accepts_training(model: Any) -> bool:
    """Whether ``model.call`` takes a ``training`` argument (by name or ``**kwargs``)."""
    try:
        params = inspect.signature(model.call).parameters.values()
    except (TypeError, ValueError):  # no introspectable signature: keep Keras's default
        return True
    return any(p.name == "training" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _output_shapes(model: Any, x: Any) -> list[tuple] | None:
    """The shapes of the model's outputs, from ``model.outputs`` (functional and
    sequential models) or, for a subclassed model, a forward pass on the first row
    of ``x``; ``None`` when neither is available."""
    outputs = getattr(model, "outputs", None)
    if outputs:
        return [tuple(o.shape) for o in outputs]
    if x is None:
        return None
    try:
        out = model(tf.nest.map_structure(lambda t: t[:1], x))
    except Exception as e:  # the user's model failed: one error naming `model`
        raise ValueError(
            f"`model` failed on the first row of `data` ({type(e).__name__}: {e})."
        ) from e
    return [tuple(t.shape) for t in tf.nest.flatten(out)]


def _as_inputs(x: Any, name: str, dtype: Any = np.float32) -> Any:
    """Model inputs as floating arrays of ``dtype``: one array, or a list/tuple/dict of
    arrays (a model with several inputs) sharing their number of rows."""
    try:
        x = tf.nest.map_structure(lambda t: np.asarray(t, dtype), x)
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"`{name}`: the inputs must be an array or a list/tuple/dict of arrays (one per "
            f"model input), each [N, ...] of numbers: {e}"
        ) from e
    leaves = tf.nest.flatten(x)
    if not leaves or any(t.ndim == 0 for t in leaves):
        raise ValueError(f"`{name}`: every input must be an array [N, ...].")
    rows = {t.shape[0] for t in leaves}
    if len(rows) > 1:
        raise ValueError(f"`{name}`: the model's inputs disagree on N: {sorted(rows)} rows.")
    return x


def _num_rows(x: Any) -> int:
    return int(tf.nest.flatten(x)[0].shape[0])


def predictive_probabilities(
    posterior: KerasPosterior, samples: Any, x: Any, batch_size: int = 2048
) -> np.ndarray:
    """Per-sample predictive probabilities ``[S, n, K]`` (softmax / sigmoid of the outputs).

    Args:
      posterior: the [`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior].
      samples: list of weight parts, each ``[S, ...]`` (NumPy arrays or tensors,
        e.g. ``sample_chain``'s output).
      x: inputs ``[n, ...]`` (a list/tuple/dict of them for a model with several inputs).
      batch_size: rows per forward pass. Default value: ``2048``.
    """
    samples = _sample_parts(posterior, samples)
    x = _as_inputs(x, "x", posterior._float_dtype)
    fn = tf.function(lambda ws, xb: posterior.outputs(ws, xb), reduce_retracing=True)
    out = []
    num = samples[0].shape[0]
    for s in range(num):
        ws = [tf.constant(p[s]) for p in samples]
        rows = []
        for start in range(0, _num_rows(x), batch_size):
            stop = start + batch_size
            xb = tf.nest.map_structure(
                lambda t, a=start, b=stop, d=ws[0].dtype: tf.constant(t[a:b], d), x
            )
            rows.append(fn(ws, xb).numpy())
        logits = np.concatenate(rows, 0).astype(np.float64)
        if not posterior.from_logits:  # the model outputs probabilities already
            p = logits.reshape(-1) if posterior.likelihood == "bernoulli" else logits
            out.append(np.stack([1 - p, p], -1) if posterior.likelihood == "bernoulli" else p)
        elif posterior.likelihood == "bernoulli":
            p1 = 1.0 / (1.0 + np.exp(-logits.reshape(-1)))
            out.append(np.stack([1 - p1, p1], -1))
        else:
            z = logits - logits.max(-1, keepdims=True)
            e = np.exp(z)
            out.append(e / e.sum(-1, keepdims=True))
    return np.stack(out, 0)


def posterior_predictive_metrics(
    posterior: KerasPosterior,
    samples: Any,
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
      samples: weight samples ``[S, ...]`` (arrays or tensors, any ``S``).
      x: test inputs.
      y: test labels (class ids, or one-hot rows).
      num_bins: calibration bins. Default value: ``10``.
      method: ``"arithmetic"`` or ``"geometric"``. Default value: ``"arithmetic"``.
      max_samples: evenly thin the samples to at most this many.
        Default value: ``100``.
    """
    samples = _sample_parts(posterior, samples)
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
    y = _class_ids(np.asarray(y), pbar.shape[-1]).astype(int)
    if y.shape[0] != pbar.shape[0]:
        raise ValueError(f"`y` has {y.shape[0]} labels for {pbar.shape[0]} inputs `x`.")
    return predictive_metrics(pbar, y, num_bins=num_bins)
