"""Four posteriordb posteriors transcribed from Stan into TFP form.

Each builder returns a `Posterior`: a ``tfd.JointDistributionNamedAutoBatched`` prior over
the Stan parameters (same names, vectors as vector parts), a per-example likelihood, the
data as ``(X, y)`` with the response last, and posteriordb's reference summary, so that

```python
from benchmarks.posteriordb import models
import tfp_sgmcmc as sg

m = models.load("kidiq-kidscore_interaction", dtype=np.float64)
post = sg.JointPosterior(m.prior, m.likelihood_fn, m.data, batch_size=64)
```

gives the posterior the reference draws come from. The transcriptions were written from the
Stan programs in this folder (``<name>/model.stan``) without looking at the library, and are
checked against the reference with TFP's NUTS by ``check_nuts.py``
(``benchmarks/results/posteriordb_nuts.json``).

Stan's improper flat priors (a parameter with no sampling statement) have no TFP
equivalent; they become very wide proper priors, ``Normal(0, 1000)`` for a coefficient and
``HalfNormal(1000)`` for a positive scale. On these data the posteriors' sds are at most
about 15, so the difference is far below the reference's Monte Carlo error.

The data and reference summaries are read from this folder (``<name>/data.json.zip``,
``<name>/reference.json``); nothing outside the repository is used.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
    "diamonds",
    "kidiq_kidscore_interaction",
    "load",
    "nes2000_nes",
    "read_data",
    "read_reference",
    "sblrc_blr",
]

HERE = Path(__file__).resolve().parent

#: Wide proper stand-ins for Stan's improper flat priors.
FLAT_COEFFICIENT_SCALE = 1000.0
FLAT_SCALE_SCALE = 1000.0


class Reference(NamedTuple):
    """posteriordb's reference summary of one scalar parameter (10 chains x 1,000 draws)."""

    mean: float
    sd: float
    mcse: float


LikelihoodFn = Callable[[Mapping[str, tf.Tensor], tuple[tf.Tensor, tf.Tensor]], tfd.Distribution]


