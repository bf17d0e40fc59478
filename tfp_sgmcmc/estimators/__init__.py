"""Gradient estimators: the objects that own the data and the N/n scaling.

Wrappers (control variates, structured / dropout energies) wrap a base estimator;
kernels never know which estimator they are given.
"""

from tfp_sgmcmc.estimators.anchored_subset import AnchoredSubsetEstimator
from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator
from tfp_sgmcmc.estimators.control_variates import ControlVariateEstimator
from tfp_sgmcmc.estimators.distributed import DistributedMinibatchEstimator
from tfp_sgmcmc.estimators.laplace import LaplaceApproximation, laplace_approximation
from tfp_sgmcmc.estimators.map import MapResult, find_map
from tfp_sgmcmc.estimators.minibatch import MinibatchEstimator, NoisyGradientEstimator
from tfp_sgmcmc.estimators.partitions import Partition
from tfp_sgmcmc.estimators.structured import (
    BernoulliMask,
    BetaMask,
    MaskDistribution,
    StructuredDropoutEstimator,
    StructuredEstimator,
    UniformMask,
)
from tfp_sgmcmc.estimators.svrg import SVRGEstimator
from tfp_sgmcmc.estimators.transformed import TransformedEstimator
from tfp_sgmcmc.estimators.whitened import WhitenedEstimator

__all__ = [
    "GradientEstimate",
    "GradientEstimator",
    "MinibatchEstimator",
    "NoisyGradientEstimator",
    "ControlVariateEstimator",
    "AnchoredSubsetEstimator",
    "SVRGEstimator",
    "DistributedMinibatchEstimator",
    "find_map",
    "MapResult",
    "StructuredEstimator",
    "StructuredDropoutEstimator",
    "MaskDistribution",
    "BernoulliMask",
    "UniformMask",
    "BetaMask",
    "Partition",
    "TransformedEstimator",
    "WhitenedEstimator",
    "laplace_approximation",
    "LaplaceApproximation",
]
