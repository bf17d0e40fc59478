"""The long-run sampling driver: compiled chunks, HDF5 streaming, atomic checkpoints.

A run of ``num_samples`` draws (after ``num_burnin_steps`` burn-in steps, keeping
every ``thin``-th state) is cut into a fixed *plan* of chunks: burn-in chunks of
``chunk_size · thin`` steps and sampling chunks of ``chunk_size`` draws (the last
of each may be shorter). Each chunk is one call of a compiled program

```none
(state, kernel_results, reducer_states, run_seed, first_step) ──run_steps──▶
    (draws [n, ...], trace [n, ...], state', kernel_results', reducer_states')
```

(the library's flat loop, [`run_steps`][tfp_sgmcmc.loop.run_steps]; one
``tf.function(jit_compile=True)`` per chunk shape, so at most four traces;
built by [`compile_chunk`][tfp_sgmcmc.driver.chunks.compile_chunk])
that carries the chain state, the kernel results and the reducer states to the
next chunk. After every chunk the driver appends the draws and the traced
diagnostics (``target_log_prob``, ``step_size``, ``diverged`` and the user's
``trace_fn`` outputs) to ``samples.h5``, rewrites the finalized reducer outputs,
and atomically replaces ``checkpoint.npz``; memory is bounded by one chunk.

[`sample`][tfp_sgmcmc.driver.sampler.sample] is five named steps: open (or resume) the
run, compile the chunk, run the chunk, checkpoint, close:

```none
run = _open_run(...)                          # new run dir, or checkpoint + truncated HDF5
for index in chunks not yet done:
    program = _compile_chunk(run, kind, n)    # cached per chunk shape
    _run_chunk(run, program, index)           # one compiled call; draws appended to HDF5
    _checkpoint(run, index + 1)               # atomic checkpoint.npz
_close(run)                                   # divergence warning, gradient-noise report
```

**Reproducibility across interruptions.** Step ``t`` of the run (counted from 0 over
the whole run, burn-in included) takes the seed ``stateless_fold_in(run_seed, t)``
(``tfp_sgmcmc.loop``): it depends on the run seed and the step index only, never
on ``chunk_size`` nor on how many processes the run took. The chunk programs are
deterministic functions of (state, kernel results, reducer states, seed, first step), and
the checkpoint stores those exactly (bitwise, as NumPy arrays), so a run that is
killed and resumed produces the same draws, bit for bit, as an uninterrupted
run with the same seed and the same execution mode (``jit_compile``: XLA and
graph mode agree to rounding, not bit for bit; ``docs/driver.md``, "Eager, graph and
XLA"). On resume every
HDF5 dataset is cut to the checkpointed number of draws, so draws written after
the last checkpoint are dropped and then produced again: none is lost or
duplicated.

The chain is the kernel's (e.g. SGLD [1]: ``θ' = θ + ε ĝ(θ) + √(2εT) ξ``); the
driver adds no randomness of its own.

#### References

[1]: Max Welling and Yee Whye Teh. Bayesian learning via stochastic gradient
     Langevin dynamics. In _ICML_, 2011.
[2]: Joshua V. Dillon et al. TensorFlow Distributions. _arXiv:1711.10604_,
     2017 (the ``tfp.mcmc`` kernel / results / reducer design used here).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import sys
import uuid
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import h5py
import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from tfp_sgmcmc.data.dataset import dataset_sources_exist
from tfp_sgmcmc.data.stream import count_draws as count_stream_draws
from tfp_sgmcmc.data.stream import stream_feeder
from tfp_sgmcmc.driver.checkpoint import (
    CHECKPOINT_FILE,
    Checkpoint,
    flatten_leaves,
    read_checkpoint,
    remove_quietly,
    write_checkpoint,
)
from tfp_sgmcmc.driver.chunks import (
    ChunkOutput,
    ChunkPlan,
    ChunkProgram,
    as_run_seed,
    chunk_plan,
    chunk_seed,
    chunk_steps,
    compile_chunk,
    run_chunk,
)
from tfp_sgmcmc.driver.errors import (
    RunDirectoryError,
    RunExistsError,
    RunLockedError,
    RunMismatchError,
    RunStorageError,
    StoreDamagedError,
)
from tfp_sgmcmc.driver.lock import RunLock, lock_holder
from tfp_sgmcmc.driver.store import (
    SAMPLES_FILE,
    SampleStore,
    chunk_digests,
    dataset_names,
    reductions_digest,
    space_left,
    store_layout,
)
from tfp_sgmcmc.internal.util import AttributeView, check_int, get_outermost, results_field

__all__ = [
    "sample",
    "SamplingRun",
    "open_run",
    "RunDirectoryError",
    "RunExistsError",
    "RunLockedError",
    "StoreDamagedError",
    "RunMismatchError",
    "RunStorageError",
    "chunk_seed",
    "chunk_plan",
    "CONFIG_FILE",
    "RUN_FILES",
    "TRACED_FIELDS",
    "MAX_RUN_STEPS",
]

CONFIG_FILE = "config.json"
#: The gradient-noise ratio at the run's last state (``docs/diagnostics.md``).
GRADIENT_NOISE_FILE = "gradient_noise.json"
#: Kernel-results fields traced by default (taken from the innermost results that have them).
TRACED_FIELDS = ("target_log_prob", "step_size", "diverged")
_FORMAT_VERSION = 1
#: The most kernel steps one run takes (burn-in included): step ``t`` draws its seed as
#: ``stateless_fold_in(run_seed, t)`` with an int32 ``t``, which must not wrap around.
MAX_RUN_STEPS = 2**31 - 1
#: The files of a run directory besides its lock (``run.lock``): what ``overwrite=True``
#: replaces and a new run refuses to write over. ``diagnostics.json`` (written by
#: ``tfp-sgmcmc diagnose``) goes with the run it describes.
RUN_FILES = (
    CHECKPOINT_FILE,
    CHECKPOINT_FILE + ".tmp",
    SAMPLES_FILE,
    CONFIG_FILE,
    "diagnostics.json",
    GRADIENT_NOISE_FILE,
)


# --------------------------------------------------------------------------- #
# Tracing
# --------------------------------------------------------------------------- #


def _make_trace_fn(
    user_trace_fn: Callable[[Any, Any], Mapping[str, Any]] | None,
) -> Callable[[Any, Any], dict[str, tf.Tensor]]:
    def trace(state: Any, results: Any) -> dict[str, tf.Tensor]:
        out = {}
        for name in TRACED_FIELDS:
            v = results_field(results, name)
            # One tensor per field: TFP's HMC keeps a list of per-part step sizes,
            # empty at bootstrap, which is not a per-draw value of fixed shape.
            if v is not None and not isinstance(v, (list, tuple)):
                out[name] = tf.convert_to_tensor(v)
        if user_trace_fn is not None:
            extra = user_trace_fn(state, results)
            if not isinstance(extra, Mapping):
                raise ValueError("`trace_fn` must return a dict of name -> tensor.")
            for k, v in extra.items():
                if k in out:
                    raise ValueError(f"`trace_fn` output {k!r} clashes with a default trace.")
                out[str(k)] = tf.convert_to_tensor(v)
        return out

    return trace


# --------------------------------------------------------------------------- #
# Configuration
# --------------------------------------------------------------------------- #
def _json_scalar(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (tf.Tensor, np.ndarray)) and np.ndim(v) == 0:
        return np.asarray(v).item()
    return type(v).__name__


def _kernel_description(kernel: Any) -> dict[str, Any]:
    params = getattr(kernel, "parameters", {}) or {}
    return {
        "class": type(kernel).__name__,
        "parameters": {k: _json_scalar(v) for k, v in sorted(params.items())},
    }


def _spec(x: Any) -> list[Any]:
    t = tf.convert_to_tensor(x)
    return [list(t.shape.as_list()), t.dtype.name]


#: Config keys added after the format's first release: a run written without one
#: still resumes.
_LATER_KEYS = frozenset({"independent_chains", "run_id"})


def _config_diff(stored: dict[str, Any], new: dict[str, Any]) -> list[str]:
    keys = sorted(set(stored) | set(new))
    return [
        k
        for k in keys
        if stored.get(k) != new.get(k) and not (k in _LATER_KEYS and k not in stored)
    ]


def _independent_chains(kernel: Any) -> bool | None:
    """Whether the kernel's chains draw their own minibatches (``None``: no estimator
    that says)."""
    est = get_outermost(kernel, "estimator", nested_attrs=("inner_kernel",))
    value = getattr(est, "independent_chains", None)
    return None if value is None else bool(value)


def _leaves(nest: Any) -> list[np.ndarray | None]:
    """Flat NumPy leaves of a nest (composites expanded), as the checkpoint stores them."""
    return flatten_leaves(tf.nest.flatten(nest, expand_composites=True))


# --------------------------------------------------------------------------- #
# The run and its steps
# --------------------------------------------------------------------------- #
@dataclasses.dataclass
class _Run:
    """Everything one call of `sample` carries from chunk to chunk.

    The run's settings (plan, seed, thinning, execution mode) are read from its
    config, the one record that is also written to disk and checked on resume.
    """

    run_dir: str
    kernel: Any
    config: dict[str, Any]
    store: SampleStore
    reducer: dict[str, Any]
    trace: Callable[[Any, Any], dict[str, tf.Tensor]]
    # The chain: carried from chunk to chunk and checkpointed after each.
    state: Any
    kernel_results: Any
    reducer_states: Any
    chunk_index: int = 0
    num_written: int = 0
    #: Draws the last checkpoint covers (what a resume keeps; ``num_written`` may be
    #: ahead between a chunk's append and its checkpoint).
    num_checkpointed: int = 0
    num_diverged: int = 0
    #: ``uint8 [datasets, 32]`` digests of every sampling chunk written (``chunk_digests``
    #: in store.py), checkpointed with the chain; empty for a run without an ID.
    chunk_digests: list[np.ndarray] = dataclasses.field(default_factory=list)
    #: ``uint8 [32]`` digest of the reductions last written to ``samples.h5``
    #: (``reductions_digest`` in store.py); ``None`` for a run without an ID.
    reductions_digest: np.ndarray | None = None
    programs: dict[tuple[str, int], ChunkProgram] = dataclasses.field(default_factory=dict)
    # Feeds compiled chunks from tf.data sources (tfp_sgmcmc/data/stream.py); set by
    # `_open_run` under jit_compile, before the bootstrap reads a batch.
    feeder: Any = None

    @property
    def thin(self) -> int:
        return int(self.config["thin"])

    @property
    def is_list(self) -> bool:
        return bool(self.config["state_is_list"])

    @property
    def run_seed(self) -> np.ndarray:
        return np.asarray(self.config["seed"], np.int32)

    @property
    def run_id(self) -> str | None:
        """The run's ID (``None``: a run created before IDs, whose chunks have no digest)."""
        return self.config.get("run_id")

    @property
    def plan(self) -> ChunkPlan:
        return _plan_of(self.config)

    @property
    def total_steps(self) -> int:
        return self.plan.total_steps

    def steps_before(self, index: int) -> int:
        return self.plan.steps_before(index)


