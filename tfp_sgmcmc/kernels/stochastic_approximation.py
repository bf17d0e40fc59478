r"""Stochastic-approximation SG-MCMC (SGLD-SA, SGHMC-SA) with the SSGL prior.

Deng, Zhang, Liang & Lin (2019) sample the weights ``β`` of a sparse model with
an SG sampler while the latent variables ``θ = (ρ, κ0, κ1, δ, σ)`` of the
spike-and-slab group-lasso prior follow a stochastic-approximation (SA)
recursion (``docs/algorithms.md#sgld-sa-iteration``; supplement §2.1, eqs. (3)–(4)):

$$
\begin{aligned}
\beta_{k+1} &= \text{inner SG step on } \tilde Q_1(\beta; \theta_k)
    \qquad (\text{SGLD: } \beta + \varepsilon \nabla \tilde Q_1 + \sqrt{2 \varepsilon T}\, \xi) \\
\theta_{k+1} &= (1 - \omega_{k+1})\, \theta_k + \omega_{k+1}\, g_{\theta_k}(\beta_{k+1})
    \qquad (\rho, \kappa, \delta, \sigma^2 \text{ in this order; eqs. (12)–(15)})
\end{aligned}
$$

[`StochasticApproximation`][tfp_sgmcmc.kernels.stochastic_approximation.StochasticApproximation] is
a ``tfp.mcmc.TransitionKernel`` that wraps
**any** of our SG kernels (SGLD, pSGLD, SGHMC, SGNHT, ...) built on an
[`SSGLEstimator`][tfp_sgmcmc.priors.SSGLEstimator]:

* **How the energy sees the latents.** ``θ`` lives in the estimator state
  (``inner_results.estimator_state.latents``), which every SG kernel already
  threads from step to step and hands back to its estimator, so new latent
  values enter ``Q1`` as tensors inside the compiled loop: nothing retraces.
  After the inner step (which evaluated the minibatch likelihood gradient once,
  at ``β_{k+1}`` with ``θ_k``), the wrapper updates ``θ`` and calls
  ``estimator.refresh``, which re-assembles ``∇Q̃1(β_{k+1}; θ_{k+1})`` from the
  cached likelihood gradient (divided by the new σ² for regression) and the
  closed-form prior gradient. So each step still costs **one** likelihood
  gradient, and the score the inner kernel uses next is the one of the current
  latents, as in the authors' code. The residual sum of squares ``I`` of the σ
  update (14) comes from the same minibatch.
* **Settings, one argument apart.** ``sa_step_size`` is ω: an
  [`SAStepSize`][tfp_sgmcmc.schedules.SAStepSize] ``A(k + B)^(−α)`` gives SGLD-SA /
  SGHMC-SA; ``ω ≡ 1`` gives SGLD-EM / SGHMC-EM (θ jumps to ``g_θ(β)`` every
  step); ``ω ≡ 0`` freezes θ at its initial value, which with the estimator's
  initial ``κ0 = κ1 = σ = 1`` is the paper's vanilla SGLD baseline (a fixed
  ``−Σ|β| − Σβ²/2`` prior). ω is clipped to ``[0, 1]`` so the recursion stays a
  convex combination (ρ, δ stay probabilities).
* **Temperature.** The inner kernel's ``temperature`` ``T`` multiplies the noise
  variance; Deng's ``τ`` is an inverse temperature, ``T = 1/τ``; simulated
  annealing ``τ_k = τ_0 c^k`` is [`GeometricAnnealing`][tfp_sgmcmc.schedules.GeometricAnnealing]
  (passed as the inner kernel's ``temperature``).
* **SGHMC-SA.** Deng et al. use the "SGD with momentum" form of SGHMC
  (``docs/algorithms.md#sghmc-momentum-form``): ``v ← μv + η∇Q̃1(β) + N(0, 2η(α − β̂)/τ)``,
  ``β ← β + v``, ``α = 1 − μ``, ``β̂ = ½Vη``, no momentum resampling. Our
  [`SGHMC`][tfp_sgmcmc.kernels.SGHMC] with ``order="chen"``,
  ``momentum_refresh=False``, ``num_leapfrog_steps=1`` is the same recursion
  (``β_{k+1} = β_k + v_k``, ``v_{k+1} = (1 − α)v_k + η∇Q̃1(β_{k+1}) + noise``)
  with ``step_size = η``, ``friction = 1 − μ``, ``noise_estimate = β̂``,
  ``temperature = 1/τ``; only the first step differs (our momentum starts
  at ``N(0, ηT)`` instead of 0).
  [`deng_sghmc`][tfp_sgmcmc.kernels.stochastic_approximation.deng_sghmc] builds it.

#### References

[1]: Wei Deng, Xiao Zhang, Faming Liang and Guang Lin. An Adaptive Empirical
     Bayesian Method for Sparse Deep Learning. In _NeurIPS_, 2019.
     https://arxiv.org/abs/1910.10791
[2]: Albert Benveniste, Michel Métivier and Pierre Priouret. _Adaptive
     Algorithms and Stochastic Approximations_. Springer, 1990.
[3]: Yunus Saatci and Andrew Gordon Wilson. Bayesian GAN. In _NeurIPS_, 2017.
"""

