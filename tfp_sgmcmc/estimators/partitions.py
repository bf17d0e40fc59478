"""Parameter partitions for structured SG-MCMC: which parameters form a group.

A [`Partition`][tfp_sgmcmc.estimators.partitions.Partition] assigns every scalar entry of every
state part to one of
``M`` groups ``θ_1, …, θ_M`` (Alexos, Boyd & Mandt [1], §4). It stores, for each
state part, an integer array of group ids with the part's *event* shape (the
shape of one chain's part, without leading chain dimensions); the structured
estimators broadcast it over any leading chain dimensions.

Constructors (all take the state parts of ONE chain, as tensors, arrays or
shapes):

* [`partition_by_part`][tfp_sgmcmc.estimators.partitions.partition_by_part] — one group per state
  part (e.g. per layer), or per
  user-given layer label;
* [`partition_modulo`][tfp_sgmcmc.estimators.partitions.partition_modulo] — flat index (over the
  concatenated parts) modulo ``M``,
  the paper's MNIST scheme (§6.1: "evenly distributed into M groups");
* [`partition_random`][tfp_sgmcmc.estimators.partitions.partition_random] — ``M`` balanced random
  groups from a seed;
* [`partition_fully_factorized`][tfp_sgmcmc.estimators.partitions.partition_fully_factorized] —
  every scalar its own group (``M = |θ|``);
* [`partition_by_neuron`][tfp_sgmcmc.estimators.partitions.partition_by_neuron] — weight-tensor
  entries grouped by their index along
  ``axis`` (the output neuron for a ``[in, out]`` dense kernel); parts sharing a
  layer label (a kernel and its bias) share the neuron groups;
* [`partition_from_group_ids`][tfp_sgmcmc.estimators.partitions.partition_from_group_ids] — a user
  mapping (one int array per part).

Every constructor validates the result: ``M`` larger than the number of
parameters, or a group id without any parameter (an empty group), raises a
``ValueError`` naming the argument.

#### References

[1]: Antonios Alexos, Alex Boyd and Stephan Mandt. Structured Stochastic
     Gradient MCMC. In _ICML_, 2022. https://arxiv.org/abs/2107.09028
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tfp_sgmcmc.internal.util import AttributeView, check_int

__all__ = [
    "Partition",
    "partition_by_part",
    "partition_modulo",
    "partition_random",
    "partition_fully_factorized",
    "partition_by_neuron",
    "partition_from_group_ids",
]


def _shape_of(part: Any) -> tuple[int, ...]:
    """The static shape of a tensor, array, or a shape given directly."""
    if isinstance(part, (tuple, list)) and all(isinstance(s, (int, np.integer)) for s in part):
        return tuple(int(s) for s in part)
    shape = getattr(part, "shape", None)
    if shape is None:
        return np.shape(part)
    dims = list(shape) if not hasattr(shape, "as_list") else shape.as_list()
    if any(d is None for d in dims):
        raise ValueError(f"`state_parts` must have static shapes, got {dims}.")
    return tuple(int(d) for d in dims)


def _shapes(state_parts: Any) -> list[tuple[int, ...]]:
    if isinstance(state_parts, (list, tuple)) and not (
        len(state_parts) > 0 and all(isinstance(s, (int, np.integer)) for s in state_parts)
    ):
        parts = list(state_parts)
    else:
        parts = [state_parts]
    if not parts:
        raise ValueError("`state_parts` must contain at least one part.")
    return [_shape_of(p) for p in parts]


def _check_num_groups(num_groups: Any, num_params: int) -> int:
    if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)):
        raise ValueError(f"`num_groups` must be an int, got {num_groups!r}.")
    if num_groups < 1:
        raise ValueError(f"`num_groups` must be >= 1, got {num_groups}.")
    if num_groups > num_params:
        raise ValueError(
            f"`num_groups` = {num_groups} is larger than the number of parameters "
            f"({num_params}): some groups would be empty."
        )
    return int(num_groups)


class Partition:
    """``M`` parameter groups over the state parts of one chain.

    Args:
      group_ids: one integer array per state part, with that part's event
        shape, holding group ids in ``[0, num_groups)``.
      num_groups: ``M``. Default value: ``None`` (``max id + 1``).
      arg_name: the argument name used in error messages. Default value:
        ``'group_ids'``.

    Raises:
      ValueError: a non-integer or negative id, an id ``>= num_groups``, or a
        group in ``[0, M)`` with no parameter (an empty group).
    """

    def __init__(
        self,
        group_ids: Sequence[Any],
        num_groups: int | None = None,
        arg_name: str = "group_ids",
    ) -> None:
        if not isinstance(group_ids, (list, tuple)) or not group_ids:
            raise ValueError(f"`{arg_name}` must be a non-empty list of int arrays (one per part).")
        ids = []
        for i, g in enumerate(group_ids):
            a = np.asarray(g)
            if a.dtype.kind not in "iu":
                raise ValueError(f"`{arg_name}[{i}]` must be an integer array, got {a.dtype}.")
            if a.size and a.min() < 0:
                raise ValueError(f"`{arg_name}[{i}]` contains negative group ids.")
            ids.append(a.astype(np.int32))
        flat = np.concatenate([a.ravel() for a in ids])
        if flat.size == 0:
            raise ValueError(f"`{arg_name}` covers no parameters.")
        inferred = int(flat.max()) + 1
        if num_groups is not None:
            num_groups = check_int(num_groups, "num_groups", minimum=1)
        if num_groups is None:
            num_groups = inferred
        elif inferred > num_groups:
            raise ValueError(
                f"`{arg_name}` uses group id {inferred - 1} but `num_groups` = {num_groups}."
            )
        counts = np.bincount(flat, minlength=num_groups)
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            raise ValueError(
                f"`{arg_name}` leaves {empty.size} empty group(s) (e.g. group {int(empty[0])}): "
                "every group in [0, num_groups) needs at least one parameter."
            )
        self._ids = ids
        self._num_groups = int(num_groups)
        self._sizes = counts.astype(np.int64)

    @property
    def group_ids(self) -> list[np.ndarray]:
        """Per-part int32 arrays of group ids (event shapes)."""
        return list(self._ids)

    num_groups = AttributeView[int]("_num_groups")
    """``M``."""

    @property
    def group_sizes(self) -> np.ndarray:
        """Number of scalar parameters in each group."""
        return self._sizes.copy()

    @property
    def num_parameters(self) -> int:
        return int(self._sizes.sum())

    @property
    def event_shapes(self) -> list[tuple[int, ...]]:
        return [a.shape for a in self._ids]

    @property
    def num_parts(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return (
            f"Partition(num_groups={self._num_groups}, parts={self.event_shapes}, "
            f"group_sizes=[{self._sizes.min()}..{self._sizes.max()}])"
        )


def partition_from_group_ids(group_ids: Sequence[Any], num_groups: int | None = None) -> Partition:
    """A user mapping: ``group_ids[p]`` (event shape of part ``p``) gives each entry's group.

    Raises:
      ValueError: negative ids, a ``num_groups`` that is not an int >= 1, ids
        ``>= num_groups`` or an empty group.
    """
    return Partition(group_ids, num_groups, arg_name="group_ids")


def partition_by_part(state_parts: Any, part_layers: Sequence[int] | None = None) -> Partition:
    """One group per state part, or per layer label when ``part_layers`` is given.

    Args:
      state_parts: the parts of one chain's state (tensors, arrays or shapes).
      part_layers: optional layer label per part; parts with equal labels form
        one group (e.g. ``[0, 0, 1, 1]`` for ``[kernel1, bias1, kernel2, bias2]``:
        one group per layer). Default value: ``None`` (one group per part).

    Raises:
      ValueError: ``part_layers`` of the wrong length.
    """
    shapes = _shapes(state_parts)
    labels = _layer_labels(part_layers, len(shapes))
    return Partition(
        [np.full(s, lab, np.int32) for s, lab in zip(shapes, labels)], arg_name="state_parts"
    )


def _layer_labels(part_layers: Sequence[int] | None, n: int) -> list[int]:
    if part_layers is None:
        return list(range(n))
    labels = list(part_layers)
    if len(labels) != n:
        raise ValueError(f"`part_layers` has {len(labels)} labels for {n} state parts.")
    # Relabel to consecutive ids in order of first appearance.
    order: dict[Any, int] = {}
    for lab in labels:
        order.setdefault(lab, len(order))
    return [order[lab] for lab in labels]


def partition_modulo(state_parts: Any, num_groups: int) -> Partition:
    """Group of the flat index ``j`` (over the concatenated parts) is ``j mod M``.

    Raises:
      ValueError: ``num_groups`` < 1 or larger than the number of parameters.
    """
    shapes = _shapes(state_parts)
    sizes = [int(np.prod(s)) for s in shapes]
    m = _check_num_groups(num_groups, sum(sizes))
    flat = np.arange(sum(sizes)) % m
    return Partition(_split(flat, shapes), m, arg_name="num_groups")


def partition_random(state_parts: Any, num_groups: int, seed: int = 0) -> Partition:
    """``M`` random groups of (almost) equal size: a seeded permutation, then ``mod M``.

    Balanced by construction, so no group is empty.

    Args:
      state_parts: the parts of one chain's state.
      num_groups: ``M``.
      seed: NumPy seed of the permutation. Default value: ``0``.

    Raises:
      ValueError: ``num_groups`` < 1 or larger than the number of parameters.
    """
    shapes = _shapes(state_parts)
    sizes = [int(np.prod(s)) for s in shapes]
    m = _check_num_groups(num_groups, sum(sizes))
    perm = np.random.default_rng(seed).permutation(sum(sizes))
    flat = perm % m
    return Partition(_split(flat, shapes), m, arg_name="num_groups")


def partition_fully_factorized(state_parts: Any) -> Partition:
    """Every scalar parameter its own group (``M = |θ|``; mean-field)."""
    shapes = _shapes(state_parts)
    total = sum(int(np.prod(s)) for s in shapes)
    return Partition(_split(np.arange(total), shapes), total, arg_name="state_parts")


def partition_by_neuron(
    state_parts: Any, axis: int = -1, part_layers: Sequence[int] | None = None
) -> Partition:
    """Group weight-tensor entries by their index along ``axis`` (one group per neuron).

    For a dense kernel ``[in, out]`` and ``axis=-1`` the group of ``W[:, j]`` is
    output neuron ``j``; a bias ``[out]`` has one entry per neuron. Parts with
    the same ``part_layers`` label share their neuron groups (a Keras layer's
    ``kernel`` and ``bias``: ``part_layers=[0, 0, 1, 1]``); they must then have
    the same length along ``axis``. Scalars (rank 0) form one group.

    Args:
      state_parts: one chain's weight tensors (tensors, arrays or shapes).
      axis: the neuron axis of every part. Default value: ``-1``.
      part_layers: optional layer label per part. Default value: ``None``
        (every part is its own layer).

    Raises:
      ValueError: ``axis`` out of range for a part, parts of one layer with
        different neuron counts, or ``part_layers`` of the wrong length.
    """
    shapes = _shapes(state_parts)
    labels = _layer_labels(part_layers, len(shapes))
    neurons: dict[int, int] = {}
    for i, (s, lab) in enumerate(zip(shapes, labels)):
        n = 1
        if len(s):
            if not -len(s) <= axis < len(s):
                raise ValueError(f"`axis` = {axis} is out of range for part {i} of shape {s}.")
            n = s[axis]
        if neurons.setdefault(lab, n) != n:
            raise ValueError(
                f"`part_layers`: part {i} has {n} neurons along `axis` but its layer has "
                f"{neurons[lab]}."
            )
    offsets, total = {}, 0
    for lab in sorted(neurons):
        offsets[lab] = total
        total += neurons[lab]
    ids = []
    for s, lab in zip(shapes, labels):
        if not len(s):
            ids.append(np.full(s, offsets[lab], np.int32))
            continue
        ax = axis % len(s)
        idx = np.arange(s[ax]).reshape([-1 if d == ax else 1 for d in range(len(s))])
        ids.append(np.broadcast_to(idx + offsets[lab], s).astype(np.int32))
    return Partition(ids, total, arg_name="state_parts")


def _split(flat: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    out, start = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(flat[start : start + n].reshape(s).astype(np.int32))
        start += n
    return out
