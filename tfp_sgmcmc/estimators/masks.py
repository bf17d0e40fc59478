r"""Mask laws of the structured-dropout energy (Sd-SGMCMC), drawn by TFP distributions.

Each step of [`StructuredDropoutEstimator`][tfp_sgmcmc.estimators.StructuredDropoutEstimator]
draws ``K`` masks ``r^{(k)} \in [0, 1]^M`` with i.i.d. entries (over masks, groups and
chains) and scales the likelihood by ``1/(K\,\mathbb{E}[r])`` (Alexos, Boyd & Mandt [1],
eq. (8); ``docs/algorithms.md#sd-sgmcmc``):

* [`BernoulliMask`][tfp_sgmcmc.estimators.BernoulliMask]: ``r_i \sim \text{Bernoulli}(\rho)``,
  ``\mathbb{E}[r] = \rho`` (the probability of KEEPING the live value);
* [`UniformMask`][tfp_sgmcmc.estimators.UniformMask]: ``r_i \sim U[0, 1] = \text{Beta}(1, 1)``,
  ``\mathbb{E}[r] = 1/2`` (the paper's text says Beta(½, ½), its code draws uniforms);
* [`BetaMask`][tfp_sgmcmc.estimators.BetaMask]: ``r_i \sim \text{Beta}(\alpha, \beta)``,
  ``\mathbb{E}[r] = \alpha/(\alpha+\beta)``.

The draws are ``tfd.Bernoulli``/``tfd.Uniform``/``tfd.Beta`` samples from a stateless
``[2]`` seed, which compile under ``tf.function(jit_compile=True)`` and give the same
draws for the same seed. Bernoulli and uniform masks are drawn from
``philox_uniform``, TensorFlow's eager Philox uniforms reproduced bit for bit, so eager,
graph and XLA runs draw the same masks; ``tfd.Beta``'s gamma sampler draws other numbers
under XLA. ``benchmarks/bench_masks.py`` compared them with hand-written
samplers (``docs/benchmarks.md``, Mask draws): Bernoulli and uniform draws are the same
numbers at the same cost, and a Beta drawn as a ratio of ``tf.random.stateless_gamma``
draws does not compile under XLA on CPU at all (no XLA kernel for the stateless gamma),
while ``tfd.Beta`` does.

#### References

[1]: Antonios Alexos, Alex Boyd and Stephan Mandt. Structured Stochastic
     Gradient MCMC. In _ICML_, 2022. https://arxiv.org/abs/2107.09028
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.internal.random import philox_uniform
from tfp_sgmcmc.internal.util import AttributeView

__all__ = ["MaskDistribution", "BernoulliMask", "UniformMask", "BetaMask"]

tfd = tfp.distributions


def _positive_float(value: Any, name: str, upper: float | None = None) -> float:
    """``value`` as a finite float in ``(0, upper]`` (or ``(0, ∞)``); a named ``ValueError``."""
    bound = "a finite float > 0" if upper is None else f"a float in (0, {upper:g}]"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"`{name}` must be {bound}, got {value!r}.")
    v = float(value)
    if not (np.isfinite(v) and v > 0 and (upper is None or v <= upper)):
        raise ValueError(f"`{name}` must be {bound}, got {value!r}.")
    return v


class MaskDistribution(abc.ABC):
    """Law of one group's mask value ``r_i ∈ [0, 1]`` (i.i.d. over groups, masks, chains).

    A subclass gives ``mean`` and either ``distribution`` (a TFP distribution
    whose samples are the masks) or ``sample``.
    """

    @property
    @abc.abstractmethod
    def mean(self) -> float:
        """``E[r_i]``; the Sd scaling is ``M/(K·E[Σr]) = 1/(K·mean)``."""

    def distribution(self, dtype: tf.DType) -> tfd.Distribution:
        """The law of one mask value as a scalar TFP distribution of ``dtype``."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement `distribution(dtype)` or `sample`."
        )

    def sample(self, shape: list[int], seed: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        """Masks of the given shape from a stateless ``[2]`` seed (XLA-compatible)."""
        return self.distribution(dtype).sample(shape, seed=seed)


class BernoulliMask(MaskDistribution):
    """``r_i ~ Bernoulli(ρ)``; ``ρ`` is the probability of KEEPING the live value.

    ``ρ = 1`` reproduces plain SG-MCMC; ``ρ → 0`` tends to S-SGMCMC (paper Thm 2).

    Args:
      keep_prob: ``ρ ∈ (0, 1]``.

    Raises:
      ValueError: ``keep_prob`` outside ``(0, 1]``.
    """

    def __init__(self, keep_prob: float) -> None:
        self.keep_prob = _positive_float(keep_prob, "keep_prob", upper=1.0)

    mean = AttributeView[float]("keep_prob")

    def distribution(self, dtype: tf.DType) -> tfd.Distribution:
        # Samples are `uniform < ρ` cast to `dtype`, so ρ = 1 keeps every value.
        return tfd.Bernoulli(probs=tf.constant(self.keep_prob, dtype), dtype=dtype)

    def sample(self, shape: list[int], seed: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        """``tfd.Bernoulli``'s draws (``u < ρ``), from uniforms that XLA draws alike."""
        u = philox_uniform(shape, seed, dtype)
        return tf.cast(u < tf.constant(self.keep_prob, dtype), dtype)

    def __repr__(self) -> str:
        return f"BernoulliMask(keep_prob={self.keep_prob})"


class BetaMask(MaskDistribution):
    """``r_i ~ Beta(α, β)`` (continuous masks: composites are convex combinations).

    Args:
      concentration1: ``α > 0``.
      concentration0: ``β > 0``.

    Raises:
      ValueError: a non-positive or non-finite concentration.
    """

    def __init__(self, concentration1: float, concentration0: float) -> None:
        self.concentration1 = _positive_float(concentration1, "concentration1")
        self.concentration0 = _positive_float(concentration0, "concentration0")

    @property
    def mean(self) -> float:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    def distribution(self, dtype: tf.DType) -> tfd.Distribution:
        return tfd.Beta(
            tf.constant(self.concentration1, dtype), tf.constant(self.concentration0, dtype)
        )

    def __repr__(self) -> str:
        return f"BetaMask({self.concentration1}, {self.concentration0})"


class UniformMask(BetaMask):
    """``r_i ~ U[0, 1] = Beta(1, 1)`` (``E[r] = 1/2``; the paper mislabels it Beta(½, ½))."""

    def __init__(self) -> None:
        super().__init__(1.0, 1.0)

    def distribution(self, dtype: tf.DType) -> tfd.Distribution:
        # One uniform per value instead of two gamma draws: the same law, cheaper.
        return tfd.Uniform(tf.constant(0.0, dtype), tf.constant(1.0, dtype))

    def sample(self, shape: list[int], seed: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        """``tfd.Uniform(0, 1)``'s draws, from uniforms that XLA draws alike."""
        return philox_uniform(shape, seed, dtype)

    def __repr__(self) -> str:
        return "UniformMask()"
