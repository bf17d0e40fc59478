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
        loglik = lambda theta, batch: -0.5 * tf.reduce_sum((batch[..., None, :] - theta) ** 2, -1)
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

__all__ = ["ModelSpec", "ModelError", "load_model", "parse_model_args", "BUILTIN_MODELS"]


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


#: Builders for ``tfp_sgmcmc.models`` modules that have no ``build`` function of their own.
BUILTIN_MODELS = {"logistic_regression": _build_logistic_regression}


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
