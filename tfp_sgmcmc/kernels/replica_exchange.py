r"""Replica-exchange SGLD with the variance-corrected swap (reSGLD; Deng et al. 2020).

``K`` SGLD chains ("replicas") run at temperatures ``T_1 < … < T_K`` in one
compiled program: the hot ones cross energy barriers, the cold one
(``T_1``, usually 1) samples the target, and adjacent replicas exchange
positions with a Metropolis-type rule. With minibatch energies the naive swap
rate is biased upwards (``E exp(ΔŨ) > exp(ΔU)``); Deng et al. subtract the
energy-estimator variance so that the swap is unbiased under a Gaussian energy
noise. See ``docs/samplers/replica_exchange.md``.

#### References

[1]: Wei Deng, Qi Feng, Liyao Gao, Faming Liang and Guang Lin. Non-convex
     Learning via Replica Exchange Stochastic Gradient MCMC. In _ICML_, 2020.
     https://arxiv.org/abs/2008.05367
"""

from __future__ import annotations

import collections
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator
from tfp_sgmcmc.integrators import langevin_step
from tfp_sgmcmc.internal.random import philox_uniform, split_seed
from tfp_sgmcmc.internal.util import (
    RecordedArgument,
    all_finite,
    as_parts,
    cast_param,
    check_int,
    check_positive,
    restructure,
    static_value,
)
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.tfp_wrappers import SGMCMCResultsMixin

__all__ = [
    "RESGLD",
    "RESGLDKernelResults",
    "estimate_energy_variance",
]


class RESGLDKernelResults(
    SGMCMCResultsMixin,
    collections.namedtuple(
        "RESGLDKernelResults",
        [
            "target_log_prob",  # log π̃ of the returned (coldest) replica
            "grads_target_log_prob",  # its score
            "estimator_state",
            "replica_states",  # every replica's state, list of parts [K] + state shape
            "replica_target_log_prob",  # [K] + batch shape
            "replica_grads_target_log_prob",  # list of parts [K] + state shape
            "temperatures",  # T_1 < … < T_K used by this step, [K]
            "is_swap_accepted",  # this step's swaps of pairs (k, k+1), [K−1] + batch shape
            "swap_accepts",  # accepted swaps per pair so far (int32, [K−1] + batch shape)
            "swap_attempts",  # attempted swaps per pair so far (int32, [K−1] + batch shape)
            "step",
            "step_size",
            "diverged",
            "seed",
        ],
    ),
):
    __slots__ = ()

    @property
    def swap_rates(self) -> tf.Tensor:
        """Accepted / attempted swaps per adjacent pair (``[K−1] + batch shape``)."""
        dtype = self.replica_target_log_prob.dtype
        return tf.math.divide_no_nan(
            tf.cast(self.swap_accepts, dtype), tf.cast(self.swap_attempts, dtype)
        )


