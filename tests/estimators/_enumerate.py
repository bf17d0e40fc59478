"""A data source that serves a prescribed list of batches, for exact averages.

``EnumeratedBatches(arrays, index_table)`` returns batch ``k`` (the rows
``index_table[k]``) when ``sample_batch`` is given the seed ``[k, 0]``. Calling
an estimator once per ``k`` evaluates it on *every* possible batch, so its
expectation over the sampling scheme can be computed exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.data import DataSource
from tfp_sgmcmc.data.base import BatchState

__all__ = ["N", "EnumeratedBatches", "linear_gaussian_model", "with_replacement_tuples", "subsets"]

#: Rows of `linear_gaussian_model`: small, so that every batch can be enumerated.
N = 6


def linear_gaussian_model(rng: np.random.Generator) -> tuple[Any, ...]:
    """``(x, y, log_likelihood, log_prior)`` of a 2-feature linear-Gaussian regression on
    ``N`` rows, with a standard normal prior: the exact estimator tests' model."""
    x = rng.standard_normal((N, 2))
    y = x @ np.array([1.0, -0.5]) + rng.standard_normal(N)

    def log_likelihood(theta, batch):
        xb, yb = batch
        return -0.5 * tf.square(yb - tf.einsum("nd,...d->...n", xb, theta))

    def log_prior(theta):
        return -0.5 * tf.reduce_sum(tf.square(theta), -1)

    return x, y, log_likelihood, log_prior


def with_replacement_tuples(num_examples: int, n: int) -> np.ndarray:
    """All ``N**n`` ordered index tuples (equally likely under i.i.d. draws)."""
    return np.array(list(itertools.product(range(num_examples), repeat=n)), np.int32)


def subsets(num_examples: int, n: int) -> np.ndarray:
    """All ``C(N, n)`` subsets (equally likely under sampling without replacement)."""
    return np.array(list(itertools.combinations(range(num_examples), n)), np.int32)


class EnumeratedBatches(DataSource):
    def __init__(self, arrays: Any, index_table: np.ndarray) -> None:
        self._arrays = arrays
        self._flat = [tf.convert_to_tensor(a) for a in tf.nest.flatten(arrays)]
        self._table = tf.constant(index_table, tf.int32)
        self._num_examples = int(self._flat[0].shape[0])
        self._float_dtype = next((t.dtype for t in self._flat if t.dtype.is_floating), None)

    def prepare(self, batch_size: int) -> None:
        self.validate_batch_size(batch_size)
        assert batch_size == int(self._table.shape[1])

    def init_batch_state(self) -> BatchState:
        return BatchState(tf.zeros([2], tf.int32), tf.zeros([], tf.int32))

    def sample_batch(self, batch_size: int, batch_state: BatchState, seed: tf.Tensor):
        idx = self._table[seed[0]]
        flat = [tf.gather(t, idx) for t in self._flat]
        return tf.nest.pack_sequence_as(self._arrays, flat), batch_state

    def full_batches(self, chunk_size: int | None = None) -> Iterator[Any]:
        yield tf.nest.pack_sequence_as(self._arrays, self._flat)
