"""The long-run driver: chunked sampling, HDF5 streaming, checkpoints, resume.

The central test kills a sampling subprocess with a real SIGKILL part-way,
checks the output file is still readable, resumes the run and compares it
bitwise with an uninterrupted run of the same seed (same execution mode:
graph mode, ``jit_compile=False``, which traces in about a second; the XLA
path runs the same programs and is exercised by one short test).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import h5py
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.driver import RunDirectoryError, RunExistsError, open_run, sample
from tfp_sgmcmc.driver.checkpoint import read_checkpoint
from tfp_sgmcmc.driver.chunks import chunk_plan, chunk_seed

# A Gaussian target N(0, I_d) with noisy gradients, 4 chains.
TARGET_SRC = textwrap.dedent(
    """
    import tensorflow as tf
    import tfp_sgmcmc as sg

    D, CHAINS = 20, 4

    def make_kernel():
        est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.5)
        return sg.SGLD(est, 0.05)

    def init_state():
        return tf.fill([CHAINS, D], 3.0)
    """
)

# The killed run: many chunks of many steps, so the parent can kill it part-way.
RUN_ARGS = dict(num_samples=300, seed=11, thin=25, chunk_size=20, num_burnin_steps=30)


def _target(tmp_path):
    path = tmp_path / "target_mod.py"
    path.write_text(TARGET_SRC)
    sys.path.insert(0, str(tmp_path))
    try:
        import importlib

        import target_mod

        return importlib.reload(target_mod)
    finally:
        sys.path.pop(0)


def _child_script(tmp_path, run_dir):
    return textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import time
        import target_mod
        import tfp_sgmcmc.driver.sampler as sampler
        from tfp_sgmcmc.driver import sample

        # Pace the child (numerics untouched): a pause after each chunk's HDF5
        # append and before its checkpoint widens the most dangerous window
        # (rows on disk beyond the checkpoint) and keeps the kill part-way on a
        # fast machine.
        _write = sampler.write_checkpoint
        def paced(*args, **kwargs):
            time.sleep(0.2)
            _write(*args, **kwargs)
        sampler.write_checkpoint = paced
        sample(target_mod.make_kernel(), target_mod.init_state(), run_dir={str(run_dir)!r},
               jit_compile=False, progress=False, **{RUN_ARGS!r})
        """
    )


@pytest.mark.subprocess
def test_sigkilled_run_resumes_to_the_uninterrupted_samples(tmp_path):
    mod = _target(tmp_path)
    killed = tmp_path / "killed"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        [sys.executable, "-c", _child_script(tmp_path, killed)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Wait until the output shows progress (at least two chunks of draws), then SIGKILL.
        # The deadline only ends a hung child: a loaded machine may take minutes to
        # import TensorFlow and reach it.
        deadline = time.monotonic() + 600
        written = 0
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                written = read_checkpoint(str(killed)).num_written
            except (FileNotFoundError, ValueError):
                written = 0
            if written >= 2 * RUN_ARGS["chunk_size"]:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the child finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL

    ckpt = read_checkpoint(str(killed))
    assert 0 < ckpt.num_written < RUN_ARGS["num_samples"], "killed too late to test a resume"
    # The output file is readable after the kill and holds at least the checkpointed draws.
    with h5py.File(killed / "samples.h5", "r") as f:
        rows_after_kill = f["samples/0"].shape[0]
        head = f["samples/0"][: ckpt.num_written]
        assert f["trace/target_log_prob"].shape[0] >= ckpt.num_written
    assert rows_after_kill >= ckpt.num_written
    # Simulate a kill between the HDF5 flush and the checkpoint: extra rows must be cut.
    with h5py.File(killed / "samples.h5", "r+") as f:
        for g in ("samples", "trace"):
            for ds in f[g].values():
                n = ds.shape[0]
                ds.resize(n + 3, axis=0)
                ds[n:] = ds[:3]

    resumed = sample(
        mod.make_kernel(),
        mod.init_state(),
        run_dir=str(killed),
        resume=True,
        jit_compile=False,
        progress=False,
        **RUN_ARGS,
    )
    reference = sample(
        mod.make_kernel(),
        mod.init_state(),
        run_dir=str(tmp_path / "reference"),
        jit_compile=False,
        progress=False,
        **RUN_ARGS,
    )
    a, b = resumed.samples(), reference.samples()
    assert a.shape == b.shape == (RUN_ARGS["num_samples"], 4, 20)
    np.testing.assert_array_equal(a, b)  # bitwise: nothing lost, duplicated or reseeded
    np.testing.assert_array_equal(head, b[: ckpt.num_written])
    ta, tb = resumed.trace(), reference.trace()
    assert sorted(ta) == ["diverged", "step_size", "target_log_prob"]
    for k in ta:
        np.testing.assert_array_equal(ta[k], tb[k])
    with h5py.File(killed / "samples.h5", "r") as f:
        assert f["samples/0"].shape[0] == RUN_ARGS["num_samples"]
    assert resumed.complete and reference.complete
    # The chain moved from its start towards N(0, I) (the draws are real chain states).
    assert abs(float(b[-200:].mean())) < 0.5 and float(b[:, 0].std()) > 0.3


def _small_run(tmp_path, name="run", **kw):
    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.1)
    args = dict(
        num_samples=25,
        seed=3,
        thin=2,
        chunk_size=10,
        num_burnin_steps=7,
        jit_compile=False,
        progress=False,
    )
    args.update(kw)
    return sample(sg.SGLD(est, 0.1), tf.zeros([3, 2]), run_dir=str(tmp_path / name), **args)


