"""Faults of a long run's directory (issue 36): two writers, a full disk, damaged bytes,
a zero-length store, and flag values refused before TensorFlow is imported.

Every fault must end in one clear error (in the CLI: one line, exit status 2) that
leaves the draws already on disk intact and the run resumable to the uninterrupted
chain, never in a traceback or a silent wrong result. ``benchmarks/fault_trial.py``
runs the same faults through real processes and writes the table of ``docs/faults.md``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.cli import main
from tfp_sgmcmc.driver import RunDirectoryError, RunLockedError, open_run, sample
from tfp_sgmcmc.driver.lock import LOCK_FILE, RunLock, lock_holder

RUN = dict(num_samples=24, seed=5, thin=2, chunk_size=8, num_burnin_steps=3)


def _kernel():
    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.2)
    return sg.SGLD(est, 0.1)


def _run(run_dir, **kw):
    args = dict(RUN, jit_compile=False, progress=False)
    args.update(kw)
    return sample(_kernel(), tf.zeros([2, 3]), run_dir=str(run_dir), **args)


MODEL_SRC = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.driver import ModelSpec

    def build(num_chains=2):
        x = np.random.default_rng(0).normal(1.0, 1.0, size=(400, 2)).astype("float32")

        def loglik(theta, batch):
            return -0.5 * tf.reduce_sum((tf.expand_dims(theta, -2) - batch) ** 2, -1)

        def log_prior(theta):
            return -0.5 * tf.reduce_sum(theta**2, -1)

        est = sg.MinibatchEstimator(loglik, x, 200, log_prior_fn=log_prior)
        return ModelSpec(est, tf.fill([num_chains, 2], 1.0), param_names=["mu"])
    """
)


@pytest.fixture()
def model(tmp_path):
    path = tmp_path / "fault_model.py"
    path.write_text(MODEL_SRC)
    return str(path)


def _cli_sample(model, run_dir, *extra):
    return ["sample", "--model", model, "--kernel", "sgld", "--step-size", "1e-4",
            "--num-samples", "40", "--chunk-size", "10", "--seed", "1", "--run-dir",
            str(run_dir), "--no-xla", "--no-progress", *extra]


def _one_line(capsys, code, *words):
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("tfp-sgmcmc:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------- #
# 1. One writer per run directory
# --------------------------------------------------------------------------- #
def test_a_second_writer_is_refused_and_a_dead_writers_lock_is_taken_over(tmp_path):
    """Two ``--resume`` of one run both appended (5,400 rows for 3,000 draws): the
    second writer is now refused naming the holder's PID, before it reads or writes
    anything; a lock file left by a killed writer holds nothing."""
    run_dir = tmp_path / "run"
    ref = _run(run_dir).samples()
    rows = os.path.getsize(run_dir / "samples.h5")
    assert not (run_dir / LOCK_FILE).exists()  # released (and removed) on return
    # Another writer in this process (flock locks are per open file, so this is the
    # same conflict as between two processes).
    with RunLock(str(run_dir)):
        assert lock_holder(str(run_dir)) == os.getpid()
        for kw in (dict(resume=True), dict(overwrite=True)):
            with pytest.raises(RunLockedError, match=f"process {os.getpid()}") as e:
                _run(run_dir, **kw)
            assert e.value.pid == os.getpid()
        assert os.path.getsize(run_dir / "samples.h5") == rows
    # Another process holds the lock (the protocol by hand: no TensorFlow in the child),
    # then dies by SIGKILL and leaves its lock file behind.
    child = (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(run_dir / LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, f'{os.getpid()} elsewhere\\n'.encode())\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=f"process {proc.pid} on host elsewhere"):
            _run(run_dir, resume=True)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert (run_dir / LOCK_FILE).exists() and lock_holder(str(run_dir)) is None
    np.testing.assert_array_equal(_run(run_dir, resume=True).samples(), ref)
    assert not (run_dir / LOCK_FILE).exists()


def test_the_lock_is_released_on_errors_and_in_the_cli(tmp_path, model, capsys):
    """An error inside ``sample`` releases the lock; the CLI's refusal is one line."""
    run_dir = tmp_path / "run"
    _run(run_dir)
    with pytest.raises(RunDirectoryError, match="thin"):
        _run(run_dir, resume=True, thin=3)
    assert not (run_dir / LOCK_FILE).exists()
    RunLock(str(run_dir)).acquire().release()  # nobody holds it
    cli_dir = tmp_path / "cli"
    assert main(_cli_sample(model, cli_dir)) == 0
    with RunLock(str(cli_dir)):
        code = main(["sample", "--run-dir", str(cli_dir), "--resume", "--no-progress"])
        _one_line(capsys, code, "is being written by", f"process {os.getpid()}")
