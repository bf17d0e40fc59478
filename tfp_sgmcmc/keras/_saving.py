"""A fitted ``BayesianModel`` kept as a directory, and read back by a new process.

A saved model (format version 1) is a directory of three files:

```none
bayesian_model.json   the manifest: {"format": "tfp_sgmcmc.keras.BayesianModel",
                      "format_version": 1, ...}, the likelihood, the constructor's
                      settings and what fit measured and chose
model.keras           the Keras model, architecture and weights, in Keras's own
                      format (keras.saving.load_model reads it)
samples.h5            the draws as fit(run_dir=...) writes them: samples/<i>, one
                      dataset [S, *shape] per trainable weight (then log σ for a
                      learned Gaussian noise); statistics/<j>, the model's
                      non-trainable variables (BatchNormalization's moving
                      statistics), fixed while sampling and used by every draw
```

The manifest is written last and removed first, so a directory whose saving was cut
short has none, and is refused rather than read half-written.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import h5py
import keras
import numpy as np

from tfp_sgmcmc.driver.store import SAMPLES_FILE, SampleStore
from tfp_sgmcmc.keras._errors import KerasSaveError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "MODEL_FILE",
    "STORE_WRITER",
    "SavedModel",
    "draw_store",
    "likelihood_entry",
    "prepare_directory",
    "read_draws",
    "read_saved",
    "write_draws",
    "write_manifest",
    "write_statistics",
]

MANIFEST_FILE = "bayesian_model.json"
MODEL_FILE = "model.keras"
FORMAT = "tfp_sgmcmc.keras.BayesianModel"
FORMAT_VERSION = 1
#: The ``writer`` attribute of the ``samples.h5`` that ``fit`` and ``save`` write.
STORE_WRITER = "tfp_sgmcmc.keras.BayesianModel"
_BUILT_IN = ("categorical", "bernoulli", "gaussian")


def likelihood_entry(likelihood: Any) -> str | dict[str, str]:
    """The manifest's entry for ``likelihood``: a built-in name, or the name a callable
    is registered under with ``keras.saving.register_keras_serializable`` (looked up
    again by ``load``); a ``KerasSaveError`` for a callable that is not registered."""
    if isinstance(likelihood, str):
        return likelihood
    name = keras.saving.get_registered_name(likelihood)
    if keras.saving.get_registered_object(name) is not likelihood:
        label = getattr(likelihood, "__name__", type(likelihood).__name__)
        raise KerasSaveError(
            f"the likelihood {label!r} is a callable that cannot be saved by name: register "
            "it with Keras, as for a custom layer (define it as a named function decorated "
            "with `@keras.saving.register_keras_serializable()`), so that `save` stores its "
            "registered name and `BayesianModel.load` finds it again in a process that "
            "defines it; or use a built-in likelihood."
        )
    return {"registered": name}


def _check_writer(path: str, what: str) -> None:
    """A ``samples.h5`` at ``path`` that ``BayesianModel`` did not write is refused."""
    if not os.path.exists(path):
        return
    try:
        with h5py.File(path, "r") as f:
            writer = f.attrs.get("writer")
    except OSError:
        writer = None
    if isinstance(writer, bytes):
        writer = writer.decode("ascii", "replace")
    if writer != STORE_WRITER:
        raise KerasSaveError(
            f"{what} holds a {SAMPLES_FILE} that BayesianModel did not write (a driver "
            "run?): pass another directory."
        )


def draw_store(run_dir: Any) -> SampleStore | None:
    """The sample store ``fit`` writes the draws to in ``run_dir`` (``None``: in memory).
    A manifest left by an earlier fit is removed: the directory is not a saved model
    again until this fit has written its draws."""
    if run_dir is None:
        return None
    if not isinstance(run_dir, (str, os.PathLike)):
        raise ValueError(f"`run_dir` must be a path, got {type(run_dir).__name__}.")
    run_dir = os.fspath(run_dir)
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise ValueError(f"`run_dir` = {run_dir!r} is a file, not a directory.")
    path = os.path.join(run_dir, SAMPLES_FILE)
    _check_writer(path, f"`run_dir` = {run_dir!r}")
    os.makedirs(run_dir, exist_ok=True)
    manifest = os.path.join(run_dir, MANIFEST_FILE)
    if os.path.exists(manifest):
        os.remove(manifest)
    return SampleStore(path)


def prepare_directory(path: Any) -> str:
    """``path`` as a directory to save into: created if missing; a file, or a directory
    with a ``samples.h5`` that ``BayesianModel`` did not write, is refused. The old
    manifest (a model saved there before) is removed first."""
    if not isinstance(path, (str, os.PathLike)):
        raise KerasSaveError(f"`path` must be a directory path, got {type(path).__name__}.")
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise KerasSaveError(
            f"`path` = {path!r} is a file: a BayesianModel is saved as a directory "
            f"({MANIFEST_FILE}, {MODEL_FILE}, {SAMPLES_FILE}); pass a directory path."
        )
    _check_writer(os.path.join(path, SAMPLES_FILE), f"`path` = {path!r}")
    os.makedirs(path, exist_ok=True)
    manifest = os.path.join(path, MANIFEST_FILE)
    if os.path.exists(manifest):
        os.remove(manifest)
    return path


def write_draws(
    directory: str, chunks: Any, shapes: list[tuple[int, ...]], dtype: np.dtype
) -> None:
    """The draws (flat ``[c, D]`` chunks) into ``directory/samples.h5``, one dataset per
    part, in the layout of ``fit``'s run directory."""
    store = SampleStore(os.path.join(directory, SAMPLES_FILE))
    store.create(
        [(sh, np.dtype(dtype).name) for sh in shapes],
        {},
        chunk_draws=16,
        attrs={"writer": STORE_WRITER},
    )
    sizes = [int(np.prod(sh)) for sh in shapes]
    for chunk in chunks:
        chunk = np.asarray(chunk)
        pieces = np.split(chunk, np.cumsum(sizes)[:-1], axis=1)
        store.append([p.reshape((chunk.shape[0], *sh)) for p, sh in zip(pieces, shapes)], {})