def _plan_of(config: Mapping[str, Any]) -> ChunkPlan:
    """The chunk plan a run's config describes."""
    c = config
    return chunk_plan(c["num_samples"], c["num_burnin_steps"], c["thin"], c["chunk_size"])


def _open_run(
    kernel: Any,
    init_state: Any,
    run_dir: str,
    run_seed: np.ndarray,
    num_samples: int,
    thin: int,
    num_burnin_steps: int,
    chunk_size: int,
    reducer: dict[str, Any],
    trace_fn: Callable[[Any, Any], Mapping[str, Any]] | None,
    resume: bool,
    overwrite: bool,
    jit_compile: bool,
    metadata: dict[str, Any],
) -> _Run:
    """Step 1: a new run directory (config, first checkpoint, empty HDF5) or a resumed one.

    The kernel results, reducer states and trace are bootstrapped once at
    ``init_state`` as templates: their structure, shapes and dtypes enter the
    config (a resume must match them) and receive the checkpoint's leaves.
    """
    is_list = isinstance(init_state, (list, tuple))
    init_parts = [tf.convert_to_tensor(p) for p in (init_state if is_list else [init_state])]
    init_state = list(init_parts) if is_list else init_parts[0]
    trace = _make_trace_fn(trace_fn)

    feeder = None
    if jit_compile:
        # A tf.data source's compiled chunks read prefetched blocks of batches. Their
        # stream starts before the bootstrap reads the first batch: a stream whose
        # iterator was read batch by batch is fed by a much slower loop of single reads.
        feeder = stream_feeder(kernel, init_state)
        if feeder is not None:
            plan = chunk_plan(num_samples, num_burnin_steps, thin, chunk_size)
            feeder.start(plan.max_chunk_steps)
    results = kernel.bootstrap_results(init_state)
    reducer_states = {k: r.initialize(init_state, results) for k, r in reducer.items()}
    trace0 = trace(init_state, results)
    batch_shape = results_field(results, "target_log_prob")
    batch_shape = [] if batch_shape is None else tf.convert_to_tensor(batch_shape).shape.as_list()

    config = {
        "format_version": _FORMAT_VERSION,
        "num_samples": num_samples,
        "thin": thin,
        "num_burnin_steps": num_burnin_steps,
        "chunk_size": chunk_size,
        "seed": [int(s) for s in run_seed],
        "jit_compile": bool(jit_compile),
        "kernel": _kernel_description(kernel),
        "state_is_list": bool(is_list),
        "state_spec": [_spec(p) for p in init_parts],
        "batch_shape": batch_shape,
        "trace": {k: _spec(v) for k, v in sorted(trace0.items())},
        "reducers": sorted(reducer),
        "kernel_results_spec": [
            None if x is None else _spec(x)
            for x in tf.nest.flatten(results, expand_composites=True)
        ],
        "metadata": metadata,
        "independent_chains": _independent_chains(kernel),
    }
    if config["independent_chains"] is False and int(np.prod(batch_shape, dtype=np.int64)) >= 2:
        # The driver runs the kernel it is given: swapping the user's estimator would
        # silently change samples they may already have. It says so instead.
        warnings.warn(
            f"sample: the {int(np.prod(batch_shape, dtype=np.int64))} chains share each "
            "step's minibatch, so their gradient noise is correlated and R-hat, "
            "between-chain variance and multi-chain ESS overstate their independence; "
            "build the estimator with `independent_chains=True` (or "
            "`estimator.with_independent_chains()`) to run independent chains.",
            UserWarning,
            stacklevel=3,  # the caller of `sample`
        )
    store = SampleStore(os.path.join(run_dir, SAMPLES_FILE))
    run = _Run(run_dir, kernel, config, store, reducer, trace, init_state, results, reducer_states)
    run.feeder = feeder
    if resume:
        ckpt = _load_for_resume(run_dir, config, store)
        run.config = config  # with the run's ID (or none, for a run made before IDs)
        run.chunk_digests = [] if ckpt.chunk_digests is None else list(ckpt.chunk_digests)
        run.reductions_digest = ckpt.reductions_digest
        state_parts = [tf.constant(x) for x in ckpt.state]
        run.state = list(state_parts) if is_list else state_parts[0]
        # The bootstrapped results and reducer states are the templates the leaves fill.
        run.kernel_results = _repack(results, ckpt.kernel_results, "kernel results", run_dir)
        run.reducer_states = _repack(reducer_states, ckpt.reducer_states, "reducer states", run_dir)
        run.chunk_index, run.num_written = ckpt.chunk_index, ckpt.num_written
        run.num_checkpointed = ckpt.num_written
        if _reads_stream(kernel, run.state, run.kernel_results):
            warnings.warn(
                "sample: the kernel reads a tf.data source (DatasetData), which a resumed "
                "run reads from its first batch again: the chain continues from its "
                "checkpoint, but its draws differ from those of an uninterrupted run "
                "(in-memory data resume bit for bit).",
                UserWarning,
                stacklevel=3,  # the caller of `sample`
            )
        return run
    _check_new_run(run_dir, init_parts, trace0, num_samples)
    _prepare_new_run_dir(run_dir, overwrite)
    # A new ID per run: the checkpoint, the store and every chunk's digest are bound to it,
    # so files or chunks of another run are told apart from this one's.
    config["run_id"] = uuid.uuid4().hex
    # The sample store first: a state it cannot hold fails before the run exists.
    store.create(
        part_specs=[(tuple(p.shape.as_list()), p.dtype.name) for p in init_parts],
        trace_specs={k: (tuple(v.shape.as_list()), v.dtype.name) for k, v in trace0.items()},
        chunk_draws=min(chunk_size, num_samples),
        attrs={"config": json.dumps(config, sort_keys=True), "run_id": config["run_id"]},
    )
    _write_config(run_dir, config)
    run.reductions_digest = reductions_digest(config["run_id"], 0, {})
    _checkpoint(run, 0)
    return run


