"""SG-MCMC with a Nosé-Hoover thermostat: SGNHT (Ding et al. 2014)."""

from __future__ import annotations

import collections
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator
from tfp_sgmcmc.integrators import sgnht_momentum_step, sgnht_thermostat_step
from tfp_sgmcmc.internal.util import cast_param, check_positive
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.tfp_wrappers import SGMCMCResultsMixin, sgmcmc_results_fields

__all__ = ["SGNHTKernelResults", "SGNHT"]


class SGNHTKernelResults(
    SGMCMCResultsMixin,
    collections.namedtuple("SGNHTKernelResults", sgmcmc_results_fields("momentum", "thermostat")),
):
    """Results of SGNHT: the common SG fields, ``momentum`` (``v``, list of parts) and
    ``thermostat`` (``α``, one per state part and chain: a list of batch-shaped tensors)."""

    __slots__ = ()


def initial_momentum_and_thermostat(
    parts: list[tf.Tensor], est: GradientEstimate, diffusion: Any
) -> dict[str, list[tf.Tensor]]:
    """Where the thermostat samplers (SGNHT, BADODAB) start: zero momentum per part and
    the thermostat at the diffusion ``A``, one value per part and chain."""
    batch_shape = tf.shape(est.target_log_prob)
    a = cast_param(diffusion, parts[0].dtype)
    return {
        "momentum": [tf.zeros_like(p) for p in parts],
        "thermostat": [tf.fill(batch_shape, a) for _ in parts],
    }


class SGNHT(SGMCMCKernel):
    r"""Stochastic gradient Nosé-Hoover thermostat (Ding et al. 2014).

    The MAMBA paper's App. D.2 form (with its typo ``x_{n+1} = x_{n+1} + v_n``
    corrected to the code's ``θ_{k+1} = θ_k + v_{k+1}``):

    $$
    \begin{aligned}
    v_0 &\sim \mathcal{N}(0, h T I) \text{ (drawn at the first step)}, \qquad \alpha_0 = a \\
    v_{k+1} &= v_k - \alpha_k v_k + h \nabla \log \tilde\pi(\theta_k) + \sqrt{2 a h T}\, \xi_k \\
    \theta_{k+1} &= \theta_k + v_{k+1} \\
    \alpha_{k+1} &= \alpha_k + v_{k+1}^\top v_{k+1} / D - h T
    \end{aligned}
    $$

    ``h = step_size``, ``a = diffusion`` (the MAMBA paper fixes 0.01),
    ``T = temperature`` (the thermostat then drives the kinetic energy per
    coordinate to ``hT``). Relation to Ding et al.'s Algorithm 2: ``v = pΔ``,
    ``α = ξΔ``, ``h = Δ²``, ``a = AΔ``.

    One thermostat per state part (and per chain), with ``D`` the number of
    entries of that part, as SGMCMCJax does per pytree leaf; a single-tensor
    state therefore has one global thermostat.

    Uncalibrated; the thermostat can turn negative and make ``v`` grow
    exponentially at large ``h`` (the MAMBA paper's BNN needed
    ``h ≤ 1e-5``); watch ``diverged``.

    Args:
      estimator: gradient estimator.
      step_size: ``h > 0`` (scalar or schedule).
      diffusion: ``a > 0``. Default value: ``0.01``.
      temperature: ``T ≥ 0``, a scalar or a schedule of the step (annealing).
        Default value: ``1.``.
      name: Default value: ``None`` (``'sgnht'``).

    #### References

    [1]: Nan Ding, Youhan Fang, Ryan Babbush, Changyou Chen, Robert D. Skeel
         and Hartmut Neven. Bayesian Sampling Using Stochastic Gradient
         Thermostats. In _NeurIPS_, 2014.
    [2]: Jeremie Coullon, Leah South and Christopher Nemeth. Efficient and
         generalizable tuning strategies for stochastic gradient MCMC.
         _Statistics and Computing_, 33: 66, 2023. App. D.2.
    """

    _results_type = SGNHTKernelResults
    _default_name = "sgnht"
    cli_name = "sgnht"

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        diffusion: Any = 0.01,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        check_positive(diffusion, "diffusion", scalar=True)
        super().__init__(estimator, step_size, temperature, name, diffusion=diffusion)

    def gradient_noise_coefficient(
        self, step_size: float, temperature: float
    ) -> tuple[float, bool] | None:
        """``r = h Var(ĝ) / (2aT)``, reported but not checked: the thermostat absorbs
        minibatch noise in expectation (Ding et al. 2014, Sec. 3)."""
        a = float(cast_param(self._parameters["diffusion"], tf.float64))
        return step_size / (2.0 * a * temperature), False

    def _init_extra(self, parts: list[tf.Tensor], est: GradientEstimate) -> dict[str, Any]:
        return initial_momentum_and_thermostat(parts, est, self._parameters["diffusion"])

    def _transition(self, parts, like, prev, step_size, seed):
        v_seed, noise_seed, est_seed = self._split(seed, 3, "sgnht.one_step")
        dtype = parts[0].dtype
        temp = self._temperature(dtype, prev.step)
        a = cast_param(self._parameters["diffusion"], dtype)  # exact in float64
        nb = prev.target_log_prob.shape.rank or 0

        def fresh() -> list[tf.Tensor]:
            return [tf.sqrt(step_size * temp) * z for z in self._normals(parts, v_seed, "v0")]

        v = tf.cond(prev.step == 0, fresh, lambda: list(prev.momentum))
        noise = self._normals(parts, noise_seed, "xi")
        new_v, new_alpha, new_parts = [], [], []
        for p, vi, al, g, xi in zip(
            parts, v, prev.thermostat, prev.grads_target_log_prob, noise
        ):
            event_ndims = p.shape.rank - nb
            al_b = tf.reshape(al, tf.concat([tf.shape(al), tf.ones([event_ndims], tf.int32)], 0))
            vi = sgnht_momentum_step(vi, al_b, g, step_size, a, temp, xi)
            new_v.append(vi)
            new_parts.append(p + vi)
            new_alpha.append(sgnht_thermostat_step(al, vi, step_size, temp, event_ndims))
        est, est_state = self._estimate(new_parts, like, prev.estimator_state, est_seed)
        return new_parts, est, est_state, {"momentum": new_v, "thermostat": new_alpha}
