r"""SVRG gradient estimator: a control variate whose anchor follows the chain.

Stochastic variance-reduced gradients (Johnson & Zhang 2013 [1]; for SG-MCMC,
Dubey et al. 2016 [2]) keep an anchor ``θ̂`` and its full-data score and use
the control-variate estimate of `tfp_sgmcmc.estimators.control_variates`
around it; unlike SG*-CV, the anchor is **moved to the current state** every
``update_rate`` estimator calls, with one full pass over the data:

```none
call c:  if c mod r = 0:  θ̂ ← θ,  ĝ ← ∇ log π(θ̂),  ℓ̂ ← log π(θ̂)        (full pass)
         ∇ log π̂(θ) = ĝ + ∇ log p(θ) − ∇ log p(θ̂)
                      + (N/n) Σ_{i∈S} [∇ log p(x_i|θ) − ∇ log p(x_i|θ̂)]
```

(``r = update_rate``; the log-density estimate is built the same way). The
estimate is unbiased for every anchor, and equals the full-data score exactly
at the anchor (so the call that refreshes returns the exact score). The anchor,
its score and log-density and the call counter live in the estimator state,
which every kernel carries in its results: nothing retraces and the refresh is
a ``tf.cond`` inside the compiled loop. One anchor per chain (the anchor has the
chains' batch shape).

Cost: two minibatch gradients per call plus one full pass every ``r`` calls
(``update_rate`` counts estimator calls: steps for SGLD, SGNHT, BAOAB, ...;
leapfrog steps for SGHMC). SGMCMCJax's ``build_*_SVRG_sampler(..., update_rate)``
is the same estimator with ``update_rate`` counted in iterations.

#### References

[1]: Rie Johnson and Tong Zhang. Accelerating Stochastic Gradient Descent
     using Predictive Variance Reduction. In _NeurIPS_, 2013.
[2]: Avinava Dubey, Sashank J. Reddi, Barnabás Póczos, Alexander J. Smola,
     Eric P. Xing and Sinead A. Williamson. Variance Reduction in Stochastic
     Gradient Langevin Dynamics. In _NeurIPS_, 2016.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from tfp_sgmcmc.estimators.base import GradientEstimate, WrappingEstimator, value_and_gradient_parts
from tfp_sgmcmc.estimators.minibatch import MinibatchEstimator
from tfp_sgmcmc.internal.util import AttributeView, as_parts, check_int, restructure

__all__ = ["SVRGEstimator", "SVRGEstimatorState"]


class SVRGEstimatorState(NamedTuple):
    """What the SVRG estimator carries between calls.

    Attributes:
      batch_state: the base estimator's minibatch state.
      anchor: ``θ̂``, list of parts shaped like the chain state.
      anchor_gradient: the full-data score at ``θ̂`` (list of parts).
      anchor_log_prob: the full-data ``log π(θ̂)`` (the chains' batch shape).
      num_calls: completed estimator calls (int32); the anchor is refreshed
        by the call that finds ``num_calls mod update_rate == 0``.
    """

    batch_state: Any
    anchor: list
    anchor_gradient: list
    anchor_log_prob: tf.Tensor
    num_calls: tf.Tensor


class SVRGEstimator(WrappingEstimator):
    """Control-variate minibatch gradients around an anchor refreshed every ``update_rate`` calls.

    Args:
      base: the `MinibatchEstimator` whose model, data and batch size are used.
      update_rate: ``r``, a positive Python int: the anchor moves to the
        current state (one full pass) on calls ``0, r, 2r, ...``.

    Raises:
      ValueError: ``base`` is not a ``MinibatchEstimator``; ``update_rate`` is
        not a positive int.

    #### Examples

    SVRG on the reference logistic regression, whose ``estimator(batch_size)`` is a
    ``MinibatchEstimator``:

    ```python
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.models.logistic_regression import logistic_regression

    problem = logistic_regression(num_examples=5_000, num_features=3)
    est = sg.SVRGEstimator(problem.estimator(batch_size=100), update_rate=1000)
    kernel = sg.SGLD(est, step_size=1e-4)  # SGLD-SVRG; sg.SGHMC(est, ...) is SGHMC-SVRG
    ```
    """

    gradient_evaluations_per_call = 2

    def __init__(self, base: MinibatchEstimator, update_rate: int) -> None:
        super().__init__(base, MinibatchEstimator)
        self._update_rate = check_int(update_rate, "update_rate", minimum=1)

    update_rate = AttributeView[int]("_update_rate")

    def with_batch_size(self, batch_size: int) -> SVRGEstimator:
        return SVRGEstimator(self._base.with_batch_size(batch_size), self._update_rate)

    def bootstrap(self, state: Any) -> SVRGEstimatorState:
        """The anchor at ``state`` (one full pass): the anchor of call 0.

        The kernel's ``bootstrap_results`` makes call 0 at this same state, so
        computing the anchor here rather than in call 0 changes no value and
        gives the anchor its shapes (one per chain) for the compiled loop.
        """
        parts = as_parts(state)
        full = self._base.full_log_prob_and_gradient(state)
        return SVRGEstimatorState(
            batch_state=self._base.bootstrap(state),
            anchor=list(parts),
            anchor_gradient=list(full.grads_target_log_prob),
            anchor_log_prob=full.target_log_prob,
            num_calls=tf.constant(0, tf.int32),
        )

    def _estimate(
        self, state: Any, estimator_state: SVRGEstimatorState, seed: tf.Tensor
    ) -> tuple[GradientEstimate, SVRGEstimatorState]:
        b = self._base
        parts = as_parts(state)
        st = estimator_state

        def refresh() -> tuple:
            full = b.full_log_prob_and_gradient(state)
            return list(parts), list(full.grads_target_log_prob), full.target_log_prob

        def keep() -> tuple:
            return list(st.anchor), list(st.anchor_gradient), st.anchor_log_prob

        # Call 0's anchor was computed by ``bootstrap`` at the same state.
        due = tf.logical_and(st.num_calls > 0, tf.equal(st.num_calls % self._update_rate, 0))
        anchor, anchor_grad, anchor_lp = tf.cond(due, refresh, keep)
        batch, batch_state = b.sample_batch(st.batch_state, seed)
        anchor_state = restructure(anchor, state)
        # Two minibatch gradients on one batch: at θ and at the anchor θ̂.
        value, grads = value_and_gradient_parts(lambda s: b.log_prob_on_batch(s, batch), state)
        value_hat, grads_hat = value_and_gradient_parts(
            lambda s: b.log_prob_on_batch(s, batch), anchor_state
        )
        out_value = value - value_hat + anchor_lp
        out_grads = [g - gh + c for g, gh, c in zip(grads, grads_hat, anchor_grad)]
        new_state = SVRGEstimatorState(
            batch_state=batch_state,
            anchor=anchor,
            anchor_gradient=anchor_grad,
            anchor_log_prob=anchor_lp,
            num_calls=st.num_calls + 1,
        )
        return GradientEstimate(out_value, out_grads), new_state

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        return self._base.full_log_prob_and_gradient(state)

    def __repr__(self) -> str:
        return f"SVRGEstimator(base={self._base!r}, update_rate={self._update_rate})"
