"""Model inputs and labels as the Keras bridge reads them: host arrays, class ids,
``tf.data`` pipelines (their dtype, their ``.repeat()`` steps), and the host batch
source ``BayesianModel.fit`` feeds its compiled steps from."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data.permutation import feistel_permutation
from tfp_sgmcmc.internal.random import split_seed
from tfp_sgmcmc.keras._errors import KerasDataError
from tfp_sgmcmc.loop import chain_seed, step_seed

__all__ = [
    "Source",
    "as_inputs",
    "cast_floating",
    "check_finite",
    "check_numeric_labels",
    "check_sample_weight",
    "class_ids",
    "class_weight_table",
    "num_rows",
    "split_validation",
    "take",
    "to_host",
]


def check_numeric_labels(y: np.ndarray, name: str = "y") -> np.ndarray:
    """``y`` as a numeric array, or a ``KerasDataError`` naming the fix for strings."""
    y = np.asarray(y)
    if y.dtype.kind in "biuf":
        return y
    if y.dtype.kind == "O":
        try:
            return y.astype(np.float64)
        except (TypeError, ValueError):
            pass
    raise KerasDataError(
        f"`{name}` holds {y.dtype} values ({y.reshape(-1)[:3].tolist()}...), not numbers: map "
        "class names to integer ids first, e.g. "
        "`classes, ids = np.unique(labels, return_inverse=True)`."
    )


def class_ids(y: np.ndarray, num_classes: int | None) -> np.ndarray:
    """Integer class ids ``[N]`` from ids (any int/float dtype holding integers) or one-hot."""
    y = check_numeric_labels(y)
    if y.ndim == 2 and y.shape[1] > 1:  # one-hot rows -> ids
        if num_classes is not None and y.shape[1] != num_classes:
            # argmax would map them to ids silently, wrong whenever the widths differ.
            raise KerasDataError(
                f"the labels are one-hot rows {y.shape[1]} wide, but the model has "
                f"{num_classes} outputs (classes): give rows of width {num_classes}, or "
                f"integer class ids in [0, {num_classes}), or change the model's last layer."
            )
        if not (np.all((y == 0) | (y == 1)) and np.all(y.sum(1) == 1)):
            raise ValueError(
                f"`data` labels have shape {y.shape}: two-dimensional labels must be one-hot "
                "rows (a single 1 per row); otherwise pass integer class ids of shape [N]."
            )
        y = np.argmax(y, axis=1)
    y = y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
    if y.ndim != 1:
        raise ValueError(f"`data` labels must be class ids [N] or one-hot [N, K], got {y.shape}.")
    if not np.all(np.isfinite(y.astype(np.float64))) or not np.all(y == np.round(y)):
        raise ValueError(
            "`data` labels must be integer class ids (e.g. 0..K-1), got non-integer values; "
            "probabilistic (soft) labels need a callable `likelihood`."
        )
    ids = y.astype(np.int64)
    if ids.size and (ids.min() < 0 or (num_classes is not None and ids.max() >= num_classes)):
        raise ValueError(
            f"`data` labels must lie in [0, {num_classes}) (the model's {num_classes} outputs), "
            f"got values in [{ids.min()}, {ids.max()}]."
        )
    return ids.astype(np.int32)


def as_inputs(x: Any, name: str, dtype: Any = np.float32) -> Any:
    """Model inputs as floating arrays of ``dtype``: one array, or a list/tuple/dict of
    arrays (a model with several inputs) sharing their number of rows."""
    try:
        x = tf.nest.map_structure(lambda t: np.asarray(t, dtype), x)
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"`{name}`: the inputs must be an array or a list/tuple/dict of arrays (one per "
            f"model input), each [N, ...] of numbers: {e}"
        ) from e
    leaves = tf.nest.flatten(x)
    if not leaves or any(t.ndim == 0 for t in leaves):
        raise ValueError(f"`{name}`: every input must be an array [N, ...].")
    rows = {t.shape[0] for t in leaves}
    if len(rows) > 1:
        raise ValueError(f"`{name}`: the model's inputs disagree on N: {sorted(rows)} rows.")
    return x


def cast_floating(ds: tf.data.Dataset, dtype: Any) -> tf.data.Dataset:
    """``ds`` with its floating elements cast to ``dtype`` (``ds`` itself when they
    already have it), its order and cardinality unchanged."""
    want = tf.as_dtype(dtype)
    specs = tf.nest.flatten(ds.element_spec)
    if all(not s.dtype.is_floating or s.dtype == want for s in specs):
        return ds

    def cast(*element: Any) -> Any:
        element = element[0] if len(element) == 1 else element
        return tf.nest.map_structure(
            lambda t: tf.cast(t, want) if t.dtype.is_floating else t, element
        )

    return ds.map(cast)


def _repeat_counts(ds: tf.data.Dataset) -> list[int]:
    """The counts of the ``.repeat()`` steps in the pipeline of ``ds`` (``-1`` for a
    ``.repeat()`` without a count), read from its serialised graph; ``[]`` when it has
    none or the graph cannot be read (a pipeline with state outside TensorFlow)."""
    from tensorflow.core.framework import graph_pb2

    try:
        # external_state_policy=1: ignore state (a from_generator source) rather than fail.
        serial = tf.raw_ops.DatasetToGraphV2(
            input_dataset=ds._variant_tensor, external_state_policy=1
        )
        graph = graph_pb2.GraphDef()
        graph.ParseFromString(serial.numpy())
    except Exception:  # noqa: BLE001 - detection only; the data are read as they are
        return []
    consts = {
        n.name: tf.make_ndarray(n.attr["value"].tensor)
        for n in graph.node
        # The count is an int64 constant (other constants may be resource handles).
        if n.op == "Const" and "value" in n.attr and n.attr["value"].tensor.dtype == tf.int64
    }
    counts = []
    for node in graph.node:
        if node.op == "RepeatDataset" and len(node.input) > 1:
            value = consts.get(node.input[1].split(":")[0].lstrip("^"))
            counts.append(-1 if value is None else int(np.asarray(value).reshape(-1)[0]))
    return [c for c in counts if c != 1 and c != 0]


def num_rows(x: Any) -> int:
    return int(np.shape(tf.nest.flatten(x)[0])[0])


def to_host(x: Any, dtype: np.dtype) -> Any:
    """Arrays on the host: floating leaves cast to ``dtype`` (float64 features for a
    float32 model), integer leaves (token ids, categorical codes) kept as they are."""

    def leaf(t: Any) -> np.ndarray:
        a = np.asarray(t)
        if a.dtype.kind in "fc" or a.dtype == bool:
            return a.astype(dtype, copy=False)
        return a

    return tf.nest.map_structure(leaf, x)


def _host_inputs(x: Any, name: str) -> Any:
    """Array inputs as NumPy arrays (one, or a list/tuple/dict of them, one per model
    input), or a ``KerasDataError`` for a plain Python list of rows, which the nested
    structure would read as one input per number."""
    leaves = tf.nest.flatten(x)
    if isinstance(x, (list, tuple)) and any(np.ndim(t) == 0 for t in leaves):
        raise KerasDataError(
            f"`{name}` is a Python {type(x).__name__} of rows; a list or tuple is read as one "
            f"array per model input: pass `np.asarray({name})` (or a list of arrays, one per "
            "input, for a model with several inputs)."
        )
    return tf.nest.map_structure(np.asarray, x)


def check_finite(arrays: Any, name: str) -> None:
    """A ``KerasDataError`` naming the first row of ``arrays`` (floating leaves) that
    holds NaN or Inf: the likelihood would be NaN at every step that draws it."""
    for a in tf.nest.flatten(arrays):
        a = np.asarray(a)
        if a.dtype.kind not in "fc" or a.size == 0:
            continue
        bad = ~np.isfinite(a.reshape(a.shape[0], -1) if a.ndim else a.reshape(1, -1))
        if bad.any():
            row = int(np.flatnonzero(bad.any(1))[0])
            raise KerasDataError(
                f"`{name}` holds NaN or Inf ({int(bad.sum())} value(s), the first in row "
                f"{row} of a batch or array): drop or impute those rows before `fit`."
            )


def take(x: Any, idx: np.ndarray) -> Any:
    return tf.nest.map_structure(lambda a: a[idx], x)


def check_sample_weight(w: Any, n: int, name: str = "sample_weight") -> np.ndarray:
    """Per-example weights ``[n]`` as float64: finite and ``>= 0``, else a
    ``KerasDataError`` naming ``name`` and the first bad row."""
    try:
        w = np.asarray(w, np.float64)
    except (TypeError, ValueError) as e:
        raise KerasDataError(f"`{name}` must be numbers, one weight per example: {e}") from e
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.ndim != 1 or w.shape[0] != n:
        raise KerasDataError(
            f"`{name}` has shape {w.shape}; it must hold one weight per example, shape [{n}]."
        )
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise KerasDataError(
            f"`{name}` holds {int(bad.sum())} negative or non-finite weight(s) (row {row}: "
            f"{w[row]}): a weight multiplies an example's log-likelihood and must be a "
            "finite number >= 0 (0 drops the example)."
        )
    return w


def class_weight_table(class_weight: Any, num_classes: int) -> np.ndarray:
    """``class_weight`` (a dict class id -> weight) as a table ``[num_classes]``, the
    classes it does not name weighted 1, as Keras does; a ``KerasDataError`` for keys
    that are not class ids of the model or weights that are negative or non-finite."""
    if not isinstance(class_weight, dict):
        raise KerasDataError(
            f"`class_weight` must be a dict {{class id: weight}}, got "
            f"{type(class_weight).__name__}."
        )
    table = np.ones(num_classes, np.float64)
    for key, value in class_weight.items():
        if isinstance(key, bool) or not isinstance(key, (int, np.integer)):
            raise KerasDataError(
                f"`class_weight` keys must be integer class ids, got {key!r}: map class "
                "names to their ids first."
            )
        if not 0 <= int(key) < num_classes:
            raise KerasDataError(
                f"`class_weight` names class {key}, outside the model's classes [0, {num_classes})."
            )
        try:
            weight = float(value)
        except (TypeError, ValueError):
            weight = math.nan
        if not (math.isfinite(weight) and weight >= 0):
            raise KerasDataError(
                f"`class_weight[{key}]` is {value!r}: a class weight must be a finite number >= 0."
            )
        table[int(key)] = weight
    return table


def split_validation(
    x: Any, y: Any, sample_weight: Any, fraction: float
) -> tuple[tuple[Any, Any, Any], tuple[Any, Any]]:
    """``(x, y, sample_weight)`` for training and ``(x, y)`` for validation: the last
    ``fraction`` of the rows held out, before any shuffling, as Keras's
    ``validation_split`` does (the first ``floor(N (1 - fraction))`` rows train)."""
    if isinstance(x, tf.data.Dataset):
        raise KerasDataError(
            "`validation_split` needs arrays, not a tf.data dataset (whose rows cannot be "
            "split without reading them): pass `validation_data=` (a dataset or (x, y)) "
            "instead, as with Keras's fit."
        )
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, (int, float))
        or not 0.0 < float(fraction) < 1.0
    ):
        raise ValueError(f"`validation_split` must be a fraction in (0, 1), got {fraction!r}.")
    x = _host_inputs(x, "x")
    if y is None:
        raise ValueError("`y` is required when `x` holds arrays.")
    y = np.asarray(y)
    n = num_rows(x)
    split = int(math.floor(n * (1.0 - float(fraction))))
    if split == 0 or split == n:
        raise KerasDataError(
            f"`validation_split={fraction}` of {n} rows leaves "
            f"{'no training' if split == 0 else 'no validation'} rows: pass more data or "
            "another fraction."
        )
    if y.ndim == 0 or y.shape[0] != n:
        raise ValueError(f"`x` has {n} rows but `y` has shape {y.shape}.")
    head, tail = np.arange(split), np.arange(split, n)
    w = None if sample_weight is None else check_sample_weight(sample_weight, n)[:split]
    return (take(x, head), y[:split], w), (take(x, tail), y[split:])


class Source:
    """``(x, y)`` batches fed from the host, as Keras's ``fit`` feeds its compiled step.

    Arrays are shuffled and cut into batches each epoch (the ``e``-th permutation is the
    data package's ``feistel_permutation`` keyed by ``fold_in(s, e)``, ``s`` a salted
    split of ``chain_seed(seed)``: the library's seed rule); a ``tf.data`` dataset is
    iterated as written (its own shuffling, batching and labels, and per-example
    weights when it yields ``(x, y, sample_weight)``). ``epoch`` yields
    ``(x, y, weights)`` with ``weights`` ``None`` when there are none. Every batch is
    padded to the full batch size with a row mask, so that a partial last batch runs
    the same compiled program. A finite dataset is read once first to count its rows
    ``N`` and batches; a repeating one needs ``steps_per_epoch``.
    """

    def __init__(
        self,
        x: Any,
        y: Any,
        batch_size: int,
        steps_per_epoch: int | None,
        num_examples: int | None,
        shuffle: bool,
        seed: int,
        name: str = "x",
        sample_weight: Any = None,
    ) -> None:
        # The library's seed rule for the order too: epoch e's permutation is keyed by
        # fold_in(s, e), s a split of the chain's seed salted apart from the noise's.
        self._shuffle_seed = split_seed(chain_seed(seed), 1, salt="keras_shuffle")[0]
        self._permutations = 0
        self.shuffle = shuffle
        self.dataset = None
        self.notes: list[str] = []
        if isinstance(x, tf.data.Dataset):
            if y is not None:
                raise ValueError(
                    f"`y` must be None when `{name}` is a tf.data dataset (it yields (x, y) pairs)."
                )
            if sample_weight is not None:
                raise ValueError(
                    f"`sample_weight` must be None when `{name}` is a tf.data dataset: let it "
                    "yield (x, y, sample_weight) triples instead, as with Keras's fit."
                )
            self.dataset = x
            card = int(x.cardinality())
            self.repeating = card == int(tf.data.INFINITE_CARDINALITY)
            try:
                first = next(iter(x.take(1)))
            except StopIteration:
                raise KerasDataError(
                    f"`{name}`: the dataset yields no batches (it is empty, or a filter, "
                    "take(0) or drop_remainder=True with fewer rows than one batch left "
                    "none): pass a dataset with at least one batch."
                ) from None
            xb, yb, _ = self._split(first, name)
            self.batch_size = num_rows(xb)
            if self.repeating:
                if steps_per_epoch is None:
                    raise ValueError(
                        f"`{name}` is a repeating tf.data dataset: pass `steps_per_epoch` "
                        "(batches per epoch), as Keras's fit needs."
                    )
                if not num_examples:
                    # N sets the likelihood's weight: steps x batch size counts the rows an
                    # epoch visits, not the distinct examples, and is wrong as often as not.
                    raise KerasDataError(
                        f"`{name}` repeats without end, so its number of distinct examples "
                        "is unknown: pass `num_examples=` (the training set's size N, which "
                        "the log-likelihood sums over)."
                    )
                self.steps = int(steps_per_epoch)
                self.num_examples = int(num_examples)
                self._iterator = iter(x)
            else:
                steps = rows = 0
                for element in x:
                    xb, _, _ = self._split(element, name)
                    steps += 1
                    rows += num_rows(xb)
                if rows == 0:
                    raise KerasDataError(f"`{name}`: the dataset is empty.")
                self.steps = min(steps, int(steps_per_epoch)) if steps_per_epoch else steps
                repeats = [c for c in _repeat_counts(x) if c > 1]
                if repeats and not num_examples:
                    # Counting the rows would count each example `times` times: a
                    # posterior √times too narrow.
                    times = int(np.prod(repeats))
                    raise KerasDataError(
                        f"`{name}` repeats its rows (.repeat({repeats[0]})): counting them "
                        f"gives {rows} rows for about {rows // times} distinct examples, and "
                        "a posterior too narrow. Pass `num_examples=` (the number of distinct "
                        "training examples), or drop the .repeat() (fit's epochs repeat the "
                        "data already)."
                    )
                self.num_examples = int(num_examples) if num_examples else rows
        else:
            if y is None:
                raise ValueError(f"`y` is required when `{name}` holds arrays.")
            self.repeating = False
            self.x = _host_inputs(x, name)
            self.y = check_numeric_labels(y)
            n = num_rows(self.x)
            if self.y.ndim == 0 or self.y.shape[0] != n:
                raise ValueError(f"`{name}` has {n} rows but `y` has shape {self.y.shape}.")
            if n == 0:
                raise ValueError(f"`{name}` is empty.")
            self.w = None if sample_weight is None else check_sample_weight(sample_weight, n)
            self.batch_size = min(int(batch_size), n)
            self.steps = int(steps_per_epoch) if steps_per_epoch else -(-n // self.batch_size)
            self.num_examples = int(num_examples) if num_examples else n
            self.streaming = steps_per_epoch is not None
            self._order = np.empty(0, np.int64)

    @staticmethod
    def _split(element: Any, name: str) -> tuple[Any, Any, Any]:
        """``(x, y, sample_weight)`` of a dataset element (``sample_weight`` ``None``
        for a pair)."""
        if isinstance(element, (tuple, list)) and len(element) in (2, 3):
            return element[0], element[1], (element[2] if len(element) == 3 else None)
        raise ValueError(
            f"`{name}` must yield (x, y) pairs or (x, y, sample_weight) triples, got an "
            f"element of type {type(element).__name__}."
        )

    def first(self) -> tuple[Any, Any]:
        """The first batch, unpadded, as host arrays."""
        if self.dataset is not None:
            xb, yb, _ = self._split(next(iter(self.dataset.take(1))), "x")
            return tf.nest.map_structure(np.asarray, xb), np.asarray(yb)
        idx = np.arange(min(self.batch_size, num_rows(self.x)))
        return take(self.x, idx), self.y[idx]

    def _permutation(self) -> np.ndarray:
        """The next permutation of the rows (``feistel_permutation`` keyed by the
        seed rule), or their order without ``shuffle``."""
        n = num_rows(self.x)
        if not self.shuffle:
            return np.arange(n)
        key = step_seed(self._shuffle_seed, self._permutations)
        self._permutations += 1
        return feistel_permutation(tf.range(n, dtype=tf.int64), n, key).numpy()

    def epoch(self, max_steps: int | None = None, indices: bool = False) -> Any:
        """Yields ``(x, y, weights)`` host batches (unpadded; ``weights`` ``None`` when
        there are none) for one epoch, or ``max_steps`` of it; with ``indices`` (arrays
        only), each batch's row indices instead."""
        steps = self.steps if max_steps is None else min(self.steps, max_steps)
        if self.dataset is None:
            for idx in self._epoch_indices(steps):
                w = None if self.w is None else self.w[idx]
                yield idx if indices else (take(self.x, idx), self.y[idx], w)
            return
        source = self._iterator if self.repeating else iter(self.dataset)
        for k, element in enumerate(source):
            if k >= steps:
                break
            xb, yb, wb = self._split(element, "x")
            wb = None if wb is None else check_sample_weight(wb, num_rows(xb), "sample_weight")
            yield tf.nest.map_structure(np.asarray, xb), np.asarray(yb), wb

    def _epoch_indices(self, steps: int) -> Any:
        if not self.streaming:
            # One pass over a fresh permutation, the last batch possibly partial.
            perm = self._permutation()
            for k in range(steps):
                yield perm[k * self.batch_size : (k + 1) * self.batch_size]
            return
        # steps_per_epoch given: full batches from a stream of permutations.
        for _ in range(steps):
            while self._order.size < self.batch_size:
                self._order = np.concatenate([self._order, self._permutation()])
            idx, self._order = self._order[: self.batch_size], self._order[self.batch_size :]
            yield idx
