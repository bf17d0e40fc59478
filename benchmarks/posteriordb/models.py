"""posteriordb's regressions transcribed from Stan into TFP form, and the registry of every
transcribed posterior.

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

This module holds the linear regressions (diamonds, kidiq, kidiq_with_mom_work, earnings,
nes1972 to nes2000, mesquite, sblrc, sblri, kilpisjarvi); ``families.py`` the other
families, merged into `BUILDERS`. Transformed data (logs, centring, interactions, dummies)
are computed in NumPy exactly as the Stan program's ``transformed data`` block does.

Stan's improper flat priors (a parameter with no sampling statement) have no TFP
equivalent; they become very wide proper priors, ``Normal(0, 1000)`` for a coefficient and
``HalfNormal(1000)`` for a positive scale (`flat_coefficients`, `flat_positive`). Where a
response is on a scale that makes 1,000 informative (earnings in dollars, mesquite's
unlogged weight in grams) the builder widens them (`EARNINGS_FLAT_SCALE`,
`MESQUITE_FLAT_SCALE`); everywhere the prior moves a posterior mean by under 0.001
posterior sd.

The data and reference summaries are read from this folder (``<name>/data.json.zip``,
``<name>/reference.json``); nothing outside the repository is used.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
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
_odes = _load_module("posteriordb.odes")

tfd = tfp.distributions
FLAT_COEFFICIENT_SCALE = _common.FLAT_COEFFICIENT_SCALE
FLAT_SCALE_SCALE = _common.FLAT_SCALE_SCALE
Posterior = _common.Posterior
Reference = _common.Reference
read_data = _common.read_data
read_reference = _common.read_reference
const = _common.const
flat_coefficients = _common.flat_coefficients
flat_positive = _common.flat_positive
linear_regression = _common.linear_regression
pack = _common.pack

__all__ = [
    "BUILDERS",
    "EARNINGS_FLAT_SCALE",
    "MESQUITE_FLAT_SCALE",
    "NAMES",
    "NES_YEARS",
    "Posterior",
    "Reference",
    "diamonds",
    "earnings_earn_height",
    "earnings_logearn_height",
    "earnings_logearn_interaction",
    "earnings_logearn_logheight_male",
    "kidiq_kidscore_interaction",
    "kidiq_kidscore_momhs",
    "kidiq_kidscore_momhsiq",
    "kidiq_with_mom_work_kidscore_interaction_c",
    "kidiq_with_mom_work_kidscore_interaction_c2",
    "kidiq_with_mom_work_kidscore_mom_work",
    "kilpisjarvi_mod_kilpisjarvi",
    "load",
    "mesquite_logmesquite",
    "mesquite_logmesquite_logva",
    "mesquite_logmesquite_logvash",
    "mesquite_logmesquite_logvolume",
    "mesquite_mesquite",
    "nes1972_nes",
    "nes1976_nes",
    "nes1980_nes",
    "nes1984_nes",
    "nes1988_nes",
    "nes1992_nes",
    "nes1996_nes",
    "nes2000_nes",
    "read_data",
    "read_reference",
    "sblrc_blr",
    "sblri_blr",
]


# -- shared pieces of the regressions ------------------------------------------ #
def _columns(name: str, d: Mapping[str, Any], *keys: str) -> list[np.ndarray]:
    """The data vectors ``keys`` of posterior ``name`` as float64 arrays of length ``N``."""
    n = int(d["N"])
    out = []
    for key in keys:
        v = np.asarray(d[key], np.float64)
        if v.shape != (n,):
            raise ValueError(
                f"{name}: data {key!r} must have N = {n} entries, got shape {v.shape}."
            )
        out.append(v)
    return out


def _positive_log(name: str, key: str, v: np.ndarray) -> np.ndarray:
    """``log(v)`` as Stan's transformed data computes it, refusing a non-positive entry
    (Stan would give ``-inf`` or NaN and reject the data)."""
    if not np.all(v > 0):
        raise ValueError(f"{name}: log({key}) needs {key} > 0 everywhere.")
    return np.log(v)


def _with_intercept(*columns: np.ndarray) -> np.ndarray:
    """The design ``[1, *columns]`` (``beta[1]`` is the intercept, as in these programs)."""
    return np.stack([np.ones_like(columns[0]), *columns], axis=1)


def _half_cauchy(dtype: Any) -> tfd.Distribution:
    """``sigma ~ cauchy(0, 2.5)`` on ``real<lower=0> sigma``: the half-Cauchy."""
    return tfd.HalfCauchy(const(0.0, dtype), const(2.5, dtype))


def _beta_sigma(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    dtype: Any,
    *,
    sigma: tfd.Distribution,
    beta: tfd.Distribution | None = None,
) -> Posterior:
    """``y ~ normal(X beta, sigma)`` with priors ``beta`` (default: flat, `flat_coefficients`
    of ``FLAT_COEFFICIENT_SCALE``) and ``sigma``."""
    if beta is None:
        beta = flat_coefficients(x.shape[1], dtype)
    prior = tfd.JointDistributionNamedAutoBatched(dict(beta=beta, sigma=sigma))
    return Posterior(
        name, prior, linear_regression(None, "beta"), pack(name, x, y, dtype),
        read_reference(name), dtype,
    )


# -- diamonds ------------------------------------------------------------------ #
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


# -- kidiq and kidiq_with_mom_work (N = 434) ----------------------------------- #
def kidiq_kidscore_momhs(dtype: Any = np.float64) -> Posterior:
    """``kidiq-kidscore_momhs``: kid's test score on whether the mother finished high school.

    Stan: ``kid_score ~ normal(beta[1] + beta[2] mom_hs, sigma)`` (N = 434),
    ``sigma ~ cauchy(0, 2.5)`` on ``sigma > 0`` (``tfd.HalfCauchy(0, 2.5)``), no statement
    for ``beta``: flat, here ``Normal(0, 1000)`` per coefficient. ``X`` is ``[1, mom_hs]``.
    """
    name = "kidiq-kidscore_momhs"
    d = read_data(name)
    score, hs = _columns(name, d, "kid_score", "mom_hs")
    return _beta_sigma(name, _with_intercept(hs), score, dtype, sigma=_half_cauchy(dtype))


def kidiq_kidscore_momhsiq(dtype: Any = np.float64) -> Posterior:
    """``kidiq-kidscore_momhsiq``: kid's score on mother's school and IQ, no interaction.

    Stan: ``kid_score ~ normal(beta[1] + beta[2] mom_hs + beta[3] mom_iq, sigma)``
    (N = 434), ``sigma ~ cauchy(0, 2.5)`` on ``sigma > 0`` (``tfd.HalfCauchy(0, 2.5)``),
    flat ``beta`` (``Normal(0, 1000)``). ``X`` is ``[1, mom_hs, mom_iq]``, uncentred.
    """
    name = "kidiq-kidscore_momhsiq"
    d = read_data(name)
    score, hs, iq = _columns(name, d, "kid_score", "mom_hs", "mom_iq")
    return _beta_sigma(name, _with_intercept(hs, iq), score, dtype, sigma=_half_cauchy(dtype))


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
    score, hs, iq = _columns(name, d, "kid_score", "mom_hs", "mom_iq")
    x = _with_intercept(hs, iq, hs * iq)
    return _beta_sigma(name, x, score, dtype, sigma=_half_cauchy(dtype))


def kidiq_with_mom_work_kidscore_interaction_c(dtype: Any = np.float64) -> Posterior:
    """``kidiq_with_mom_work-kidscore_interaction_c``: the interaction model on centred
    predictors.

    Stan's transformed data: ``c_mom_hs = mom_hs - mean(mom_hs)``, ``c_mom_iq = mom_iq -
    mean(mom_iq)``, ``inter = c_mom_hs .* c_mom_iq`` (computed here in NumPy the same way);
    ``kid_score ~ normal(beta[1] + beta[2] c_mom_hs + beta[3] c_mom_iq + beta[4] inter,
    sigma)`` (N = 434). Neither ``beta`` nor ``sigma`` has a statement: flat, here
    ``Normal(0, 1000)`` per coefficient and ``HalfNormal(1000)`` for ``sigma``.
    """
    name = "kidiq_with_mom_work-kidscore_interaction_c"
    d = read_data(name)
    score, hs, iq = _columns(name, d, "kid_score", "mom_hs", "mom_iq")
    c_hs, c_iq = hs - hs.mean(), iq - iq.mean()
    x = _with_intercept(c_hs, c_iq, c_hs * c_iq)
    return _beta_sigma(name, x, score, dtype, sigma=flat_positive(dtype))


def kidiq_with_mom_work_kidscore_interaction_c2(dtype: Any = np.float64) -> Posterior:
    """``kidiq_with_mom_work-kidscore_interaction_c2``: the interaction model centred on
    reference points.

    Stan's transformed data: ``c2_mom_hs = mom_hs - 0.5``, ``c2_mom_iq = mom_iq - 100``,
    ``inter = c2_mom_hs .* c2_mom_iq``; ``kid_score ~ normal(beta[1] + beta[2] c2_mom_hs +
    beta[3] c2_mom_iq + beta[4] inter, sigma)`` (N = 434). Flat ``beta`` and ``sigma``:
    ``Normal(0, 1000)`` per coefficient and ``HalfNormal(1000)``.
    """
    name = "kidiq_with_mom_work-kidscore_interaction_c2"
    d = read_data(name)
    score, hs, iq = _columns(name, d, "kid_score", "mom_hs", "mom_iq")
    c_hs, c_iq = hs - 0.5, iq - 100.0
    x = _with_intercept(c_hs, c_iq, c_hs * c_iq)
    return _beta_sigma(name, x, score, dtype, sigma=flat_positive(dtype))


def kidiq_with_mom_work_kidscore_mom_work(dtype: Any = np.float64) -> Posterior:
    """``kidiq_with_mom_work-kidscore_mom_work``: kid's score on the mother's work history.

    Stan's transformed data: ``work2``, ``work3``, ``work4`` are ``mom_work == 2``, ``== 3``
    and ``== 4`` (category 1 is the baseline); ``kid_score ~ normal(beta[1] + beta[2] work2
    + beta[3] work3 + beta[4] work4, sigma)`` (N = 434). Flat ``beta`` and ``sigma``:
    ``Normal(0, 1000)`` per coefficient and ``HalfNormal(1000)``.
    """
    name = "kidiq_with_mom_work-kidscore_mom_work"
    d = read_data(name)
    score, work = _columns(name, d, "kid_score", "mom_work")
    x = _with_intercept(*(np.asarray(work == k, np.float64) for k in (2, 3, 4)))
    return _beta_sigma(name, x, score, dtype, sigma=flat_positive(dtype))


# -- earnings (N = 1,192) ------------------------------------------------------ #
#: The flat-prior scale of ``earnings-earn_height``, whose response is in dollars (up to
#: 200,000): its posterior has ``beta[1]`` ≈ -61,000 ± 9,700 and ``sigma`` ≈ 19,000, so
#: ``Normal(0, 1000)`` would be far from flat. At 10⁶ the bound of `flat_coefficients`
#: (Σ |mean| sd / scale²) is 6e-4 reference sd.
EARNINGS_FLAT_SCALE = 1e6


def earnings_earn_height(dtype: Any = np.float64) -> Posterior:
    """``earnings-earn_height``: yearly earnings (dollars) on height (inches).

    Stan: ``earn ~ normal(beta[1] + beta[2] height, sigma)`` (N = 1,192), flat ``beta`` and
    ``sigma``. The response is in dollars, so the flat priors are ``Normal(0, 10⁶)`` per
    coefficient and ``HalfNormal(10⁶)`` (`EARNINGS_FLAT_SCALE`), not the module's 1,000.
    """
    name = "earnings-earn_height"
    d = read_data(name)
    earn, height = _columns(name, d, "earn", "height")
    return _beta_sigma(
        name, _with_intercept(height), earn, dtype,
        beta=flat_coefficients(2, dtype, EARNINGS_FLAT_SCALE),
        sigma=flat_positive(dtype, EARNINGS_FLAT_SCALE),
    )


def earnings_logearn_height(dtype: Any = np.float64) -> Posterior:
    """``earnings-logearn_height``: log earnings on height.

    Stan's transformed data: ``log_earn = log(earn)``; ``log_earn ~ normal(beta[1] +
    beta[2] height, sigma)`` (N = 1,192). Flat ``beta`` and ``sigma``: ``Normal(0, 1000)``
    per coefficient and ``HalfNormal(1000)``.
    """
    name = "earnings-logearn_height"
    d = read_data(name)
    earn, height = _columns(name, d, "earn", "height")
    log_earn = _positive_log(name, "earn", earn)
    return _beta_sigma(name, _with_intercept(height), log_earn, dtype, sigma=flat_positive(dtype))


def earnings_logearn_interaction(dtype: Any = np.float64) -> Posterior:
    """``earnings-logearn_interaction``: log earnings on height, sex and their product.

    Stan's transformed data: ``log_earn = log(earn)``, ``inter = height .* male``;
    ``log_earn ~ normal(beta[1] + beta[2] height + beta[3] male + beta[4] inter, sigma)``
    (N = 1,192), uncentred. Flat ``beta`` and ``sigma``: ``Normal(0, 1000)`` per coefficient
    and ``HalfNormal(1000)``.
    """
    name = "earnings-logearn_interaction"
    d = read_data(name)
    earn, height, male = _columns(name, d, "earn", "height", "male")
    log_earn = _positive_log(name, "earn", earn)
    x = _with_intercept(height, male, height * male)
    return _beta_sigma(name, x, log_earn, dtype, sigma=flat_positive(dtype))


def earnings_logearn_logheight_male(dtype: Any = np.float64) -> Posterior:
    """``earnings-logearn_logheight_male``: log earnings on log height and sex.

    Stan's transformed data: ``log_earn = log(earn)``, ``log_height = log(height)``;
    ``log_earn ~ normal(beta[1] + beta[2] log_height + beta[3] male, sigma)`` (N = 1,192).
    Flat ``beta`` and ``sigma``: ``Normal(0, 1000)`` per coefficient and ``HalfNormal(1000)``.
    """
    name = "earnings-logearn_logheight_male"
    d = read_data(name)
    earn, height, male = _columns(name, d, "earn", "height", "male")
    log_earn = _positive_log(name, "earn", earn)
    x = _with_intercept(_positive_log(name, "height", height), male)
    return _beta_sigma(name, x, log_earn, dtype, sigma=flat_positive(dtype))


# -- nes: one program, eight years ---------------------------------------------- #
NES_YEARS = (1972, 1976, 1980, 1984, 1988, 1992, 1996, 2000)


def _nes(year: int) -> Callable[..., Posterior]:
    """The builder of ``nes<year>-nes`` (every year runs the same Stan program ``nes``)."""
    name = f"nes{year}-nes"

    def build(dtype: Any = np.float64) -> Posterior:
        d = read_data(name)
        party, ideo, race, educ, gender, income, age = _columns(
            name, d, "partyid7", "real_ideo", "race_adj", "educ1", "gender", "income",
            "age_discrete",
        )
        # Each year's data must be that year's survey: the files are otherwise identical
        # in shape, so a mixed-up folder would pass every other check.
        if "year" in d and not np.all(np.asarray(d["year"]) == year):
            raise ValueError(f"{name}: the data's `year` is not {year} throughout.")
        dummies = (np.asarray(age == k, np.float64) for k in (2, 3, 4))
        x = _with_intercept(ideo, race, *dummies, educ, gender, income)
        return _beta_sigma(name, x, party, dtype, sigma=flat_positive(dtype))

    build.__name__ = build.__qualname__ = f"nes{year}_nes"
    build.__doc__ = f"""``{name}``: party identification in the {year} National Election Study.

    Stan (program ``nes``, shared by the eight years 1972-2000): ``partyid7 ~ normal(X beta,
    sigma)`` (N = 476 to 1,350 by year) with ``X`` = ``[1, real_ideo, race_adj, age30_44, age45_64,
    age65up, educ1, gender, income]``, where the transformed data's age dummies are
    ``age_discrete == 2``, ``== 3`` and ``== 4`` (category 1 is the baseline). Neither
    ``beta`` nor ``sigma`` has a statement: Stan's improper flat priors, here
    ``Normal(0, 1000)`` per coefficient and ``HalfNormal(1000)`` for ``sigma``.
    """
    return build


nes1972_nes = _nes(1972)
nes1976_nes = _nes(1976)
nes1980_nes = _nes(1980)
nes1984_nes = _nes(1984)
nes1988_nes = _nes(1988)
nes1992_nes = _nes(1992)
nes1996_nes = _nes(1996)
nes2000_nes = _nes(2000)


# -- mesquite (N = 46) ------------------------------------------------------------ #
#: The flat-prior scale of ``mesquite-mesquite``, whose response is the leaf weight in grams
#: (60 to 4,052, unlogged): its coefficients are in the hundreds (``beta[1]`` ≈ -730 ± 150),
#: so the bound of `flat_coefficients` would be 0.3 sd at 1,000; at 10⁵ it is 3e-5.
MESQUITE_FLAT_SCALE = 1e5


def _mesquite(name: str, dtype: Any, response: str, *columns: np.ndarray) -> Posterior:
    """``log_weight`` (or ``weight``) ``~ normal([1, *columns] beta, sigma)`` with flat
    ``beta`` and ``sigma`` (scale 1,000 on the log scale, `MESQUITE_FLAT_SCALE` unlogged)."""
    d = read_data(name)
    (weight,) = _columns(name, d, "weight")
    if response == "log_weight":
        y, scale = _positive_log(name, "weight", weight), FLAT_COEFFICIENT_SCALE
    else:
        y, scale = weight, MESQUITE_FLAT_SCALE
    x = _with_intercept(*columns)
    return _beta_sigma(
        name, x, y, dtype,
        beta=flat_coefficients(x.shape[1], dtype, scale),
        sigma=flat_positive(dtype, scale),
    )


def _mesquite_data(name: str) -> dict[str, np.ndarray]:
    """mesquite's measurements (``diam1``, ``diam2``, ``canopy_height``, ``total_height``,
    ``density``, ``group``) as float64 vectors."""
    keys = ("diam1", "diam2", "canopy_height", "total_height", "density", "group")
    return dict(zip(keys, _columns(name, read_data(name), *keys)))


def mesquite_logmesquite(dtype: Any = np.float64) -> Posterior:
    """``mesquite-logmesquite``: log leaf weight on the logs of every measurement.

    Stan's transformed data: the logs of ``weight``, ``diam1``, ``diam2``,
    ``canopy_height``, ``total_height`` and ``density``; ``log_weight ~ normal(beta[1] +
    beta[2] log_diam1 + beta[3] log_diam2 + beta[4] log_canopy_height + beta[5]
    log_total_height + beta[6] log_density + beta[7] group, sigma)`` (N = 46; ``group`` is
    not logged). Flat ``beta`` and ``sigma``: ``Normal(0, 1000)`` and ``HalfNormal(1000)``.
    """
    name = "mesquite-logmesquite"
    m = _mesquite_data(name)
    logs = [
        _positive_log(name, k, m[k])
        for k in ("diam1", "diam2", "canopy_height", "total_height", "density")
    ]
    return _mesquite(name, dtype, "log_weight", *logs, m["group"])


def mesquite_logmesquite_logva(dtype: Any = np.float64) -> Posterior:
    """``mesquite-logmesquite_logva``: log weight on log canopy volume and area.

    Stan's transformed data: ``log_canopy_volume = log(diam1 .* diam2 .* canopy_height)``,
    ``log_canopy_area = log(diam1 .* diam2)``; ``log_weight ~ normal(beta[1] + beta[2]
    log_canopy_volume + beta[3] log_canopy_area + beta[4] group, sigma)`` (N = 46). Flat
    ``beta`` and ``sigma``: ``Normal(0, 1000)`` and ``HalfNormal(1000)``.
    """
    name = "mesquite-logmesquite_logva"
    m = _mesquite_data(name)
    area = m["diam1"] * m["diam2"]
    volume = area * m["canopy_height"]
    return _mesquite(
        name, dtype, "log_weight",
        _positive_log(name, "canopy volume", volume), _positive_log(name, "canopy area", area),
        m["group"],
    )


def mesquite_logmesquite_logvash(dtype: Any = np.float64) -> Posterior:
    """``mesquite-logmesquite_logvash``: log weight on log canopy volume, area, shape and
    total height.

    Stan's transformed data: ``log_canopy_volume = log(diam1 .* diam2 .* canopy_height)``,
    ``log_canopy_area = log(diam1 .* diam2)``, ``log_canopy_shape = log(diam1 ./ diam2)``,
    ``log_total_height = log(total_height)``; ``log_weight ~ normal(beta[1] + beta[2]
    log_canopy_volume + beta[3] log_canopy_area + beta[4] log_canopy_shape + beta[5]
    log_total_height + beta[6] group, sigma)`` (N = 46). Flat ``beta`` and ``sigma``:
    ``Normal(0, 1000)`` and ``HalfNormal(1000)``.
    """
    name = "mesquite-logmesquite_logvash"
    m = _mesquite_data(name)
    area = m["diam1"] * m["diam2"]
    volume = area * m["canopy_height"]
    shape = m["diam1"] / m["diam2"]
    return _mesquite(
        name, dtype, "log_weight",
        _positive_log(name, "canopy volume", volume),
        _positive_log(name, "canopy area", area),
        _positive_log(name, "canopy shape", shape),
        _positive_log(name, "total_height", m["total_height"]),
        m["group"],
    )


def mesquite_logmesquite_logvolume(dtype: Any = np.float64) -> Posterior:
    """``mesquite-logmesquite_logvolume``: log weight on log canopy volume alone.

    Stan's transformed data: ``log_canopy_volume = log(diam1 .* diam2 .* canopy_height)``;
    ``log_weight ~ normal(beta[1] + beta[2] log_canopy_volume, sigma)`` (N = 46). Flat
    ``beta`` and ``sigma``: ``Normal(0, 1000)`` and ``HalfNormal(1000)``.
    """
    name = "mesquite-logmesquite_logvolume"
    m = _mesquite_data(name)
    volume = m["diam1"] * m["diam2"] * m["canopy_height"]
    return _mesquite(name, dtype, "log_weight", _positive_log(name, "canopy volume", volume))


def mesquite_mesquite(dtype: Any = np.float64) -> Posterior:
    """``mesquite-mesquite``: leaf weight on every measurement, unlogged.

    Stan: ``weight ~ normal(beta[1] + beta[2] diam1 + beta[3] diam2 + beta[4] canopy_height
    + beta[5] total_height + beta[6] density + beta[7] group, sigma)`` (N = 46). Flat
    ``beta`` and ``sigma``; the weight is in grams (up to 4,052), so the stand-ins are
    ``Normal(0, 10⁵)`` and ``HalfNormal(10⁵)`` (`MESQUITE_FLAT_SCALE`).
    """
    name = "mesquite-mesquite"
    m = _mesquite_data(name)
    keys = ("diam1", "diam2", "canopy_height", "total_height", "density", "group")
    return _mesquite(name, dtype, "weight", *(m[k] for k in keys))


# -- sblrc, sblri: simulated Bayesian linear regressions ------------------------ #
def _blr(name: str, dtype: Any) -> Posterior:
    """``beta ~ normal(0, 10)`` (D), ``sigma ~ normal(0, 10)`` on ``sigma > 0``
    (``tfd.HalfNormal(10)``), ``y ~ normal(X beta, sigma)``."""
    d = read_data(name)
    x = np.asarray(d["X"], np.float64)
    if x.shape != (d["N"], d["D"]):
        raise ValueError(f"{name}: X must be [N, D], got {x.shape}.")
    return _beta_sigma(
        name, x, d["y"], dtype,
        beta=tfd.Sample(tfd.Normal(const(0.0, dtype), const(10.0, dtype)), d["D"]),
        sigma=tfd.HalfNormal(const(10.0, dtype)),
    )


def sblrc_blr(dtype: Any = np.float64) -> Posterior:
    """``sblrc-blr``: a Bayesian linear regression without intercept on simulated data.

    Stan: ``beta ~ normal(0, 10)`` (D = 5), ``sigma ~ normal(0, 10)`` on ``sigma > 0``
    (``tfd.HalfNormal(10)``), ``y ~ normal(X beta, sigma)`` (N = 100).
    """
    return _blr("sblrc-blr", dtype)


def sblri_blr(dtype: Any = np.float64) -> Posterior:
    """``sblri-blr``: the same program as ``sblrc-blr`` on another simulated data set
    (predictors in the hundreds rather than centred near zero).

    Stan: ``target += normal_lpdf(beta | 0, 10)`` (D = 5), ``target += normal_lpdf(sigma |
    0, 10)`` on ``sigma > 0``, ``target += normal_lpdf(y | X beta, sigma)`` (N = 100). The
    ``target +=`` form keeps every constant; the half-normal (``tfd.HalfNormal(10)``)
    differs from ``normal_lpdf`` on ``sigma > 0`` by ``log 2``, a constant.
    """
    return _blr("sblri-blr", dtype)


# -- kilpisjarvi --------------------------------------------------------------------- #
def _straight_line(
    params: Mapping[str, tf.Tensor], batch: tuple[tf.Tensor, tf.Tensor]
) -> tfd.Distribution:
    """``y ~ normal(alpha + beta x, sigma)`` with scalar ``alpha``, ``beta`` and ``x`` the
    design's only column."""
    x, _ = batch
    mu = params["alpha"][..., None] + params["beta"][..., None] * x[:, 0]
    return tfd.Normal(mu, params["sigma"][..., None])


