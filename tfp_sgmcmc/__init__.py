"""tfp-sgmcmc: stochastic-gradient MCMC for TensorFlow Probability.

* Samplers are ``tfp.mcmc.TransitionKernel``s ([`tfp_sgmcmc.kernels`][tfp_sgmcmc.kernels]) driven
  by a
  gradient estimator that owns the data ([`tfp_sgmcmc.estimators`][tfp_sgmcmc.estimators],
  [`tfp_sgmcmc.data`][tfp_sgmcmc.data]).
* Stein discrepancies and chain-quality metrics, as functions and as
  ``tfp.experimental.mcmc`` reducers: [`tfp_sgmcmc.diagnostics`][tfp_sgmcmc.diagnostics].
* The MAMBA tuner and its baselines: [`tfp_sgmcmc.tuning`][tfp_sgmcmc.tuning].
* The Keras bridge, [`tfp_sgmcmc.keras`][tfp_sgmcmc.keras] (``KerasPosterior``, predictive
  metrics): how a Keras 3 model becomes a posterior for any sampler or the tuner. It imports
  Keras, so it is imported on demand: ``from tfp_sgmcmc.keras import KerasPosterior``.
* Reference models with stored ground truth: [`tfp_sgmcmc.models`][tfp_sgmcmc.models].
* Sparse priors with stochastic-approximation latents: [`tfp_sgmcmc.priors`][tfp_sgmcmc.priors].
* Long, resumable runs streamed to HDF5 and ArviZ export: [`tfp_sgmcmc.driver`][tfp_sgmcmc.driver],
  [`tfp_sgmcmc.to_arviz`][tfp_sgmcmc.to_arviz].

See ``docs/index.md`` for the guide; every sampler's docstring gives its update rule
and the paper it comes from. Names follow one policy (``docs/conventions.md``, "Names"):
one name per sampler, its acronym (``SGLD``, ``SGHMC``, ...).

``import tfp_sgmcmc`` imports nothing heavy; TensorFlow is imported on the first use of a
name, with its C++ start-up notices (oneDNN, CUDA probing) hidden and ``TF_CPP_MIN_LOG_LEVEL``
defaulting to ``1``; warnings and errors are kept, numerics are unchanged, and
``TFP_SGMCMC_TF_STARTUP_LOGS=1`` turns this off (``tfp_sgmcmc/_startup.py``).
"""

# The package imports TensorFlow only when a name is first used (PEP 562): the
# command line's ``--help`` and ``import tfp_sgmcmc.cli`` stay fast, and
# ``import tfp_sgmcmc as sg; sg.SGLD`` works as before. One table, ``_EXPORTS``, says
# where each name lives; ``__all__`` is derived from it, the samplers from
# ``tfp_sgmcmc.kernels.__all__``. The imports under TYPE_CHECKING mirror the table for
# static analysers (tests/test_new_kernel_footprint.py keeps them in step).
# ruff: noqa: F401

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tfp_sgmcmc._kernel_names import kernels_all as _kernels_all

#: Public name -> the module that defines it (imported on first access). The samplers are
#: added below from ``tfp_sgmcmc.kernels``'s own list (``_kernel_exports``).
_EXPORTS = {
    "DatasetData": "tfp_sgmcmc.data",
    "InMemoryData": "tfp_sgmcmc.data",
    "FSSDReducer": "tfp_sgmcmc.diagnostics",
    "KSDReducer": "tfp_sgmcmc.diagnostics",
    "effective_sample_size": "tfp_sgmcmc.diagnostics",
    "expected_calibration_error": "tfp_sgmcmc.diagnostics",
    "fssd": "tfp_sgmcmc.diagnostics",
    "fssd_opt": "tfp_sgmcmc.diagnostics",
    "integrated_autocorrelation_time": "tfp_sgmcmc.diagnostics",
    "kernel_stein_discrepancy": "tfp_sgmcmc.diagnostics",
    "maximum_calibration_error": "tfp_sgmcmc.diagnostics",
    "relative_std_error": "tfp_sgmcmc.diagnostics",
    "sample": "tfp_sgmcmc.driver",
    "sample_chain": "tfp_sgmcmc.driver",
    "ControlVariateEstimator": "tfp_sgmcmc.estimators",
    "DistributedMinibatchEstimator": "tfp_sgmcmc.estimators",
    "GradientEstimate": "tfp_sgmcmc.estimators",
    "GradientEstimator": "tfp_sgmcmc.estimators",
    "MinibatchEstimator": "tfp_sgmcmc.estimators",
    "NoisyGradientEstimator": "tfp_sgmcmc.estimators",
    "StructuredDropoutEstimator": "tfp_sgmcmc.estimators",
    "StructuredEstimator": "tfp_sgmcmc.estimators",
    "SVRGEstimator": "tfp_sgmcmc.estimators",
    "find_map": "tfp_sgmcmc.estimators",
    "TransformedEstimator": "tfp_sgmcmc.estimators",
    "to_arviz": "tfp_sgmcmc.export",
    "JointPosterior": "tfp_sgmcmc.joint",
    "PosteriorSamples": "tfp_sgmcmc.automatic",
    "sample_posterior": "tfp_sgmcmc.automatic",
    "WhitenedEstimator": "tfp_sgmcmc.estimators",
    "SpikeAndSlabGroupLasso": "tfp_sgmcmc.priors",
    "SSGLEstimator": "tfp_sgmcmc.priors",
    "ConstantStepSize": "tfp_sgmcmc.schedules",
    "CyclicalStepSize": "tfp_sgmcmc.schedules",
    "GeometricAnnealing": "tfp_sgmcmc.schedules",
    "PolynomialDecay": "tfp_sgmcmc.schedules",
    "SAStepSize": "tfp_sgmcmc.schedules",
    "MAMBA": "tfp_sgmcmc.tuning",
    "RayExecutor": "tfp_sgmcmc.tuning",
    "grid_search": "tfp_sgmcmc.tuning",
    "heuristic": "tfp_sgmcmc.tuning",
}

