r"""Structured SG-MCMC energies (S-SGMCMC, Sd-SGMCMC) as gradient-estimator wrappers.

Alexos, Boyd & Mandt [1] run an ordinary SG-MCMC step on a *modified energy* in
which each parameter group sees samples of the other groups drawn from the
chain's own history ``q̂`` (a ring buffer, [`history`][tfp_sgmcmc.estimators.history]).
This breaks the posterior correlations between the groups of a
[`Partition`][tfp_sgmcmc.estimators.partitions.Partition]; the sampler then targets
the optimal factorised approximation ``q(θ) = Π_i q_i(θ_i)`` (their Thm 1).
Both energies are wrappers around a base estimator, so every kernel (SGLD,
pSGLD, SGHMC, SGNHT, MSGLD/ASGLD via transforms) gets S- and Sd- variants
without knowing about them.

**S-SGMCMC** (paper eq. (6), Alg. 2; docs/algorithms.md#s-sgmcmc). One minibatch ``D̃``
per step; for each group ``i`` one history draw ``θ̃^(i) ~ q̂`` in which *every
group draws its own time index* (so ``θ̃`` mixes time points across groups, a
sample of the product of the marginals):

$$
\begin{aligned}
\log \hat\pi^{(S)}(\theta) &= \sum_{i=1}^{M} \hat\ell\big([\theta_i, \tilde\theta^{(i)}_{-i}];
    \tilde D\big) + \log p(\theta) \\
\nabla \log \hat\pi^{(S)} &= \sum_i 1_{\text{group } i} \odot
    \nabla \hat\ell\big([\theta_i, \tilde\theta^{(i)}_{-i}]; \tilde D\big) + \nabla \log p(\theta)
\end{aligned}
$$

with ``ℓ̂(θ; D̃) = (N/n) Σ_{j∈D̃} log p(x_j | θ)`` the base estimator's scaled
minibatch log-likelihood. Cost: M forward/backward passes per step.

**Sd-SGMCMC** (paper eq. (8), Alg. 3; docs/algorithms.md#sd-sgmcmc). ``K`` masks
``r^(k) ∈ [0, 1]^M`` per step on one minibatch, composites
``θ^(k) = r^(k) ⊙ θ + (1 − r^(k)) ⊙ θ̃^(k)`` group-wise, ``θ̃^(k) ~ q̂``:

$$
\log \hat\pi^{(S_d)}(\theta) = \frac{M}{K\, \mathbb{E}\big[\sum_i r_i\big]}
    \sum_{k=1}^{K} \hat\ell\big(\theta^{(k)}; \tilde D\big) + \log p(\theta)
$$

Cost: K passes per step, independent of M. ``r_i = 1`` keeps the *live* value
θ_i (the gradient flows through it); ``r_i = 0`` substitutes the history value.
Masks: ``Bernoulli(ρ)`` with ``ρ`` the KEEP probability (``E[Σr] = Mρ``,
factor ``1/(Kρ)``; ``ρ = 1`` is plain SGMCMC, ``ρ → 0`` S-SGMCMC, Thm 2),
``uniform`` = ``Beta(1, 1)`` (``E[r] = 1/2``, NOT Beta(½, ½) as the paper says)
and ``Beta(α, β)`` (``E[r] = α/(α+β)``); each uses its own ``E[Σ r]`` (the
reference code divides by ``ρM`` for every mask type — we do not).

*Prior.* The prior is added once, on the live θ, and the scaling multiplies
the likelihood only (as the reference code does). For a prior that factorises
over the groups this is exactly the expectation of eq. (8)'s prior term for
Bernoulli masks: ``E[(1/(Kρ)) Σ_k r_i^(k)] = 1`` so the gradient w.r.t. θ_i of
the prior part of eq. (8) has expectation ``∇_i log p(θ)``; for S-SGMCMC
``∇_i log p([θ_i, θ̃_{−i}]) = ∇_i log p(θ)`` exactly. For continuous masks the
composite's prior gradient is a shrunk, shifted version; putting the prior on
the live θ keeps the prior exact, which we prefer. The *unconditioned* mask law
is used (the paper's theory conditions on ``Σr > 0``, its code does not); with
Bernoulli(ρ) masks on a Gaussian posterior ``N(μ, Λ^{-1})`` and scalar groups
the fixed point has mean μ and precision ``diag(Λ) + ρ·offdiag(Λ)`` [derived in
docs/algorithms.md#stationary-structured], which ``tests/estimators/test_structured_gaussian.py``
checks against the exact law of the discretised chain.

*Control variates.* With a
[`ControlVariateEstimator`][tfp_sgmcmc.estimators.structured.ControlVariateEstimator] base the CV
correction is applied to every composite evaluation on the same batch:
``ℓ̂_CV(x) = ℓ̂(x) − ℓ̂(θ̂) + ℓ(θ̂)`` (ℓ the full-data log-likelihood, θ̂ the
centre), i.e. the gradient of composite ``k`` is
``r^(k) ⊙ [∇ℓ̂(θ^(k)) − ∇ℓ̂(θ̂) + ∇ℓ(θ̂)]``. For S-SGMCMC the correction therefore
enters exactly once per parameter; at ``θ = θ̂`` with a history equal to θ̂
the estimate is the exact full-data score. Cost: one extra pass (at θ̂).

*History.* At each call the estimator first stores the state it is evaluated
at (every ``thinning``-th call; the kernels evaluate once per step at the new
state, SGHMC once per leapfrog step; the bootstrap call at θ_0 is not stored
twice) and then draws, so ``q̂^(t)`` is uniform over the stored
``{θ^(0), …, θ^(t)}`` (paper §4), restricted to the last ``history_capacity``
stored states. The ring buffer lives in the estimator state, i.e. in the
kernel results. Memory: ``(capacity + 1) × |θ| × num_chains`` floats.
``tfp.mcmc.sample_chain``'s default ``trace_fn`` returns the whole kernel
results, so it would copy the buffer at every step: always pass a
``trace_fn`` (e.g.
[`trace_without_history`][tfp_sgmcmc.estimators.structured.trace_without_history]).

*Reported value.* ``target_log_prob`` is the structured energy estimate above
(a sum of M, resp. a scaled sum of K, likelihood evaluations plus the prior),
not an estimate of ``log π(θ)``; use the base estimator's
``full_log_prob_and_gradient`` (also exposed here) for the true posterior.

*Chains.* Leading chain dimensions of the state are supported: every chain
has its own history, masks and history indices. The user's likelihood must
broadcast over leading dimensions (as for every estimator); the vectorised
evaluation adds one more leading dimension of size K (resp. M).

#### References

[1]: Antonios Alexos, Alex Boyd and Stephan Mandt. Structured Stochastic
     Gradient MCMC. In _ICML_, 2022. https://arxiv.org/abs/2107.09028
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.estimators.base import (
    GradientEstimate,
    GradientEstimator,
    WrappingEstimator,
    value_and_gradient_parts,
)
from tfp_sgmcmc.estimators.control_variates import ControlVariateEstimator
from tfp_sgmcmc.estimators.history import (
    History,
    append_history,
    draw_history_indices,
    init_history,
)
from tfp_sgmcmc.estimators.masks import BernoulliMask, BetaMask, MaskDistribution, UniformMask
from tfp_sgmcmc.estimators.minibatch import MinibatchEstimator
from tfp_sgmcmc.estimators.partitions import Partition
from tfp_sgmcmc.internal.random import split_seed
from tfp_sgmcmc.internal.util import (
    AttributeView,
    RecordedArgument,
    as_parts,
    check_int,
    restructure,
)

__all__ = [
    "MaskDistribution",
    "BernoulliMask",
    "UniformMask",
    "BetaMask",
    "StructuredEstimatorState",
    "StructuredEstimator",
    "StructuredDropoutEstimator",
    "trace_without_history",
]

_EVALUATIONS = ("vectorized", "sequential")


# --------------------------------------------------------------------------- #
# The estimators                                                               #
# --------------------------------------------------------------------------- #
class StructuredEstimatorState(NamedTuple):
    """State of a structured estimator: the base estimator's state and the history."""

    base_state: Any
    history: History