def test_layout_thinning_and_checkpoint_contents(tmp_path):
    run = _small_run(tmp_path)
    s = run.samples()
    assert s.shape == (25, 3, 2) and s.dtype == np.float32
    tr = run.trace()
    assert tr["target_log_prob"].shape == (25, 3) and tr["diverged"].shape == (25, 3)
    np.testing.assert_allclose(tr["step_size"], 0.1)
    np.testing.assert_allclose(tr["target_log_prob"], -0.5 * (s**2).sum(-1), rtol=1e-5)
    ckpt = read_checkpoint(run.run_dir)
    plan = chunk_plan(25, 7, 2, 10)
    assert plan == [("burnin", 7), ("sample", 10), ("sample", 10), ("sample", 5)]
    assert ckpt.chunk_index == len(plan) and ckpt.num_written == 25
    # The seed the next (here: no more) chunk's first step takes: all 7 + 25·2 steps done.
    np.testing.assert_array_equal(ckpt.next_seed, chunk_seed([0, 3], 7 + 25 * 2))
    np.testing.assert_array_equal(run.final_state(), s[-1])
    # Kernel results carry the step counter: 7 burn-in + 25 * 2 thinned steps.
    steps = [
        x for x in ckpt.kernel_results if x is not None and x.dtype == np.int32 and x.ndim == 0
    ]
    assert 7 + 25 * 2 in [int(x) for x in steps]


def test_seed_stream_depends_only_on_the_step_index():
    a = [chunk_seed(5, t) for t in range(4)]
    assert len({tuple(x) for x in a}) == 4
    np.testing.assert_array_equal(chunk_seed(5, 2), a[2])
    assert not np.array_equal(chunk_seed(6, 2), a[2])
    # The seed rule of every loop: stateless_fold_in(run_seed, t).
    want = tf.random.experimental.stateless_fold_in(
        tf.constant([0, 5], tf.int32), 2, alg="philox"
    )
    np.testing.assert_array_equal(a[2], want.numpy())


def test_never_overwrites_without_being_asked(tmp_path):
    run = _small_run(tmp_path)
    before = run.samples()
    with pytest.raises(RunExistsError, match="overwrite=True"):
        _small_run(tmp_path)
    np.testing.assert_array_equal(open_run(run.run_dir).samples(), before)
    rerun = _small_run(tmp_path, overwrite=True, seed=4)
    assert not np.array_equal(rerun.samples(), before)


