"""posteriordb's non-regression posteriors transcribed from Stan into TFP form.

The hierarchical, Gaussian-process, time-series (AR, ARMA, GARCH), hidden-Markov, mixture and
ODE posteriors of this folder, each a builder returning a `Posterior` (see ``common.py``), in
`BUILDERS` by posteriordb name; ``models.py`` merges them into its registry, so
``models.load(name)`` reaches every posterior.

Two layouts of the data ``(X, y)``:

* **rows** (``N`` examples, minibatchable): where the likelihood is a sum over rows given the
  parameters. Eight schools and the Poisson GP have one latent value per row, so a row's
  ``X`` carries the index of its latent (``X[:, -1]``, a float); AR(K) has its ``K`` lags as
  the row's features.
* **one series** (``N = 1``, ``X [1, T]``, ``y [1, T, ...]``): where the terms depend on each
  other (ARMA and GARCH recursions, the forward algorithm of a hidden Markov model, a
  Gaussian process's multivariate normal, an ODE's trajectory). The whole series is one
  example; a minibatch is the full data.

Stan's constraints become the prior's TFP event-space bijectors: ``<lower=0>`` a half
distribution or a Gamma (log), ``<lower=0, upper=1>`` a Beta (logit), ``simplex`` a
Dirichlet (`SimplexDirichlet`, stick-breaking), ``ordered`` / ``positive_ordered``
`OrderedNormal` (Stan's own transforms), a bound that depends on another parameter a
conditional ``Uniform``.
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
pack = _common.pack
pack_series = _common.pack_series
read_data = _common.read_data
read_reference = _common.read_reference
linear_regression = _common.linear_regression

tfd = tfp.distributions
tfb = tfp.bijectors

__all__ = [
    "BUILDERS",
    "REFERENCE_PARAMETERS",
    "OrderedNormal",
    "SimplexDirichlet",
    "ark",
    "arma11",
    "eight_schools_noncentered",
    "garch11",
    "gp_pois_regr",
    "gp_regr",
    "hmm_drive_0",
    "hmm_drive_1",
    "hmm_example",
    "low_dim_gauss_mix",
]

#: Stan's improper flat priors become these wide proper ones (as in ``models.py``).
FLAT_LOCATION_SCALE = _common.FLAT_COEFFICIENT_SCALE
FLAT_SCALE_SCALE = _common.FLAT_SCALE_SCALE


# -- ordered vectors ---------------------------------------------------------------- #
class OrderedNormal(tfd.Distribution):
    """Independent normals restricted to an ordered vector: Stan's ``ordered`` and
    ``positive_ordered`` parameters with a ``normal`` statement per component.

    The density is Stan's, ``log p(x) = Σ_k log N(x_k | loc_k, scale_k)`` on the support
    ``low < x_1 < x_2 < ... < x_K`` (``low = -∞`` for ``ordered``, ``0`` for
    ``positive_ordered``) and ``-∞`` off it, *without* the normalising constant
    ``P(low < X_1 < ... < X_K)`` of the independent normals: Stan drops it too, and it is
    a constant, so the posterior is the same.

    The event-space bijector is Stan's transform (Stan reference manual, "Ordered vector"
    and "Positive ordered vector"): ``x_1 = z_1``, ``x_k = x_{k-1} + exp(z_k)``
    (`tfb.Ascending`) for ``ordered``, ``x = low + cumsum(exp(z))`` with a lower bound.
    `sample` is exact: independent normal draws, redrawn until ordered and above ``low``
    (rejection sampling; every use here accepts a draw with probability above 0.4).
    """

    def __init__(
        self,
        loc: Any,
        scale: Any,
        low: float | None = None,
        validate_args: bool = False,
        allow_nan_stats: bool = True,
        name: str = "OrderedNormal",
    ) -> None:
        parameters = dict(locals())
        with tf.name_scope(name) as name:
            self._loc = tf.convert_to_tensor(loc)
            self._scale = tf.convert_to_tensor(scale, dtype=self._loc.dtype)
            dtype = self._loc.dtype
            self._low = low
            super().__init__(
                dtype=dtype,
                reparameterization_type=tfd.NOT_REPARAMETERIZED,
                validate_args=validate_args,
                allow_nan_stats=allow_nan_stats,
                parameters=parameters,
                name=name,
            )

    @classmethod
    def _parameter_properties(cls, dtype: Any, num_classes: Any = None) -> dict[str, Any]:
        return dict(
            loc=ParameterProperties(event_ndims=1), scale=ParameterProperties(event_ndims=1)
        )

    @property
    def loc(self) -> tf.Tensor:
        return self._loc

    @property
    def scale(self) -> tf.Tensor:
        return self._scale

    @property
    def low(self) -> float | None:
        return self._low

    def _event_shape(self) -> tf.TensorShape:
        return tf.broadcast_static_shape(self._loc.shape, self._scale.shape)[-1:]

    def _event_shape_tensor(self) -> tf.Tensor:
        return tf.broadcast_dynamic_shape(tf.shape(self._loc), tf.shape(self._scale))[-1:]

    def _in_support(self, x: tf.Tensor) -> tf.Tensor:
        ok = tf.reduce_all(x[..., 1:] > x[..., :-1], axis=-1)
        if self._low is not None:
            ok = ok & (x[..., 0] > tf.cast(self._low, x.dtype))
        return ok

    def _log_prob(self, x: tf.Tensor) -> tf.Tensor:
        lp = tf.reduce_sum(tfd.Normal(self._loc, self._scale).log_prob(x), axis=-1)
        return tf.where(self._in_support(x), lp, tf.constant(-np.inf, lp.dtype))

    def _sample_n(self, n: int, seed: Any = None) -> tf.Tensor:
        loc = tf.broadcast_to(self._loc, tf.broadcast_dynamic_shape(
            tf.shape(self._loc), tf.shape(self._scale)))
        scale = tf.broadcast_to(self._scale, tf.shape(loc))
        shape = tf.concat([[n], tf.shape(loc)], 0)
        seed = tfp.random.sanitize_seed(seed)

        def draw(s: tf.Tensor) -> tf.Tensor:
            return loc + scale * tf.random.stateless_normal(shape, s, dtype=self.dtype)

        first_seed, seed = tfp.random.split_seed(seed)
        x0 = draw(first_seed)

        def cond(x: tf.Tensor, ok: tf.Tensor, s: tf.Tensor) -> tf.Tensor:
            return ~tf.reduce_all(ok)

        def body(x: tf.Tensor, ok: tf.Tensor, s: tf.Tensor) -> tuple[Any, ...]:
            this, s = tfp.random.split_seed(s)
            new = draw(this)
            new_ok = self._in_support(new)
            x = tf.where(ok[..., None], x, new)
            return x, ok | new_ok, s

        x, _, _ = tf.while_loop(cond, body, (x0, self._in_support(x0), seed))
        return x

    def _default_event_space_bijector(self) -> tfb.Bijector:
        if self._low is None:
            return tfb.Ascending()
        return tfb.Chain(
            [tfb.Shift(tf.cast(self._low, self.dtype)), tfb.Cumsum(), tfb.Exp()]
        )


class SimplexDirichlet(tfd.Dirichlet):
    """``tfd.Dirichlet`` with Stan's stick-breaking simplex transform as its event space
    bijector (`tfb.IteratedSigmoidCentered`: ``K - 1`` free coordinates).

    The density and sampling are the Dirichlet's. The bijector is the only change:
    ``tfd.Dirichlet``'s own (``tfb.SoftmaxCentered``) fails to build with NumPy 2.4 in
    TFP 0.25 (``np.reshape(..., newshape=...)``), and the stick-breaking map is the one
    Stan samples on.
    """

    def _default_event_space_bijector(self) -> tfb.Bijector:
        return tfb.IteratedSigmoidCentered(validate_args=self.validate_args)


# -- hierarchical ---------------------------------------------------------------- #
def _eight_schools_theta(params: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """Stan's transformed parameter ``theta = theta_trans * tau + mu``."""
    return {
        "theta": params["theta_trans"] * params["tau"][..., None] + params["mu"][..., None]
    }


