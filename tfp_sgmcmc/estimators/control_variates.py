r"""Control-variate gradient estimator (SG*-CV) and the MAP helper that centres it.

With a centring value ``θ̂`` (usually the MAP) and its full-data score
``∇ log π(θ̂)`` computed once, every step draws one minibatch ``S`` and uses it
for both terms (Baker, Fearnhead, Fox & Nemeth 2019 [1]; MAMBA paper App. D.3):

$$
\nabla \log \hat\pi(\theta) = \nabla \log \pi(\hat\theta) + \nabla \log p(\theta)
    - \nabla \log p(\hat\theta)
    + \frac{N}{n} \sum_{i \in S} \big[\nabla \log p(x_i \mid \theta)
        - \nabla \log p(x_i \mid \hat\theta)\big]
$$

(the prior terms appear exactly, so only the likelihood is control-varied);
the log-density estimate uses the same construction at order zero. At
``θ = θ̂`` the estimate equals the full-data score exactly, whatever the
batch. Its variance scales with ``‖θ − θ̂‖²`` instead of with ``N``, which is
why SG*-CV reach much lower KSD in the MAMBA paper's Table 1.

Cost: one full pass when the estimator is built, then two minibatch
gradients per step (θ and θ̂ on the same batch). The prior terms at θ̂ cancel
between the minibatch term and the full-data anchor, so the result is exact.

#### References

[1]: Jack Baker, Paul Fearnhead, Emily B. Fox and Christopher Nemeth. Control
     Variates for Stochastic Gradient MCMC. _Statistics and Computing_,
     29: 599-615, 2019. https://doi.org/10.1007/s11222-018-9826-2
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfp_sgmcmc.data.base import BatchState
from tfp_sgmcmc.estimators.base import GradientEstimate, WrappingEstimator, value_and_gradient_parts
from tfp_sgmcmc.estimators.minibatch import MinibatchEstimator
from tfp_sgmcmc.internal.util import AttributeView, as_parts, check_finite_tensor, restructure

__all__ = ["ControlVariateEstimator"]


class ControlVariateEstimator(WrappingEstimator):
    """Minibatch gradients with a control variate centred at ``centering_value``.

    Args:
      base: the [`MinibatchEstimator`][tfp_sgmcmc.estimators.control_variates.MinibatchEstimator]
        whose model, data and batch size
        are used.
      centering_value: ``θ̂``, a state with the structure of the chain state
        but without chain dimensions (one centre shared by all chains).
        Usually [`find_map`][tfp_sgmcmc.estimators.find_map]'s result.
      centering_gradient: optional precomputed full-data score at ``θ̂`` (list of
        parts, one per part of ``centering_value`` with its shape and dtype),
        given together with ``centering_log_prob``; computed with one full
        pass if neither is given. Build the estimator outside ``tf.function``
        so the pass runs once (inside a compiled function it runs once per call).
      centering_log_prob: the full-data ``log π(θ̂)``, a scalar of the centre's
        dtype; see ``centering_gradient``.

    Raises:
      ValueError: ``base`` is not a ``MinibatchEstimator``; the centre has a
        different dtype from the data or contains NaN/Inf; only one of
        ``centering_gradient`` and ``centering_log_prob`` is given, or they
        do not match the centre (number of parts, shape, dtype) or contain
        NaN/Inf.
    """

    gradient_evaluations_per_call = 2

    def __init__(
        self,
        base: MinibatchEstimator,
        centering_value: Any,
        centering_gradient: list[tf.Tensor] | None = None,
        centering_log_prob: tf.Tensor | None = None,
    ) -> None:
        super().__init__(base, MinibatchEstimator)
        centre_parts = as_parts(centering_value)
        base.validate_state(centering_value, "centering_value")
        for i, p in enumerate(centre_parts):
            check_finite_tensor(p, f"centering_value[{i}]")
        self._centre = restructure(centre_parts, centering_value)
        if (centering_gradient is None) != (centering_log_prob is None):
            given, missing = (
                ("centering_gradient", "centering_log_prob")
                if centering_log_prob is None
                else ("centering_log_prob", "centering_gradient")
            )
            raise ValueError(
                f"`{given}` was given without `{missing}`: pass both (the full-data score "
                "and log-density at the centre) or neither (one full pass computes them)."
            )
        if centering_gradient is None:
            try:
                full = base.full_log_prob_and_gradient(self._centre)
            except (tf.errors.InvalidArgumentError, ValueError) as e:
                # Usually a centre whose shape the model does not accept: say which input.
                raise ValueError(
                    "`centering_value`: the full-data log-likelihood failed at it "
                    f"(shape {[p.shape.as_list() for p in centre_parts]}): {e}"
                ) from e
            # Checked eagerly only (the estimator may be built inside a tf.function).
            finite = tf.reduce_all(tf.math.is_finite(full.target_log_prob))
            if tf.executing_eagerly() and not bool(finite):
                raise ValueError("`centering_value`: the full-data log-density is not finite.")
            centering_log_prob = full.target_log_prob
            centering_gradient = full.grads_target_log_prob
            self._centre_grad = [tf.convert_to_tensor(g) for g in centering_gradient]
            self._centre_log_prob = tf.convert_to_tensor(centering_log_prob)
        else:
            self._centre_grad, self._centre_log_prob = _checked_centre_score(
                centre_parts, centering_gradient, centering_log_prob
            )

    centering_value = AttributeView[Any]("_centre")

    centering_gradient = AttributeView[list[tf.Tensor]]("_centre_grad")

    centering_log_prob = AttributeView[tf.Tensor]("_centre_log_prob")
    """The full-data ``log π(θ̂)`` (used by wrappers such as the structured energies)."""

    def with_batch_size(self, batch_size: int) -> ControlVariateEstimator:
        return ControlVariateEstimator(
            self._base.with_batch_size(batch_size),
            self._centre,
            centering_gradient=self._centre_grad,
            centering_log_prob=self._centre_log_prob,
        )

    independent_chains = AttributeView[bool]("_base.independent_chains")
    """Whether each chain draws its own minibatch (the base estimator's setting)."""

    def with_independent_chains(self, independent_chains: bool = True) -> ControlVariateEstimator:
        """The same estimator with per-chain (or shared) minibatches."""
        return ControlVariateEstimator(
            self._base.with_independent_chains(independent_chains),
            self._centre,
            centering_gradient=self._centre_grad,
            centering_log_prob=self._centre_log_prob,
        )

    def bootstrap(self, state: Any) -> BatchState:
        return self._base.bootstrap(state)

    def _estimate(
        self, state: Any, estimator_state: BatchState, seed: tf.Tensor
    ) -> tuple[GradientEstimate, BatchState]:
        batch, new_state = self._base.sample_batch(estimator_state, seed)
        b = self._base
        # Two minibatch gradients on one batch: at θ (with the prior) and at θ̂.
        value, grads = value_and_gradient_parts(lambda s: b.log_prob_on_batch(s, batch), state)
        centre = self._centre
        chain_shape = estimator_state.position.shape.as_list() if b.independent_chains else []
        if chain_shape:
            # Per-chain batches: θ̂ is evaluated on each chain's own rows.
            centre = restructure(
                [tf.broadcast_to(c, [*chain_shape, *c.shape]) for c in as_parts(centre)],
                centre,
            )
        value_hat, grads_hat = value_and_gradient_parts(
            lambda s: b.log_prob_on_batch(s, batch), centre
        )
        out_value = value - value_hat + self._centre_log_prob
        out_grads = [g - gh + c for g, gh, c in zip(grads, grads_hat, self._centre_grad)]
        return GradientEstimate(out_value, out_grads), new_state

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        return self._base.full_log_prob_and_gradient(state)

    def __repr__(self) -> str:
        return f"ControlVariateEstimator(base={self._base!r})"


def _checked_centre_score(
    centre_parts: list[tf.Tensor], gradient: Any, log_prob: Any
) -> tuple[list[tf.Tensor], tf.Tensor]:
    """A user-supplied score and log-density at the centre as tensors, refused unless
    they match the centre part for part: a mismatched part would otherwise broadcast
    into the estimate (or drop a state part) without an error."""
    grad_parts = as_parts(gradient)
    if len(grad_parts) != len(centre_parts):
        raise ValueError(
            f"`centering_gradient` has {len(grad_parts)} part(s) but `centering_value` has "
            f"{len(centre_parts)}: pass one gradient part per state part."
        )
    grads = []
    for i, (g, c) in enumerate(zip(grad_parts, centre_parts)):
        try:
            g = tf.convert_to_tensor(g, dtype_hint=c.dtype)
        except (TypeError, ValueError) as e:
            raise ValueError(f"`centering_gradient[{i}]` is not a tensor: {e}") from e
        if g.dtype != c.dtype:
            raise ValueError(
                f"`centering_gradient[{i}]` has dtype {g.dtype.name} but `centering_value[{i}]` "
                f"has dtype {c.dtype.name}."
            )
        if not g.shape.is_compatible_with(c.shape):
            raise ValueError(
                f"`centering_gradient[{i}]` has shape {g.shape} but `centering_value[{i}]` has "
                f"shape {c.shape}: the score must have the shape of its state part."
            )
        check_finite_tensor(g, f"centering_gradient[{i}]")
        grads.append(g)
    dtype = centre_parts[0].dtype
    try:
        lp = tf.convert_to_tensor(log_prob, dtype_hint=dtype)
    except (TypeError, ValueError) as e:
        raise ValueError(f"`centering_log_prob` is not a number: {e}") from e
    if lp.dtype != dtype:
        raise ValueError(
            f"`centering_log_prob` has dtype {lp.dtype.name} but the centre has {dtype.name}."
        )
    if lp.shape.rank not in (None, 0):
        raise ValueError(f"`centering_log_prob` must be a scalar, got shape {lp.shape}.")
    check_finite_tensor(lp, "centering_log_prob")
    return grads, lp
