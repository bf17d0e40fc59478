"""The Keras bridge's named errors, and the refusal of a Keras loss given as a
likelihood."""

from __future__ import annotations

import inspect
from typing import Any

import keras

__all__ = ["KerasDataError", "KerasLikelihoodError", "KerasSaveError", "refuse_keras_loss"]


class KerasDataError(ValueError):
    """Training or evaluation data that cannot be used as given: empty, non-finite,
    not numbers, labels that do not fit the model's outputs, a pipeline whose number
    of distinct examples is unknown. The message names the argument and the fix; a
    ``ValueError``, so ``except ValueError`` still catches it."""


class KerasLikelihoodError(ValueError):
    """A ``likelihood`` that is not a per-example log-likelihood: a Keras loss (the
    negative of one), or a callable that returns one value per batch instead of one per
    example. A ``ValueError``, so ``except ValueError`` still catches it."""


class KerasSaveError(ValueError):
    """A ``BayesianModel`` that cannot be kept as asked, or a directory that
    ``BayesianModel.load`` cannot read back: a likelihood that cannot be saved by name,
    a path that is not a saved model, a missing or damaged file, a format version this
    library does not know; pickling or deep-copying (use ``save`` and ``load``). The
    message names the path or the argument and the fix; a ``ValueError``."""


#: Keras losses that are a built-in likelihood's negative log-likelihood, and the
#: ``likelihood=`` to pass instead.
_LOSS_LIKELIHOODS = {
    "sparse_categorical_crossentropy": "categorical",
    "categorical_crossentropy": "categorical",
    "binary_crossentropy": "bernoulli",
    "mean_squared_error": "gaussian",
}


def _keras_loss_name(likelihood: Any) -> str | None:
    """The snake-case name of a Keras loss (a ``keras.losses.Loss`` object or one of
    the functions in ``keras.losses``), else ``None``."""
    if isinstance(likelihood, keras.losses.Loss):
        fn = getattr(likelihood, "fn", None)  # a LossFunctionWrapper's function
        name = getattr(fn, "__name__", None) or getattr(likelihood, "name", None)
        return str(name or type(likelihood).__name__)
    module = getattr(likelihood, "__module__", "") or ""
    if inspect.isfunction(likelihood) and module.startswith(("keras.src.losses", "keras.losses")):
        return likelihood.__name__
    return None


def refuse_keras_loss(likelihood: Any) -> None:
    """A ``KerasLikelihoodError`` for a Keras loss given as ``likelihood``: a loss is a
    *negative* log-likelihood, so maximising it as one drives the fit away from the
    data (to chance accuracy, and an unbounded "log-likelihood")."""
    name = _keras_loss_name(likelihood)
    if name is None:
        return
    builtin = _LOSS_LIKELIHOODS.get(name)
    if builtin is not None:
        logits = getattr(likelihood, "_fn_kwargs", {}).get("from_logits")
        hint = f"likelihood={builtin!r}" + (", from_logits=False" if logits is False else "")
        fix = f"pass {hint} (the same model, read as that loss's likelihood)"
    else:
        fix = "pass a built-in likelihood ('categorical', 'bernoulli', 'gaussian')"
    raise KerasLikelihoodError(
        f"`likelihood` is the Keras loss {name!r}; a likelihood is a log-likelihood (higher "
        f"is better), a loss its negative: {fix}, or a callable "
        "(y, outputs) -> per-example log-likelihood, e.g. "
        "lambda y, out: -keras.losses.sparse_categorical_crossentropy(y, out, "
        "from_logits=True)."
    )