def eight_schools_noncentered(dtype: Any = np.float64) -> Posterior:
    """``eight_schools-eight_schools_noncentered``: the eight schools, non-centred.

    Stan: ``theta_trans`` (8) ~ Normal(0, 1), ``mu`` ~ Normal(0, 5), ``tau > 0`` ~
    Cauchy(0, 5) (``tfd.HalfCauchy(0, 5)``), ``y_j ~ Normal(theta_j, sigma_j)`` with the
    transformed parameter ``theta = theta_trans * tau + mu``. Rows: the 8 schools
    (``X = [sigma_j, j]``, ``j`` the 0-based index of the school's ``theta_trans``).

    posteriordb's reference lists ``theta``, ``mu`` and ``tau``, not the parameter
    ``theta_trans``: ``reference.json`` adds ``theta_trans = (theta - mu) / tau`` computed
    from each reference draw (`REFERENCE_PARAMETERS`), and `Posterior.flatten` adds
    ``theta`` (``transformed``), so both are compared.
    """
    name = "eight_schools-eight_schools_noncentered"
    d = read_data(name)
    j = int(d["J"])
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            theta_trans=tfd.Sample(tfd.Normal(const(0.0, dtype), const(1.0, dtype)), j),
            mu=tfd.Normal(const(0.0, dtype), const(5.0, dtype)),
            tau=tfd.HalfCauchy(const(0.0, dtype), const(5.0, dtype)),
        )
    )

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        x, _ = batch
        school = tf.cast(x[:, 1], tf.int32)
        theta = tf.gather(_eight_schools_theta(params)["theta"], school, axis=-1)
        return tfd.Normal(theta, x[:, 0])

    x = np.stack([np.asarray(d["sigma"], np.float64), np.arange(j, dtype=np.float64)], 1)
    return Posterior(
        name, prior, likelihood_fn, pack(name, x, d["y"], dtype), read_reference(name), dtype,
        transformed=_eight_schools_theta,
    )


