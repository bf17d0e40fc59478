"""Small models and the kernel matrix shared by the kernel tests.

``KERNEL_SPECS`` is the list every contract test is parameterised over: every
kernel class exported from :mod:`tfp_sgmcmc.kernels` (SGLD, SGLD with control
variates, pSGLD, SGHMC in all eight combinations of ``L ∈ {1, 3}`` × order ×
momentum refresh, SGNHT, SGLD-SVRG, BAOAB, BADODAB, contour SGLD,
replica-exchange SGLD, the six adaptive-drift kernels, and the
``StochasticApproximation`` wrapper around SGLD and Deng's SGHMC). Adding a
sampler means adding one line there; ``test_every_exported_kernel_is_listed``
fails until it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.kernels.stochastic_approximation import deng_sghmc

__all__ = [
    "KernelSpec",
    "KERNEL_SPECS",
    "LinearGaussianModel",
    "core_results",
    "normals_like",
]


class LinearGaussianModel:
    """Bayesian linear regression ``y ~ N(x·w + b, 1)``, prior ``N(0, 10 I)``.

    The state is either one tensor ``w`` (``parts=False``) or the list
    ``[w, b]`` (``parts=True``), with optional leading chain dimensions; the
    functions broadcast over them. ``zero_targets=True`` sets ``y = 0`` so
    every minibatch score vanishes at ``θ = 0`` (a chain started there with
    ``temperature = 0`` never moves).
    """

    def __init__(
        self,
        dtype: tf.DType = tf.float64,
        parts: bool = False,
        num_examples: int = 32,
        num_features: int = 3,
        batch_size: int = 8,
        scheme: str = "with_replacement",
        zero_targets: bool = False,
        precision_scale: float = 1.0,
        seed: int = 0,
    ) -> None:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((num_examples, num_features)) * np.sqrt(precision_scale)
        if zero_targets:
            y = np.zeros(num_examples)
        else:
            y = x @ np.linspace(-1.0, 1.0, num_features) + 0.3 + rng.standard_normal(num_examples)
        self.dtype = dtype
        self.parts = parts
        self.num_features = num_features
        self.batch_size = batch_size
        self.x = x.astype(dtype.as_numpy_dtype)
        self.y = y.astype(dtype.as_numpy_dtype)
        self.data = sg.InMemoryData((self.x, self.y), scheme=scheme)

    def log_likelihood(self, state: Any, batch: Any) -> tf.Tensor:
        xb, yb = batch
        if self.parts:
            w, b = state
            mean = tf.einsum("nd,...d->...n", xb, w) + b[..., tf.newaxis]
        else:
            mean = tf.einsum("nd,...d->...n", xb, state)
        return -0.5 * tf.square(yb - mean)

    def log_prior(self, state: Any) -> tf.Tensor:
        if self.parts:
            w, b = state
            return -0.05 * (tf.reduce_sum(tf.square(w), -1) + tf.square(b))
        return -0.05 * tf.reduce_sum(tf.square(state), -1)

    def minibatch_estimator(self) -> sg.MinibatchEstimator:
        return sg.MinibatchEstimator(
            self.log_likelihood, self.data, self.batch_size, log_prior_fn=self.log_prior
        )

    def cv_estimator(self, centre: float = 0.1) -> sg.ControlVariateEstimator:
        base = self.minibatch_estimator()
        return sg.ControlVariateEstimator(base, self.init_state(value=centre))

    def ssgl_estimator(self, batch_ndims: int = 0) -> sg.GradientEstimator:
        """The spike-and-slab group-lasso estimator the SA wrapper needs.

        The likelihood is looked up at call time, so a test that replaces
        ``log_likelihood`` on the model sees it used here too.
        """
        prior = sg.priors.SpikeAndSlabGroupLasso(v0=0.1, sigma_form="classification")
        return sg.priors.SSGLEstimator(
            prior,
            self.data,
            self.batch_size,
            log_likelihood_fn=lambda s, b: self.log_likelihood(s, b),
            sparse_parts=[True, False] if self.parts else None,
            batch_ndims=batch_ndims,
        )

    def estimator(
        self, kind: str, centre: float = 0.1, batch_ndims: int = 0
    ) -> sg.GradientEstimator:
        """``kind``: ``"plain"``, ``"cv"``, ``"svrg"`` or ``"ssgl"`` (chain dims matter
        only there)."""
        if kind == "svrg":
            return sg.SVRGEstimator(self.minibatch_estimator(), update_rate=2)
        if kind == "cv":
            return self.cv_estimator(centre)
        if kind == "ssgl":
            return self.ssgl_estimator(batch_ndims)
        return self.minibatch_estimator()

    def init_state(self, chains: list[int] | None = None, value: float = 0.0) -> Any:
        batch = list(chains or [])
        w = tf.fill(batch + [self.num_features], tf.constant(value, self.dtype))
        if self.parts:
            return [w, tf.fill(batch, tf.constant(value, self.dtype))]
        return w


@dataclass(frozen=True)
class KernelSpec:
    """A named way to build a kernel from an estimator and a step size.

    Attributes:
      name: test id.
      estimator_kind: ``"plain"``, ``"cv"`` or ``"ssgl"`` (see
        :meth:`LinearGaussianModel.estimator`).
      build: ``(estimator, step_size, **kw) -> kernel``.
      calls_per_step: estimator calls per ``one_step``.
      copy_change: one constructor argument and a new value for the ``copy`` test.
      xla_loop: also run inside ``sample_chain``/``sample_fold`` under XLA (a
        compilation costs seconds, so one spec per code path).
      huge_step: a step that overflows the stiff chain of the divergence test.
      flat_chain: a chain can be made a pure diffusion (zero likelihood and
        prior); ``False`` where the kernel brings its own prior (SSGL).
    """

    name: str
    estimator_kind: str
    build: Callable[..., Any]
    calls_per_step: int = 1
    copy_change: tuple[str, float] = ("step_size", 0.5)
    xla_loop: bool = False
    huge_step: float = 1e18
    flat_chain: bool = True

    def __call__(self, estimator: sg.GradientEstimator, step_size: Any = 1e-3, **kw: Any):
        return self.build(estimator, step_size, **kw)

    def __str__(self) -> str:
        return self.name


def core_results(results: Any) -> Any:
    """The SG kernel's own results (the SA wrapper nests them in ``inner_results``)."""
    return getattr(results, "inner_results", results)


