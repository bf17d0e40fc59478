"""The model-file protocol of the ``tfp-sgmcmc`` command-line tool.

A *model file* is a Python file with a function (default name ``build``) that
takes keyword arguments (all optional) and returns a
[`ModelSpec`][tfp_sgmcmc.driver.model.ModelSpec]::

    # my_model.py
    import numpy as np, tensorflow as tf
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.driver import ModelSpec

    def build(batch_size=100, num_chains=4):
        x = np.random.default_rng(0).normal(1.0, 1.0, size=(10_000, 1)).astype("float32")
        def loglik(theta, batch):  # a def: AutoGraph cannot convert every lambda
            return -0.5 * tf.reduce_sum((tf.expand_dims(theta, -2) - batch) ** 2, -1)
        ...
        return ModelSpec(estimator=est, init_state=tf.zeros([num_chains, 1]))

``--model my_model.py:build`` (or just ``my_model.py``) selects it and
``--model-arg batch_size=500`` passes keyword arguments (Python literals). A
bare name (``--model logistic_regression``) selects a model of the repository's
``tfp_sgmcmc.models`` package: its module's ``build`` if it has one, else a builder
defined here. Returning a pair ``(estimator, init_state)`` is accepted too.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.estimators.base import GradientEstimator

__all__ = [
    "ModelSpec",
    "ModelError",
    "load_model",
    "resolve_build",
    "parse_model_args",
    "BUILTIN_MODELS",
]


class ModelError(ValueError):
    """The model cannot be found, loaded or built."""


@dataclass
class ModelSpec:
    """What a model file's ``build`` returns.

    Attributes:
      estimator: the [`GradientEstimator`][tfp_sgmcmc.GradientEstimator] (owns the data; its
        ``full_log_prob_and_gradient`` gives the full-data scores used by
        ``tfp-sgmcmc diagnose``).
      init_state: initial state (tensor or list of parts; leading dimensions are
        independent chains).
      name: display name. Default value: ``"model"``.
      param_names: optional names of the state parts (ArviZ variable names).
        Default value: ``None`` (``theta`` or ``theta_0``, ``theta_1``, ...).
      info: free-form JSON-serializable details. Default value: ``{}``.
    """

    estimator: GradientEstimator
    init_state: Any
    name: str = "model"
    param_names: list[str] | None = None
    info: dict[str, Any] = field(default_factory=dict)


def parse_model_args(items: list[str] | None) -> dict[str, Any]:
    """``["a=1", "b='x'", "c=foo"]`` -> ``{"a": 1, "b": "x", "c": "foo"}``."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ModelError(f"`--model-arg` must look like name=value, got {item!r}.")
        try:
            out[key.strip()] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key.strip()] = value  # a bare word is a string
    return out


def _build_logistic_regression(
    num_examples: int = 100_000,
    num_features: int = 10,
    batch_size: int = 1000,
    num_chains: int = 1,
    seed: int = 42,
    dtype: str = "float32",
) -> ModelSpec:
    """The MAMBA paper's logistic regression (``tfp_sgmcmc/models/logistic_regression.py``)."""
    from tfp_sgmcmc.models.logistic_regression import logistic_regression

    problem = logistic_regression(
        num_examples=int(num_examples),
        num_features=int(num_features),
        seed=int(seed),
        dtype=np.dtype(dtype).type,
    )
    return ModelSpec(
        # Chains of one run are compared (R-hat, ESS): one minibatch per chain.
        estimator=problem.estimator(int(batch_size), independent_chains=int(num_chains) > 1),
        init_state=tf.zeros([int(num_chains), problem.num_features], dtype),
        name="logistic_regression",
        param_names=["theta"],
        info={"num_train": problem.num_train, "batch_size": int(batch_size)},
    )