class RESGLD(SGMCMCKernel):
    r"""Replica-exchange SGLD with the variance-corrected swap (Deng et al. 2020).

    Temperatures form a geometric ladder from ``T_1 = temperature`` to
    ``T_K = max_temperature``: ``T_k = T_1 (T_K/T_1)^{(k−1)/(K−1)}``. Each step:

    ```none
    x_k ← x_k + ε ∇log π̃(x_k) + √(2 ε T_k) ξ_k            k = 1..K   (SGLD at T_k)
    for the pairs (k, k+1) of this step:
        log S = (1/T_k − 1/T_{k+1}) (Ũ(x_k) − Ũ(x_{k+1}) − (1/T_k − 1/T_{k+1}) σ̂²)
        swap x_k ↔ x_{k+1} with probability min(1, S)
    ```

    ``Ũ = −log π̃`` is the minibatch energy (``N/n`` scaled) of each replica's
    new state (the values in ``replica_target_log_prob``, so swapping costs no
    extra evaluation). ``σ̂² = energy_variance`` is the variance of one energy
    estimator (Deng et al. 2020, eq. (8) and Algorithm 1, with their correction
    factor ``F = 1``): under Gaussian energy noise ``E[S̃] = S``, the exact swap
    rate; ``σ̂² = 0`` is the naive (biased) swap. More precisely the
    correction needs ``½ Var(Ũ(x_k) − Ũ(x_{k+1}))``, which is what
    `estimate_energy_variance` measures (one value per pair; all replicas
    share a step's minibatch, so their energy errors are correlated and this is
    smaller than the single-estimator variance). A scalar or one value per
    pair ``[K−1]``.

    Pairs: with ``K = 2`` the one pair every step; with ``K > 2`` the pairs
    ``(1,2), (3,4), …`` at even steps and ``(2,3), (4,5), …`` at odd steps
    (deterministic even-odd swaps), so every replica is in at most one pair.

    **State.** As TFP's ``ReplicaExchangeMC``, the state passed in and returned is
    the coldest replica's (``T_1``: samples of ``π^{1/T_1}``); all replicas live
    in the results (``replica_states``). ``one_step`` continues from
    ``previous_kernel_results.replica_states`` (its ``current_state`` must be
    replica 0 of them); every replica starts at ``init_state``. Optional chain
    dimensions of the state are kept: each chain has its own ``K`` replicas.
    One estimator call per step evaluates all ``K`` replicas (``K`` times the
    per-example gradients of SGLD). The step size is shared by the replicas.
    The replicas share a step's minibatch, unless the estimator was built with
    ``independent_chains=True``: then it is bootstrapped on the replica stack and
    every replica of every chain draws its own minibatch.

    **Divergence.** ``results.diverged`` (one flag per chain) is set when any
    replica of the chain has a non-finite state, log-density or score, not only
    the returned coldest one.

    Args:
      estimator: gradient estimator (must accept a leading batch dimension).
      step_size: ``ε > 0`` (scalar, tensor or schedule).
      num_replicas: ``K ≥ 2``, a Python int. Default value: ``2``.
      max_temperature: ``T_K > T_1``. Default value: ``10.``.
      energy_variance: ``σ̂² ≥ 0``, scalar or ``[K−1]``. Default value: ``0.``.
      temperature: ``T_1 > 0`` (scalar or schedule). Default value: ``1.``.
      name: Default value: ``None`` (``'replica_exchange_sgld'``).

    Raises:
      ValueError: ``num_replicas`` not an int ≥ 2; ``max_temperature`` not a
        positive scalar, or (static) not above ``temperature``; negative
        ``energy_variance``; non-positive ``temperature``.

    #### References

    [1]: Wei Deng, Qi Feng, Liyao Gao, Faming Liang and Guang Lin. Non-convex
         Learning via Replica Exchange Stochastic Gradient MCMC. In _ICML_, 2020.
    """

    _results_type = RESGLDKernelResults
    _default_name = "replica_exchange_sgld"
    cli_name = "resgld"

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        num_replicas: int = 2,
        max_temperature: Any = 10.0,
        energy_variance: Any = 0.0,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        num_replicas = check_int(num_replicas, "num_replicas", 2)
        check_positive(max_temperature, "max_temperature", scalar=True)
        check_positive(energy_variance, "energy_variance", allow_zero=True)
        if not hasattr(temperature, "parameters"):
            check_positive(temperature, "temperature", scalar=True)
            t1, tk = static_value(temperature), static_value(max_temperature)
            if t1 is not None and tk is not None and not float(tk) > float(t1):
                raise ValueError(
                    f"`max_temperature` ({float(tk)}) must exceed `temperature` ({float(t1)})."
                )
        v = static_value(energy_variance)
        if v is not None and v.ndim not in (0,) and v.shape != (num_replicas - 1,):
            raise ValueError(
                f"`energy_variance` must be a scalar or have shape [{num_replicas - 1}], "
                f"got shape {v.shape}."
            )
        self._init_from_arguments(RESGLD, locals())

    num_replicas = RecordedArgument[int]("``K``, the replicas of the temperature ladder.")

    def temperatures(self, step: Any = 0, dtype: tf.DType = tf.float32) -> tf.Tensor:
        """The ladder ``T_1 < … < T_K`` at step ``step``."""
        k = self.num_replicas
        t1 = self._temperature(dtype, tf.convert_to_tensor(step, tf.int32))
        tk = cast_param(self._parameters["max_temperature"], dtype)
        frac = tf.range(k, dtype=dtype) / tf.cast(k - 1, dtype)
        return t1 * tf.pow(tk / t1, frac)

    def _tile(self, x: tf.Tensor) -> tf.Tensor:
        """``x`` repeated along a new leading replica axis of length ``K``."""
        k = self.num_replicas
        return tf.tile(x[tf.newaxis], tf.concat([[k], tf.ones_like(tf.shape(x))], 0))

    def _replica_extra(
        self, replica_parts: list[tf.Tensor], replica_est: GradientEstimate
    ) -> dict[str, Any]:
        """The replica fields of the results at bootstrap, from the ``[K] + ...`` stacks."""
        k = self.num_replicas
        dtype = replica_parts[0].dtype
        batch_shape = tf.shape(replica_est.target_log_prob)[1:]
        pair_shape = tf.concat([[k - 1], batch_shape], 0)
        return {
            "replica_states": list(replica_parts),
            "replica_target_log_prob": replica_est.target_log_prob,
            "replica_grads_target_log_prob": list(replica_est.grads_target_log_prob),
            "temperatures": self.temperatures(0, dtype),
            "is_swap_accepted": tf.zeros(pair_shape, tf.bool),
            "swap_accepts": tf.zeros(pair_shape, tf.int32),
            "swap_attempts": tf.zeros(pair_shape, tf.int32),
        }

    def _init_extra(self, parts: list[tf.Tensor], est: GradientEstimate) -> dict[str, Any]:
        tiled = GradientEstimate(
            self._tile(est.target_log_prob), [self._tile(g) for g in est.grads_target_log_prob]
        )
        return self._replica_extra([self._tile(p) for p in parts], tiled)

    def _bootstrap_estimate(
        self, parts: list[tf.Tensor], like: Any, seed: tf.Tensor
    ) -> tuple[GradientEstimate, Any, dict[str, Any]]:
        if not getattr(self.estimator, "independent_chains", False):
            return super()._bootstrap_estimate(parts, like, seed)
        # Every replica of every chain draws its own minibatch: the estimator
        # state and the first estimate are those of the replica stack.
        replicas = restructure([self._tile(p) for p in parts], like)
        est_state = self.estimator.bootstrap(replicas)
        est, est_state = self.estimator(replicas, est_state, seed)
        replica_est = GradientEstimate(est.target_log_prob, list(est.grads_target_log_prob))
        coldest = GradientEstimate(
            replica_est.target_log_prob[0], [g[0] for g in replica_est.grads_target_log_prob]
        )
        return coldest, est_state, self._replica_extra(as_parts(replicas), replica_est)

    def _diverged(
        self, parts: list[tf.Tensor], est: GradientEstimate, extra: dict[str, Any]
    ) -> tf.Tensor:
        """Per chain: some replica's state, log-density or score is non-finite (not only
        the returned coldest one's)."""
        lp = extra["replica_target_log_prob"]
        nb = lp.shape.rank  # 1 + chain batch dims
        reps = list(extra["replica_states"]) + list(extra["replica_grads_target_log_prob"])
        finite = tf.logical_and(all_finite(reps, nb), tf.math.is_finite(lp))
        return tf.logical_not(tf.reduce_all(finite, axis=0))

    def _transition(self, parts, like, prev, step_size, seed):
        noise_seed, est_seed, swap_seed = self._split(seed, 3, "resgld.one_step")
        k = self.num_replicas
        dtype = parts[0].dtype
        temps = self.temperatures(prev.step, dtype)
        reps = list(prev.replica_states)
        nb = prev.replica_target_log_prob.shape.rank  # 1 + chain batch dims

        def per_replica(x: tf.Tensor, rank: int) -> tf.Tensor:
            return tf.reshape(x, tf.concat([[-1], tf.ones([rank - 1], tf.int32)], 0))

        noise = self._normals(reps, noise_seed, "resgld.noise")
        new = [
            langevin_step(x, g, step_size, per_replica(temps, x.shape.rank), xi)
            for x, g, xi in zip(reps, prev.replica_grads_target_log_prob, noise)
        ]
        est, est_state = self._estimate(new, like, prev.estimator_state, est_seed)
        lp, grads = est.target_log_prob, list(est.grads_target_log_prob)

        # Variance-corrected swaps of the adjacent pairs active at this step.
        inv = 1.0 / temps
        d_inv = inv[:-1] - inv[1:]  # [K−1] > 0
        var = tf.broadcast_to(cast_param(self._parameters["energy_variance"], dtype), [k - 1])
        energy = -lp  # [K] + batch
        log_s = per_replica(d_inv, nb) * (energy[:-1] - energy[1:] - per_replica(d_inv * var, nb))
        pair = tf.range(k - 1)
        active = tf.ones([k - 1], tf.bool) if k == 2 else tf.equal(pair % 2, prev.step % 2)
        log_u = tf.math.log(
            # TensorFlow's Philox uniforms, mapped to floats the same way in every mode.
            philox_uniform(tf.shape(log_s), swap_seed, dtype)
        )
        accept = tf.logical_and(per_replica(active, nb), log_u < log_s)  # [K−1] + batch
        # Replica j takes its upper neighbour's state if (j, j+1) swaps, its lower
        # neighbour's if (j−1, j) swaps (active pairs are disjoint), else keeps its own.
        pad = tf.zeros(tf.concat([[1], tf.shape(accept)[1:]], 0), tf.bool)
        from_above = tf.concat([accept, pad], 0)
        from_below = tf.concat([pad, accept], 0)

        def permute(x: tf.Tensor) -> tf.Tensor:
            rank = x.shape.rank
            up = tf.concat([x[1:], x[-1:]], 0)
            down = tf.concat([x[:1], x[:-1]], 0)
            a = _expand_to(from_above, rank)
            b = _expand_to(from_below, rank)
            return tf.where(a, up, tf.where(b, down, x))

        new = [permute(x) for x in new]
        lp = permute(lp)
        grads = [permute(g) for g in grads]
        cold = GradientEstimate(lp[0], [g[0] for g in grads])
        return (
            [x[0] for x in new],
            cold,
            est_state,
            {
                "replica_states": new,
                "replica_target_log_prob": lp,
                "replica_grads_target_log_prob": grads,
                "temperatures": temps,
                "is_swap_accepted": accept,
                "swap_accepts": prev.swap_accepts + tf.cast(accept, tf.int32),
                "swap_attempts": prev.swap_attempts
                + tf.cast(tf.broadcast_to(per_replica(active, nb), tf.shape(accept)), tf.int32),
            },
        )


