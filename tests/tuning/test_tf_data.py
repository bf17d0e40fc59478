"""Tuner arms on a ``tf.data`` source: XLA programs fed from prefetched blocks.

The reference is the step-by-step path (``jit_compile=False``: the iterator is
read inside a graph-mode program). The fed arm program must draw the same
minibatches in the same order, across block boundaries (a call stops at the
end of its block) and the bootstrap reads between rounds, so with the same
seeds it runs the same chain: bit for bit when the fed program runs as a graph;
under XLA (whose random streams differ from graph mode) the noiseless chain
(temperature 0, a function of the batch sequence only) must agree.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
from tfp_sgmcmc.data.blocks import BlockReader
from tfp_sgmcmc.tuning import runner as runner_module
from tfp_sgmcmc.tuning.runner import ArmRunner

N, BATCH = 120, 10
X = np.random.default_rng(0).normal(1.0, 2.0, (N, 2)).astype(np.float32)
ROUNDS = (9, 25, 13)  # steps per round: 47 steps cross several 7-step blocks


def _dataset(reshuffle: bool = True, batch: int = BATCH) -> tf.data.Dataset:
    # Cached, shuffled by batch with a seed, reshuffled every epoch: a second iterator
    # would see another order, so the arm must continue the source's own iterator.
    return (
        tf.data.Dataset.from_tensor_slices(X)
        .batch(batch, drop_remainder=True)
        .cache()
        .shuffle(N // batch, seed=5, reshuffle_each_iteration=reshuffle)
    )


def _log_lik(theta, x):
    return -0.5 * tf.reduce_sum(tf.square(x - theta[..., tf.newaxis, :]), axis=-1)


def _log_prior(theta):
    return -0.5 * tf.reduce_sum(theta**2, -1)


def _estimator(data=None, batch: int = BATCH) -> sg.MinibatchEstimator:
    if data is None:
        data = sg.DatasetData(
            _dataset(batch=batch), N, full_dataset=tf.data.Dataset.from_tensor_slices(X)
        )
    return sg.MinibatchEstimator(_log_lik, data, batch, _log_prior)


@pytest.fixture
def small_blocks(monkeypatch):
    # 7 batches per prefetched block: 7 SGLD steps, 2 SGHMC steps (3 batches each).
    monkeypatch.setattr(runner_module, "FEED_BLOCK_BYTES", 7 * BATCH * 2 * 4)


def _arm(mode: str, kind: str, temperature: float = 1.0, data=None) -> tuple:
    """The thinned samples and log-densities of three rounds of one arm."""
    est = _estimator(data)
    if kind == "sgld":
        make = lambda step_size: sg.SGLD(est, step_size, temperature=temperature)  # noqa: E731
    else:
        make = lambda step_size: sg.SGHMC(  # noqa: E731
            est, step_size, num_leapfrog_steps=3, temperature=temperature
        )
    runner = ArmRunner(
        make, [{"step_size": 1e-3}], tf.zeros([2]), thin=2, seed=1, max_steps_per_call=20,
        jit_compile=mode == "fed-xla",
    )
    if mode == "fed-graph":
        runner._stream_jit = False  # the fed program, as a graph
    samples, lps = [], []
    for steps in ROUNDS:
        out = runner.run(0, steps, tu.steps(1))
        assert out.steps == steps and not out.diverged
        samples.append(out.samples[0])
        lps.append(out.target_log_prob)
    (prog,) = runner._programs.values()
    fed = mode != "graph"
    assert est.data.chunked == fed and (prog.feeder is not None) == fed
    if fed:
        assert prog.feed_steps == (7 if kind == "sgld" else 2)
    return np.concatenate(samples), np.concatenate(lps)


@pytest.mark.parametrize("kind", ["sgld", pytest.param("sghmc", marks=pytest.mark.slow)])
def test_fed_arm_program_runs_the_step_by_step_chain(small_blocks, kind):
    ref, ref_lp = _arm("graph", kind)
    fed, fed_lp = _arm("fed-graph", kind)
    assert ref.shape == (sum(ROUNDS) // 2 - 1, 2)  # partial groups complete next round
    if kind == "sghmc":  # 3 batches a step: blocks are re-cut when < 3 batches are left
        np.testing.assert_array_equal(fed, ref)
        np.testing.assert_array_equal(fed_lp, ref_lp)
    else:
        # Graph-mode float rounding of the injected noise differs between the two
        # programs (2e-7); the noiseless chain is equal bit for bit.
        np.testing.assert_allclose(fed, ref, rtol=1e-6, atol=1e-6)
        cold_ref, _ = _arm("graph", kind, temperature=0.0)
        cold_fed, _ = _arm("fed-graph", kind, temperature=0.0)
        np.testing.assert_array_equal(cold_fed, cold_ref)


@pytest.mark.parametrize("kind", ["sgld", "sghmc"])
def test_fed_xla_arm_follows_the_same_minibatches(small_blocks, kind):
    ref, _ = _arm("graph", kind, temperature=0.0)
    fed, _ = _arm("fed-xla", kind, temperature=0.0)
    np.testing.assert_allclose(fed, ref, rtol=1e-5, atol=1e-6)
    # Power: the path depends on the batch order; a stream one batch late differs.
    fixed, _ = _arm("graph", kind, temperature=0.0, data=sg.DatasetData(_dataset(False), N))
    late, _ = _arm(
        "fed-xla", kind, temperature=0.0, data=sg.DatasetData(_dataset(False).skip(1), N)
    )
    assert np.max(np.abs(late - fixed)) > 1e-4


def test_block_reader_windows_consume_only_what_was_read():
    ds = tf.data.Dataset.range(10_000).batch(2, drop_remainder=True)
    reader = BlockReader(iter(ds), tf.nest.flatten(ds.element_spec), block=4)
    read = []

    def window_read(need: int, m: int) -> None:
        (block,), offset = reader.window(need)
        assert block.shape[0] == 4 and 4 - offset >= need
        read.extend(block.numpy()[offset : offset + m, 0] // 2)
        reader.advance(m)

    window_read(1, 3)  # batches 0-2 of block 0
    window_read(1, 1)  # batch 3: the block is used up
    window_read(3, 2)  # batches 4, 5 of block 1
    window_read(3, 3)  # 2 left < 3: re-cut into [6, 7, 8, 9], read 6-8
    read.extend(reader.take(3)[0].numpy()[:, 0] // 2)  # 9, then 10, 11 of the stream
    window_read(4, 4)  # a whole block again
    np.testing.assert_array_equal(read, np.arange(16))
    with pytest.raises(ValueError, match="`need`"):
        reader.window(5)
    with pytest.raises(ValueError, match="`m`"):
        reader.advance(9)


def test_mamba_tunes_on_a_tf_data_source_with_xla_chunks():
    est = _estimator()
    # N = 120, so ε = 0.03 is unstable (εN > 2), ε = 1e-6 does not move from 0 toward the
    # posterior mean (≈ 1): ε = 2e-3 is the arm to find.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = tu.MAMBA(
            tu.grid(step_size=[1e-6, 2e-3, 0.03]),
            tf.zeros([2]),
            lambda step_size: sg.SGLD(est, step_size),
            budget=tu.steps(1500),
            eta=3,
            seed=0,
            progress=False,
            sampling=tu.ArmSampling(jit_compile=True),
        ).run()
    # The full data (960 bytes) are kept in memory: the full-data scores compile.
    assert est.data.full_in_memory
    assert not [w for w in caught if "could not be XLA-compiled" in str(w.message)]
    assert est.data.chunked  # the arms ran as fed XLA programs
    assert res.best_index == 1 and math.isfinite(res.best_metric)
    assert {r.arm_index: r.diverged for r in res.records}[2]
    assert res.num_programs == 1
    assert all(r.compile_seconds == 0 for r in res.records[1:])


def test_grid_search_and_heuristic_on_tf_data():
    est = _estimator()
    kw = dict(kernel=tu.KernelSpec(sg.SGLD, est), seed=2)
    res = tu.grid_search(
        tu.grid(step_size=[2e-3, 0.03]), tf.zeros([2]), budget_per_arm=tu.steps(300),
        progress=False, **kw,
    )
    assert est.data.chunked and res.best_index == 0
    assert [r.steps for r in res.records] == [300, res.records[1].steps]
    assert res.records[1].diverged and res.records[1].steps < 300
    # The heuristic's 10% batch is 12 rows here: it must match the dataset's batches.
    h = tu.heuristic(N, tf.zeros([2]), batch_fraction=BATCH / N, budget=tu.steps(300), **kw)
    assert h.records[0].steps == 300 and math.isfinite(h.records[0].metric)


def test_batch_size_arms_on_one_tf_data_source_are_refused():
    est = _estimator()
    with pytest.raises(ValueError, match=r"`batch_fraction` = 0.5 asks for minibatches of 60"):
        tu.grid_search(
            tu.grid(step_size=[1e-3], batch_fraction=[BATCH / N, 0.5]),
            tf.zeros([2]),
            tu.KernelSpec(sg.SGLD, est),
            budget_per_arm=tu.steps(10),
            progress=False,
        )
    with pytest.raises(ValueError, match=r"`batch_fraction` = 0.1 .*of 12.*one DatasetData"):
        tu.heuristic(N, tf.zeros([2]), tu.KernelSpec(sg.SGLD, est), budget=tu.steps(10))
    with pytest.raises(ValueError, match=r"`batch_size` = 20 asks for minibatches of 20"):
        tu.grid_search(
            [{"step_size": 1e-3, "batch_size": 20}],
            tf.zeros([2]),
            tu.KernelSpec(sg.SGLD, est),
            progress=False,
        )
    with pytest.raises(ValueError, match=r"`batch_size` = 20 asks for minibatches of 20"):
        tu.grid_search(
            [{"step_size": 1e-3, "batch_size": 20}],
            tf.zeros([2]),
            tu.KernelSpec(sg.SGLD, sg.SVRGEstimator(est, update_rate=5)),
            progress=False,
        )
    # One DatasetData per batch size, built by make_kernel: each arm reads its own stream.
    estimators: dict[int, sg.MinibatchEstimator] = {}

    def make_kernel(step_size, batch_size):
        if batch_size not in estimators:
            estimators[batch_size] = _estimator(batch=batch_size)
        return sg.SGLD(estimators[batch_size], step_size)

    res = tu.grid_search(
        tu.grid(step_size=[2e-3], batch_size=[10, 20]),
        tf.zeros([2]),
        make_kernel,
        budget_per_arm=tu.steps(200),
        progress=False,
        sampling=tu.ArmSampling(jit_compile=True),
    )
    assert [r.steps for r in res.records] == [200, 200] and res.num_programs == 2
    assert all(e.data.chunked for e in estimators.values())


@pytest.mark.parametrize("wrap", [False, True], ids=["plain", "svrg"])
@pytest.mark.parametrize("keep", [None, 0], ids=["kept", "streamed"])
def test_full_data_scores_compile_when_the_full_data_are_kept(keep, wrap):
    from tfp_sgmcmc.tuning.metrics import FullDataScorer

    data = sg.DatasetData(
        _dataset(), N, full_dataset=tf.data.Dataset.from_tensor_slices(X), full_cache_bytes=keep
    )
    est = _estimator(data)
    if wrap:  # the source is found under a wrapper too
        est = sg.SVRGEstimator(est, update_rate=5)
    # Kept: XLA (no fallback warning); streamed: a graph reading the iterator.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scorer = FullDataScorer(est, block_size=4)
        assert scorer.jit_compile == (keep is None)
        theta = np.random.default_rng(1).normal(size=(6, 2)).astype(np.float32)
        (got,) = scorer([theta])
    # ∇ log π(θ) = Σ_i (x_i − θ) − θ.
    want = X.sum(0) - (N + 1) * theta
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
