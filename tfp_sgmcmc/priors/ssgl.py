r"""The spike-and-slab group-lasso (SSGL) prior and its latent-variable updates.

Hierarchical prior of Deng, Zhang, Liang & Lin (2019) for a weight ``β_lj`` of a
*sparse* state part ``l`` (``p_l`` weights per chain; ``docs/algorithms.md#ssgl-prior``):

$$
\begin{aligned}
\beta_{lj} \mid \sigma^2, \gamma_{lj} &\sim (1 - \gamma_{lj})\, \mathrm{Laplace}(0, \sigma v_0)
    + \gamma_{lj}\, \mathcal{N}(0, \sigma^2 v_1) \qquad (\text{spike, slab}) \\
\gamma_{lj} \mid \delta_l &\sim \mathrm{Bernoulli}(\delta_l), \qquad
    \delta_l \sim \mathrm{Beta}(a, b), \qquad \sigma^2 \sim \mathrm{InvGamma}(\nu/2, \nu\lambda/2)
\end{aligned}
$$

The stochastic-approximation (SA) samplers integrate ``γ`` out through the
latent variables ``θ = (ρ, κ0, κ1, δ, σ)`` and sample ``β`` from (§8.2)

$$
Q_1(\beta) = \frac{N}{n} \log \pi(B \mid \beta, \sigma)
    - \sum_{\text{sparse}}
        \Big[\frac{\kappa_0 |\beta|}{\sigma} + \frac{\kappa_1 \beta^2}{2\sigma^2}\Big]
    - \frac{p + \nu + 2}{2} \log \sigma^2 - \frac{\nu\lambda}{2\sigma^2}
    \quad (+ \text{the dense parts' } \mathcal{N}(0, \sigma_0^2) \text{ prior})
$$

Given a new ``β``, the latent targets ``g_θ(β)`` are (main paper eqs. (12)–(15)):

$$
\begin{aligned}
&(12) & \tilde\rho_{lj} &= \frac{a_{lj}}{a_{lj} + b_{lj}}, \quad
    a_{lj} = \delta_l\, \mathcal{N}(\beta_{lj}; 0, \sigma^2 v_1), \quad
    b_{lj} = (1 - \delta_l)\, \mathrm{Laplace}(\beta_{lj}; 0, \sigma v_0) \\
&(13) & \tilde\kappa_{1,lj} &= \rho_{lj} / v_1, \quad \tilde\kappa_{0,lj} = (1 - \rho_{lj}) / v_0 \\
&(14) & \tilde\sigma &= \frac{R_b + \sqrt{R_b^2 + 4 R_a R_c}}{2 R_a}, \quad
    R_b = \textstyle\sum \kappa_0 |\beta|, \quad J = \textstyle\sum \kappa_1 \beta^2 \\
& & & \text{regression: } R_a = N + p + \nu, \ R_c = I + J + \nu\lambda, \
    I = \tfrac{N}{n} \textstyle\sum_{i \in B} (y_i - f(x_i))^2 \\
& & & \text{classification: } C_a = p + \nu + 2, \ C_c = J + \nu\lambda \\
&(15) & \tilde\delta_l &= \frac{\sum_j \rho_{lj} + a - 1}{a + b + p_l - 2}
\end{aligned}
$$

and each latent moves by ``x ← (1 − ω) x + ω x̃`` in the order of the authors' R
code: ρ, then κ from the *updated* ρ, then δ from the updated ρ, then σ from the
updated κ, with the SA average taken on ``σ²`` (``σ = √((1 − ω)σ² + ω σ̃²)``, the
R code; the poster averages σ: ``docs/algorithms.md#discrepancies``).

The E-step (12) is computed in **log space**, ``ρ̃ = sigmoid(log a − log b)``:
the reference code forms the densities themselves, and for ``|β| ≫ σ v0`` the
Laplace density underflows (and for large ``|β|`` both do), giving ``0/0``.
``sign(0) = 0`` is used as the subgradient of ``|β|``; ``δ`` is clipped to
``[tiny, 1 − tiny]`` so its logs stay finite when ``a < 1``.

Note on (14): maximising ``Q1`` over ``σ`` exactly gives ``R_a = N + p + ν + 2``;
the paper states ``N + p + ν`` for regression and ``p + ν + 2`` for
classification. We follow the paper (``docs/algorithms.md#sgld-sa-iteration``).

#### References

[1]: Wei Deng, Xiao Zhang, Faming Liang and Guang Lin. An Adaptive Empirical
     Bayesian Method for Sparse Deep Learning. In _NeurIPS_, 2019.
     https://arxiv.org/abs/1910.10791 (with supplementary material).
[2]: Veronika Ročková and Edward I. George. The Spike-and-Slab LASSO. _Journal
     of the American Statistical Association_, 113(521), 2018.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.internal.util import (
    PrettyNamedTupleMixin,
    cast_param,
    check_in_interval,
    static_value,
)

__all__ = ["SSGLLatents", "SpikeAndSlabGroupLasso", "SIGMA_FORMS"]

#: The two forms of the σ update (14).
SIGMA_FORMS = ("regression", "classification")


class SSGLLatents(
    PrettyNamedTupleMixin,
    collections.namedtuple(
        "SSGLLatents",
        [
            "rho",  # list (one per sparse part) of P(γ = 1 | β, δ), shape of the part
            "kappa0",  # list: L1 (spike) penalties (1 − ρ)/v0
            "kappa1",  # list: L2 (slab) penalties ρ/v1
            "delta",  # list: inclusion probability of each sparse part, shape batch_shape
            "sigma",  # σ, shape batch_shape
        ],
    ),
):
    """The SA latent variables ``θ = (ρ, κ0, κ1, δ, σ)``."""

    __slots__ = ()


def _static_pos(x: Any, name: str) -> float | None:
    v = static_value(x)
    if v is None:
        return None
    if v.ndim != 0 or not np.isfinite(v) or float(v) <= 0:
        raise ValueError(f"`{name}` must be a finite scalar > 0, got {v!r}.")
    return float(v)


class SpikeAndSlabGroupLasso:
    r"""The SSGL prior: hyperparameters, ``log`` prior term of ``Q1`` and latent updates.

    All methods are pure TF functions of their arguments (no state), batched
    over leading chain dimensions: a sparse part has shape ``batch_shape +
    event_shape`` with ``batch_ndims = len(batch_shape)``; ``σ`` and ``δ_l``
    have shape ``batch_shape``.

    Args:
      v0: spike scale ``v0 > 0`` (Laplace scale ``σ v0``).
      v1: slab variance factor ``v1 > v0`` (Gaussian variance ``σ² v1``).
        Default value: ``10.`` (the simulations' value).
      a: Beta ``a > 0``. Default value: ``1.``.
      b: Beta ``b > 0``, or ``None`` for ``b = p_l`` (the number of weights of
        each sparse part, as in the simulations' ``b = p``). Default value:
        ``None``.
      nu: inverse-gamma ``ν > 0``. Default value: ``1.``.
      lam: inverse-gamma ``λ > 0``. Default value: ``1.``.
      sigma_form: ``"regression"`` (``R_a = N + p + ν``, ``R_c`` includes the
        residual sum of squares ``I``) or ``"classification"`` (``C_a = p + ν +
        2``, no ``I``). Default value: ``"regression"``.

    Raises:
      ValueError: ``v0 ≤ 0``, ``v0 ≥ v1``, ``a ≤ 0``, ``b ≤ 0``, ``nu ≤ 0``,
        ``lam ≤ 0`` or an unknown ``sigma_form`` (the message names the argument).

    #### References

    [1]: Wei Deng, Xiao Zhang, Faming Liang and Guang Lin. An Adaptive
         Empirical Bayesian Method for Sparse Deep Learning. In _NeurIPS_, 2019.
    """

    def __init__(
        self,
        v0: Any,
        v1: Any = 10.0,
        a: Any = 1.0,
        b: Any = None,
        nu: Any = 1.0,
        lam: Any = 1.0,
        sigma_form: str = "regression",
    ) -> None:
        v0s = _static_pos(v0, "v0")
        v1s = _static_pos(v1, "v1")
        if v0s is not None and v1s is not None and v0s >= v1s:
            raise ValueError(
                f"`v0` ({v0s}) must be smaller than `v1` ({v1s}): the spike must be "
                "narrower than the slab."
            )
        _static_pos(a, "a")
        if b is not None:
            _static_pos(b, "b")
        _static_pos(nu, "nu")
        _static_pos(lam, "lam")
        if sigma_form not in SIGMA_FORMS:
            raise ValueError(f"`sigma_form` must be one of {SIGMA_FORMS}, got {sigma_form!r}.")
        self._params = dict(v0=v0, v1=v1, a=a, b=b, nu=nu, lam=lam, sigma_form=sigma_form)

    # -- configuration ---------------------------------------------------- #
    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self._params)

    @property
    def sigma_form(self) -> str:
        return self._params["sigma_form"]

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        return f"SpikeAndSlabGroupLasso({args})"

    def _c(self, name: str, dtype: tf.DType) -> tf.Tensor:
        return cast_param(self._params[name], dtype)

    @staticmethod
    def _event_axes(x: tf.Tensor, batch_ndims: int) -> list[int]:
        return list(range(batch_ndims, x.shape.rank))

    @staticmethod
    def _expand(s: tf.Tensor, like: tf.Tensor, batch_ndims: int) -> tf.Tensor:
        """Give a ``batch_shape`` tensor trailing unit dims to broadcast over ``like``."""
        return tf.reshape(
            s, tf.concat([tf.shape(s), tf.ones([like.shape.rank - batch_ndims], tf.int32)], 0)
        )

    @staticmethod
    def num_weights(part: tf.Tensor, batch_ndims: int) -> int:
        """``p_l``: the number of weights per chain in a sparse part (static)."""
        return int(np.prod(part.shape[batch_ndims:].as_list()))

    def _b(self, p_l: int, dtype: tf.DType) -> tf.Tensor:
        b = self._params["b"]
        return tf.constant(float(p_l), dtype) if b is None else cast_param(b, dtype)

    # -- log prior term of Q1 --------------------------------------------- #
    def log_prior(
        self, sparse_parts: Sequence[tf.Tensor], latents: SSGLLatents, batch_ndims: int = 0
    ) -> tf.Tensor:
        """The β-dependent and σ prior terms of ``Q1`` (shape ``batch_shape``).

        ``−Σ κ0|β|/σ − Σ κ1 β²/(2σ²) − ((p + ν + 2)/2) log σ² − νλ/(2σ²)``.
        """
        sigma = latents.sigma
        dtype = sigma.dtype
        total = tf.zeros_like(sigma)
        p = 0
        for beta, k0, k1 in zip(sparse_parts, latents.kappa0, latents.kappa1):
            s = self._expand(sigma, beta, batch_ndims)
            ax = self._event_axes(beta, batch_ndims)
            total -= tf.reduce_sum(k0 * tf.abs(beta) / s + k1 * tf.square(beta) / (2 * s * s), ax)
            p += self.num_weights(beta, batch_ndims)
        nu, lam = self._c("nu", dtype), self._c("lam", dtype)
        s2 = tf.square(sigma)
        return total - (p + nu + 2) / 2 * tf.math.log(s2) - nu * lam / (2 * s2)

    def grad_log_prior(
        self, sparse_parts: Sequence[tf.Tensor], latents: SSGLLatents, batch_ndims: int = 0
    ) -> list[tf.Tensor]:
        """``∂ log_prior/∂β = −κ0 sign(β)/σ − κ1 β/σ²`` per sparse part (closed form,
        ``sign(0) = 0``)."""
        out = []
        for beta, k0, k1 in zip(sparse_parts, latents.kappa0, latents.kappa1):
            s = self._expand(latents.sigma, beta, batch_ndims)
            out.append(-k0 * tf.sign(beta) / s - k1 * beta / (s * s))
        return out

    # -- E-step and latent targets ---------------------------------------- #
    def log_slab_and_spike(
        self, beta: tf.Tensor, sigma: tf.Tensor, delta: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """``log a = log δ + log N(β; 0, σ²v1)`` and ``log b = log(1−δ) + log Laplace(β; 0, σv0)``.

        ``sigma`` and ``delta`` must already broadcast against ``beta``.
        """
        dtype = beta.dtype
        v0, v1 = self._c("v0", dtype), self._c("v1", dtype)
        var1 = tf.square(sigma) * v1
        log_a = (
            tf.math.log(delta)
            - tf.square(beta) / (2 * var1)
            - 0.5 * tf.math.log(2 * math.pi * var1)
        )
        scale0 = sigma * v0
        log_b = tf.math.log1p(-delta) - tf.abs(beta) / scale0 - tf.math.log(2 * scale0)
        return log_a, log_b

    def e_step(
        self, beta: tf.Tensor, sigma: tf.Tensor, delta: tf.Tensor, batch_ndims: int = 0
    ) -> tf.Tensor:
        """``ρ̃ = P(γ = 1 | β, δ, σ) = sigmoid(log a − log b)`` (eq. (12), in log space).

        ``sigma`` and ``delta`` have shape ``batch_shape``.
        """
        s = self._expand(sigma, beta, batch_ndims)
        d = self._expand(delta, beta, batch_ndims)
        log_a, log_b = self.log_slab_and_spike(beta, s, d)
        return tf.math.sigmoid(log_a - log_b)

    def kappa_targets(self, rho: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """``(κ̃0, κ̃1) = ((1 − ρ)/v0, ρ/v1)`` (eq. (13))."""
        dtype = rho.dtype
        return (1 - rho) / self._c("v0", dtype), rho / self._c("v1", dtype)

    def delta_target(self, rho: tf.Tensor, batch_ndims: int = 0) -> tf.Tensor:
        """``δ̃ = (Σ_j ρ_j + a − 1)/(a + b + p_l − 2)`` (eq. (15)), clipped to ``(0, 1)``."""
        dtype = rho.dtype
        p_l = self.num_weights(rho, batch_ndims)
        a, b = self._c("a", dtype), self._b(p_l, dtype)
        d = (tf.reduce_sum(rho, self._event_axes(rho, batch_ndims)) + a - 1) / (a + b + p_l - 2)
        tiny = tf.constant(np.finfo(dtype.as_numpy_dtype).eps, dtype)
        return tf.clip_by_value(d, tiny, 1 - tiny)

    def sigma_target(
        self,
        sparse_parts: Sequence[tf.Tensor],
        kappa0: Sequence[tf.Tensor],
        kappa1: Sequence[tf.Tensor],
        num_examples: int | None = None,
        sse: tf.Tensor | None = None,
        batch_ndims: int = 0,
    ) -> tf.Tensor:
        """``σ̃`` of eq. (14), the positive root of ``R_a σ² − R_b σ − R_c = 0``.

        Args:
          sparse_parts: the sparse weights ``β``.
          kappa0: ``κ0`` per sparse part.
          kappa1: ``κ1`` per sparse part.
          num_examples: ``N`` (regression form only).
          sse: ``I = (N/n) Σ_{i∈B} (y_i − f(x_i))²`` of shape ``batch_shape``
            (regression form only).
          batch_ndims: number of leading chain dims. Default value: ``0``.
        """
        dtype = sparse_parts[0].dtype
        rb = 0.0
        j = 0.0
        p = 0
        for beta, k0, k1 in zip(sparse_parts, kappa0, kappa1):
            ax = self._event_axes(beta, batch_ndims)
            rb += tf.reduce_sum(k0 * tf.abs(beta), ax)
            j += tf.reduce_sum(k1 * tf.square(beta), ax)
            p += self.num_weights(beta, batch_ndims)
        nu, lam = self._c("nu", dtype), self._c("lam", dtype)
        if self.sigma_form == "regression":
            if num_examples is None or sse is None:
                raise ValueError(
                    "The regression form of the σ update needs `num_examples` and `sse`."
                )
            ra = tf.cast(num_examples + p, dtype) + nu
            rc = sse + j + nu * lam
        else:
            ra = tf.cast(p, dtype) + nu + 2
            rc = j + nu * lam
        return (rb + tf.sqrt(tf.square(rb) + 4 * ra * rc)) / (2 * ra)

    # -- the SA recursion -------------------------------------------------- #
    def sa_update(
        self,
        latents: SSGLLatents,
        sparse_parts: Sequence[tf.Tensor],
        omega: tf.Tensor,
        num_examples: int | None = None,
        sse: tf.Tensor | None = None,
        batch_ndims: int = 0,
    ) -> SSGLLatents:
        """One SA step ``θ ← (1 − ω) θ + ω g_θ(β)`` in the R code's order (ρ, κ, δ, σ²).

        ``ω = 1`` is the EM update (SGLD-EM), ``ω = 0`` leaves ``θ`` unchanged.
        ``omega`` (a Python number or a tensor of any float dtype) is taken in the
        latents' dtype; a statically known value must lie in ``[0, 1]``.
        """
        check_in_interval(omega, "omega", 0.0, 1.0)
        omega = cast_param(omega, latents.sigma.dtype)
        one = tf.ones([], omega.dtype)
        rho_new, k0_new, k1_new, delta_new = [], [], [], []
        for beta, rho, k0, k1, delta in zip(
            sparse_parts, latents.rho, latents.kappa0, latents.kappa1, latents.delta
        ):
            rho_t = self.e_step(beta, latents.sigma, delta, batch_ndims)
            rho = (one - omega) * rho + omega * rho_t
            k0_t, k1_t = self.kappa_targets(rho)
            k0 = (one - omega) * k0 + omega * k0_t
            k1 = (one - omega) * k1 + omega * k1_t
            delta = (one - omega) * delta + omega * self.delta_target(rho, batch_ndims)
            rho_new.append(rho)
            k0_new.append(k0)
            k1_new.append(k1)
            delta_new.append(delta)
        sigma_t = self.sigma_target(sparse_parts, k0_new, k1_new, num_examples, sse, batch_ndims)
        sigma = tf.sqrt((one - omega) * tf.square(latents.sigma) + omega * tf.square(sigma_t))
        return SSGLLatents(rho_new, k0_new, k1_new, delta_new, sigma)

    def initial_latents(
        self,
        sparse_parts: Sequence[tf.Tensor],
        batch_ndims: int = 0,
        rho: Any = 0.5,
        kappa0: Any = 1.0,
        kappa1: Any = 1.0,
        delta: Any = 0.5,
        sigma: Any = 1.0,
    ) -> SSGLLatents:
        """Constant initial latents shaped like ``sparse_parts`` (R code: ρ = δ = 0.5,
        κ0 = κ1 = σ = 1)."""
        if not sparse_parts:
            raise ValueError("`sparse_parts` must contain at least one sparse part.")
        dtype = sparse_parts[0].dtype
        batch_shape = tf.shape(sparse_parts[0])[:batch_ndims]

        def full(shape: tf.Tensor, v: Any) -> tf.Tensor:
            return tf.fill(shape, cast_param(v, dtype))

        return SSGLLatents(
            rho=[full(tf.shape(b), rho) for b in sparse_parts],
            kappa0=[full(tf.shape(b), kappa0) for b in sparse_parts],
            kappa1=[full(tf.shape(b), kappa1) for b in sparse_parts],
            delta=[full(batch_shape, delta) for _ in sparse_parts],
            sigma=full(batch_shape, sigma),
        )
