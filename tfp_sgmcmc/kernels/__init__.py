"""SG-MCMC samplers as ``tfp.mcmc.TransitionKernel`` subclasses.

Names (``docs/conventions.md``, "Names"): every sampler has its full name, and the samplers
the papers name by an acronym also have that acronym, an alias of the same class:
``SGLD``, ``PSGLD``, ``SGHMC``, ``SGNHT``, ``MSGLD``, ``ASGLD``. Results types are named
after the kernel that defines them, by its acronym:
[`SGLDKernelResults`][tfp_sgmcmc.kernels.SGLDKernelResults] (SGLD, pSGLD and every
adaptive-drift SGLD), [`SGHMCKernelResults`][tfp_sgmcmc.kernels.SGHMCKernelResults],
[`SGNHTKernelResults`][tfp_sgmcmc.kernels.SGNHTKernelResults],
[`StochasticApproximationKernelResults`][tfp_sgmcmc.kernels.StochasticApproximationKernelResults].
``LangevinKernelResults`` is a deprecated alias of ``SGLDKernelResults``.

``StochasticApproximation`` wraps any SG kernel (SGLD-SA, SGHMC-SA). Control-variate
variants (SGLD-CV, ...) are the same kernels given a
[`ControlVariateEstimator`][tfp_sgmcmc.estimators.ControlVariateEstimator].
"""

from tfp_sgmcmc.internal.util import deprecated_aliases
from tfp_sgmcmc.kernels import adaptive
from tfp_sgmcmc.kernels.adaptive import *  # noqa: F403 (its __all__, added below)
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.contour import ContourSGLD, ContourSGLDKernelResults, importance_weights
from tfp_sgmcmc.kernels.hamiltonian import (
    SGHMCKernelResults,
    StochasticGradientHamiltonianMonteCarlo,
)
from tfp_sgmcmc.kernels.langevin import (
    PreconditionedStochasticGradientLangevinDynamics,
    SGLDKernelResults,
    StochasticGradientLangevinDynamics,
)
from tfp_sgmcmc.kernels.replica_exchange import (
    ReplicaExchangeSGLD,
    ReplicaExchangeSGLDKernelResults,
    estimate_energy_variance,
)
from tfp_sgmcmc.kernels.splitting import (
    BADODAB,
    BAOAB,
    BADODABKernelResults,
    BAOABKernelResults,
)
from tfp_sgmcmc.kernels.stochastic_approximation import (
    StochasticApproximation,
    StochasticApproximationKernelResults,
    deng_sghmc,
)
from tfp_sgmcmc.kernels.tfp_wrappers import (
    SGMCMCResultsMixin,
    TransformedTransitionKernel,
    UncalibratedKernelError,
)
from tfp_sgmcmc.kernels.thermostat import (
    SGNHTKernelResults,
    StochasticGradientNoseHooverThermostat,
)

SGLD = StochasticGradientLangevinDynamics
PSGLD = PreconditionedStochasticGradientLangevinDynamics
SGHMC = StochasticGradientHamiltonianMonteCarlo
SGNHT = StochasticGradientNoseHooverThermostat
CSGLD = ContourSGLD
RESGLD = ReplicaExchangeSGLD


# Deprecated names, kept for one release (docs/conventions.md, "Names").
__getattr__ = deprecated_aliases(__name__, LangevinKernelResults=SGLDKernelResults)


# A new sampler adds its import above and its name (and acronym) here: ``tfp_sgmcmc``
# exports every class named here but the results types, the base class, the mixin and
# the error, and ``tfp-sgmcmc`` reads the list from this source without importing it,
# so it stays a literal list.
__all__ = [
    "SGMCMCKernel",
    "StochasticGradientLangevinDynamics",
    "PreconditionedStochasticGradientLangevinDynamics",
    "StochasticGradientHamiltonianMonteCarlo",
    "StochasticGradientNoseHooverThermostat",
    "SGLDKernelResults",
    "SGHMCKernelResults",
    "SGNHTKernelResults",
    "SGLD",
    "PSGLD",
    "SGHMC",
    "SGNHT",
    "StochasticApproximation",
    "StochasticApproximationKernelResults",
    "deng_sghmc",
    "TransformedTransitionKernel",
    "SGMCMCResultsMixin",
    "UncalibratedKernelError",
    "BAOAB",
    "BADODAB",
    "BAOABKernelResults",
    "BADODABKernelResults",
    "ContourSGLD",
    "ContourSGLDKernelResults",
    "importance_weights",
    "ReplicaExchangeSGLD",
    "ReplicaExchangeSGLDKernelResults",
    "estimate_energy_variance",
    "CSGLD",
    "RESGLD",
]
# The adaptive-drift family is exported as its module lists it (eight names).
__all__ += adaptive.__all__
