"""SG-MCMC samplers as ``tfp.mcmc.TransitionKernel`` subclasses.

Names (``docs/conventions.md``, "Names"): one name per sampler, its acronym:
``SGLD``, ``PSGLD``, ``SGHMC``, ``SGNHT``, ``MSGLD``, ``ASGLD``, ``CSGLD``, ``RESGLD``, ...
Results types are named after the kernel that defines them and live in its module, as
``tfp.mcmc`` keeps its results types out of its namespace:
[`SGLDKernelResults`][tfp_sgmcmc.kernels.langevin.SGLDKernelResults] (SGLD, pSGLD and every
adaptive-drift SGLD), [`SGHMCKernelResults`][tfp_sgmcmc.kernels.hamiltonian.SGHMCKernelResults],
[`SGNHTKernelResults`][tfp_sgmcmc.kernels.thermostat.SGNHTKernelResults],
[`StochasticApproximationKernelResults`][tfp_sgmcmc.kernels.stochastic_approximation.StochasticApproximationKernelResults].

``StochasticApproximation`` wraps any SG kernel (SGLD-SA, SGHMC-SA). Control-variate
variants (SGLD-CV, ...) are the same kernels given a
[`ControlVariateEstimator`][tfp_sgmcmc.estimators.ControlVariateEstimator].
"""

from tfp_sgmcmc.kernels import adaptive
from tfp_sgmcmc.kernels.adaptive import *  # noqa: F403 (its __all__, added below)
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.contour import CSGLD, importance_weights
from tfp_sgmcmc.kernels.hamiltonian import SGHMC
from tfp_sgmcmc.kernels.langevin import PSGLD, SGLD
from tfp_sgmcmc.kernels.replica_exchange import RESGLD
from tfp_sgmcmc.kernels.splitting import BADODAB, BAOAB
from tfp_sgmcmc.kernels.stochastic_approximation import StochasticApproximation
from tfp_sgmcmc.kernels.tfp_wrappers import TransformedTransitionKernel, UncalibratedKernelError
from tfp_sgmcmc.kernels.thermostat import SGNHT

# A new sampler adds its import above and its name here (its results type stays in its
# module): ``tfp_sgmcmc`` exports every class named here but the base class and the
# error, and ``tfp-sgmcmc`` reads the list from this source without importing it, so it
# stays a literal list.
__all__ = [
    "SGMCMCKernel",
    "SGLD",
    "PSGLD",
    "SGHMC",
    "SGNHT",
    "StochasticApproximation",
    "TransformedTransitionKernel",
    "UncalibratedKernelError",
    "BAOAB",
    "BADODAB",
    "CSGLD",
    "importance_weights",
    "RESGLD",
]
# The adaptive-drift family is exported as its module lists it (six names).
__all__ += adaptive.__all__
