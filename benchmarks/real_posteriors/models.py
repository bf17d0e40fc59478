"""Five posteriors on scikit-learn's bundled data sets, in the form ``JointPosterior`` takes.

Each builder returns a `Posterior`: a ``tfd.JointDistributionNamedAutoBatched`` prior, a
per-example likelihood ``likelihood_fn(params, (X, y))``, the data ``(X, y)`` (the response
last, float, ``y`` holding class labels ``0, 1, ...`` for the classifiers) and a name, so that

```python
import numpy as np
import tfp_sgmcmc as sg
from benchmarks.real_posteriors import models

m = models.load("breast-cancer-logistic", dtype=np.float64)
post = sg.JointPosterior(m.prior, m.likelihood_fn, m.data, batch_size=64)
```

is the posterior whose NUTS reference summary is ``reference.json`` in this folder
(``check_reference.py``). The data are read with ``sklearn.datasets.load_*`` (bundled with
scikit-learn, nothing is downloaded); see ``README.md`` for their origin and licence.

The predictors are used as they come, **not standardised**: the raw features' scales span up
to six orders of magnitude, which is what a user who does not standardise gives the sampler.
The priors are weakly informative and scale-aware in the style of rstanarm's defaults, with
``s_j`` the standard deviation of predictor ``j`` and ``s_y`` that of the response:

* regression coefficients ``beta_j ~ Normal(0, 2.5 s_y / s_j)``, an intercept on the raw
  (uncentred) design ``alpha ~ Normal(0, 10 s_y)``, a noise scale
  ``sigma ~ Exponential(rate = 1 / s_y)``;
* logistic and softmax coefficients ``beta_j ~ Normal(0, 2.5 / s_j)`` (``Normal(0, 2.5)``
  per standardised predictor), intercepts ``alpha ~ Normal(0, 100)`` on the raw design
  (the intercept of an uncentred design absorbs ``-Σ_j beta_j mean_j``, tens of log-odds
  here);
* the Student-t degrees of freedom ``nu ~ Gamma(2, 0.1)`` (Juárez and Steel 2010).

The prior is a function of the data only through the ``s_j`` and ``s_y``, computed in float64
from the full data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions

__all__ = [
    "BUILDERS",
    "NAMES",
    "Posterior",
    "Reference",
    "breast_cancer_logistic",
    "diabetes_linear",
    "diabetes_raw_linear",
    "diabetes_raw_student",
    "load",
    "read_reference",
    "wine_softmax",
]

HERE = Path(__file__).resolve().parent
REFERENCE_FILE = HERE / "reference.json"

LikelihoodFn = Callable[[Mapping[str, tf.Tensor], tuple[tf.Tensor, tf.Tensor]], tfd.Distribution]


class Reference(NamedTuple):
    """The NUTS reference summary of one scalar parameter."""

    mean: float
    sd: float
    mcse: float


@dataclass
class Posterior:
    """One posterior in TFP form.

    Attributes:
      name: e.g. ``"diabetes-linear"``.
      prior: the prior (vector and matrix parameters as single parts).
      likelihood_fn: ``(params, (X, y)) -> tfd.Distribution`` whose ``log_prob(y)`` has
        shape ``chains + [n]`` for parameters with leading chain dimensions.
      data: ``(X, y)``, arrays of ``dtype`` with ``N`` rows, the response last.
      dtype: the float dtype of the prior, the data and the likelihood.
      description: one line: data, likelihood, parameters.
      reference_bijectors: part name -> bijector to use instead of the prior's default in
        the NUTS reference run (``check_reference.py``); the posterior of the parameters is
        the same, only the coordinates NUTS moves in change. Default value: none.
    """

    name: str
    prior: tfd.JointDistributionNamedAutoBatched
    likelihood_fn: LikelihoodFn
    data: tuple[np.ndarray, np.ndarray]
    dtype: Any
    description: str
    reference_bijectors: dict[str, Any] = field(default_factory=dict)

    @property
    def num_examples(self) -> int:
        """``N``, the number of observations."""
        return int(self.data[1].shape[0])

    @property
    def event_shapes(self) -> dict[str, tuple[int, ...]]:
        """Each prior part's event shape, in the prior's order."""
        shapes = self.prior.event_shape
        return {k: tuple(tf.TensorShape(shapes[k]).as_list()) for k in self.prior.model}

    @property
    def num_parameters(self) -> int:
        """The number of scalar parameters."""
        return sum(int(np.prod(s, dtype=np.int64)) for s in self.event_shapes.values())

    @property
    def reference(self) -> dict[str, Reference]:
        """The NUTS reference summary of this posterior (``reference.json``)."""
        return read_reference(self.name)

    def flatten(self, draws: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Draws by part name -> draws by scalar name.

        Args:
          draws: part name -> array ``[*sample_dims, *event]``.

        Returns:
          scalar name -> array ``[*sample_dims]``: a scalar part keeps its name, element
          ``i`` of a vector part ``beta`` is ``"beta[i]"`` and element ``(i, k)`` of a
          matrix part ``"beta[i,k]"``, counting from one.
        """
        out: dict[str, np.ndarray] = {}
        for name, shape in self.event_shapes.items():
            values = np.asarray(draws[name])
            if not shape:
                out[name] = values
                continue
            for index in np.ndindex(*shape):
                label = ",".join(str(i + 1) for i in index)
                out[f"{name}[{label}]"] = values[(..., *index)]
        return out