def _eight_schools_parameters(draws: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``theta_trans[j] = (theta[j] - mu) / tau``, draw by draw."""
    return {
        f"theta_trans[{i}]": (draws[f"theta[{i}]"] - draws["mu"]) / draws["tau"]
        for i in range(1, 9)
    }


# -- Gaussian processes ---------------------------------------------------------- #
def _exp_quad_cov(x: tf.Tensor, alpha: tf.Tensor, rho: tf.Tensor) -> tf.Tensor:
    """Stan's ``gp_exp_quad_cov(x, alpha, rho)``: ``alpha² exp(-(x_i - x_j)² / (2 rho²))``.

    ``x [..., n]`` and ``alpha``, ``rho`` broadcastable against ``x``'s leading dimensions;
    returns ``[..., n, n]``.
    """
    d = x[..., :, None] - x[..., None, :]
    return alpha[..., None, None] ** 2 * tf.exp(-0.5 * d**2 / rho[..., None, None] ** 2)


def gp_regr(dtype: Any = np.float64) -> Posterior:
    """``gp_pois_regr-gp_regr``: a Gaussian process regression of 11 points.

    Stan: ``rho ~ Gamma(25, 4)`` (rate 4), ``alpha`` ~ half-Normal(0, 2), ``sigma`` ~
    half-Normal(0, 1), ``y ~ MultiNormal(0, K)`` with ``K = gp_exp_quad_cov(x, alpha, rho) +
    sigma I``: Stan's program adds ``sigma`` itself (not ``sigma²``) to the diagonal, and so
    does this transcription. One example (``N = 1``): ``X = [x]``, ``y`` ``[1, 11]``.
    """
    name = "gp_pois_regr-gp_regr"
    d = read_data(name)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            rho=tfd.Gamma(const(25.0, dtype), const(4.0, dtype)),
            alpha=tfd.HalfNormal(const(2.0, dtype)),
            sigma=tfd.HalfNormal(const(1.0, dtype)),
        )
    )

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        x, _ = batch  # [n, T]
        alpha, rho, sigma = (params[k][..., None] for k in ("alpha", "rho", "sigma"))
        cov = _exp_quad_cov(x, alpha, rho) + sigma[..., None, None] * tf.eye(
            tf.shape(x)[-1], dtype=x.dtype
        )
        return tfd.MultivariateNormalTriL(
            loc=tf.zeros_like(x), scale_tril=tf.linalg.cholesky(cov)
        )

    return Posterior(
        name, prior, likelihood_fn, pack_series(name, d["x"], d["y"], dtype),
        read_reference(name), dtype,
    )


#: Stan's jitter on the diagonal of gp_pois_regr's covariance.
GP_POIS_JITTER = 1e-10


def _gp_pois_cholesky(x: np.ndarray, alpha: Any, rho: Any) -> Any:
    """``cholesky(gp_exp_quad_cov(x, alpha, rho) + 1e-10 I)`` (batched over alpha, rho)."""
    cov = _exp_quad_cov(tf.constant(x), alpha, rho)
    return tf.linalg.cholesky(cov + GP_POIS_JITTER * tf.eye(x.shape[-1], dtype=cov.dtype))


def gp_pois_regr(dtype: Any = np.float64) -> Posterior:
    """``gp_pois_regr-gp_pois_regr``: a latent Gaussian process with Poisson counts.

    Stan: ``rho ~ Gamma(25, 4)``, ``alpha`` ~ half-Normal(0, 2), ``f_tilde`` (11) ~
    Normal(0, 1), the transformed parameter ``f = L f_tilde`` with ``L L^T =
    gp_exp_quad_cov(x, alpha, rho) + 1e-10 I``, and ``k_i ~ Poisson(exp(f_i))``. The
    latent ``f_tilde`` is a parameter like the others. Rows: the 11 counts (``X = [x_i,
    i]``, ``i`` the 0-based index of the count's ``f``); ``f`` needs the whole grid ``x``,
    which the likelihood holds. The jitter needs float64 (a float32 Cholesky fails).

    posteriordb's reference lists ``rho``, ``alpha`` and ``f``, not ``f_tilde``:
    ``reference.json`` adds ``f_tilde = L^{-1} f`` computed from each reference draw
    (`REFERENCE_PARAMETERS`), and `Posterior.flatten` adds ``f`` (``transformed``).
    """
    name = "gp_pois_regr-gp_pois_regr"
    d = read_data(name)
    grid = np.asarray(d["x"], dtype)
    n = grid.shape[0]
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            rho=tfd.Gamma(const(25.0, dtype), const(4.0, dtype)),
            alpha=tfd.HalfNormal(const(2.0, dtype)),
            f_tilde=tfd.Sample(tfd.Normal(const(0.0, dtype), const(1.0, dtype)), n),
        )
    )

    def transformed(params: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        chol = _gp_pois_cholesky(grid, params["alpha"], params["rho"])
        return {"f": tf.einsum("...ij,...j->...i", chol, params["f_tilde"])}

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        x, _ = batch
        f = tf.gather(transformed(params)["f"], tf.cast(x[:, 1], tf.int32), axis=-1)
        return tfd.Poisson(log_rate=f)

    x = np.stack([grid, np.arange(n, dtype=np.float64)], axis=1)
    return Posterior(
        name, prior, likelihood_fn, pack(name, x, d["k"], dtype), read_reference(name), dtype,
        transformed=transformed,
    )


def _gp_pois_parameters(draws: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``f_tilde = L^{-1} f``, draw by draw, ``L`` the Cholesky factor at the draw's
    ``alpha`` and ``rho`` (the inverse of Stan's ``f = L f_tilde``)."""
    grid = np.asarray(read_data("gp_pois_regr-gp_pois_regr")["x"], np.float64)
    f = np.stack([draws[f"f[{i + 1}]"] for i in range(grid.shape[0])], axis=-1)
    chol = _gp_pois_cholesky(grid, tf.constant(draws["alpha"]), tf.constant(draws["rho"]))
    f_tilde = tf.linalg.triangular_solve(chol, tf.constant(f)[..., None])[..., 0].numpy()
    return {f"f_tilde[{i + 1}]": f_tilde[..., i] for i in range(grid.shape[0])}


# -- time series ------------------------------------------------------------------ #
def ark(dtype: Any = np.float64) -> Posterior:
    """``arK-arK``: an autoregression of order ``K = 5`` on ``T = 200`` points.

    Stan: ``alpha ~ Normal(0, 10)``, ``beta`` (5) ~ Normal(0, 10), ``sigma`` ~
    half-Cauchy(0, 2.5), and for ``t = K+1..T``, ``y_t ~ Normal(alpha + Σ_k beta_k
    y_{t-k}, sigma)`` (the first ``K`` points are conditioned on, not modelled). Given
    the series these are regression rows: ``N = T - K = 195`` rows, ``X[t] = [y_{t-1},
    ..., y_{t-K}]``, minibatchable.
    """
    name = "arK-arK"
    d = read_data(name)
    k, series = int(d["K"]), np.asarray(d["y"], np.float64)
    t = series.shape[0]
    lags = np.stack([series[k - i : t - i] for i in range(1, k + 1)], axis=1)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            alpha=tfd.Normal(const(0.0, dtype), const(10.0, dtype)),
            beta=tfd.Sample(tfd.Normal(const(0.0, dtype), const(10.0, dtype)), k),
            sigma=tfd.HalfCauchy(const(0.0, dtype), const(2.5, dtype)),
        )
    )
    return Posterior(
        name, prior, linear_regression("alpha", "beta"), pack(name, lags, series[k:], dtype),
        read_reference(name), dtype,
    )