def test_resume_errors(tmp_path):
    with pytest.raises(RunDirectoryError, match="no run to resume"):
        _small_run(tmp_path, name="nothing", resume=True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunDirectoryError, match="checkpoint"):
        _small_run(tmp_path, name="empty", resume=True)
    run = _small_run(tmp_path)
    with pytest.raises(RunDirectoryError, match="thin"):
        _small_run(tmp_path, resume=True, thin=3)
    with pytest.raises(RunDirectoryError, match="seed"):
        _small_run(tmp_path, resume=True, seed=9)
    # A complete run resumes to itself.
    again = _small_run(tmp_path, resume=True)
    np.testing.assert_array_equal(again.samples(), run.samples())
    # Corruptions: truncated checkpoint, missing samples, too few rows.
    ck = tmp_path / "run" / "checkpoint.npz"
    data = ck.read_bytes()
    ck.write_bytes(data[: len(data) // 2])
    with pytest.raises(RunDirectoryError, match="corrupted"):
        _small_run(tmp_path, resume=True)
    with pytest.raises(RunDirectoryError, match="corrupted"):
        open_run(str(tmp_path / "run"))
    ck.write_bytes(data)
    with h5py.File(tmp_path / "run" / "samples.h5", "r+") as f:
        f["samples/0"].resize(5, axis=0)
    with pytest.raises(RunDirectoryError, match="holds 5 draws"):
        _small_run(tmp_path, resume=True)
    os.remove(tmp_path / "run" / "samples.h5")
    with pytest.raises(RunDirectoryError, match="missing"):
        _small_run(tmp_path, resume=True)


def test_bad_arguments_are_named(tmp_path):
    for kw, name in [
        (dict(num_samples=0), "num_samples"),
        (dict(thin=0), "thin"),
        (dict(chunk_size=1.5), "chunk_size"),
        (dict(num_burnin_steps=-1), "num_burnin_steps"),
        (dict(seed=-1), "seed"),
        (dict(resume=True, overwrite=True), "resume"),
        (dict(metadata={"x": object()}), "metadata"),
    ]:
        with pytest.raises(ValueError, match=f"`{name}`"):
            _small_run(tmp_path, name="bad", **kw)


def test_reducers_carry_across_chunks_and_user_trace(tmp_path):
    run = _small_run(
        tmp_path,
        reducer={"mean": tfp.experimental.mcmc.ExpectationsReducer()},
        trace_fn=lambda s, r: {"norm": tf.norm(s, axis=-1)},
    )
    s = run.samples()
    red = run.reductions()["mean"]
    # ExpectationsReducer over all 25 kept draws (3 chunks) = the mean of the stored draws.
    mean = [x for x in red if x.shape == (3, 2)][0]
    np.testing.assert_allclose(mean, s.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run.trace()["norm"], np.linalg.norm(s, axis=-1), rtol=1e-5)


def test_list_state_and_xla_mode(tmp_path):
    est = sg.NoisyGradientEstimator(
        lambda p: -0.5 * tf.reduce_sum(p[0] ** 2, -1) - 0.5 * tf.reduce_sum(p[1] ** 2, -1), 0.1
    )
    run = sample(
        sg.SGLD(est, 0.1),
        [tf.zeros([2, 3], tf.float64), tf.zeros([2, 1], tf.float64)],
        12,
        str(tmp_path / "xla"),
        seed=1,
        chunk_size=12,
        progress=False,
    )
    parts = run.samples()
    assert [p.shape for p in parts] == [(12, 2, 3), (12, 2, 1)]
    assert parts[0].dtype == np.float64 and run.config["jit_compile"]
    assert np.all(np.isfinite(parts[0])) and np.std(parts[0]) > 0


def test_divergence_warning_points_at_the_caller(tmp_path):
    """The warning raised in `sample`'s closing step names the line that called `sample`."""
    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.0)
    with pytest.warns(RuntimeWarning, match="marked diverged") as record:
        sample(
            sg.SGLD(est, 50.0),
            tf.fill([2, 3], 1e30),
            4,
            str(tmp_path / "d"),
            chunk_size=4,
            progress=False,
            jit_compile=False,
        )
    ours = [w for w in record if "marked diverged" in str(w.message)]
    assert [w.filename for w in ours] == [__file__]


def test_run_records_whether_chains_share_minibatches(tmp_path):
    """Shared minibatches across chains: recorded, warned about at the caller; independent
    ones or one chain: recorded, no warning; a run written before the record resumes."""
    import json
    import warnings

    from tfp_sgmcmc.driver.sampler import _config_diff
    from tfp_sgmcmc.export import chains_independent

    x = np.random.default_rng(0).normal(size=(200, 2)).astype(np.float32)

    def ll(theta, batch):
        return -0.5 * tf.reduce_sum(tf.square(tf.expand_dims(theta, -2) - batch), -1)

    def run(name, independent, chains, **kw):
        est = sg.MinibatchEstimator(ll, x, 20, independent_chains=independent)
        return sample(
            sg.SGLD(est, 1e-3),
            tf.zeros([chains, 2]) if chains else tf.zeros([2]),
            4,
            str(tmp_path / name),
            chunk_size=2,
            progress=False,
            jit_compile=False,
            **kw,
        )

    with pytest.warns(UserWarning, match="share each step's minibatch") as record:
        run("shared", False, 3)
    ours = [w for w in record if "share each step's minibatch" in str(w.message)]
    assert [w.filename for w in ours] == [__file__]
    assert chains_independent(str(tmp_path / "shared")) is False
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        run("independent", True, 3)
        run("one_chain", False, 0)
    assert not [w for w in record if "share each step" in str(w.message)], [
        str(w.message) for w in record
    ]
    assert chains_independent(str(tmp_path / "independent")) is True
    assert chains_independent(str(tmp_path / "one_chain")) is False
    # A run written without the record (older format) reads as unknown, and its stored
    # configuration still matches a resume's.
    cfg = json.loads((tmp_path / "independent" / "config.json").read_text())
    old = {k: v for k, v in cfg.items() if k != "independent_chains"}

    class OldRun:  # what a run directory of the older format reads as
        config, metadata = old, {}

    assert chains_independent(OldRun()) is None
    assert _config_diff(old, cfg) == []
    assert _config_diff(cfg, old) == ["independent_chains"]
    assert _config_diff(old, {**cfg, "thin": 99}) == ["thin"]


def test_tfp_metropolis_kernels_keep_their_chains(tmp_path):
    """TFP's HMC keeps its log density under ``accepted_results``: the chains and the
    traced log density are found there (they were lost: batch shape [], no trace)."""
    kernel = tfp.mcmc.HamiltonianMonteCarlo(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.5, 3)
    run = sample(kernel, tf.zeros([4, 2]), 10, str(tmp_path / "hmc"), chunk_size=5,
                 jit_compile=False, progress=False)
    assert run.batch_shape == [4]
    tr = run.trace()
    assert sorted(tr) == ["target_log_prob"] and tr["target_log_prob"].shape == (10, 4)
    np.testing.assert_allclose(
        tr["target_log_prob"], -0.5 * (run.samples() ** 2).sum(-1), rtol=1e-5, atol=1e-6
    )


def test_metadata_with_tuples_resumes(tmp_path):
    """Metadata is compared with its stored JSON copy: a tuple must not read as a change."""
    meta = {"layer_sizes": (784, 100, 10), "nested": {"shape": (2, 3)}}
    run = _small_run(tmp_path, metadata=meta)
    again = _small_run(tmp_path, metadata=meta, resume=True)
    np.testing.assert_array_equal(again.samples(), run.samples())
    assert again.metadata["layer_sizes"] == [784, 100, 10]
    with pytest.raises(RunDirectoryError, match="metadata"):
        _small_run(tmp_path, metadata={"layer_sizes": (784, 50, 10)}, resume=True)


def test_user_files_are_never_taken_for_a_run(tmp_path):
    """A directory with the user's own ``config.json`` is not a run: nothing is deleted,
    even with ``overwrite=True``; a ``run_dir`` that is a file is named."""
    user = tmp_path / "project"
    user.mkdir()
    (user / "config.json").write_text('{"learning_rate": 0.1}')
    for overwrite in (False, True):
        with pytest.raises(RunDirectoryError, match="but no run"):
            _small_run(tmp_path, name="project", overwrite=overwrite)
    assert (user / "config.json").read_text() == '{"learning_rate": 0.1}'
    assert sorted(os.listdir(user)) == ["config.json"]
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(RunDirectoryError, match="`run_dir`.*is a file"):
        _small_run(tmp_path, name="notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "mine"
    # A run's own directory is still replaced when asked.
    _small_run(tmp_path)
    _small_run(tmp_path, overwrite=True, seed=4)


def test_hdf5_chunks_stay_small_for_large_states(tmp_path):
    """A draw of 4.8 MB with ``chunk_size=1000`` asked HDF5 for a 4.8 GB chunk (refused,
    after the run directory was half written)."""
    from tfp_sgmcmc.driver.store import SampleStore

    store = SampleStore(str(tmp_path / "s.h5"))
    store.create([((4, 300_000), "float32")], {"target_log_prob": ((4,), "float32")}, 1000)
    with h5py.File(tmp_path / "s.h5", "r") as f:
        assert f["samples/0"].chunks == (1, 4, 300_000)  # 8 MB of draws at most
        assert f["trace/target_log_prob"].chunks == (1000, 4)
    huge = SampleStore(str(tmp_path / "h.h5"))
    with pytest.raises(ValueError, match="state part 0.*under 4 GB"):
        huge.create([((2**30 + 1,), "float32")], {}, 10)
    assert not (tmp_path / "h.h5").exists()


def test_read_step_is_checked(tmp_path):
    run = _small_run(tmp_path)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="`step`"):
            run.samples(step=bad)
        with pytest.raises(ValueError, match="`step`"):
            run.trace(step=bad)
    np.testing.assert_array_equal(run.samples(step=2), run.samples()[::2])


def test_resuming_a_tf_data_run_says_its_draws_differ(tmp_path):
    """A tf.data stream restarts on resume: the driver says so instead of promising the
    uninterrupted run's draws."""
    x = np.random.default_rng(0).normal(size=(64, 2)).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices(x).shuffle(64, seed=1).batch(8, drop_remainder=True)
    est = sg.MinibatchEstimator(
        lambda t, b: -0.5 * tf.reduce_sum((b - t) ** 2, -1), sg.DatasetData(ds, 64), 8
    )
    args = dict(num_samples=6, run_dir=str(tmp_path / "ds"), chunk_size=3, jit_compile=False,
                progress=False)
    sample(sg.SGLD(est, 1e-3), tf.zeros([2]), **args)
    with pytest.warns(UserWarning, match="tf.data source.*draws differ"):
        sample(sg.SGLD(est, 1e-3), tf.zeros([2]), resume=True, **args)
    with warnings.catch_warnings(record=True) as seen:  # other data: no such warning
        warnings.simplefilter("always")
        _small_run(tmp_path)
        _small_run(tmp_path, resume=True)
    assert not [w for w in seen if "tf.data" in str(w.message)]
