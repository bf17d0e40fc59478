"""What every posteriordb transcription shares: the `Posterior` record, the files' readers and
the small builders the regressions reuse.

``models.py`` (the regressions and the registry `models.load`) and ``families.py`` (the
hierarchical, Gaussian-process, time-series, hidden-Markov, mixture and ODE posteriors)
both build on this module.
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
    "FLAT_COEFFICIENT_SCALE",
    "FLAT_SCALE_SCALE",
    "HERE",
    "LikelihoodFn",
    "Posterior",
    "Reference",
    "const",
    "flat_coefficients",
    "flat_positive",
    "linear_regression",
    "pack",
    "pack_series",
    "read_data",
    "read_reference",
]

HERE = Path(__file__).resolve().parent

#: Wide proper stand-ins for Stan's improper flat priors (see `flat_coefficients`).
FLAT_COEFFICIENT_SCALE = 1000.0
FLAT_SCALE_SCALE = 1000.0


class Reference(NamedTuple):
    """posteriordb's reference summary of one scalar parameter (10 chains x 1,000 draws).

    ``quantiles`` are the 5%, 25%, 50%, 75% and 95% quantiles of all draws; ``chain_sd_cv``
    is the coefficient of variation of the 10 chains' own sds (about ``1/√(2 · ESS)`` per
    chain for a light-tailed parameter; far more where the sd is set by rare draws in a
    heavy tail).
    """

    mean: float
    sd: float
    mcse: float
    quantiles: tuple[float, ...] = ()
    chain_sd_cv: float = 0.0


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
      transformed: ``None``, or ``params -> {name: tensor}``: the Stan program's transformed
        parameters that posteriordb's reference lists (e.g. the non-centred eight schools'
        ``theta = theta_trans * tau + mu``), as functions of the parameters with the same
        leading dimensions. `flatten` adds them, so draws can be compared with every
        reference name; `reference_values` and `event_shapes` cover the parameters only.
    """

    name: str
    prior: tfd.JointDistributionNamedAutoBatched
    likelihood_fn: LikelihoodFn
    data: tuple[np.ndarray, np.ndarray]
    reference: dict[str, Reference]
    dtype: Any
    transformed: Callable[[Mapping[str, tf.Tensor]], dict[str, tf.Tensor]] | None = None

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
          (Stan counts from one), a scalar part keeps its name; then the `transformed`
          parameters, if any, computed from the draws the same way.
        """
        shapes = dict(self.event_shapes)
        parts = {name: np.asarray(draws[name]) for name in shapes}
        if self.transformed is not None:
            at_one = self.transformed(
                {k: tf.constant(v) for k, v in self.reference_values().items()}
            )
            derived = self.transformed({k: tf.constant(v) for k, v in parts.items()})
            for k, v in derived.items():
                shapes[k] = tuple(at_one[k].shape.as_list())
                parts[k] = np.asarray(v)
        out: dict[str, np.ndarray] = {}
        for name, shape in shapes.items():
            values = parts[name]
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
        k: Reference(
            float(v["mean"]),
            float(v["sd"]),
            float(v["mcse"]),
            tuple(float(q) for q in v.get("quantiles", ())),
            float(v.get("chain_sd_cv", 0.0)),
        )
        for k, v in doc["parameters"].items()
    }


# -- shared pieces ----------------------------------------------------------- #
def const(x: Any, dtype: Any) -> tf.Tensor:
    return tf.constant(x, dtype=dtype)


def flat_coefficients(
    size: int | None, dtype: Any, scale: float = FLAT_COEFFICIENT_SCALE
) -> tfd.Distribution:
    """A wide proper stand-in for Stan's flat prior on a ``real`` (``size=None``) or a
    ``vector[size]``: ``Normal(0, scale)`` per coefficient.

    For a posterior that is roughly Gaussian with means ``m_j`` and sds ``s_j``, a
    ``Normal(0, S²)`` prior moves any standardised mean by at most about
    ``Σ_j |m_j| s_j / S²`` and shrinks the sds by a factor ``1 - O(s_j² / S²)``: pick
    ``scale`` so that this is far below the Monte Carlo error of the reference (``1e-3``
    against an MCSE of about ``0.01`` sd for 10,000 draws).
    """
    base = tfd.Normal(const(0.0, dtype), const(scale, dtype))
    return base if size is None else tfd.Sample(base, int(size))


def flat_positive(dtype: Any, scale: float = FLAT_SCALE_SCALE) -> tfd.Distribution:
    """A wide proper stand-in for Stan's flat prior on a ``real<lower=0>``:
    ``HalfNormal(scale)`` (Stan's implicit prior is uniform on the constrained value)."""
    return tfd.HalfNormal(const(scale, dtype))


def linear_regression(
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


def pack(name: str, x: np.ndarray, y: np.ndarray, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` as ``dtype`` arrays, checked: ``N`` exchangeable rows, ``X [N, d]``, ``y [N]``."""
    x = np.asarray(x, dtype=dtype)
    y = np.asarray(y, dtype=dtype)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"{name}: X must be [N, d] and y [N], got {x.shape} and {y.shape}.")
    return x, y


def pack_series(
    name: str, x: np.ndarray, y: np.ndarray, dtype: Any
) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of a posterior whose data are ONE example (``N = 1``), as ``dtype`` arrays.

    A series whose terms depend on each other (an ARMA or GARCH recursion, a hidden Markov
    chain, a Gaussian process, an ODE's trajectory) cannot be split into minibatches of
    rows: the whole series is one row, ``X [T]`` -> ``[1, T]`` (the times or inputs) and
    ``y [T, ...]`` -> ``[1, T, ...]`` (the observations, one or more per time).
    """
    x = np.asarray(x, dtype=dtype)[None]
    y = np.asarray(y, dtype=dtype)[None]
    if x.ndim != 2 or y.ndim < 2 or y.shape[1] != x.shape[1]:
        raise ValueError(
            f"{name}: a series needs X [T] and y [T, ...] with the same T, got "
            f"{x.shape[1:]} and {y.shape[1:]}."
        )
    return x, y