from __future__ import annotations

import collections
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.internal.util import (
    AttributeView,
    RecordedArgument,
    as_parts,
    check_in_interval,
    check_positive,
    static_value,
)
from tfp_sgmcmc.kernels.arguments import as_schedule, check_sa_schedule
from tfp_sgmcmc.kernels.base import ParameterizedKernel, SGMCMCKernel
from tfp_sgmcmc.kernels.hamiltonian import SGHMC
from tfp_sgmcmc.kernels.tfp_wrappers import SGMCMCResultsMixin
from tfp_sgmcmc.priors.estimator import SSGLEstimator
from tfp_sgmcmc.priors.ssgl import SSGLLatents
from tfp_sgmcmc.schedules import StepSizeSchedule

__all__ = [
    "StochasticApproximation",
    "StochasticApproximationKernelResults",
    "deng_sghmc",
]


class StochasticApproximationKernelResults(
    SGMCMCResultsMixin,
    collections.namedtuple(
        "StochasticApproximationKernelResults",
        [
            "inner_results",  # the inner SG kernel's results (its estimator_state holds θ)
            "latents",  # SSGLLatents θ after this step (same values as in inner_results)
            "sa_step_size",  # ω used by this step (0 at bootstrap)
            "step",  # number of completed steps
            "diverged",  # inner divergence or non-finite / non-positive σ, non-finite δ
        ],
    ),
):
    __slots__ = ()


