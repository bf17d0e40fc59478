"""Tuning SG-MCMC samplers: MAMBA (successive halving), grid search and the
heuristic baseline, with budgets in seconds, steps or gradient evaluations.
See ``docs/tuning.md``.

One entry point per method: ``MAMBA(arms, init_state, kernel, ...).run()``,
``grid_search(arms, init_state, kernel, ...)`` and ``heuristic(num_examples,
init_state, kernel, ...)``. ``kernel`` is a
[`KernelSpec`][tfp_sgmcmc.tuning.arms.KernelSpec], a function
``make_kernel(**arm)`` or a
[`TuningProblem`][tfp_sgmcmc.tuning.executors.TuningProblem]; how each arm is
sampled is an [`ArmSampling`][tfp_sgmcmc.tuning.arms.ArmSampling]. (Keras models enter through
[`tfp_sgmcmc.keras`][tfp_sgmcmc.keras], imported on demand: it is the only module that
imports Keras.)
"""

from tfp_sgmcmc.tuning.arms import ArmSampling, KernelSpec, grid, log10_grid
from tfp_sgmcmc.tuning.baselines import grid_search, heuristic
from tfp_sgmcmc.tuning.budget import Budget, gradient_evaluations, seconds, steps
from tfp_sgmcmc.tuning.executors import Executor, SequentialExecutor, TuningProblem
from tfp_sgmcmc.tuning.mamba import MAMBA
from tfp_sgmcmc.tuning.metrics import FSSDMetric, FunctionMetric, KSDMetric

# Imports Ray only when a RayExecutor is built (optional extra `tfp-sgmcmc[ray]`).
from tfp_sgmcmc.tuning.ray_backend import RayExecutor
from tfp_sgmcmc.tuning.results import RoundRecord, TuningResult

__all__ = [
    "MAMBA",
    "KernelSpec",
    "TuningProblem",
    "ArmSampling",
    "Executor",
    "SequentialExecutor",
    "RayExecutor",
    "grid_search",
    "heuristic",
    "Budget",
    "seconds",
    "steps",
    "gradient_evaluations",
    "grid",
    "log10_grid",
    "KSDMetric",
    "FSSDMetric",
    "FunctionMetric",
    "TuningResult",
    "RoundRecord",
]
