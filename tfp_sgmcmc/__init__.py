"""tfp-sgmcmc: stochastic-gradient MCMC for TensorFlow Probability.

Samplers are ``tfp.mcmc.TransitionKernel``s driven by a gradient estimator that
owns the data; see ``docs/`` for the guide and ``ALGORITHMS`` references in each
docstring.
"""

from tfp_sgmcmc import data, estimators, integrators, kernels, schedules, transforms
from tfp_sgmcmc.data import DatasetData, InMemoryData
from tfp_sgmcmc.estimators import (
    ControlVariateEstimator,
    GradientEstimate,
    GradientEstimator,
    MinibatchEstimator,
    NoisyGradientEstimator,
    find_map,
)
from tfp_sgmcmc.kernels import (
    PSGLD,
    SGHMC,
    SGLD,
    SGNHT,
    PreconditionedStochasticGradientLangevinDynamics,
    StochasticGradientHamiltonianMonteCarlo,
    StochasticGradientLangevinDynamics,
    StochasticGradientNoseHooverThermostat,
)
from tfp_sgmcmc.schedules import ConstantStepSize, CyclicalStepSize, PolynomialDecay

__version__ = "0.1.0.dev0"

__all__ = [
    "data",
    "estimators",
    "integrators",
    "kernels",
    "schedules",
    "transforms",
    "InMemoryData",
    "DatasetData",
    "GradientEstimate",
    "GradientEstimator",
    "MinibatchEstimator",
    "NoisyGradientEstimator",
    "ControlVariateEstimator",
    "find_map",
    "StochasticGradientLangevinDynamics",
    "PreconditionedStochasticGradientLangevinDynamics",
    "StochasticGradientHamiltonianMonteCarlo",
    "StochasticGradientNoseHooverThermostat",
    "SGLD",
    "PSGLD",
    "SGHMC",
    "SGNHT",
    "ConstantStepSize",
    "PolynomialDecay",
    "CyclicalStepSize",
]
