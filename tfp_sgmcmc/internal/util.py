"""Small shared helpers: state parts, seeds, static validation.

These are our own copies of the few conveniences TFP keeps in its private
``internal`` package (which we must not import).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = [
    "is_list_like",
    "as_parts",
    "restructure",
    "split_seed",
    "INT_SEED_LIMIT",
    "int_seed_pair",
    "stateless_seed",
    "check_seed",
    "static_value",
    "static_number",
    "check_positive",
    "check_in_interval",
    "check_int",
    "check_finite_tensor",
    "all_finite",
    "first_nonfinite",
    "in_xla_context",
    "cast_param",
    "estimator_data",
    "NESTED_ATTRS",
    "get_outermost",
    "has_nested",
    "results_field",
    "keyword_parameters",
    "RecordedParameters",
    "RecordedArgument",
    "AttributeView",
    "PrettyNamedTupleMixin",
]

# Philox: the default generator is slow inside XLA on CPU
# (docs/benchmarks.md#findings-of-the-loaded-runs).
RNG_ALG = "philox"


def is_list_like(x: Any) -> bool:
    """True for the list/tuple containers TFP treats as "state parts"."""
    return isinstance(x, (list, tuple))


def as_parts(state: Any) -> list[tf.Tensor]:
    """A single tensor or a list of tensors, as a Python list of tensors."""
    if is_list_like(state):
        return [tf.convert_to_tensor(s) for s in state]
    return [tf.convert_to_tensor(state)]


def restructure(parts: Sequence[tf.Tensor], like: Any) -> Any:
    """Inverse of [`as_parts`][tfp_sgmcmc.internal.util.as_parts]: give ``parts`` the structure of
    ``like``."""
    if is_list_like(like):
        return list(parts)
    return parts[0]


#: A Python int seed ``s`` lies in ``[0, INT_SEED_LIMIT)``: it is the pair ``[0, s]``.
INT_SEED_LIMIT = 2**31

_SEED_WANT = "None, an int in [0, 2**31), or an int32 pair (e.g. `[0, 42]`)"


def int_seed_pair(seed: Any, name: str = "seed") -> np.ndarray:
    """The ``int32[2]`` stateless seed ``[0, s]`` of a Python or NumPy int ``s``.

    The one rule of every ``seed=int`` of this library. Only ``0 <= s < 2**31`` is a
    seed: an int32 word holds 31 bits of a non-negative int, and a wider int cut to
    the pair's two words would give another int's chain (``2**62`` was ``0``'s).
    A wider seed is one the caller maps to a pair (``[0, s]`` for ``s < 2**31`` is the
    pair an int gives, so any other pair is a chain no int gives).

    Raises:
      ValueError: naming ``name``: a negative int, or one ``>= 2**31``.
    """
    s = int(seed)
    if s < 0:
        raise ValueError(f"`{name}` must be {_SEED_WANT}, got the negative int {seed!r}.")
    if s >= INT_SEED_LIMIT:
        raise ValueError(
            f"`{name}` must be {_SEED_WANT}, got {seed!r}, which has more than 31 bits: "
            "pass an int32 pair for it (e.g. `np.random.SeedSequence(seed)"
            ".generate_state(2).view(np.int32)`), or an int below 2**31."
        )
    return np.array([0, s], np.int32)


def stateless_seed(seed: Any, salt: str | None = None) -> tf.Tensor:
    """An ``int32[2]`` stateless seed; a Python int maps to one deterministically.

    ``tfp.random.sanitize_seed`` treats a Python ``int`` as a *stateful* seed: it
    draws the pair with ``tf.random.uniform(seed=int)``, and inside a
    ``tf.function`` (XLA or not) that op returns a new pair on every call, so
    ``run(42)`` would give a different chain each time. Here an int ``0 <= s < 2**31``
    becomes the constant pair ``[0, s]`` (:func:`int_seed_pair`, the run seed of
    ``tfp_sgmcmc.sample`` too), so the same int gives the same chain. A seed tensor or
    pair is passed to ``sanitize_seed`` unchanged (a pair of Python or NumPy ints checked
    by :func:`check_seed` first), and ``None`` keeps TFP's meaning (fresh randomness).

    Raises:
      ValueError: an int outside ``[0, 2**31)``; a pair that is not two int32 ints.
    """
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        seed = tf.constant(int_seed_pair(seed), tf.int32)
    elif isinstance(seed, np.ndarray) or (
        isinstance(seed, (list, tuple)) and not any(tf.is_tensor(x) for x in seed)
    ):
        seed = check_seed(seed)  # a pair outside int32 was TensorFlow's cast error
    return tfp.random.sanitize_seed(seed, salt=salt)


def check_seed(seed: Any, name: str = "seed") -> Any:
    """``seed`` if it is a seed :func:`stateless_seed` takes; ``ValueError`` naming ``name``
    otherwise.

    Accepted: ``None``, a Python or NumPy int in ``[0, 2**31)``, a callable (TFP's
    ``SeedStream``), or an integer pair: a tensor of dtype ``int32`` and shape ``[2]`` (a
    static shape that is unknown passes), or a list, tuple or NumPy array of two ints
    within int32. A NumPy integer pair is returned as ``int32`` (``np.array([1, 2])`` is
    ``int64``, which ``tfp.random.sanitize_seed`` refuses while it takes the list
    ``[1, 2]``). Everything else (a string, a float, a bool, a pair of floats, three ints,
    a scalar tensor, an int of more than 31 bits) used to reach TensorFlow, whose errors
    name neither the argument nor what it wants, or was cut to another int's seed.
    """
    want = _SEED_WANT
    if seed is None or callable(seed):
        return seed
    if isinstance(seed, (bool, np.bool_)):
        raise ValueError(f"`{name}` must be {want}, got {seed!r}.")
    if isinstance(seed, (int, np.integer)):
        int_seed_pair(seed, name)  # the range
        return seed
    if isinstance(seed, (tf.Tensor, tf.Variable)):
        if seed.dtype != tf.int32 or not seed.shape.is_compatible_with([2]):
            raise ValueError(
                f"`{name}` must be {want}, got a tensor of dtype {seed.dtype.name} and shape "
                f"{seed.shape}."
            )
        return seed
    try:
        arr = np.asarray(seed)
    except (TypeError, ValueError) as e:  # ragged lists and the like
        raise ValueError(f"`{name}` must be {want}, got {seed!r}.") from e
    if arr.shape != (2,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"`{name}` must be {want}, got {seed!r}.")
    info = np.iinfo(np.int32)
    if arr.min() < info.min or arr.max() > info.max:
        raise ValueError(f"`{name}` must be {want}, got {seed!r} (outside int32).")
    return arr.astype(np.int32) if isinstance(seed, np.ndarray) else seed


def split_seed(seed: Any, n: int, salt: str) -> list[tf.Tensor]:
    """Sanitize ``seed`` (``stateless_seed``) and split it into ``n`` stateless seeds."""
    seed = stateless_seed(seed)
    return list(tfp.random.split_seed(seed, n=n, salt=salt))


def static_value(x: Any) -> np.ndarray | None:
    """The value of ``x`` if it is known without running a graph, else ``None``."""
    if x is None:
        return None
    if isinstance(x, (int, float, np.number, np.ndarray)):
        return np.asarray(x)
    if isinstance(x, tf.Variable):
        # Variables can change between calls: never validate them as constants.
        return None
    try:
        v = tf.get_static_value(x)
    except (TypeError, ValueError):
        return None
    return None if v is None else np.asarray(v)


def static_number(x: Any, name: str, scalar: bool = False) -> np.ndarray | None:
    """:func:`static_value` as a float array; ``ValueError`` naming ``name`` if it is
    not a number (a string, a bool, ``None``, ``None`` inside a list, ...), if it is
    empty or (with ``scalar``) not a scalar.

    With ``scalar``, a tensor or ``tf.Variable`` whose value is not known statically
    but whose static rank is known and non-zero is refused too. Python ints beyond
    int64 (which NumPy stores as objects) become floats.
    """
    if x is None or isinstance(x, (bool, np.bool_, str, bytes)):
        raise ValueError(f"`{name}` must be a number, got {x!r}.")
    v = static_value(x)
    if v is None:
        rank = getattr(getattr(x, "shape", None), "rank", None)
        if scalar and rank is not None and rank != 0:
            raise ValueError(f"`{name}` must be a scalar, got shape {x.shape}.")
        return None
    if v.dtype == bool or not (np.issubdtype(v.dtype, np.number) or v.dtype == object):
        raise ValueError(f"`{name}` must be a number, got {x!r}.")
    if v.dtype == object or np.issubdtype(v.dtype, np.complexfloating):
        try:
            v = v.astype(np.float64)
        except (TypeError, ValueError, OverflowError) as e:
            raise ValueError(f"`{name}` must be a real number, got {x!r}.") from e
    if v.size == 0:
        raise ValueError(f"`{name}` must not be empty, got {x!r}.")
    if scalar and v.ndim != 0:
        raise ValueError(f"`{name}` must be a scalar, got shape {v.shape}.")
    return v


def check_positive(x: Any, name: str, allow_zero: bool = False, scalar: bool = False) -> None:
    """Raise ``ValueError`` naming ``name`` if a statically known ``x`` is not a
    number, not > 0 (or >= 0 with ``allow_zero``) or, with ``scalar``, not a scalar."""
    v = static_number(x, name, scalar)
    if v is None:
        return
    shown = v.item() if np.ndim(v) == 0 else v  # -1.0, not array(-1.)
    if not np.all(np.isfinite(v)):
        raise ValueError(f"`{name}` must be finite, got {shown!r}.")
    bad = np.any(v < 0) if allow_zero else np.any(v <= 0)
    if bad:
        rel = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"`{name}` must be {rel}, got {shown!r}.")


def check_int(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as a Python ``int``; ``ValueError`` naming ``name`` otherwise.

    Python and NumPy integers pass; ``bool`` (an ``int`` subclass), floats, strings
    and tensors do not, nor values outside ``[minimum, maximum]`` (when given).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ValueError(f"`{name}` must be an int{bound}, got {value!r}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}, got {value!r}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"`{name}` must be an int <= {maximum}, got {value!r}.")
    return int(value)


def check_in_interval(
    x: Any,
    name: str,
    low: float,
    high: float,
    low_open: bool = False,
    high_open: bool = False,
    scalar: bool = False,
) -> None:
    """Raise ``ValueError`` naming ``name`` if a static ``x`` is not a number, is
    outside the interval or, with ``scalar``, is not a scalar."""
    v = static_number(x, name, scalar)
    if v is None:
        return
    lo_ok = np.all(v > low) if low_open else np.all(v >= low)
    hi_ok = np.all(v < high) if high_open else np.all(v <= high)
    if not (lo_ok and hi_ok and np.all(np.isfinite(v))):
        lb = "(" if low_open else "["
        rb = ")" if high_open else "]"
        raise ValueError(f"`{name}` must lie in {lb}{low}, {high}{rb}, got {v!r}.")


def check_finite_tensor(x: Any, name: str, scalar: bool = False) -> None:
    """Raise ``ValueError`` if a statically known array contains NaN or Inf.

    With ``scalar``, ``x`` must also be a real number and a scalar (``ValueError``
    naming ``name``, from :func:`static_number`).
    """
    if scalar:
        static_number(x, name, scalar=True)
    v = static_value(x)
    if v is not None and v.dtype.kind in "fc" and not np.all(np.isfinite(v)):
        raise ValueError(f"`{name}` contains non-finite values (NaN or Inf).")


def cast_param(x: Any, dtype: tf.DType) -> tf.Tensor:
    """A hyperparameter as a tensor of ``dtype``, exact for Python numbers.

    ``tf.cast(0.8, tf.float64)`` converts through float32 first (0.800000011920929);
    tensors and variables are cast, Python/NumPy numbers are converted directly.
    """
    if isinstance(x, (tf.Tensor, tf.Variable)):
        return tf.cast(x, dtype)
    return tf.constant(x, dtype)


def estimator_data(estimator: Any) -> Any:
    """The data source an estimator reads, or ``None`` if none is found.

    An estimator's own ``data`` (``MinibatchEstimator``), else that of the estimator it
    wraps (``base``: control variates, SVRG, transformed, structured and SSGL estimators),
    followed down the chain of wrappers.
    """
    seen: set[int] = set()
    est = estimator
    while est is not None and id(est) not in seen:
        seen.add(id(est))
        data = getattr(est, "data", None)
        if data is not None:
            return data
        est = getattr(est, "base", None)
    return None


#: The attributes through which kernels and their results nest what they wrap, in
#: the order TFP's own (private) ``unnest`` helpers search them: wrappers keep their
#: kernel's results in ``inner_results``, Metropolis-Hastings kernels (HMC, MALA,
#: random walk) the chain's in ``accepted_results``, wrapper kernels their kernel in
#: ``inner_kernel`` (``_inner_kernel`` for ``TransformedTransitionKernel``).
NESTED_ATTRS = ("inner_results", "accepted_results", "_inner_kernel", "inner_kernel")


def get_outermost(
    obj: Any, name: str, default: Any = None, nested_attrs: Sequence[str] = NESTED_ATTRS
) -> Any:
    """``<level>.<name>`` of the outermost level of a nest of kernels or results.

    The nest is searched breadth first: ``obj``, then the objects it holds under
    ``nested_attrs`` (in that order), then theirs. A level whose ``name`` is missing
    or ``None`` is passed over. Each object is visited once, so a cycle ends.

    Args:
      obj: a kernel or kernel results, possibly wrapped.
      name: the attribute to find.
      default: returned when no level has a non-``None`` ``name``.
      nested_attrs: the attributes that hold the next level down.
    """
    pending: list[Any] = [obj]
    seen: dict[int, Any] = {}  # holds each visited level, so that its id stays its own
    while pending:
        level = pending.pop(0)
        if level is None or id(level) in seen:
            continue
        seen[id(level)] = level
        value = getattr(level, name, None)
        if value is not None:
            return value
        pending += [getattr(level, a, None) for a in nested_attrs]
    return default


def has_nested(obj: Any, name: str, nested_attrs: Sequence[str] = NESTED_ATTRS) -> bool:
    """Whether any level of a nest of kernels or results has a non-``None`` ``name``."""
    sentinel = object()
    return get_outermost(obj, name, sentinel, nested_attrs) is not sentinel


def results_field(results: Any, name: str) -> Any:
    """``<level>.<name>`` of the outermost level of nested kernel results that has it.

    Wrappers nest their kernel's results in ``inner_results`` (TFP's step-size
    adaptation, ``TransformedTransitionKernel``, this library's wrappers); TFP's
    Metropolis-Hastings kernels (HMC, MALA, random walk) keep the chain's in
    ``accepted_results``. Both are followed (see `get_outermost`). ``None`` when no
    level has it.
    """
    return get_outermost(results, name, nested_attrs=("accepted_results", "inner_results"))


def keyword_parameters(cls: Any) -> list[str] | None:
    """The keyword arguments a kernel class's constructor takes after ``estimator``.

    ``None`` when it takes ``**kwargs`` or has no signature to inspect (then only
    the call itself can tell a wrong name).
    """
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [k for k, p in params.items() if p.kind in keyword and k not in ("self", "estimator")]


class RecordedParameters:
    """Objects whose ``parameters`` are their constructor arguments, stored once.

    A subclass validates its arguments, then calls ``self._record(**arguments)``;
    ``parameters`` returns a copy of them (so ``type(obj)(**obj.parameters)`` rebuilds
    the object) and ``_cast(name, dtype)`` gives one as a tensor of ``dtype`` (with
    ``cast_param``) where the compiled step needs it.
    """

    _parameters: dict[str, Any]

    def _record(self, **parameters: Any) -> None:
        self._parameters = parameters

    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self._parameters)

    def _cast(self, name: str, dtype: tf.DType) -> tf.Tensor:
        return cast_param(self._parameters[name], dtype)


_T = TypeVar("_T")


class RecordedArgument(Generic[_T]):
    """A read-only attribute that reads one recorded constructor argument.

    ``num_replicas = RecordedArgument[int]("Doc.")`` in the body of a class whose
    instances keep their constructor arguments in ``self._parameters`` (kernels,
    [`RecordedParameters`][tfp_sgmcmc.internal.util.RecordedParameters]) makes
    ``obj.num_replicas`` return ``obj.parameters["num_replicas"]``: an argument is
    stored once, where ``copy`` finds it, and read from there; assigning it raises
    ``AttributeError`` as a ``property`` without setter does.
    """

    def __init__(self, doc: str | None = None) -> None:
        self.__doc__ = doc
        self._key = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._key = name

    def __get__(self, instance: Any, owner: type | None = None) -> _T:
        if instance is None:
            return self  # type: ignore[return-value]  # the class attribute (docs, help)
        return instance._parameters[self._key]

    def __set__(self, instance: Any, value: Any) -> None:
        raise AttributeError(
            f"{self._key!r} is a constructor argument; use `copy({self._key}=...)`."
        )


class AttributeView(Generic[_T]):
    """A read-only attribute that returns another attribute of the same object.

    ``batch_size = AttributeView[int]("_batch_size")`` in a class body makes
    ``obj.batch_size`` return ``obj._batch_size``; a dotted path
    (``"_base.batch_size"``) follows attributes. It stands for the three-line
    getter ``property`` whose body is that one read, and behaves as one:
    assigning raises ``AttributeError``, and a docstring written under the
    assignment documents it on the API page.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._get = operator.attrgetter(path)
        self._name = path

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, instance: Any, owner: type | None = None) -> _T:
        if instance is None:
            return self  # type: ignore[return-value]  # the class attribute (docs, help)
        return self._get(instance)

    def __set__(self, instance: Any, value: Any) -> None:
        raise AttributeError(f"{self._name!r} is read-only (it reads `{self._path}`).")


