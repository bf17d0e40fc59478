r"""A posterior's score from a fixed subset of its rows, anchored at a centre.

The Stein discrepancies that rank a tuner's arms need the full-data score
``∇ log π(θ)`` at every sample they see; on ``N`` in the tens of thousands that is
an epoch of gradients per sample. With a fixed random subset ``S`` of ``n`` rows,
scaled by ``N/n``, and the exact score at one centre ``θ̂`` (usually the MAP),

$$
\nabla \log \tilde\pi(\theta) = \nabla \log \pi(\hat\theta)
    + \nabla \log p(\theta) - \nabla \log p(\hat\theta)
    + \frac{N}{n} \sum_{i \in S} \big[\nabla \log p(x_i \mid \theta)
        - \nabla \log p(x_i \mid \hat\theta)\big],
$$

the control variate of Baker, Fearnhead, Fox & Nemeth [1] with one batch, ``S``,
drawn once and kept. It is exact at ``θ̂`` and deterministic, and its error grows
with ``‖θ − θ̂‖`` rather than with ``N/n``: a subset scaled up without the anchor
adds a score error of order ``√(N/n)`` posterior standard deviations per
coordinate, which swamps a Stein discrepancy; anchored, the error is the spread
of the per-example curvatures over ``S`` times the distance to ``θ̂``.
``log π̃`` is built the same way at order zero. Cost: ``n`` rows per score (one
pass over ``S``) and, once, the full-data score at ``θ̂`` and ``S``'s at ``θ̂``.

Used by ``tfp_sgmcmc.keras.BayesianModel``'s tuning (docs/keras.md, "Tuning the
sampler with MAMBA").

#### References

[1]: Jack Baker, Paul Fearnhead, Emily B. Fox and Christopher Nemeth. Control
     Variates for Stochastic Gradient MCMC. _Statistics and Computing_,
     29: 599-615, 2019.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator, WrappingEstimator
from tfp_sgmcmc.estimators.minibatch import MinibatchEstimator
from tfp_sgmcmc.internal.util import as_parts, check_finite_tensor, restructure

__all__ = ["AnchoredSubsetEstimator"]


class AnchoredSubsetEstimator(WrappingEstimator):
    """The score of ``full``'s posterior from ``subset``'s rows, exact at a centre
    (module docstring).

    Args:
      subset: a [`MinibatchEstimator`][tfp_sgmcmc.MinibatchEstimator] on the subset's
        rows whose log-likelihood is already scaled by ``N/n`` (for example per-row
        weights ``N/n``), with the posterior's prior: its full-data ``log π_S`` is
        ``log p(θ) + (N/n) Σ_{i∈S} log p(x_i | θ)``.
      full: the posterior's estimator on all ``N`` rows, whose full-data score at the
        centre anchors the estimate (one full pass, here, unless ``anchor`` is given).
      centering_value: ``θ̂``, a state without chain dimensions.
      anchor: ``full.full_log_prob_and_gradient(centering_value)`` computed already
        (a control-variate estimator at the same centre needs it too). Default value:
        ``None`` (computed here).

    Raises:
      ValueError: ``subset`` is not a ``MinibatchEstimator``, ``full`` not an
        estimator, or a non-finite centre or full-data log-density there.
    """

    def __init__(
        self,
        subset: MinibatchEstimator,
        full: GradientEstimator,
        centering_value: Any,
        anchor: GradientEstimate | None = None,
    ) -> None:
        super().__init__(subset, MinibatchEstimator)
        if not isinstance(full, GradientEstimator):
            raise ValueError(f"`full` must be a GradientEstimator, got {type(full).__name__}.")
        parts = as_parts(centering_value)
        for i, p in enumerate(parts):
            check_finite_tensor(p, f"centering_value[{i}]")
        centre = restructure(parts, centering_value)
        if anchor is None:
            anchor = full.full_log_prob_and_gradient(centre)
        at_centre = subset.full_log_prob_and_gradient(centre)
        if tf.executing_eagerly() and not bool(
            tf.math.is_finite(anchor.target_log_prob - at_centre.target_log_prob)
        ):
            raise ValueError("`centering_value`: the log-density there is not finite.")
        # log π(θ̂) − log π_S(θ̂) and its score: the constant the subset's estimate is moved by.
        self._offset = GradientEstimate(
            anchor.target_log_prob - at_centre.target_log_prob,
            [a - s for a, s in zip(anchor.grads_target_log_prob, at_centre.grads_target_log_prob)],
        )

    def _shifted(self, est: GradientEstimate) -> GradientEstimate:
        off = self._offset
        return GradientEstimate(
            est.target_log_prob + off.target_log_prob,
            [g + o for g, o in zip(est.grads_target_log_prob, off.grads_target_log_prob)],
        )

    def bootstrap(self, state: Any) -> Any:
        return self._base.bootstrap(state)

    def _estimate(self, state: Any, estimator_state: Any, seed: tf.Tensor) -> Any:
        est, new_state = self._base(state, estimator_state, seed)
        return self._shifted(est), new_state

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        """``log π̃`` and its score (module docstring): one pass over the subset."""
        return self._shifted(self._base.full_log_prob_and_gradient(state))

    def __repr__(self) -> str:
        return f"AnchoredSubsetEstimator(subset={self._base!r})"
