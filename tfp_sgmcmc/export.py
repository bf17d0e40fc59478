"""Export of SG-MCMC runs to ArviZ (``arviz.InferenceData``).

``to_arviz`` builds the standard groups from a run directory written by
[`tfp_sgmcmc.driver.sample`][tfp_sgmcmc.driver.sample] (or from arrays):

* ``posterior``: one variable per state part, dims ``(chain, draw, *event)``;
  the state's leading batch (chain) dimensions are flattened into ``chain``.
  For raw arrays the chain dimensions come from ``batch_ndims``, the final
  ``kernel_results`` or a traced ``target_log_prob``; an array ``[draws, k]``
  with none of them is refused (k chains or one k-vector?), never guessed;
* ``sample_stats``: ``lp`` (the **stochastic** minibatch log-density
  ``log π̃(θ_t)`` the sampler saw, not the exact log posterior), ``step_size``
  (the ε of each step, broadcast over chains), ``diverged`` (non-finite state,
  score or log-density) and any extra traced values;
* ``sgmcmc_diagnostics``: our own diagnostics: the ESS of every parameter from
  ``tfp.mcmc.effective_sample_size`` (multi-chain, ``cross_chain_dims``, when
  there are ≥ 2 chains), the finalized reducer outputs, and the scalars of
  ``tfp-sgmcmc diagnose`` (``diagnostics.json`` in the run directory: KSD,
  FSSD, ...), the latter also as attributes.

ArviZ is an optional dependency (``pip install tfp-sgmcmc[arviz]``), imported
only inside [`to_arviz`][tfp_sgmcmc.export.to_arviz]. Note that ArviZ's ``ess`` is the
rank-normalized
split-chain estimator of Vehtari et al. [1], ``tfp.mcmc.effective_sample_size``
the Geyer initial-positive-sequence estimator [2]: both estimate the same
quantity but differ by Monte Carlo error.

#### References

[1]: Aki Vehtari, Andrew Gelman, Daniel Simpson, Bob Carpenter and Paul-Christian
     Bürkner. Rank-normalization, folding, and localization: an improved R̂ for
     assessing convergence of MCMC. _Bayesian Analysis_, 16(2), 2021.
[2]: Charles J. Geyer. Practical Markov chain Monte Carlo. _Statistical
     Science_, 7(4), 1992.
[3]: Ravin Kumar, Colin Carroll, Ari Hartikainen and Osvaldo Martin. ArviZ a
     unified library for exploratory analysis of Bayesian models in Python.
     _JOSS_, 4(33), 2019.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tfp_sgmcmc.internal.quiet import quiet_real_part_cast as _quiet_real_part_cast
from tfp_sgmcmc.internal.util import check_int, results_field

__all__ = ["to_arviz", "DIAGNOSTICS_FILE", "chains_independent", "SHARED_MINIBATCH_NOTE"]

#: Written by ``tfp-sgmcmc diagnose`` in the run directory; read by
# [`to_arviz`][tfp_sgmcmc.export.to_arviz].
DIAGNOSTICS_FILE = "diagnostics.json"

_STAT_NAMES = {"target_log_prob": "lp"}

#: Why multi-chain diagnostics of chains that share minibatches mislead.
SHARED_MINIBATCH_NOTE = (
    "the chains shared each step's minibatch, so their gradient noise is correlated: "
    "cross-chain ESS, R-hat and between-chain variance overstate their independence. "
    "Sample with `MinibatchEstimator(..., independent_chains=True)` (the default of "
    "`tfp-sgmcmc sample` with >= 2 chains) to compare chains."
)


def chains_independent(run: Any) -> bool | None:
    """Whether a run's chains drew their own minibatches, as the run recorded it.

    ``True``: one minibatch per chain (or no minibatches at all); ``False``:
    the chains shared each step's minibatch; ``None``: not recorded (runs
    written before the driver recorded it, or by hand).

    Args:
      run: a [`SamplingRun`][tfp_sgmcmc.driver.SamplingRun] or a run directory.
    """
    from tfp_sgmcmc.driver.sampler import SamplingRun

    if isinstance(run, (str, os.PathLike)):
        run = SamplingRun(os.fspath(run))
    value = run.config.get("independent_chains", run.metadata.get("independent_chains"))
    return None if value is None else bool(value)


def _import_arviz() -> Any:
    try:
        import arviz
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "to_arviz needs ArviZ: install it with `pip install tfp-sgmcmc[arviz]` "
            "(or `pip install arviz`)."
        ) from e
    return arviz


def _to_chain_draw(x: np.ndarray, batch_ndims: int, name: str) -> np.ndarray:
    """``[draws, *batch, *event]`` -> ``[chains, draws, *event]`` (batch flattened)."""
    x = np.asarray(x)
    if x.ndim < 1 + batch_ndims:
        raise ValueError(
            f"`{name}` has shape {x.shape}: fewer than 1 + {batch_ndims} (draw + chain) dims."
        )
    draws = x.shape[0]
    chains = int(np.prod(x.shape[1 : 1 + batch_ndims], dtype=np.int64))
    y = x.reshape((draws, chains) + x.shape[1 + batch_ndims :])
    return np.moveaxis(y, 1, 0)


def _stat(x: np.ndarray, batch_shape: Sequence[int], name: str) -> np.ndarray:
    """A per-draw statistic: broadcast ``[draws]`` over chains, else as samples."""
    x = np.asarray(x)
    nb = len(batch_shape)
    chains = int(np.prod(batch_shape, dtype=np.int64))
    if x.ndim == 1 or tuple(x.shape[1 : 1 + nb]) != tuple(batch_shape):
        # Same value for every chain (e.g. a scalar step size per step).
        x = x.reshape((x.shape[0], 1) + x.shape[1:])
        return np.broadcast_to(np.moveaxis(x, 1, 0), (chains,) + x.shape[:1] + x.shape[2:])
    return _to_chain_draw(x, nb, name)


def _raw_batch_ndims(
    parts: list[np.ndarray],
    trace: Mapping[str, Any],
    kernel_results: Any,
    batch_ndims: int | None,
) -> int:
    """The number of chain dimensions of raw samples, inferred or checked; never guessed."""
    inferred: dict[str, int] = {}
    if kernel_results is not None:
        tlp = results_field(kernel_results, "target_log_prob")
        if tlp is None:
            raise ValueError("`kernel_results` has no `target_log_prob` to read the chains from.")
        inferred["kernel_results"] = int(np.ndim(tlp))
    if trace.get("target_log_prob") is not None:
        inferred['trace["target_log_prob"]'] = max(int(np.ndim(trace["target_log_prob"])) - 1, 0)
    if batch_ndims is not None:
        if not isinstance(batch_ndims, int) or isinstance(batch_ndims, bool) or batch_ndims < 0:
            raise ValueError(f"`batch_ndims` must be an int >= 0, got {batch_ndims!r}.")
        inferred["batch_ndims"] = batch_ndims
    if len(set(inferred.values())) > 1:
        said = ", ".join(f"{k} says {v}" for k, v in inferred.items())
        raise ValueError(f"the chain dimensions of the samples disagree: {said}.")
    if inferred:
        return next(iter(inferred.values()))
    if all(p.ndim == 1 for p in parts):
        return 0  # [draws]: one chain of a scalar, nothing else it could be
    shapes = [p.shape for p in parts]
    raise ValueError(
        f"cannot tell the chains from the samples' shapes {shapes}: [draws, k, ...] may be k "
        "chains or one chain of a k-vector. Pass `batch_ndims` (1 for [draws, chains, "
        "*event], 0 for one chain), or `kernel_results` / `trace={'target_log_prob': ...}` "
        "from the run."
    )


def _raw_parts(raw: Any) -> list[np.ndarray]:
    """Raw samples as a list of numeric arrays with a draw axis, or a ValueError."""
    items = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    if not items:
        raise ValueError("`run_or_samples` is an empty list: give at least one array.")
    parts = []
    for i, p in enumerate(items):
        a = np.asarray(p)
        if a.dtype.kind not in "fiub" or a.ndim == 0:
            what = "`run_or_samples`" if len(items) == 1 else f"`run_or_samples[{i}]`"
            raise ValueError(
                f"{what} must be a numeric array [draws, ...] (or a run or run directory), "
                f"got {type(p).__name__}"
                + (f" of dtype {a.dtype}" if a.dtype.kind not in "fiub" else " (a scalar)")
                + "."
            )
        parts.append(a)
    return parts


def _check_raw_shapes(
    parts: list[np.ndarray], trace: Mapping[str, Any], kernel_results: Any, batch_ndims: int
) -> list[int]:
    """The chains' batch shape; every part and traced value must agree on it."""
    lead = 1 + batch_ndims
    for i, p in enumerate(parts):
        if p.ndim < lead:
            raise ValueError(
                f"`batch_ndims` = {batch_ndims} needs samples of rank >= {lead} "
                f"([draws, *chains, ...]); part {i} has shape {list(p.shape)}."
            )
    want = list(parts[0].shape[:lead])
    for i, p in enumerate(parts[1:], 1):
        if list(p.shape[:lead]) != want:
            raise ValueError(
                f"the parts of `run_or_samples` disagree on [draws, *chains]: part 0 has "
                f"{want}, part {i} has {list(p.shape[:lead])}."
            )
    for k, v in trace.items():
        shape = list(np.shape(v))
        # Every traced value has one entry per draw; the log density one per chain as
        # well (others, like a step size, may be shared by the chains).
        per_chain = k == "target_log_prob"
        if (shape[:lead] if per_chain else shape[:1]) != (want if per_chain else want[:1]):
            needs = "one value per draw and chain" if per_chain else "one entry per draw"
            raise ValueError(
                f"`trace[{k!r}]` has shape {shape}, but the samples' [draws, *chains] are "
                f"{want}: it needs {needs}."
            )
    if kernel_results is not None:
        tlp = np.shape(results_field(kernel_results, "target_log_prob"))
        if list(tlp) != want[1:]:
            raise ValueError(
                f"`kernel_results.target_log_prob` has shape {list(tlp)}, but the samples "
                f"have {want[1:]} chains."
            )
    return want[1:]