def _linear_recursion(c: tf.Tensor, coef: tf.Tensor, init: tf.Tensor) -> tf.Tensor:
    """``x_t = coef x_{t-1} + c_t`` for ``t = 1..T`` from ``x_0 = init``, in closed form.

    ``x_t = coef^t init + Σ_{s<=t} coef^{t-s} c_s``: one product with the lower-triangular
    Toeplitz matrix ``M[t, s] = coef^{t-s}`` (``s <= t``) rather than a loop over ``t``,
    so that the Hessian (``check_nuts``'s Laplace fit, vectorised by ``pfor``) and XLA see
    no ``while`` loop. ``c [..., T]``, ``coef`` and ``init`` broadcastable to ``c[..., :1]``;
    ``O(T²)`` per series, nothing for ``T`` in the hundreds.
    """
    t = c.shape[-1]
    # coef^0 .. coef^T by products only (doubling: [1, c] -> [1, c, c², c³ ...]): the
    # gradient of `tf.math.cumprod` divides by ``coef`` (zero at coef = 0, a false mode
    # there) and the Hessian of `tf.pow` is 0 · ∞ at 0.
    powers = tf.concat([tf.ones_like(c[..., :1]), coef * tf.ones_like(c[..., :1])], -1)
    while powers.shape[-1] < t + 1:
        powers = tf.concat([powers, powers[..., 1:] * powers[..., -1:]], axis=-1)
    powers = powers[..., : t + 1]
    lag = np.subtract.outer(np.arange(t), np.arange(t))  # t - s
    toeplitz = tf.where(
        tf.constant(lag >= 0), tf.gather(powers, np.maximum(lag, 0), axis=-1), 0.0
    )  # [..., T, T]
    return tf.einsum("...ts,...s->...t", toeplitz, c) + powers[..., 1:] * init