__version__ = "0.1.0.dev0"

#: The subpackages and modules reached as attributes (imported on first access).
_SUBMODULES = (
    "data",
    "diagnostics",
    "driver",
    "estimators",
    "integrators",
    "kernels",
    "priors",
    "schedules",
    "transforms",
    "tuning",
)


def _kernel_exports() -> list[str]:
    """The names of ``tfp_sgmcmc.kernels`` exported here too: every class name it exports
    (samplers under all their names, wrappers) but its results types, base class, mixin
    and errors, which are for writers of kernels. A new sampler exported there is
    exported here with no change to this file."""
    names = _kernels_all()
    if names is None:  # no readable source: ask the module itself (imports TensorFlow)
        from tfp_sgmcmc import _startup

        _startup.import_tensorflow()
        names = list(importlib.import_module("tfp_sgmcmc.kernels").__all__)
    return [
        n
        for n in names
        if n[:1].isupper()
        and not n.endswith(("Results", "Mixin", "Error"))
        and n != "SGMCMCKernel"
    ]


_EXPORTS.update(dict.fromkeys(_kernel_exports(), "tfp_sgmcmc.kernels"))

__all__ = [*_SUBMODULES, *_EXPORTS]


if TYPE_CHECKING:  # static analysers and IDEs see the eager imports
    from tfp_sgmcmc import (
        data,
        diagnostics,
        driver,
        estimators,
        integrators,
        kernels,
        priors,
        schedules,
        transforms,
        tuning,
    )
    from tfp_sgmcmc.automatic import PosteriorSamples, sample_posterior
    from tfp_sgmcmc.data import DatasetData, InMemoryData
    from tfp_sgmcmc.diagnostics import (
        FSSDReducer,
        KSDReducer,
        effective_sample_size,
        expected_calibration_error,
        fssd,
        fssd_opt,
        integrated_autocorrelation_time,
        kernel_stein_discrepancy,
        maximum_calibration_error,
        relative_std_error,
    )
    from tfp_sgmcmc.driver import sample, sample_chain
    from tfp_sgmcmc.estimators import (
        ControlVariateEstimator,
        DistributedMinibatchEstimator,
        GradientEstimate,
        GradientEstimator,
        MinibatchEstimator,
        NoisyGradientEstimator,
        StructuredDropoutEstimator,
        StructuredEstimator,
        SVRGEstimator,
        TransformedEstimator,
        WhitenedEstimator,
        find_map,
    )
    from tfp_sgmcmc.export import to_arviz
    from tfp_sgmcmc.joint import JointPosterior
    from tfp_sgmcmc.kernels import *  # noqa: F403 (the names _kernel_exports lists)
    from tfp_sgmcmc.priors import SpikeAndSlabGroupLasso, SSGLEstimator
    from tfp_sgmcmc.schedules import (
        ConstantStepSize,
        CyclicalStepSize,
        GeometricAnnealing,
        PolynomialDecay,
        SAStepSize,
    )
    from tfp_sgmcmc.tuning import MAMBA, RayExecutor, grid_search, heuristic


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES or name in _EXPORTS:
        # First use of the library: import TensorFlow without its start-up notices.
        from tfp_sgmcmc import _startup

        _startup.import_tensorflow()
    if name in _SUBMODULES:
        module = importlib.import_module(f"tfp_sgmcmc.{name}")
    elif name in _EXPORTS:
        module = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'tfp_sgmcmc' has no attribute {name!r}")
    globals()[name] = module  # cache: __getattr__ runs once per name
    return module


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