def _expand_to(mask: tf.Tensor, rank: int) -> tf.Tensor:
    extra = rank - mask.shape.rank
    return tf.reshape(mask, tf.concat([tf.shape(mask), tf.ones([extra], tf.int32)], 0))


def estimate_energy_variance(
    estimator: GradientEstimator,
    lower_states: Any,
    upper_states: Any,
    num_batches: int = 100,
    seed: Any = (0, 0),
) -> tf.Tensor:
    """``½ Var(Ũ(x) − Ũ(y))`` of the minibatch energy difference, by Monte Carlo.

    The ``energy_variance`` that makes `RESGLD`'s swap
    unbiased for replicas at ``x`` and ``y`` sharing a minibatch (Deng et al.
    2020's ``σ̂²`` for the estimator actually used). ``lower_states`` and
    ``upper_states`` are states (tensor or list of parts) with a leading
    ``[K−1]`` axis (one per adjacent pair, e.g. a short reSGLD run's replica
    states ``[:-1]`` and ``[1:]``); the result has shape ``[K−1]``. Each of
    ``num_batches`` draws evaluates both states on one fresh batch.

    Raises:
      ValueError: ``num_batches < 2``.
    """
    if not isinstance(num_batches, int) or num_batches < 2:
        raise ValueError(f"`num_batches` must be an int >= 2, got {num_batches!r}.")
    lower = restructure(as_parts(lower_states), lower_states)
    upper = restructure(as_parts(upper_states), upper_states)
    both = restructure(
        [tf.stack([a, b]) for a, b in zip(as_parts(lower), as_parts(upper))], lower_states
    )
    st = estimator.bootstrap(both)
    seeds = split_seed(tf.convert_to_tensor(seed, tf.int32), num_batches)
    diffs = []
    for i in range(num_batches):
        est, st = estimator(both, st, seeds[i])
        diffs.append(est.target_log_prob[0] - est.target_log_prob[1])
    d = tf.stack(diffs)
    return 0.5 * tf.math.reduce_variance(d, axis=0) * num_batches / (num_batches - 1)
