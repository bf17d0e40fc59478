"""Data sources that gradient estimators draw minibatches from.

Two sources share one small protocol
([`DataSource`][tfp_sgmcmc.data.DataSource]: ``num_examples``, ``float_dtype``,
``init_batch_state``, ``sample_batch``, ``full_batches``):

* [`InMemoryData`][tfp_sgmcmc.data.InMemoryData] holds tensors and draws each
  minibatch from the seed the kernel passes. It is pure (the same seed gives the
  same batch), runs under ``tf.function(jit_compile=True)``, and offers three
  schemes:

  ``"with_replacement"``
      ``n`` i.i.d. uniform row indices per step, then a row gather (what
      SGMCMCJax does).
  ``"epoch"`` (default)
      Without replacement within an epoch: each epoch visits a fresh random
      permutation of the rows in ``⌊N/n⌋`` consecutive batches (the remainder
      rows of that permutation are skipped, like ``drop_remainder``). The
      permutation is a keyed pseudo-random bijection of ``[0, N)`` evaluated on
      the fly ([`feistel_permutation`][tfp_sgmcmc.data.permutation.feistel_permutation]: a
      4-round Feistel network with cycle walking), so the scheme's state is
      just ``(epoch seed, batch position)`` -- two scalars. Keeping an explicit
      N-vector permutation in the kernel results would make
      ``tfp.mcmc.sample_chain``'s default ``trace_fn`` store it at every step.
  ``"random_window"``
      The fastest: the rows are shuffled once (with ``shuffle_seed``) into a
      private copy extended by its first ``n`` rows, and each step takes the
      contiguous window that starts at a uniform offset in ``[0, N)``. Every
      row lies in exactly ``n`` of the ``N`` windows, so its inclusion
      probability is exactly ``n/N`` and the N/n-scaled gradient is unbiased;
      within a window the rows are distinct. Unlike the other schemes, only
      ``N`` distinct batches exist for a given shuffle, and consecutive batches
      are independent draws of the offset. A contiguous slice costs a fraction
      of a random-row gather, which dominates SGLD's step at small batches
      (``docs/benchmarks.md``). Memory: one extra copy of the data.

  When ``n == N`` every scheme returns the whole data set without gathering.

  Under ``"with_replacement"`` and ``"epoch"`` a minibatch is a random-row
  gather, which on CPU costs per row a cache miss per array and, under XLA,
  something per gathered element. The row indices are computed into their own
  buffer before the gather: left to itself, XLA fuses the index computation
  into the gather and evaluates it again for every gathered element. With
  ``pack_rows=True``, ``InMemoryData`` keeps a private copy with the rows of
  all 4- and 8-byte arrays side by side as 64-bit words, each row padded so
  that it never straddles a 64-byte cache line (``x`` and ``y`` of a
  ``d = 10`` float32 logistic regression: 44 bytes of data in a 64-byte row of
  8 words, instead of 10 + 1 elements in two arrays), so a draw is one gather
  of fewer, wider elements and one cache line per row; the batches are
  bit-identical to per-array gathers (measured effect: ``docs/benchmarks.md``,
  "Row-packed gathers"). The copy costs the memory of those arrays once more
  (plus the padding: at most the next power of two of a row below 64 bytes,
  less than one line above), which is why it is not the default: a data set
  that fits in memory once need not fit twice.

* [`DatasetData`][tfp_sgmcmc.data.DatasetData] adapts a ``tf.data.Dataset`` for
  data that does not fit in memory. It is reproducible only if the dataset
  itself is seeded. Its iterator cannot be compiled by XLA (``IteratorGetNext``
  has no XLA kernel), so a compiled sampler is fed in chunks:

  ```none
  dataset iterator ─▶ K batches, stacked ─▶ [K, n, ...] ─▶ XLA program: K steps, draw j reads j
     (a background thread prepares the next block while the program runs)
  ```

  A chunk of ``s`` sampler steps needs ``K = s · c`` minibatches, ``c`` being
  the number of minibatches one step draws (1 for SGLD, ``L`` for SGHMC with
  ``L`` leapfrog steps). A [`StreamFeeder`][tfp_sgmcmc.data.stream.StreamFeeder]
  (made by [`stream_feeder`][tfp_sgmcmc.data.stream.stream_feeder]; the driver makes
  one by itself) finds every ``DatasetData`` a kernel reads and its ``c`` by
  tracing one step, has each source read its stream in prefetched blocks of
  ``K`` stacked batches ([`BlockReader`][tfp_sgmcmc.data.blocks.BlockReader]), and
  passes the blocks that hold a chunk's batches to the compiled chunk program
  as arguments; inside, every minibatch draw reads the next unread batch. The
  ``k``-th minibatch drawn is the dataset's ``k``-th batch, exactly as when the
  iterator is read step by step (under ``tf.function`` without
  ``jit_compile``), so both paths run the same chain from the same seeds.
  After each chunk exactly ``K`` batches must have been read: a kernel drawing
  a data-dependent number of minibatches per step is refused, never fed the
  wrong batches. The tuner's arm programs, which stop early on divergence,
  read the current prefetched block and consume only the batches they read
  (``steps_run`` of [`StreamFeeder.compile`][tfp_sgmcmc.data.stream.StreamFeeder.compile]).
  Memory: the blocks the running chunk reads (two when it starts inside a
  block) plus one prefetched block. See ``docs/estimators.md``, "Out-of-core
  data at in-memory speed", for a pipeline that keeps up and the measured
  speeds.

The package's modules: ``base`` (the protocol), ``permutation`` (the keyed
permutation), ``in_memory``, ``dataset`` (the ``tf.data`` source and its
chunked stream), ``blocks`` (the block reader) and ``stream`` (the feeder).
"""

from __future__ import annotations

from tfp_sgmcmc.data.base import DataSource
from tfp_sgmcmc.data.dataset import DatasetData
from tfp_sgmcmc.data.in_memory import InMemoryData

__all__ = [
    "InMemoryData",
    "DatasetData",
    "DataSource",
]