class StochasticApproximation(ParameterizedKernel):
    r"""SG sampler on ``β`` alternated with the SA update of the SSGL latents.

    One step (Deng et al. 2019, Algorithm 1; ``docs/algorithms.md#sgld-sa-iteration``):

    $$
    \begin{aligned}
    \beta_{k+1} &= \texttt{inner\_kernel.one\_step}(\beta_k)
        \qquad (\text{score } \nabla \tilde Q_1(\beta; \theta_k), \text{ one minibatch}) \\
    \rho &\leftarrow (1-\omega)\rho + \omega \tilde\rho(\beta_{k+1}), \quad
    \kappa \leftarrow (1-\omega)\kappa + \omega \tilde\kappa(\rho), \quad
    \delta \leftarrow (1-\omega)\delta + \omega \tilde\delta(\rho), \\
    \sigma^2 &\leftarrow (1-\omega)\sigma^2 + \omega \tilde\sigma^2(\beta_{k+1}, \kappa, I),
    \qquad \omega = \omega_{k+1} = \texttt{sa\_step\_size}(k)
    \end{aligned}
    $$

    Args:
      inner_kernel: an [`SGMCMCKernel`][tfp_sgmcmc.kernels.SGMCMCKernel] whose
        ``estimator`` is an [`SSGLEstimator`][tfp_sgmcmc.priors.SSGLEstimator].
      sa_step_size: ω: a schedule (e.g. [`SAStepSize`][tfp_sgmcmc.schedules.SAStepSize])
        or a scalar in ``[0, 1]`` (``1.`` = SGLD-EM, ``0.`` = fixed latents,
        i.e. plain SGLD with the initial κ, σ).
      require_decay: if ``True``, ``sa_step_size`` must be a decaying SA
        schedule (``ω_k → 0``, ``Σ ω_k = ∞``). Default value: ``False``.
      name: Default value: ``None`` (``'stochastic_approximation'``).

    Raises:
      ValueError: ``inner_kernel`` is not an SG kernel on an ``SSGLEstimator``;
        a static scalar ``sa_step_size`` outside ``[0, 1]``; a non-decaying
        ``sa_step_size`` with ``require_decay=True``.

    #### Examples

    SGLD-SA on a sparse linear regression (p = 50 coefficients, three non-zero):

    ```python
    import numpy as np, tensorflow as tf, tensorflow_probability as tfp
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.kernels import StochasticApproximation

    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 50)).astype("float32")
    beta = np.zeros(50, "float32"); beta[:3] = [3., 2., 1.]
    y = (x @ beta + rng.standard_normal(200)).astype("float32")

    prior = sg.SpikeAndSlabGroupLasso(v0=0.1, v1=10., b=None)
    est = sg.SSGLEstimator(prior, (x, y), batch_size=100,
                           residual_fn=lambda b, d: d[1] - tf.linalg.matvec(d[0], b))
    inner = sg.SGLD(est, step_size=sg.PolynomialDecay(1e-3, 0., 1/3, one_based=True))
    sgld_sa = StochasticApproximation(inner, sg.SAStepSize(1000., 100., 0.7, cap=0.1))
    sgld_em = StochasticApproximation(inner, 1.)   # ω ≡ 1: SGLD-EM
    sgld = StochasticApproximation(inner, 0.)      # ω ≡ 0: plain SGLD, fixed latents
    run = tf.function(jit_compile=True)(lambda seed: tfp.mcmc.sample_chain(
        200, tf.zeros(50), kernel=sgld_sa, trace_fn=None, seed=seed))
    samples = run(tf.constant([0, 42]))
    ```

    #### References

    [1]: Wei Deng, Xiao Zhang, Faming Liang and Guang Lin. An Adaptive
         Empirical Bayesian Method for Sparse Deep Learning. In _NeurIPS_, 2019.
    """

    _default_name = "stochastic_approximation"

    def __init__(
        self,
        inner_kernel: SGMCMCKernel,
        sa_step_size: Any,
        require_decay: bool = False,
        name: str | None = None,
    ) -> None:
        if not isinstance(inner_kernel, SGMCMCKernel):
            raise ValueError(
                f"`inner_kernel` must be an SGMCMCKernel, got {type(inner_kernel).__name__}."
            )
        if not isinstance(inner_kernel.estimator, SSGLEstimator):
            raise ValueError(
                "`inner_kernel` must be built on an SSGLEstimator (its prior reads the "
                f"latents), got {type(inner_kernel.estimator).__name__}."
            )
        if require_decay:
            self._omega: StepSizeSchedule = check_sa_schedule(sa_step_size, "sa_step_size")
        else:
            if not isinstance(sa_step_size, StepSizeSchedule):
                check_in_interval(sa_step_size, "sa_step_size", 0.0, 1.0, scalar=True)
            self._omega = as_schedule(sa_step_size, "sa_step_size", allow_zero=True)
        self._parameters = dict(
            inner_kernel=inner_kernel,
            sa_step_size=sa_step_size,
            require_decay=bool(require_decay),
            name=name,
        )

    # -- TransitionKernel API ------------------------------------------------ #
    inner_kernel = RecordedArgument[SGMCMCKernel]("The wrapped SG kernel.")
    sa_step_size = RecordedArgument[Any]("``ω_k`` as given: a scalar, tensor or schedule.")

    estimator = AttributeView[SSGLEstimator]("inner_kernel.estimator")

    gradient_evaluations_per_step = AttributeView[int]("inner_kernel.gradient_evaluations_per_step")

    def bootstrap_results(
        self, init_state: Any, seed: Any = None
    ) -> StochasticApproximationKernelResults:
        """The inner kernel's bootstrap; latents at their initial values."""
        with tf.name_scope(f"{self.name}/bootstrap_results"):
            inner = self.inner_kernel.bootstrap_results(init_state, seed)
            lat = inner.estimator_state.latents
            return StochasticApproximationKernelResults(
                inner_results=inner,
                latents=lat,
                sa_step_size=tf.zeros([], lat.sigma.dtype),
                step=tf.constant(0, tf.int32),
                diverged=tf.logical_or(inner.diverged, self._latents_bad(lat)),
            )

    def one_step(
        self,
        current_state: Any,
        previous_kernel_results: StochasticApproximationKernelResults,
        seed: Any = None,
    ) -> tuple[Any, StochasticApproximationKernelResults]:
        """Inner SG step on β, then the SA update of θ at the new β."""
        with tf.name_scope(f"{self.name}/one_step"):
            prev = previous_kernel_results
            new_state, inner = self.inner_kernel.one_step(current_state, prev.inner_results, seed)
            est = self.estimator
            est_state = inner.estimator_state
            dtype = est_state.latents.sigma.dtype
            omega = tf.clip_by_value(self._omega(prev.step, dtype), 0.0, 1.0)
            sparse, _ = est.split_parts(as_parts(new_state))
            latents = est.prior.sa_update(
                est_state.latents,
                sparse,
                omega,
                num_examples=est.num_examples if est.is_regression else None,
                sse=est_state.sse if est.is_regression else None,
                batch_ndims=est.batch_ndims,
            )
            est_state = est_state._replace(latents=latents)
            estimate = est.refresh(new_state, est_state)
            inner = inner._replace(
                estimator_state=est_state,
                target_log_prob=estimate.target_log_prob,
                grads_target_log_prob=estimate.grads_target_log_prob,
            )
            diverged = tf.logical_or(inner.diverged, self._latents_bad(latents))
            diverged = tf.logical_or(
                diverged, tf.logical_not(tf.math.is_finite(estimate.target_log_prob))
            )
            inner = inner._replace(diverged=diverged)
            return new_state, StochasticApproximationKernelResults(
                inner_results=inner,
                latents=latents,
                sa_step_size=omega,
                step=prev.step + 1,
                diverged=diverged,
            )

    @staticmethod
    def _latents_bad(lat: SSGLLatents) -> tf.Tensor:
        ok = tf.logical_and(tf.math.is_finite(lat.sigma), lat.sigma > 0)
        for d in lat.delta:
            ok = tf.logical_and(ok, tf.math.is_finite(d))
        return tf.logical_not(ok)

    def __repr__(self) -> str:
        return (
            f"StochasticApproximation(inner_kernel={self.inner_kernel!r}, "
            f"sa_step_size={self.sa_step_size!r})"
        )