def _check_new_run(
    run_dir: str, init_parts: list[tf.Tensor], trace0: Mapping[str, tf.Tensor], num_samples: int
) -> None:
    """Refuses, before anything is written, a state with a dimension of size 0 (e.g. no
    chains), which HDF5 cannot store, and a run whose draws cannot fit on the disk.

    The estimate is the draws' bytes alone (``num_samples`` × the bytes of one draw of
    every state part and traced value); HDF5's own overhead is small on top.

    Raises:
      ValueError: naming ``init_state`` or ``num_samples``.
    """
    for i, p in enumerate(init_parts):
        shape = p.shape.as_list()
        if any(d == 0 for d in shape):
            raise ValueError(
                f"`init_state` part {i} has shape {shape}, with a dimension of size 0 (no "
                "chains, or an empty parameter): every dimension must be >= 1."
            )
    per_draw = sum(int(np.prod(p.shape.as_list(), dtype=np.int64)) * p.dtype.size
                   for p in [*init_parts, *trace0.values()])
    need = num_samples * per_draw
    free = space_left(run_dir)
    if free is not None and need > free:
        raise ValueError(
            f"`num_samples` = {num_samples:,} draws of {per_draw:,} bytes need {need:,} bytes "
            f"in {SAMPLES_FILE}, but the file system of {run_dir} has {free:,} bytes free: "
            "lower `num_samples` (or keep fewer draws with `thin`), or free some space "
            "first. Nothing was written."
        )


def _compile_chunk(run: _Run, kind: str, n: int) -> ChunkProgram:
    """Step 2: the compiled program of a ``(kind, n)`` chunk (one trace per chunk shape)."""
    key = (kind, n)
    if key not in run.programs:
        # tf.data sources have no XLA kernel: compiled chunks are fed their batches.
        run.programs[key] = compile_chunk(
            run.kernel,
            kind,
            n,
            run.thin,
            run.reducer,
            run.trace,
            run.config["jit_compile"],
            feeder=run.feeder,
        )
    return run.programs[key]


def _run_chunk(run: _Run, program: ChunkProgram, index: int) -> ChunkOutput:
    """Step 3: chunk ``index`` from the carried chain; a sampling chunk's draws, trace and
    reductions are appended to ``samples.h5``."""
    out = run_chunk(
        program,
        run.state,
        run.kernel_results,
        run.reducer_states,
        run.run_seed,
        run.steps_before(index),
    )
    run.state, run.kernel_results, run.reducer_states = (
        out.state,
        out.kernel_results,
        out.reducer_states,
    )
    if program.kind == "sample":
        draw_parts = [d.numpy() for d in (out.draws if run.is_list else [out.draws])]
        traced = {k: v.numpy() for k, v in out.trace.items()}
        reductions = {k: _leaves(v) for k, v in out.reductions.items()}
        run.store.append(draw_parts, traced, reductions)
        if run.run_id is not None:
            # Host work per chunk (one SHA-256 pass over its bytes), none per step.
            rows = {f"samples/{i}": p for i, p in enumerate(draw_parts)}
            rows.update({f"trace/{k}": traced[k] for k in sorted(traced)})
            run.chunk_digests.append(chunk_digests(run.run_id, index, run.num_written, rows))
            done = index + 1 - run.plan.num_burnin_chunks
            run.reductions_digest = reductions_digest(run.run_id, done, reductions)
        run.num_written += program.n
        if "diverged" in traced:
            run.num_diverged += int(np.count_nonzero(traced["diverged"]))
    return out


def _checkpoint(run: _Run, next_index: int) -> None:
    """Step 4: atomically replaces ``checkpoint.npz`` with the carried chain, which is
    where chunk ``next_index`` starts."""
    run.chunk_index = next_index
    write_checkpoint(
        run.run_dir,
        Checkpoint(
            config=run.config,
            chunk_index=next_index,
            num_written=run.num_written,
            next_seed=chunk_seed(run.run_seed, run.steps_before(next_index)),
            state=flatten_leaves(run.state if run.is_list else [run.state]),
            kernel_results=_leaves(run.kernel_results),
            reducer_states=_leaves(run.reducer_states),
            chunk_digests=_stacked_digests(run),
            reductions_digest=run.reductions_digest if run.run_id is not None else None,
        ),
    )
    run.num_checkpointed = run.num_written


