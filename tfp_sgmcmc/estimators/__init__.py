"""Gradient estimators: the objects that own the data and the N/n scaling.

Wrappers (control variates, structured / dropout energies) wrap a base estimator;
kernels never know which estimator they are given.
"""

from tfp_sgmcmc.estimators import partitions
from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator
from tfp_sgmcmc.estimators.control_variates import ControlVariateEstimator
from tfp_sgmcmc.estimators.distributed import DistributedMinibatchEstimator
from tfp_sgmcmc.estimators.laplace import (
    LaplaceApproximation,
    ModeResult,
    find_mode,
    laplace_approximation,
)
from tfp_sgmcmc.estimators.map import MapResult, find_map
from tfp_sgmcmc.estimators.minibatch import MinibatchEstimator, NoisyGradientEstimator
from tfp_sgmcmc.estimators.partitions import *  # noqa: F403 (its __all__, added below)
from tfp_sgmcmc.estimators.structured import (
    BernoulliMask,
    BetaMask,
    MaskDistribution,
    StructuredDropoutEstimator,
    StructuredEstimator,
    StructuredEstimatorState,
    UniformMask,
    trace_without_history,
)
from tfp_sgmcmc.estimators.svrg import SVRGEstimator, SVRGEstimatorState
from tfp_sgmcmc.estimators.transformed import TransformedEstimator
from tfp_sgmcmc.estimators.whitened import WhitenedEstimator

__all__ = [
    "GradientEstimate",
    "GradientEstimator",
    "MinibatchEstimator",
    "NoisyGradientEstimator",
    "ControlVariateEstimator",
    "SVRGEstimator",
    "SVRGEstimatorState",
    "DistributedMinibatchEstimator",
    "find_map",
    "MapResult",
    "StructuredEstimator",
    "StructuredDropoutEstimator",
    "StructuredEstimatorState",
    "MaskDistribution",
    "BernoulliMask",
    "UniformMask",
    "BetaMask",
    "trace_without_history",
    "TransformedEstimator",
    "WhitenedEstimator",
    "find_mode",
    "ModeResult",
    "laplace_approximation",
    "LaplaceApproximation",
]
# The partition helpers are exported as their module lists them.
__all__ += partitions.__all__