def _sghmc_specs() -> list[KernelSpec]:
    out = []
    for big_l in (1, 3):
        for order in ("chen", "explicit"):
            for refresh in (True, False):

                def build(est, eps, big_l=big_l, order=order, refresh=refresh, **kw):
                    return sg.SGHMC(
                        est,
                        eps,
                        num_leapfrog_steps=big_l,
                        friction=0.1,
                        order=order,
                        momentum_refresh=refresh,
                        **kw,
                    )

                name = f"sghmc-L{big_l}-{order}-{'refresh' if refresh else 'keep'}"
                # L = 1 with refresh moves by the fresh momentum alone (θ' = θ + v₀):
                # only the √η random walk can overflow, so it needs a larger step.
                huge = 1e38 if big_l == 1 and refresh else 1e18
                xla = name in ("sghmc-L3-chen-keep", "sghmc-L1-explicit-refresh")
                out.append(KernelSpec(name, "plain", build, big_l, xla_loop=xla, huge_step=huge))
    return out


def _sa(inner: Callable[..., Any]) -> Callable[..., Any]:
    def build(est, eps, **kw):
        return sg.kernels.StochasticApproximation(inner(est, eps, **kw), 0.5)

    return build


_K = sg.kernels
KERNEL_SPECS: list[KernelSpec] = [
    KernelSpec("sgld", "plain", lambda est, eps, **kw: sg.SGLD(est, eps, **kw), xla_loop=True),
    KernelSpec("sgld-prefetch", "plain",
               lambda est, eps, **kw: sg.SGLD(est, eps, prefetch_noise=True, **kw),
               xla_loop=True),
    KernelSpec("sgld-cv", "cv", lambda est, eps, **kw: sg.SGLD(est, eps, **kw), xla_loop=True),
    KernelSpec("psgld", "plain", lambda est, eps, **kw: sg.PSGLD(est, eps, **kw), xla_loop=True),
    *_sghmc_specs(),
    # SGNHT's thermostat fluctuates on the scale of h even on a flat target, so a huge
    # h destabilises the flat chain too; h = 0.05 is already h·λ_max ≈ 16 on the stiff one.
    KernelSpec("sgnht", "plain", lambda est, eps, **kw: sg.SGNHT(est, eps, **kw),
               xla_loop=True, huge_step=0.05),
    KernelSpec("msgld", "plain", lambda est, eps, **kw: _K.MSGLD(est, eps, **kw),
               copy_change=("beta1", 0.5), xla_loop=True),
    KernelSpec("asgld", "cv", lambda est, eps, **kw: _K.ASGLD(est, eps, **kw),
               copy_change=("a", 2.0)),
    KernelSpec("asgld-inside", "plain",
               lambda est, eps, **kw: _K.ASGLD(est, eps, lambda_placement="inside", **kw)),
    KernelSpec("adamax-sgld", "plain", lambda est, eps, **kw: _K.AdaMaxSGLD(est, eps, **kw),
               copy_change=("beta2", 0.99)),
    KernelSpec("adadelta-sgld", "plain", lambda est, eps, **kw: _K.AdadeltaSGLD(est, eps, **kw),
               copy_change=("rho", 0.9)),
    KernelSpec("psgld-momentum", "plain",
               lambda est, eps, **kw: _K.PreconditionedMomentumSGLD(est, eps, **kw),
               copy_change=("decay", 0.9)),
    KernelSpec("psgld-adam", "cv",
               lambda est, eps, **kw: _K.PreconditionedAdamSGLD(est, eps, **kw),
               copy_change=("precond_epsilon", 1e-3), xla_loop=True),
    KernelSpec("sgld-sa", "ssgl", _sa(lambda est, eps, **kw: sg.SGLD(est, eps, **kw)),
               copy_change=("sa_step_size", 0.25), xla_loop=True, flat_chain=False),
    KernelSpec("sghmc-sa", "ssgl",
               _sa(lambda est, eps, **kw: deng_sghmc(est, eps, **kw)),
               copy_change=("sa_step_size", 1.0), flat_chain=False,
               # Deng's form requires β̂ = ½Vη ≤ 1 − μ = 0.1, so η < 0.2 (ηλ_max ≫ 4).
               huge_step=0.19),
    KernelSpec("sgld-svrg", "svrg", lambda est, eps, **kw: sg.SGLD(est, eps, **kw)),
    KernelSpec("baoab", "plain", lambda est, eps, **kw: sg.BAOAB(est, eps, **kw)),
    # BADODAB's thermostat, like SGNHT's, moves by (h/2)(pᵀp − D T) even on a flat
    # target: h = 2 is already h²λ_max ≈ 1e3 ≫ 4 (unstable) on the stiff chain.
    KernelSpec("badodab", "plain", lambda est, eps, **kw: sg.BADODAB(est, eps, **kw),
               huge_step=2.0),
    KernelSpec(
        "csgld",
        "plain",
        lambda est, eps, **kw: sg.CSGLD(
            est, eps, num_partitions=20, energy_gap=5.0, sa_step_size=0.1, **kw
        ),
    ),
    KernelSpec(
        "resgld",
        "plain",
        lambda est, eps, **kw: sg.RESGLD(est, eps, num_replicas=3, **kw),
    ),
]


def normals_like(shapes: list, dtype: tf.DType, seed: tf.Tensor, salt: str) -> list[np.ndarray]:
    """Re-draw the standard normals a kernel draws for parts of ``shapes``.

    Mirrors the documented seed plumbing (one ``split_seed`` per draw, salted,
    then Threefry normals): used by the exact tests to replay a step in NumPy.
    """
    import tensorflow_probability as tfp

    from tfp_sgmcmc.internal.random import standard_normal

    seeds = tfp.random.split_seed(seed, n=len(shapes), salt=salt)
    return [standard_normal(s, sd, dtype).numpy() for s, sd in zip(shapes, seeds)]
