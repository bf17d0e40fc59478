"""SG-MCMC samplers as ``tfp.mcmc.TransitionKernel`` subclasses.

Short aliases follow the papers' names: ``SGLD``, ``PSGLD``, ``SGHMC``, ``SGNHT``,
``MSGLD``, ``ASGLD``. ``StochasticApproximation`` wraps any of them (SGLD-SA, SGHMC-SA).
Control-variate variants (SGLD-CV, ...) are the same kernels given a
[`ControlVariateEstimator`][tfp_sgmcmc.estimators.ControlVariateEstimator].
"""

from tfp_sgmcmc.kernels.adaptive import (
    ASGLD,
    MSGLD,
    AdadeltaSGLD,
    AdaMaxSGLD,
    AdamSGLD,
    MomentumSGLD,
    PreconditionedAdamSGLD,
    PreconditionedMomentumSGLD,
)
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.contour import ContourSGLD, ContourSGLDKernelResults, importance_weights
from tfp_sgmcmc.kernels.hamiltonian import (
    SGHMCKernelResults,
    StochasticGradientHamiltonianMonteCarlo,
)
from tfp_sgmcmc.kernels.langevin import (
    LangevinKernelResults,
    PreconditionedStochasticGradientLangevinDynamics,
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

__all__ = [
    "SGMCMCKernel",
    "StochasticGradientLangevinDynamics",
    "PreconditionedStochasticGradientLangevinDynamics",
    "StochasticGradientHamiltonianMonteCarlo",
    "StochasticGradientNoseHooverThermostat",
    "LangevinKernelResults",
    "SGHMCKernelResults",
    "SGNHTKernelResults",
    "SGLD",
    "PSGLD",
    "SGHMC",
    "SGNHT",
    "MomentumSGLD",
    "AdamSGLD",
    "AdaMaxSGLD",
    "AdadeltaSGLD",
    "PreconditionedMomentumSGLD",
    "PreconditionedAdamSGLD",
    "MSGLD",
    "ASGLD",
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