def write_statistics(directory: str, statistics: list[Any]) -> None:
    """The non-trainable variables every draw predicts with, as ``statistics/<j>`` in
    ``directory/samples.h5`` (replacing any there)."""
    with h5py.File(os.path.join(directory, SAMPLES_FILE), "r+") as f:
        if "statistics" in f:
            del f["statistics"]
        g = f.create_group("statistics")
        for j, value in enumerate(statistics):
            g.create_dataset(str(j), data=np.asarray(value))
        f.flush()


def write_manifest(directory: str, manifest: dict[str, Any]) -> None:
    """The manifest, written to a temporary file and renamed into place."""
    path = os.path.join(directory, MANIFEST_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"format": FORMAT, "format_version": FORMAT_VERSION, **manifest}, f, indent=1)
    os.replace(tmp, path)


@dataclass
class SavedModel:
    """A saved directory read back: its manifest, the Keras model, the likelihood, the
    fixed non-trainable variables and the number of draws stored."""

    directory: str
    manifest: dict[str, Any]
    model: Any
    likelihood: Any
    statistics: list[np.ndarray]
    num_stored: int


def _damaged(path: str, what: str) -> KerasSaveError:
    return KerasSaveError(
        f"{path!r} is not a readable saved BayesianModel: {what}. Save the model again "
        "with `bayes.save(path)` (or rerun `fit(..., run_dir=path)`)."
    )


