r"""Contour stochastic gradient Langevin dynamics (cSGLD; Deng, Lin & Liang 2020).

cSGLD samples a *flattened* density ``ϖ(x) ∝ π(x) / θ^ζ(J(x))``, where ``θ`` is
the probability mass of ``π`` in each of ``m`` energy partitions, learned on the
fly by stochastic approximation (SA). Flattening lowers the energy barriers
between modes so that one chain crosses them; importance weights ``θ^ζ(J(x))``
recover expectations under ``π``. See ``docs/samplers/contour.md``.

#### References

[1]: Wei Deng, Guang Lin and Faming Liang. A Contour Stochastic Gradient
     Langevin Dynamics Algorithm for Simulations of Multi-modal
     Distributions. In _NeurIPS_, 2020. https://arxiv.org/abs/2010.09800
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator
from tfp_sgmcmc.integrators import langevin_step
from tfp_sgmcmc.internal.util import (
    RecordedArgument,
    cast_param,
    check_finite_tensor,
    check_in_interval,
    check_int,
    check_positive,
)
from tfp_sgmcmc.kernels.arguments import as_schedule
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.tfp_wrappers import SGMCMCResultsMixin

__all__ = ["CSGLD", "CSGLDKernelResults", "importance_weights"]

#: Floor of θ inside the logarithms: a partition left unvisited for long has its
#: mass shrink geometrically, (1 − ωθ_J^ζ) per step, until it underflows to 0, and
#: log 0 would make the gradient multiplier infinite.
LOG_FLOOR = 1e-30


class CSGLDKernelResults(
    SGMCMCResultsMixin,
    collections.namedtuple(
        "CSGLDKernelResults",
        [
            "target_log_prob",  # stochastic log π̃ at the returned state (−Ũ)
            "grads_target_log_prob",
            "estimator_state",
            "energy_pdf",  # θ: SA estimate of the mass of each partition, batch_shape + [m]
            "energy_index",  # J(x): the partition of the returned state (int32, batch shape)
            "log_importance_weight",  # ζ log Ψ_θ(U(x)) of the returned state (batch shape)
            "gradient_multiplier",  # 1 + ζT(log θ(J) − log θ(J−1))/Δu used by this step
            "sa_step_size",  # ω used by this step (0 at bootstrap)
            "step",
            "step_size",
            "diverged",
            "seed",
        ],
    ),
):
    __slots__ = ()


class CSGLD(SGMCMCKernel):
    r"""Contour SGLD: SGLD on an energy-flattened density with an SA energy histogram.

    Energy ``U = −log π̃`` (the minibatch estimate, already scaled by ``N/n``),
    partitions ``J(x) = clip(⌊(U(x) − u_min)/Δu⌋, 0, m−1)`` (0-based: the first
    takes every energy below ``u_min + Δu``, the last every energy above
    ``u_min + (m−1)Δu``). One step (Deng, Lin & Liang 2020, Algorithm 1; ε form,
    ``g = ∇log π̃``, ``T = temperature``):

    ```none
    x_{k+1} = x_k + ε [1 + ζT (log θ_k(J(x_k)) − log θ_k(J(x_k) − 1)) / Δu] g(x_k) + √(2εT) ξ
    θ_{k+1}(i) = θ_k(i) + ω_{k+1} θ_k^ζ(J(x_{k+1})) (1{i = J(x_{k+1})} − θ_k(i)),  i = 0..m−1
    ```

    (``J − 1`` is clipped at 0; above ``u_min + mΔu``, the top of the last
    partition, the bracket is 1: the flattening covers the ``m`` partitions
    only, which keeps ``ϖ`` proper when the histogram falls towards the top.)
    The multiplier in brackets is the gradient of
    ``log ϖ`` with the piecewise-linear interpolation of ``log θ`` between
    partitions (the paper's eq. (7)); it turns negative where the histogram
    grows steeply, which pushes the chain *up* the energy out of a mode. ``θ``
    starts uniform, so the first steps are SGLD; ``ζ = 0`` is SGLD exactly.
    ``ω`` is ``sa_step_size`` (a scalar in ``[0, 1)`` or a schedule of the step,
    e.g. `tfp_sgmcmc.schedules.SAStepSize`); ``θ`` stays a probability
    vector (the update conserves ``Σθ = 1``).

    **Importance weights.** With ``T = 1`` the samples follow ``ϖ ∝ π/Ψ_θ^ζ(U)``,
    where ``log Ψ_θ`` interpolates ``log θ`` linearly in the energy (from
    ``log θ(J−1)`` at the lower edge of partition ``J`` to ``log θ(J)`` at its
    upper edge: the function whose slope is the bracket above). Estimate
    ``E_π f`` by ``Σ_k w_k f(x_k) / Σ_k w_k`` with ``log w_k = ζ log Ψ_θ(U(x_k))``,
    the field ``log_importance_weight`` of the results (computed with the
    histogram after the step that produced ``x_k``); `importance_weights`
    normalises them. The paper's estimator uses the piecewise-constant
    ``θ^ζ(J(x_k))``; the interpolated weight is the exact inverse of the
    flattening the drift applies and removes an ``O(Δu)`` bias within each
    partition (the two agree as ``Δu → 0``). At ``T ≠ 1`` the same weights
    recover ``π^{1/T}``. ``energy_pdf`` converges to the mass of each partition
    under the target, ``θ(i) → ∫_{S_i} π(dx)`` (the SA mean field is
    ``π(S_i) − θ(i)``).

    Inside the logarithms ``θ`` is floored at ``LOG_FLOOR = 1e-30``: the mass of a
    partition left unvisited for long shrinks geometrically until it
    underflows, and ``log 0`` would make the multiplier infinite.

    One histogram per chain (``energy_pdf`` has shape ``batch_shape + [m]``):
    chains stay independent. The same stochastic energy that places ``x_{k+1}``
    in its partition is the one in ``target_log_prob``: no extra evaluation, one
    gradient per step.

    Relation to BlackJAX's ``csgld``: ``step_size_diff = ε``, ``step_size_stoch
    = ω``, ``num_partitions = m``, ``energy_gap = Δu``, ``min_energy = u_min``,
    ``zeta = ζ``; BlackJAX's SA step multiplies by ``θ(J)`` rather than the
    paper's ``θ^ζ(J)`` (the same for ``ζ = 1``) and starts from a decreasing
    histogram instead of a uniform one.

    Args:
      estimator: gradient estimator (its ``target_log_prob`` is the energy).
      step_size: ``ε > 0`` (scalar, tensor or schedule).
      num_partitions: ``m ≥ 2``, a Python int (a static shape). Default value: ``100``.
      energy_gap: ``Δu > 0``. ``m Δu`` should cover the energies the chain
        visits. Default value: ``10.``.
      min_energy: ``u_min``, below the smallest energy of interest. Default value: ``0.``.
      zeta: ``ζ ≥ 0``, how strongly the density is flattened. Default value: ``0.75``.
      sa_step_size: ``ω`` in ``[0, 1)`` or a schedule. Default value: ``0.01``.
      temperature: ``T ≥ 0``. Default value: ``1.``.
      name: Default value: ``None`` (``'contour_sgld'``).

    Raises:
      ValueError: a non-int or ``< 2`` ``num_partitions``; non-positive
        ``energy_gap``; negative ``zeta``; non-finite ``min_energy``;
        ``energy_gap``, ``min_energy`` or ``zeta`` not a real scalar;
        ``sa_step_size`` outside ``[0, 1)``.

    #### References

    [1]: Wei Deng, Guang Lin and Faming Liang. A Contour Stochastic Gradient
         Langevin Dynamics Algorithm for Simulations of Multi-modal
         Distributions. In _NeurIPS_, 2020.
    """

    _results_type = CSGLDKernelResults
    _default_name = "contour_sgld"
    cli_name = "csgld"

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        num_partitions: int = 100,
        energy_gap: Any = 10.0,
        min_energy: Any = 0.0,
        zeta: Any = 0.75,
        sa_step_size: Any = 0.01,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        num_partitions = check_int(num_partitions, "num_partitions", 2)
        check_positive(energy_gap, "energy_gap", scalar=True)
        check_positive(zeta, "zeta", allow_zero=True, scalar=True)
        check_finite_tensor(min_energy, "min_energy", scalar=True)
        if not hasattr(sa_step_size, "parameters"):
            check_in_interval(sa_step_size, "sa_step_size", 0.0, 1.0, high_open=True, scalar=True)
        self._omega = as_schedule(sa_step_size, "sa_step_size", allow_zero=True)
        self._init_from_arguments(CSGLD, locals())

    num_partitions = RecordedArgument[int]("``m``, the energy partitions.")

    def _index(self, target_log_prob: tf.Tensor) -> tf.Tensor:
        p = self._parameters
        dtype = target_log_prob.dtype
        gap = cast_param(p["energy_gap"], dtype)
        u_min = cast_param(p["min_energy"], dtype)
        energy = -target_log_prob
        # A non-finite energy (a diverged chain) lands in the top partition.
        energy = tf.where(tf.math.is_finite(energy), energy, tf.fill(tf.shape(energy), dtype.max))
        j = tf.floor(tf.clip_by_value((energy - u_min) / gap, 0.0, p["num_partitions"] - 1.0))
        return tf.cast(j, tf.int32)

    def _log_flattening(
        self, pdf: tf.Tensor, index: tf.Tensor, target_log_prob: tf.Tensor
    ) -> tf.Tensor:
        """``ζ log Ψ_θ(U)``: the piecewise-linear interpolation of ``ζ log θ`` in the energy.

        ``log Ψ`` runs from ``log θ(J−1)`` at the lower edge of partition ``J``
        to ``log θ(J)`` at its upper edge (flat in partition 0 and above
        ``u_min + mΔu``), so its slope is exactly the bracket of the drift: the
        chain samples ``π^{1/T}/Ψ^ζ``.
        """
        p = self._parameters
        dtype = pdf.dtype
        zeta = cast_param(p["zeta"], dtype)
        gap = cast_param(p["energy_gap"], dtype)
        u_min = cast_param(p["min_energy"], dtype)
        hi, lo = _log_pdf_at(pdf, index)
        lower_edge = u_min + tf.cast(index, dtype) * gap
        # frac ∈ [0, 1] inside a partition; log Ψ is flat below u_min (both ends are
        # θ(0)) and above u_min + mΔu (frac = 1), where the drift is the plain score.
        frac = tf.clip_by_value((-target_log_prob - lower_edge) / gap, 0.0, 1.0)
        frac = tf.where(tf.math.is_finite(frac), frac, tf.ones_like(frac))
        return zeta * (lo + (hi - lo) * frac)

    def _init_extra(self, parts: list[tf.Tensor], est: GradientEstimate) -> dict[str, Any]:
        m = self._parameters["num_partitions"]
        dtype = parts[0].dtype
        batch_shape = tf.shape(est.target_log_prob)
        pdf = tf.fill(tf.concat([batch_shape, [m]], 0), tf.constant(1.0 / m, dtype))
        index = self._index(est.target_log_prob)
        return {
            "energy_pdf": pdf,
            "energy_index": index,
            "log_importance_weight": self._log_flattening(pdf, index, est.target_log_prob),
            "gradient_multiplier": tf.ones(batch_shape, dtype),
            "sa_step_size": tf.zeros([], dtype),
        }

    def _transition(self, parts, like, prev, step_size, seed):
        noise_seed, est_seed = self._split(seed, 2, "csgld.one_step")
        p = self._parameters
        dtype = parts[0].dtype
        temp = self._temperature(dtype, prev.step)
        gap = cast_param(p["energy_gap"], dtype)
        zeta = cast_param(p["zeta"], dtype)
        nb = prev.target_log_prob.shape.rank or 0
        pdf, j = prev.energy_pdf, prev.energy_index
        log_hi, log_lo = _log_pdf_at(pdf, j)
        slope = log_hi - log_lo
        # Above the top of the last partition the flattening stops (Ψ constant): a
        # falling histogram there would otherwise give an improper ϖ (a negative
        # multiplier all the way up) and the chain would run off to infinity.
        top = cast_param(p["min_energy"], dtype) + p["num_partitions"] * gap
        slope = tf.where(-prev.target_log_prob > top, tf.zeros_like(slope), slope)
        mult = 1.0 + zeta * temp * slope / gap
        noise = self._normals(parts, noise_seed, "csgld.noise")
        new_parts = []
        for q, g, xi in zip(parts, prev.grads_target_log_prob, noise):
            m_b = tf.reshape(
                mult, tf.concat([tf.shape(mult), tf.ones([q.shape.rank - nb], tf.int32)], 0)
            )
            new_parts.append(langevin_step(q, m_b * g, step_size, temp, xi))
        est, est_state = self._estimate(new_parts, like, prev.estimator_state, est_seed)
        # SA update of the histogram at the new state's partition.
        omega = tf.clip_by_value(self._omega(prev.step, dtype), 0.0, 1.0)
        j_new = self._index(est.target_log_prob)
        theta_j = tf.gather(pdf, j_new, batch_dims=nb)
        one_hot = tf.one_hot(j_new, p["num_partitions"], dtype=dtype)
        rate = (omega * tf.pow(theta_j, zeta))[..., tf.newaxis]
        new_pdf = pdf + rate * (one_hot - pdf)
        return (
            new_parts,
            est,
            est_state,
            {
                "energy_pdf": new_pdf,
                "energy_index": j_new,
                "log_importance_weight": self._log_flattening(new_pdf, j_new, est.target_log_prob),
                "gradient_multiplier": mult,
                "sa_step_size": omega,
            },
        )


def _log_pdf_at(pdf: tf.Tensor, index: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``log θ(J)`` and ``log θ(max(J − 1, 0))`` (floored at ``LOG_FLOOR``) per chain.

    Gathers before the log: two logarithms per chain instead of one per partition
    (the same values: the floor and the log act elementwise).
    """
    nb = index.shape.rank
    two = tf.stack(
        [
            tf.gather(pdf, index, batch_dims=nb),
            tf.gather(pdf, tf.maximum(index - 1, 0), batch_dims=nb),
        ]
    )
    logs = tf.math.log(tf.maximum(two, tf.constant(LOG_FLOOR, pdf.dtype)))
    return logs[0], logs[1]


def importance_weights(log_importance_weights: Any, axis: int = 0) -> tf.Tensor:
    """Normalised importance weights ``w_k / Σ_k w_k`` along ``axis`` (the samples).

    ``log_importance_weights`` is the traced ``log_importance_weight`` of
    `CSGLD` (shape ``[num_samples] + batch_shape``); the result
    gives ``E_π f ≈ Σ_k w_k f(x_k)``. Computed as a softmax, so large
    ``ζ log θ`` do not overflow.

    Raises:
      ValueError: the weights contain NaN or +Inf (statically known).
    """
    lw = tf.convert_to_tensor(log_importance_weights)
    if not lw.dtype.is_floating:
        raise TypeError(f"`log_importance_weights` must be floating point, got {lw.dtype.name}.")
    static = tf.get_static_value(lw)
    if static is not None and (np.isnan(static).any() or np.isposinf(static).any()):
        raise ValueError("`log_importance_weights` contains NaN or +Inf.")
    return tf.nn.softmax(lw, axis=axis)