def _times(t: int) -> np.ndarray:
    """The time index ``1..T`` (the ``X`` of a series whose recursion reads only ``y``)."""
    return np.arange(1, t + 1, dtype=np.float64)


def arma11(dtype: Any = np.float64) -> Posterior:
    """``arma-arma11``: an ARMA(1, 1) model of ``T = 200`` points.

    Stan: ``mu ~ Normal(0, 10)``, ``phi``, ``theta`` ~ Normal(0, 2), ``sigma`` ~
    half-Cauchy(0, 2.5); ``nu_1 = mu + phi mu`` (``err_0 = 0``), ``nu_t = mu + phi y_{t-1}
    + theta err_{t-1}``, ``err_t = y_t - nu_t``, ``err ~ Normal(0, sigma)``. Each ``nu_t``
    depends on the whole past through ``err``: one example (``N = 1``, ``X`` the times
    ``1..T``, ``y`` ``[1, T]``); the likelihood returns ``Normal(nu, sigma)`` over the
    series, whose log-density at ``y`` is Stan's ``Σ_t log N(err_t | 0, sigma)``.
    """
    name = "arma-arma11"
    d = read_data(name)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            mu=tfd.Normal(const(0.0, dtype), const(10.0, dtype)),
            phi=tfd.Normal(const(0.0, dtype), const(2.0, dtype)),
            theta=tfd.Normal(const(0.0, dtype), const(2.0, dtype)),
            sigma=tfd.HalfCauchy(const(0.0, dtype), const(2.5, dtype)),
        )
    )

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        _, y = batch  # [n, T]
        mu, phi, theta = (params[k][..., None] for k in ("mu", "phi", "theta"))
        # a_t = y_t - mu - phi y_{t-1} (y_0 := mu, Stan's nu_1), then
        # err_t = a_t - theta err_{t-1} (err_0 = 0).
        y_b = y + tf.zeros_like(mu[..., None])  # [..., n, T]
        prev = tf.concat([tf.zeros_like(y_b[..., :1]) + mu[..., None], y_b[..., :-1]], -1)
        a = y_b - mu[..., None] - phi[..., None] * prev
        err = _linear_recursion(a, -theta[..., None], tf.zeros_like(a[..., :1]))
        return tfd.Independent(tfd.Normal(y - err, params["sigma"][..., None, None]), 1)

    y = np.asarray(d["y"], np.float64)
    return Posterior(
        name, prior, likelihood_fn, pack_series(name, _times(y.shape[0]), y, dtype),
        read_reference(name), dtype,
    )


