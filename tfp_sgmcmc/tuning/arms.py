"""Arms: grids of kernel hyperparameters, and how an arm becomes a kernel.

An arm is a ``dict`` of hyperparameters (``step_size``, ``batch_size`` or
``batch_fraction``, ``num_leapfrog_steps``, ``friction``, ``diffusion``, drift
factors ...). A kernel is built from an arm either by a user function
``make_kernel(**arm)`` or by a kernel class with a base estimator and fixed
keyword arguments ([`KernelSpec`][tfp_sgmcmc.tuning.arms.KernelSpec]).

Hyperparameters split into

* **structural** ones, which change the compiled program (the batch size is a
  static shape; ``num_leapfrog_steps`` is unrolled; strings and booleans):
  arms that share them share ONE compiled program;
* **scalars** (floats: step size, friction, temperature, ...), fed to that
  program as tensors, so a new step size never retraces.

By default a key is structural if any of its grid values is not a float, or
if it is one of [`STRUCTURAL_KEYS`][tfp_sgmcmc.tuning.arms.STRUCTURAL_KEYS].
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfp_sgmcmc.data import DatasetData
from tfp_sgmcmc.internal.util import check_int, estimator_data, keyword_parameters

__all__ = [
    "grid",
    "log10_grid",
    "STRUCTURAL_KEYS",
    "structural_keys",
    "split_arm",
    "arm_label",
    "KernelSpec",
    "ArmSampling",
]

#: Keys that are always structural, whatever the type of their values.
STRUCTURAL_KEYS = frozenset({"batch_size", "batch_fraction", "num_leapfrog_steps", "order"})


def grid(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    """Cartesian product of hyperparameter values, the first axis varying slowest.

    ``grid(step_size=[1e-5, 1e-6], batch_fraction=[0.1, 0.01])`` gives 4 arms
    in the order (1e-5, .1), (1e-5, .01), (1e-6, .1), (1e-6, .01) -- the order
    that breaks ties in MAMBA's stable sort.

    Raises:
      ValueError: no axes, or an empty axis.
    """
    if not axes:
        raise ValueError("`grid` needs at least one hyperparameter axis.")
    names = list(axes)
    values = []
    for k in names:
        v = list(axes[k])
        if not v:
            raise ValueError(f"`{k}`: the grid axis is empty.")
        values.append(v)
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def log10_grid(start: float, stop: float, step: float = 0.5) -> list[float]:
    """``10**x`` for ``x`` from ``start`` to ``stop`` inclusive by ``step`` (either direction).

    ``log10_grid(-1, -7.5)`` is the paper's 14-value logistic-regression step grid.
    """
    if step <= 0:
        raise ValueError(f"`step` must be > 0, got {step}.")
    n = int(round(abs(stop - start) / step)) + 1
    sign = 1.0 if stop >= start else -1.0
    return [float(10.0 ** (start + sign * i * step)) for i in range(n)]


def _is_float(v: Any) -> bool:
    return isinstance(v, (float, np.floating)) and not isinstance(v, bool)


def structural_keys(arms: Sequence[dict[str, Any]], extra: Iterable[str] = ()) -> frozenset:
    """Keys whose values define the compiled program (module docstring)."""
    keys: set[str] = set(extra)
    for arm in arms:
        for k, v in arm.items():
            if k in STRUCTURAL_KEYS or not _is_float(v):
                keys.add(k)
    return frozenset(keys)


def split_arm(arm: dict[str, Any], static: frozenset) -> tuple[tuple, dict[str, float]]:
    """``(structural key, scalar hyperparameters)`` of an arm."""
    key = tuple(sorted((k, arm[k]) for k in arm if k in static))
    scalars = {k: float(v) for k, v in arm.items() if k not in static}
    return key, scalars


def arm_label(arm: dict[str, Any]) -> str:
    """A short readable label: ``step_size=1e-06, batch_fraction=0.01``."""
    parts = []
    for k, v in arm.items():
        if _is_float(v):
            parts.append(f"{k}={float(v):.3g}")
        else:
            parts.append(f"{k}={v}")
    return ", ".join(parts)


class KernelSpec:
    """A kernel class, its base estimator and fixed arguments: the ``kernel`` of a tuner.

    ``KernelSpec(sg.SGLD, estimator, temperature=0.5)`` builds, for an arm,
    ``SGLD(estimator_for_arm, temperature=0.5, **other_hyperparameters)``. The batch
    size comes from the arm's ``batch_size`` (an int ``n``) or ``batch_fraction``
    (``n = max(1, ⌊τ N⌋)``, the paper's τ% / 100) through
    ``estimator.with_batch_size(n)``; every other hyperparameter is a keyword
    argument of the kernel. The Stein metrics score samples with ``estimator``'s
    full-data score.

    A spec keeps the programs the tuners compile for it, so runs in this process
    that reuse one spec object (MAMBA, then grid search, then a long run of the
    chosen arm) compile each structural key once.

    Args:
      kernel_class: an SG-MCMC kernel class (``SGLD``, ``SGHMC``, ``SGNHT`` ...).
      estimator: the base gradient estimator (needs ``with_batch_size`` if the
        arms tune the batch size).
      **kernel_kwargs: fixed keyword arguments of every kernel.

    Raises:
      ValueError: ``kernel_class`` is not a class, or ``estimator`` is missing
        or is a class.
    """

    def __init__(self, kernel_class: type, estimator: Any, /, **kernel_kwargs: Any) -> None:
        if not isinstance(kernel_class, type):
            raise ValueError(
                f"`kernel_class` must be a kernel class such as sg.SGLD, got {kernel_class!r}."
            )
        if estimator is None:
            raise ValueError("`estimator` is required: KernelSpec(kernel_class, estimator).")
        if isinstance(estimator, type):
            raise ValueError(
                "`estimator` must be a gradient estimator instance (e.g. "
                f"sg.MinibatchEstimator(...)), got the class {estimator.__name__}."
            )
        self.kernel_class = kernel_class
        self.estimator = estimator
        self.kernel_kwargs = dict(kernel_kwargs)
        self._estimators: dict[int, Any] = {}
        #: Compiled programs of the tuners run on this spec (never pickled).
        self._programs: dict[tuple, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Compiled programs stay in their process; a worker compiles its own.
        return {**self.__dict__, "_programs": {}}

    def batch_size(self, arm: dict[str, Any]) -> int | None:
        if "batch_size" in arm and "batch_fraction" in arm:
            raise ValueError("An arm may give `batch_size` or `batch_fraction`, not both.")
        if "batch_size" in arm:
            n = arm["batch_size"]
            if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
                raise ValueError(f"`batch_size` must be an int, got {n!r}.")
            return int(n)
        if "batch_fraction" in arm:
            tau = float(arm["batch_fraction"])
            if not 0.0 < tau <= 1.0:
                raise ValueError(f"`batch_fraction` must lie in (0, 1], got {tau!r}.")
            big_n = int(self.estimator.num_examples)
            return max(1, int(np.floor(tau * big_n)))
        return None

    def estimator_for(self, arm: dict[str, Any]) -> Any:
        n = self.batch_size(arm)
        if n is None:
            return self.estimator
        if n not in self._estimators:
            self._check_stream_batch(arm, n)
            if not hasattr(self.estimator, "with_batch_size"):
                raise ValueError(
                    "`estimator` has no `with_batch_size`: the arms cannot tune the batch size."
                )
            # Built eagerly here (never inside a trace): data sources precompute
            # per-batch-size copies eagerly.
            self._estimators[n] = (
                self.estimator
                if getattr(self.estimator, "batch_size", None) == n
                else self.estimator.with_batch_size(n)
            )
        return self._estimators[n]

    def _check_stream_batch(self, arm: dict[str, Any], n: int) -> None:
        """A ``DatasetData`` yields one batch size: an arm asking for another is refused."""
        data = estimator_data(self.estimator)
        if not isinstance(data, DatasetData) or n == data.batch_size:
            return
        key = "batch_size" if "batch_size" in arm else "batch_fraction"
        raise ValueError(
            f"`{key}` = {arm[key]!r} asks for minibatches of {n}, but the estimator reads a "
            f"DatasetData whose dataset yields batches of {data.batch_size}: a tf.data "
            f"source has one batch size. Tune the other hyperparameters on it (drop `{key}` "
            "from the arms), or pass as `kernel` a function building one DatasetData per "
            "batch size "
            "(docs/tuning.md, 'Tuning on tf.data')."
        )

    def __call__(self, **arm: Any) -> Any:
        est = self.estimator_for(arm)
        kwargs = dict(self.kernel_kwargs)
        kwargs.update({k: v for k, v in arm.items() if k not in ("batch_size", "batch_fraction")})
        self._check_names(kwargs)
        return self.kernel_class(est, **kwargs)

    def _check_names(self, kwargs: dict[str, Any]) -> None:
        """Refuse a hyperparameter the kernel does not take (a typo would otherwise
        surface as a bare ``TypeError`` from the constructor)."""
        accepted = keyword_parameters(self.kernel_class)
        if accepted is None:  # **kwargs or no signature: let the call decide
            return
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown:
            raise ValueError(
                f"{getattr(self.kernel_class, '__name__', self.kernel_class)} takes no "
                f"hyperparameter {', '.join(repr(k) for k in unknown)} (it takes: "
                f"{', '.join(sorted(accepted))}, and `batch_size` or `batch_fraction`)."
            )

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.kernel_kwargs.items())
        return f"KernelSpec({self.kernel_class.__name__}, {self.estimator!r}{extra})"


MakeKernel = Callable[..., Any]


@dataclass(frozen=True)
class ArmSampling:
    """How every arm of a tuner is sampled (the ``sampling`` option of the tuners).

    Args:
      thin: the metric sees every ``thin``-th state of a round. Default value: ``10``
        (the paper's).
      chains_per_arm: ``C`` independent chains per arm, run side by side in the
        arm's budget (one program, leading ``[C]`` state dimension; the estimator
        must have ``independent_chains=True``). The arm's metric is computed on
        the chains' pooled samples with a jackknife standard error over the chains
        (``RoundRecord.metric_se``; see
        [`evaluate_metric_with_se`][tfp_sgmcmc.tuning.executors.evaluate_metric_with_se]).
        Default value: ``1`` (the paper's one chain per arm).
      max_steps_per_call: steps per compiled call (bounds the sample buffer), an
        int ``>= 2 * thin``. Default value: ``2000``.
      jit_compile: XLA-compile the sampling programs; an arm reading a
        [`DatasetData`][tfp_sgmcmc.data.DatasetData] is then fed its minibatches in
        prefetched blocks (``False``: the iterator is read step by step in a graph;
        see docs/tuning.md, "Tuning on tf.data"). Default value: ``True``.
      static_keys: extra hyperparameter names to treat as structural (module
        docstring). Default value: ``()``.

    Raises:
      ValueError: a field of the wrong type or out of range, naming it.
    """

    thin: int = 10
    chains_per_arm: int = 1
    max_steps_per_call: int = 2000
    jit_compile: bool = True
    static_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        thin = check_int(self.thin, "thin", 1)
        object.__setattr__(self, "thin", thin)
        object.__setattr__(
            self, "chains_per_arm", check_int(self.chains_per_arm, "chains_per_arm", 1)
        )
        object.__setattr__(
            self,
            "max_steps_per_call",
            check_int(self.max_steps_per_call, "max_steps_per_call", 2 * thin),
        )
        if not isinstance(self.jit_compile, (bool, np.bool_)):
            raise ValueError(f"`jit_compile` must be a bool, got {self.jit_compile!r}.")
        object.__setattr__(self, "jit_compile", bool(self.jit_compile))
        keys = self.static_keys
        if not isinstance(keys, (list, tuple, set, frozenset)) or not all(
            isinstance(k, str) for k in keys
        ):
            raise ValueError(
                f"`static_keys` must be a sequence of hyperparameter names, got {keys!r}."
            )
        object.__setattr__(self, "static_keys", tuple(keys))
