r"""A gradient estimator for ``Q1(β)`` whose prior reads the SSGL latents from its state.

The inner SG kernel of the SA samplers (``kernels/stochastic_approximation.py``)
samples ``β`` from ``Q1(β)`` (``docs/algorithms.md#ssgl-objective``), whose prior part depends
on the latent variables ``θ = (ρ, κ0, κ1, δ, σ)`` that change every step. So that
new latent values flow into the energy **without retracing** and with **one
gradient evaluation per step**, this estimator keeps ``θ`` in its estimator
state (which every SG kernel carries in its results and passes back on the next
call) and caches the likelihood part of its last evaluation:

```none
estimator_state = (batch_state, latents, lik_value, lik_grads, sse)
estimate(β) = lik(β; σ) + log_prior_SSGL(β_sparse; θ) + log N(β_dense; 0, σ0²)
```

* regression (``residual_fn`` given): ``lik = −I/(2σ²) − N log σ − (N/2) log 2π``
  with ``I = (N/n) Σ_{i∈B} r_i²`` (Gaussian noise of variance σ², as the authors'
  R code), so the likelihood gradient is the cached unit-variance gradient
  divided by σ², and ``I`` (needed by the σ update (14)) comes from the same
  minibatch;
* classification (``log_likelihood_fn`` given): ``lik = (N/n) Σ_{i∈B} log p(y_i | x_i, β)``.

The N/n scaling is done by an internal
[`MinibatchEstimator`][tfp_sgmcmc.estimators.MinibatchEstimator]
(the only place that knows it). After the SA wrapper has updated ``θ`` it calls
[`SSGLEstimator.refresh`][tfp_sgmcmc.priors.estimator.SSGLEstimator.refresh], which re-assembles
the estimate at the same ``β``
and the same minibatch from the cached likelihood pieces and the closed-form
prior gradient: no new likelihood gradient is computed, and the score the inner
kernel caches for its next move is exactly ``∇Q̃1(β_{k+1}; θ_{k+1})`` (the order
of the authors' code: sample β with θ_k, update θ, next gradient with θ_{k+1}).

#### References

[1]: Wei Deng, Xiao Zhang, Faming Liang and Guang Lin. An Adaptive Empirical
     Bayesian Method for Sparse Deep Learning. In _NeurIPS_, 2019.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.data import DataSource
from tfp_sgmcmc.estimators.base import (
    GradientEstimate,
    WrappingEstimator,
    value_and_gradient_parts,
)
from tfp_sgmcmc.estimators.minibatch import MinibatchEstimator
from tfp_sgmcmc.internal.util import (
    AttributeView,
    PrettyNamedTupleMixin,
    as_parts,
    cast_param,
    check_in_interval,
    check_int,
    check_positive,
)
from tfp_sgmcmc.priors.ssgl import SpikeAndSlabGroupLasso, SSGLLatents

__all__ = ["SSGLEstimator", "SSGLEstimatorState"]


class SSGLEstimatorState(
    PrettyNamedTupleMixin,
    collections.namedtuple(
        "SSGLEstimatorState",
        [
            "batch_state",  # the data source's minibatch state
            "latents",  # SSGLLatents θ = (ρ, κ0, κ1, δ, σ)
            "lik_value",  # last (N/n)-scaled log-likelihood at unit σ (regression: −I/2)
            "lik_grads",  # its gradient, list over all state parts
            "sse",  # I = (N/n) Σ r² on the last batch (regression; zeros otherwise)
        ],
    ),
):
    __slots__ = ()


class SSGLEstimator(WrappingEstimator):
    r"""Minibatch estimate of ``Q1(β)`` with the SSGL prior on chosen state parts.

    Give exactly one of ``residual_fn`` (regression: Gaussian likelihood with
    variance σ², the σ update uses the regression form (14)) or
    ``log_likelihood_fn`` (any other likelihood; classification form of (14)).

    Args:
      prior: a [`SpikeAndSlabGroupLasso`][tfp_sgmcmc.priors.SpikeAndSlabGroupLasso]; its
        ``sigma_form`` must match the likelihood given.
      data: arrays, an ``InMemoryData`` or a ``DatasetData``.
      batch_size: ``n`` in ``[1, N]``.
      residual_fn: ``(state, batch) -> y − f(x; β)`` per example, shape
        ``batch_shape + [n]``. Default value: ``None``.
      log_likelihood_fn: ``(state, batch) -> log p(y_i | x_i, β)`` per example.
        Default value: ``None``.
      sparse_parts: one bool per state part: ``True`` puts the SSGL prior on
        that part (e.g. weights), ``False`` the fixed ``N(0, σ0²)`` prior (e.g.
        biases). Default value: ``None`` (every part is sparse).
      dense_prior_scale: ``σ0 > 0`` of the non-sparse parts, or ``None`` for a
        flat prior on them. Default value: ``None``.
      batch_ndims: number of leading chain dimensions of every part (the
        latents get the same leading dims): ``0`` for a single chain, ``1``
        for a state of shape ``[C, ...]`` holding ``C`` chains. Default value: ``0``.
      initial_latents: initial values of the latents θ by name (the keywords of
        ``SpikeAndSlabGroupLasso.initial_latents``): ``"rho"`` (inclusion
        probability ρ in ``[0, 1]``), ``"kappa0"`` and ``"kappa1"`` (spike and slab
        penalties, ``≥ 0``), ``"delta"`` (sparsity δ in ``(0, 1)``), ``"sigma"``
        (scale σ ``> 0``), for example
        ``{"kappa0": 0.0, "sigma": 2.0}``. A name left out keeps its default,
        ρ = δ = 0.5 and κ0 = κ1 = σ = 1 (the authors' R code's). Default value:
        ``None`` (every default).
      independent_chains: one minibatch per chain (see
        [`MinibatchEstimator`][tfp_sgmcmc.MinibatchEstimator]), so chains with
        leading batch dimensions are independent. Default value: ``False``.

    Raises:
      ValueError: both or neither likelihood given; ``sigma_form`` mismatch;
        ``sparse_parts`` with no ``True``; bad initial values. When the
        estimate is first computed (a kernel's ``bootstrap_results``): a state
        with more leading chain dimensions than ``batch_ndims``.
    """

    def __init__(
        self,
        prior: SpikeAndSlabGroupLasso,
        data: DataSource | Any,
        batch_size: int,
        residual_fn: Callable[[Any, Any], tf.Tensor] | None = None,
        log_likelihood_fn: Callable[[Any, Any], tf.Tensor] | None = None,
        sparse_parts: Sequence[bool] | None = None,
        dense_prior_scale: Any = None,
        batch_ndims: int = 0,
        initial_latents: Mapping[str, Any] | None = None,
        independent_chains: bool = False,
    ) -> None:
        if not isinstance(prior, SpikeAndSlabGroupLasso):
            raise ValueError(
                f"`prior` must be a SpikeAndSlabGroupLasso, got {type(prior).__name__}."
            )
        if (residual_fn is None) == (log_likelihood_fn is None):
            raise ValueError(
                "Give exactly one of `residual_fn` (regression) or `log_likelihood_fn`."
            )
        self._regression = residual_fn is not None
        want = "regression" if self._regression else "classification"
        if prior.sigma_form != want:
            raise ValueError(
                f"`prior` has sigma_form={prior.sigma_form!r} but the likelihood given needs "
                f"{want!r} (`residual_fn` ⇔ regression, `log_likelihood_fn` ⇔ classification)."
            )
        if sparse_parts is not None:
            sparse_parts = [bool(s) for s in sparse_parts]
            if not any(sparse_parts):
                raise ValueError("`sparse_parts` must mark at least one part as sparse.")
        if dense_prior_scale is not None:
            check_positive(dense_prior_scale, "dense_prior_scale")
        # NumPy integers (e.g. from a config array) are ints too; bools are not.
        batch_ndims = check_int(batch_ndims, "batch_ndims", minimum=0)
        initial_latents = _check_initial_latents(initial_latents)
        if self._regression:
            fn = residual_fn

            def unit_loglik(state: Any, batch: Any) -> tf.Tensor:
                # Unit-variance Gaussian kernel −r²/2: its (N/n)-scaled sum is −I/2.
                return -0.5 * tf.square(fn(state, batch))

            log_lik = unit_loglik
        else:
            log_lik = log_likelihood_fn
        # The wrapped estimator is the prior-free likelihood; N, n and the dtype are its.
        super().__init__(
            MinibatchEstimator(log_lik, data, batch_size, independent_chains=independent_chains)
        )
        self._prior = prior
        self._sparse = sparse_parts
        self._dense_scale = dense_prior_scale
        self._batch_ndims = batch_ndims
        self._init = initial_latents

    # -- configuration ---------------------------------------------------- #
    prior = AttributeView[SpikeAndSlabGroupLasso]("_prior")

    likelihood_estimator = AttributeView[MinibatchEstimator]("_base")
    """The prior-free minibatch estimator of the (unit-σ) likelihood."""

    is_regression = AttributeView[bool]("_regression")

    batch_ndims = AttributeView[int]("_batch_ndims")

    independent_chains = AttributeView[bool]("_base.independent_chains")
    """Whether each chain draws its own minibatch."""

    def sparse_mask(self, num_parts: int) -> list[bool]:
        """Which of ``num_parts`` state parts carry the SSGL prior."""
        if self._sparse is None:
            return [True] * num_parts
        return list(self._sparse)

    def split_parts(self, parts: Sequence[tf.Tensor]) -> tuple[list[tf.Tensor], list[tf.Tensor]]:
        """``(sparse parts, dense parts)`` in their original order."""
        mask = self.sparse_mask(len(parts))
        return [p for p, m in zip(parts, mask) if m], [p for p, m in zip(parts, mask) if not m]

    def validate_state(self, state: Any, arg_name: str = "init_state") -> None:
        super().validate_state(state, arg_name)
        parts = as_parts(state)
        if self._sparse is not None and len(self._sparse) != len(parts):
            raise ValueError(
                f"`sparse_parts` has {len(self._sparse)} entries but `{arg_name}` has "
                f"{len(parts)} parts."
            )
        for p in parts:
            if p.shape.rank is None or p.shape.rank < self._batch_ndims:
                raise ValueError(
                    f"`{arg_name}` parts need a static rank ≥ batch_ndims={self._batch_ndims}."
                )

    # -- the energy -------------------------------------------------------- #
    def initial_latents(self, state: Any) -> SSGLLatents:
        sparse, _ = self.split_parts(as_parts(state))
        return self._prior.initial_latents(sparse, self._batch_ndims, **self._init)

    def assemble(self, state: Any, estimator_state: SSGLEstimatorState) -> GradientEstimate:
        """``Q̃1`` and its gradient from the cached likelihood pieces and the latents."""
        parts = as_parts(state)
        lat = estimator_state.latents
        sigma = lat.sigma
        dtype = sigma.dtype
        nb = self._batch_ndims
        lik_grads = list(estimator_state.lik_grads)
        if self._regression:
            n_total = tf.constant(float(self.num_examples), dtype)
            s2 = tf.square(sigma)
            value = (
                estimator_state.lik_value / s2
                - n_total * tf.math.log(sigma)
                - 0.5 * n_total * math.log(2 * math.pi)
            )
            lik_grads = [g / self._prior._expand(s2, g, nb) for g in lik_grads]
        else:
            value = estimator_state.lik_value
        sparse, dense = self.split_parts(parts)
        value = value + self._prior.log_prior(sparse, lat, nb)
        prior_grads = iter(self._prior.grad_log_prior(sparse, lat, nb))
        grads = []
        for p, g, m in zip(parts, lik_grads, self.sparse_mask(len(parts))):
            if m:
                grads.append(g + next(prior_grads))
            elif self._dense_scale is not None:
                s0 = cast_param(self._dense_scale, dtype)
                value = value - tf.reduce_sum(tf.square(p), list(range(nb, p.shape.rank))) / (
                    2 * s0 * s0
                )
                grads.append(g - p / (s0 * s0))
            else:
                grads.append(g)
        return GradientEstimate(value, grads)

    def refresh(self, state: Any, estimator_state: SSGLEstimatorState) -> GradientEstimate:
        """The estimate at ``state`` for new latents, reusing the cached likelihood
        (same ``β``, same minibatch; no likelihood gradient is computed)."""
        return self.assemble(state, estimator_state)

    # -- protocol ------------------------------------------------------------ #
    def bootstrap(self, state: Any) -> SSGLEstimatorState:
        parts = as_parts(state)
        batch_shape = tf.shape(parts[0])[: self._batch_ndims]
        zeros = tf.zeros(batch_shape, parts[0].dtype)
        return SSGLEstimatorState(
            batch_state=self._base.bootstrap(state),
            latents=self.initial_latents(state),
            lik_value=zeros,
            lik_grads=[tf.zeros_like(p) for p in parts],
            sse=zeros,
        )

    def _estimate(
        self, state: Any, estimator_state: SSGLEstimatorState, seed: tf.Tensor
    ) -> tuple[GradientEstimate, SSGLEstimatorState]:
        batch, batch_state = self._base.sample_batch(estimator_state.batch_state, seed)
        n = self._base.batch_size
        value, grads = value_and_gradient_parts(
            lambda s: self._base.scaled_log_likelihood(s, batch, n), state
        )
        self._check_chain_rank(value, state)
        value = tf.broadcast_to(value, tf.shape(estimator_state.lik_value))
        sse = -2.0 * value if self._regression else tf.zeros_like(value)
        new_state = SSGLEstimatorState(batch_state, estimator_state.latents, value, grads, sse)
        return self.assemble(state, new_state), new_state

    def full_log_prob_and_gradient(
        self, state: Any, latents: SSGLLatents | None = None
    ) -> GradientEstimate:
        """``Q1`` on all the data at fixed ``latents`` (default: the initial ones)."""
        full = self._base.full_log_prob_and_gradient(state)
        self._check_chain_rank(full.target_log_prob, state)
        lat = self.initial_latents(state) if latents is None else latents
        value = tf.broadcast_to(full.target_log_prob, tf.shape(lat.sigma))
        est_state = SSGLEstimatorState((), lat, value, full.grads_target_log_prob, -2.0 * value)
        return self.assemble(state, est_state)

    def _check_chain_rank(self, value: tf.Tensor, state: Any) -> None:
        """``ValueError`` naming ``batch_ndims`` if the likelihood has more chain dims."""
        rank = value.shape.rank
        if rank is not None and rank > self._batch_ndims:
            shape = as_parts(state)[0].shape.as_list()
            raise ValueError(
                f"`batch_ndims` is {self._batch_ndims} but the state (first part of shape "
                f"{shape}) has {rank} leading chain dimension(s): the likelihood returns one "
                f"value per chain, of shape {value.shape.as_list()}. Set `batch_ndims` of the "
                "SSGLEstimator to the number of leading chain dimensions of the state "
                f"(here {rank}), so that every chain gets its own latents."
            )

    def __repr__(self) -> str:
        kind = "regression" if self._regression else "classification"
        return (
            f"SSGLEstimator({kind}, prior={self._prior!r}, N={self.num_examples}, "
            f"batch_size={self._base.batch_size}, sparse_parts={self._sparse})"
        )


def _check_initial_latents(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """``initial_latents`` as a dict, each given value checked against its range."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise ValueError(
            f"`initial_latents` must be a dict of initial values by name, got "
            f"{type(values).__name__}."
        )
    unknown = sorted(set(values) - {"rho", "kappa0", "kappa1", "delta", "sigma"})
    if unknown:
        raise ValueError(
            f"`initial_latents` has unknown names {unknown}: use rho, kappa0, kappa1, delta, "
            "sigma."
        )
    for key, v in values.items():
        name = f"initial_latents['{key}']"
        if key == "sigma":
            check_positive(v, name)
        elif key in ("kappa0", "kappa1"):
            check_positive(v, name, allow_zero=True)
        elif key == "rho":
            check_in_interval(v, name, 0.0, 1.0)
        else:
            check_in_interval(v, name, 0.0, 1.0, low_open=True, high_open=True)
    return dict(values)
