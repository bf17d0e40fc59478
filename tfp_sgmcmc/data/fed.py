"""Minibatches a caller feeds a compiled program, one stacked block per call.

A kernel's minibatch draws usually come from the data source itself: rows gathered
from arrays ([`InMemoryData`][tfp_sgmcmc.data.InMemoryData]) or a ``tf.data`` stream
([`DatasetData`][tfp_sgmcmc.data.DatasetData]). Some callers build their batches on the
host, with what no generic source knows: Keras's sample and class weights, padded
partial batches with a row mask, a generator's batches. A
[`FedBatches`][tfp_sgmcmc.data.fed.FedBatches] takes them as they are:

```none
host: K batches, stacked ─▶ [K, n, ...] ─▶ compiled program: `with data.feeding(block):`
                                               run_steps(kernel, ...)  # draw j reads j
```

Inside a [`feeding`][tfp_sgmcmc.data.fed.FedBatches.feeding] scope (entered while the
program is traced) the ``j``-th minibatch draw reads batch ``j`` of the block, by a
gather whose index XLA takes at run time, so one program serves every block of one
shape. A draw outside a scope is an error: the source has no data of its own. The
kernel's seed does not choose the batch; the caller's order does.

What a batch holds is the caller's: the estimator that reads it interprets it (a row
mask of ``-1`` on padding rows, for example, as ``tfp_sgmcmc.keras.BayesianModel``
feeds them). The pattern is the one the chunked ``tf.data`` stream uses
(``docs/estimators.md``, "Out-of-core data at in-memory speed").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.data.base import BatchState, DataSource, zeros_batch_state
from tfp_sgmcmc.internal.util import check_int

__all__ = ["FedBatches"]


class FedBatches(DataSource):
    """Minibatches fed to a compiled program in stacked blocks (module docstring).

    Args:
      num_examples: ``N``, the number of examples the batches are drawn from (what
        an estimator scales a minibatch sum by).
      batch_size: the rows of every fed batch (padded partial batches included).
      float_dtype: the floating dtype of the batches. Default value: ``None``.

    Raises:
      ValueError: ``num_examples`` or ``batch_size`` not a positive int, or a
        ``batch_size`` above ``num_examples``.
    """

    def __init__(
        self, num_examples: int, batch_size: int, float_dtype: tf.DType | None = None
    ) -> None:
        self._num_examples = check_int(num_examples, "num_examples", 1)
        self.validate_batch_size(batch_size)
        self._batch_size = int(batch_size)
        self._float_dtype = None if float_dtype is None else tf.as_dtype(float_dtype)
        self._block: Any = None
        # A variable, read and advanced by the draws inside the program: the j-th draw
        # of a call reads batch j whatever the kernel's structure of draws.
        self._cursor = tf.Variable(0, dtype=tf.int32, trainable=False, name="fed_cursor")

    @property
    def batch_size(self) -> int:
        """The rows of every fed batch."""
        return self._batch_size

    def init_batch_state(self) -> BatchState:
        return zeros_batch_state()

    def prepare(self, batch_size: int) -> None:
        """Check an estimator's ``batch_size`` against the fed batches' size."""
        self.validate_batch_size(batch_size)
        if batch_size != self._batch_size:
            raise ValueError(
                f"`batch_size` {batch_size} differs from the fed batches' {self._batch_size}."
            )

    @contextlib.contextmanager
    def feeding(self, block: Any) -> Iterator[None]:
        """A scope, while a program is traced, in which draws read ``block``.

        On entry the program resets the read cursor: the ``j``-th draw in the scope
        (``j = 0, 1, …``) reads ``block[j]`` (every leaf's row ``j``).

        Args:
          block: a nest of tensors ``[K, batch_size, ...]`` (one batch per row).

        Raises:
          ValueError: a leaf whose second dimension is not ``batch_size``.
        """
        for leaf in tf.nest.flatten(block):
            shape = tf.convert_to_tensor(leaf).shape
            if shape.rank is not None and (shape.rank < 2 or shape[1] not in (None,
                                                                              self._batch_size)):
                raise ValueError(
                    f"`block` leaves must have shape [K, {self._batch_size}, ...], got "
                    f"{shape.as_list()}."
                )
        self._block = block
        self._cursor.assign(0)
        try:
            yield
        finally:
            self._block = None

    def sample_batch(
        self, batch_size: int, batch_state: BatchState, seed: tf.Tensor
    ) -> tuple[Any, BatchState]:
        """The next fed batch (the seed does not choose it).

        Raises:
          RuntimeError: called outside a ``feeding`` scope.
          ValueError: ``batch_size`` is not the fed batches' size.
        """
        del seed
        if self._block is None:
            raise RuntimeError(
                "FedBatches has no data of its own: draw inside `with data.feeding(block):`."
            )
        if batch_size != self._batch_size:
            raise ValueError(
                f"`batch_size` {batch_size} differs from the fed batches' {self._batch_size}."
            )
        i = self._cursor.assign_add(1, read_value=True) - 1
        # A gather, not `a[i]`: XLA compiles a slice's start as a constant (one
        # program per index); a gather takes it at run time.
        batch = tf.nest.map_structure(lambda a: tf.gather(a, i), self._block)
        return batch, batch_state

    def batches_fed(self) -> tf.Tensor:
        """The batches read since the last ``feeding`` scope opened (``int32``)."""
        return self._cursor.read_value()

    def full_batches(self, chunk_size: int | None = None) -> Iterator[Any]:
        raise NotImplementedError(
            "FedBatches has no full data: the caller feeds minibatches only."
        )
