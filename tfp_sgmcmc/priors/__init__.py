"""Sparse priors whose hyper-latents are adapted during sampling.

* [`SpikeAndSlabGroupLasso`][tfp_sgmcmc.priors.SpikeAndSlabGroupLasso] — the SSGL prior of Deng et
  al. (2019):
  E-step in log space, latent targets (12)–(15) and the SA recursion.
* [`SSGLEstimator`][tfp_sgmcmc.priors.SSGLEstimator] — the gradient estimator of ``Q1(β)`` whose
  prior
  reads the latents from its estimator state (used by
  [`StochasticApproximation`][tfp_sgmcmc.kernels.stochastic_approximation.StochasticApproximation]).
"""

from tfp_sgmcmc.priors.estimator import SSGLEstimator
from tfp_sgmcmc.priors.ssgl import SpikeAndSlabGroupLasso

__all__ = [
    "SpikeAndSlabGroupLasso",
    "SSGLEstimator",
]