def _stacked_digests(run: _Run) -> np.ndarray | None:
    """The run's chunk digests as one ``uint8 [chunks, datasets, 32]`` array."""
    if run.run_id is None:
        return None
    if run.chunk_digests:
        return np.stack(run.chunk_digests)
    return np.zeros((0, len(_dataset_names(run.config)), 32), np.uint8)


def _dataset_names(config: Mapping[str, Any]) -> list[str]:
    return dataset_names(len(config["state_spec"]), list(config["trace"]))


def _close(run: _Run) -> SamplingRun:
    """Step 5: warns about divergent draws, reports the gradient noise at the last state."""
    if run.num_diverged:
        warnings.warn(
            f"{run.num_diverged} draw(s) (x chains) in this session are marked diverged "
            "(non-finite state, score or log-density); see trace/diverged in samples.h5.",
            RuntimeWarning,
            stacklevel=3,
        )
    _report_gradient_noise(run.kernel, run.state, run.run_dir, run.run_seed, run.total_steps)
    return SamplingRun(run.run_dir)


# --------------------------------------------------------------------------- #
# Public API
# --------------------------------------------------------------------------- #
def sample(
    kernel: Any,
    init_state: Any,
    num_samples: int,
    run_dir: str,
    seed: Any = 0,
    thin: int = 1,
    num_burnin_steps: int = 0,
    chunk_size: int = 1000,
    reducer: Mapping[str, Any] | None = None,
    trace_fn: Callable[[Any, Any], Mapping[str, Any]] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    jit_compile: bool = True,
    progress: bool = True,
    metadata: Mapping[str, Any] | None = None,
) -> SamplingRun:
    """Runs (or resumes) a long chain in compiled chunks, streaming to ``run_dir``.

    See the module docstring for the chunk plan, the seed stream, the files and
    the five steps (open or resume, compile a chunk, run it, checkpoint, close).
    To keep the draws in memory instead, use
    [`ChunkedChain`][tfp_sgmcmc.driver.ChunkedChain].

    Args:
      kernel: any ``tfp.mcmc.TransitionKernel`` (our SG kernels or TFP's).
      init_state: initial state (tensor or list of parts, optional leading
        chain dimensions).
      num_samples: draws to keep (after burn-in and thinning).
      run_dir: the run directory (created).
      seed: int or int pair; the run seed. Default value: ``0``.
      thin: keep every ``thin``-th state. Default value: ``1``.
      num_burnin_steps: steps discarded before the first draw. Default value: ``0``.
      chunk_size: draws per compiled chunk (memory is O(chunk_size · state size)).
        Default value: ``1000``.
      reducer: optional dict name -> ``tfp.experimental.mcmc.Reducer`` run over
        the kept draws; their states are carried across chunks and checkpointed,
        their finalized outputs rewritten in ``samples.h5`` after every chunk.
        Default value: ``None``.
      trace_fn: optional ``(state, kernel_results) -> dict`` of extra per-draw
        values to store next to ``target_log_prob``, ``step_size``, ``diverged``.
        Default value: ``None``.
      resume: continue the run in ``run_dir`` from its checkpoint (the kernel,
        ``init_state`` structure and every argument above must match the run's;
        ``init_state``'s values are ignored). Default value: ``False``.
      overwrite: delete an existing run in ``run_dir`` first (only the driver's
        own files). Default value: ``False``.
      jit_compile: compile the chunks with XLA. Default value: ``True``.
      progress: show a tqdm progress bar (rate, ETA). Default value: ``True``.
      metadata: JSON-serializable dict stored in the config (e.g. the model and
        kernel arguments, used by the CLI). Default value: ``None``.

    Returns:
      A [`SamplingRun`][tfp_sgmcmc.driver.sampler.SamplingRun] reading the run directory.

    Raises:
      ValueError: bad arguments (named in the message).
      RunExistsError: a run exists in ``run_dir`` and neither ``resume`` nor
        ``overwrite`` was given.
      RunDirectoryError: ``resume`` with a missing, corrupted or mismatching run;
        a ``run_dir`` that is a file, or that holds files named like a run's
        (``config.json``, ...) but no run (they are never deleted).
      RunLockedError: another writer (another ``sample`` call or process) holds
        ``run_dir``'s lock (``run.lock``; held from start to end of every call, so
        two writers never append to one run). A lock file left by a dead process
        holds nothing and is taken over.
      StoreDamagedError: ``resume`` onto a ``samples.h5`` whose recorded rows fail
        their checksums, or that is zero-length or not HDF5 (nothing is written).
      RunStorageError: an ``OSError`` of the run directory (a full disk, permissions,
        a read-only file system): one line saying what failed, while doing what, and
        how many draws are safe on disk (the last checkpoint's; the run resumes from
        there). No ``.tmp`` file is left behind.
      KeyboardInterrupt: re-raised after Ctrl-C; the last checkpoint is intact.
    """
    num_samples = check_int(num_samples, "num_samples", 1)
    thin = check_int(thin, "thin", 1)
    num_burnin_steps = check_int(num_burnin_steps, "num_burnin_steps", 0)
    chunk_size = check_int(chunk_size, "chunk_size", 1)
    if resume and overwrite:
        raise ValueError("Give at most one of `resume` and `overwrite`.")
    total_steps = num_burnin_steps + num_samples * thin
    if total_steps > MAX_RUN_STEPS:
        big = "num_burnin_steps" if num_burnin_steps > num_samples * thin else "num_samples"
        raise ValueError(
            f"`{big}` is too large: the run would take `num_burnin_steps` + `num_samples` · "
            f"`thin` = {total_steps:,} steps, more than the {MAX_RUN_STEPS:,} one run can "
            "(step t's seed is fold_in(seed, t) with an int32 t). Split it into several "
            "runs with different seeds."
        )
    if not isinstance(run_dir, (str, os.PathLike)):
        raise ValueError(f"`run_dir` must be a path, got {run_dir!r}.")
    if not os.fspath(run_dir).strip():
        # '' would be the current directory: the run's files among the user's own.
        raise ValueError("`run_dir` must be a non-empty path (a directory for the run's files).")
    if reducer is not None and not isinstance(reducer, Mapping):
        raise ValueError("`reducer` must be a dict of name -> tfp.experimental.mcmc.Reducer.")
    if trace_fn is not None and not callable(trace_fn):
        raise ValueError("`trace_fn` must be callable (state, kernel_results) -> dict.")
    run_seed = as_run_seed(seed)
    try:
        # Stored as JSON and compared with the stored copy on resume: normalised the
        # same way (tuples become lists), so the same arguments always match.
        metadata = json.loads(json.dumps(dict(metadata or {})))
    except (TypeError, ValueError) as e:
        raise ValueError(f"`metadata` must be JSON-serializable: {e}") from e

    run_dir = os.fspath(run_dir)
    run: _Run | None = None
    lock: RunLock | None = None
    # What the driver is doing, for the message of an OSError (which rarely says).
    doing = "creating or locking the run directory"
    try:
        lock = _lock_run_dir(run_dir, resume)
        doing = "resuming the run" if resume else "creating the run's files"
        run = _open_run(
            kernel,
            init_state,
            run_dir,
            run_seed,
            num_samples,
            thin,
            num_burnin_steps,
            chunk_size,
            dict(reducer or {}),
            trace_fn,
            resume,
            overwrite,
            jit_compile,
            metadata,
        )
        bar = tqdm(
            total=run.total_steps,
            initial=run.steps_before(run.chunk_index),
            unit="step",
            desc=os.path.basename(os.path.normpath(run.run_dir)) or "sample",
            disable=not progress,
            dynamic_ncols=True,
        )
        index = run.chunk_index
        try:
            for index in range(run.chunk_index, len(run.plan)):
                program = _compile_chunk(run, *run.plan[index])
                where = f"chunk {index + 1}/{len(run.plan)}"
                doing = (
                    f"appending the draws of {where} to {SAMPLES_FILE}"
                    if program.kind == "sample"
                    else f"running burn-in {where}"
                )
                _run_chunk(run, program, index)
                doing = f"writing {CHECKPOINT_FILE} after {where}"
                _checkpoint(run, index + 1)
                bar.update(chunk_steps(program.kind, program.n, thin))
                bar.set_postfix(draws=run.num_written, refresh=False)
        except KeyboardInterrupt:
            bar.close()
            print(
                f"\ninterrupted in chunk {index + 1}/{len(run.plan)}: {run.num_checkpointed} "
                f"draws are safe in {run.run_dir}; resume with resume=True (CLI: --resume).",
                file=sys.stderr,
            )
            raise
        finally:
            bar.close()
        doing = f"writing {GRADIENT_NOISE_FILE}"
        return _close(run)
    except OSError as e:
        if isinstance(e, RunDirectoryError):  # RunExistsError and ours say what they mean
            raise
        safe = run.num_checkpointed if run is not None else _checkpointed_draws(run_dir)
        raise _storage_error(e, run_dir, doing, safe, num_samples) from e
    finally:
        # On every way out (an error, Ctrl-C, a kill's SIGTERM turned into SystemExit).
        if lock is not None:
            lock.release()


