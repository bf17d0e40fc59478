r"""The chains of ``BayesianModel.fit``: the library's Adam and SGLD in its loop, on fed
minibatches.

``fit``'s MAP search and curvature pass are `FedAdam`: the library's ``AdamAscent`` kernel
on a `FedModelEstimator` (the Keras model run in training mode where ``model.fit`` would,
its BatchNormalization statistics carried). Its sampler is `FedSGLD`, below.

``BayesianModel.fit`` samples the flat weight vector ``θ`` with preconditioned SGLD

$$
\theta_{t+1} = \theta_t + \varepsilon P \hat g(\theta_t) + \sqrt{2 \varepsilon P}\,\xi_t,
\qquad \xi_t \sim \mathcal N(0, I),
$$

``P`` a diagonal preconditioner and ``ĝ`` the minibatch score of the posterior, a
[`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior] (the Keras bridge's likelihood and
prior, on masked batches). This is
[`SGLD`][tfp_sgmcmc.SGLD] (Welling & Teh 2011) on the whitened coordinates
``w = (θ − θ_MAP) / √P`` of a [`WhitenedEstimator`][tfp_sgmcmc.estimators.WhitenedEstimator]
with the diagonal scale ``√P``: there ``w' = w + ε √P ĝ + √(2ε) ξ``, which is the update
above. The minibatch score is the posterior's
[`MinibatchEstimator`][tfp_sgmcmc.estimators.MinibatchEstimator] on a
[`FedBatches`][tfp_sgmcmc.data.fed.FedBatches] source: ``fit`` stacks the batches of a
block of steps on the host (sample and class weights as a row mask, a padded partial
batch) and each compiled call feeds them to the steps, which run in the library's loop
[`run_steps`][tfp_sgmcmc.loop.run_steps] under its seed rule: step ``t`` of the chain
draws its noise from ``fold_in(chain_seed(seed), t)``, whatever the blocks. So the draws
are ``sg.sample_chain``'s for ``kernel``, the start ``w = 0`` (the MAP) and ``seed``, fed
the same batches (``tests/test_one_loop.py``).

As every library kernel, a step reads its minibatch for the score at the state it
moves to (the first score, at the MAP, reads the first batch in ``bootstrap``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data.fed import FedBatches
from tfp_sgmcmc.estimators import GradientEstimate, GradientEstimator, WhitenedEstimator
from tfp_sgmcmc.estimators.map import AdamAscent
from tfp_sgmcmc.internal.adam import BETA2
from tfp_sgmcmc.internal.util import as_parts
from tfp_sgmcmc.keras._posterior import KerasPosterior
from tfp_sgmcmc.kernels import SGLD
from tfp_sgmcmc.loop import chain_seed, run_steps

__all__ = ["FedSGLD", "FedAdam", "FedModelEstimator"]


class FedSGLD:
    """Preconditioned SGLD on a Keras posterior's fed minibatches, compiled once per
    block shape.

    The target is ``posterior``'s (its estimator, its ``log p(θ)``), the state the
    whitened flat vector ``w`` with ``θ = θ_MAP + √P w``.

    Args:
      posterior: a [`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior] on a
        [`FedBatches`][tfp_sgmcmc.data.fed.FedBatches] source, its model state the one
        to sample with.
      centre: ``θ_MAP``, the list of parts of the posterior's state the chain starts
        at.
      scale: ``√P``, the ``[d]`` positive diagonal scale of the flattened parts
        (changed in place by `set_scale`, without a new program).
      steps_per_call: ``K``, the most steps (and fed batches) of one call.
      seed: the chain's seed, an int in ``[0, 2**31)``.
      jit_compile: compile the calls with XLA.
    """

    def __init__(
        self,
        posterior: KerasPosterior,
        centre: list[np.ndarray],
        scale: np.ndarray,
        *,
        steps_per_call: int,
        seed: int,
        jit_compile: bool,
    ) -> None:
        if not isinstance(posterior.data, FedBatches):
            raise ValueError("`posterior` must read a FedBatches source.")
        centre = [np.asarray(c) for c in centre]
        dtype = tf.as_dtype(centre[0].dtype)
        self.data = posterior.data
        self.posterior = posterior
        inner = posterior.estimator(self.data.batch_size)
        # The chain is judged by its minibatch losses (`fit`), not by a χ² radius.
        self.estimator = WhitenedEstimator(
            inner, [tf.constant(c) for c in centre], np.asarray(scale, np.float64),
            flag_runaway_steps=False,
        )
        #: ε, a variable: a restart at a smaller step reuses the compiled programs.
        self.step_size = tf.Variable(1.0, dtype=dtype, trainable=False, name="sgld_step_size")
        self.kernel = SGLD(self.estimator, step_size=self.step_size)
        self.seed = chain_seed(seed)
        self.dimension = self.estimator.dimension
        log_det = self.estimator.log_det_scale
        n = float(self.data.num_examples)

        def loss(w: tf.Tensor, results: Any) -> tf.Tensor:
            # The step's minibatch loss −mean log-likelihood, from the estimate at the state
            # it moved to: log π̂_w = N · mean + log p(θ) + log det √P.
            theta = self.estimator.unwhiten(w)
            lp = results.target_log_prob - log_det - posterior.log_prior_fn(theta)
            return -lp / n

        kernel = self.kernel

        # One evaluation: a graph, not worth an XLA compilation.
        @tf.function(autograph=False)
        def start(w, xs, ys, masks):
            with self.data.feeding((xs, ys, masks)):
                return kernel.bootstrap_results(w)

        @tf.function(jit_compile=jit_compile, autograph=False)
        def run(w, results, xs, ys, masks, first_step, count):
            with self.data.feeding((xs, ys, masks)):
                out = run_steps(
                    kernel, w, results, count, tf.constant(self.seed),
                    first_step=first_step, num_slots=steps_per_call, trace_fn=loss,
                )
            return out.state, out.kernel_results, out.trace

        self._start, self._run = start, run

    def set_scale(self, scale: np.ndarray) -> None:
        """Replace ``√P`` in place (the compiled programs see it at their next call)."""
        self.estimator.set_scale(np.asarray(scale, np.float64))

    def compile(self, block: tuple) -> None:
        """Compile the programs for ``block``'s shapes by a call that runs no step."""
        w, results = self.start(block)
        self(w, results, (0, 0, *block[2:]), 0)

    def start(self, block: tuple) -> tuple[tf.Tensor, Any]:
        """The chain's start ``w = 0`` (the MAP) and its kernel results, whose score reads
        the first batch of ``block`` ``(k0, count, xs, ys, masks)``."""
        w = tf.zeros([self.dimension], self.step_size.dtype)
        _, _, xs, ys, masks = block
        return w, self._start(w, xs, ys, masks)

    def __call__(
        self, w: tf.Tensor, results: Any, block: tuple, first_step: int
    ) -> tuple[tf.Tensor, Any, np.ndarray]:
        """Steps ``first_step …`` of the chain on the batches of ``block``: the state and
        results after them and each step's minibatch loss (host)."""
        _, count, xs, ys, masks = block
        w, results, losses = self._run(
            w, results, xs, ys, masks, tf.constant(first_step, tf.int32),
            tf.constant(count, tf.int32),
        )
        return w, results, np.asarray(losses, np.float64)[:count]

    def weights(self, w: tf.Tensor) -> np.ndarray:
        """``θ = θ_MAP + √P w``, the flat weight vector of the whitened state ``w``."""
        return self.estimator.centre + self.estimator.scale * np.asarray(w, np.float64)


class FedModelEstimator(GradientEstimator):
    """``log π̂(θ) = N Σ_i r_i + log p(θ)`` on a fed minibatch of a Keras model, the model's
    non-trainable state (BatchNormalization statistics, Dropout's seed) carried.

    ``row_log_lik(θ, state, x, y, mask) -> (r, new_state)`` gives each row's share ``r_i``
    of the minibatch's mean log-likelihood and the model's new non-trainable state (in
    training mode a BatchNormalization layer updates its statistics, as ``model.fit``'s
    steps do). The estimator's state is ``(batch state, model state, loss)``, ``loss``
    being the last minibatch's ``−Σ r_i``, the mean negative log-likelihood ``fit``
    reports.
    """

    def __init__(
        self,
        row_log_lik: Callable[..., Any],
        log_prior: Callable[[tf.Tensor], tf.Tensor],
        data: FedBatches,
        model_state: list[tf.Tensor],
    ) -> None:
        super().__init__()
        self._row_log_lik = row_log_lik
        self._log_prior = log_prior
        self._data = data
        self._model_state = [tf.convert_to_tensor(v) for v in model_state]

    @property
    def dtype(self) -> tf.DType | None:
        return self._data.float_dtype

    def bootstrap(self, state: Any) -> Any:
        dtype = as_parts(state)[0].dtype
        return (self._data.init_batch_state(), list(self._model_state), tf.zeros([], dtype))

    def _estimate(self, state: Any, estimator_state: Any, seed: tf.Tensor) -> Any:
        batch_state, model_state, _ = estimator_state
        (x, y, mask), batch_state = self._data.sample_batch(
            self._data.batch_size, batch_state, seed
        )
        theta = as_parts(state)[0]
        n = tf.cast(self._data.num_examples, theta.dtype)
        with tf.GradientTape() as tape:
            tape.watch(theta)
            rows, new_state = self._row_log_lik(theta, model_state, x, y, mask)
            mean = tf.reduce_sum(rows)
            log_prob = n * mean + self._log_prior(theta)
        grad = tape.gradient(log_prob, theta)
        return GradientEstimate(log_prob, [grad]), (batch_state, list(new_state), -mean)


class FedAdam:
    """Adam (the library's [`AdamAscent`][tfp_sgmcmc.estimators.map.AdamAscent]) up a Keras
    model's posterior on fed minibatches, in the library's loop: ``fit``'s MAP search
    (``training`` as ``model.fit``'s steps) and, at learning rate 0, its curvature pass.

    Adam's ``ϵ`` is Keras's ``1e-7`` on the mean loss ``−log π / N``, so the steps are
    those of ``keras.optimizers.Adam`` on that loss (``AdamAscent``'s docstring). At
    learning rate 0 the weights stay where they are and Adam's bias-corrected second
    moment ``v_t / (1 − β₂^t)`` is a mean of the squared minibatch scores (weighted by
    ``β₂`` to the power of each one's age: 0.9 to 1 over 100 steps).

    Args:
      row_log_lik: ``(θ, model state, x, y, mask) -> (rows, new model state)``.
      log_prior: ``θ -> log p(θ)``.
      model_state: the model's non-trainable values at the start.
      num_examples, batch_size, steps_per_call, seed, jit_compile: as `FedSGLD`'s.
      dtype: the weights' dtype.
    """

    def __init__(
        self,
        row_log_lik: Callable[..., Any],
        log_prior: Callable[[tf.Tensor], tf.Tensor],
        model_state: list[tf.Tensor],
        *,
        num_examples: int,
        batch_size: int,
        steps_per_call: int,
        seed: int,
        jit_compile: bool,
        dtype: Any,
    ) -> None:
        dtype = tf.as_dtype(dtype)
        self.data = FedBatches(num_examples, batch_size, dtype)
        self.estimator = FedModelEstimator(row_log_lik, log_prior, self.data, model_state)
        #: Adam's learning rate, a variable read at every call (callbacks may change it).
        self.learning_rate = tf.Variable(0.0, dtype=dtype, trainable=False, name="adam_lr")
        self._dtype = dtype
        self._seed = chain_seed(seed)
        self._like = [tf.zeros([0], dtype)]
        kernel = AdamAscent(
            self.estimator, self._like, self.learning_rate, epsilon=1e-7 * num_examples
        )
        self.kernel = kernel

        def loss(state: Any, results: Any) -> tf.Tensor:
            return results.est_state[2]

        @tf.function(autograph=False)
        def start(theta, model_state):
            results = kernel.bootstrap_results([theta])
            b, _, lo = results.est_state
            return results._replace(est_state=(b, list(model_state), lo))

        @tf.function(jit_compile=jit_compile, autograph=False)
        def run(theta, results, xs, ys, masks, first_step, count):
            with self.data.feeding((xs, ys, masks)):
                out = run_steps(
                    kernel, [theta], results, count, tf.constant(self._seed),
                    first_step=first_step, num_slots=steps_per_call, trace_fn=loss,
                    record=True,
                )
            return out.state[0], out.kernel_results, out.trace

        self._start, self._run = start, run

    def start(self, theta: tf.Tensor, model_state: list[tf.Tensor]) -> Any:
        """Fresh Adam results at ``θ`` with the model's non-trainable ``model_state``."""
        return self._start(tf.convert_to_tensor(theta, self._dtype), list(model_state))

    def __call__(
        self, theta: tf.Tensor, results: Any, block: tuple, first_step: int
    ) -> tuple[tf.Tensor, Any, np.ndarray]:
        """Adam steps ``first_step …`` on the batches of ``block`` ``(k0, count, xs, ys,
        masks)``: ``θ`` and the results after them, and each step's minibatch loss
        (host)."""
        _, count, xs, ys, masks = block
        theta, results, losses = self._run(
            theta, results, xs, ys, masks, tf.constant(first_step, tf.int32),
            tf.constant(count, tf.int32),
        )
        return theta, results, np.asarray(losses, np.float64)[:count]

    @staticmethod
    def model_state(results: Any) -> list[tf.Tensor]:
        """The model's non-trainable values in ``results``."""
        return list(results.est_state[1])

    @staticmethod
    def second_moment(results: Any) -> np.ndarray:
        """Adam's bias-corrected second moment ``v_t / (1 − β₂^t)`` of the scores."""
        t = int(results.adam.step)
        v = np.asarray(results.adam.v[0], np.float64)
        return v / (1.0 - BETA2**t) if t else v
