"""Long sampling runs: compiled chunks streamed to HDF5, atomic checkpoints, resume.

See ``docs/driver.md``. :func:`sample` runs any ``tfp.mcmc`` kernel;
:class:`SamplingRun` reads a run directory; :class:`ModelSpec` and
:func:`load_model` define the model-file protocol of the ``tfp-sgmcmc`` CLI.
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
