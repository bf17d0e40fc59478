"""Long sampling runs: compiled chunks streamed to HDF5, atomic checkpoints, resume.

See ``docs/driver.md``. [`sample`][tfp_sgmcmc.driver.sample] runs any ``tfp.mcmc`` kernel;
[`SamplingRun`][tfp_sgmcmc.driver.SamplingRun] reads a run directory;
[`ModelSpec`][tfp_sgmcmc.driver.ModelSpec] and
[`load_model`][tfp_sgmcmc.driver.load_model] define the model-file protocol of the ``tfp-sgmcmc``
CLI.
"""

from tfp_sgmcmc.driver.model import ModelSpec, load_model
from tfp_sgmcmc.driver.sampler import (
    CONFIG_FILE,
    TRACED_FIELDS,
    RunDirectoryError,
    RunExistsError,
    SamplingRun,
    chunk_plan,
    chunk_seed,
    open_run,
    sample,
)

__all__ = [
    "sample",
    "SamplingRun",
    "open_run",
    "RunDirectoryError",
    "RunExistsError",
    "chunk_seed",
    "chunk_plan",
    "CONFIG_FILE",
    "TRACED_FIELDS",
    "ModelSpec",
    "load_model",
]