def _var_names(n: int, names: Sequence[str] | None) -> list[str]:
    if names is not None:
        names = list(names)
        if len(names) != n or len(set(names)) != n:
            raise ValueError(f"`var_names` must hold {n} distinct names, got {names!r}.")
        return names
    return ["theta"] if n == 1 else [f"theta_{i}" for i in range(n)]


def to_arviz(
    run_or_samples: Any,
    trace: Mapping[str, np.ndarray] | None = None,
    var_names: Sequence[str] | None = None,
    batch_ndims: int | None = None,
    diagnostics: Mapping[str, Any] | None = None,
    burn: int = 0,
    step: int = 1,
    include_ess: bool = True,
    kernel_results: Any = None,
    independent_chains: bool | None = None,
) -> Any:
    """An ``arviz.InferenceData`` of a run (see the module docstring for the groups).

    Args:
      run_or_samples: a [`SamplingRun`][tfp_sgmcmc.driver.SamplingRun], a run directory
        path, or samples: an array ``[draws, *batch, *event]`` or a list of them.
      trace: for raw samples, per-draw traced values (``target_log_prob``,
        ``step_size``, ``diverged``, ...). Ignored for a run (read from it).
        Default value: ``None``.
      var_names: names of the state parts. Default value: ``None`` (the run's
        ``metadata["param_names"]`` if any, else ``theta`` / ``theta_i``).
      batch_ndims: leading chain dimensions of the samples (raw samples only).
        Default value: ``None``: a run's stored batch shape; for raw samples
        the rank of ``kernel_results.target_log_prob`` (one value per chain),
        else of ``trace["target_log_prob"]`` minus one (one per draw and
        chain), else ``0`` when every part is ``[draws]``. Raw samples with
        more dimensions and nothing to infer the chains from are refused:
        ``[draws, 4]`` may be 4 chains of a scalar or one chain of a 4-vector.
      diagnostics: extra scalar diagnostics to attach. Default value: ``None``
        (a run directory's ``diagnostics.json`` if present).
      burn: leading draws to drop. Default value: ``0``.
      step: keep every ``step``-th draw. Default value: ``1``.
      include_ess: add ``tfp.mcmc.effective_sample_size`` per parameter to
        the ``sgmcmc_diagnostics`` group. Default value: ``True``.
      kernel_results: for raw samples, the kernel results of the *final* step
        (``sample_chain(..., return_final_kernel_results=True)`` or
        ``bootstrap_results``): their ``target_log_prob`` has the chains'
        batch shape. Default value: ``None``.
      independent_chains: whether the chains drew their own minibatches,
        stored as the ``posterior`` attribute ``independent_chains`` (1/0).
        Default value: ``None``: a run's own record (see
        [`chains_independent`][tfp_sgmcmc.export.chains_independent]); for raw
        samples, not recorded. Several chains that shared minibatches give
        a warning: their cross-chain diagnostics overstate independence.

    Returns:
      ``arviz.InferenceData`` with ``posterior``, ``sample_stats`` and
      ``sgmcmc_diagnostics`` groups.

    Raises:
      ValueError: bad shapes, ``burn``/``step``, or ``var_names``; raw samples
        whose chain dimensions are ambiguous (pass ``batch_ndims``), or a
        ``batch_ndims`` that contradicts ``trace``/``kernel_results``; raw
        parts, traced values or ``kernel_results`` that disagree on the number
        of draws or chains.

    A part with non-finite draws (a diverged chain) gets a NaN effective
    sample size, with a warning; the ``diverged`` statistic says where.
      ImportError: ArviZ is not installed.
    """
    burn = check_int(burn, "burn", 0)
    step = check_int(step, "step", 1)
    # local: keeps export importable alone
    from tfp_sgmcmc.driver.errors import RunMismatchError
    from tfp_sgmcmc.driver.sampler import SamplingRun

    reductions: dict[str, list[np.ndarray]] = {}
    attrs: dict[str, Any] = {"created_by": "tfp_sgmcmc"}
    if isinstance(run_or_samples, (str, os.PathLike)):
        run_or_samples = SamplingRun(os.fspath(run_or_samples))
    if isinstance(run_or_samples, SamplingRun):
        run = run_or_samples
        samples = run.samples()
        parts = list(samples) if isinstance(samples, list) else [samples]
        trace = run.trace()
        batch_shape = run.batch_shape
        try:
            reductions = run.reductions()
        except RunMismatchError as e:
            # An interrupted run: its draws up to the checkpoint are sound, its
            # reductions are a later chunk's. The draws are exported without them.
            warnings.warn(f"to_arviz: reductions left out: {e}", UserWarning, stacklevel=2)
        if var_names is None:
            var_names = run.metadata.get("param_names")
        if diagnostics is None:
            path = os.path.join(run.run_dir, DIAGNOSTICS_FILE)
            if os.path.exists(path):
                with open(path) as f:
                    diagnostics = json.load(f)
        cfg = run.config
        attrs.update(
            kernel=cfg["kernel"]["class"],
            thin=cfg["thin"],
            seed=str(cfg["seed"]),
            num_burnin_steps=cfg["num_burnin_steps"],
            run_dir=os.path.abspath(run.run_dir),
        )
        if independent_chains is None:
            independent_chains = chains_independent(run)
    else:
        parts = _raw_parts(run_or_samples)
        trace = dict(trace or {})
        batch_ndims = _raw_batch_ndims(parts, trace, kernel_results, batch_ndims)
        batch_shape = _check_raw_shapes(parts, trace, kernel_results, batch_ndims)
    if independent_chains is not None:
        # (netCDF attributes cannot hold booleans.)
        attrs["independent_chains"] = int(bool(independent_chains))
        if not independent_chains and int(np.prod(batch_shape, dtype=np.int64)) >= 2:
            warnings.warn(f"to_arviz: {SHARED_MINIBATCH_NOTE}", UserWarning, stacklevel=2)
    az = _import_arviz()
    import xarray as xr

    names = _var_names(len(parts), var_names)
    sl = slice(burn, None, step)
    posterior = {nm: _to_chain_draw(p[sl], len(batch_shape), nm) for nm, p in zip(names, parts)}
    stats = {
        _STAT_NAMES.get(k, k): _stat(np.asarray(v)[sl], batch_shape, k) for k, v in trace.items()
    }
    if "diverged" in stats:
        stats["diverged"] = stats["diverged"].astype(bool)
    idata = az.from_dict(posterior=posterior, sample_stats=stats or None)

    diag_vars: dict[str, Any] = {}
    skipped_ess: list[str] = []
    if include_ess:
        from tfp_sgmcmc.diagnostics import effective_sample_size

        for nm, x in posterior.items():
            draws_first = np.moveaxis(x, 0, 1)  # [draws, chains, *event]
            if draws_first.shape[0] < 2:
                continue
            if not np.all(np.isfinite(draws_first)):
                # A diverged chain's draws have no autocorrelation to estimate: the
                # part's ESS is NaN (the run still exports, `diverged` says where).
                ess = np.full(draws_first.shape[2:], np.nan)
                skipped_ess.append(nm)
            elif draws_first.shape[1] >= 2:
                # The wrapper works on a list of parts: per-part arguments are lists.
                with _quiet_real_part_cast():
                    ess = np.asarray(effective_sample_size(draws_first, cross_chain_dims=[1]))
            else:
                with _quiet_real_part_cast():
                    ess = np.asarray(effective_sample_size(draws_first[:, 0]))
            dims = [f"{nm}_dim_{i}" for i in range(ess.ndim)]
            diag_vars[f"{nm}_ess"] = (dims, ess)
    for name, leaves in reductions.items():
        for j, leaf in enumerate(leaves):
            leaf = np.asarray(leaf)
            key = name if len(leaves) == 1 else f"{name}_{j}"
            diag_vars[f"reducer_{key}"] = (
                [f"reducer_{key}_dim_{i}" for i in range(leaf.ndim)],
                leaf,
            )
    if skipped_ess:
        warnings.warn(
            f"to_arviz: {', '.join(skipped_ess)} hold non-finite draws (diverged chains); "
            "their effective sample size is NaN.",
            UserWarning,
            stacklevel=2,
        )
    diag_attrs = {}
    for k, v in (diagnostics or {}).items():
        if isinstance(v, (bool, np.bool_)):  # netCDF attributes cannot hold booleans
            diag_attrs[k] = int(v)
        elif isinstance(v, (int, float, str)):
            diag_attrs[k] = v
    for k, v in diag_attrs.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            diag_vars[k] = ((), np.asarray(v, np.float64))
    idata.add_groups({"sgmcmc_diagnostics": xr.Dataset(diag_vars, attrs=diag_attrs)})
    idata.posterior.attrs.update(attrs)
    idata.posterior.attrs.update({f"diagnostic_{k}": v for k, v in diag_attrs.items()})
    return idata