class _StructuredEnergy(WrappingEstimator):
    """Shared machinery: history draws, composites, vectorised/sequential evaluation.

    The data's dtype, the batch size and N are the base estimator's."""

    def __init__(
        self,
        base: GradientEstimator,
        partition: Partition,
        history_capacity: int = 1000,
        thinning: int = 1,
        evaluation: str = "vectorized",
    ) -> None:
        if isinstance(base, ControlVariateEstimator):
            self._cv: ControlVariateEstimator | None = base
            self._mb: MinibatchEstimator = base.base
        elif isinstance(base, MinibatchEstimator):
            self._cv, self._mb = None, base
        else:
            raise ValueError(
                "`base` must be a MinibatchEstimator or a ControlVariateEstimator (the structured "
                f"energy re-evaluates the minibatch likelihood at composite states), got "
                f"{type(base).__name__}."
            )
        if not isinstance(partition, Partition):
            raise ValueError(
                f"`partition` must be a Partition (see partition_by_part & co), got "
                f"{type(partition).__name__}."
            )
        inner = getattr(base, "base", base)
        if getattr(inner, "independent_chains", False):
            # The composites add a leading [K'] axis ahead of the chains, which the per-chain
            # batches do not carry: not supported (run the chains' structured estimators
            # with shared batches, or in separate programs).
            raise ValueError(
                "`base` has independent_chains=True, which the structured estimator does not "
                "support; use a base with shared minibatches."
            )
        super().__init__(base)
        if evaluation not in _EVALUATIONS:
            raise ValueError(f"`evaluation` must be one of {_EVALUATIONS}, got {evaluation!r}.")
        # The validated configuration, stored once and read through RecordedArgument.
        self._parameters = dict(
            partition=partition,
            history_capacity=check_int(history_capacity, "history_capacity", 1),
            thinning=check_int(thinning, "thinning", 1),
            evaluation=evaluation,
        )
        self._ids = [tf.constant(a.reshape(-1), tf.int32) for a in partition.group_ids]

    # -- configuration (``base``, dtype, n and N: WrappingEstimator) ------ #
    partition = RecordedArgument[Partition]("The groups of coordinates.")
    history_capacity = RecordedArgument[int]("Rows of the history buffer.")
    thinning = RecordedArgument[int]("Every ``thinning``-th state enters the history.")
    evaluation = RecordedArgument[str]("``'vectorized'`` or ``'sequential'`` composites.")

    num_groups = AttributeView[int]("partition.num_groups")

    @property
    def num_composites(self) -> int:
        """Composite evaluations per call (M for S-SGMCMC, K for Sd-SGMCMC)."""
        raise NotImplementedError

    @property
    def gradient_evaluations_per_call(self) -> int:  # type: ignore[override]
        return self.num_composites + (1 if self._cv is not None else 0)

    def history_memory_floats(self, state: Any) -> int:
        """Floats held by the history buffer for ``state`` (``(capacity + 1) × |θ| × chains``)."""
        return (self.history_capacity + 1) * sum(int(np.prod(p.shape)) for p in as_parts(state))

    # -- subclass hooks ---------------------------------------------------- #
    @abc.abstractmethod
    def _masks(self, batch_shape: list[int], seed: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        """Group masks ``r`` of shape ``[K, M] + batch_shape``."""

    @abc.abstractmethod
    def _scale(self, dtype: tf.DType) -> tf.Tensor:
        """The factor multiplying ``Σ_k ℓ̂(θ^(k))``."""

    # -- validation -------------------------------------------------------- #
    def _batch_shape(self, parts: list[tf.Tensor], arg_name: str = "state") -> list[int]:
        if len(parts) != self.partition.num_parts:
            raise ValueError(
                f"`{arg_name}` has {len(parts)} parts but the partition has "
                f"{self.partition.num_parts}."
            )
        batch = None
        for i, (p, ev) in enumerate(zip(parts, self.partition.event_shapes)):
            shape = p.shape.as_list()
            k = len(shape) - len(ev)
            if k < 0 or tuple(shape[k:]) != tuple(ev) or any(d is None for d in shape):
                raise ValueError(
                    f"`{arg_name}` part {i} has shape {shape}, which does not end in the "
                    f"partition's event shape {list(ev)} (static shapes required)."
                )
            if batch is None:
                batch = shape[:k]
            elif shape[:k] != batch:
                raise ValueError(
                    f"`{arg_name}` parts have different chain (batch) shapes {batch} and "
                    f"{shape[:k]}."
                )
        return batch or []

    def validate_state(self, state: Any, arg_name: str = "init_state") -> None:
        self._base.validate_state(state, arg_name)
        self._batch_shape(as_parts(state), arg_name)

    # -- protocol ----------------------------------------------------------- #
    def bootstrap(self, state: Any) -> StructuredEstimatorState:
        parts = as_parts(state)
        self._batch_shape(parts, "init_state")
        return StructuredEstimatorState(
            base_state=self._base.bootstrap(state),
            history=init_history(parts, self.history_capacity),
        )

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        """The base estimator's exact (all-data) ``log π`` and score (the true posterior)."""
        return self._base.full_log_prob_and_gradient(state)

    def _gather(
        self, parts_like: list[tf.Tensor], history: History, idx: tf.Tensor, r: tf.Tensor
    ) -> tuple[list[tf.Tensor], list[tf.Tensor]]:
        """Per part: history values ``θ̃`` and element masks, shape ``[K'] + part.shape``.

        ``idx`` (int, ``[K', M] + batch``) and ``r`` (``[K', M] + batch``) are
        per group; element ``e`` of a part in group ``g`` takes ``idx[:, g]``.
        """
        kk = int(idx.shape[0])
        batch = idx.shape.as_list()[2:]
        nb = int(np.prod(batch)) if batch else 1
        idx2 = tf.reshape(idx, [kk, self.num_groups, nb])
        r2 = tf.reshape(r, [kk, self.num_groups, nb])
        hist_vals, masks = [], []
        for buf, ids, p in zip(history.buffer, self._ids, parts_like):
            ne = int(ids.shape[0])
            # [K', E, B] -> [K', B, E]: the slot each element of each chain reads.
            slot = tf.transpose(tf.gather(idx2, ids, axis=1), [0, 2, 1])
            bi = tf.broadcast_to(tf.range(nb)[tf.newaxis, :, tf.newaxis], [kk, nb, ne])
            ei = tf.broadcast_to(tf.range(ne)[tf.newaxis, tf.newaxis, :], [kk, nb, ne])
            flat_buf = tf.reshape(buf, [self.history_capacity + 1, nb, ne])
            vals = tf.gather_nd(flat_buf, tf.stack([slot, bi, ei], axis=-1))
            rm = tf.transpose(tf.gather(r2, ids, axis=1), [0, 2, 1])
            shape = [kk] + p.shape.as_list()
            hist_vals.append(tf.reshape(vals, shape))
            masks.append(tf.reshape(rm, shape))
        return hist_vals, masks

    def composites(
        self, state: Any, estimator_state: StructuredEstimatorState, seed: tf.Tensor
    ) -> tuple[tf.Tensor, list[tf.Tensor], list[tf.Tensor]]:
        """The step's group masks and history draws (for inspection and tests).

        Returns:
          ``(r, theta_tilde, element_masks)``: group masks ``[K, M] + batch``,
          and per part the history values and element masks ``[K] + part.shape``.
          Composite ``k`` is ``element_masks[k] ⊙ θ + (1 − element_masks[k]) ⊙
          theta_tilde[k]``. Given the estimator state *after* the evaluated state
          has been stored (``__call__`` stores first, then draws), these are exactly
          the draws ``__call__`` uses for ``seed``.
        """
        parts = as_parts(state)
        batch = self._batch_shape(parts)
        dtype = parts[0].dtype
        seed = tfp.random.sanitize_seed(seed)
        s_idx, s_mask = split_seed(seed, 2, salt="structured_energy")
        r = self._masks(batch, s_mask, dtype)
        kk = int(r.shape[0])
        idx = draw_history_indices(
            estimator_state.history.count, [kk, self.num_groups] + batch, s_idx
        )
        hist, masks = self._gather(parts, estimator_state.history, idx, r)
        return r, hist, masks

    def _estimate(
        self, state: Any, estimator_state: StructuredEstimatorState, seed: tf.Tensor
    ) -> tuple[GradientEstimate, StructuredEstimatorState]:
        mb = self._mb
        seed = tfp.random.sanitize_seed(seed)
        # The minibatch comes from the seed exactly as the base estimator would draw
        # it, so Bernoulli(ρ = 1) reproduces the plain chain seed for seed.
        batch, new_base_state = mb.sample_batch(estimator_state.base_state, seed)
        n = int(tf.nest.flatten(batch)[0].shape[0])
        parts = as_parts(state)
        dtype = parts[0].dtype
        # Store the evaluated state first, then draw from the buffer: q̂^(t) is
        # uniform over {θ^(1..t)} (paper §4), and reading the *updated* buffer
        # gives XLA a data dependency that lets it update the buffer in place
        # (a read of the old buffer would force a full copy every step).
        new_history = append_history(estimator_state.history, parts, self.thinning)
        estimator_state = estimator_state._replace(history=new_history)
        _, hist, masks = self.composites(state, estimator_state, seed)
        hist = [tf.stop_gradient(h) for h in hist]
        scale = self._scale(dtype)

        def loglik_sum(s: Any, hist_k: list[tf.Tensor], masks_k: list[tf.Tensor]) -> tf.Tensor:
            ps = as_parts(s)
            xs = [m * p + (1 - m) * h for p, h, m in zip(ps, hist_k, masks_k)]
            ll = mb.scaled_log_likelihood(restructure(xs, s), batch, n)  # [K'] + batch
            return tf.reduce_sum(ll, axis=0)

        if self.evaluation == "vectorized":
            lik, lik_grads = value_and_gradient_parts(lambda s: loglik_sum(s, hist, masks), state)
        else:
            lik, lik_grads = self._sequential(state, hist, masks, loglik_sum)
        prior, prior_grads = value_and_gradient_parts(mb.log_prior, state)
        value = scale * lik + prior
        grads = [scale * g + gp for g, gp in zip(lik_grads, prior_grads)]

        if self._cv is not None:
            value, grads = self._add_control_variate(value, grads, masks, scale, batch, n)

        return (
            GradientEstimate(value, grads),
            StructuredEstimatorState(base_state=new_base_state, history=new_history),
        )

    def _sequential(self, state, hist, masks, loglik_sum):
        """One composite at a time in a ``tf.while_loop``.

        Forward/backward activation memory ∝ 1 instead of K; the K history draws
        (K × |θ| values) are still gathered up front.
        """
        parts = as_parts(state)
        kk = int(hist[0].shape[0])
        batch = self._batch_shape(parts)
        zero_v = tf.zeros(batch, parts[0].dtype)
        zero_g = [tf.zeros_like(p) for p in parts]

        def body(k, v, gs):
            hk = [h[k][tf.newaxis] for h in hist]
            mk = [m[k][tf.newaxis] for m in masks]
            vk, gk = value_and_gradient_parts(lambda s: loglik_sum(s, hk, mk), state)
            return k + 1, v + vk, [g + g2 for g, g2 in zip(gs, gk)]

        _, v, gs = tf.while_loop(
            lambda k, *_: k < kk, body, (tf.constant(0), zero_v, zero_g), parallel_iterations=1
        )
        return v, gs

    def _add_control_variate(self, value, grads, masks, scale, batch, n):
        """Apply ``ℓ̂_CV(x) = ℓ̂(x) − ℓ̂(θ̂) + ℓ(θ̂)`` inside every composite (see module doc)."""
        cv, mb = self._cv, self._mb
        centre = cv.centering_value
        ll_hat, g_hat = value_and_gradient_parts(
            lambda s: mb.scaled_log_likelihood(s, batch, n), centre
        )
        lp_c, gp_c = value_and_gradient_parts(mb.log_prior, centre)
        # Full-data likelihood (not posterior) at the centre: remove its prior.
        full_ll = tf.cast(cv.centering_log_prob, value.dtype) - lp_c
        corr_grads = [
            tf.cast(c, gh.dtype) - gp - gh for c, gp, gh in zip(cv.centering_gradient, gp_c, g_hat)
        ]
        kk = int(masks[0].shape[0])
        value = value + scale * kk * (full_ll - ll_hat)
        grads = [
            g + scale * tf.reduce_sum(m, axis=0) * c for g, m, c in zip(grads, masks, corr_grads)
        ]
        return value, grads


class StructuredEstimator(_StructuredEnergy):
    r"""S-SGMCMC energy: each group's gradient at ``[θ_i, θ̃_{−i}]`` on one minibatch.

    $$
    \nabla \log \hat\pi^{(S)}(\theta) = \sum_{i=1}^{M} 1_{\text{group } i} \odot
        \nabla \hat\ell\big([\theta_i, \tilde\theta^{(i)}_{-i}]; \tilde D\big)
        + \nabla \log p(\theta)
    $$

    (Alexos, Boyd & Mandt [1], eq. (6) and Alg. 2; see the module docstring for
    the history, the prior and control variates.) ``θ̃^(i)`` is drawn from the
    history with an independent time index for every group. M passes per step.

    Args:
      base: a [`MinibatchEstimator`][tfp_sgmcmc.estimators.structured.MinibatchEstimator] or
        [`ControlVariateEstimator`][tfp_sgmcmc.estimators.structured.ControlVariateEstimator].
      partition: the groups (`tfp_sgmcmc.estimators.partitions`).
      history_capacity: states kept in the ring buffer (memory: capacity ×
        |θ| × chains floats). Default value: ``1000``.
      thinning: store every ``thinning``-th evaluated state. Default value: ``1``.
      evaluation: ``'vectorized'`` (all M composites in one call of the
        likelihood with an extra leading dimension; fastest, memory ∝ M) or
        ``'sequential'`` (a ``tf.while_loop``; activation memory ∝ 1). Default value:
        ``'vectorized'``.

    Raises:
      ValueError: ``base`` of another type, ``partition`` not a Partition,
        ``history_capacity`` or ``thinning`` < 1, unknown ``evaluation``.

    #### References

    [1]: Antonios Alexos, Alex Boyd and Stephan Mandt. Structured Stochastic
         Gradient MCMC. In _ICML_, 2022. https://arxiv.org/abs/2107.09028
    """

    # The constructor is the shared one: (base, partition, history_capacity, thinning,
    # evaluation), all documented above.
    num_composites = AttributeView[int]("num_groups")

    def _masks(self, batch_shape, seed, dtype):
        del seed
        eye = tf.eye(self.num_groups, dtype=dtype)
        return tf.broadcast_to(
            tf.reshape(eye, [self.num_groups, self.num_groups] + [1] * len(batch_shape)),
            [self.num_groups, self.num_groups] + batch_shape,
        )

    def _scale(self, dtype):
        return tf.constant(1.0, dtype)

    def __repr__(self) -> str:
        return (
            f"StructuredEstimator(base={self._base!r}, M={self.num_groups}, "
            f"history_capacity={self.history_capacity}, thinning={self.thinning})"
        )


class StructuredDropoutEstimator(_StructuredEnergy):
    r"""Sd-SGMCMC energy: ``K`` random group masks per step, cost independent of M.

    $$
    \begin{aligned}
    \theta^{(k)} &= r^{(k)} \odot \theta + (1 - r^{(k)}) \odot \tilde\theta^{(k)}, \qquad
        r^{(k)}_i \sim \text{mask (i.i.d.)}, \quad \tilde\theta^{(k)} \sim \hat q \\
    \log \hat\pi^{(S_d)}(\theta) &= \frac{M}{K\, \mathbb{E}\big[\sum_i r_i\big]}
        \sum_k \hat\ell\big(\theta^{(k)}; \tilde D\big) + \log p(\theta)
    \end{aligned}
    $$

    (Alexos, Boyd & Mandt [1], eq. (8), Alg. 3, App. B–C.) ``E[Σ r] = M·E[r]``
    for the chosen mask, so the factor is ``1/(K·E[r])``: ``1/(Kρ)`` for
    Bernoulli(ρ), ``2/K`` for uniform, ``(α+β)/(Kα)`` for Beta(α, β).

    Args:
      base: a [`MinibatchEstimator`][tfp_sgmcmc.estimators.structured.MinibatchEstimator] or
        [`ControlVariateEstimator`][tfp_sgmcmc.estimators.structured.ControlVariateEstimator].
      partition: the groups.
      num_masks: ``K ≥ 1`` masks (composite evaluations) per step. Default
        value: ``1``.
      keep_prob: ``ρ ∈ (0, 1]`` of Bernoulli masks (probability of KEEPING the
        live value); only when ``mask`` is ``None``. Default value: ``None``
        (0.5 if ``mask`` is ``None``).
      mask: a [`MaskDistribution`][tfp_sgmcmc.estimators.MaskDistribution]
        ([`BernoulliMask`][tfp_sgmcmc.estimators.BernoulliMask],
        [`UniformMask`][tfp_sgmcmc.estimators.UniformMask],
        [`BetaMask`][tfp_sgmcmc.estimators.BetaMask]). Default value: ``None``
        (``BernoulliMask(keep_prob)``).
      history_capacity: states in the ring buffer. Default value: ``1000``.
      thinning: store every ``thinning``-th evaluated state. Default value: ``1``.
      evaluation: ``'vectorized'`` or ``'sequential'`` (see
        [`StructuredEstimator`][tfp_sgmcmc.estimators.structured.StructuredEstimator]). Default
        value: ``'vectorized'``.

    Raises:
      ValueError: ``keep_prob`` outside ``(0, 1]``, ``keep_prob`` given together
        with ``mask``, ``num_masks`` < 1, ``history_capacity``/``thinning`` < 1,
        or an invalid ``base``/``partition``/``mask``.

    #### References

    [1]: Antonios Alexos, Alex Boyd and Stephan Mandt. Structured Stochastic
         Gradient MCMC. In _ICML_, 2022. https://arxiv.org/abs/2107.09028
    """

    def __init__(
        self,
        base: GradientEstimator,
        partition: Partition,
        num_masks: int = 1,
        keep_prob: float | None = None,
        mask: MaskDistribution | None = None,
        history_capacity: int = 1000,
        thinning: int = 1,
        evaluation: str = "vectorized",
    ) -> None:
        super().__init__(base, partition, history_capacity, thinning, evaluation)
        self._parameters["num_masks"] = check_int(num_masks, "num_masks", 1)
        if mask is None:
            mask = BernoulliMask(0.5 if keep_prob is None else keep_prob)
        elif keep_prob is not None:
            raise ValueError("Give either `keep_prob` (Bernoulli masks) or `mask`, not both.")
        if not isinstance(mask, MaskDistribution):
            raise ValueError(f"`mask` must be a MaskDistribution, got {type(mask).__name__}.")
        self._mask = mask
        self._check_scale(base.dtype, "mask" if keep_prob is None else "keep_prob")

    num_masks = RecordedArgument[int]("``K``, masks (composites) per call.")

    mask = AttributeView[MaskDistribution]("_mask")

    num_composites = AttributeView[int]("num_masks")

    def _masks(self, batch_shape, seed, dtype):
        return self._mask.sample([self.num_masks, self.num_groups] + batch_shape, seed, dtype)

    def _check_scale(self, dtype: tf.DType | None, arg_name: str = "mask") -> None:
        """The likelihood scale ``1/(K·E[r])`` must be finite in ``dtype`` (a mask mean
        near the dtype's smallest number would make every energy infinite)."""
        mean = float(self._mask.mean)
        scale = np.inf if mean <= 0 else 1.0 / (self.num_masks * mean)
        limit = np.finfo(np.float64 if dtype is None else dtype.as_numpy_dtype).max
        if not np.isfinite(scale) or scale > limit:
            name = "float64" if dtype is None else dtype.name
            raise ValueError(
                f"`{arg_name}`: the mask mean E[r] = {mean:g} makes the likelihood scale "
                f"1/(K·E[r]) overflow {name}; use a mean of at least "
                f"{1.0 / (self.num_masks * limit):.3g}."
            )

    def _scale(self, dtype):
        # M / (K · E[Σ_i r_i]) with E[Σ_i r_i] = M · E[r] for this mask's own mean.
        self._check_scale(dtype)
        return tf.constant(1.0 / (self.num_masks * self._mask.mean), dtype)

    def __repr__(self) -> str:
        return (
            f"StructuredDropoutEstimator(base={self._base!r}, M={self.num_groups}, "
            f"K={self.num_masks}, mask={self._mask!r}, history_capacity={self.history_capacity}, "
            f"thinning={self.thinning})"
        )


def trace_without_history(state: Any, kernel_results: Any) -> Any:
    """A ``trace_fn`` for ``sample_chain``: the kernel results minus the history buffer.

    ``sample_chain``'s default ``trace_fn`` traces the whole results, which
    would copy ``capacity × |θ|`` floats per step. This keeps every other field
    (and the history's scalar counters).
    """
    del state
    est = getattr(kernel_results, "estimator_state", None)
    if not isinstance(est, StructuredEstimatorState):
        return kernel_results
    hist = est.history._replace(buffer=[])
    return kernel_results._replace(estimator_state=est._replace(history=hist))
