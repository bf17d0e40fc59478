"""First-order SG-MCMC: SGLD and pSGLD (and, through transforms, the adaptive drifts)."""

from __future__ import annotations

import collections
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator
from tfp_sgmcmc.integrators import langevin_step
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.tfp_wrappers import SGMCMCResultsMixin, sgmcmc_results_fields
from tfp_sgmcmc.transforms import DriftTransform
from tfp_sgmcmc.transforms.drifts import RMSPreconditioner

__all__ = [
    "SGLDKernelResults",
    "SGLD",
    "PSGLD",
]


class SGLDKernelResults(
    SGMCMCResultsMixin,
    collections.namedtuple(
        "SGLDKernelResults", sgmcmc_results_fields("transform_state", "next_noise")
    ),
):
    """Results of SGLD and of every kernel built on it (pSGLD and the adaptive-drift SGLD
    variants).

    The common SG fields (``target_log_prob``, ``grads_target_log_prob``,
    ``estimator_state``, ``step``, ``step_size``, ``diverged``, ``seed``) and
    ``transform_state``, the drift/preconditioner accumulators (``()`` for plain SGLD),
    and ``next_noise``, the standard normals of the next step drawn ahead (one per state
    part) with ``prefetch_noise=True``, else ``()``.
    """

    __slots__ = ()




class SGLD(SGMCMCKernel):
    r"""Stochastic gradient Langevin dynamics (Welling & Teh 2011).

    Update (ε form, as SGMCMCJax and the MAMBA paper's tables):

    $$
    \theta_{t+1} = \theta_t + \varepsilon_t G_t \odot d_t
        + \sqrt{2 \varepsilon_t T G_t} \odot \xi_t, \qquad \xi_t \sim \mathcal{N}(0, I)
    $$

    with $d_t = g_t = \nabla \log \tilde\pi(\theta_t)$ (the minibatch score, computed by
    ``estimator``) and $G_t = 1$ for plain SGLD; a ``transform`` may replace
    the drift and preconditioner (pSGLD, MSGLD, ASGLD). The Welling-Teh $h$
    form $\theta + \frac{h}{2}\nabla\log\tilde\pi + \sqrt{h}\,\xi$ is the same with
    $h = 2\varepsilon$.
    $T$ = ``temperature`` multiplies the noise variance: the chain targets
    $\pi^{1/T}$, and $T = 0$ is stochastic gradient ascent
    (docs/algorithms.md#sgld).

    Uncalibrated: with a constant step the stationary law differs from the
    target by $O(\varepsilon)$ (on a Gaussian, exactly the solution of a discrete Lyapunov
    equation, docs/algorithms.md#stationary-sgld), and explicit Euler
    is unstable when $\varepsilon \lambda_{\max}(-\nabla^2 \log \pi) > 2$.

    Args:
      estimator: a [`GradientEstimator`][tfp_sgmcmc.estimators.GradientEstimator].
      step_size: ``ε > 0``: scalar, tensor, ``tf.Variable`` or a
        [`StepSizeSchedule`][tfp_sgmcmc.schedules.StepSizeSchedule] of the step counter.
      temperature: ``T ≥ 0``, a scalar or a schedule of the step (annealing).
        Default value: ``1.``.
      transform: optional [`DriftTransform`][tfp_sgmcmc.transforms.DriftTransform].
        Default value: ``None`` (plain SGLD).
      prefetch_noise: draw step ``t + 1``'s normals ``ξ_{t+1}`` during step ``t``
        (from step ``t``'s seed) and carry them in the results' ``next_noise``;
        step 0 draws its own. The law of the chain is unchanged (``ξ_{t+1}``
        is independent of everything before it); the random stream is not the
        one of ``prefetch_noise=False``, and the results hold one more copy of
        the state. Under XLA on a multi-core CPU this lets the compiler draw
        the noise apart from the update, which on a large model makes a step
        markedly faster (docs/benchmarks.md#mnist-bnn).
        Default value: ``False``.
      name: name scope. Default value: ``None`` (``'sgld'``).

    Raises:
      ValueError: non-positive ``step_size``, negative ``temperature``, an
        ``estimator``/``transform`` of the wrong type, or ``prefetch_noise`` not a bool.

    #### Examples

    ```python
    import numpy as np, tensorflow as tf, tensorflow_probability as tfp
    import tfp_sgmcmc as sg

    x = np.random.randn(1000, 3).astype("float32")
    y = (x @ [1., -2., .5] > 0).astype("float32")
    est = sg.MinibatchEstimator(
        lambda th, b: -tf.nn.sigmoid_cross_entropy_with_logits(
            b[1], tf.linalg.matvec(b[0], th)),
        (x, y), batch_size=100,
        log_prior_fn=lambda th: -0.5 * tf.reduce_sum(th**2, -1) / 10.)
    kernel = sg.SGLD(est, step_size=1e-3)

    @tf.function(jit_compile=True)  # one compiled program for the whole chain
    def run(seed):
        return tfp.mcmc.sample_chain(
            500, tf.zeros(3), kernel=kernel, trace_fn=None, seed=seed)

    samples = run(tf.constant([0, 42]))
    ```

    #### References

    [1]: Max Welling and Yee Whye Teh. Bayesian Learning via Stochastic
         Gradient Langevin Dynamics. In _ICML_, 2011.
    """

    _results_type = SGLDKernelResults
    _default_name = "sgld"
    cli_name = "sgld"

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        temperature: Any = 1.0,
        transform: DriftTransform | None = None,
        name: str | None = None,
        prefetch_noise: bool = False,
    ) -> None:
        if transform is not None and not isinstance(transform, DriftTransform):
            raise ValueError(
                f"`transform` must be a DriftTransform or None, got {type(transform).__name__}."
            )
        if not isinstance(prefetch_noise, bool):
            raise ValueError(
                f"`prefetch_noise` must be a bool, got {type(prefetch_noise).__name__}."
            )
        super().__init__(
            estimator,
            step_size,
            temperature,
            name,
            transform=transform,
            prefetch_noise=prefetch_noise,
        )

    @property
    def transform(self) -> DriftTransform | None:
        return self._transform()

    def _transform(self) -> DriftTransform | None:
        return self._parameters.get("transform")

    def gradient_noise_coefficient(
        self, step_size: float, temperature: float
    ) -> tuple[float, bool] | None:
        """``r = ε Var(ĝ) / (2T)`` for plain SGLD; ``None`` with a drift transform
        (pSGLD, the adaptive drifts), for which the ratio is not derived."""
        if self._transform() is not None:
            return None
        return step_size / (2.0 * temperature), True

    @property
    def prefetch_noise(self) -> bool:
        """Whether each step draws the next step's noise (see the class docstring)."""
        # Subclasses (pSGLD, the adaptive drifts) do not take the argument.
        return bool(self._parameters.get("prefetch_noise", False))

    def _init_extra(self, parts: list[tf.Tensor], est: GradientEstimate) -> dict[str, Any]:
        t = self._transform()
        return {
            "transform_state": () if t is None else t.init(est.grads_target_log_prob),
            # Step 0 draws its own noise (its results hold no draw yet): zeros stand in.
            "next_noise": [tf.zeros_like(p) for p in parts] if self.prefetch_noise else (),
        }

    def _transition(self, parts, like, prev, step_size, seed):
        noise_seed, est_seed = self._split(seed, 2, "sgld.one_step")
        grads = prev.grads_target_log_prob
        t = self._transform()
        if t is None:
            drift, precond, t_state = grads, None, ()
        else:
            drift, precond, t_state = t.update(grads, prev.transform_state)
        extra: dict[str, Any] = {"transform_state": t_state}
        if self.prefetch_noise:
            # ξ_t was drawn by step t − 1 (from its seed); step 0 draws its own.
            noise = tf.cond(
                prev.step == 0,  # the same first-step idiom as SGHMC's momentum
                lambda: self._normals(parts, noise_seed, "sgld.noise.first"),
                lambda: list(prev.next_noise),
            )
            # Drawn here but used by the next step: nothing in this step waits for it,
            # so XLA may schedule it apart from the update (docs/benchmarks.md#mnist-bnn).
            extra["next_noise"] = self._normals(parts, noise_seed, "sgld.noise")
        else:
            noise = self._normals(parts, noise_seed, "sgld.noise")
            extra["next_noise"] = ()
        temp = self._temperature(parts[0].dtype, prev.step)
        new_parts = [
            langevin_step(p, d, step_size, temp, xi, None if precond is None else g)
            for p, d, xi, g in zip(parts, drift, noise, precond or [None] * len(parts))
        ]
        est, est_state = self._estimate(new_parts, like, prev.estimator_state, est_seed)
        return new_parts, est, est_state, extra