#: What to do about an OSError, by errno (the rest: "fix the cause").
_STORAGE_HINTS = {
    errno.ENOSPC: "free some space",
    errno.EDQUOT: "free some space or raise the quota",
    errno.EACCES: "make the run directory and its files writable",
    errno.EPERM: "make the run directory and its files writable",
    errno.EROFS: "remount the file system read-write (or copy the run to a writable one)",
    errno.EFBIG: "raise the file size limit (ulimit -f)",
}


def _storage_error(
    e: OSError, run_dir: str, doing: str, num_safe: int, num_samples: int
) -> RunStorageError:
    """One line for an OSError of the run: what failed, while doing what, what is safe."""
    code = e.errno
    if code is None:  # h5py names the system error inside its message
        found = re.search(r"errno = (\d+)", str(e))
        code = int(found.group(1)) if found else None
    if e.strerror and code == e.errno:
        reason = e.strerror
    elif code is not None:
        reason = os.strerror(code)
    else:
        reason = " ".join(str(e).split())[:300] or type(e).__name__
    name = f" [{errno.errorcode[code]}]" if code in errno.errorcode else ""
    where = f" ({e.filename})" if e.filename else ""
    hint = _STORAGE_HINTS.get(code, "fix the cause") if code is not None else "fix the cause"
    err = RunStorageError(
        f"{run_dir}: {reason}{name} while {doing}{where}; {num_safe} of {num_samples} draws "
        f"are safe on disk (up to the last checkpoint). {hint[0].upper()}{hint[1:]}, then "
        "resume with resume=True.",
        num_safe,
    )
    err.errno, err.strerror, err.filename = code, reason, e.filename
    return err


def _checkpointed_draws(run_dir: str) -> int:
    """Draws the checkpoint on disk records (0 if there is none or it cannot be read)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return read_checkpoint(run_dir).num_written
    except (OSError, ValueError):
        return 0


def _lock_run_dir(run_dir: str, resume: bool) -> RunLock:
    """Takes the run directory's writer lock (``lock.py``), creating a new run's directory.

    A resume of a directory that does not exist is refused here, before anything is
    created in its place.
    """
    if resume and not os.path.isdir(run_dir):
        raise RunDirectoryError(f"{run_dir} does not exist: there is no run to resume.")
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise RunDirectoryError(f"`run_dir` {run_dir} is a file, not a directory.")
    os.makedirs(run_dir, exist_ok=True)
    return RunLock(run_dir).acquire()


def _report_gradient_noise(kernel: Any, state: Any, run_dir: str, run_seed: Any, step: int) -> None:
    """Writes the gradient-noise ratio at the last state; warns when it is too large.

    A run can look healthy (R-hat 1, large ESS, no divergence) and still be
    wrong because its minibatch noise swamps the injected noise; the ratio
    ``r = ε²Var(ĝ)/(2εT)`` ([`gradient_noise_ratio`][tfp_sgmcmc.diagnostics.gradient_noise_ratio])
    says so. Kernels it is not derived for are skipped.
    """
    from tfp_sgmcmc.diagnostics.gradient_noise import gradient_noise_ratio

    if getattr(kernel, "estimator", None) is None:
        return
    try:
        report = gradient_noise_ratio(
            kernel, state, seed=[int(x) for x in np.asarray(run_seed).ravel()[:2]], step=step
        )
    except ValueError:  # a non-finite state: the divergence warning already said so
        return
    if report is None:
        return
    _write_json(os.path.join(run_dir, GRADIENT_NOISE_FILE), report.to_dict())
    if report.violated:
        warnings.warn(report.message(), RuntimeWarning, stacklevel=4)


def _write_json(path: str, data: dict[str, Any], sort_keys: bool = False) -> None:
    """Writes ``data`` to ``path`` through a temporary file (removed if the write fails)."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, sort_keys=sort_keys)
        os.replace(tmp, path)
    finally:
        remove_quietly(tmp)


def _write_config(run_dir: str, config: dict[str, Any]) -> None:
    _write_json(os.path.join(run_dir, CONFIG_FILE), config, sort_keys=True)


def _reads_stream(kernel: Any, state: Any, kernel_results: Any) -> bool:
    """Whether a step of ``kernel`` reads a ``DatasetData`` (one traced step; nothing read)."""
    if not dataset_sources_exist():
        return False
    try:
        return bool(count_stream_draws(kernel, state, kernel_results))
    except Exception:  # a kernel that cannot be traced here: nothing to say
        return False


def _prepare_new_run_dir(run_dir: str, overwrite: bool) -> None:
    """Refuses an existing run (unless ``overwrite``) or a clash with the user's files.

    The directory exists and is locked (``_lock_run_dir``); ``run.lock`` is not one of
    the run's files, so ``overwrite`` never removes the lock it holds.
    """
    if not _holds_run(run_dir):
        # A directory of the user's own files (even one named like ours) is not a
        # run: those files are left alone, and only a name clash is refused.
        clash = [f for f in RUN_FILES if os.path.exists(os.path.join(run_dir, f))]
        if clash:
            raise RunDirectoryError(
                f"{run_dir} holds {', '.join(clash)}, which a run would write, but no run: "
                "choose another `run_dir`."
            )
        return
    present = [f for f in RUN_FILES if os.path.exists(os.path.join(run_dir, f))]
    if not overwrite:
        raise RunExistsError(
            f"{run_dir} already holds a run ({', '.join(present)}); pass resume=True to "
            "continue it or overwrite=True to replace it."
        )
    for f in present:
        os.remove(os.path.join(run_dir, f))


