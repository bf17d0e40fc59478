"""Gradient estimators: the objects that own the data and the N/n scaling."""

from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator
from tfp_sgmcmc.estimators.control_variates import ControlVariateEstimator
from tfp_sgmcmc.estimators.map import MapResult, find_map
from tfp_sgmcmc.estimators.minibatch import MinibatchEstimator, NoisyGradientEstimator

__all__ = [
    "GradientEstimate",
    "GradientEstimator",
    "MinibatchEstimator",
    "NoisyGradientEstimator",
    "ControlVariateEstimator",
    "find_map",
    "MapResult",
]
