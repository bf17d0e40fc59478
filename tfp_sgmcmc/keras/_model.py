"""``BayesianModel``: a Keras model's posterior through fit / predict / evaluate."""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data.fed import FedBatches
from tfp_sgmcmc.driver.store import SampleStore
from tfp_sgmcmc.internal.util import check_int, check_positive
from tfp_sgmcmc.keras._errors import (
    KerasDataError,
    KerasLikelihoodError,
    KerasSaveError,
    refuse_keras_loss,
)
from tfp_sgmcmc.keras._inputs import (
    Source,
    check_finite,
    check_numeric_labels,
    class_ids,
    class_weight_table,
    num_rows,
    split_validation,
    take,
    to_host,
)
from tfp_sgmcmc.keras._likelihoods import per_example_log_likelihood
from tfp_sgmcmc.keras._posterior import (
    LIKELIHOODS,
    PROBABILITY_ACTIVATIONS,
    KerasPosterior,
    call_accepts_training,
)
from tfp_sgmcmc.keras._prediction import (
    VALIDATION_DRAWS,
    BayesianPrediction,
    ConcreteCall,
    sublayers,
)
from tfp_sgmcmc.keras._sampling import FedAdam, FedSGLD
from tfp_sgmcmc.keras._saving import (
    MODEL_FILE,
    STORE_WRITER,
    draw_store,
    likelihood_entry,
    prepare_directory,
    read_draws,
    read_saved,
    write_draws,
    write_manifest,
    write_statistics,
)
from tfp_sgmcmc.keras._tuning import Tuning, steps_per_epoch, tune_posterior

__all__ = ["BayesianModel"]

#: Stationary variance inflation the step size allows for the coordinates with the
#: noisiest gradients (the 90th percentile of the whitened gradient-noise variance).
_TARGET_INFLATION = 0.1
#: Full batches the curvature pass averages over at most.
_CURVATURE_BATCHES = 100
#: Batches the BatchNormalization statistics pass averages over at most.
_BN_BATCHES = 200
_SAMPLE_BURN_IN = 0.2
#: What ``fit`` samples with unless it tunes.
_RULE_SAMPLER = (
    "preconditioned SGLD (diagonal preconditioner from the gradient second moments at the MAP)"
)
#: Steps per compiled call at most, and the bytes of stacked batches one call may take.
_MAX_STEPS_PER_CALL = 32
_BLOCK_BYTES = 32 * 2**20
#: Power iterations (one minibatch Hessian-vector product each) for the stiffest curvature.
_POWER_ITERATIONS = 20


def _probability_activation_last(model: Any) -> str | None:
    """The softmax or sigmoid (its name) that comes after the last layer with weights
    (shape-only layers such as ``Reshape`` or ``Flatten`` in between are looked
    through), else ``None``."""
    for layer in reversed(sublayers(model)):
        if isinstance(layer, keras.Model):
            continue
        if isinstance(layer, keras.layers.Softmax):
            return "softmax"
        act = getattr(layer, "activation", None)
        if act is not None:
            name = act if isinstance(act, str) else getattr(act, "__name__", "")
            if name in PROBABILITY_ACTIVATIONS:
                return name
        if layer.weights and not isinstance(layer, keras.layers.InputLayer):
            return None
    return None