def deng_sghmc(
    estimator: SSGLEstimator,
    learning_rate: Any,
    momentum: float = 0.9,
    gradient_noise_variance: float | None = 1.0,
    temperature: Any = 1.0,
    name: str | None = None,
) -> SGHMC:
    r"""SGHMC in the "SGD with momentum" form used by Deng et al.
    (``docs/algorithms.md#sghmc-momentum-form``).

    $$
    v \leftarrow \mu v + \eta \nabla \tilde Q_1(\beta)
        + \mathcal{N}\big(0, 2\eta(\alpha - \hat\beta) T\big),
    \quad \beta \leftarrow \beta + v, \quad \alpha = 1 - \mu, \quad \hat\beta = \tfrac12 V \eta
    $$

    returned as our [`SGHMC`][tfp_sgmcmc.kernels.SGHMC] with
    ``step_size = η``,
    ``friction = 1 − μ``, ``noise_estimate = β̂``, ``momentum_refresh=False``,
    ``order="chen"``, one leapfrog step (the two recursions coincide after the
    first step; see the module docstring). ``T = temperature = 1/τ`` (Deng's
    inverse temperature ``τ``; pass a
    [`GeometricAnnealing`][tfp_sgmcmc.schedules.GeometricAnnealing]
    for the annealed "A-" variants).

    Args:
      estimator: the SSGL estimator.
      learning_rate: ``η > 0`` (scalar; with a schedule ``β̂`` is set to 0).
      momentum: ``μ ∈ (0, 1)``. Default value: ``0.9`` (Deng's default).
      gradient_noise_variance: ``V`` in ``β̂ = ½Vη``, or ``None`` for ``β̂ = 0``.
        Default value: ``1.`` (Deng's code).
      temperature: ``T``. Default value: ``1.``.
      name: Default value: ``None``.

    Raises:
      ValueError: ``momentum`` outside ``(0, 1)``; a negative or non-scalar
        ``gradient_noise_variance``; ``β̂ > α`` (Deng's code
        aborts there too: the injected noise variance would be negative).
    """
    check_in_interval(momentum, "momentum", 0.0, 1.0, low_open=True, high_open=True, scalar=True)
    # Validated here, not only by SGHMC: a negative or NaN η would otherwise give a
    # negative or NaN β̂ and an error about `noise_estimate` instead of this argument.
    if not isinstance(learning_rate, StepSizeSchedule):
        check_positive(learning_rate, "learning_rate", scalar=True)
    if gradient_noise_variance is not None:
        check_positive(gradient_noise_variance, "gradient_noise_variance", allow_zero=True,
                       scalar=True)
    friction = 1.0 - float(momentum)
    lr = static_value(learning_rate)
    if gradient_noise_variance is None or lr is None or isinstance(learning_rate, StepSizeSchedule):
        beta_hat = 0.0
    else:
        beta_hat = 0.5 * float(gradient_noise_variance) * float(lr)
    if beta_hat > friction:
        raise ValueError(
            f"`learning_rate` too large: β̂ = ½Vη = {beta_hat} exceeds the friction 1 − μ = "
            f"{friction}."
        )
    return SGHMC(
        estimator,
        learning_rate,
        num_leapfrog_steps=1,
        friction=friction,
        noise_estimate=beta_hat,
        momentum_refresh=False,
        order="chen",
        temperature=temperature,
        name=name,
    )