def garch11(dtype: Any = np.float64) -> Posterior:
    """``garch-garch11``: a GARCH(1, 1) model of ``T = 200`` points.

    Stan: ``sigma_1`` is data, ``sigma_t² = alpha0 + alpha1 (y_{t-1} - mu)² + beta1
    sigma_{t-1}²``, ``y_t ~ Normal(mu, sigma_t)``; the parameters ``mu``, ``alpha0 > 0``,
    ``0 < alpha1 < 1`` and ``0 < beta1 < 1 - alpha1`` have no statements. Stan's flat prior
    on ``(alpha1, beta1)`` is uniform on the triangle ``alpha1 + beta1 < 1``: here
    ``alpha1 ~ Beta(1, 2)`` (the triangle's marginal, density ``2 (1 - alpha1)``) and
    ``beta1 | alpha1 ~ Uniform(0, 1 - alpha1)``, whose product is the constant 2. The
    improper ``mu`` and ``alpha0`` get ``Normal(0, 1000)`` and ``HalfNormal(1000)``.
    One example (``N = 1``, ``X`` the times, ``y`` ``[1, T]``).
    """
    name = "garch-garch11"
    d = read_data(name)
    sigma1 = float(d["sigma1"])
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            mu=tfd.Normal(const(0.0, dtype), const(FLAT_LOCATION_SCALE, dtype)),
            alpha0=tfd.HalfNormal(const(FLAT_SCALE_SCALE, dtype)),
            alpha1=tfd.Beta(const(1.0, dtype), const(2.0, dtype)),
            beta1=lambda alpha1: tfd.Uniform(tf.zeros_like(alpha1), 1.0 - alpha1),
        )
    )

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        _, y = batch  # [n, T]
        mu, a0, a1, b1 = (params[k][..., None] for k in ("mu", "alpha0", "alpha1", "beta1"))
        # v_1 = sigma_1², v_t = beta1 v_{t-1} + alpha0 + alpha1 (y_{t-1} - mu)², t >= 2.
        c = a0[..., None] + a1[..., None] * tf.square(y[:, :-1] - mu[..., None])
        v1 = tf.fill(tf.shape(c[..., :1]), tf.constant(sigma1**2, y.dtype))
        var = tf.concat([v1, _linear_recursion(c, b1[..., None], v1)], axis=-1)
        sigma = tf.sqrt(var)
        return tfd.Independent(tfd.Normal(mu[..., None], sigma), 1)

    y = np.asarray(d["y"], np.float64)
    return Posterior(
        name, prior, likelihood_fn, pack_series(name, _times(y.shape[0]), y, dtype),
        read_reference(name), dtype,
    )