def kilpisjarvi_mod_kilpisjarvi(dtype: Any = np.float64) -> Posterior:
    """``kilpisjarvi_mod-kilpisjarvi``: a linear trend in Kilpisjärvi's summer temperatures.

    Stan: ``alpha ~ normal(pmualpha, psalpha)``, ``beta ~ normal(pmubeta, psbeta)`` with
    the prior's means and sds given as data (9.31, 100, 0, 0.0333: informative on
    ``beta``), no statement for ``sigma > 0`` (flat, here ``HalfNormal(1000)``), and
    ``y ~ normal(alpha + beta x, sigma)`` (N = 62). The prior means were chosen for centred
    years (``pmualpha`` is the mean of ``y``), but neither the program nor the data centre
    ``x`` (3,952 to 4,013), and the reference draws are of this uncentred model: ``alpha``
    ≈ mean(y) - beta mean(x), with a posterior correlation of ``alpha`` and ``beta`` of
    -0.99999. ``X`` is ``x`` as one column; ``xpred`` only feeds generated quantities
    and is not used.
    """
    name = "kilpisjarvi_mod-kilpisjarvi"
    d = read_data(name)
    x, y = _columns(name, d, "x", "y")
    for key in ("psalpha", "psbeta"):
        if not float(d[key]) > 0:
            raise ValueError(f"{name}: the prior sd {key} must be positive, got {d[key]}.")
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            alpha=tfd.Normal(const(d["pmualpha"], dtype), const(d["psalpha"], dtype)),
            beta=tfd.Normal(const(d["pmubeta"], dtype), const(d["psbeta"], dtype)),
            sigma=flat_positive(dtype),
        )
    )
    return Posterior(
        name, prior, _straight_line, pack(name, x[:, None], y, dtype), read_reference(name),
        dtype,
    )


