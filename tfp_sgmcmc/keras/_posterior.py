"""``KerasPosterior``: a Keras 3 model, a likelihood, a prior and data as a target
for the kernels."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data import DatasetData, InMemoryData
from tfp_sgmcmc.data.fed import FedBatches
from tfp_sgmcmc.estimators import MinibatchEstimator
from tfp_sgmcmc.internal.util import check_int, check_positive
from tfp_sgmcmc.keras._errors import refuse_keras_loss
from tfp_sgmcmc.keras._inputs import (
    as_inputs,
    cast_floating,
    check_sample_weight,
    class_ids,
    num_rows,
)
from tfp_sgmcmc.keras._likelihoods import gaussian_log_prior, per_example_log_likelihood

__all__ = [
    "KerasPosterior",
    "LIKELIHOODS",
    "PROBABILITY_ACTIVATIONS",
    "call_accepts_training",
    "output_activation",
]


LIKELIHOODS = ("categorical", "bernoulli", "gaussian")
PROBABILITY_ACTIVATIONS = ("softmax", "sigmoid")


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


class KerasPosterior:
    """A Keras 3 model + likelihood + prior + data as a target for the kernels.

    The contract:

    * **Outputs are logits.** ``"categorical"`` applies ``log_softmax`` to the
      model's ``[n, K]`` output and ``"bernoulli"`` reads its ``[n]``/``[n, 1]``
      output as the logit of ``p(y = 1)``. A model whose last layer already
      applies ``softmax``/``sigmoid`` (``Dense(K, activation="softmax")``,
      ``keras.layers.Softmax()``, ``Activation("sigmoid")``) is refused unless
      ``from_logits`` says how to read it: ``False`` reads the outputs as
      probabilities (``log p`` is taken of them, clipped at the float's ``tiny``),
      ``True`` as logits (as ``BayesianModel`` does when told). Remove the
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
    * **Shapes and dtypes**: ``x`` ``[N, ...]`` and floating ``y`` arrays, and
      the floating elements of a ``tf.data`` dataset (and ``full_dataset``), are
      cast to the dtype of the model's weights (float64 weights give float64
      data); integer labels are kept. The state is the list of trainable weights, optionally with
      leading chain dimensions.

    Args:
      model: a built Keras 3 model (TF backend).
      data: ``(x, y)`` arrays (``x`` a list/tuple/dict of arrays for a model with
        several inputs), an [`InMemoryData`][tfp_sgmcmc.data.InMemoryData], a
        batched ``tf.data.Dataset`` of ``(x, y)``, or a
        [`FedBatches`][tfp_sgmcmc.data.fed.FedBatches] of ``(x, y, mask)``.
      likelihood: ``"categorical"``, ``"bernoulli"``, ``"gaussian"`` or a
        callable ``(y, outputs) -> [n]``. Default value: ``"categorical"``.
      from_logits: whether the model outputs logits (``True``) or
        probabilities (``False``), for ``"categorical"``/``"bernoulli"``.
        Default value: ``None`` (logits, and a final softmax/sigmoid layer is
        an error: say how to read its outputs).
      prior_scale: standard deviation of the isotropic Gaussian prior (a
        positive finite scalar), or a callable ``list_of_weights -> log p``.
        Default value: ``1.``.
      noise_scale: observation noise ``σ`` of the ``"gaussian"`` likelihood (a
        positive finite scalar), or ``None`` to learn it: the state then ends with a
        scalar ``log σ`` (flat prior; `init_state` starts it at 0). Default value:
        ``1.``.
      num_examples: ``N``, required for a ``tf.data`` dataset; with arrays or a
        data source it may only repeat their number of rows.
        Default value: ``None``.
      scheme: minibatch scheme of ``(x, y)`` arrays. An ``InMemoryData`` keeps
        its own (``data.with_scheme(...)`` changes it) and a dataset has none,
        so another ``scheme`` with them is an error. Default value: ``None``
        (``"epoch"``).
      full_dataset: with a ``tf.data`` dataset, a dataset of ``(x, y)`` that
        visits each of the ``num_examples`` rows once, batched or not: the
        full passes (full-data scores for MAMBA's Stein discrepancies, control
        variates) stream it (see
        [`DatasetData`][tfp_sgmcmc.data.DatasetData], which keeps its rows in
        memory when they are small). Default value: ``None`` (a finite
        ``data`` pipeline is its own full pass, so it must then hold every row
        once, e.g. ``drop_remainder`` dropping none; a repeating one has no
        full pass, and full-data scores raise a ``ValueError`` naming
        ``full_dataset``).
      sample_weight: with ``(x, y)`` arrays, per-example weights ``w_i >= 0``
        ``[N]``: the log-likelihood is ``Σ_i w_i log p(y_i | f_W(x_i))`` (a weight
        counts its example ``w_i`` times, as ``model.fit``'s ``sample_weight``; 0
        drops it, even an example of log-likelihood ``−∞``). The minibatches are
        then ``(x, y, w)`` rows, read as `row_log_likelihood`'s masked batches.
        Default value: ``None`` (all 1).

    Raises:
      ValueError: a model that is not built, an unknown likelihood, a
        ``prior_scale`` or ``noise_scale`` that is not a positive finite
        scalar, a dataset without ``num_examples``, a ``num_examples`` or
        ``scheme`` that the data cannot take, several model outputs with a
        built-in likelihood, a final softmax/sigmoid without a ``from_logits``
        saying how to read it, labels that are
        not class ids, a ``noise_scale=None`` with another likelihood than
        ``"gaussian"``, a ``sample_weight`` with data other than arrays or
        weights that are not ``N`` finite numbers ``>= 0``.
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
        full_dataset: tf.data.Dataset | None = None,
        sample_weight: Any = None,
    ) -> None:
        if not isinstance(model, keras.Model):
            raise ValueError(f"`model` must be a Keras 3 model, got {type(model).__name__}.")
        if not model.built or not model.trainable_variables:
            raise ValueError("`model` must be built (call it once on an input) with weights.")
        if full_dataset is not None and not isinstance(data, tf.data.Dataset):
            raise ValueError(
                "`full_dataset` applies to data given as a tf.data dataset, got "
                f"{type(data).__name__}."
            )
        if full_dataset is not None and not isinstance(full_dataset, tf.data.Dataset):
            raise ValueError(
                f"`full_dataset` must be a tf.data dataset, got {type(full_dataset).__name__}."
            )
        if isinstance(likelihood, str) and likelihood not in LIKELIHOODS:
            raise ValueError(f"`likelihood` must be one of {LIKELIHOODS} or a callable.")
        if sample_weight is not None and not (isinstance(data, (tuple, list)) and len(data) == 2):
            raise ValueError(
                "`sample_weight` applies to data given as (x, y) arrays, got "
                f"{type(data).__name__}: weigh the rows in the data source instead."
            )
        #: Whether the batches are masked ``(x, y, mask)`` rows (fed, or weighted arrays).
        self.masked = isinstance(data, FedBatches) or sample_weight is not None
        refuse_keras_loss(likelihood)
        if not callable(prior_scale):
            check_positive(prior_scale, "prior_scale", scalar=True)
        if noise_scale is not None:
            check_positive(noise_scale, "noise_scale", scalar=True)
        elif likelihood != "gaussian":
            raise ValueError(
                "`noise_scale=None` (a learned noise) applies to likelihood='gaussian' only."
            )
        if num_examples is not None:
            num_examples = check_int(num_examples, "num_examples", minimum=1)
        classification = likelihood in ("categorical", "bernoulli")
        activation = output_activation(model) if classification else None
        if from_logits is not None and not isinstance(from_logits, bool):
            raise ValueError(f"`from_logits` must be True, False or None, got {from_logits!r}.")
        # Said explicitly, a reading stands (a sigmoid per class read as logits is a
        # model); left unsaid, a probability layer read as logits would be silently wrong.
        if activation in PROBABILITY_ACTIVATIONS and from_logits is None:
            raise ValueError(
                f"`model`'s last layer applies {activation}, but likelihood={likelihood!r} "
                "expects logits: remove the activation (e.g. Dense(K) instead of "
                f"Dense(K, activation={activation!r})) or pass from_logits=False to read the "
                "outputs as probabilities."
            )
        self.from_logits = from_logits is not False
        self.model = model
        self.likelihood = likelihood
        self.prior_scale = prior_scale
        self.noise_scale = None if noise_scale is None else float(noise_scale)
        #: Whether the state ends with a learned ``log σ`` (``noise_scale=None``).
        self.learn_noise_scale = noise_scale is None
        # Keras passes ``training`` through ``stateless_call`` to ``call`` as is, so a
        # ``call`` without that argument (valid in Keras) must not receive it.
        self._accepts_training = call_accepts_training(model)
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
            if full_dataset is None and int(data.cardinality()) != int(
                tf.data.INFINITE_CARDINALITY
            ):
                full_dataset = data  # a finite pipeline: one pass visits every row
            # A pipeline from NumPy arrays yields float64 features; a Keras model's weights
            # are float32: cast floating elements as the arrays' path does.
            data = cast_floating(data, dtype)
            if full_dataset is not None:
                full_dataset = cast_floating(full_dataset, dtype)
            self.data = DatasetData(data, num_examples, full_dataset=full_dataset)
            self._check_outputs(model, None, likelihood)
        elif isinstance(data, (InMemoryData, DatasetData, FedBatches)):
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
            x = as_inputs(x, "data", dtype)
            y = np.asarray(y)
            n = num_rows(x)
            if y.ndim == 0 or y.shape[0] != n:
                raise ValueError(f"`data`: {n} inputs but labels of shape {y.shape}.")
            if num_examples is not None and num_examples != n:
                raise ValueError(
                    f"`num_examples` = {num_examples} differs from the {n} rows of `data` "
                    "(it is only needed with a tf.data dataset)."
                )
            num_outputs = self._check_outputs(model, x, likelihood)
            if classification:
                y = class_ids(y, 2 if likelihood == "bernoulli" else num_outputs)
            elif np.issubdtype(y.dtype, np.floating):
                y = y.astype(dtype)
            rows = (x, y)
            if sample_weight is not None:
                w = check_sample_weight(sample_weight, n).astype(dtype)
                rows = (x, y, w)
            self.data = InMemoryData(rows, scheme="epoch" if scheme is None else scheme)
        self._non_trainable = [tf.convert_to_tensor(v.value) for v in model.non_trainable_variables]
        self._weight_ranks = [len(v.shape) for v in model.trainable_variables]
        self._num_weights = len(self._weight_ranks)

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
        """The model's current trainable weights (a list of tensors), then ``log σ = 0``
        for a learned noise."""
        state = [tf.convert_to_tensor(v.value) for v in self.model.trainable_variables]
        if self.learn_noise_scale:
            state.append(tf.zeros([], state[0].dtype))
        return state

    @property
    def num_parameters(self) -> int:
        weights = int(sum(np.prod(v.shape) for v in self.model.trainable_variables))
        return weights + int(self.learn_noise_scale)

    @property
    def model_state(self) -> list[tf.Tensor]:
        """The model's non-trainable values (BatchNormalization statistics, ...) the
        log-likelihood runs the model with: their values when the posterior was built,
        or the last `set_model_state`."""
        return list(self._non_trainable)

    def set_model_state(self, values: list[Any]) -> None:
        """Run the model with these non-trainable ``values`` from now on (programs traced
        later see them; e.g. BatchNormalization statistics fixed after a MAP search)."""
        values = [tf.convert_to_tensor(v) for v in values]
        if [tuple(v.shape) for v in values] != [tuple(t.shape) for t in self._non_trainable]:
            raise ValueError(
                "`values` must have the shapes of the model's non-trainable variables, "
                f"{[tuple(t.shape) for t in self._non_trainable]}."
            )
        self._non_trainable = values

    # -- model pieces ---------------------------------------------------------- #
    def forward(
        self,
        weights: list[tf.Tensor],
        x: Any,
        model_state: list[tf.Tensor] | None = None,
        training: bool = False,
    ) -> tuple[Any, list[tf.Tensor]]:
        """``f_W(x)`` for one set of weights via ``stateless_call``, and the model's new
        non-trainable state (BatchNormalization's statistics move in ``training`` mode).
        Floating outputs are cast to the weights' dtype: a mixed-precision model
        computes in float16, its likelihood and gradients in float32."""
        state = self._non_trainable if model_state is None else list(model_state)
        kwargs = {"training": training} if self._accepts_training else {}
        out, new_state = self.model.stateless_call(
            list(weights)[: self._num_weights], state, x, **kwargs
        )
        dtype = self._float_dtype
        out = tf.nest.map_structure(
            lambda t: tf.cast(t, dtype) if t.dtype.is_floating else t, out
        )
        return out, list(new_state)

    def outputs(self, weights: list[tf.Tensor], x: tf.Tensor) -> tf.Tensor:
        """``f_W(x)`` for one set of weights (inference mode, the `model_state`)."""
        return self.forward(weights, x)[0]

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

    def per_example_log_likelihood(
        self, y: tf.Tensor, outputs: tf.Tensor, log_noise: Any = None
    ) -> tf.Tensor:
        """``log p(y_i | f_W(x_i))``, ``[n]``: the bridges' one likelihood
        (``tfp_sgmcmc.keras._likelihoods``); ``log_noise`` is a learned ``log σ``."""
        if self.likelihood == "gaussian" and log_noise is None:
            log_noise = tf.math.log(tf.constant(self.noise_scale, outputs.dtype))
        return per_example_log_likelihood(
            self.likelihood, y, outputs, from_logits=self.from_logits, log_noise=log_noise
        )

    def row_log_likelihood(
        self,
        state: Any,
        batch: tuple[Any, Any, Any],
        model_state: list[tf.Tensor] | None = None,
        training: bool = False,
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        r"""Each row's share ``r_i`` of a masked batch's mean log-likelihood, ``[n]``, and
        the model's new non-trainable state.

        ``batch = (x, y, mask)``, ``mask`` each row's weight ``w_i ≥ 0`` and ``−1`` on
        padding rows:

        $$
        r_i = \frac{w_i \log p(y_i \mid x_i)}{n_\text{real}} \ (w_i > 0), \qquad
        r_i = 0 \text{ otherwise},
        $$

        ``n_real`` counting the rows with ``w_i ≥ 0`` (zero-weight rows included, as
        Keras's loss counts them), so ``N Σ_i r_i`` estimates
        ``Σ_i w_i log p(y_i | x_i)`` without bias, whatever the padding. A zero weight
        drops even a row of log-likelihood ``−∞``. One set of weights (no chain
        dimensions).

        Args:
          state: the weights (then ``log σ``, if learned).
          batch: ``(x, y, mask)``.
          model_state: the non-trainable values to run the model with. Default value:
            ``None`` (`model_state`).
          training: run the model in training mode (Dropout on, BatchNormalization on
            the batch's statistics, which it updates). Default value: ``False``.
        """
        x, y, mask = batch
        parts = list(state)
        out, new_state = self.forward(parts, x, model_state, training)
        log_noise = parts[self._num_weights] if self.learn_noise_scale else None
        ll = self.per_example_log_likelihood(y, out, log_noise)
        w = tf.cast(mask, ll.dtype)
        # where, not a product: a zero weight drops even an example of log-likelihood -inf.
        ll = tf.where(w > 0, ll * w, tf.zeros_like(ll))
        return ll / tf.reduce_sum(tf.cast(w >= 0, ll.dtype)), new_state

    def log_likelihood_fn(self, state: Any, batch: Any) -> tf.Tensor:
        """Per-example ``log p(y_i | f_W(x_i))``, ``[..., n]`` (the estimator's protocol);
        on a masked ``(x, y, mask)`` batch, ``n r_i`` (`row_log_likelihood`)."""
        weights = list(state)
        if self.masked:
            n = tf.cast(tf.shape(batch[2])[0], weights[0].dtype)
            return self._map_chains(
                lambda ws: self.row_log_likelihood(ws, batch)[0] * n, weights
            )
        x, y = batch
        x = tf.nest.map_structure(lambda t: tf.cast(t, weights[0].dtype), x)

        def one(ws: list) -> tf.Tensor:
            log_noise = ws[self._num_weights] if self.learn_noise_scale else None
            return self.per_example_log_likelihood(y, self.outputs(ws, x), log_noise)

        return self._map_chains(one, weights)

    def log_prior_fn(self, state: Any) -> tf.Tensor:
        """``log N(W; 0, σ² I)`` up to a constant (or the user's prior) on the weights; a
        learned ``log σ`` has a flat prior."""
        weights = list(state)[: self._num_weights]
        if callable(self.prior_scale):
            return self.prior_scale(weights)
        extra = self._extra_dims(weights)
        axes = [range(extra, extra + r) for r in self._weight_ranks]
        return gaussian_log_prior(weights, self.prior_scale, axes)

    def estimator(
        self, batch_size: int | None = None, full_data_chunk_size: int = 4096
    ) -> MinibatchEstimator:
        """A [`MinibatchEstimator`][tfp_sgmcmc.MinibatchEstimator] of this posterior.

        Args:
          batch_size: rows per minibatch. Default value: ``None`` (the data source's
            own, required for in-memory data).
          full_data_chunk_size: rows per chunk of a full-data pass (control-variate
            anchors, Stein scores): a chunk's activations are what a pass holds, so a
            large data set needs chunks, not one batch of all rows. Default value: ``4096``.
        """
        if batch_size is None:
            batch_size = getattr(self.data, "batch_size", None)
            if batch_size is None:
                raise ValueError("`batch_size` is required with in-memory data.")
        return MinibatchEstimator(
            self.log_likelihood_fn,
            self.data,
            int(batch_size),
            log_prior_fn=self.log_prior_fn,
            full_data_chunk_size=check_int(full_data_chunk_size, "full_data_chunk_size", 1),
        )

    def load_weights(self, state: Any) -> None:
        """Write a state (list of weights; a learned ``log σ`` is not a weight) into the
        Keras model's variables."""
        for v, w in zip(self.model.trainable_variables, list(state)[: self._num_weights]):
            v.assign(np.asarray(w))


def call_accepts_training(model: Any) -> bool:
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