# -- mixture ------------------------------------------------------------------------ #
def low_dim_gauss_mix(dtype: Any = np.float64) -> Posterior:
    """``low_dim_gauss_mix-low_dim_gauss_mix``: a two-component normal mixture, N = 1,000.

    Stan: ``mu`` ordered (2) with ``mu ~ Normal(0, 2)`` (`OrderedNormal`, which also keeps
    the labels from switching), ``sigma`` (2) ~ half-Normal(0, 2), ``theta ~ Beta(5, 5)``
    on ``(0, 1)``, and ``y_n ~ theta Normal(mu_1, sigma_1) + (1 - theta) Normal(mu_2,
    sigma_2)`` (Stan's ``log_mix``). Rows: the 1,000 points, no features (``X [N, 0]``).
    """
    name = "low_dim_gauss_mix-low_dim_gauss_mix"
    d = read_data(name)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            mu=OrderedNormal(const([0.0, 0.0], dtype), const([2.0, 2.0], dtype)),
            sigma=tfd.Sample(tfd.HalfNormal(const(2.0, dtype)), 2),
            theta=tfd.Beta(const(5.0, dtype), const(5.0, dtype)),
        )
    )

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        _, y = batch  # [n]
        zeros = tf.zeros_like(y)[:, None]  # [n, 1]: the rows' batch dimension
        theta = params["theta"][..., None, None]
        probs = tf.concat([theta, 1.0 - theta], axis=-1) + zeros  # [..., n, 2]
        loc = params["mu"][..., None, :] + zeros
        scale = params["sigma"][..., None, :] + zeros
        return tfd.MixtureSameFamily(tfd.Categorical(probs=probs), tfd.Normal(loc, scale))

    y = np.asarray(d["y"], np.float64)
    return Posterior(
        name, prior, likelihood_fn, pack(name, np.zeros((y.shape[0], 0)), y, dtype),
        read_reference(name), dtype,
    )


# -- hidden Markov models ------------------------------------------------------------ #
def _hmm(
    params: Mapping[str, tf.Tensor], observation: tfd.Distribution, num_steps: int
) -> tfd.HiddenMarkovModel:
    """Stan's forward algorithm as ``tfd.HiddenMarkovModel``: two states, transition rows
    ``theta1``, ``theta2`` (``P(z_t = k | z_{t-1} = j) = theta_j[k]``), and ``observation``
    (batch ``[..., 1, K]``: chains, the series, the states).

    Stan starts the forward recursion at ``gamma_1[k] = log p(y_1 | k)``, with no initial
    probabilities: the same as a uniform initial distribution up to the constant
    ``log K``, which the posterior does not see.
    """
    transition = tf.stack([params["theta1"], params["theta2"]], axis=-2)[..., None, :, :]
    k = transition.shape[-1]
    return tfd.HiddenMarkovModel(
        initial_distribution=tfd.Categorical(logits=tf.zeros([k], transition.dtype)),
        transition_distribution=tfd.Categorical(probs=transition),
        observation_distribution=observation,
        num_steps=num_steps,
    )


def hmm_example(dtype: Any = np.float64) -> Posterior:
    """``hmm_example-hmm_example``: a two-state hidden Markov model of 100 normal points.

    Stan: the transition rows ``theta1``, ``theta2`` are simplexes with no statement
    (uniform: ``Dirichlet(1, 1)``), ``mu`` is ``positive_ordered`` with ``mu_1 ~ Normal(3,
    1)`` and ``mu_2 ~ Normal(10, 1)`` (`OrderedNormal` with ``low = 0``), and ``y_t | z_t = k
    ~ Normal(mu_k, 1)``, the states summed out by the forward algorithm
    (``tfd.HiddenMarkovModel``). One example (``N = 1``, ``X`` the times, ``y`` ``[1, T]``).
    The generated quantities (the Viterbi path ``z_star``) are not modelled; the transformed
    parameter ``theta`` is ``theta1``, ``theta2`` stacked.
    """
    name = "hmm_example-hmm_example"
    d = read_data(name)
    k = int(d["K"])
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            theta1=SimplexDirichlet(tf.ones([k], dtype)),
            theta2=SimplexDirichlet(tf.ones([k], dtype)),
            mu=OrderedNormal(const([3.0, 10.0], dtype), const([1.0, 1.0], dtype), low=0.0),
        )
    )

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        _, y = batch  # [n, T]
        emission = tfd.Normal(params["mu"][..., None, :], tf.ones([], y.dtype))
        return _hmm(params, emission, y.shape[-1])

    y = np.asarray(d["y"], np.float64)
    return Posterior(
        name, prior, likelihood_fn, pack_series(name, _times(y.shape[0]), y, dtype),
        read_reference(name), dtype,
    )


