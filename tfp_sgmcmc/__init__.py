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
every sampler under its full name, plus its paper's acronym where it has one
(``SGLD is StochasticGradientLangevinDynamics``).

``import tfp_sgmcmc`` imports nothing heavy; TensorFlow is imported on the first use of a
name, with its C++ start-up notices (oneDNN, CUDA probing) hidden and ``TF_CPP_MIN_LOG_LEVEL``
defaulting to ``1``; warnings and errors are kept, numerics are unchanged, and
``TFP_SGMCMC_TF_STARTUP_LOGS=1`` turns this off (``tfp_sgmcmc/_startup.py``).
"""

# The package imports TensorFlow only when a name is first used (PEP 562): the
# command line's ``--help`` and ``import tfp_sgmcmc.cli`` stay fast, and
# ``import tfp_sgmcmc as sg; sg.SGLD`` works as before.

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> the module that defines it (imported on first access).
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
    "ASGLD": "tfp_sgmcmc.kernels",
    "MSGLD": "tfp_sgmcmc.kernels",
    "PSGLD": "tfp_sgmcmc.kernels",
    "SGHMC": "tfp_sgmcmc.kernels",
    "SGLD": "tfp_sgmcmc.kernels",
    "SGNHT": "tfp_sgmcmc.kernels",
    "AdamSGLD": "tfp_sgmcmc.kernels",
    "AdaMaxSGLD": "tfp_sgmcmc.kernels",
    "AdadeltaSGLD": "tfp_sgmcmc.kernels",
    "MomentumSGLD": "tfp_sgmcmc.kernels",
    "PreconditionedAdamSGLD": "tfp_sgmcmc.kernels",
    "PreconditionedMomentumSGLD": "tfp_sgmcmc.kernels",
    "PreconditionedStochasticGradientLangevinDynamics": "tfp_sgmcmc.kernels",
    "StochasticApproximation": "tfp_sgmcmc.kernels",
    "StochasticGradientHamiltonianMonteCarlo": "tfp_sgmcmc.kernels",
    "StochasticGradientLangevinDynamics": "tfp_sgmcmc.kernels",
    "StochasticGradientNoseHooverThermostat": "tfp_sgmcmc.kernels",
    "TransformedTransitionKernel": "tfp_sgmcmc.kernels",
    "BAOAB": "tfp_sgmcmc.kernels",
    "BADODAB": "tfp_sgmcmc.kernels",
    "ContourSGLD": "tfp_sgmcmc.kernels",
    "ReplicaExchangeSGLD": "tfp_sgmcmc.kernels",
    "CSGLD": "tfp_sgmcmc.kernels",
    "RESGLD": "tfp_sgmcmc.kernels",
    "SpikeAndSlabGroupLasso": "tfp_sgmcmc.priors",
    "SSGLEstimator": "tfp_sgmcmc.priors",
    "ConstantStepSize": "tfp_sgmcmc.schedules",
    "CyclicalStepSize": "tfp_sgmcmc.schedules",
    "GeometricAnnealing": "tfp_sgmcmc.schedules",
    "PolynomialDecay": "tfp_sgmcmc.schedules",
    "SAStepSize": "tfp_sgmcmc.schedules",
    "MAMBA": "tfp_sgmcmc.tuning",
    "RayMAMBA": "tfp_sgmcmc.tuning",
    "RayExecutor": "tfp_sgmcmc.tuning",
    "grid_search": "tfp_sgmcmc.tuning",
    "heuristic": "tfp_sgmcmc.tuning",
    "mamba": "tfp_sgmcmc.tuning",
}

__version__ = "0.1.0.dev0"

__all__ = [
    # modules
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
    # data and estimators
    "InMemoryData",
    "DatasetData",
    "GradientEstimate",
    "GradientEstimator",
    "DistributedMinibatchEstimator",
    "MinibatchEstimator",
    "NoisyGradientEstimator",
    "ControlVariateEstimator",
    "SVRGEstimator",
    "StructuredEstimator",
    "StructuredDropoutEstimator",
    "find_map",
    "TransformedEstimator",
    # kernels
    "StochasticGradientLangevinDynamics",
    "PreconditionedStochasticGradientLangevinDynamics",
    "StochasticGradientHamiltonianMonteCarlo",
    "StochasticGradientNoseHooverThermostat",
    "TransformedTransitionKernel",
    "MomentumSGLD",
    "AdamSGLD",
    "AdaMaxSGLD",
    "AdadeltaSGLD",
    "PreconditionedMomentumSGLD",
    "PreconditionedAdamSGLD",
    "StochasticApproximation",
    "SGLD",
    "PSGLD",
    "SGHMC",
    "SGNHT",
    "MSGLD",
    "ASGLD",
    "BAOAB",
    "BADODAB",
    "ContourSGLD",
    "ReplicaExchangeSGLD",
    "CSGLD",
    "RESGLD",
    # priors and schedules
    "SpikeAndSlabGroupLasso",
    "SSGLEstimator",
    "ConstantStepSize",
    "PolynomialDecay",
    "CyclicalStepSize",
    "SAStepSize",
    "GeometricAnnealing",
    # diagnostics
    "kernel_stein_discrepancy",
    "fssd",
    "fssd_opt",
    "KSDReducer",
    "FSSDReducer",
    "effective_sample_size",
    "integrated_autocorrelation_time",
    "expected_calibration_error",
    "maximum_calibration_error",
    "relative_std_error",
    # tuning, long runs, export
    "MAMBA",
    "RayMAMBA",
    "RayExecutor",
    "mamba",
    "grid_search",
    "heuristic",
    "sample",
    "sample_chain",
    "to_arviz",
    "JointPosterior",
    "sample_posterior",
    "PosteriorSamples",
    "WhitenedEstimator",
]

#: The public names the table does not map are the submodules (imported on first access).
_SUBMODULES = frozenset(__all__) - _EXPORTS.keys()


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
    from tfp_sgmcmc.driver import sample
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
    from tfp_sgmcmc.kernels import (
        ASGLD,
        BADODAB,
        BAOAB,
        MSGLD,
        PSGLD,
        SGHMC,
        SGLD,
        SGNHT,
        AdadeltaSGLD,
        AdaMaxSGLD,
        AdamSGLD,
        ContourSGLD,
        MomentumSGLD,
        PreconditionedAdamSGLD,
        PreconditionedMomentumSGLD,
        PreconditionedStochasticGradientLangevinDynamics,
        ReplicaExchangeSGLD,
        StochasticApproximation,
        StochasticGradientHamiltonianMonteCarlo,
        StochasticGradientLangevinDynamics,
        StochasticGradientNoseHooverThermostat,
        TransformedTransitionKernel,
    )
    from tfp_sgmcmc.priors import SpikeAndSlabGroupLasso, SSGLEstimator
    from tfp_sgmcmc.schedules import (
        ConstantStepSize,
        CyclicalStepSize,
        GeometricAnnealing,
        PolynomialDecay,
        SAStepSize,
    )
    from tfp_sgmcmc.tuning import MAMBA, RayExecutor, RayMAMBA, grid_search, heuristic, mamba


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