def all_finite(parts: Sequence[tf.Tensor], batch_ndims: int) -> tf.Tensor:
    """Per-chain flag: every entry of every part is finite.

    ``batch_ndims`` leading dimensions are kept (one flag per chain); the
    remaining event dimensions are reduced.
    """
    flags = []
    for p in parts:
        f = tf.math.is_finite(p)
        axes = list(range(batch_ndims, len(p.shape)))
        flags.append(tf.reduce_all(f, axis=axes) if axes else f)
    out = flags[0]
    for f in flags[1:]:
        out = tf.logical_and(out, f)
    return out


class PrettyNamedTupleMixin:
    """Readable multi-line ``repr`` for result namedtuples (as TFP's results)."""

    __slots__ = ()

    def __repr__(self) -> str:  # pragma: no cover - cosmetic
        fields = ",\n".join(
            f"  {k}={_short_repr(v)}"
            for k, v in zip(self._fields, self)  # type: ignore[attr-defined]
        )
        return f"{type(self).__name__}(\n{fields}\n)"


def _short_repr(v: Any) -> str:
    if isinstance(v, (tf.Tensor, tf.Variable, np.ndarray)):
        return f"<{getattr(v.dtype, 'name', v.dtype)}{list(v.shape)}>"
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return "[" + ", ".join(_short_repr(x) for x in v) + "]"
    return repr(v)


def first_nonfinite(value: np.ndarray, batch_ndims: int) -> tuple[int, ...] | None:
    """The first index (in C order) of ``value``'s leading ``batch_ndims`` dimensions at
    which some entry is NaN or Inf; ``None`` when every entry is finite.

    ``value`` is a NumPy array of floats (a concrete state or log-density); its
    remaining dimensions (events) are reduced.
    """
    value = np.asarray(value)
    if value.dtype.kind not in "fc":
        return None
    bad = ~np.isfinite(value)
    if batch_ndims < value.ndim:
        bad = bad.reshape(value.shape[:batch_ndims] + (-1,)).any(axis=-1)
    if bad.ndim == 0:  # no chain dimensions: the one chain, or none
        return () if bool(bad) else None
    hits = np.argwhere(bad)
    return tuple(int(i) for i in hits[0]) if len(hits) else None


def in_xla_context() -> bool:
    """Whether the graph being built is compiled by XLA (``jit_compile=True``, or inside
    such a function); ``False`` eagerly."""
    if tf.executing_eagerly():
        return False
    try:  # TensorFlow has no public equivalent
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))
