"""Tuning SG-MCMC samplers: MAMBA (successive halving), grid search and the
heuristic baseline, with budgets in seconds, steps or gradient evaluations.
See ``docs/tuning.md``. (Keras models enter through
[`tfp_sgmcmc.keras`][tfp_sgmcmc.keras], imported on demand: it is the only module that
imports Keras.)
"""

from tfp_sgmcmc.tuning.arms import KernelFactory, arm_label, grid, log10_grid
from tfp_sgmcmc.tuning.baselines import grid_search, heuristic, heuristic_arm
from tfp_sgmcmc.tuning.budget import (
    Budget,
    gradient_evaluations,
    num_rounds,
    per_arm_budgets,
    round_sizes,
    seconds,
    steps,
)
from tfp_sgmcmc.tuning.executors import (
    ArmPool,
    ArmRun,
    Executor,
    SequentialExecutor,
    TuningJob,
    TuningProblem,
)
from tfp_sgmcmc.tuning.mamba import MAMBA, mamba
from tfp_sgmcmc.tuning.metrics import FSSDMetric, FullDataScorer, FunctionMetric, KSDMetric

# Imports Ray only when a RayExecutor is built (optional extra `tfp-sgmcmc[ray]`).
from tfp_sgmcmc.tuning.ray_backend import RayExecutor, RayMAMBA, ray_mamba
from tfp_sgmcmc.tuning.results import RoundRecord, TuningResult

__all__ = [
    "MAMBA",
    "mamba",
    "Executor",
    "SequentialExecutor",
    "RayExecutor",
    "ArmPool",
    "ArmRun",
    "TuningJob",
    "TuningProblem",
    "RayMAMBA",
    "ray_mamba",
    "grid_search",
    "heuristic",
    "heuristic_arm",
    "Budget",
    "seconds",
    "steps",
    "gradient_evaluations",
    "num_rounds",
    "round_sizes",
    "per_arm_budgets",
    "grid",
    "log10_grid",
    "arm_label",
    "KernelFactory",
    "KSDMetric",
    "FSSDMetric",
    "FunctionMetric",
    "FullDataScorer",
    "TuningResult",
    "RoundRecord",
]