def _as_bool(value: Any, name: str) -> bool:
    """``True``/``False`` from a Python bool or the words true/false/1/0 (CLI model args)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise ModelError(f"model argument `{name}` must be true or false, got {value!r}.")


def _check_chains(num_chains: Any) -> None:
    if int(num_chains) < 1:
        raise ModelError(f"model argument `num_chains` must be >= 1, got {num_chains!r}.")


def _tile_chains(parts: list[tf.Tensor], num_chains: int) -> list[tf.Tensor]:
    _check_chains(num_chains)
    if int(num_chains) == 1:
        return parts
    return [tf.tile(p[None], [int(num_chains)] + [1] * p.shape.rank) for p in parts]


def _data_source(
    model: str, arg: str, what: str, source: Any, synthetic: Any, num_chains: Any
) -> tuple[str | None, bool]:
    """``(source path or None, synthetic)`` of a model that reads a file or builds a
    stand-in: exactly one of the two (no silent fallback); also checks ``num_chains``."""
    synthetic = _as_bool(synthetic, "synthetic")
    _check_chains(num_chains)
    if source is None and not synthetic:
        raise ModelError(
            f"model {model} needs `--model-arg {arg}` ({what}) "
            "or `--model-arg synthetic=true` for the offline stand-in."
        )
    return (None if synthetic else str(source)), synthetic


def _batch_size(problem: Any, batch_size: Any, batch_fraction: Any) -> int:
    if batch_size is not None:
        return int(batch_size)
    return problem.batch_size_from_fraction(float(batch_fraction))


def _build_pmf(
    ratings: str | None = None,
    synthetic: Any = False,
    batch_size: int | None = None,
    batch_fraction: float = 0.01,
    num_chains: int = 1,
    latent_dim: int = 20,
    split_seed: int = 0,
    data_seed: int = 0,
    seed: int = 0,
) -> ModelSpec:
    """Bayesian PMF (``tfp_sgmcmc/models/pmf.py``) on a MovieLens file or the stand-in.

    ``ratings=PATH`` (``u.data`` or ``ratings.csv``) or ``synthetic=true``;
    never both, never neither (no silent fallback).
    """
    from tfp_sgmcmc.models.pmf import PARAM_NAMES, pmf

    ratings, synthetic = _data_source(
        "pmf", "ratings=PATH", "a MovieLens u.data or ratings.csv", ratings, synthetic, num_chains
    )
    problem = pmf(ratings=ratings, synthetic=synthetic,
                  latent_dim=int(latent_dim), split_seed=int(split_seed),
                  data_seed=int(data_seed))
    n = _batch_size(problem, batch_size, batch_fraction)
    return ModelSpec(
        estimator=problem.estimator(n),
        init_state=_tile_chains(problem.init_state(seed=int(seed)), num_chains),
        name="pmf",
        param_names=list(PARAM_NAMES),
        info={"source": problem.data.source, "num_users": problem.num_users,
              "num_items": problem.num_items, "num_train": problem.num_train,
              "batch_size": n, "mean_rating": problem.mean_rating},
    )


def _build_mnist_bnn(
    path: str | None = None,
    synthetic: Any = False,
    batch_size: int | None = None,
    batch_fraction: float = 0.01,
    num_chains: int = 1,
    seed: int = 0,
) -> ModelSpec:
    """The 784-100-10 BNN (``tfp_sgmcmc/models/mnist_bnn.py``) on MNIST files or the stand-in.

    ``path=DIR`` (the four IDX files, gzipped or not, or ``mnist.npz``; or the
    ``.npz`` itself) or ``synthetic=true``; never both, never neither.
    """
    from tfp_sgmcmc.models.mnist_bnn import PARAM_NAMES, init_state, mnist_bnn

    path, synthetic = _data_source(
        "mnist_bnn", "path=DIR", "MNIST IDX files or mnist.npz", path, synthetic, num_chains
    )
    problem = mnist_bnn(path=path, synthetic=synthetic,
                        seed=int(seed))
    n = _batch_size(problem, batch_size, batch_fraction)
    return ModelSpec(
        estimator=problem.estimator(n),
        init_state=_tile_chains(init_state(seed=int(seed)), num_chains),
        name="mnist_bnn",
        param_names=list(PARAM_NAMES),
        info={"source": problem.source, "num_train": problem.num_train, "batch_size": n},
    )


#: Builders for ``tfp_sgmcmc.models`` modules that have no ``build`` function of their own.
BUILTIN_MODELS = {
    "logistic_regression": _build_logistic_regression,
    "pmf": _build_pmf,
    "mnist_bnn": _build_mnist_bnn,
}


def _load_file(path: str, func: str) -> Any:
    if not os.path.isfile(path):
        raise ModelError(f"model file {path!r} does not exist.")
    name = "_tfp_sgmcmc_model_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"cannot import model file {path!r}.")
    module = importlib.util.module_from_spec(spec)
    # Let the model file import its neighbours.
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise ModelError(f"importing {path!r} failed: {type(e).__name__}: {e}") from e
    finally:
        sys.path.pop(0)
    fn = getattr(module, func, None)
    if not callable(fn):
        raise ModelError(f"model file {path!r} has no function {func!r}.")
    return fn


def _resolve(spec: str) -> Any:
    if spec.endswith(".py") or ".py:" in spec or os.sep in spec:
        path, _, func = spec.partition(".py")
        path += ".py"
        func = func.lstrip(":") or "build"
        return _load_file(path, func)
    if not spec.isidentifier():
        raise ModelError(f"`--model` must be path/to/file.py[:function] or a name, got {spec!r}.")
    try:
        module = importlib.import_module(f"tfp_sgmcmc.models.{spec}")
    except ModuleNotFoundError as e:
        known = ", ".join(sorted(BUILTIN_MODELS))
        raise ModelError(
            f"unknown model {spec!r} (no file and no tfp_sgmcmc.models.{spec}; built-in: {known})."
        ) from e
    fn = getattr(module, "build", None)
    if callable(fn):
        return fn
    if spec in BUILTIN_MODELS:
        return BUILTIN_MODELS[spec]
    raise ModelError(f"tfp_sgmcmc.models.{spec} has no `build` function.")


def resolve_build(spec: str) -> Any:
    """The build function named by ``spec`` (imports the file or module; does not call it).

    Raises:
      ModelError: missing file, function or module.
    """
    if not isinstance(spec, str) or not spec:
        raise ModelError(f"`model` must be a non-empty string, got {spec!r}.")
    return _resolve(spec)


def load_model(spec: str, model_args: dict[str, Any] | None = None) -> ModelSpec:
    """Builds the model named by ``spec`` (see the module docstring).

    Args:
      spec: ``path/to/file.py[:function]`` or the name of a ``tfp_sgmcmc.models`` module.
      model_args: keyword arguments for the build function. Default value: ``None``.

    Returns:
      A [`ModelSpec`][tfp_sgmcmc.driver.model.ModelSpec].

    Raises:
      ModelError: missing file/function/module, a failing build, or a bad return value.
    """
    if not isinstance(spec, str) or not spec:
        raise ModelError(f"`model` must be a non-empty string, got {spec!r}.")
    fn = _resolve(spec)
    try:
        out = fn(**(model_args or {}))
    except TypeError as e:
        raise ModelError(f"building model {spec!r} failed: {e}") from e
    if isinstance(out, tuple) and len(out) == 2:
        out = ModelSpec(estimator=out[0], init_state=out[1], name=spec)
    if not isinstance(out, ModelSpec):
        raise ModelError(
            f"model {spec!r} must return a ModelSpec (or (estimator, init_state)), "
            f"got {type(out).__name__}."
        )
    if not isinstance(out.estimator, GradientEstimator):
        raise ModelError(
            f"model {spec!r}: `estimator` must be a GradientEstimator, "
            f"got {type(out.estimator).__name__}."
        )
    return out
