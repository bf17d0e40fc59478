"""The protocol every data source follows, and the minibatch-scheme state.

A gradient estimator reads its data through ``num_examples``, ``float_dtype``,
``init_batch_state``, ``sample_batch`` and ``full_batches``; both
[`InMemoryData`][tfp_sgmcmc.data.InMemoryData] and
[`DatasetData`][tfp_sgmcmc.data.DatasetData] implement them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.internal.util import AttributeView

__all__ = ["BatchState", "DataSource", "zeros_batch_state"]


class BatchState(NamedTuple):
    """Minibatch-scheme state carried in the kernel results.

    ``epoch_seed`` keys the current epoch's permutation (``"epoch"`` scheme);
    ``position`` is the index of the next batch within the epoch. Other schemes
    carry the same (unused) fields so every source has one results structure.
    """

    epoch_seed: tf.Tensor
    position: tf.Tensor


def zeros_batch_state() -> BatchState:
    """The initial ``BatchState`` (epoch seed zero, position zero)."""
    return BatchState(tf.zeros([2], tf.int32), tf.zeros([], tf.int32))


class DataSource:
    """Protocol of the data sources (documented, not enforced)."""

    _num_examples: int
    _float_dtype: tf.DType | None

    num_examples = AttributeView[int]("_num_examples")
    """``N``, the number of examples."""

    float_dtype = AttributeView[tf.DType | None]("_float_dtype")
    """The one floating dtype of the data (``None`` if it has no floating array)."""

    def init_batch_state(self) -> BatchState:  # pragma: no cover - protocol
        raise NotImplementedError

    def sample_batch(
        self, batch_size: int, batch_state: BatchState, seed: tf.Tensor
    ) -> tuple[Any, BatchState]:  # pragma: no cover - protocol
        raise NotImplementedError

    def full_batches(self, chunk_size: int | None = None) -> Iterator[Any]:  # pragma: no cover
        raise NotImplementedError

    def validate_batch_size(self, batch_size: int) -> None:
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool):
            raise ValueError(f"`batch_size` must be a Python int, got {batch_size!r}.")
        if not 1 <= batch_size <= self.num_examples:
            raise ValueError(
                f"`batch_size` must lie in [1, N] = [1, {self.num_examples}], got {batch_size}."
            )
