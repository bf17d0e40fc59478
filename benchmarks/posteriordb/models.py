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

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow_probability as tfp

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
_families = _load_module("posteriordb.families")

tfd = tfp.distributions
FLAT_COEFFICIENT_SCALE = _common.FLAT_COEFFICIENT_SCALE
FLAT_SCALE_SCALE = _common.FLAT_SCALE_SCALE
Posterior = _common.Posterior
Reference = _common.Reference
read_data = _common.read_data
read_reference = _common.read_reference
const = _common.const
linear_regression = _common.linear_regression
pack = _common.pack

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
            b=tfd.Sample(tfd.Normal(const(0.0, dtype), const(1.0, dtype)), xc.shape[1]),
            Intercept=tfd.StudentT(const(3.0, dtype), const(8.0, dtype), const(10.0, dtype)),
            sigma=tfd.HalfStudentT(const(3.0, dtype), const(0.0, dtype), const(10.0, dtype)),
        )
    )
    return Posterior(
        name, prior, linear_regression("Intercept", "b"), pack(name, xc, d["Y"], dtype),
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
                tfd.Normal(const(0.0, dtype), const(FLAT_COEFFICIENT_SCALE, dtype)), 4
            ),
            sigma=tfd.HalfCauchy(const(0.0, dtype), const(2.5, dtype)),
        )
    )
    return Posterior(
        name, prior, linear_regression(None, "beta"), pack(name, x, d["kid_score"], dtype),
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
                tfd.Normal(const(0.0, dtype), const(FLAT_COEFFICIENT_SCALE, dtype)), 9
            ),
            sigma=tfd.HalfNormal(const(FLAT_SCALE_SCALE, dtype)),
        )
    )
    return Posterior(
        name, prior, linear_regression(None, "beta"), pack(name, x, d["partyid7"], dtype),
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
            beta=tfd.Sample(tfd.Normal(const(0.0, dtype), const(10.0, dtype)), d["D"]),
            sigma=tfd.HalfNormal(const(10.0, dtype)),
        )
    )
    return Posterior(
        name, prior, linear_regression(None, "beta"), pack(name, x, d["y"], dtype),
        read_reference(name), dtype,
    )


#: posteriordb name -> builder.
BUILDERS: dict[str, Callable[..., Posterior]] = {
    "diamonds-diamonds": diamonds,
    "kidiq-kidscore_interaction": kidiq_kidscore_interaction,
    "nes2000-nes": nes2000_nes,
    "sblrc-blr": sblrc_blr,
}
# The hierarchical, Gaussian-process, time-series, hidden-Markov, mixture and ODE posteriors.
BUILDERS.update(_families.BUILDERS)
NAMES: tuple[str, ...] = tuple(BUILDERS)


def load(name: str, dtype: Any = np.float64) -> Posterior:
    """The posterior called ``name`` (one of `NAMES`) in ``dtype``.

    Raises:
      KeyError: ``name`` is not one of `NAMES`.
    """
    if name not in BUILDERS:
        raise KeyError(f"unknown posterior {name!r}; one of {list(NAMES)}")
    return BUILDERS[name](dtype=dtype)