def _holds_run(run_dir: str) -> bool:
    """Whether ``run_dir`` holds a run of this driver (its checkpoint, its sample store
    or its config)."""
    if os.path.exists(os.path.join(run_dir, CHECKPOINT_FILE)):
        return True
    try:  # a store the driver made (it records the run's config)
        with h5py.File(os.path.join(run_dir, SAMPLES_FILE), "r") as f:
            if "config" in f.attrs:
                return True
    except Exception:  # noqa: BLE001  (absent, or damaged: h5py raises many kinds)
        pass
    try:
        with open(os.path.join(run_dir, CONFIG_FILE)) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "format_version" in config and "state_spec" in config


def _read_run_checkpoint(run_dir: str) -> Checkpoint:
    """The run's checkpoint; a missing or unreadable one is a `RunDirectoryError`."""
    try:
        return read_checkpoint(run_dir)
    except FileNotFoundError as e:
        raise RunDirectoryError(
            f"{run_dir} has no {CHECKPOINT_FILE}: not a run directory, or a corrupted one."
        ) from e
    except ValueError as e:
        raise RunDirectoryError(f"corrupted run directory: {e}") from e


def _load_for_resume(run_dir: str, config: dict[str, Any], store: SampleStore) -> Checkpoint:
    if not os.path.isdir(run_dir):
        raise RunDirectoryError(f"{run_dir} does not exist: there is no run to resume.")
    ckpt = _read_run_checkpoint(run_dir)
    if "run_id" in ckpt.config:  # the run keeps its ID (a run made before IDs has none)
        config["run_id"] = ckpt.config["run_id"]
    diff = _config_diff(ckpt.config, config)
    if diff:
        details = "; ".join(
            f"{k}: run has {ckpt.config.get(k)!r}, now {config.get(k)!r}" for k in diff
        )
        raise RunDirectoryError(f"{run_dir}: the run's configuration differs ({details}).")
    plan = _plan_of(config)
    expected = chunk_seed(config["seed"], plan.steps_before(ckpt.chunk_index))
    if not np.array_equal(expected, ckpt.next_seed):
        raise RunDirectoryError(
            f"{run_dir}: checkpoint seed does not match its chunk index (or the run was "
            "written under another seed rule, and cannot be continued by this version)."
        )
    specs = config["state_spec"]
    if len(ckpt.state) != len(specs) or any(
        x is None or [list(x.shape), x.dtype.name] != s for x, s in zip(ckpt.state, specs)
    ):
        raise RunDirectoryError(f"{run_dir}: checkpointed state does not match the run's spec.")
    _check_checkpoint(run_dir, ckpt)
    if not store.exists():
        if ckpt.num_written != 0:
            raise RunDirectoryError(
                f"{run_dir}: {SAMPLES_FILE} is missing but the checkpoint records "
                f"{ckpt.num_written} written draws."
            )
        part_specs = [(tuple(s[0]), s[1]) for s in specs]
        attrs = {"config": json.dumps(config, sort_keys=True)}
        if "run_id" in config:
            attrs["run_id"] = config["run_id"]
        store.create(
            part_specs,
            {k: (tuple(v[0]), v[1]) for k, v in config["trace"].items()},
            chunk_draws=min(config["chunk_size"], config["num_samples"]),
            attrs=attrs,
        )
    else:
        # Every recorded row is read (and checked) before anything is written: a damaged
        # or zero-length store is refused as it is, never appended to or rewritten.
        _verify_store(run_dir, store, ckpt, rows=True)
        ahead = store.num_draws() - ckpt.num_written
        if ahead > 0:
            # Either a stop between a chunk's append and its checkpoint, or this run's
            # checkpoint put back from an earlier copy: the same files, so the same cure.
            warnings.warn(
                f"resume: {SAMPLES_FILE} holds {ahead} draw(s) after the {ckpt.num_written} "
                f"that {CHECKPOINT_FILE} records (a chunk written after the last checkpoint: "
                "the run stopped between that chunk and its checkpoint, or the checkpoint "
                "was put back from an earlier copy of this run). They are cut and drawn "
                "again from the checkpointed chain, with the same seeds: no draw is lost "
                "or duplicated.",
                UserWarning,
                stacklevel=4,  # the caller of `sample`
            )
        store.truncate(ckpt.num_written)
    return ckpt


def _check_checkpoint(run_dir: str, ckpt: Checkpoint) -> None:
    """The checkpoint agrees with itself, with its run's plan and with ``config.json``.

    ``num_written`` must be what the chunks before ``chunk_index`` write, the chunk
    digests must cover exactly those chunks, and ``config.json`` (where readable) must
    name the same run. Cheap: no file but ``config.json`` is read.

    Raises:
      RunMismatchError: a count that was edited (even with the checkpoint's own digest
        recomputed), or a checkpoint of another run.
    """
    cfg = ckpt.config
    try:
        plan = _plan_of(cfg)
        names = _dataset_names(cfg)
    except (KeyError, TypeError, ValueError) as e:
        raise RunDirectoryError(
            f"corrupted run directory: the configuration in {CHECKPOINT_FILE} is incomplete "
            f"({type(e).__name__}: {e})."
        ) from e
    how = (
        "Nothing was written; put back this run's own checkpoint (from a copy), or start the "
        "run again (overwrite=True)."
    )
    if not 0 <= ckpt.chunk_index <= len(plan):
        raise RunMismatchError(
            f"{run_dir}: {CHECKPOINT_FILE} records chunk {ckpt.chunk_index} as next, but the "
            f"run's plan has {len(plan)} chunks. {how}",
            run_dir,
        )
    want = plan.draws_before(ckpt.chunk_index)
    if ckpt.num_written != want:
        raise RunMismatchError(
            f"{run_dir}: {CHECKPOINT_FILE} records {ckpt.num_written} draws written, but the "
            f"{ckpt.chunk_index} chunks it records as done write {want}: its count was "
            f"edited, or it does not belong to this run. {how}",
            run_dir,
        )
    run_id = cfg.get("run_id")
    if run_id is None:
        return  # a run made before IDs and digests: nothing more to compare
    done = max(0, ckpt.chunk_index - plan.num_burnin_chunks)
    digests = ckpt.chunk_digests
    if digests is None or digests.dtype != np.uint8 or digests.shape != (done, len(names), 32):
        found = "none" if digests is None else f"an array {list(digests.shape)}/{digests.dtype}"
        raise RunMismatchError(
            f"{run_dir}: {CHECKPOINT_FILE} records {done} chunks of draws, but holds {found} "
            f"for their digests (uint8 [{done}, {len(names)}, 32] expected). {how}",
            run_dir,
        )
    red = ckpt.reductions_digest
    if red is not None and (red.dtype != np.uint8 or red.shape != (32,)):
        raise RunMismatchError(
            f"{run_dir}: {CHECKPOINT_FILE} holds an array {list(red.shape)}/{red.dtype} for "
            f"the digest of the reductions (uint8 [32] expected). {how}",
            run_dir,
        )
    try:
        with open(os.path.join(run_dir, CONFIG_FILE)) as f:
            other = json.load(f).get("run_id")
    except (OSError, ValueError, AttributeError):
        return  # config.json is a copy for people to read; the checkpoint is the record
    if other != run_id:
        raise RunMismatchError(
            f"{run_dir}: {CHECKPOINT_FILE} belongs to run {run_id}, but {CONFIG_FILE} to run "
            f"{other}: a checkpoint (or config) copied in from another run. {how}",
            run_dir,
        )


