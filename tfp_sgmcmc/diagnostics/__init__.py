"""Sample-quality diagnostics: Stein discrepancies (functions and reducers),
ESS / integrated autocorrelation time, calibration (ECE/MCE) and the relative
standard-deviation error. See ``docs/diagnostics.md``.
"""

from tfp_sgmcmc.diagnostics.calibration import (
    calibration_errors,
    expected_calibration_error,
    maximum_calibration_error,
    model_averaged_probabilities,
    predictive_metrics,
)
from tfp_sgmcmc.diagnostics.fssd import fssd, fssd_features
from tfp_sgmcmc.diagnostics.fssd_opt import FSSDOptResult, fssd_opt
from tfp_sgmcmc.diagnostics.gradient_noise import (
    NOISE_RATIO_THRESHOLD,
    GradientNoiseReport,
    gradient_noise_ratio,
    noise_ratio_coefficient,
)
from tfp_sgmcmc.diagnostics.ksd import kernel_stein_discrepancy
from tfp_sgmcmc.diagnostics.metric import whiten
from tfp_sgmcmc.diagnostics.metrics import (
    IntegratedAutocorrelationTime,
    effective_sample_size,
    integrated_autocorrelation_time,
    relative_std_error,
)
from tfp_sgmcmc.diagnostics.reducers import (
    FSSDReducer,
    FSSDReducerState,
    KSDReducer,
    KSDReducerState,
    get_innermost_score,
)
from tfp_sgmcmc.diagnostics.reference import (
    KSDReference,
    full_data_scores,
    laplace_ksd_reference,
)
from tfp_sgmcmc.diagnostics.stein_kernels import (
    median_heuristic,
    stein_kernel_diagonal,
    stein_kernel_matrix,
)

__all__ = [
    "kernel_stein_discrepancy",
    "whiten",
    "stein_kernel_matrix",
    "stein_kernel_diagonal",
    "median_heuristic",
    "fssd",
    "fssd_opt",
    "fssd_features",
    "FSSDOptResult",
    "KSDReducer",
    "KSDReducerState",
    "FSSDReducer",
    "FSSDReducerState",
    "get_innermost_score",
    "laplace_ksd_reference",
    "KSDReference",
    "full_data_scores",
    "gradient_noise_ratio",
    "noise_ratio_coefficient",
    "GradientNoiseReport",
    "NOISE_RATIO_THRESHOLD",
    "effective_sample_size",
    "integrated_autocorrelation_time",
    "IntegratedAutocorrelationTime",
    "relative_std_error",
    "model_averaged_probabilities",
    "expected_calibration_error",
    "maximum_calibration_error",
    "calibration_errors",
    "predictive_metrics",
]
