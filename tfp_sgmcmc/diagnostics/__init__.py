"""Sample-quality diagnostics: Stein discrepancies (functions and reducers),
ESS / integrated autocorrelation time, calibration (ECE/MCE) and the relative
standard-deviation error. See ``docs/diagnostics.md``.
"""

from tfp_sgmcmc.diagnostics.calibration import (
    expected_calibration_error,
    maximum_calibration_error,
    predictive_metrics,
)
from tfp_sgmcmc.diagnostics.fssd import fssd
from tfp_sgmcmc.diagnostics.fssd_opt import FSSDOptResult, fssd_opt
from tfp_sgmcmc.diagnostics.gradient_noise import GradientNoiseReport, gradient_noise_ratio
from tfp_sgmcmc.diagnostics.ksd import kernel_stein_discrepancy
from tfp_sgmcmc.diagnostics.metrics import (
    effective_sample_size,
    integrated_autocorrelation_time,
    relative_std_error,
)
from tfp_sgmcmc.diagnostics.reducers import FSSDReducer, KSDReducer
from tfp_sgmcmc.diagnostics.reference import (
    KSDReference,
    full_data_scores,
    laplace_ksd_reference,
)

__all__ = [
    "kernel_stein_discrepancy",
    "fssd",
    "fssd_opt",
    "FSSDOptResult",
    "KSDReducer",
    "FSSDReducer",
    "laplace_ksd_reference",
    "KSDReference",
    "full_data_scores",
    "gradient_noise_ratio",
    "GradientNoiseReport",
    "effective_sample_size",
    "integrated_autocorrelation_time",
    "relative_std_error",
    "expected_calibration_error",
    "maximum_calibration_error",
    "predictive_metrics",
]
