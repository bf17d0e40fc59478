"""Long sampling runs: compiled chunks streamed to HDF5, atomic checkpoints, resume.

See ``docs/driver.md``. [`sample`][tfp_sgmcmc.driver.sample] runs any ``tfp.mcmc`` kernel;
[`SamplingRun`][tfp_sgmcmc.driver.SamplingRun] reads a run directory;
[`ChunkedChain`][tfp_sgmcmc.driver.ChunkedChain] runs the same compiled chunks with the
draws kept in memory (studies, examples);
[`sample_chain`][tfp_sgmcmc.driver.flat.sample_chain] is ``tfp.mcmc.sample_chain`` as one flat
loop (the same chain, faster under XLA);
[`ModelSpec`][tfp_sgmcmc.driver.model.ModelSpec] and
[`load_model`][tfp_sgmcmc.driver.model.load_model] define the model-file protocol of the
``tfp-sgmcmc`` CLI. The chunk steps themselves (plan, seeds, compiled programs) are in
[`tfp_sgmcmc.driver.chunks`][tfp_sgmcmc.driver.chunks].

A run directory has one writer at a time (``run.lock``), checksummed draws and
checkpoints, and one named error per fault (a second writer, damaged rows, a full disk):
``docs/faults.md``.
"""

from tfp_sgmcmc.driver import flat, memory, sampler
from tfp_sgmcmc.driver.flat import *  # noqa: F403  (the names in flat.__all__)
from tfp_sgmcmc.driver.memory import *  # noqa: F403  (the names in memory.__all__)
from tfp_sgmcmc.driver.model import ModelSpec, load_model
from tfp_sgmcmc.driver.sampler import *  # noqa: F403  (the names in sampler.__all__)

#: The chunk arithmetic and the run directory's file layout: public in
#: ``tfp_sgmcmc.driver.sampler`` only, not in this namespace's ``__all__``.
_SAMPLER_ONLY = ("chunk_seed", "chunk_plan", "CONFIG_FILE", "RUN_FILES", "TRACED_FIELDS")

# One list of names per module (the runs' entry points and errors are sampler's), not a
# second copy of it here.
__all__ = [
    *(name for name in sampler.__all__ if name not in _SAMPLER_ONLY),
    *memory.__all__,
    *flat.__all__,
    "ModelSpec",
    "load_model",
]