class BayesianModel(BayesianPrediction):
    """A Keras model's posterior, fitted, sampled and used as Keras users expect.

    ``fit`` trains the model to its MAP (Adam, as ``model.fit`` would), fixes what
    must stay fixed while sampling (BatchNormalization statistics, Dropout off),
    measures the posterior's scale and the minibatch gradient noise at the MAP,
    sets the step size from them, and samples the weights with preconditioned
    SGLD, keeping ``num_draws`` draws in memory (or writing them to a ``run_dir``).
    ``predict`` averages the model's predictive over the draws (with per-draw
    outputs and central intervals on request); ``evaluate`` scores it (see the
    example below). ``save`` keeps the posterior in a directory (``model.keras``, the
    draws, a JSON manifest) that ``BayesianModel.load`` reads back in a new process.

    The posterior: ``log π(W) = log p(W) + Σ_i log p(y_i | f_W(x_i))``, an isotropic
    Gaussian prior ``N(0, prior_scale² I)`` on every trainable weight, the model run in
    inference mode. Likelihoods:

    * ``"categorical"``: ``[n, K]`` outputs, logits or probabilities. Probabilities
      are detected from the outputs on the first training batch (every row
      non-negative and summing to one), whatever layers produce them (a softmax
      followed by a ``Reshape`` included); ``from_logits`` overrides the detection.
      Labels: class ids ``[n]``/``[n, 1]`` or one-hot rows ``[n, K]``.
    * ``"bernoulli"``: one output per example, a logit, or a probability when a
      sigmoid or softmax follows the last layer with weights and the outputs lie in
      ``[0, 1]``. Labels in ``{0, 1}``.
    * ``"gaussian"``: ``y ~ N(f_W(x), σ²)`` per output coordinate; ``σ`` is
      ``noise_scale`` when given, else learned (a flat prior on ``log σ``, sampled
      with the weights).
    * a callable ``(y, outputs) -> [n]`` per-example log-likelihood.

    Layers whose behaviour depends on ``training``: **BatchNormalization** is trained
    in training mode during the MAP search, as ``model.fit`` does; before sampling its
    moving statistics are set to the average of the batch statistics over the
    training data at the MAP, and the posterior is sampled in inference mode with
    them fixed. **Dropout** (and the other noise layers) act during the MAP search,
    as in ``model.fit``, and are off while sampling and predicting (a one-line
    notice says so).

    Compilation: every phase runs the library's loop ``run_steps`` over a library kernel,
    fed its minibatches by the host: one program per ``training`` mode runs the MAP search
    and the curvature pass (the library's Adam, ``AdamAscent``), and one the sampler (the
    library's `SGLD` on the whitened weights of a `WhitenedEstimator`, diagonal scale
    ``P^½``). Each runs a block of ``steps_per_execution`` steps per
    call, while a second thread stacks the next block's batches. With
    ``jit_compile=None`` the choice of XLA is made by a short measured probe (both
    variants timed on a training batch), except for convolutional models on a CPU,
    which run without XLA (XLA compiles them slowly and runs them slower there).

    Args:
      model: a built Keras 3 model (TF backend) with one output (any output for a
        callable likelihood).
      likelihood: ``"categorical"``, ``"bernoulli"``, ``"gaussian"`` or a callable
        ``(y, outputs) -> [n]``. Default value: ``"categorical"``.
      prior_scale: standard deviation of the Gaussian prior on every weight.
        Default value: ``1.``.
      noise_scale: ``σ`` of the ``"gaussian"`` likelihood; ``None`` learns it.
        Only for ``"gaussian"``. Default value: ``None``.
      from_logits: ``True``/``False`` to say whether the outputs are logits or
        probabilities; ``None`` detects it. Default value: ``None``.
      num_draws: posterior draws kept. Default value: ``100``.
      learning_rate: Adam's learning rate for the MAP search. Default value: ``1e-3``.
      jit_compile: ``True``/``False`` to force XLA on or off; ``None`` decides by a
        probe. Default value: ``None``.
      steps_per_execution: steps run by one compiled call (a loop inside the
        program over a block of stacked batches), as Keras's ``compile`` option of
        that name; the batch callbacks are then called once per block.
        Default value: ``None`` (as many as keep a block's batches under 32 MiB,
        at most 32).
      seed: an int in ``[0, 2**31)`` for the shuffling (the data package's
        ``feistel_permutation``, epoch ``e`` keyed by ``fold_in`` of a salted split of
        ``chain_seed(seed)`` and ``e``) and the sampler's noise. Sampling
        step ``t`` follows the library's seed rule, ``fold_in(chain_seed(seed), t)``
        (docs/driver.md), with normals that are the same eagerly, in a graph and under
        XLA: the draws for a seed do not depend on the XLA choice (up to floating-point
        rounding).
        Default value: ``0``.

    Attributes (after ``fit``):
      draws: one array ``[S, *weight shape]`` per trainable weight (``None`` when
        ``fit`` wrote them to a ``run_dir``).
      num_kept: the number of draws ``S``.
      run_dir: the directory the draws were written to, else ``None``.
      noise_scale_draws: ``σ`` per draw (``[S]``) for a learned Gaussian noise, else
        ``None``.
      step_size: the sampler's step size (dimensionless: in units of the
        preconditioner).
      sampler: the sampler of the last ``fit``: ``sampler.kernel`` is its `SGLD` on
        the whitened weights ``w = P^-½ (θ − θ_MAP)`` (``θ`` the flat weight vector),
        ``sampler.data`` the source its minibatches were fed through, and
        ``sampler.weights(w)`` maps a whitened state back to ``θ``.
      posterior: the [`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior] the last
        ``fit`` sampled (the Keras bridge): the model, likelihood and prior on the
        masked batches ``fit`` feeds (sample and class weights, padded partial
        batches), its model state the BatchNormalization statistics fixed at the MAP,
        a learned noise's ``log σ`` its last part. The MAP search and curvature pass
        evaluate the same ``row_log_likelihood`` (in training mode where
        ``model.fit`` would).
      jit_compile: whether the steps ran under XLA.
      notes: the automatic choices, one sentence each.
      timings: seconds per phase (``probe``, ``map``, ``batchnorm``, ``curvature``,
        ``sampling``, ``total``).
      history: the ``keras.callbacks.History`` of the last ``fit``.

    Raises:
      KerasLikelihoodError: a Keras loss as ``likelihood`` (a loss is the negative
        log-likelihood); a ``ValueError``.
      ValueError: a model that is not built, an unknown likelihood, a bad argument.

    #### Examples

    ```python
    import keras
    import numpy as np
    from tfp_sgmcmc.keras import BayesianModel

    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(2)])
    bayes = BayesianModel(model, likelihood="categorical", num_draws=20)
    bayes.fit(x, y, epochs=3, verbose=0)     # MAP, then sampling
    probs = bayes.predict(x)                 # posterior-predictive class probabilities
    scores = bayes.evaluate(x, y)            # {"accuracy", "nll", "ece"}
    ```
    """

    def __init__(
        self,
        model: Any,
        likelihood: str | Callable[[tf.Tensor, tf.Tensor], tf.Tensor] = "categorical",
        *,
        prior_scale: float = 1.0,
        noise_scale: float | None = None,
        from_logits: bool | None = None,
        num_draws: int = 100,
        learning_rate: float = 1e-3,
        jit_compile: bool | None = None,
        steps_per_execution: int | None = None,
        seed: int = 0,
    ) -> None:
        if not isinstance(model, keras.Model):
            raise ValueError(f"`model` must be a Keras 3 model, got {type(model).__name__}.")
        if not model.built or not model.trainable_variables:
            raise ValueError("`model` must be built (call it once on an input) with weights.")
        if not callable(likelihood) and likelihood not in LIKELIHOODS:
            raise ValueError(
                f"`likelihood` must be one of {LIKELIHOODS} or a callable, got {likelihood!r}."
            )
        refuse_keras_loss(likelihood)
        check_positive(prior_scale, "prior_scale", scalar=True)
        if noise_scale is not None:
            if likelihood != "gaussian":
                raise ValueError("`noise_scale` applies to likelihood='gaussian' only.")
            check_positive(noise_scale, "noise_scale", scalar=True)
        if from_logits is not None and not isinstance(from_logits, bool):
            raise ValueError(f"`from_logits` must be True, False or None, got {from_logits!r}.")
        if jit_compile is not None and not isinstance(jit_compile, bool):
            raise ValueError(f"`jit_compile` must be True, False or None, got {jit_compile!r}.")
        check_positive(learning_rate, "learning_rate", scalar=True)
        self.steps_per_execution = (
            None
            if steps_per_execution is None
            else check_int(steps_per_execution, "steps_per_execution", 1)
        )
        self.num_draws = check_int(num_draws, "num_draws", 1)
        seed = check_int(seed, "seed", 0)
        if seed >= 2**31:
            raise ValueError(f"`seed` must be in [0, 2**31), got {seed}.")
        self.model = model
        self.likelihood = likelihood
        self.prior_scale = float(prior_scale)
        self.noise_scale = None if noise_scale is None else float(noise_scale)
        self.learning_rate = float(learning_rate)
        self.seed = seed
        self._from_logits_arg = from_logits
        self._jit_arg = jit_compile
        self._call_kwargs_ok = call_accepts_training(model)
        layers = sublayers(model)
        self._batchnorm = [
            lyr for lyr in layers if isinstance(lyr, keras.layers.BatchNormalization)
        ]
        self._noise_layers = [
            lyr
            for lyr in layers
            if "Dropout" in type(lyr).__name__ or "GaussianNoise" in type(lyr).__name__
        ]
        self._convolutional = any("Conv" in type(lyr).__name__ for lyr in layers)
        self._dtype = np.dtype(tf.as_dtype(model.trainable_variables[0].dtype).as_numpy_dtype)
        self._num_model_weights = len(model.trainable_variables)
        self._learn_noise = likelihood == "gaussian" and noise_scale is None
        self._programs: dict[tuple[bool, bool], FedAdam] = {}
        self._forward_fn: Any = None
        self.from_logits: bool | None = None
        self.draws: list[np.ndarray] | None = None
        self.run_dir: str | None = None
        self.num_kept = 0
        self.noise_scale_draws: np.ndarray | None = None
        self.step_size: float | None = None
        self.sampler: FedSGLD | None = None
        #: The sampler ``fit`` ran, in words (the rule's SGLD, or MAMBA's choice).
        self.sampler_name: str | None = None
        #: MAMBA's [`TuningResult`][tfp_sgmcmc.tuning.TuningResult] of a ``fit(...,
        #: tune=...)``, else ``None``.
        self.tuning_result: Any = None
        #: The posterior ``fit`` samples, the Keras bridge (built by ``fit``).
        self.posterior: KerasPosterior | None = None
        self.jit_compile: bool | None = None
        self.notes: list[str] = []
        self.timings: dict[str, float] = {}
        self.history: Any = None
        self._non_trainable: list[tf.Tensor] | None = None
        self._class_table: np.ndarray | None = None

    # -- the likelihood ------------------------------------------------------------ #
    def _labels(self, y: Any) -> Any:
        """Host labels in the form the likelihood reads."""
        lik = self.likelihood
        if lik == "categorical":
            return class_ids(np.asarray(y), self._num_outputs)
        if lik == "bernoulli":
            return class_ids(np.asarray(y), 2).astype(self._dtype)
        if lik == "gaussian":
            y = check_numeric_labels(y)
        return to_host(y, self._dtype)

    def _log_lik(self, y: Any, outputs: Any, extra: Sequence[tf.Tensor]) -> tf.Tensor:
        """Per-example ``log p(y | outputs)``, ``[n]`` (the bridges' one likelihood); a
        learned Gaussian noise's ``log σ`` is ``extra[0]``."""
        log_noise = None
        if self.likelihood == "gaussian":
            log_noise = extra[0] if self._learn_noise else np.log(self.noise_scale)
        return per_example_log_likelihood(
            self.likelihood, y, outputs, from_logits=self.from_logits, log_noise=log_noise
        )

    def _cast_outputs(self, out: Any) -> Any:
        """Floating outputs in the weights' dtype: a mixed-precision model computes in
        float16 and its likelihood, gradients and draws are kept in float32."""
        return tf.nest.map_structure(
            lambda t: tf.cast(t, self._dtype) if t.dtype.is_floating else t, out
        )

    # -- the compiled step ---------------------------------------------------------- #
    def _parts(self, theta: Any) -> list:
        """The flat parameter vector as the list of weights (then ``log σ``, if learned)."""
        pieces = (
            tf.split(theta, self._sizes)
            if isinstance(theta, tf.Tensor)
            else np.split(np.asarray(theta), np.cumsum(self._sizes)[:-1])
        )
        return [
            tf.reshape(t, s) if isinstance(t, tf.Tensor) else np.reshape(t, s)
            for t, s in zip(pieces, self._shapes)
        ]

    def _flatten(self, parts: Sequence[Any]) -> tf.Tensor:
        return tf.concat([tf.reshape(tf.cast(p, self._dtype), [-1]) for p in parts], 0)

    def _row_log_lik(self, theta, nt, x, y, mask, training: bool):
        """Each row's share of the masked minibatch's mean log-likelihood and the new
        statistics: the bridge's ``KerasPosterior.row_log_likelihood`` at the flat
        ``theta``."""
        return self.posterior.row_log_likelihood(self._parts(theta), (x, y, mask), nt, training)

    def _prior_log_prob(self, theta: tf.Tensor) -> tf.Tensor:
        """``log p(θ)`` up to a constant: the bridge's ``N(0, prior_scale² I)`` on the
        model's weights (a flat prior on a learned ``log σ``)."""
        return self.posterior.log_prior_fn(self._parts(theta))

    def _log_post(self, theta, nt, x, y, mask, n, training: bool):
        """``N · (weighted minibatch mean log-likelihood) + log p(θ)``, the mean, new
        statistics (``_row_log_lik``)."""
        rows, new_nt = self._row_log_lik(theta, nt, x, y, mask, training)
        mean_ll = tf.reduce_sum(rows)
        return n * mean_ll + self._prior_log_prob(theta), mean_ll, new_nt

    def _hvp_program(self) -> Any:
        """``θ, u -> −∇² log π̂(θ) u`` on one minibatch (inference mode).

        A graph, never XLA: the power iteration calls it ``_POWER_ITERATIONS`` times, and
        XLA's compilation of a second derivative costs more than those calls save
        (``docs/benchmarks.md#keras-fit-before-after``)."""

        @tf.function(reduce_retracing=True, autograph=False)
        def hvp(theta, nt, x, y, mask, u, n):
            with tf.GradientTape() as outer:
                outer.watch(theta)
                with tf.GradientTape() as inner:
                    inner.watch(theta)
                    log_post = self._log_post(theta, nt, x, y, mask, n, False)[0]
                g = inner.gradient(log_post, theta)
                gu = tf.reduce_sum(g * u)
            return -outer.gradient(gu, theta)

        return ConcreteCall(hvp)

    def _feed(
        self, xb: Any, yb: Any, batch_size: int, prepared: bool = False, wb: Any = None
    ) -> tuple[Any, Any, np.ndarray]:
        """A host batch cast, its labels converted (unless ``prepared``), padded to
        ``batch_size`` with a mask of row weights (``wb``, times the class weights;
        ``−1`` on padding rows, see ``_log_post``)."""
        rows = num_rows(xb)
        if rows > batch_size:
            raise ValueError(
                f"a batch of {rows} rows follows a first batch of {batch_size}: the batches "
                "of a dataset must not grow."
            )
        x = xb if prepared else to_host(xb, self._dtype)
        y = yb if prepared else self._labels(yb)
        if not prepared:  # arrays were checked once in `fit`
            check_finite(x, "x")
            check_finite(y, "y")
        mask = np.full(batch_size, -1.0, self._dtype)
        mask[:rows] = self._row_weights(y, wb, rows)
        if rows < batch_size:
            idx = np.concatenate([np.arange(rows), np.zeros(batch_size - rows, np.int64)])
            x, y = take(x, idx), take(y, idx)
        return x, y, mask

    def _row_weights(self, y: Any, wb: Any, rows: int) -> np.ndarray:
        """Each row's weight: its sample weight (1 without) times its class's weight."""
        w = np.ones(rows) if wb is None else np.asarray(wb, np.float64).reshape(rows)
        if self._class_table is not None:
            w = w * self._class_table[np.asarray(y).astype(np.int64).reshape(rows)]
        return w

    def _stack(
        self, group: list, batch_size: int, prepared: bool, source: Source
    ) -> tuple[Any, Any, np.ndarray]:
        """``K`` steps' batches stacked ``[K, batch_size, ...]`` with their row masks, from
        row indices into the source's arrays (``prepared``) or from host batches; rows
        past the group's length repeat its first step and are not run."""
        k = self._k
        if prepared:
            idx = np.zeros((k, batch_size), np.int64)
            masks = np.full((k, batch_size), -1.0, self._dtype)
            for j, ix in enumerate(group):
                idx[j, : len(ix)] = ix
                masks[j, : len(ix)] = 1 if source.w is None else source.w[ix]
            xs = tf.nest.map_structure(lambda a: a[idx], source.x)
            return xs, source.y[idx], masks
        fed = [self._feed(item[0], item[1], batch_size, wb=item[2]) for item in group]
        fed += [fed[0]] * (k - len(fed))
        xs = tf.nest.map_structure(lambda *a: np.stack(a), *[f[0] for f in fed])
        return xs, np.stack([f[1] for f in fed]), np.stack([f[2] for f in fed])

    def _blocks(
        self, source: Source, prepared: bool, max_steps: int | None = None, ends: Any = ()
    ) -> Any:
        """One epoch (or ``max_steps`` of it) as blocks of at most ``K`` steps, a block
        also ending after each step index in ``ends``: yields ``(k0, count, xs, ys,
        masks)`` with the arrays already tensors. The next block is read and stacked on
        a second thread while the current one runs."""
        bs = source.batch_size

        def pack(k0: int, group: list) -> tuple:
            xs, ys, masks = self._stack(group, bs, prepared, source)
            return (k0, len(group), *tf.nest.map_structure(tf.convert_to_tensor, (xs, ys, masks)))

        def produce() -> Any:
            group: list = []
            k0 = 0
            for k, item in enumerate(source.epoch(max_steps, indices=prepared)):
                group.append(item)
                if len(group) == self._k or k in ends:
                    yield pack(k0, group)
                    k0, group = k + 1, []
            if group:
                yield pack(k0, group)

        gen = produce()
        with ThreadPoolExecutor(1) as pool:
            ahead = pool.submit(next, gen, None)
            while True:
                item = ahead.result()
                if item is None:
                    return
                ahead = pool.submit(next, gen, None)
                yield item

    def _steps_per_call(self, source: Source, xb: Any, yb: Any) -> int:
        """``K``: ``steps_per_execution`` if given, else as many steps as keep a block's
        stacked batches under ``_BLOCK_BYTES`` (at most ``_MAX_STEPS_PER_CALL``), and
        never more than an epoch."""
        if self.steps_per_execution is not None:
            return min(self.steps_per_execution, source.steps)
        per_step = sum(np.asarray(a).nbytes for a in tf.nest.flatten((xb, yb)))
        per_step = max(1, per_step) * source.batch_size / max(1, num_rows(xb))
        k = int(min(_MAX_STEPS_PER_CALL, max(1, _BLOCK_BYTES // per_step)))
        return min(k, source.steps)

    # -- set-up ----------------------------------------------------------------------- #
    def _setup(self, xb: Any, yb: Any, verbose: int) -> None:
        x = to_host(xb, self._dtype)
        try:
            out = self.model(x, training=False) if self._call_kwargs_ok else self.model(x)
        except Exception as e:
            raise ValueError(
                f"`model` failed on the first batch of `x` ({type(e).__name__}: {e})."
            ) from e
        outs = tf.nest.flatten(out)
        lik = self.likelihood
        if not callable(lik) and len(outs) != 1:
            raise ValueError(
                f"`model` has {len(outs)} outputs, but likelihood={lik!r} reads one: pass a "
                "callable `likelihood` (y, outputs) -> [n]."
            )
        o = np.asarray(outs[0], np.float64).reshape(len(np.asarray(outs[0])), -1)
        self._num_outputs = o.shape[1]
        notes = []
        warn: list[str] = []  # notes that a user must see: warned as well
        if callable(lik):
            warn += self._check_callable(yb, out)
        elif lik == "gaussian":
            labels = check_numeric_labels(yb)
            per_label = labels.size // max(1, labels.shape[0]) if labels.ndim else 0
            if labels.ndim == 0 or labels.shape[0] != o.shape[0] or per_label != o.shape[1]:
                raise KerasDataError(
                    f"likelihood='gaussian' reads one label per output value: the model gives "
                    f"{o.shape[1]} value(s) per example (outputs {tuple(np.shape(outs[0]))}), "
                    f"but `y` has {per_label} per example (a batch of shape {labels.shape}): "
                    "make `y` match the output (e.g. y.reshape(-1, "
                    f"{o.shape[1]})) or change the model's last layer."
                )
        if lik == "categorical":
            if o.shape[1] < 2:
                raise ValueError(
                    f"likelihood='categorical' needs [n, K] outputs with K >= 2, got {o.shape[1]} "
                    "per example (use 'bernoulli' for one logit)."
                )
            looks_prob = bool(
                np.all(o >= 0) and np.all(o <= 1) and np.allclose(o.sum(1), 1.0, atol=1e-3)
            )
            if self._from_logits_arg is None:
                self.from_logits = not looks_prob
                if looks_prob:
                    notes.append(
                        "the outputs are probabilities (rows summing to one): read as such"
                    )
                elif _probability_activation_last(self.model) == "sigmoid":
                    # Per-class sigmoids are not a distribution over the classes; read as
                    # logits they squash every class's score into (0, 1).
                    warn.append(
                        "a sigmoid ends the model, but likelihood='categorical' reads the "
                        "outputs as logits (they do not sum to one): remove the sigmoid (a "
                        "linear last layer gives logits) or use a softmax; pass "
                        "from_logits=True to keep the sigmoid outputs as logits"
                    )
            else:
                self.from_logits = self._from_logits_arg
        elif lik == "bernoulli":
            if o.shape[1] != 1:
                raise ValueError(
                    f"likelihood='bernoulli' needs one output per example, got {o.shape[1]}."
                )
            looks_prob = bool(np.all(o >= 0) and np.all(o <= 1)) and (
                _probability_activation_last(self.model) is not None
            )
            self.from_logits = (
                not looks_prob if self._from_logits_arg is None else self._from_logits_arg
            )
            if looks_prob and self._from_logits_arg is None:
                notes.append("the outputs are probabilities (a sigmoid ends the model)")
        if self._noise_layers:
            names = sorted({type(lyr).__name__ for lyr in self._noise_layers})
            notes.append(
                f"{', '.join(names)} act(s) during the MAP search and are off while sampling "
                "and predicting"
            )
        self.notes += notes + warn
        for message in warn:
            warnings.warn(f"BayesianModel: {message}.", UserWarning, stacklevel=3)
        if verbose:
            for note in notes:
                print(f"BayesianModel: {note}.", file=sys.stderr, flush=True)

    def _check_callable(self, yb: Any, out: Any) -> list[str]:
        """A callable likelihood on the first batch: one value per example, and not a
        loss. Returns the warnings to give; raises ``KerasLikelihoodError``.

        The sign rule: ``log p(y | x)`` of a discrete label (integer-valued labels:
        class ids, one-hot rows, counts) is a log-probability, ``≤ 0``; a value above
        zero for every example is a loss (a crossentropy is ``−log p ≥ 0``). For
        real-valued labels a density may exceed one, so that case is only warned.
        """
        lik = self.likelihood
        y = self._labels(yb)
        n = num_rows(out)
        try:
            value = lik(tf.nest.map_structure(tf.convert_to_tensor, y), self._cast_outputs(out))
            value = np.asarray(value, np.float64)
        except Exception as e:
            raise KerasLikelihoodError(
                f"`likelihood` failed on the first batch ({type(e).__name__}: {e})."
            ) from e
        if value.shape != (n,):
            raise KerasLikelihoodError(
                f"`likelihood` returned shape {value.shape} for a batch of {n} examples; it "
                f"must return one log-likelihood per example, shape [{n}]: do not reduce "
                "over the batch (no reduce_mean/reduce_sum over examples, a Keras loss "
                "object's reduction included), and reshape [n, 1] to [n]."
            )
        finite = value[np.isfinite(value)]
        if finite.size == 0 or not np.all(finite > 0):
            return []
        leaves = [np.asarray(t) for t in tf.nest.flatten(y)]
        discrete = all(
            a.dtype.kind in "biu" or (a.dtype.kind == "f" and np.all(a == np.round(a)))
            for a in leaves
        )
        message = (
            f"`likelihood` returns positive values for every example of the first batch "
            f"(mean {finite.mean():.3g}): it looks like a loss (a negative log-likelihood), "
            "which would be maximised. Return the log-likelihood instead, e.g. "
            "lambda y, out: -loss(y, out), or use a built-in likelihood"
        )
        if discrete:
            raise KerasLikelihoodError(
                message + " (the labels are integers, whose log-probability is at most 0)."
            )
        return [message + " (ignore this if it is a log-density above 0)"]

    def _adam(self, training: bool, jit: bool, model_state: list) -> FedAdam:
        """The MAP search's (and curvature pass's) Adam for a ``training`` mode and XLA
        choice, built once per ``fit`` (the probe's are reused)."""
        key = (training, jit)
        if key not in self._programs:
            self._programs[key] = FedAdam(
                lambda th, st, x, y, mask: self._row_log_lik(th, st, x, y, mask, training),
                self._prior_log_prob,
                model_state,
                num_examples=self._n,
                batch_size=self._batch_size,
                steps_per_call=self._k,
                seed=self.seed,
                jit_compile=jit,
                dtype=self._dtype,
            )
        return self._programs[key]

    def _choose_jit(self, source: Source, training: bool, state: dict) -> None:
        """XLA or not: forced, a rule for convolutions on a CPU, or a measured probe."""
        if self._jit_arg is not None:
            self.jit_compile = self._jit_arg
            self.notes.append(f"jit_compile={self._jit_arg} as given")
            return
        on_cpu = not tf.config.list_physical_devices("GPU")
        if self._convolutional and on_cpu:
            self.jit_compile = False
            self.notes.append("no XLA: a convolutional model on a CPU")
            return
        xb, yb = source.first()
        block = (
            0,
            min(self._k, 4),
            *tf.nest.map_structure(
                tf.convert_to_tensor,
                self._stack([(xb, yb, None)], source.batch_size, False, source),
            ),
        )
        per_step = {}
        for jit in (False, True):
            # Adam at learning rate 0 (the weights do not move) in the MAP search's mode
            # and in inference mode, the sampler's (a forward and backward pass each).
            try:
                per_step[jit] = 0.0
                modes = tuple(dict.fromkeys((training, False)))
                for mode in modes:
                    adam = self._adam(mode, jit, state["nt"])
                    results = adam.start(state["theta"], state["nt"])
                    adam(state["theta"], results, block, 0)
                    t0 = time.perf_counter()
                    for _ in range(2):
                        adam(state["theta"], results, block, 0)
                    per_step[jit] += (time.perf_counter() - t0) / (2 * block[1] * len(modes))
            except (tf.errors.OpError, ValueError, TypeError) as e:
                per_step[jit] = math.inf
                self.notes.append(f"jit_compile={jit} failed in the probe ({type(e).__name__})")
        self.jit_compile = bool(per_step[True] < per_step[False])
        self.notes.append(
            "XLA " + ("on" if self.jit_compile else "off") + " by a measured probe "
            f"({1e3 * per_step[False]:.3g} ms/step without, {1e3 * per_step[True]:.3g} with)"
        )

    # -- fit ------------------------------------------------------------------------------ #
    def fit(
        self,
        x: Any,
        y: Any = None,
        *,
        batch_size: int = 32,
        epochs: int = 10,
        sample_epochs: int | None = None,
        steps_per_epoch: int | None = None,
        num_examples: int | None = None,
        validation_data: Any = None,
        callbacks: Any = None,
        verbose: int = 1,
        shuffle: bool = True,
        run_dir: str | os.PathLike | None = None,
        sample_weight: Any = None,
        class_weight: dict[int, float] | None = None,
        validation_split: float | None = None,
        initial_epoch: int = 0,
        tune: bool | Tuning | None = None,
    ) -> Any:
        """Find the MAP, set the sampler from the posterior at it, and sample.

        Args:
          x: inputs (an array, or a list/tuple/dict of arrays for several inputs), or
            a ``tf.data`` dataset of batched ``(x, y)`` pairs (shuffled or not, a
            partial last batch, repeating or not).
          y: labels for array inputs; ``None`` with a dataset.
          batch_size: rows per step for array inputs (a dataset keeps its own).
            Default value: ``32``.
          epochs: epochs of Adam towards the MAP, as in ``model.fit``; ``0`` starts
            sampling from the model's current weights (a model trained already).
            Default value: ``10``.
          sample_epochs: epochs of sampling after the MAP. Default value: ``None``
            (as many as ``epochs``, at least 2).
          steps_per_epoch: batches per epoch; required for a repeating dataset.
            Default value: ``None`` (one pass over the data).
          num_examples: ``N``, the number of distinct training examples the
            likelihood sums over; required for a dataset that repeats (``.repeat()``
            anywhere in its pipeline), whose rows count an example more than once.
            Default value: ``None`` (counted).
          validation_data: ``(x_val, y_val)`` or a dataset, scored at each epoch's
            end (``val_loss``, and ``val_accuracy``/``val_rmse``...): by the current
            weights during the MAP search, by the draws so far while sampling.
            Default value: ``None``.
          callbacks: Keras callbacks; their ``on_train_*``, ``on_epoch_*`` and
            ``on_train_batch_*`` hooks are called, the model's variables hold the
            current weights at each epoch's end, ``model.stop_training`` ends the MAP
            search (a stop request while sampling is ignored, with a warning: sampling
            runs its ``sample_epochs``), and ``model.optimizer`` is, during ``fit``, an
            Adam whose learning rate the MAP search reads at each block, so
            learning-rate callbacks set it (sampling's step size does not follow it).
            Default value: ``None``.
          verbose: ``0`` silent, ``1`` Keras's progress bar, ``2`` one line per
            epoch. Default value: ``1``.
          shuffle: shuffle array inputs each epoch. Default value: ``True``.
          run_dir: a directory to write the draws to (``samples.h5``, one dataset
            ``samples/<i>`` of shape ``[S, *shape]`` per trainable weight, then
            ``log σ`` for a learned Gaussian noise), each draw appended as it is
            kept, instead of keeping them in memory; ``predict`` and ``evaluate``
            then read them back a chunk at a time. It is created if missing; a
            ``samples.h5`` in it that another writer made is refused. When ``fit``
            ends, the model and the manifest are written beside the draws (as
            ``save`` writes them), so ``BayesianModel.load(run_dir)`` reopens the run.
            Default value: ``None`` (the draws in memory, ``draws``).
          sample_weight: per-example weights ``w_i >= 0`` ``[N]`` for array inputs (a
            dataset yields ``(x, y, sample_weight)`` triples instead), as in
            ``model.fit``. Each multiplies its example's log-likelihood:
            ``log π(W) = log p(W) + Σ_i w_i log p(y_i | f_W(x_i))``, so a weight is a
            count (weight 2 is the example seen twice; the posterior narrows as with
            more data) or a tempering of that example; 0 drops it. They do not
            rescale to sum to ``N``. Default value: ``None`` (all 1).
          class_weight: ``{class id: weight}`` for ``"categorical"`` and
            ``"bernoulli"``: each example's log-likelihood is multiplied by its
            class's weight (times its ``sample_weight``), classes not named weigh 1,
            as in ``model.fit``. Default value: ``None``.
          validation_split: a fraction in ``(0, 1)`` of array inputs held out as
            validation data: the last ``N - floor(N (1 - fraction))`` rows, before
            shuffling, as Keras does (arrays only; ignored when ``validation_data``
            is given, as in Keras). Default value: ``None``.
          initial_epoch: the MAP epoch to start at, to resume a MAP search (a model
            trained for that many epochs already): the search runs epochs
            ``initial_epoch .. epochs - 1`` (numbered so for the callbacks, with a
            fresh Adam), then sampling runs its ``sample_epochs``, numbered on from
            the last MAP epoch. Sampling always starts afresh from the MAP; at most
            ``epochs`` (``epochs`` itself: sample around the model's current
            weights). Default value: ``0``.
          tune: choose the sampler, its step size and batch size with MAMBA after
            the MAP search, instead of preconditioned SGLD at the rule's step: ``True``
            (the default [`Tuning`][tfp_sgmcmc.keras.Tuning]: SGLD, SGHMC and SGNHT,
            budget 4 epochs of gradients) or a ``Tuning`` (the control-variate forms
            too, other steps, batch sizes and budgets). Array inputs only. The winner
            samples ``sample_epochs`` epochs of per-example gradient evaluations;
            ``tuning_result`` holds MAMBA's
            [`TuningResult`][tfp_sgmcmc.tuning.TuningResult] (docs/keras.md, "Tuning the
            sampler with MAMBA"). Default value: ``None`` (no tuning).

        Returns:
          The ``keras.callbacks.History`` of the run (``loss`` is the mean negative
          log-likelihood per example of the epoch's training batches so far).

        Raises:
          KerasDataError: data that cannot be used as given (empty, NaN or Inf, not
            numbers, a Python list of rows, labels that do not fit the outputs, a
            repeating pipeline without ``num_examples``); a ``ValueError``.
          KerasLikelihoodError: a Keras loss as ``likelihood``, or a callable that is
            not one log-likelihood per example; a ``ValueError``.
          ValueError: other bad arguments (named).
          RuntimeError: the MAP search or the sampler diverged.

        Warns:
          UserWarning: a sigmoid ending a ``"categorical"`` model, a callable positive
            on every example of real-valued labels, a stop request while sampling, a
            learned Gaussian noise whose draws show that sampling has not converged
            (draws of ``log σ`` too alike or drifting, a ``σ`` above the training
            labels' standard deviation, or draws that fit the data far better than
            the end of the MAP search).
        """
        t_start = time.perf_counter()
        if tune is True:
            tune = Tuning()
        elif tune is False:
            tune = None
        if tune is not None and not isinstance(tune, Tuning):
            raise ValueError(
                f"`tune` must be True, False, None or a sg.keras.Tuning, got {tune!r}."
            )
        store = draw_store(run_dir)
        self.tuning_result = None
        epochs = check_int(epochs, "epochs", 0)
        sample_epochs = (
            max(2, epochs)
            if sample_epochs is None
            else check_int(sample_epochs, "sample_epochs", 1)
        )
        batch_size = check_int(batch_size, "batch_size", 1)
        if steps_per_epoch is not None:
            steps_per_epoch = check_int(steps_per_epoch, "steps_per_epoch", 1)
        if num_examples is not None:
            num_examples = check_int(num_examples, "num_examples", 1)
        initial_epoch = check_int(initial_epoch, "initial_epoch", 0)
        if initial_epoch > epochs:
            raise ValueError(
                f"`initial_epoch` ({initial_epoch}) counts the MAP epochs done already and "
                f"must be at most `epochs` ({epochs}); sampling cannot be resumed, it "
                "restarts from the MAP."
            )
        if class_weight is not None and self.likelihood not in ("categorical", "bernoulli"):
            lik = self.likelihood if isinstance(self.likelihood, str) else "a callable"
            raise ValueError(
                f"`class_weight` weighs classes, but likelihood={lik!r} has none (a "
                "regression or a likelihood of your own): pass `sample_weight` instead."
            )
        self._class_table = None
        if validation_split is not None and validation_data is None:
            (x, y, sample_weight), validation_data = split_validation(
                x, y, sample_weight, validation_split
            )
        self.notes = []
        self.timings = {}
        self._non_trainable = None
        self._forward_fn = None
        source = Source(
            x,
            y,
            batch_size,
            steps_per_epoch,
            num_examples,
            shuffle,
            self.seed,
            sample_weight=sample_weight,
        )
        self.notes += source.notes
        if tune is not None and source.dataset is not None:
            raise ValueError(
                "`tune` needs array inputs (its arms draw minibatches of several sizes "
                "from the training rows): pass x and y as arrays, or fit without `tune`."
            )
        self._n = source.num_examples
        xb, yb = source.first()
        self._setup(xb, yb, verbose)
        if class_weight is not None:
            classes = self._num_outputs if self.likelihood == "categorical" else 2
            self._class_table = class_weight_table(class_weight, classes)
        prep = source.dataset is None
        if prep:  # arrays: cast and convert the labels once, not per batch
            source.x = to_host(source.x, self._dtype)
            source.y = self._labels(source.y)
            check_finite(source.x, "x")
            check_finite(source.y, "y")
            if self._class_table is not None:
                source.w = self._row_weights(source.y, source.w, len(source.y))
        val = None
        if validation_data is not None:
            vx, vy = (
                (validation_data, None)
                if isinstance(validation_data, tf.data.Dataset)
                else _pair(validation_data, "validation_data")
            )
            val = (vx, vy)

        parts = [tf.convert_to_tensor(v.value) for v in self.model.trainable_variables]
        if self._learn_noise:
            sd = float(np.std(np.asarray(yb, np.float64))) or 1.0
            parts.append(tf.constant(np.log(sd), self._dtype))
        self._shapes = [tuple(p.shape) for p in parts]
        self._sizes = [int(np.prod(sh)) for sh in self._shapes]
        self._model_size = int(sum(self._sizes[: self._num_model_weights]))
        theta = self._flatten(parts)
        self._k = self._steps_per_call(source, xb, yb)
        self._batch_size = source.batch_size
        # The one Keras bridge: the model, likelihood and prior as a posterior on the
        # batches `fit` feeds (masked rows; the learned log σ its last part).
        self.posterior = KerasPosterior(
            self.model,
            FedBatches(self._n, self._batch_size, self._dtype),
            self.likelihood,
            prior_scale=self.prior_scale,
            noise_scale=self.noise_scale if self.likelihood == "gaussian" else 1.0,
            from_logits=self.from_logits,
        )
        self._programs = {}  # this fit's Adam programs (they hold its data's size)
        state = {
            "theta": theta,
            "nt": [tf.convert_to_tensor(v.value) for v in self.model.non_trainable_variables],
        }
        train_mode = bool(self._batchnorm or self._noise_layers) and self._call_kwargs_ok
        t0 = time.perf_counter()
        self._choose_jit(source, train_mode, state)
        self.timings["probe"] = time.perf_counter() - t0
        if verbose:
            print(f"BayesianModel: {self.notes[-1]}.", file=sys.stderr, flush=True)

        history = keras.callbacks.History()
        # Learning-rate callbacks (LearningRateScheduler, ReduceLROnPlateau) read and set
        # `model.optimizer.learning_rate`: during fit that is an Adam holding the MAP
        # search's learning rate, read at each block (the model's own optimizer, if it
        # was compiled, is put back afterwards, untouched).
        lr_holder = keras.optimizers.Adam(self.learning_rate)
        had_optimizer = hasattr(self.model, "optimizer")  # compiled (an uncompiled model has none)
        saved_optimizer = getattr(self.model, "optimizer", None)
        self.model.optimizer = lr_holder
        try:
            return self._fit_phases(
                source,
                state,
                history=history,
                callbacks=callbacks,
                lr_holder=lr_holder,
                store=store,
                val=val,
                prep=prep,
                epochs=epochs,
                initial_epoch=initial_epoch,
                sample_epochs=sample_epochs,
                train_mode=train_mode,
                verbose=verbose,
                t_start=t_start,
                tune=tune,
            )
        finally:
            if had_optimizer:
                self.model.optimizer = saved_optimizer
            else:
                del self.model.optimizer

    def _fit_phases(
        self,
        source: Source,
        state: dict,
        *,
        history: Any,
        callbacks: Any,
        lr_holder: Any,
        store: SampleStore | None,
        val: tuple[Any, Any] | None,
        prep: bool,
        epochs: int,
        initial_epoch: int,
        sample_epochs: int,
        train_mode: bool,
        verbose: int,
        t_start: float,
        tune: Tuning | None = None,
    ) -> Any:
        """``fit`` after the set-up: the MAP search, the BatchNorm pass, the curvature
        pass and the sampling, with the callbacks (``lr_holder`` is the optimizer whose
        learning rate they may set). Returns the ``History``."""
        bs = source.batch_size
        cb = keras.callbacks.CallbackList(
            list(callbacks or []) + [history],
            add_progbar=verbose != 0,
            model=self.model,
            verbose=verbose,
            epochs=epochs + sample_epochs,
            steps=source.steps,
        )
        self.model.stop_training = False
        cb.on_train_begin()

        # 1. MAP: Adam, as model.fit: the library's `AdamAscent` in its loop (`FedAdam`).
        t0 = time.perf_counter()
        adam = self._adam(train_mode, self.jit_compile, state["nt"])
        results = adam.start(state["theta"], state["nt"])
        t = 0
        epoch0 = initial_epoch  # the first sampling epoch's number
        for epoch in range(initial_epoch, epochs):
            epoch0 = epoch + 1
            cb.on_epoch_begin(epoch)
            logs = {}
            total_loss, done = 0.0, 0
            for block in self._blocks(source, prep):
                k0, count = block[0], block[1]
                cb.on_train_batch_begin(k0)
                adam.learning_rate.assign(_learning_rate(lr_holder))
                state["theta"], results, losses = adam(state["theta"], results, block, t)
                t += count
                state["nt"] = adam.model_state(results)
                if not np.isfinite(losses).all():  # say so now, not after every epoch
                    raise RuntimeError(
                        f"the MAP search diverged in epoch {epoch + 1} (a non-finite loss at "
                        f"step {k0 + int(np.flatnonzero(~np.isfinite(losses))[0])}); lower "
                        "`learning_rate`."
                    )
                total_loss, done = total_loss + losses.sum(), done + count
                logs = {"loss": total_loss / done}
                cb.on_train_batch_end(k0 + count - 1, logs)
            self._write_back(state["theta"], state["nt"])
            if val is not None:
                logs.update(self._validation_logs(val, [state["theta"]]))
            cb.on_epoch_end(epoch, logs)
            if self.model.stop_training:
                self.notes.append(f"the MAP search stopped after epoch {epoch + 1} (stop_training)")
                self.model.stop_training = False
                break
        self.timings["map"] = time.perf_counter() - t0
        if not np.isfinite(np.asarray(state["theta"])).all():
            raise RuntimeError(
                "the MAP search diverged (non-finite weights); lower `learning_rate`."
            )

        # 2. BatchNormalization statistics at the MAP, then fixed.
        t0 = time.perf_counter()
        if self._batchnorm:
            self._fix_batchnorm(source, state)
        self.timings["batchnorm"] = time.perf_counter() - t0
        self._non_trainable = state["nt"]

        self.posterior.set_model_state(state["nt"])
        # The sampler (the library's SGLD on the preconditioned posterior, in its loop,
        # `FedSGLD`) is built at the MAP now and compiled on a second thread while the
        # curvature pass runs; its preconditioner is set once measured (a variable). With
        # `tune` it is the fall-back, compiled only if MAMBA's choice fails.
        sampler = FedSGLD(
            self.posterior,
            self._parts(np.asarray(state["theta"])),
            np.ones(int(state["theta"].shape[0])),
            steps_per_call=self._k,
            seed=self.seed,
            jit_compile=bool(self.jit_compile),
        )
        xb, yb = source.first()
        first = tf.nest.map_structure(
            tf.convert_to_tensor, self._stack([(xb, yb, None)], bs, False, source)
        )
        compiling = ThreadPoolExecutor(1)
        compiled = None if tune is not None else compiling.submit(sampler.compile, (0, 0, *first))

        # 3. Curvature and gradient noise at the MAP: the preconditioner and the step.
        # Adam at learning rate 0 in inference mode: θ does not move, and its bias-corrected
        # second moment is a mean of the squared minibatch scores (`FedAdam`).
        t0 = time.perf_counter()
        curvature = self._adam(False, self.jit_compile, state["nt"])
        curvature.learning_rate.assign(0.0)
        mode = state["theta"]
        moments = curvature.start(mode, state["nt"])
        map_losses: list[float] = []
        label_moments: list = []  # [rows, Σ y, Σ y²] per block, per output coordinate
        probe_batches = []
        for block in self._blocks(source, prep, _CURVATURE_BATCHES):
            k0, count, xs, ys, masks = block
            for j in range(min(count, _POWER_ITERATIONS - len(probe_batches))):
                x_j = tf.nest.map_structure(lambda a, j=j: a[j], xs)
                probe_batches.append((x_j, ys[j], masks[j]))
            _, moments, losses = curvature(mode, moments, block, k0)
            map_losses += losses.tolist()
            if self._learn_noise:  # the labels' moments, for the noise's check
                rows = np.asarray(ys, np.float64)[:count].reshape(count * bs, -1)
                rows = rows[np.asarray(masks)[:count].reshape(-1) > 0]
                label_moments += [rows.shape[0], rows.sum(0), np.square(rows).sum(0)]
        map_loss = float(np.mean(map_losses))
        v = curvature.second_moment(moments) / self._n**2  # of the mean's score, ∇ log π̂ / N
        precision = self._n * bs * v  # the empirical Fisher information (per coordinate)
        precision[: self._model_size] += 1.0 / self.prior_scale**2
        precond = 1.0 / np.maximum(precision, 1e-12)
        noise = precond * self._n**2 * v  # minibatch-gradient variance, preconditioned units
        q90 = 0.0 if bs >= self._n else float(np.quantile(noise, 0.9))
        eps_noise = 2 * _TARGET_INFLATION / (q90 + 1 + _TARGET_INFLATION)
        lam = self._stiffest(mode, state["nt"], precond, probe_batches)
        eps = min(eps_noise, 1.0 / lam) if lam > 0 else eps_noise
        self.timings["curvature"] = time.perf_counter() - t0
        self.notes.append(
            f"diagonal preconditioner from the gradient second moments at the MAP "
            f"({len(map_losses)} batches); stiffest curvature in its units {lam:.3g}"
        )

        tuned = None
        if tune is not None:
            # 4'. MAMBA chooses the sampler, step and batch size; the winner samples.
            t0 = time.perf_counter()
            tuned = self._sample_tuned(
                tune, source, state, mode, precond, eps, cb, epoch0, sample_epochs, store, val,
                verbose, 10 * (abs(map_loss) + 1),
            )
            if tuned is None:  # the choice blew up: the rule's sampler, compiled now
                compiled = compiling.submit(sampler.compile, (0, 0, *first))
        if tuned is not None:
            draws, kept, s, kept_losses, theta = tuned
            compiling.shutdown()
        else:
            # 4. Sampling, restarted from the MAP at a smaller step if it diverges.
            t0 = time.perf_counter()
            total = sample_epochs * source.steps
            burn = int(_SAMPLE_BURN_IN * total)
            keep = set(np.unique(np.linspace(burn, total - 1, self.num_draws).round().astype(int)))
            stop_ignored = False
            try:
                compiled.result()
            finally:
                compiling.shutdown()
            sampler.set_scale(np.sqrt(precond))
            self.sampler = sampler
            self.sampler_name = _RULE_SAMPLER
            for _attempt in range(4):
                self.step_size = eps
                sampler.step_size.assign(eps)
                if verbose:
                    print(
                        f"BayesianModel: sampling with step size {eps:.3g} "
                        f"(MAP loss {map_loss:.4g})",
                        file=sys.stderr,
                        flush=True,
                    )
                theta = np.asarray(mode)
                w = results = None  # the chain starts at the MAP, bootstrapped on its first block
                draws: list[np.ndarray] = []  # in memory, or (with a store) the last few
                kept = 0
                kept_losses: list[float] = []  # the losses of the steps after the burn-in
                if store is not None:
                    store.create(
                        [(sh, self._dtype.name) for sh in self._shapes],
                        {},
                        chunk_draws=16,
                        attrs={"writer": STORE_WRITER},
                    )
                failed = ""
                s = 0
                limit = 10 * (abs(map_loss) + 1)
                for e in range(sample_epochs):
                    cb.on_epoch_begin(epoch0 + e)
                    logs = {}
                    total_loss, done = 0.0, 0
                    # A block ends at each kept step, whose state is then the block's output.
                    ends = {k for k in range(source.steps) if s + k in keep}
                    for block in self._blocks(source, prep, ends=ends):
                        k0, count = block[0], block[1]
                        cb.on_train_batch_begin(k0)
                        if results is None:
                            w, results = sampler.start(block)
                        w, results, losses = sampler(w, results, block, s)
                        bad = np.flatnonzero(~np.isfinite(losses) | (losses > limit))
                        if bad.size:
                            failed = f"loss {losses[bad[0]]:.3g} at sampling step {s + bad[0]}"
                            break
                        kept_losses += losses[max(0, burn - s) :].tolist()
                        s += count
                        if s - 1 in keep:
                            kept += 1
                            theta = sampler.weights(w).astype(self._dtype)
                            draws.append(theta)
                            if store is not None:
                                store.append([p[None] for p in self._parts(draws[-1])], {})
                                del draws[:-VALIDATION_DRAWS]
                        total_loss, done = total_loss + losses.sum(), done + count
                        logs = {"loss": total_loss / done}
                        cb.on_train_batch_end(k0 + count - 1, logs)
                    if failed:
                        break
                    theta = sampler.weights(w).astype(self._dtype)
                    stop_ignored = self._end_sampling_epoch(
                        theta, state, val, draws, cb, epoch0, e, logs, sample_epochs,
                        stop_ignored,
                    )
                if not failed:
                    break
                self.notes.append(
                    f"step size {eps:.3g} diverged ({failed}); restarted at {eps / 4:.3g}"
                )
                eps /= 4
            else:
                raise RuntimeError(
                    f"the sampler diverged at every step size tried (last: {failed}); lower "
                    "`learning_rate` or `prior_scale`, or check the likelihood."
                )
            if not kept:
                draws, kept = [np.asarray(theta)], 1
                if store is not None:
                    store.append([p[None] for p in self._parts(draws[-1])], {})
                self.notes.append(
                    "sampling stopped before the first kept draw: the last state kept"
                )
            self.timings["sampling"] = time.perf_counter() - t0
            self.notes.append(
                f"preconditioned SGLD, step size {self.step_size:.3g} (the smaller of "
                f"{eps_noise:.3g}, a {_TARGET_INFLATION:.0%} variance inflation at the 90th "
                f"percentile of the gradient noise, and 1/{lam:.3g}), {s} steps, {kept} "
                f"draws after a burn-in of {burn} steps"
                + (f", written to {store.path}" if store is not None else "")
            )
        self.num_kept = kept
        if store is None:
            flat = np.stack(draws)
            self._flat_draws = flat
            splits = np.split(flat, np.cumsum(self._sizes)[:-1], axis=1)
            parts_s = [c.reshape((flat.shape[0],) + sh) for c, sh in zip(splits, self._shapes)]
            self.draws = parts_s[: self._num_model_weights]
            self.run_dir = None
            log_sigma = parts_s[-1] if self._learn_noise else None
        else:
            self._flat_draws = None
            self.draws = None
            self.run_dir = os.path.dirname(store.path)
            log_sigma = (
                np.concatenate([c[:, -1] for c in self._draw_chunks()])
                if self._learn_noise
                else None
            )
        self.noise_scale_draws = None if log_sigma is None else np.exp(log_sigma)
        if log_sigma is not None:
            log_sigma = np.asarray(log_sigma, np.float64).reshape(-1)
            rows = sum(label_moments[0::3])
            label_mean = sum(label_moments[1::3]) / rows
            label_var = sum(label_moments[2::3]) / rows - label_mean**2
            label_sd = math.sqrt(max(0.0, float(np.mean(label_var))))
            # One warning at most: the first check that fails says why.
            warned = self._check_noise_below_labels(log_sigma, label_sd)
            warned = warned or self._check_noise_mixing(log_sigma)
            if not warned:
                self._check_map_reached(map_loss, kept_losses, epochs)
        self._write_back(mode, state["nt"])
        self.model.stop_training = False
        cb.on_train_end()
        self.history = history
        self.timings["total"] = time.perf_counter() - t_start
        if store is not None:
            self._keep_run_dir()
        return history

    def _end_sampling_epoch(
        self,
        theta: np.ndarray,
        state: dict,
        val: tuple[Any, Any] | None,
        draws: list[np.ndarray],
        cb: Any,
        epoch0: int,
        e: int,
        logs: dict,
        sample_epochs: int,
        stop_ignored: bool,
        stacklevel: int = 4,
    ) -> bool:
        """The end of sampling epoch ``e`` (Keras epoch ``epoch0 + e``), for both samplers:
        the model's variables hold ``theta``, validation scores the draws so far, the
        callbacks' ``on_epoch_end``; a stop request is ignored, with one note and warning.
        Returns whether one was ignored so far."""
        self._write_back(theta, state["nt"])
        if val is not None and draws:
            logs.update(self._validation_logs(val, draws))
        cb.on_epoch_end(epoch0 + e, logs)
        if self.model.stop_training:
            # A stop request (EarlyStopping) ends the MAP search only: cutting the sampling
            # short would leave a few draws of a barely moved chain.
            self.model.stop_training = False
            if not stop_ignored:
                message = (
                    f"a callback asked to stop in sampling epoch {e + 1}; sampling runs its "
                    f"{sample_epochs} epochs to the end (stop requests end the MAP search "
                    "only): pass a smaller `sample_epochs` to sample less"
                )
                self.notes.append(message)
                # (The user's `fit` call: this method, its caller's frames, then `fit`.)
                warnings.warn(f"BayesianModel: {message}.", UserWarning, stacklevel=stacklevel)
                return True
        return stop_ignored

    def _sample_tuned(
        self,
        tune: Tuning,
        source: Source,
        state: dict,
        mode: Any,
        precond: np.ndarray,
        eps: float,
        cb: Any,
        epoch0: int,
        sample_epochs: int,
        store: SampleStore | None,
        val: tuple[Any, Any] | None,
        verbose: int,
        limit: float,
    ) -> tuple[list[np.ndarray], int, int, list[float], np.ndarray] | None:
        """MAMBA on the whitened posterior at the MAP, then the winner's
        ``sample_epochs`` epochs of gradients (``tfp_sgmcmc.keras._tuning``).

        Returns ``(draws, kept, steps, kept_losses, last θ)`` as the fed sampler's loop
        does. An epoch is ``N`` per-example gradient evaluations of the winner; the
        first ``_SAMPLE_BURN_IN`` of the steps are burn-in, then up to ``num_draws``
        draws at a regular thinning. Each epoch is one call of the winner's compiled
        program from the chain's last position (its momentum or thermostat start
        afresh there, as they do at each of MAMBA's rounds).

        ``None`` (with a warning) when the winner's chain blows up, as the rule's sampler
        is judged: a non-finite state or a minibatch loss above ``limit``; ``fit`` then
        samples with the rule's preconditioned SGLD from the MAP instead.
        """
        t0 = time.perf_counter()
        n_all = self._n

        def on_rows(x: Any, y: Any, weights: np.ndarray) -> KerasPosterior:
            """This model's posterior on weighted array rows, its statistics fixed."""
            post = KerasPosterior(
                self.model,
                (x, y),
                self.likelihood,
                prior_scale=self.prior_scale,
                noise_scale=self.noise_scale if self.likelihood == "gaussian" else 1.0,
                from_logits=self.from_logits,
                sample_weight=weights,
            )
            post.set_model_state(state["nt"])
            return post

        # The training rows with their sample and class weights, the arms' minibatches.
        w = source.w if source.w is not None else np.ones(n_all)
        rows = on_rows(source.x, source.y, w)
        # The KSD's scores: a fixed random subset, its weights scaled by N/n.
        n_score = min(n_all, tune.score_rows)
        rng = np.random.default_rng([self.seed, 7])
        idx = np.sort(rng.choice(n_all, n_score, replace=False))
        scoring = on_rows(take(source.x, idx), source.y[idx], w[idx] * (n_all / n_score))
        if verbose:
            print(f"BayesianModel: tuning, {tune.describe()}", file=sys.stderr, flush=True)
        result, kernels = tune_posterior(
            tune,
            rows,
            scoring,
            self._parts(np.asarray(mode)),
            np.sqrt(precond),
            eps,
            self._batch_size,
            seed=self.seed,
            jit_compile=bool(self.jit_compile if tune.jit_compile is None else tune.jit_compile),
            progress=verbose == 1,
        )
        self.tuning_result = result
        self.timings["tuning"] = time.perf_counter() - t0
        arm = dict(result.best_arm)
        self.sampler_name = (
            f"{arm['sampler'].upper()} chosen by MAMBA (step size {arm['step_size']:.3g} "
            f"in the preconditioned coordinates, batch {arm['batch_size']})"
        )
        self.step_size = float(arm["step_size"])
        self.sampler = None
        start = result.final_states[result.best_index]
        if start is None or not np.isfinite(result.best_metric):
            message = (
                "MAMBA found no arm with a finite KSD (every arm diverged or drew no sample; "
                f"its table says why): sampled with {_RULE_SAMPLER} instead; tune with smaller "
                "`step_factors` or a larger budget"
            )
            self.notes.append(message)
            warnings.warn(f"BayesianModel: {message}.", RuntimeWarning, stacklevel=4)
            return None
        self.notes.append(
            f"{tune.describe()}: {len(result.arms)} arms in {result.num_rounds} rounds, "
            f"{self.timings['tuning']:.1f} s ({result.total_compile_seconds:.1f} s compiling, "
            f"{result.total_metric_seconds:.1f} s scoring); chose {self.sampler_name}, "
            f"KSD {result.best_metric:.4g}, {result.pick_confidence()}"
        )
        edge = result.grid_edge_message()
        if edge:  # e.g. the smallest step factor won: a smaller one may score better still
            self.notes.append(f"MAMBA: {edge} (`Tuning(step_factors=...)`)")
        if verbose:
            print(f"BayesianModel: sampling with {self.sampler_name}", file=sys.stderr, flush=True)

        t0 = time.perf_counter()
        spe = steps_per_epoch(result, n_all)
        total = sample_epochs * spe
        burn = int(_SAMPLE_BURN_IN * total)
        thin = max(1, (total - burn) // self.num_draws)
        # Kept: the state after step burn + thin·k (k = 1 …), at most num_draws of them.
        keep = [burn + thin * (k + 1) for k in range(self.num_draws)]
        keep = [t for t in keep if t <= total]
        log_det = float(np.sum(np.log(kernels.scale)))
        w_state = np.asarray(start[0])
        draws: list[np.ndarray] = []
        kept_losses: list[float] = []
        kept = reached = 0
        theta = kernels.weights(w_state)
        if store is not None:
            store.create(
                [(sh, self._dtype.name) for sh in self._shapes],
                {},
                chunk_draws=16,
                attrs={"writer": STORE_WRITER},
            )
        stop_ignored = False
        for e in range(sample_epochs):
            cb.on_epoch_begin(epoch0 + e)
            cb.on_train_batch_begin(0)
            end = (e + 1) * spe
            here = [t for t in keep if reached < t <= end]
            logs = {}
            if here or end > reached:
                # One call of the winner's program: up to the epoch's last kept step, or
                # (none kept) to the epoch's end; the next call continues from there.
                count = len(here)
                n_res = max(1, count)
                last = here[-1] if here else end
                n_burn = (here[0] if here else end) - reached - 1
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # NaN draws: said below
                    ws, lp = result.sample(
                        n_res,
                        seed=[self.seed, e],
                        num_burnin_steps=n_burn,
                        thin=thin if count > 1 else 1,
                        initial_state=w_state,
                        return_log_prob=True,
                    )
                ws, lp = np.asarray(ws), np.asarray(lp, np.float64)
                losses = None
                if np.isfinite(ws).all() and np.isfinite(lp).all():
                    thetas = kernels.weights(ws)
                    prior = np.array(
                        [
                            float(self.posterior.log_prior_fn(
                                self._parts(tf.constant(t, self._dtype))
                            ))
                            for t in thetas
                        ]
                    )
                    losses = -(lp - log_det - prior) / n_all
                if losses is None or not (losses <= limit).all():
                    what = "a non-finite state" if losses is None else f"loss {losses.max():.3g}"
                    message = (
                        f"MAMBA's choice, {self.sampler_name}, blew up in sampling epoch "
                        f"{e + 1} ({what}): sampled with {_RULE_SAMPLER} from the MAP instead"
                    )
                    self.notes.append(message)
                    warnings.warn(f"BayesianModel: {message}.", RuntimeWarning, stacklevel=4)
                    self.timings["sampling_tuned"] = time.perf_counter() - t0
                    return None
                reached = last
                w_state = ws[-1]
                theta = thetas[-1].astype(self._dtype)
                for t, loss in zip(thetas[:count], losses[:count]):
                    draws.append(t.astype(self._dtype))
                    kept_losses.append(float(loss))
                    if store is not None:
                        store.append([p[None] for p in self._parts(draws[-1])], {})
                        del draws[:-VALIDATION_DRAWS]
                kept += count
                logs = {"loss": float(np.mean(losses))}
            cb.on_train_batch_end(spe - 1, logs)
            stop_ignored = self._end_sampling_epoch(
                theta, state, val, draws, cb, epoch0, e, logs, sample_epochs, stop_ignored,
                stacklevel=5,
            )
        self.timings["sampling"] = time.perf_counter() - t0
        self.notes.append(
            f"{self.sampler_name}: {reached} steps ({spe} an epoch), {kept} draws every "
            f"{thin} steps after a burn-in of {burn} steps"
            + (f", written to {store.path}" if store is not None else "")
        )
        return draws, kept, reached, kept_losses, theta

    def _check_noise_mixing(self, log_sigma: np.ndarray) -> bool:
        """Warn when the draws of a learned Gaussian noise show that the chain has not
        converged, so that the predictive intervals would be too narrow or too wide.

        With ``N`` examples of ``K`` outputs each, the Fisher information of ``log σ``
        is ``2NK`` (``∂ log N(y; μ, σ²)/∂ log σ = z² − 1`` has variance 2), so its
        posterior sd is about ``s = 1/√(2NK)``, or more when the mean's weights are
        many for the data. A spread of the draws under ``s/2`` is a chain that has not
        crossed the posterior (its draws too alike); one over ``4s``, with halves whose
        means differ by more than ``3s``, is a chain still drifting from its start.
        """
        if log_sigma.size < 4:
            return False
        s = 1.0 / math.sqrt(2.0 * self._n * self._num_outputs)
        ratio = float(np.std(log_sigma)) / s
        half = log_sigma.size // 2
        drift = abs(float(np.mean(log_sigma[half:]) - np.mean(log_sigma[:half]))) / s
        if ratio >= 0.5 and not (ratio > 4.0 and drift > 3.0):
            return False
        why = (
            f"they spread {ratio:.2g}x the posterior's sd 1/sqrt(2N) = {s:.3g}"
            if ratio < 0.5
            else f"they drift by {drift:.2g} posterior sds (1/sqrt(2N) = {s:.3g}) between "
            "the halves of the sampling"
        )
        message = (
            f"sampling has not converged: the draws of the noise scale (log sigma) do not "
            f"describe its posterior ({why}), so predictive intervals are unreliable; "
            "raise `sample_epochs` (and `epochs`, to start at the MAP), or standardise `y`"
        )
        self.notes.append(message)
        warnings.warn(f"BayesianModel: {message}.", UserWarning, stacklevel=4)
        return True

    def _check_noise_below_labels(self, log_sigma: np.ndarray, label_sd: float) -> bool:
        """Warn when the learned noise exceeds the training labels' own spread: draws
        whose residuals are wider than ``y`` around its mean predict it worse than that
        constant does, so the chain has not reached the posterior's fit of the data
        (a MAP search too short for the scale of ``y``, typically), and the predictive
        intervals are too wide.

        The test: ``mean(log σ) > log sd(y) + 3s``, with ``sd(y)`` pooled over the
        output coordinates and ``s = 1/√(2NK)`` the posterior sd of ``log σ`` (see
        ``_check_noise_mixing``). A model that explains nothing of ``y`` has
        ``σ ≈ sd(y)`` and passes.
        """
        if log_sigma.size < 4 or not label_sd > 0:
            return False
        s = 1.0 / math.sqrt(2.0 * self._n * self._num_outputs)
        if not float(np.mean(log_sigma)) > math.log(label_sd) + 3.0 * s:
            return False
        message = (
            f"sampling has not converged: the learned noise scale (mean sigma "
            f"{float(np.mean(np.exp(log_sigma))):.4g}) exceeds the standard deviation of the "
            f"training labels ({label_sd:.4g}), so the draws predict `y` worse than its mean "
            "does and the predictive intervals are too wide; raise `epochs` (or "
            "`learning_rate`) so that the MAP search reaches the scale of `y`, or "
            "standardise `y`"
        )
        self.notes.append(message)
        warnings.warn(f"BayesianModel: {message}.", UserWarning, stacklevel=4)
        return True

    def _check_map_reached(self, map_loss: float, losses: list[float], epochs: int) -> bool:
        """Warn when the draws fit the data far better than the end of the MAP search
        did: the search stopped short of the mode, the preconditioner and the step size
        were measured away from it, and the draws (and a learned noise with them) are
        not the posterior's. This is what a MAP search too short for the scale of
        ``y`` gives (raw targets in the hundreds, fitted from zero-centred outputs).

        Both losses are the mean negative log-likelihood per example in inference
        mode: ``map_loss`` at the end of the MAP search, ``losses`` the sampler's steps
        after the burn-in. Near a mode the draws' loss is *above* the mode's (by about
        ``D/(2N)`` for ``D`` parameters). A loss below it by more than
        ``3 (√(D/2)/N + SE)``, with ``√(D/2)`` the spread of the log-likelihood over a
        Gaussian posterior and ``SE`` the standard error of the losses' mean, is a chain
        that went on descending.
        """
        if epochs == 0 or len(losses) < 4:
            return False  # no MAP search (sampling from the given weights): no comparison
        arr = np.asarray(losses, np.float64)
        dim = float(sum(self._sizes))
        margin = 3.0 * (math.sqrt(dim / 2.0) / self._n + float(np.std(arr)) / math.sqrt(arr.size))
        gap = map_loss - float(np.mean(arr))
        if not gap > margin:
            return False
        message = (
            f"sampling has not converged: the draws fit the training data far better than "
            f"the end of the MAP search (loss {np.mean(arr):.4g} against {map_loss:.4g} per "
            "example), so the MAP search stopped short of the mode and the step size, the "
            "noise scale and the predictive intervals are unreliable; raise `epochs` (or "
            "`learning_rate`), or standardise `y`"
        )
        self.notes.append(message)
        warnings.warn(f"BayesianModel: {message}.", UserWarning, stacklevel=4)
        return True

    def _stiffest(self, theta: tf.Tensor, nt: list, precond: np.ndarray, batches: list) -> float:
        """The largest curvature ``λ_max`` of ``−log π`` in the preconditioned units
        (``P^½ H P^½``), by power iteration on minibatch Hessian-vector products."""
        hvp = self._hvp_program()
        root = tf.constant(np.sqrt(precond), self._dtype)
        u = tf.random.stateless_normal(tf.shape(theta), [self.seed, 7], dtype=self._dtype)
        n = tf.constant(float(self._n), self._dtype)
        quotients = []
        for k in range(_POWER_ITERATIONS):
            x, y, mask = batches[k % len(batches)]
            u = u / tf.norm(u)
            hu = root * hvp(theta, nt, x, y, mask, root * u, n)
            quotients.append(float(tf.reduce_sum(u * hu)))
            u = hu
        tail = [abs(q) for q in quotients[-5:] if np.isfinite(q)]
        return float(np.median(tail)) if tail else 0.0

    def _write_back(self, theta: Any, nt: Sequence[Any]) -> None:
        """Weights and statistics into the Keras model's variables (for callbacks)."""
        for var, w in zip(self.model.trainable_variables, self._parts(theta)):
            var.assign(w)
        for var, w in zip(self.model.non_trainable_variables, nt):
            var.assign(w)

    def _fix_batchnorm(self, source: Source, state: dict) -> None:
        """Moving statistics = the average batch statistics over the training data at the
        MAP (training mode, one pass), then fixed for sampling."""
        self._write_back(state["theta"], state["nt"])
        momenta = [lyr.momentum for lyr in self._batchnorm]
        batches = 0
        try:
            for k, (xb, *_) in enumerate(source.epoch(_BN_BATCHES)):
                for lyr in self._batchnorm:
                    lyr.momentum = k / (k + 1)
                self.model(to_host(xb, self._dtype), training=True)
                batches += 1
        finally:
            for lyr, mom in zip(self._batchnorm, momenta):
                lyr.momentum = mom
        state["nt"] = [tf.convert_to_tensor(v.value) for v in self.model.non_trainable_variables]
        self.notes.append(
            f"BatchNormalization statistics set from {batches} training batches at the MAP "
            "and fixed while sampling (inference mode)"
        )

    def save(self, path: str | os.PathLike) -> None:
        """Keep the posterior in a directory that ``BayesianModel.load`` reads back, in
        this process or another, to the same predictions.

        The directory (created if missing; a model saved there before is replaced)
        holds three files: ``model.keras``, the Keras model in Keras's own format
        (``keras.saving.load_model`` reads it); ``samples.h5``, the draws (one dataset
        ``samples/<i>`` ``[S, *shape]`` per trainable weight, then ``log σ`` for a
        learned Gaussian noise, as ``fit(run_dir=...)`` writes them) and
        ``statistics/<j>``, the non-trainable variables (BatchNormalization's
        statistics) fixed while sampling; and ``bayesian_model.json``, the manifest
        (format name and version, the likelihood, the constructor's arguments and what
        ``fit`` chose: ``from_logits``, ``jit_compile``, the step size, the notes).

        A callable likelihood is saved by the name it is registered under with
        ``@keras.saving.register_keras_serializable()``; ``load`` looks the name up
        again, so the loading process must define it too (as for a custom layer).

        Args:
          path: the directory.

        Raises:
          KerasSaveError: a callable likelihood that is not registered, a ``path`` that
            is a file or holds a ``samples.h5`` that ``BayesianModel`` did not write;
            a ``ValueError``.
          ValueError: no draws yet (call ``fit`` first).
        """
        self._check_fitted()
        likelihood = likelihood_entry(self.likelihood)
        directory = prepare_directory(path)
        in_place = (
            self.run_dir is not None
            and os.path.isdir(self.run_dir)
            and os.path.samefile(self.run_dir, directory)
        )
        if not in_place:
            write_draws(directory, self._draw_chunks(), self._shapes, self._dtype)
        self._write_saved(directory, likelihood)

    def _write_saved(self, directory: str, likelihood: Any) -> None:
        """The model, the fixed statistics and (last) the manifest into ``directory``,
        whose ``samples.h5`` holds the draws already."""
        self.model.save(os.path.join(directory, MODEL_FILE))
        write_statistics(directory, [np.asarray(v) for v in self._non_trainable])
        write_manifest(
            directory,
            {
                "likelihood": likelihood,
                "settings": {
                    "prior_scale": self.prior_scale,
                    "noise_scale": self.noise_scale,
                    "from_logits": self._from_logits_arg,
                    "num_draws": self.num_draws,
                    "learning_rate": self.learning_rate,
                    "jit_compile": self._jit_arg,
                    "steps_per_execution": self.steps_per_execution,
                    "seed": self.seed,
                },
                "fit": {
                    "from_logits": self.from_logits,
                    "jit_compile": self.jit_compile,
                    "step_size": self.step_size,
                    "sampler": self.sampler_name,
                    "num_kept": self.num_kept,
                    "num_examples": self._n,
                    "num_outputs": self._num_outputs,
                    "shapes": [list(sh) for sh in self._shapes],
                    "dtype": self._dtype.name,
                    "draws_in_memory": self.run_dir is None,
                    "notes": list(self.notes),
                    "timings": dict(self.timings),
                },
            },
        )

    def _keep_run_dir(self) -> None:
        """After a ``run_dir`` fit: the model and the manifest beside the draws, so that
        ``BayesianModel.load(run_dir)`` reopens the run; a note says why not if not."""
        try:
            likelihood = likelihood_entry(self.likelihood)
        except KerasSaveError:
            self.notes.append(
                f"{self.run_dir} holds the draws but cannot be reopened by "
                "BayesianModel.load: the likelihood is a callable that is not registered "
                "with keras.saving.register_keras_serializable"
            )
            return
        try:
            self._write_saved(self.run_dir, likelihood)
        except Exception as e:  # noqa: BLE001 - the draws are kept; a failed extra must not end fit
            message = (
                f"{self.run_dir} holds the draws but cannot be reopened by "
                f"BayesianModel.load: saving the model failed ({type(e).__name__}: {e})"
            )
            self.notes.append(message)
            warnings.warn(f"BayesianModel: {message}.", UserWarning, stacklevel=4)

    @classmethod
    def load(cls, path: str | os.PathLike) -> BayesianModel:
        """A ``BayesianModel`` read back from a directory that ``save`` or
        ``fit(..., run_dir=path)`` wrote: the same draws, Keras model, likelihood,
        fixed statistics and settings, so ``predict`` and ``evaluate`` give what they
        gave before saving. Draws that were in memory are read into memory; those of a
        ``run_dir`` fit stay on disk and are read a chunk at a time (``run_dir`` is
        ``path``). ``history`` is not kept.

        Args:
          path: the directory.

        Returns:
          The fitted ``BayesianModel``; ``fit`` on it starts a new fit.

        Raises:
          KerasSaveError: ``path`` is not a saved model (missing, no manifest), a file
            in it is damaged, its format version is unknown, or its likelihood is
            registered under a name this process has not registered; a ``ValueError``.
        """
        saved = read_saved(path)
        settings, fit = saved.manifest["settings"], saved.manifest["fit"]
        try:
            bayes = cls(saved.model, saved.likelihood, **settings)
            bayes.from_logits = fit["from_logits"]
            bayes.jit_compile = fit["jit_compile"]
            bayes.step_size = fit["step_size"]
            bayes.sampler_name = fit.get("sampler")
            bayes.num_kept = int(fit["num_kept"])
            bayes._n = fit["num_examples"]
            bayes._num_outputs = fit["num_outputs"]
            bayes.notes = list(fit["notes"])
            bayes.timings = dict(fit["timings"])
            in_memory = bool(fit["draws_in_memory"])
            dtype = np.dtype(fit["dtype"])
        except (KeyError, TypeError, ValueError) as e:
            raise KerasSaveError(
                f"{saved.directory!r} is not a readable saved BayesianModel: its manifest's "
                f"settings are incomplete or invalid ({type(e).__name__}: {e}). Save the "
                "model again with `bayes.save(path)`."
            ) from None
        if dtype != bayes._dtype:
            raise KerasSaveError(
                f"{saved.directory!r}: the draws are {dtype.name} but the saved model's "
                f"weights are {bayes._dtype.name}; save the model again."
            )
        bayes._shapes = [tuple(int(d) for d in sh) for sh in fit["shapes"]]
        bayes._sizes = [int(np.prod(sh)) for sh in bayes._shapes]
        bayes._model_size = int(sum(bayes._sizes[: bayes._num_model_weights]))
        bayes._non_trainable = [tf.convert_to_tensor(s) for s in saved.statistics]
        if in_memory:
            flat = read_draws(saved.directory, bayes._shapes, bayes.num_kept)
            bayes._flat_draws = flat
            splits = np.split(flat, np.cumsum(bayes._sizes)[:-1], axis=1)
            parts = [c.reshape((flat.shape[0],) + sh) for c, sh in zip(splits, bayes._shapes)]
            bayes.draws = parts[: bayes._num_model_weights]
            bayes.run_dir = None
        else:
            bayes._flat_draws = None
            bayes.run_dir = saved.directory
        if bayes._learn_noise:
            bayes.noise_scale_draws = np.exp(
                np.concatenate([c[:, -1] for c in bayes._draw_chunks()])
            )
        return bayes

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise KerasSaveError(
            "a BayesianModel cannot be pickled or copied (its Keras model and compiled "
            "programs hold TensorFlow state): keep it with `bayes.save(path)` and read it "
            "back with `BayesianModel.load(path)`."
        )

    def __deepcopy__(self, memo: Any) -> Any:
        return self.__reduce_ex__(None)

    def summary(self, print_fn: Callable[[str], Any] | None = None, **kwargs: Any) -> None:
        """The Keras model's summary (``model.summary(print_fn=print_fn, **kwargs)``),
        then the posterior's settings: the likelihood, the prior, the draws and the
        sampler (its step size and XLA choice once fitted).

        Args:
          print_fn: called with the settings' text (and passed on to Keras's
            ``summary``). Default value: ``None`` (``print``).
          **kwargs: passed on to ``keras.Model.summary`` (``line_length``,
            ``expand_nested``, ``show_trainable``...).
        """
        self.model.summary(print_fn=print_fn, **kwargs)
        (print_fn or print)("\n".join(self._settings()))

    def _settings(self) -> list[str]:
        """The posterior's settings, one line each, for ``summary``."""
        lik = self.likelihood
        if callable(lik):
            lik_text = (
                f"callable {getattr(lik, '__name__', type(lik).__name__)} (y, outputs) -> [n]"
            )
        elif lik == "gaussian":
            noise = (
                f"noise scale {self.noise_scale:g}"
                if self.noise_scale is not None
                else "noise scale learned (flat prior on log sigma, sampled with the weights)"
            )
            lik_text = f"gaussian, {noise}"
        else:
            logits = self.from_logits if self.num_kept else self._from_logits_arg
            read = {None: "logits or probabilities (detected by fit)", True: "logits"}
            lik_text = f"{lik}, outputs read as {read.get(logits, 'probabilities')}"
        size = sum(int(np.prod(v.shape)) for v in self.model.trainable_variables)
        lines = [
            "BayesianModel posterior",
            f"  likelihood: {lik_text}",
            f"  prior: N(0, {self.prior_scale:g}^2) on each of the {size:,} trainable weights",
        ]
        if not self.num_kept:
            lines.append(f"  draws: {self.num_draws} to keep (not fitted yet)")
        else:
            where = f"in {self.run_dir}" if self.run_dir is not None else "in memory"
            lines.append(f"  draws: {self.num_kept} kept of {self.num_draws} asked, {where}")
        sampler = self.sampler_name or _RULE_SAMPLER
        if self.step_size is not None and self.sampler_name in (None, _RULE_SAMPLER):
            sampler += (
                f", step size {self.step_size:.3g}, XLA {'on' if self.jit_compile else 'off'}"
            )
        lines.append(f"  sampler: {sampler}, seed {self.seed}")
        lines.append(f"  MAP search: Adam, learning rate {self.learning_rate:g}")
        return lines

    def __repr__(self) -> str:
        lik = self.likelihood if isinstance(self.likelihood, str) else "callable"
        if not self.num_kept:
            return f"BayesianModel(likelihood={lik!r}, not fitted)"
        return (
            f"BayesianModel(likelihood={lik!r}, draws={self.num_kept}, "
            f"step_size={self.step_size:.3g}, jit_compile={self.jit_compile})"
        )


def _learning_rate(optimizer: Any) -> float:
    """The optimizer's current learning rate (a callback may have set it), checked."""
    lr = float(np.asarray(optimizer.learning_rate))
    if not (np.isfinite(lr) and lr >= 0):
        raise ValueError(
            f"a callback set the learning rate to {lr}: it must be a finite number >= 0."
        )
    return lr


def _pair(data: Any, name: str) -> tuple[Any, Any]:
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return data[0], data[1]
    raise ValueError(f"`{name}` must be (x, y) or a tf.data dataset of (x, y) pairs.")
