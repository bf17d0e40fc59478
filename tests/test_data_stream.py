"""tf.data fed to compiled programs in chunks: same minibatch stream, same chain.

The reference is the step-by-step path (the iterator read inside a graph-mode
``tf.function``). The chunked path must draw the same minibatches in the same
order, so with the same seeds it runs the same chain: bit for bit up to float
rounding in graph mode; under XLA (whose random streams differ from graph mode
for one seed) the noiseless chain (temperature 0, a pure function of the batch
sequence) must agree.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.data.blocks import BlockReader
from tfp_sgmcmc.data.dataset import counting_draws
from tfp_sgmcmc.data.stream import StreamFeeder, stream_feeder
from tfp_sgmcmc.driver import sample

N, BATCH = 120, 10
X = np.random.default_rng(0).normal(1.0, 2.0, (N, 2)).astype(np.float32)


def _dataset(reshuffle: bool = True) -> tf.data.Dataset:
    # A cached dataset shuffled by batch, reshuffled every epoch: a second iterator
    # would see another order, so feeding must continue the source's own iterator.
    return (
        tf.data.Dataset.from_tensor_slices(X)
        .batch(BATCH, drop_remainder=True)
        .cache()
        .shuffle(N // BATCH, seed=5, reshuffle_each_iteration=reshuffle)
    )


def _log_lik(theta, x):
    return -0.5 * tf.reduce_sum(tf.square(x - theta), axis=-1)


def _estimator(data=None):
    data = sg.DatasetData(_dataset(), N) if data is None else data
    return sg.MinibatchEstimator(_log_lik, data, BATCH, lambda t: -0.5 * tf.reduce_sum(t**2, -1))


def _fold(kernel, steps):
    def chunk(state, results, seed):
        _, state, results = tfp.experimental.mcmc.sample_fold(
            steps, state, results, kernel, seed=seed
        )
        return state, results

    return chunk


def _run(kernel, chunks, steps, mode):
    """The chain after each chunk: ``mode`` is 'graph' (step by step) or 'fed-graph'/'fed-xla'.

    A ``-started`` mode starts the feeder's stream before the bootstrap reads the
    first batch (as the driver does): every chunk then starts one batch into a
    block and reads across two blocks.
    """
    state = tf.zeros([2])
    if mode.endswith("-started"):
        feeder = stream_feeder(kernel, state)  # traces a step on placeholders: no read
        run = feeder.compile(_fold(kernel, steps), steps, jit_compile="xla" in mode)
        results = kernel.bootstrap_results(state)  # reads batch 0 from the first block
        assert all(src.block_reader.stacked for src in feeder.sources)
    else:
        results = kernel.bootstrap_results(state)  # an eager read of the first batch
    if mode == "graph":
        run = tf.function(_fold(kernel, steps), autograph=False)
    elif not mode.endswith("-started"):
        feeder = StreamFeeder(kernel, state, results)
        with pytest.warns(RuntimeWarning, match="read before its chunked stream started"):
            run = feeder.compile(_fold(kernel, steps), steps, jit_compile=mode == "fed-xla")
    out = []
    for i in range(chunks):
        state, results = run(state, results, tf.constant([3, i]))
        out.append(state.numpy())
    return np.array(out)


@pytest.mark.parametrize("mode", ["fed-graph", "fed-graph-started"])
@pytest.mark.parametrize("make", ["sgld", "sghmc"])
def test_chunked_graph_program_runs_the_step_by_step_chain(make, mode):
    # 4 chunks of 7 steps: chunks straddle the 12-batch epochs and the blocks.
    def kernel():
        est = _estimator()
        if make == "sgld":
            return sg.SGLD(est, 1e-3)
        return sg.SGHMC(est, 1e-3, num_leapfrog_steps=3)

    ref = _run(kernel(), 4, 7, "graph")
    fed = _run(kernel(), 4, 7, mode)
    np.testing.assert_allclose(fed, ref, rtol=1e-6, atol=1e-6)
    # Power: the chain depends on the batch order; a stream one batch late differs.
    est = _estimator()
    est.data._element_iterator().get_next()
    late = _run(
        sg.SGLD(est, 1e-3) if make == "sgld" else sg.SGHMC(est, 1e-3, num_leapfrog_steps=3),
        4,
        7,
        "fed-graph",
    )
    assert np.max(np.abs(late - ref)) > 1e-3


@pytest.mark.parametrize("mode", ["fed-xla", "fed-xla-started"])
def test_chunked_xla_program_follows_the_same_minibatches(mode):
    # Temperature 0: no injected noise, the path is a function of the batches only.
    ref = _run(sg.SGLD(_estimator(), 1e-3, temperature=0.0), 5, 9, "graph")
    fed = _run(sg.SGLD(_estimator(), 1e-3, temperature=0.0), 5, 9, mode)
    np.testing.assert_allclose(fed, ref, rtol=1e-5, atol=1e-6)
    other = sg.DatasetData(_dataset(reshuffle=False).skip(1), N)
    shifted = _run(sg.SGLD(_estimator(other), 1e-3, temperature=0.0), 5, 9, "fed-xla")
    assert np.max(np.abs(shifted - ref)) > 1e-4


def test_feeder_counts_draws_per_step_and_finds_no_source_in_memory():
    est = _estimator()
    kernel = sg.SGHMC(est, 1e-3, num_leapfrog_steps=4)
    state = tf.zeros([2])
    feeder = StreamFeeder(kernel, state, kernel.bootstrap_results(state))
    assert feeder.sources == [est.data] and feeder.draws_per_step == [4]
    mem = sg.SGLD(sg.MinibatchEstimator(_log_lik, X, BATCH), 1e-3)
    assert stream_feeder(mem, state, mem.bootstrap_results(state)) is None
    with pytest.raises(ValueError, match="reads no DatasetData"):
        StreamFeeder(mem, state, mem.bootstrap_results(state))
    with pytest.raises(ValueError, match="`num_steps`"):
        feeder.compile(lambda: None, 0)


class _DataDependentDraws(tfp.mcmc.TransitionKernel):
    """Draws one minibatch on some steps and two on others (cannot be fed in chunks)."""

    def __init__(self, data):
        self.data = data

    @property
    def is_calibrated(self):
        return False

    def bootstrap_results(self, state):
        return self.data.init_batch_state()

    def one_step(self, state, results, seed=None):
        def draws(k):
            def f():
                s = state
                for _ in range(k):
                    s = s + tf.reduce_mean(self.data.sample_batch(BATCH, results, seed)[0])
                return s

            return f

        return tf.cond(state[0] > 0, draws(1), draws(2)), results


def test_a_data_dependent_number_of_draws_is_refused():
    data = sg.DatasetData(_dataset(), N)
    kernel = _DataDependentDraws(data)
    state = tf.ones([2])
    feeder = StreamFeeder(kernel, state, kernel.bootstrap_results(state))
    assert feeder.draws_per_step == [3]  # both branches counted when traced
    run = feeder.compile(_fold(kernel, 2), 2, jit_compile=False)
    with pytest.raises(RuntimeError, match="data-dependent number of minibatches"):
        run(state, kernel.bootstrap_results(state), tf.constant([0, 0]))


def test_block_reader_returns_the_stream_in_order_across_blocks():
    ds = tf.data.Dataset.range(10_000).batch(2, drop_remainder=True)
    spec = tf.nest.flatten(ds.element_spec)
    reader = BlockReader(iter(ds), spec, block=4)
    got = np.concatenate([reader.take(k)[0].numpy().ravel() for k in (3, 4, 1, 9, 4)])
    np.testing.assert_array_equal(got, np.arange(2 * 21))


def test_block_reader_spans_blocks_without_copying_them():
    ds = tf.data.Dataset.range(10_000).batch(2, drop_remainder=True)
    spec = tf.nest.flatten(ds.element_spec)
    reader = BlockReader(iter(ds.batch(4, drop_remainder=True)), spec, block=4, stacked=True)
    first = reader.take(1)[0].numpy()  # a single read: the stream is now one batch in
    blocks, offset = reader.span(4)
    assert (len(blocks), offset) == (2, 1)
    assert blocks[0][0] is reader._segments[0][0]  # the buffered blocks themselves
    laid = np.concatenate([b[0].numpy() for b in blocks])[offset:]
    np.testing.assert_array_equal(laid[:4].ravel(), np.arange(2, 10))
    reader.consume(4)  # past the first block's end: it is dropped
    assert len(reader._segments) == 1 and reader._offset == 1
    blocks, offset = reader.span(9)  # three blocks
    assert (len(blocks), offset) == (3, 1)
    reader.consume(9)  # batches 5 to 13
    np.testing.assert_array_equal(first.ravel(), [0, 1])
    np.testing.assert_array_equal(reader.take(2)[0].numpy().ravel(), np.arange(28, 32))
    with pytest.raises(ValueError, match="run past"):
        reader.consume(10**6)


def test_reads_outside_chunks_continue_the_chunked_stream():
    data = sg.DatasetData(tf.data.Dataset.range(1000).batch(5, drop_remainder=True), 1000)
    first, _ = data.sample_batch(5, data.init_batch_state(), None)  # eager, before chunks
    with pytest.warns(RuntimeWarning, match="read before its chunked stream started"):
        data.start_chunks(3)
    graph_read = tf.function(lambda: data.sample_batch(5, data.init_batch_state(), None)[0])
    eager, _ = data.sample_batch(5, data.init_batch_state(), None)
    np.testing.assert_array_equal(first.numpy(), np.arange(5))
    np.testing.assert_array_equal(eager.numpy(), np.arange(5, 10))
    np.testing.assert_array_equal(graph_read().numpy(), np.arange(10, 15))
    np.testing.assert_array_equal(data.block_reader.take(1)[0].numpy()[0], np.arange(15, 20))


def test_counting_draws_counts_without_reading_within_its_scope_only():
    data = sg.DatasetData(tf.data.Dataset.range(1000).batch(5, drop_remainder=True), 1000)

    def read():
        return data.sample_batch(5, data.init_batch_state(), None)[0].numpy()

    with counting_draws() as counts:
        placeholder = read()
        with counting_draws() as inner:  # the innermost scope counts
            read()
        traced = tf.function(lambda: data.sample_batch(5, data.init_batch_state(), None)[0])
        traced.get_concrete_function()
        # Another thread is outside this scope: its read consumes the stream.
        with ThreadPoolExecutor(1) as pool:
            elsewhere = pool.submit(read).result()
    assert counts == {data: 2} and inner == {data: 1}
    np.testing.assert_array_equal(placeholder, np.zeros(5))
    np.testing.assert_array_equal(elsewhere, np.arange(5))
    # Power: after the scope, reads consume the stream again, where the thread left it.
    np.testing.assert_array_equal(read(), np.arange(5, 10))


def test_feeding_needs_a_chunked_source():
    data = sg.DatasetData(tf.data.Dataset.range(100).batch(5, drop_remainder=True), 100)
    assert data.block_reader is None and not data.chunked
    with pytest.raises(RuntimeError, match="start_chunks"):
        with data.feeding([], tf.constant(0)):
            pass
    with pytest.raises(RuntimeError, match="start_chunks"):
        data.batches_fed()
    data.start_chunks(4)
    assert data.chunked and data.block_reader.block == 4 and data.block_reader.stacked


def test_driver_feeds_xla_chunks_from_tf_data(tmp_path):
    sources = {}

    def run(jit, name):
        sources[jit] = sg.DatasetData(_dataset(), N)
        kernel = sg.SGLD(_estimator(sources[jit]), 1e-3, temperature=0.0)
        return sample(
            kernel,
            tf.zeros([2]),
            12,
            str(tmp_path / name),
            seed=4,
            thin=2,
            num_burnin_steps=5,
            chunk_size=5,
            jit_compile=jit,
            progress=False,
        )

    ref = run(False, "graph").samples()
    fed = run(True, "xla")
    np.testing.assert_allclose(fed.samples(), ref, rtol=1e-5, atol=1e-6)
    # The stream of stacked blocks started before the bootstrap's read (no loop of
    # single reads); blocks hold the longest chunk, 5 draws thinned by 2.
    assert sources[True].block_reader.stacked and sources[True].block_reader.block == 10
    assert sources[False].block_reader is None
    # The driver's graph-mode gradient-noise probe reads the chunked stream too.
    with pytest.warns(RuntimeWarning, match="gradient-noise ratio"):
        noisy = sample(
            sg.SGLD(_estimator(), 1e-3),
            tf.zeros([2]),
            6,
            str(tmp_path / "noisy"),
            chunk_size=4,
            progress=False,
        )
    assert np.all(np.isfinite(noisy.samples())) and noisy.gradient_noise is not None


def test_keras_posterior_on_tf_data_runs_compiled_chunks(tmp_path):
    keras = pytest.importorskip("keras")
    from tfp_sgmcmc.keras import KerasPosterior

    rng = np.random.default_rng(1)
    x = rng.standard_normal((60, 3)).astype(np.float32)
    y = rng.integers(0, 3, 60).astype(np.int32)
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(3)]
    )

    def run(jit, name):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(15, drop_remainder=True).cache()
        post = KerasPosterior(model, ds.shuffle(4, seed=2), num_examples=60)
        kernel = sg.SGLD(post.estimator(), 1e-3, temperature=0.0)
        return sample(
            kernel,
            post.init_state(),
            6,
            str(tmp_path / name),
            chunk_size=3,
            jit_compile=jit,
            progress=False,
        ).samples()

    ref, fed = run(False, "graph"), run(True, "xla")
    for a, b in zip(fed, ref):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert max(float(np.max(np.abs(a[-1] - a[0]))) for a in fed) > 1e-4  # the chain moved


def test_mamba_tunes_on_a_tf_data_source():
    from tfp_sgmcmc import tuning as tu

    full = tf.data.Dataset.from_tensor_slices(X)
    data = sg.DatasetData(_dataset(), N, full_dataset=full)
    est = sg.MinibatchEstimator(
        lambda t, x: -0.5 * tf.reduce_sum(tf.square(x - t[..., tf.newaxis, :]), -1),
        data,
        BATCH,
        lambda t: -0.5 * tf.reduce_sum(t**2, -1),
    )
    # N = 120, so ε = 0.03 is unstable (εN > 2), ε = 1e-6 does not move from 0 toward the
    # posterior mean (≈ 1): ε = 2e-3 is the arm to find.
    with pytest.warns(RuntimeWarning):
        res = tu.MAMBA(
            tu.grid(step_size=[1e-6, 2e-3, 0.03]),
            tf.zeros([2]),
            lambda step_size: sg.SGLD(est, step_size),
            budget=tu.steps(1500),
            eta=3,
            seed=0,
            progress=False,
            sampling=tu.ArmSampling(jit_compile=False),
        ).run()
    assert res.best_index == 1
    assert {r.arm_index: r.diverged for r in res.records}[2]


@pytest.mark.parametrize("keep", [None, 0], ids=["kept", "streamed"])
def test_full_passes_inside_a_traced_function_read_n_examples(keep):
    full = tf.data.Dataset.from_tensor_slices(X)
    data = sg.DatasetData(_dataset(), N, full_dataset=full, full_cache_bytes=keep)
    assert data.full_in_memory == (keep is None)

    @tf.function
    def total(chunk):
        return tf.add_n([tf.reduce_sum(c, axis=0) for c in data.full_batches(chunk)])

    for chunk in (None, 50, 120):
        np.testing.assert_allclose(total(chunk).numpy(), X.sum(0), rtol=1e-5)


@pytest.mark.parametrize("read_first", [False, True])
def test_chunked_reads_from_the_start_are_stacked_by_tf_data(read_first):
    # A reshuffling, seeded dataset: 12 batches an epoch, 40 read across 4 epochs.
    def source():
        return sg.DatasetData(_dataset(), N)

    ref = source()
    want = np.stack([ref.sample_batch(BATCH, None, None)[0].numpy() for _ in range(40)])
    data = source()
    got = []
    if read_first:  # an element read first: the chunks continue that iterator
        got.append(data.sample_batch(BATCH, None, None)[0].numpy())
        with pytest.warns(RuntimeWarning, match="read before its chunked stream started"):
            data.start_chunks(7)
    else:
        data.start_chunks(7)
    assert data.block_reader.stacked != read_first
    got.extend(data.block_reader.take(40 - len(got))[0].numpy())
    np.testing.assert_array_equal(np.stack(got), want)
    # Power: a second iterator of the same dataset sees another order (the stacked
    # stream must be the source's first iterator, and continue no other).
    second = np.stack([b.numpy() for b in ref._dataset.take(40)])
    assert not np.array_equal(second, want)