def _check_store_identity(run_dir: str, store: SampleStore, ckpt: Checkpoint) -> None:
    """The store's attributes name the checkpoint's run and configuration.

    Raises:
      RunMismatchError: ``samples.h5`` of another run.
      StoreDamagedError: its recorded configuration is missing, unreadable or altered.
    """
    run_id = ckpt.config.get("run_id")
    if run_id is None:
        return
    attrs = store.attrs()
    other = attrs.get("run_id")
    other = other.decode() if isinstance(other, bytes) else other
    if other != run_id:
        raise RunMismatchError(
            f"{run_dir}: {SAMPLES_FILE} belongs to run {other or '(none recorded)'}, but "
            f"{CHECKPOINT_FILE} to run {run_id}: one of them was copied in from another run. "
            "Nothing was written; put back this run's own files, or start the run again "
            "(overwrite=True).",
            run_dir,
        )
    try:
        stored = json.loads(attrs["config"])
        diff = _config_diff(stored, ckpt.config) if isinstance(stored, dict) else ["config"]
    except (KeyError, TypeError, ValueError):
        diff = ["config"]
    if diff:
        raise StoreDamagedError(
            f"{store.path}: its recorded configuration differs from the checkpoint's "
            f"({', '.join(diff[:6])}): its HDF5 attributes were damaged or edited. It is left "
            "as it is; restore it from a copy or start the run again (overwrite=True).",
            store.path,
        )


def _verify_store(run_dir: str, store: SampleStore, ckpt: Checkpoint, rows: bool) -> None:
    """Checks ``samples.h5`` against the checkpoint: its structure (every dataset the run
    writes, and no other, with its shape, byte-exact dtype and chunking), its run ID and
    configuration and, with ``rows``, every recorded row's HDF5 checksum and every chunk's
    digest. A store written without checksums is read with a warning.

    Raises:
      StoreDamagedError: see ``SampleStore.check``, ``verify`` and ``verify_digests``.
      RunMismatchError: a store of another run, or more rows than the checkpoint allows.
    """
    cfg = ckpt.config
    part_specs = [(tuple(s[0]), s[1]) for s in cfg["state_spec"]]
    trace_specs = {k: (tuple(v[0]), v[1]) for k, v in cfg["trace"].items()}
    layout = store_layout(part_specs, trace_specs, min(cfg["chunk_size"], cfg["num_samples"]))
    plan = _plan_of(cfg)
    exact = "run_id" in cfg
    nxt = plan[ckpt.chunk_index] if ckpt.chunk_index < len(plan) else ("burnin", 0)
    max_draws = ckpt.num_written + (nxt[1] if nxt[0] == "sample" else 0)
    if not rows:
        # A later read of an open run: a live writer may be chunks ahead of the checkpoint
        # read at open (the bound was checked then).
        max_draws = None
    store.check(ckpt.num_written, part_specs, layout, max_draws, exact)
    _check_store_identity(run_dir, store, ckpt)
    if not rows:
        return
    checked = store.verify(ckpt.num_written, part_specs, layout, max_draws, exact)
    if exact:
        first = plan.num_burnin_chunks
        chunks = [
            (i, plan.draws_before(i), plan.draws_before(i + 1))
            for i in range(first, ckpt.chunk_index)
        ]
        store.verify_digests(cfg["run_id"], chunks, ckpt.chunk_digests, list(layout))
    if not checked:
        warnings.warn(
            f"{store.path} has no checksums (written by an earlier tfp-sgmcmc): damaged "
            "rows in it cannot be detected.",
            UserWarning,
            stacklevel=4,
        )


def _check_reductions(
    run_dir: str, store: SampleStore, ckpt: Checkpoint, reductions: Mapping[str, Any]
) -> None:
    """The reductions read from ``samples.h5`` are those the checkpoint records.

    Raises:
      RunMismatchError: the store holds a chunk of draws after the checkpoint, and the
        reductions are that chunk's.
      StoreDamagedError: otherwise different reductions (damaged or edited).
    """
    run_id = ckpt.config.get("run_id")
    if run_id is None or ckpt.reductions_digest is None:
        return  # a run made before the digest: nothing to compare
    done = max(0, ckpt.chunk_index - _plan_of(ckpt.config).num_burnin_chunks)
    if np.array_equal(reductions_digest(run_id, done, reductions), ckpt.reductions_digest):
        return
    if store.num_draws() > ckpt.num_written:
        raise RunMismatchError(
            f"{run_dir}: the reductions in {SAMPLES_FILE} summarize a chunk of draws written "
            f"after the last checkpoint, which records {ckpt.num_written} draws (the run "
            "stopped between that chunk and its checkpoint, or the checkpoint was put back "
            "from an earlier copy of this run). Resume the run (resume=True; CLI: --resume): "
            "it draws that chunk again and rewrites them.",
            run_dir,
        )
    raise StoreDamagedError(
        f"{store.path}: its /reductions are not the ones {CHECKPOINT_FILE} records after "
        f"{done} chunk(s) of draws of run {run_id}: damaged or edited, or left by a chunk "
        "after the checkpoint. Resume the run if it is not complete (the next chunk "
        "rewrites them); otherwise restore it from a copy or start the run again "
        "(overwrite=True).",
        store.path,
    )


def _repack(template: Any, leaves: list[Any], what: str, run_dir: str) -> Any:
    flat = tf.nest.flatten(template, expand_composites=True)
    if len(flat) != len(leaves):
        raise RunDirectoryError(
            f"{run_dir}: checkpointed {what} have {len(leaves)} leaves, expected {len(flat)}."
        )
    out = []
    for t, x in zip(flat, leaves):
        if (t is None) != (x is None):
            raise RunDirectoryError(f"{run_dir}: checkpointed {what} do not match the kernel.")
        if t is None:
            out.append(None)
            continue
        t = tf.convert_to_tensor(t)
        if list(x.shape) != t.shape.as_list() or x.dtype != t.dtype.as_numpy_dtype:
            raise RunDirectoryError(
                f"{run_dir}: checkpointed {what} leaf {list(x.shape)}/{x.dtype} does not match "
                f"{t.shape.as_list()}/{t.dtype.name}."
            )
        out.append(tf.constant(x))
    return tf.nest.pack_sequence_as(template, out, expand_composites=True)