def _drive(name: str, emission: str, dtype: Any) -> Posterior:
    """The basketball drive HMMs: two states, two observed series ``u`` (1/speed) and ``v``
    (distance to the hoop), ``y [1, T, 2]``; see `hmm_drive_0`, `hmm_drive_1`."""
    d = read_data(name)
    k = int(d["K"])
    alpha = np.asarray(d["alpha"], np.float64)
    if alpha.shape != (k, k):
        raise ValueError(f"{name}: alpha must be [K, K], got {alpha.shape}.")
    low = 0.0 if emission == "exponential" else None  # positive_ordered, ordered
    ordered = dict(loc=const([0.0, 3.0], dtype), scale=const([1.0, 1.0], dtype), low=low)
    prior = tfd.JointDistributionNamedAutoBatched(
        {
            "theta1": SimplexDirichlet(const(alpha[0], dtype)),
            "theta2": SimplexDirichlet(const(alpha[1], dtype)),
            "phi": OrderedNormal(**ordered),
            "lambda": OrderedNormal(**ordered),  # Stan's name, a Python keyword
        }
    )
    sd = None if emission == "exponential" else const([d["tau"], d["rho"]], dtype)

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        _, y = batch  # [n, T, 2]
        rates = tf.stack([params["phi"], params["lambda"]], axis=-1)[..., None, :, :]
        if sd is None:
            obs = tfd.Exponential(rate=rates)
        else:
            obs = tfd.Normal(rates, sd)
        return _hmm(params, tfd.Independent(obs, 1), y.shape[-2])

    y = np.stack([d["u"], d["v"]], axis=-1)
    return Posterior(
        name, prior, likelihood_fn, pack_series(name, _times(y.shape[0]), y, dtype),
        read_reference(name), dtype,
    )


def hmm_drive_0(dtype: Any = np.float64) -> Posterior:
    """``bball_drive_event_0-hmm_drive_0``: a two-state HMM of a basketball drive, T = 416.

    Stan: transition rows ``theta_k ~ Dirichlet(alpha[k, :])`` (``alpha`` is data, ``[[4,
    2], [2, 4]]``), ``phi`` and ``lambda`` ``positive_ordered`` with ``phi_1, lambda_1 ~
    Normal(0, 1)`` and ``phi_2, lambda_2 ~ Normal(3, 1)`` (`OrderedNormal`, ``low = 0``),
    and given state ``k``, ``u_t ~ Exponential(phi_k)`` and ``v_t ~ Exponential(lambda_k)``
    (rates), the states summed out by ``tfd.HiddenMarkovModel``. One example (``N = 1``,
    ``X`` the times, ``y = [u, v]`` ``[1, T, 2]``). The Viterbi path is not modelled.
    """
    return _drive("bball_drive_event_0-hmm_drive_0", "exponential", dtype)


def hmm_drive_1(dtype: Any = np.float64) -> Posterior:
    """``bball_drive_event_1-hmm_drive_1``: the drive HMM with normal emissions, T = 416.

    As `hmm_drive_0` but ``phi`` and ``lambda`` are ``ordered`` (no lower bound) and given
    state ``k``, ``u_t ~ Normal(phi_k, tau)``, ``v_t ~ Normal(lambda_k, rho)`` with the data
    ``tau = rho = 0.1``.
    """
    return _drive("bball_drive_event_1-hmm_drive_1", "normal", dtype)


#: posteriordb name -> builder.
BUILDERS: dict[str, Callable[..., Posterior]] = {
    "eight_schools-eight_schools_noncentered": eight_schools_noncentered,
    "gp_pois_regr-gp_regr": gp_regr,
    "gp_pois_regr-gp_pois_regr": gp_pois_regr,
    "arK-arK": ark,
    "arma-arma11": arma11,
    "garch-garch11": garch11,
    "low_dim_gauss_mix-low_dim_gauss_mix": low_dim_gauss_mix,
    "hmm_example-hmm_example": hmm_example,
    "bball_drive_event_0-hmm_drive_0": hmm_drive_0,
    "bball_drive_event_1-hmm_drive_1": hmm_drive_1,
}

#: posteriordb name -> ``draws -> draws``: the Stan parameters the reference draws lack
#: (they list a transformed parameter instead), computed from each draw of those they hold
#: (``make_reference.py`` adds them to ``reference.json``).
REFERENCE_PARAMETERS: dict[
    str, Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]
] = {
    "eight_schools-eight_schools_noncentered": _eight_schools_parameters,
    "gp_pois_regr-gp_pois_regr": _gp_pois_parameters,
}
