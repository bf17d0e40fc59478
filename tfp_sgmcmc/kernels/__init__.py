"""SG-MCMC samplers as ``tfp.mcmc.TransitionKernel`` subclasses.

Names (``docs/conventions.md``, "Names"): one name per sampler, its acronym:
``SGLD``, ``PSGLD``, ``SGHMC``, ``SGNHT``, ``MSGLD``, ``ASGLD``, ``CSGLD``, ``RESGLD``, ...
Results types are named after the kernel that defines them:
[`SGLDKernelResults`][tfp_sgmcmc.kernels.SGLDKernelResults] (SGLD, pSGLD and every
adaptive-drift SGLD), [`SGHMCKernelResults`][tfp_sgmcmc.kernels.SGHMCKernelResults],
[`SGNHTKernelResults`][tfp_sgmcmc.kernels.SGNHTKernelResults],
[`StochasticApproximationKernelResults`][tfp_sgmcmc.kernels.StochasticApproximationKernelResults].

``StochasticApproximation`` wraps any SG kernel (SGLD-SA, SGHMC-SA). Control-variate
variants (SGLD-CV, ...) are the same kernels given a
[`ControlVariateEstimator`][tfp_sgmcmc.estimators.ControlVariateEstimator].
"""

from tfp_sgmcmc.kernels import adaptive
from tfp_sgmcmc.kernels.adaptive import *  # noqa: F403 (its __all__, added below)
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.contour import CSGLD, CSGLDKernelResults, importance_weights
from tfp_sgmcmc.kernels.hamiltonian import (
    SGHMC,
    SGHMCKernelResults,
)
from tfp_sgmcmc.kernels.langevin import (
    PSGLD,
    SGLD,
    SGLDKernelResults,
)
from tfp_sgmcmc.kernels.replica_exchange import (
    RESGLD,
    RESGLDKernelResults,
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
    SGNHT,
    SGNHTKernelResults,
)

# A new sampler adds its import above and its name here: ``tfp_sgmcmc``
# exports every class named here but the results types, the base class, the mixin and
# the error, and ``tfp-sgmcmc`` reads the list from this source without importing it,
# so it stays a literal list.
__all__ = [
    "SGMCMCKernel",
    "SGLD",
    "PSGLD",
    "SGHMC",
    "SGNHT",
    "SGLDKernelResults",
    "SGHMCKernelResults",
    "SGNHTKernelResults",
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
    "CSGLD",
    "CSGLDKernelResults",
    "importance_weights",
    "RESGLD",
    "RESGLDKernelResults",
    "estimate_energy_variance",
]
# The adaptive-drift family is exported as its module lists it (eight names).
__all__ += adaptive.__all__