def _read_manifest(path: str) -> dict[str, Any]:
    file = os.path.join(path, MANIFEST_FILE)
    if not os.path.isdir(path):
        raise KerasSaveError(
            f"no saved BayesianModel at {path!r}: "
            + ("it is a file; " if os.path.exists(path) else "it does not exist; ")
            + "`BayesianModel.load` reads the directory that `bayes.save(path)` or "
            "`fit(..., run_dir=path)` wrote."
        )
    if not os.path.exists(file):
        raise KerasSaveError(
            f"no saved BayesianModel at {path!r}: it has no {MANIFEST_FILE} (a directory "
            "that `bayes.save` did not finish, or a run directory whose fit did not end); "
            "save the model again with `bayes.save(path)`."
        )
    try:
        with open(file, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _damaged(path, f"its {MANIFEST_FILE} cannot be read ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _damaged(path, f"its {MANIFEST_FILE} is not a BayesianModel manifest")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise KerasSaveError(
            f"{path!r} holds a BayesianModel saved in format version {version!r}; this "
            f"version of tfp_sgmcmc reads format version {FORMAT_VERSION}: load it with "
            "the version of tfp_sgmcmc that saved it."
        )
    for key in ("likelihood", "settings", "fit"):
        if key not in manifest:
            raise _damaged(path, f"its {MANIFEST_FILE} has no {key!r} entry")
    return manifest


def _likelihood(path: str, entry: Any) -> Any:
    if isinstance(entry, str) and entry in _BUILT_IN:
        return entry
    if isinstance(entry, dict) and isinstance(entry.get("registered"), str):
        found = keras.saving.get_registered_object(entry["registered"])
        if found is None:
            raise KerasSaveError(
                f"{path!r} was saved with the likelihood registered as "
                f"{entry['registered']!r}, which this process has not registered: import or "
                "define it (with `@keras.saving.register_keras_serializable()`) before "
                "`BayesianModel.load`."
            )
        return found
    raise _damaged(path, f"its likelihood entry {entry!r} is unknown")


def read_saved(path: Any) -> SavedModel:
    """The saved directory at ``path``, checked and read (the draws stay on disk).

    Raises:
      KerasSaveError: no such directory, no manifest, a damaged file, an unknown format
        version, a likelihood this process has not registered.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise KerasSaveError(f"`path` must be a directory path, got {type(path).__name__}.")
    path = os.fspath(path)
    manifest = _read_manifest(path)
    likelihood = _likelihood(path, manifest["likelihood"])
    model_file = os.path.join(path, MODEL_FILE)
    if not os.path.exists(model_file):
        raise _damaged(path, f"its {MODEL_FILE} is missing")
    try:
        model = keras.saving.load_model(model_file, compile=False)
    except Exception as e:  # Keras's own errors (a damaged zip, an unknown custom layer)
        raise _damaged(path, f"Keras cannot load its {MODEL_FILE} ({type(e).__name__}: {e})") from e
    fit = manifest["fit"]
    try:
        shapes = [tuple(int(d) for d in sh) for sh in fit["shapes"]]
        num_kept = int(fit["num_kept"])
    except (KeyError, TypeError, ValueError):
        raise _damaged(path, f"its {MANIFEST_FILE} lacks the draws' shapes") from None
    samples = os.path.join(path, SAMPLES_FILE)
    if not os.path.exists(samples):
        raise _damaged(path, f"its {SAMPLES_FILE} (the draws) is missing")
    try:
        with h5py.File(samples, "r") as f:
            parts = [f["samples"][str(i)] for i in range(len(shapes))]
            stored = min(ds.shape[0] for ds in parts)
            if any(ds.shape[1:] != sh for ds, sh in zip(parts, shapes)):
                raise _damaged(path, f"the draws in {SAMPLES_FILE} do not have the saved shapes")
            group = f.get("statistics")
            statistics = [group[str(j)][()] for j in range(len(group))] if group else []
    except (OSError, KeyError, ValueError) as e:
        if isinstance(e, KerasSaveError):
            raise
        raise _damaged(path, f"its {SAMPLES_FILE} cannot be read ({e})") from None
    if stored < num_kept:
        raise _damaged(path, f"{SAMPLES_FILE} holds {stored} draws, the manifest {num_kept}")
    weights = [tuple(v.shape) for v in model.trainable_variables]
    if weights != shapes[: len(weights)]:
        raise _damaged(path, f"{MODEL_FILE}'s weights do not have the draws' shapes")
    if len(statistics) != len(model.non_trainable_variables):
        raise _damaged(
            path,
            f"{SAMPLES_FILE} holds {len(statistics)} fixed statistics for the model's "
            f"{len(model.non_trainable_variables)} non-trainable variables",
        )
    return SavedModel(path, manifest, model, likelihood, statistics, stored)


def read_draws(directory: str, shapes: list[tuple[int, ...]], num: int) -> np.ndarray:
    """The first ``num`` draws of ``directory/samples.h5`` as flat vectors ``[num, D]``."""
    with h5py.File(os.path.join(directory, SAMPLES_FILE), "r") as f:
        parts = [f["samples"][str(i)][:num] for i in range(len(shapes))]
    return np.concatenate([p.reshape(num, -1) for p in parts], axis=1)
