"""tfp-sgmcmc: stochastic-gradient MCMC for TensorFlow Probability.

* Samplers are ``tfp.mcmc.TransitionKernel``s ([`tfp_sgmcmc.kernels`][tfp_sgmcmc.kernels]) driven
  by a
  gradient estimator that owns the data ([`tfp_sgmcmc.estimators`][tfp_sgmcmc.estimators],
  [`tfp_sgmcmc.data`][tfp_sgmcmc.data]).
* Stein discrepancies and chain-quality metrics, as functions and as
  ``tfp.experimental.mcmc`` reducers: [`tfp_sgmcmc.diagnostics`][tfp_sgmcmc.diagnostics].
* The MAMBA tuner and its baselines: [`tfp_sgmcmc.tuning`][tfp_sgmcmc.tuning] (Keras 3 models
  through [`tfp_sgmcmc.keras`][tfp_sgmcmc.keras], imported on demand).
* Sparse priors with stochastic-approximation latents: [`tfp_sgmcmc.priors`][tfp_sgmcmc.priors].
* Long, resumable runs streamed to HDF5 and ArviZ export: [`tfp_sgmcmc.driver`][tfp_sgmcmc.driver],
  [`tfp_sgmcmc.to_arviz`][tfp_sgmcmc.to_arviz].

See ``docs/index.md`` for the guide; every sampler's docstring gives its update rule
and the paper it comes from.
"""

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
    find_map,
)
from tfp_sgmcmc.export import to_arviz
from tfp_sgmcmc.kernels import (
    ASGLD,
    MSGLD,
    PSGLD,
    SGHMC,
    SGLD,
    SGNHT,
    AdamSGLD,
    MomentumSGLD,
    PreconditionedStochasticGradientLangevinDynamics,
    StochasticApproximation,
    StochasticGradientHamiltonianMonteCarlo,
    StochasticGradientLangevinDynamics,
    StochasticGradientNoseHooverThermostat,
)
from tfp_sgmcmc.priors import SpikeAndSlabGroupLasso, SSGLEstimator
from tfp_sgmcmc.schedules import (
    ConstantStepSize,
    CyclicalStepSize,
    GeometricAnnealing,
    PolynomialDecay,
    SAStepSize,
)
from tfp_sgmcmc.tuning import MAMBA, RayMAMBA, grid_search, heuristic, mamba

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
    "StructuredEstimator",
    "StructuredDropoutEstimator",
    "find_map",
    # kernels
    "StochasticGradientLangevinDynamics",
    "PreconditionedStochasticGradientLangevinDynamics",
    "StochasticGradientHamiltonianMonteCarlo",
    "StochasticGradientNoseHooverThermostat",
    "MomentumSGLD",
    "AdamSGLD",
    "StochasticApproximation",
    "SGLD",
    "PSGLD",
    "SGHMC",
    "SGNHT",
    "MSGLD",
    "ASGLD",
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
    "mamba",
    "grid_search",
    "heuristic",
    "sample",
    "to_arviz",
]