class PSGLD(SGLD):
    r"""pSGLD: SGLD with the RMSprop diagonal preconditioner (Li et al. 2016).

    $$
    V_t = \alpha V_{t-1} + (1 - \alpha)\, g_t \odot g_t, \qquad
    G_t = 1 \oslash (\lambda + \sqrt{V_t})
    $$

    $$
    \theta_{t+1} = \theta_t + \varepsilon G_t \odot g_t + \sqrt{2 \varepsilon T G_t} \odot \xi_t
    $$

    (Li et al.'s Algorithm 1 in the ε form, ``h = 2ε``; the Γ correction term is
    dropped as in their experiments). ``V`` starts at 0 and is updated with the
    current gradient before use. SGMCMCJax's ``psgld`` uses the ``h`` form with
    ``h = dt``, so its ``dt`` equals ``2ε`` here.

    Args:
      estimator: gradient estimator.
      step_size: ``ε`` (scalar or schedule).
      decay: ``α`` in [0, 1). Default value: ``0.99``.
      epsilon: ``λ > 0`` (on the scale of the N-scaled gradient).
        Default value: ``1e-5``.
      temperature: ``T ≥ 0``, a scalar or a schedule of the step (annealing).
        Default value: ``1.``.
      name: Default value: ``None`` (``'psgld'``).

    #### References

    [1]: Chunyuan Li, Changyou Chen, David Carlson and Lawrence Carin.
         Preconditioned Stochastic Gradient Langevin Dynamics for Deep Neural
         Networks. In _AAAI_, 2016. https://arxiv.org/abs/1512.07666
    """

    _default_name = "psgld"
    cli_name = "psgld"

    def __init__(
        self,
        estimator: GradientEstimator,
        step_size: Any,
        decay: Any = 0.99,
        epsilon: Any = 1e-5,
        temperature: Any = 1.0,
        name: str | None = None,
    ) -> None:
        self._rms = RMSPreconditioner(decay, epsilon)
        SGMCMCKernel.__init__(
            self, estimator, step_size, temperature, name, decay=decay, epsilon=epsilon
        )

    def _transform(self) -> DriftTransform:
        return self._rms
