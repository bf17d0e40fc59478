"""A stream of ``tf.data`` batches read ``K`` at a time, stacked, and prefetched.

A compiled chunk of sampler steps reads its minibatches from blocks of stacked
batches passed to it as arguments (see
[`StreamFeeder`][tfp_sgmcmc.data.stream.StreamFeeder]); a
[`BlockReader`][tfp_sgmcmc.data.blocks.BlockReader] prepares those blocks from a
source's iterator in a background thread while the current chunk runs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import tensorflow as tf

from tfp_sgmcmc.internal.util import check_int

__all__ = ["BlockReader"]


class BlockReader:
    """Reads a stream of batches ``K`` at a time, stacked along a new leading axis.

    One compiled graph reads ``block`` batches from the iterator in a
    ``tf.while_loop`` and stacks them; a background thread runs it for the
    next block while the caller computes on the current one (TensorFlow
    releases the GIL while the ops run). The iterator is the source's own, so
    the stream continues exactly where earlier reads stopped (a new iterator
    would restart it, with a new order if the dataset reshuffles).
    [`take`][tfp_sgmcmc.data.blocks.BlockReader.take] returns any number of
    batches in stream order (whole blocks without a copy).

    With ``stacked=True`` the iterator yields whole blocks ``[block, n, ...]``
    (a ``dataset.batch(block)`` stream, which
    [`DatasetData`][tfp_sgmcmc.data.DatasetData] uses when no batch was read
    before the chunked reads start): ``tf.data`` stacks them itself, without
    graph ops per batch. The loop's ops compete with the running program for
    the cores, so a stream of whole blocks feeds a chunk faster
    (``docs/estimators.md``, "Out-of-core data at in-memory speed", gives the
    measured speeds).

    Args:
      iterator: a ``tf.data`` iterator of minibatches (infinite), or of
        stacked blocks of ``block`` minibatches with ``stacked=True``.
      flat_spec: the flat ``tf.TensorSpec`` list of one minibatch.
      block: batches per prefetched block (a positive int).
      stacked: whether ``iterator`` yields whole blocks. Default value:
        ``False``.
    """

    def __init__(
        self,
        iterator: Any,
        flat_spec: Sequence[tf.TensorSpec],
        block: int,
        stacked: bool = False,
    ) -> None:
        self.block = check_int(block, "block", 1)
        #: Whether the iterator yields whole blocks.
        self.stacked = bool(stacked)
        specs = list(flat_spec)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tf-data-block")
        self._next: Future | None = None
        # Buffered batches in stream order: segments (flat lists of [m, ...] tensors,
        # whole blocks or pieces), the first one read from ``_offset`` on.
        self._segments: deque[list[tf.Tensor]] = deque()
        self._offset = 0
        if stacked:
            shapes = [[self.block, *s.shape] for s in specs]
            have = [t.shape.as_list() for t in tf.nest.flatten(iterator.element_spec)]
            if have != shapes:
                raise ValueError(
                    f"`iterator` must yield blocks of shapes {shapes} with `stacked=True`, "
                    f"got {have}."
                )
            self._pull = lambda k: tf.nest.flatten(iterator.get_next())
            return

        def pull(k: tf.Tensor) -> list[tf.Tensor]:
            arrays = [tf.TensorArray(s.dtype, size=k, element_shape=s.shape) for s in specs]

            def body(i: tf.Tensor, *arrays: tf.TensorArray) -> tuple[Any, ...]:
                flat = tf.nest.flatten(iterator.get_next())
                return (i + 1, *[a.write(i, t) for a, t in zip(arrays, flat)])

            # parallel_iterations=1: the reads must happen in stream order.
            out = tf.while_loop(
                lambda i, *_: i < k, body, (tf.constant(0), *arrays), parallel_iterations=1
            )
            return [a.stack() for a in out[1:]]

        self._pull = tf.function(pull, autograph=False)

    def _fetch(self) -> list[tf.Tensor]:
        return self._pull(tf.constant(self.block, tf.int32))

    def _append_block(self) -> None:
        block = self._next.result() if self._next is not None else self._fetch()
        self._segments.append(block)
        # Read the next block while the caller computes on this one.
        self._next = self._executor.submit(self._fetch)

    def _head(self) -> list[tf.Tensor]:
        """The first segment with an unread batch (fetching a block if none is left)."""
        while self._segments and self._offset == int(self._segments[0][0].shape[0]):
            self._segments.popleft()
            self._offset = 0
        if not self._segments:
            self._append_block()
        return self._segments[0]

    def take(self, k: int) -> list[tf.Tensor]:
        """The next ``k`` batches, flat: one tensor ``[k, n, ...]`` per array."""
        k = check_int(k, "k", 1)
        pieces: list[list[tf.Tensor]] = []
        need = k
        while need:
            head = self._head()
            size = int(head[0].shape[0])
            m = min(need, size - self._offset)
            if m == size:
                pieces.append(head)
            else:
                pieces.append([t[self._offset : self._offset + m] for t in head])
            self._offset += m
            need -= m
        if len(pieces) == 1:
            return pieces[0]
        return [tf.concat(ts, axis=0) for ts in zip(*pieces)]

    def span(self, need: int) -> tuple[list[list[tf.Tensor]], int]:
        """``(blocks, offset)``: the buffered blocks that hold the next ``need`` batches.

        Nothing is consumed or copied: the batches are ``offset, offset + 1,
        ...`` of the blocks laid end to end (one block when they lie in the
        head block, more when they run past its end, e.g. after single reads
        left the stream between block boundaries). Blocks not yet read are
        fetched. [`consume`][tfp_sgmcmc.data.blocks.BlockReader.consume]
        then moves past the batches a program read.
        """
        need = check_int(need, "need", 1)
        head = self._head()
        blocks, have = [head], int(head[0].shape[0]) - self._offset
        while have < need:
            while len(self._segments) <= len(blocks):
                self._append_block()
            nxt = self._segments[len(blocks)]
            blocks.append(nxt)
            have += int(nxt[0].shape[0])
        return blocks, self._offset

    def consume(self, m: int) -> None:
        """Move past the next ``m`` batches of a
        [`span`][tfp_sgmcmc.data.blocks.BlockReader.span] (dropping the blocks read to
        their end)."""
        m = check_int(m, "m", 0)
        while m:
            size = int(self._segments[0][0].shape[0]) if self._segments else 0
            step = min(m, size - self._offset)
            if step <= 0:
                raise ValueError(f"{m} batches run past the buffered blocks.")
            self._offset += step
            m -= step
            if self._offset == size:
                self._segments.popleft()
                self._offset = 0

    def window(self, need: int) -> tuple[list[tf.Tensor], int]:
        """``(block, offset)``: ``block`` batches holding the next ones from ``offset`` on.

        Nothing is consumed: a program reads batches ``offset, offset + 1, ...``
        of ``block`` (always ``[block, n, ...]``, so one compiled shape serves
        every call) and then [`advance`][tfp_sgmcmc.data.blocks.BlockReader.advance]
        moves past the ones it read, however many that was. ``block`` is the
        prefetched block itself (no copy) while it still holds ``need``
        unread batches; otherwise its unread tail and the next batches are
        copied into one new block starting at offset 0.
        """
        need = check_int(need, "need", 1)
        if need > self.block:
            raise ValueError(f"`need` = {need} exceeds the block of {self.block} batches.")
        head = self._head()
        if int(head[0].shape[0]) == self.block and self.block - self._offset >= need:
            return head, self._offset
        realigned = self.take(self.block)
        if self._segments:  # the segment the copy ended in keeps only its unread part
            head, size = self._segments[0], int(self._segments[0][0].shape[0])
            if self._offset == size:
                self._segments.popleft()
            elif self._offset:
                self._segments[0] = [t[self._offset :] for t in head]
        self._segments.appendleft(realigned)
        self._offset = 0
        return realigned, 0

    def advance(self, m: int) -> None:
        """Consume ``m`` batches of the last
        [`window`][tfp_sgmcmc.data.blocks.BlockReader.window]."""
        m = check_int(m, "m", 0)
        size = int(self._segments[0][0].shape[0]) if self._segments else 0
        if self._offset + m > size:
            raise ValueError(
                f"`m` = {m} batches run past the window ({size - self._offset} unread)."
            )
        self._offset += m