def read_reference(name: str, path: Path | str = REFERENCE_FILE) -> dict[str, Reference]:
    """The NUTS reference summary of posterior ``name``: scalar name -> `Reference`.

    Raises:
      KeyError: ``reference.json`` has no summary of ``name``.
    """
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    params = doc["posteriors"][name]["parameters"]
    return {
        k: Reference(float(v["mean"]), float(v["sd"]), float(v["mcse"])) for k, v in params.items()
    }


# -- data --------------------------------------------------------------------- #
def _sklearn(loader: str, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    """``sklearn.datasets.<loader>(return_X_y=True)`` as float64 arrays."""
    from sklearn import datasets

    x, y = getattr(datasets, loader)(return_X_y=True, **kwargs)
    return np.asarray(x, np.float64), np.asarray(y, np.float64)


def _const(x: Any, dtype: Any) -> tf.Tensor:
    return tf.constant(np.asarray(x, np.float64), dtype=dtype)


def _regression_prior(
    x: np.ndarray, y: np.ndarray, dtype: Any, **extra: tfd.Distribution
) -> tfd.JointDistributionNamedAutoBatched:
    s_x, s_y = x.std(axis=0), y.std()
    return tfd.JointDistributionNamedAutoBatched(
        dict(
            alpha=tfd.Normal(_const(0.0, dtype), _const(10.0 * s_y, dtype)),
            beta=tfd.Independent(
                tfd.Normal(_const(np.zeros_like(s_x), dtype), _const(2.5 * s_y / s_x, dtype)),
                reinterpreted_batch_ndims=1,
            ),
            sigma=tfd.Exponential(_const(1.0 / s_y, dtype)),
            **extra,
        )
    )


def _linear_mean(params: Mapping[str, tf.Tensor], x: tf.Tensor) -> tf.Tensor:
    return params["alpha"][..., None] + tf.einsum("nd,...d->...n", x, params["beta"])


def _normal_likelihood(params: Mapping[str, tf.Tensor], batch: Any) -> tfd.Distribution:
    x, _ = batch
    return tfd.Normal(_linear_mean(params, x), params["sigma"][..., None])


def _student_likelihood(params: Mapping[str, tf.Tensor], batch: Any) -> tfd.Distribution:
    x, _ = batch
    return tfd.StudentT(
        params["nu"][..., None], _linear_mean(params, x), params["sigma"][..., None]
    )


def _logistic_likelihood(params: Mapping[str, tf.Tensor], batch: Any) -> tfd.Distribution:
    x, _ = batch
    return tfd.Bernoulli(logits=_linear_mean(params, x), dtype=x.dtype)


def _softmax_likelihood(params: Mapping[str, tf.Tensor], batch: Any) -> tfd.Distribution:
    """Class 0 is the baseline (logit 0); ``alpha [K-1]``, ``beta [d, K-1]``."""
    x, _ = batch
    logits = params["alpha"][..., None, :] + tf.einsum("nd,...dk->...nk", x, params["beta"])
    zero = tf.zeros_like(logits[..., :1])
    return tfd.Categorical(logits=tf.concat([zero, logits], axis=-1), dtype=x.dtype)


# -- the posteriors ------------------------------------------------------------ #
def diabetes_linear(dtype: Any = np.float64) -> Posterior:
    """Linear regression with unknown noise on ``load_diabetes()`` as shipped.

    442 patients, 10 baseline predictors (scikit-learn's copy is mean-centred and scaled so
    that each column has unit Euclidean norm, sd 0.048), ``y`` a disease progression
    score (25 to 346). ``y ~ Normal(alpha + X beta, sigma)``; 12 parameters.
    """
    x, y = _sklearn("load_diabetes")
    return Posterior(
        "diabetes-linear",
        _regression_prior(x, y, dtype),
        _normal_likelihood,
        (x.astype(dtype), y.astype(dtype)),
        dtype,
        "load_diabetes() (centred, unit-norm columns); Normal linear regression; "
        "alpha, beta[10], sigma",
    )


def diabetes_raw_linear(dtype: Any = np.float64) -> Posterior:
    """The same regression on the raw predictors, ``load_diabetes(scaled=False)``.

    Age in years, sex coded 1/2, BMI, blood pressure and six serum measurements on their
    own scales (sd 0.5 to 35, means up to 190): an uncentred design with condition number
    about 7e3, so the intercept is strongly correlated with every slope. 12 parameters.
    """
    x, y = _sklearn("load_diabetes", scaled=False)
    return Posterior(
        "diabetes-raw-linear",
        _regression_prior(x, y, dtype),
        _normal_likelihood,
        (x.astype(dtype), y.astype(dtype)),
        dtype,
        "load_diabetes(scaled=False) (raw, uncentred); Normal linear regression; "
        "alpha, beta[10], sigma",
    )


def diabetes_raw_student(dtype: Any = np.float64) -> Posterior:
    """Robust (Student-t) regression on the raw diabetes predictors, unknown ``nu``.

    ``y ~ StudentT(nu, alpha + X beta, sigma)``, ``nu ~ Gamma(2, 0.1)``. The residuals are
    close to normal, so the data say little against large ``nu``: its posterior is wide
    and right-skewed, far from the Laplace approximation at the mode, and the likelihood
    falls off a cliff as ``nu`` goes to zero (about two Laplace sds below the mode in the
    default softplus coordinates). The NUTS reference runs on ``log nu`` instead, where the
    cliff is many sds away. 13 parameters.
    """
    x, y = _sklearn("load_diabetes", scaled=False)
    nu = tfd.Gamma(_const(2.0, dtype), _const(0.1, dtype))
    return Posterior(
        "diabetes-raw-student",
        _regression_prior(x, y, dtype, nu=nu),
        _student_likelihood,
        (x.astype(dtype), y.astype(dtype)),
        dtype,
        "load_diabetes(scaled=False); Student-t regression, nu ~ Gamma(2, 0.1); "
        "alpha, beta[10], sigma, nu",
        reference_bijectors={"nu": tfp.bijectors.Exp()},
    )


def breast_cancer_logistic(dtype: Any = np.float64) -> Posterior:
    """Logistic regression on ``load_breast_cancer()``'s 30 raw features.

    569 tumours (212 malignant, 357 benign, ``y = 1`` benign), 30 features of cell nuclei on
    scales from 0.003 (sd of fractal-dimension error) to 569 (sd of worst area), many of
    them nearly collinear (radius, perimeter, area). The classes are almost separable, so
    the posterior is shaped by the prior in several directions. 31 parameters.
    """
    x, y = _sklearn("load_breast_cancer")
    s_x = x.std(axis=0)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            alpha=tfd.Normal(_const(0.0, dtype), _const(100.0, dtype)),
            beta=tfd.Independent(
                tfd.Normal(_const(np.zeros_like(s_x), dtype), _const(2.5 / s_x, dtype)),
                reinterpreted_batch_ndims=1,
            ),
        )
    )
    return Posterior(
        "breast-cancer-logistic",
        prior,
        _logistic_likelihood,
        (x.astype(dtype), y.astype(dtype)),
        dtype,
        "load_breast_cancer() (raw); logistic regression; alpha, beta[30]",
    )


