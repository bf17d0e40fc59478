"""Pure one-step update rules of the SG samplers.

Each function maps tensors to tensors for one state part. None draws random
numbers: the kernel passes standard normal ``noise`` drawn from its seed,
which makes every rule testable against a hand-computed step. Samplers ascend
``log π`` (``grad = ∇ log π̃``, TFP's sign). ``temperature`` ``T`` multiplies the
injected noise variance (``T = 1``: the posterior; ``T = 0``: the
deterministic optimiser).

Step-size convention: the ε form of SGMCMCJax and the MAMBA tables,
``θ' = θ + ε ∇log π̃ + √(2εT) ξ``. The ``h`` form of Welling & Teh,
``θ' = θ + (h/2) ∇log π̃ + √h ξ``, is the same with ``h = 2ε``.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = [
    "langevin_step",
    "sghmc_momentum_step",
    "sgnht_momentum_step",
    "sgnht_thermostat_step",
]


def langevin_step(
    position: tf.Tensor,
    drift: tf.Tensor,
    step_size: tf.Tensor,
    temperature: tf.Tensor,
    noise: tf.Tensor,
    preconditioner: tf.Tensor | None = None,
) -> tf.Tensor:
    r"""Preconditioned Euler-Maruyama step of overdamped Langevin dynamics.

    $$
    \theta' = \theta + \varepsilon G \odot d + \sqrt{2 \varepsilon T G} \odot \xi
    $$

    with ``d`` the drift (the stochastic score for SGLD; score plus an adaptive
    bias for MSGLD/ASGLD), ``G`` a diagonal preconditioner (``1`` for SGLD; the
    RMSprop diagonal for pSGLD, whose divergence term Γ is dropped as in Li et
    al. 2016), ``ξ = noise ~ N(0, I)``.
    """
    scale = 2.0 * step_size * temperature
    if preconditioner is None:
        return position + step_size * drift + tf.sqrt(scale) * noise
    return position + step_size * preconditioner * drift + tf.sqrt(scale * preconditioner) * noise


def sghmc_momentum_step(
    momentum: tf.Tensor,
    grad: tf.Tensor,
    step_size: tf.Tensor,
    friction: tf.Tensor,
    noise_estimate: tf.Tensor,
    temperature: tf.Tensor,
    noise: tf.Tensor,
) -> tf.Tensor:
    r"""SGHMC momentum update of Chen, Fox & Guestrin (2014), eq. (15).

    $$
    v' = v + \eta \nabla \log \tilde\pi - \alpha v + \sqrt{2 (\alpha - \hat\beta) \eta T}\, \xi
    $$

    ``η = step_size`` (learning rate), ``α = friction``, ``β̂ = noise_estimate``
    (requires ``α ≥ β̂``); the position update ``θ' = θ + v`` is a plain sum.
    """
    var = 2.0 * (friction - noise_estimate) * step_size * temperature
    return momentum + step_size * grad - friction * momentum + tf.sqrt(var) * noise


def sgnht_momentum_step(
    momentum: tf.Tensor,
    thermostat: tf.Tensor,
    grad: tf.Tensor,
    step_size: tf.Tensor,
    diffusion: tf.Tensor,
    temperature: tf.Tensor,
    noise: tf.Tensor,
) -> tf.Tensor:
    r"""SGNHT momentum update (Ding et al. 2014 as in the MAMBA paper, App. D.2).

    $$
    v' = v - \alpha v + h \nabla \log \tilde\pi + \sqrt{2 a h T}\, \xi
    $$

    ``α = thermostat`` (broadcast over the part's event dimensions),
    ``h = step_size``, ``a = diffusion``. The position update is ``θ' = θ + v'``.
    """
    return (
        momentum
        - thermostat * momentum
        + step_size * grad
        + tf.sqrt(2.0 * diffusion * step_size * temperature) * noise
    )


def sgnht_thermostat_step(
    thermostat: tf.Tensor,
    momentum: tf.Tensor,
    step_size: tf.Tensor,
    temperature: tf.Tensor,
    event_ndims: int,
) -> tf.Tensor:
    """SGNHT thermostat update: ``α' = α + vᵀv / D − h T``.

    ``D`` is the number of entries in the part's event dimensions (its last
    ``event_ndims`` axes); the thermostat drives the mean kinetic energy per
    coordinate, ``vᵀv/D``, to ``h T`` (``h`` for the posterior).
    """
    axes = list(range(-event_ndims, 0)) if event_ndims else []
    sq = tf.square(momentum)
    ke = tf.reduce_mean(sq, axis=axes) if axes else sq
    return thermostat + ke - step_size * temperature
