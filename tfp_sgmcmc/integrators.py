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
    "ornstein_uhlenbeck_step",
    "adaptive_thermostat_half_step",
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


def ornstein_uhlenbeck_step(
    momentum: tf.Tensor,
    friction: tf.Tensor,
    noise_rate: tf.Tensor,
    step_size: tf.Tensor,
    noise: tf.Tensor,
) -> tf.Tensor:
    """Exact solution over time ``h`` of ``dp = −γ p dt + σ dW`` (the "O" of BAOAB/BADODAB).

    ```none
    p' = e^{−γh} p + σ √((1 − e^{−2γh}) / (2γ)) ξ          (σ √h ξ when γ = 0)
    ```

    ``γ = friction`` (a constant for BAOAB, the thermostat ``ξ`` for BADODAB,
    broadcast over the part; any sign), ``σ² = noise_rate``, ``h = step_size``.
    With ``σ² = 2γT`` (BAOAB) the variance is ``T (1 − e^{−2γh})``
    (Leimkuhler & Matthews 2013, eq. (9)). The factor ``(1 − e^{−x})/x`` is
    evaluated with ``expm1`` and its limit ``1`` near ``x = 0``.
    """
    x = 2.0 * friction * step_size
    small = tf.abs(x) < 1e-6
    x_safe = tf.where(small, tf.ones_like(x), x)
    phi = tf.where(small, 1.0 - 0.5 * x, -tf.math.expm1(-x_safe) / x_safe)
    return tf.exp(-friction * step_size) * momentum + tf.sqrt(noise_rate * step_size * phi) * noise


def adaptive_thermostat_half_step(
    thermostat: tf.Tensor,
    momentum: tf.Tensor,
    step_size: tf.Tensor,
    thermostat_mass: tf.Tensor,
    temperature: tf.Tensor,
    event_ndims: int,
) -> tf.Tensor:
    """Half step of the adaptive-Langevin thermostat (the "D" of BADODAB).

    ```none
    ξ' = ξ + (h / 2μ) (pᵀp − D T)
    ```

    (Leimkuhler & Shang 2016, eq. (2.3) with unit mass), ``D`` the number of
    entries in the part's last ``event_ndims`` axes, ``μ = thermostat_mass``.
    """
    axes = list(range(-event_ndims, 0)) if event_ndims else []
    sq = tf.square(momentum)
    ke = tf.reduce_sum(sq, axis=axes) if axes else sq
    size = tf.cast(tf.reduce_prod(tf.shape(momentum)[momentum.shape.rank - event_ndims :]),
                   momentum.dtype)
    return thermostat + (0.5 * step_size / thermostat_mass) * (ke - size * temperature)