def wine_softmax(dtype: Any = np.float64) -> Posterior:
    """Softmax (multinomial logistic) regression on ``load_wine()``'s 13 raw features.

    178 wines of 3 cultivars, 13 chemical measurements (sd 0.12 to 314, proline in the
    hundreds). Class 0 is the baseline: ``alpha [2]``, ``beta [13, 2]``; 28 parameters.
    The cultivars are separable, so the posterior is shaped by the prior.
    """
    x, y = _sklearn("load_wine")
    s_x = x.std(axis=0)
    k = int(y.max())  # classes other than the baseline
    scale = np.repeat((2.5 / s_x)[:, None], k, axis=1)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            alpha=tfd.Sample(tfd.Normal(_const(0.0, dtype), _const(100.0, dtype)), k),
            beta=tfd.Independent(
                tfd.Normal(_const(np.zeros_like(scale), dtype), _const(scale, dtype)),
                reinterpreted_batch_ndims=2,
            ),
        )
    )
    return Posterior(
        "wine-softmax",
        prior,
        _softmax_likelihood,
        (x.astype(dtype), y.astype(dtype)),
        dtype,
        "load_wine() (raw); softmax regression, class 0 the baseline; alpha[2], beta[13,2]",
    )


#: name -> builder.
BUILDERS: dict[str, Callable[..., Posterior]] = {
    "diabetes-linear": diabetes_linear,
    "diabetes-raw-linear": diabetes_raw_linear,
    "diabetes-raw-student": diabetes_raw_student,
    "breast-cancer-logistic": breast_cancer_logistic,
    "wine-softmax": wine_softmax,
}
NAMES: tuple[str, ...] = tuple(BUILDERS)


def load(name: str, dtype: Any = np.float64) -> Posterior:
    """The posterior called ``name`` (one of `NAMES`) in ``dtype``.

    Raises:
      KeyError: ``name`` is not one of `NAMES`.
    """
    if name not in BUILDERS:
        raise KeyError(f"unknown posterior {name!r}; one of {list(NAMES)}")
    return BUILDERS[name](dtype=np.dtype(dtype).type)