#: posteriordb name -> builder.
BUILDERS: dict[str, Callable[..., Posterior]] = {
    "diamonds-diamonds": diamonds,
    "earnings-earn_height": earnings_earn_height,
    "earnings-logearn_height": earnings_logearn_height,
    "earnings-logearn_interaction": earnings_logearn_interaction,
    "earnings-logearn_logheight_male": earnings_logearn_logheight_male,
    "kidiq-kidscore_interaction": kidiq_kidscore_interaction,
    "kidiq-kidscore_momhs": kidiq_kidscore_momhs,
    "kidiq-kidscore_momhsiq": kidiq_kidscore_momhsiq,
    "kidiq_with_mom_work-kidscore_interaction_c": kidiq_with_mom_work_kidscore_interaction_c,
    "kidiq_with_mom_work-kidscore_interaction_c2": kidiq_with_mom_work_kidscore_interaction_c2,
    "kidiq_with_mom_work-kidscore_mom_work": kidiq_with_mom_work_kidscore_mom_work,
    "kilpisjarvi_mod-kilpisjarvi": kilpisjarvi_mod_kilpisjarvi,
    "mesquite-logmesquite": mesquite_logmesquite,
    "mesquite-logmesquite_logva": mesquite_logmesquite_logva,
    "mesquite-logmesquite_logvash": mesquite_logmesquite_logvash,
    "mesquite-logmesquite_logvolume": mesquite_logmesquite_logvolume,
    "mesquite-mesquite": mesquite_mesquite,
    **{f"nes{year}-nes": globals()[f"nes{year}_nes"] for year in NES_YEARS},
    "sblrc-blr": sblrc_blr,
    "sblri-blr": sblri_blr,
}
# The hierarchical, Gaussian-process, time-series, hidden-Markov, mixture and ODE posteriors.
BUILDERS.update(_families.BUILDERS)
BUILDERS.update(_odes.BUILDERS)
NAMES: tuple[str, ...] = tuple(BUILDERS)


def load(name: str, dtype: Any = np.float64) -> Posterior:
    """The posterior called ``name`` (one of `NAMES`) in ``dtype``.

    Raises:
      KeyError: ``name`` is not one of `NAMES`.
    """
    if name not in BUILDERS:
        raise KeyError(f"unknown posterior {name!r}; one of {list(NAMES)}")
    return BUILDERS[name](dtype=dtype)