@dataclass
class Posterior:
    """One posterior in TFP form.

    Attributes:
      name: posteriordb's name, e.g. ``"kidiq-kidscore_interaction"``.
      prior: the prior over the Stan parameters (vector parameters as vector parts).
      likelihood_fn: ``(params, (X, y)) -> tfd.Distribution`` whose ``log_prob(y)`` has
        shape ``chains + [n]`` for parameters with leading chain dimensions.
      data: ``(X, y)``, float arrays of ``dtype`` with ``N`` rows, the response last.
      reference: Stan scalar name (``"beta[1]"``, ``"sigma"``) -> `Reference`.
      dtype: the float dtype of the prior, the data and the likelihood.
    """

    name: str
    prior: tfd.JointDistributionNamedAutoBatched
    likelihood_fn: LikelihoodFn
    data: tuple[np.ndarray, np.ndarray]
    reference: dict[str, Reference]
    dtype: Any

    @property
    def num_examples(self) -> int:
        """``N``, the number of observations."""
        return int(self.data[1].shape[0])

    @property
    def event_shapes(self) -> dict[str, tuple[int, ...]]:
        """Each prior part's event shape, in the order of the Stan program's parameters."""
        shapes = self.prior.event_shape
        return {k: tuple(tf.TensorShape(shapes[k]).as_list()) for k in self.prior.model}

    def flatten(self, draws: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Constrained draws by part name -> draws by Stan scalar name.

        Args:
          draws: part name -> array ``[*sample_dims, *event]`` (e.g. ``[draws, chains]``
            for ``sigma``, ``[draws, chains, d]`` for ``beta``).

        Returns:
          Stan scalar name -> array ``[*sample_dims]``: ``"beta[1]"`` is ``beta[..., 0]``
          (Stan counts from one), a scalar part keeps its name.
        """
        out: dict[str, np.ndarray] = {}
        for name, shape in self.event_shapes.items():
            values = np.asarray(draws[name])
            if len(shape) == 0:
                out[name] = values
            elif len(shape) == 1:
                for i in range(shape[0]):
                    out[f"{name}[{i + 1}]"] = values[..., i]
            else:  # pragma: no cover - none of these models has a matrix parameter
                raise NotImplementedError(f"part {name!r} has event shape {shape}")
        return out

    def reference_values(self) -> dict[str, np.ndarray]:
        """The reference means by part name (the inverse of `flatten`), of ``dtype``."""
        out = {}
        for name, shape in self.event_shapes.items():
            if len(shape) == 0:
                out[name] = np.asarray(self.reference[name].mean, self.dtype)
            else:
                out[name] = np.asarray(
                    [self.reference[f"{name}[{i + 1}]"].mean for i in range(shape[0])],
                    self.dtype,
                )
        return out


# -- files ------------------------------------------------------------------- #
def read_data(name: str) -> dict[str, Any]:
    """The Stan data of posterior ``name`` (``<name>/data.json.zip``, one JSON object)."""
    with zipfile.ZipFile(HERE / name / "data.json.zip") as archive:
        (member,) = archive.namelist()
        return json.loads(archive.read(member))


def read_reference(name: str) -> dict[str, Reference]:
    """The reference summary of posterior ``name`` (``<name>/reference.json``)."""
    with open(HERE / name / "reference.json", encoding="utf-8") as f:
        doc = json.load(f)
    return {
        k: Reference(float(v["mean"]), float(v["sd"]), float(v["mcse"]))
        for k, v in doc["parameters"].items()
    }


# -- shared pieces ----------------------------------------------------------- #
def _const(x: Any, dtype: Any) -> tf.Tensor:
    return tf.constant(x, dtype=dtype)


def _linear_regression(
    intercept_name: str | None, coefficient_name: str
) -> LikelihoodFn:
    """``y ~ Normal(Intercept + X b, sigma)`` (no separate intercept when it is ``None``)."""

    def likelihood_fn(
        params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
    ) -> tfd.Distribution:
        x, _ = batch
        mu = tf.einsum("nd,...d->...n", x, params[coefficient_name])
        if intercept_name is not None:
            mu = mu + params[intercept_name][..., None]
        return tfd.Normal(mu, params["sigma"][..., None])

    return likelihood_fn


def _pack(name: str, x: np.ndarray, y: np.ndarray, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=dtype)
    y = np.asarray(y, dtype=dtype)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"{name}: X must be [N, d] and y [N], got {x.shape} and {y.shape}.")
    return x, y


# -- the four posteriors ------------------------------------------------------ #
def diamonds(dtype: Any = np.float64) -> Posterior:
    """``diamonds-diamonds``: brms's linear regression of log price on 24 predictors.

    Stan (brms 2.10): the design ``X`` (N = 5,000, K = 25, column 1 the intercept) loses its
    first column and the others are centred on their means (``Xc``); the parameters are
    ``b`` (24) ~ Normal(0, 1), the intercept of the centred design ``Intercept`` ~
    StudentT(3, 8, 10) and ``sigma`` > 0 ~ StudentT(3, 0, 10) truncated at zero
    (``tfd.HalfStudentT(3, 0, 10)``); ``Y ~ Normal(Intercept + Xc b, sigma)``. The generated
    quantity ``b_Intercept`` is not a parameter and is not modelled.
    """
    name = "diamonds-diamonds"
    d = read_data(name)
    x = np.asarray(d["X"], np.float64)
    if x.shape != (d["N"], d["K"]) or not np.all(x[:, 0] == 1.0):
        raise ValueError(f"{name}: X must be [N, K] with a column of ones first.")
    xc = x[:, 1:] - x[:, 1:].mean(axis=0)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            b=tfd.Sample(tfd.Normal(_const(0.0, dtype), _const(1.0, dtype)), xc.shape[1]),
            Intercept=tfd.StudentT(_const(3.0, dtype), _const(8.0, dtype), _const(10.0, dtype)),
            sigma=tfd.HalfStudentT(_const(3.0, dtype), _const(0.0, dtype), _const(10.0, dtype)),
        )
    )
    return Posterior(
        name, prior, _linear_regression("Intercept", "b"), _pack(name, xc, d["Y"], dtype),
        read_reference(name), dtype,
    )


def kidiq_kidscore_interaction(dtype: Any = np.float64) -> Posterior:
    """``kidiq-kidscore_interaction``: kid's score on mother's IQ, school and their product.

    Stan: ``kid_score ~ normal(beta[1] + beta[2] mom_hs + beta[3] mom_iq + beta[4] mom_hs
    mom_iq, sigma)`` (N = 434), ``sigma ~ cauchy(0, 2.5)`` on ``sigma > 0``
    (``tfd.HalfCauchy(0, 2.5)``), and no statement for ``beta``: Stan's improper flat prior,
    here ``Normal(0, 1000)`` per coefficient. ``X`` is ``[1, mom_hs, mom_iq, mom_hs mom_iq]``
    (uncentred, as in Stan).
    """
    name = "kidiq-kidscore_interaction"
    d = read_data(name)
    hs = np.asarray(d["mom_hs"], np.float64)
    iq = np.asarray(d["mom_iq"], np.float64)
    x = np.stack([np.ones_like(hs), hs, iq, hs * iq], axis=1)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            beta=tfd.Sample(
                tfd.Normal(_const(0.0, dtype), _const(FLAT_COEFFICIENT_SCALE, dtype)), 4
            ),
            sigma=tfd.HalfCauchy(_const(0.0, dtype), _const(2.5, dtype)),
        )
    )
    return Posterior(
        name, prior, _linear_regression(None, "beta"), _pack(name, x, d["kid_score"], dtype),
        read_reference(name), dtype,
    )


def nes2000_nes(dtype: Any = np.float64) -> Posterior:
    """``nes2000-nes``: party identification in the 2000 National Election Study.

    Stan: ``partyid7 ~ normal(X beta, sigma)`` (N = 476) with ``X`` = ``[1, real_ideo,
    race_adj, age30_44, age45_64, age65up, educ1, gender, income]``, where the age dummies
    are ``age_discrete == 2``, ``== 3`` and ``== 4`` (category 1 is the baseline). Neither
    ``beta`` nor ``sigma`` has a statement: Stan's improper flat priors, here
    ``Normal(0, 1000)`` per coefficient and ``HalfNormal(1000)`` for ``sigma``.
    """
    name = "nes2000-nes"
    d = read_data(name)
    age = np.asarray(d["age_discrete"])
    columns = [
        np.ones(d["N"]),
        d["real_ideo"],
        d["race_adj"],
        age == 2,
        age == 3,
        age == 4,
        d["educ1"],
        d["gender"],
        d["income"],
    ]
    x = np.stack([np.asarray(c, np.float64) for c in columns], axis=1)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            beta=tfd.Sample(
                tfd.Normal(_const(0.0, dtype), _const(FLAT_COEFFICIENT_SCALE, dtype)), 9
            ),
            sigma=tfd.HalfNormal(_const(FLAT_SCALE_SCALE, dtype)),
        )
    )
    return Posterior(
        name, prior, _linear_regression(None, "beta"), _pack(name, x, d["partyid7"], dtype),
        read_reference(name), dtype,
    )


def sblrc_blr(dtype: Any = np.float64) -> Posterior:
    """``sblrc-blr``: a Bayesian linear regression without intercept on simulated data.

    Stan: ``beta ~ normal(0, 10)`` (D = 5), ``sigma ~ normal(0, 10)`` on ``sigma > 0``
    (``tfd.HalfNormal(10)``), ``y ~ normal(X beta, sigma)`` (N = 100).
    """
    name = "sblrc-blr"
    d = read_data(name)
    x = np.asarray(d["X"], np.float64)
    if x.shape != (d["N"], d["D"]):
        raise ValueError(f"{name}: X must be [N, D], got {x.shape}.")
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            beta=tfd.Sample(tfd.Normal(_const(0.0, dtype), _const(10.0, dtype)), d["D"]),
            sigma=tfd.HalfNormal(_const(10.0, dtype)),
        )
    )
    return Posterior(
        name, prior, _linear_regression(None, "beta"), _pack(name, x, d["y"], dtype),
        read_reference(name), dtype,
    )


#: posteriordb name -> builder.
BUILDERS: dict[str, Callable[..., Posterior]] = {
    "diamonds-diamonds": diamonds,
    "kidiq-kidscore_interaction": kidiq_kidscore_interaction,
    "nes2000-nes": nes2000_nes,
    "sblrc-blr": sblrc_blr,
}
NAMES: tuple[str, ...] = tuple(BUILDERS)


def load(name: str, dtype: Any = np.float64) -> Posterior:
    """The posterior called ``name`` (one of `NAMES`) in ``dtype``.

    Raises:
      KeyError: ``name`` is not one of `NAMES`.
    """
    if name not in BUILDERS:
        raise KeyError(f"unknown posterior {name!r}; one of {list(NAMES)}")
    return BUILDERS[name](dtype=dtype)
