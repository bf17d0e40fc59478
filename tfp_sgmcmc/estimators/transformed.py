"""Constrained parameters: any gradient estimator seen through a bijector.

A sampler that runs on an unconstrained ``z`` with ``θ = f(z)`` (``f`` a
``tfp.bijectors.Bijector``, e.g. ``Exp`` or ``Softplus`` for a positive scale)
targets the pulled-back density

```none
log π_z(z) = log π(f(z)) + log |det ∂f/∂z|
∇_z log π_z(z) = (∂f/∂z)^T ∇_θ log π(θ)|_{θ=f(z)} + ∇_z log |det ∂f/∂z|
```

(change of variables; the same convention as
``tfp.mcmc.TransformedTransitionKernel``: ``forward`` maps the sampler's space
to the model's). `TransformedEstimator` applies it to the *estimate* of
any inner estimator: the inner estimator sees ``θ = f(z)`` and returns
``log π̃(θ)`` and ``∇_θ log π̃(θ)`` (minibatch, control variates, structured,
distributed, ...); the chain rule is one vector-Jacobian product, so
``E[∇_z log π̃_z] = ∇_z log π_z`` whenever the inner estimate is unbiased, and
the log-det-Jacobian term is exact (it involves no data). This is the one
place where the change of variables happens; the drop-in
`tfp_sgmcmc.kernels.TransformedTransitionKernel` and the
JointDistribution bridge (`tfp_sgmcmc.joint`) both use it.

See ``docs/tfp_models.md``.

#### References

[1]: Joshua V. Dillon et al. TensorFlow Distributions. _arXiv:1711.10604_,
     2017 (bijectors and the ``forward``/``log_det_jacobian`` convention).
[2]: Bob Carpenter et al. Stan: a probabilistic programming language.
     _Journal of Statistical Software_, 76(1), 2017 (sampling constrained
     parameters on the unconstrained scale with the Jacobian adjustment).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow_probability.python.mcmc.transformed_kernel import (
    make_log_det_jacobian_fn,
    make_transform_fn,
)

from tfp_sgmcmc.estimators.base import (
    ChangeOfVariablesEstimator,
    GradientEstimate,
    GradientEstimator,
)
from tfp_sgmcmc.internal.util import AttributeView, as_parts, restructure

__all__ = ["TransformedEstimator"]


def _is_bijector_like(b: Any) -> bool:
    return all(hasattr(b, a) for a in ("forward", "inverse", "forward_log_det_jacobian"))


def _check_bijector(bijector: Any) -> None:
    items = bijector if isinstance(bijector, (list, tuple)) else [bijector]
    if not items or not all(_is_bijector_like(b) for b in items):
        raise TypeError(
            "`bijector` must be a tfp.bijectors.Bijector (one for a single-tensor state, or a "
            "list-structured multipart bijector) or a list of Bijectors, one per state part; "
            f"got {bijector!r}."
        )


class TransformedEstimator(ChangeOfVariablesEstimator):
    r"""A gradient estimator on the unconstrained space ``z``, with ``θ = f(z)``.

    Given an inner estimator of ``log π(θ)`` and its score, returns

    ```none
    log π̃_z(z) = log π̃(f(z)) + log |det J_f(z)|
    ∇_z log π̃_z(z) = J_f(z)^T ∇_θ log π̃(θ)|_{θ=f(z)} + ∇_z log |det J_f(z)|
    ```

    The inner estimator is called once per call, at ``θ = f(z)``, with the
    seed and estimator state it would get without the transform, so the
    minibatch sequence is unchanged; its estimator state (batch position,
    control-variate anchor, structured history, all in ``θ`` space) is
    carried as is.

    Args:
      estimator: the inner `tfp_sgmcmc.estimators.GradientEstimator`,
        written in the constrained space ``θ``.
      bijector: ``f``: a ``tfp.bijectors.Bijector`` (for a single-tensor
        state, or a multipart bijector acting on a list of parts) or a list of
        bijectors, one per state part, exactly as
        ``tfp.mcmc.TransformedTransitionKernel`` takes it.
      include_log_det_jacobian: add ``log |det J_f|``. ``False`` gives the
        density of ``θ`` evaluated at ``f(z)`` without the volume change: its
        maximiser is ``f^{-1}`` of the MAP of ``θ`` (used for MAP search), but
        sampling it targets the wrong law. Default value: ``True``.

    Raises:
      TypeError: ``estimator`` is not a ``GradientEstimator`` or ``bijector``
        is not bijector-like.
    """

    def __init__(
        self,
        estimator: GradientEstimator,
        bijector: Any,
        include_log_det_jacobian: bool = True,
    ) -> None:
        if not isinstance(estimator, GradientEstimator):
            raise TypeError(
                f"`estimator` must be a GradientEstimator, got {type(estimator).__name__}."
            )
        _check_bijector(bijector)
        # The wrapped estimator (``base``) gives the data's dtype, N and n.
        super().__init__(estimator)
        self._bijector = bijector
        if not isinstance(include_log_det_jacobian, (bool, np.bool_)):
            # bool() would read None or 0.0 as False (dropping the Jacobian: another law)
            # and "False" as True.
            raise ValueError(
                "`include_log_det_jacobian` must be a bool, got "
                f"{include_log_det_jacobian!r}."
            )
        self._include_ldj = bool(include_log_det_jacobian)
        # TFP's own helpers, so the semantics are exactly TransformedTransitionKernel's.
        self._forward = make_transform_fn(bijector, "forward")
        self._inverse = make_transform_fn(bijector, "inverse")
        self._fldj = make_log_det_jacobian_fn(bijector, "forward")
        self.gradient_evaluations_per_call = estimator.gradient_evaluations_per_call

    # -- configuration ----------------------------------------------------- #
    estimator = AttributeView[GradientEstimator]("_base")
    """The inner (constrained-space) estimator, ``base``."""

    bijector = AttributeView[Any]("_bijector")

    include_log_det_jacobian = AttributeView[bool]("_include_ldj")

    def with_batch_size(self, batch_size: int) -> TransformedEstimator:
        """The same transform around the inner estimator's ``with_batch_size(batch_size)``."""
        if not hasattr(self._base, "with_batch_size"):
            raise AttributeError(
                f"the inner {type(self._base).__name__} has no `with_batch_size`."
            )
        return self._around(self._base.with_batch_size(batch_size))  # type: ignore[attr-defined]

    def _around(self, inner: GradientEstimator) -> TransformedEstimator:
        """This transform around another inner estimator."""
        return TransformedEstimator(
            inner, self._bijector, include_log_det_jacobian=self._include_ldj
        )

    @property
    def independent_chains(self) -> bool | None:
        """Whether the inner estimator draws one minibatch per chain (``None`` when it
        does not say, e.g. a noisy-gradient estimator with no minibatches)."""
        value = getattr(self._base, "independent_chains", None)
        return None if value is None else bool(value)

    def with_independent_chains(self, independent_chains: bool = True) -> TransformedEstimator:
        """The same transform around the inner estimator with per-chain (or shared) batches.

        Raises:
          ValueError: the inner estimator has no per-chain batches.
        """
        if not hasattr(self._base, "with_independent_chains"):
            raise ValueError(
                f"the inner {type(self._base).__name__} has no `with_independent_chains`."
            )
        return self._around(
            self._base.with_independent_chains(independent_chains)  # type: ignore[attr-defined]
        )

    def chain_shape(self, state: Any) -> list[int]:
        """The chains' batch shape of ``state``, read by the inner estimator at ``f(state)``
        (``[]`` when the inner estimator cannot tell)."""
        if not hasattr(self._base, "chain_shape"):
            return []
        return self._base.chain_shape(self.forward(state))  # type: ignore[attr-defined]

    # -- the change of variables ------------------------------------------- #
    def forward(self, state: Any) -> Any:
        """``θ = f(z)`` in the structure of ``state``."""
        return restructure(list(self._forward(as_parts(state))), state)

    def inverse(self, state: Any) -> Any:
        """``z = f^{-1}(θ)`` in the structure of ``state``."""
        return restructure(list(self._inverse(as_parts(state))), state)

    def _pull_back(self, state: Any, evaluate: Any) -> tuple[GradientEstimate, Any]:
        """Evaluate the inner estimate at ``f(z)`` and pull it back to ``z``."""
        # Fresh tensors defeat the bijectors' forward/inverse cache, which would
        # otherwise hand back a θ (or log-det) computed off this tape (TFP's
        # TransformedTransitionKernel does the same: enable_bijector_caching=False).
        parts = [tf.identity(p) for p in as_parts(state)]
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(parts)
            theta = list(self._forward(list(parts)))
            with tape.stop_recording():
                # The inner estimator differentiates w.r.t. θ itself; nothing of it
                # needs to be on this tape.
                est, extra = evaluate(restructure(theta, state))
            batch_ndims = est.target_log_prob.shape.rank
            if batch_ndims is None:
                raise ValueError("the inner estimate's `target_log_prob` has unknown rank.")
            if self._include_ldj:
                event_ndims = [p.shape.rank - batch_ndims for p in parts]
                ldj = self._fldj(list(parts), event_ndims)
            else:
                ldj = tf.zeros([], parts[0].dtype)
        grads = tape.gradient(
            theta + [ldj],
            parts,
            output_gradients=list(est.grads_target_log_prob) + [tf.ones_like(ldj)],
        )
        grads = [tf.zeros_like(p) if g is None else g for g, p in zip(grads, parts)]
        return GradientEstimate(est.target_log_prob + ldj, grads), extra

    # -- protocol ------------------------------------------------------------ #
    def bootstrap(self, state: Any) -> Any:
        return self._base.bootstrap(self.forward(state))

    def validate_state(self, state: Any, arg_name: str = "init_state") -> None:
        self._base.validate_state(state, arg_name)

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        """Exact ``log π_z(z)`` and its score (the inner full-data estimate, pulled back)."""
        return super().full_log_prob_and_gradient(state)

    def __repr__(self) -> str:
        jac = "" if self._include_ldj else ", include_log_det_jacobian=False"
        return f"TransformedEstimator({self._base!r}, bijector={self._bijector!r}{jac})"