class SamplingRun:
    """Read access to a run directory written by [`sample`][tfp_sgmcmc.driver.sampler.sample].

    The checkpoint's checksum is always checked. Every read of draws (``samples``,
    ``trace``) checks the HDF5 chunks it reads; ``verify=True`` reads every recorded
    row once up front (what [`open_run`][tfp_sgmcmc.driver.sampler.open_run] does).

    Args:
      run_dir: the run directory.
      verify: check the whole sample store now
        ([`verify`][tfp_sgmcmc.driver.sampler.SamplingRun.verify]). Default value:
        ``False``.

    Raises:
      RunDirectoryError: missing or unreadable checkpoint / samples file.
      StoreDamagedError: with ``verify``, a damaged, zero-length or short store.
    """

    def __init__(self, run_dir: str, verify: bool = False) -> None:
        self.run_dir = os.fspath(run_dir)
        if not os.path.isdir(self.run_dir):
            raise RunDirectoryError(f"{self.run_dir} does not exist.")
        self._ckpt = _read_run_checkpoint(self.run_dir)
        _check_checkpoint(self.run_dir, self._ckpt)
        self.store = SampleStore(os.path.join(self.run_dir, SAMPLES_FILE))
        if not self.store.exists() and self.num_written:
            raise RunDirectoryError(f"{self.run_dir}: {SAMPLES_FILE} is missing.")
        if verify:
            self.verify()

    def verify(self) -> None:
        """Reads every recorded draw and trace row once, checking its checksum.

        Raises:
          StoreDamagedError: rows that fail their checksums (named by dataset and row
            range), or a zero-length, non-HDF5, short or mismatching ``samples.h5``.
        """
        if not self.store.exists():
            return  # no draws recorded (checked in __init__)
        try:
            _verify_store(self.run_dir, self.store, self._ckpt, rows=True)
        except StoreDamagedError as e:
            raise _with_writer_note(e, self.run_dir) from None

    config = AttributeView[dict[str, Any]]("_ckpt.config")

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self.config.get("metadata", {}))

    num_written = AttributeView[int]("_ckpt.num_written")
    """Valid draws (rows beyond it, from an interrupted chunk, are ignored)."""

    @property
    def num_samples(self) -> int:
        return int(self.config["num_samples"])

    @property
    def complete(self) -> bool:
        return self.num_written >= self.num_samples and self._ckpt.chunk_index >= len(
            _plan_of(self.config)
        )

    @property
    def batch_shape(self) -> list[int]:
        """Chain (batch) dimensions of the state."""
        return list(self.config.get("batch_shape", []))

    def samples(self, step: int = 1) -> Any:
        """Draws ``[num_written, *batch, *event]`` (a list if the state was a list),
        every ``step``-th (an int >= 1)."""
        step = check_int(step, "step", 1)
        self._check_store()
        try:
            parts = self.store.read_samples(self.num_written, step)
        except StoreDamagedError as e:
            raise _with_writer_note(e, self.run_dir) from None
        except (OSError, KeyError) as e:
            raise RunDirectoryError(f"corrupted {self.store.path}: {e}") from e
        return parts if self.config["state_is_list"] else parts[0]

    def trace(self, step: int = 1) -> dict[str, np.ndarray]:
        """Traced diagnostics per draw (``target_log_prob``, ``step_size``, ``diverged``, ...),
        every ``step``-th draw (an int >= 1)."""
        step = check_int(step, "step", 1)
        self._check_store()
        try:
            return self.store.read_trace(self.num_written, step)
        except StoreDamagedError as e:
            raise _with_writer_note(e, self.run_dir) from None
        except (OSError, KeyError) as e:
            raise RunDirectoryError(f"corrupted {self.store.path}: {e}") from e

    def reductions(self) -> dict[str, list[np.ndarray]]:
        """Finalized reducer outputs (flat leaves) after the last checkpointed chunk.

        Raises:
          RunMismatchError: they summarize a chunk written after the last checkpoint (an
            interrupted run: resume it to redo that chunk).
          StoreDamagedError: they were damaged or edited.
        """
        self._check_store()
        try:
            out = self.store.read_reductions()
            _check_reductions(self.run_dir, self.store, self._ckpt, out)
        except StoreDamagedError as e:
            raise _with_writer_note(e, self.run_dir) from None
        return out

    @property
    def gradient_noise(self) -> dict[str, Any] | None:
        """The gradient-noise ratio at the last state (``None`` if not computed).

        ``too_noisy`` says whether the minibatch noise is too large for the kernel;
        ``threshold`` is ``None`` where the ratio is reported but not checked (SGNHT).
        Files of either format read the same; ``violated`` is kept as an alias of
        ``too_noisy`` for code that reads the earlier name.
        """
        path = os.path.join(self.run_dir, GRADIENT_NOISE_FILE)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return _gradient_noise_fields(json.load(f))

    def final_state(self) -> Any:
        """The chain state at the last checkpoint."""
        parts = list(self._ckpt.state)
        return parts if self.config["state_is_list"] else parts[0]

    def _check_store(self) -> None:
        """Before every read: the store's structure and identity against the checkpoint
        (cheap: no draws are read)."""
        if not self.store.exists():
            raise RunDirectoryError(f"{self.run_dir}: {SAMPLES_FILE} is missing.")
        try:
            _verify_store(self.run_dir, self.store, self._ckpt, rows=False)
        except StoreDamagedError as e:
            raise _with_writer_note(e, self.run_dir) from None

    def __repr__(self) -> str:
        return (
            f"SamplingRun({self.run_dir!r}, draws={self.num_written}/{self.num_samples}, "
            f"kernel={self.config['kernel']['class']})"
        )


def _gradient_noise_fields(report: dict[str, Any]) -> dict[str, Any]:
    """A ``gradient_noise.json`` of either format in the current one (plus the alias).

    The earlier format had two flags: ``flagged`` (the kernel's law needs ``r ≪ 1``) and
    ``violated`` (such a kernel's ``r`` was above the threshold); now ``too_noisy`` is the
    one flag and a null ``threshold`` says that nothing was checked.
    """
    out = dict(report)
    if "too_noisy" not in out:
        out["too_noisy"] = bool(out.get("violated", False))
        if out.pop("flagged", True) is False:
            out["threshold"] = None
    out["violated"] = out["too_noisy"]
    return out


def _with_writer_note(error: StoreDamagedError, run_dir: str) -> StoreDamagedError:
    """``error``, noting a live writer: a read can race its append (the file is closed
    between chunks only), so damage seen then may be a torn read."""
    pid = lock_holder(run_dir)
    if pid is None or pid == os.getpid():
        return error
    return StoreDamagedError(
        f"{error} (Process {pid} is writing this run: if this read raced one of its "
        "appends, reading again after the chunk gives the true state.)",
        error.path,
        error.damaged,
    )


def open_run(run_dir: str, verify: bool = True) -> SamplingRun:
    """Opens an existing run directory for reading (see
    [`SamplingRun`][tfp_sgmcmc.driver.sampler.SamplingRun]).

    Args:
      run_dir: the run directory.
      verify: read every recorded row once now, checking its checksum (its speed is
        in ``docs/driver.md#safety``); ``False`` reads the configuration and checkpoint
        only, and each later read checks what it reads. Default value: ``True``.

    Raises:
      RunDirectoryError: a missing run, an unreadable checkpoint or one that fails its
        checksum.
      StoreDamagedError: (``verify``) damaged rows, named by dataset and row range, or a
        zero-length, short or non-HDF5 ``samples.h5``.
    """
    return SamplingRun(run_dir, verify=verify)
