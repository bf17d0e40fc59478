"""posteriordb's two ODE posteriors transcribed from Stan into TFP form.

Stan integrates each model's ODE with an adaptive solver (``integrate_ode_bdf`` for the
one-compartment model, ``integrate_ode_rk45`` with relative tolerance ``1e-5`` and absolute
``1e-3`` for Lotka-Volterra). Here the solution comes from the classical fixed-step
fourth-order Runge-Kutta method (`rk4`) in plain TensorFlow ops (one ``tf.scan``), so that
gradients and Hessians are ordinary automatic derivatives of a fixed computation, batched
over any leading dimensions of the parameters (chains). The step is chosen so that the
solution's error is far below the observation noise: `rk4`'s error at the reference means,
against a step 16 times smaller, is checked in ``tests/test_posteriordb_families.py``.

Both posteriors are **one series** (``N = 1``, ``X [1, T]`` the observation times, ``y
[1, T]`` or ``[1, T, 2]``): every observation depends on the whole trajectory.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.internal.parameter_properties import ParameterProperties

try:
    from benchmarks._load import load as _load_module
except ImportError:  # run by path: the repository root is not on sys.path
    _spec = importlib.util.spec_from_file_location(
        "_benchmarks__load", Path(__file__).resolve().parents[1] / "_load.py"
    )
    _loader = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_loader)
    _load_module = _loader.load

_common = _load_module("posteriordb.common")
Posterior = _common.Posterior
const = _common.const
pack_series = _common.pack_series
read_data = _common.read_data
read_reference = _common.read_reference

tfd = tfp.distributions
tfb = tfp.bijectors

__all__ = [
    "BUILDERS",
    "LOTKA_VOLTERRA_STEPS",
    "ONE_COMP_STEPS",
    "PositiveNormal",
    "lotka_volterra",
    "lotka_volterra_solution",
    "one_comp_mm_elim_abs",
    "one_comp_solution",
    "rk4",
]

#: RK4 steps per unit of time for each model (see the module docstring).
ONE_COMP_STEPS = 10
LOTKA_VOLTERRA_STEPS = 10


def rk4(
    f: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
    y0: tf.Tensor,
    t0: float,
    times: np.ndarray,
    steps_per_unit: int,
) -> tf.Tensor:
    """The solution of ``dy/dt = f(t, y)``, ``y(t0) = y0``, at ``times``, by classical RK4.

    The update (Butcher 2016, "Numerical methods for ordinary differential equations",
    section 23) with step ``h``: ``k1 = f(t, y)``, ``k2 = f(t + h/2, y + h k1/2)``,
    ``k3 = f(t + h/2, y + h k2/2)``, ``k4 = f(t + h, y + h k3)``, ``y ← y + h (k1 + 2 k2 +
    2 k3 + k4) / 6``; global error ``O(h⁴)``. Each interval between consecutive output times
    is cut into ``ceil(length · steps_per_unit)`` equal steps, so every output time is a
    grid point.

    Args:
      f: ``(t, y) -> dy/dt``, ``t`` a scalar tensor, ``y`` ``[..., k]``.
      y0: the state at ``t0``, ``[..., k]``.
      t0: the initial time.
      times: the increasing output times (all ``> t0``), ``[T]``.
      steps_per_unit: steps per unit of time (at least 1).

    Returns:
      ``[..., T, k]``: the state at each output time.
    """
    times = np.asarray(times, np.float64)
    if steps_per_unit < 1 or times.ndim != 1 or np.any(np.diff(np.r_[t0, times]) <= 0):
        raise ValueError(
            "rk4: `times` must increase from above `t0` and `steps_per_unit` be >= 1, got "
            f"times={times}, t0={t0}, steps_per_unit={steps_per_unit}"
        )
    starts, hs, keep = [], [], []
    prev = float(t0)
    for t in times:
        n = int(np.ceil((t - prev) * steps_per_unit - 1e-9))
        h = (t - prev) / n
        starts += [prev + i * h for i in range(n)]
        hs += [h] * n
        keep.append(len(starts) - 1)
        prev = float(t)
    dtype = y0.dtype
    grid = (tf.constant(starts, dtype), tf.constant(hs, dtype))

    def step(y: tf.Tensor, th: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        t, h = th
        k1 = f(t, y)
        k2 = f(t + h / 2, y + h / 2 * k1)
        k3 = f(t + h / 2, y + h / 2 * k2)
        k4 = f(t + h, y + h * k3)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    path = tf.scan(step, grid, initializer=y0)  # [steps, ..., k]
    out = tf.gather(path, keep, axis=0)  # [T, ..., k]
    rank = len(out.shape)
    return tf.transpose(out, list(range(1, rank - 1)) + [0, rank - 1])


class PositiveNormal(tfd.TruncatedNormal):
    """Stan's ``real<lower=0> x; x ~ normal(loc, scale)``: a normal truncated to ``x > 0``
    with Stan's transform ``x = exp(z)`` as its event space bijector.

    The density is `tfd.TruncatedNormal`'s on ``(0, ∞)``; it differs from Stan's
    (unnormalised) statement by the constant ``log P(X > 0)``, so the posterior is the same.
    ``tfd.TruncatedNormal``'s own bijector (a scaled sigmoid onto ``(low, high)``) is not
    defined for ``high = ∞``.
    """

    def __init__(
        self,
        loc: Any,
        scale: Any,
        validate_args: bool = False,
        allow_nan_stats: bool = True,
        name: str = "PositiveNormal",
    ) -> None:
        parameters = dict(locals())
        loc = tf.convert_to_tensor(loc)
        super().__init__(
            loc, scale, tf.zeros([], loc.dtype), tf.constant(np.inf, loc.dtype),
            validate_args=validate_args, allow_nan_stats=allow_nan_stats, name=name,
        )
        self._parameters = parameters

    @classmethod
    def _parameter_properties(cls, dtype: Any, num_classes: Any = None) -> dict[str, Any]:
        return dict(loc=ParameterProperties(), scale=ParameterProperties())

    def _default_event_space_bijector(self) -> tfb.Bijector:
        return tfb.Exp(validate_args=self.validate_args)


# -- one-compartment pharmacokinetics ------------------------------------------------- #
def one_comp_solution(
    params: Mapping[str, tf.Tensor], times: np.ndarray, dose: float, volume: float,
    steps_per_unit: int = ONE_COMP_STEPS,
) -> tf.Tensor:
    """The concentration ``C(t)`` of the one-compartment model at ``times``, ``[..., T]``.

    ``dC/dt = exp(-k_a t) D k_a / V - (V_m / V) C / (K_m + C)``, ``C(0) = 0``. Stan's
    program sets the dosing term to 0 at ``t = 0`` exactly; a change at one point does not
    change the solution, and the smooth form keeps RK4's fourth order.
    """
    k_a, k_m, v_m = (params[k][..., None] for k in ("k_a", "K_m", "V_m"))

    def f(t: tf.Tensor, c: tf.Tensor) -> tf.Tensor:
        return tf.exp(-k_a * t) * (dose * k_a / volume) - (v_m / volume) * c / (k_m + c)

    c0 = tf.zeros_like(k_a + k_m + v_m)
    return rk4(f, c0, 0.0, times, steps_per_unit)[..., 0]


def one_comp_mm_elim_abs(dtype: Any = np.float64) -> Posterior:
    """``one_comp_mm_elim_abs-one_comp_mm_elim_abs``: one-compartment pharmacokinetics with
    first-order absorption and Michaelis-Menten elimination, 20 measurements.

    Stan: ``k_a``, ``K_m``, ``V_m``, ``sigma`` (all ``> 0``) ~ half-Cauchy(0, 1); the
    concentration ``C`` solves the ODE of `one_comp_solution` (``D = 30``, ``V = 2``,
    ``C(0) = 0``); ``C_hat_n ~ LogNormal(log C(t_n), sigma)``. One series: ``X`` the times
    ``[1, 20]``, ``y`` the concentrations ``[1, 20]``.
    """
    name = "one_comp_mm_elim_abs-one_comp_mm_elim_abs"
    d = read_data(name)
    if float(d["t0"]) != 0.0:
        raise ValueError(f"{name}: the transcription assumes t0 = 0, got {d['t0']}")
    times = np.asarray(d["times"], np.float64)
    dose, volume = float(d["D"]), float(d["V"])
    half_cauchy = lambda: tfd.HalfCauchy(const(0.0, dtype), const(1.0, dtype))  # noqa: E731
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(k_a=half_cauchy(), K_m=half_cauchy(), V_m=half_cauchy(), sigma=half_cauchy())
    )

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        c = one_comp_solution(params, times, dose, volume)  # [..., T]
        return tfd.Independent(
            tfd.LogNormal(tf.math.log(c)[..., None, :], params["sigma"][..., None, None]), 1
        )

    return Posterior(
        name, prior, likelihood_fn, pack_series(name, times, d["C_hat"], dtype),
        read_reference(name), dtype,
    )


# -- Lotka-Volterra ------------------------------------------------------------------ #
def lotka_volterra_solution(
    params: Mapping[str, tf.Tensor], times: np.ndarray,
    steps_per_unit: int = LOTKA_VOLTERRA_STEPS,
) -> tf.Tensor:
    """The populations ``z(t) = (u, v)`` at ``times`` (all ``> 0``), ``[..., T, 2]``.

    ``du/dt = (alpha - beta v) u``, ``dv/dt = (-gamma + delta u) v``, ``z(0) = z_init``,
    ``theta = (alpha, beta, gamma, delta)``.
    """
    theta = params["theta"]
    a, b, g, dl = (theta[..., i : i + 1] for i in range(4))

    def f(t: tf.Tensor, z: tf.Tensor) -> tf.Tensor:
        u, v = z[..., :1], z[..., 1:]
        return tf.concat([(a - b * v) * u, (dl * u - g) * v], axis=-1)

    z0 = params["z_init"] + tf.zeros_like(theta[..., :2])
    return rk4(f, z0, 0.0, times, steps_per_unit)


def lotka_volterra(dtype: Any = np.float64) -> Posterior:
    """``hudson_lynx_hare-lotka_volterra``: the Lotka-Volterra predator-prey model of the
    Hudson's Bay Company's hare and lynx pelts, 1900-1920.

    Stan: ``theta`` (4, ``> 0``) with ``theta[1], theta[3] ~ Normal(1, 0.5)``, ``theta[2],
    theta[4] ~ Normal(0.05, 0.05)`` (`PositiveNormal`); ``z_init`` (2) ~ LogNormal(log 10,
    1); ``sigma`` (2) ~ LogNormal(-1, 1); ``y_init_k ~ LogNormal(log z_init_k, sigma_k)`` and
    ``y_{n,k} ~ LogNormal(log z_k(t_n), sigma_k)``, ``z`` the ODE's solution
    (`lotka_volterra_solution`). One series of 21 times: ``X = [0, t_1, ..., t_20]``, ``y``
    ``[1, 21, 2]`` with ``y_init`` first (``z(0) = z_init``).
    """
    name = "hudson_lynx_hare-lotka_volterra"
    d = read_data(name)
    times = np.asarray(d["ts"], np.float64)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            theta=PositiveNormal(
                const([1.0, 0.05, 1.0, 0.05], dtype), const([0.5, 0.05, 0.5, 0.05], dtype)
            ),
            z_init=tfd.Sample(tfd.LogNormal(const(np.log(10.0), dtype), const(1.0, dtype)), 2),
            sigma=tfd.Sample(tfd.LogNormal(const(-1.0, dtype), const(1.0, dtype)), 2),
        )
    )

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        z = lotka_volterra_solution(params, times)  # [..., T, 2]
        z = tf.concat([params["z_init"][..., None, :] + tf.zeros_like(z[..., :1, :]), z], -2)
        sigma = params["sigma"][..., None, None, :]
        return tfd.Independent(tfd.LogNormal(tf.math.log(z)[..., None, :, :], sigma), 2)

    x = np.r_[0.0, times]
    y = np.concatenate([np.asarray(d["y_init"], np.float64)[None], np.asarray(d["y"])], 0)
    return Posterior(
        name, prior, likelihood_fn, pack_series(name, x, y, dtype), read_reference(name), dtype,
    )


#: posteriordb name -> builder.
BUILDERS: dict[str, Callable[..., Posterior]] = {
    "one_comp_mm_elim_abs-one_comp_mm_elim_abs": one_comp_mm_elim_abs,
    "hudson_lynx_hare-lotka_volterra": lotka_volterra,
}
