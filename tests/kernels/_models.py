"""Small models and the kernel matrix shared by the kernel tests.

``KERNEL_SPECS`` is the list every contract test is parameterised over: SGLD,
SGLD with control variates, pSGLD, SGHMC in all eight combinations of
``L ∈ {1, 3}`` × order × momentum refresh, SGNHT, SGLD-SVRG, BAOAB, BADODAB,
contour SGLD and replica-exchange SGLD.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg

__all__ = ["KernelSpec", "KERNEL_SPECS", "LinearGaussianModel", "normals_like"]


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

    def estimator(self, kind: str, centre: float = 0.1) -> sg.GradientEstimator:
        if kind == "svrg":
            return sg.SVRGEstimator(self.minibatch_estimator(), update_rate=2)
        return self.cv_estimator(centre) if kind == "cv" else self.minibatch_estimator()

    def init_state(self, chains: list[int] | None = None, value: float = 0.0) -> Any:
        batch = list(chains or [])
        w = tf.fill(batch + [self.num_features], tf.constant(value, self.dtype))
        if self.parts:
            return [w, tf.fill(batch, tf.constant(value, self.dtype))]
        return w


@dataclass(frozen=True)
class KernelSpec:
    """A named way to build a kernel from an estimator and a step size."""

    name: str
    estimator_kind: str  # "plain" or "cv"
    build: Callable[..., sg.kernels.SGMCMCKernel]
    calls_per_step: int

    def __call__(self, estimator: sg.GradientEstimator, step_size: Any = 1e-3, **kw: Any):
        return self.build(estimator, step_size, **kw)

    def __str__(self) -> str:
        return self.name


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
                out.append(KernelSpec(name, "plain", build, big_l))
    return out


KERNEL_SPECS: list[KernelSpec] = [
    KernelSpec("sgld", "plain", lambda est, eps, **kw: sg.SGLD(est, eps, **kw), 1),
    KernelSpec("sgld-cv", "cv", lambda est, eps, **kw: sg.SGLD(est, eps, **kw), 1),
    KernelSpec("psgld", "plain", lambda est, eps, **kw: sg.PSGLD(est, eps, **kw), 1),
    *_sghmc_specs(),
    KernelSpec("sgnht", "plain", lambda est, eps, **kw: sg.SGNHT(est, eps, **kw), 1),
    KernelSpec("sgld-svrg", "svrg", lambda est, eps, **kw: sg.SGLD(est, eps, **kw), 1),
    KernelSpec("baoab", "plain", lambda est, eps, **kw: sg.BAOAB(est, eps, **kw), 1),
    KernelSpec("badodab", "plain", lambda est, eps, **kw: sg.BADODAB(est, eps, **kw), 1),
    KernelSpec(
        "csgld",
        "plain",
        lambda est, eps, **kw: sg.ContourSGLD(
            est, eps, num_partitions=20, energy_gap=5.0, sa_step_size=0.1, **kw
        ),
        1,
    ),
    KernelSpec(
        "resgld",
        "plain",
        lambda est, eps, **kw: sg.ReplicaExchangeSGLD(est, eps, num_replicas=3, **kw),
        1,
    ),
]


def normals_like(shapes: list, dtype: tf.DType, seed: tf.Tensor, salt: str) -> list[np.ndarray]:
    """Re-draw the standard normals a kernel draws for parts of ``shapes``.

    Mirrors the documented seed plumbing (one ``split_seed`` per draw, salted,
    Philox): used by the exact tests to replay a step in NumPy.
    """
    import tensorflow_probability as tfp

    seeds = tfp.random.split_seed(seed, n=len(shapes), salt=salt)
    return [
        tf.random.stateless_normal(s, seed=sd, dtype=dtype, alg="philox").numpy()
        for s, sd in zip(shapes, seeds)
    ]
