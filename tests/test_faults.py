"""Faults of a long run's directory: two writers, a full disk, damaged bytes,
a zero-length store, and flag values refused before TensorFlow is imported.

Every fault must end in one clear error (in the CLI: one line, exit status 2) that
leaves the draws already on disk intact and the run resumable to the uninterrupted
chain, never in a traceback or a silent wrong result. ``benchmarks/fault_trial.py``
runs the same faults through real processes and writes the table of ``docs/faults.md``.
"""

from __future__ import annotations

import errno
import io
import os
import signal
import subprocess
import sys
import textwrap
import warnings
import zipfile

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


# --------------------------------------------------------------------------- #
# 2. Store integrity
# --------------------------------------------------------------------------- #
def _flip_draw_bytes(path, row_values):
    """Flips bits in the stored bytes of one draw (found by its value: the store is
    uncompressed), as a failing disk would."""
    data = bytearray(path.read_bytes())
    at = data.find(np.ascontiguousarray(row_values).tobytes())
    assert at > 0
    for k in range(0, 16, 4):  # 16 bytes over 4 values, like the fault trial's
        data[at + k + 1] ^= 0x5A
    path.write_bytes(bytes(data))


def test_flipped_bytes_are_named_by_rows_on_open_read_resume_and_diagnose(
    tmp_path, model, capsys
):
    """16 flipped bytes changed 4 stored values and ``open_run``, ``diagnose`` and
    ``--resume`` accepted them; each now refuses, naming the damaged rows, and writes
    nothing."""
    from tfp_sgmcmc.driver import StoreDamagedError

    run_dir = tmp_path / "run"
    draws = _run(run_dir).samples()
    store = run_dir / "samples.h5"
    _flip_draw_bytes(store, draws[9])  # row 9: HDF5 chunk of rows 8-15
    damaged = store.read_bytes()
    cases = [
        lambda: open_run(str(run_dir)),
        lambda: open_run(str(run_dir), verify=False).samples(),
        lambda: _run(run_dir, resume=True),
    ]
    for case in cases:
        with pytest.raises(StoreDamagedError, match="/samples/0 rows 8-15") as e:
            case()
        assert e.value.damaged == [("/samples/0", 8, 16)]
    assert store.read_bytes() == damaged  # never written over
    # The trace is intact and still reads; so does the configuration.
    assert open_run(str(run_dir), verify=False).trace()["target_log_prob"].shape == (24, 2)
    # The CLI: one line naming the rows, for diagnose and --resume.
    cli_dir = tmp_path / "cli"
    assert main(_cli_sample(model, cli_dir)) == 0
    _flip_draw_bytes(cli_dir / "samples.h5", open_run(str(cli_dir)).samples()[25])
    for argv in (["diagnose", "--run-dir", str(cli_dir)],
                 ["sample", "--run-dir", str(cli_dir), "--resume", "--no-progress"]):
        _one_line(capsys, main(argv), "fail their checksums", "/samples/0 rows 20-29",
                  "--overwrite")


def test_a_damaged_checkpoint_and_a_zero_length_store_are_refused_untouched(tmp_path):
    """Resuming on a zero-length samples.h5 made h5py write an empty store over it before
    the resume was refused; a checkpoint's flipped byte is caught by its digest."""
    from tfp_sgmcmc.driver import StoreDamagedError
    from tfp_sgmcmc.driver.checkpoint import _DIGEST, _FORMAT, _with_file_digest, read_checkpoint

    run_dir = tmp_path / "run"
    ref = _run(run_dir).samples()
    store = run_dir / "samples.h5"
    saved = store.read_bytes()
    store.write_bytes(b"")
    for case in (lambda: _run(run_dir, resume=True), lambda: open_run(str(run_dir))):
        with pytest.raises(StoreDamagedError, match="empty .0 bytes. but the run records 24"):
            case()
        assert store.stat().st_size == 0  # left as it is
    store.write_bytes(saved)
    # The checkpoint: one flipped bit of the chain state, in a zip whose own CRC-32 was
    # recomputed (as a bad copy would): the whole-file digest is then missing.
    ckpt = run_dir / "checkpoint.npz"
    good = ckpt.read_bytes()
    state = read_checkpoint(str(run_dir)).state[0]
    with zipfile.ZipFile(io.BytesIO(good)) as z:
        members = {n: z.read(n) for n in z.namelist()}
    raw = bytearray(members["state/0.npy"])
    raw[raw.find(state.tobytes())] ^= 0x01
    members["state/0.npy"] = bytes(raw)

    def rezip(entries: dict[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for n, b in entries.items():
                z.writestr(n, b)
        return buf.getvalue()

    ckpt.write_bytes(rezip(members))
    for case in (lambda: _run(run_dir, resume=True), lambda: open_run(str(run_dir))):
        with pytest.raises(RunDirectoryError, match="whole-file SHA-256 checksum is missing"):
            case()
    # With the whole-file digest recomputed too, the entries' digest still catches it.
    ckpt.write_bytes(_with_file_digest(rezip(members)))
    for case in (lambda: _run(run_dir, resume=True), lambda: open_run(str(run_dir))):
        with pytest.raises(RunDirectoryError, match="fails its SHA-256 checksum"):
            case()
    # A checkpoint from before the digests: read with a warning, and resumed to the same
    # chain (its next checkpoint has both digests).
    with zipfile.ZipFile(io.BytesIO(good)) as z:
        old = {n: z.read(n) for n in z.namelist() if n not in (f"{_DIGEST}.npy", f"{_FORMAT}.npy")}
    ckpt.write_bytes(rezip(old))
    with pytest.warns(UserWarning, match="has no checksum"):
        np.testing.assert_array_equal(open_run(str(run_dir)).samples(), ref)
    with pytest.warns(UserWarning, match="has no checksum"):
        np.testing.assert_array_equal(_run(run_dir, resume=True).samples(), ref)


def test_a_store_without_checksums_is_read_with_a_warning(tmp_path):
    """A store written before the checksums: accepted (its rows are read), with a warning
    that its damage cannot be detected."""
    import h5py

    run_dir = tmp_path / "run"
    ref = _run(run_dir).samples()
    old = tmp_path / "old.h5"
    with h5py.File(run_dir / "samples.h5", "r") as src, h5py.File(old, "w") as dst:
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        for group in ("samples", "trace", "reductions"):
            g = dst.create_group(group)
            for key, ds in src[group].items():
                if isinstance(ds, h5py.Dataset):
                    g.create_dataset(key, data=ds[()], maxshape=(None, *ds.shape[1:]),
                                     chunks=ds.chunks)
    os.replace(old, run_dir / "samples.h5")
    with pytest.warns(UserWarning, match="no checksums"):
        np.testing.assert_array_equal(open_run(str(run_dir)).samples(), ref)


# --------------------------------------------------------------------------- #
# 3. Disk full, permissions: one error saying what is safe; resumable bit for bit
# --------------------------------------------------------------------------- #
def _fail_on_call(k, real, exc, before=None):
    """``real`` that raises ``exc`` on its ``k``-th call (after ``before(*args)``)."""
    calls = [0]

    def patched(*args, **kwargs):
        calls[0] += 1
        if calls[0] == k:
            if before is not None:
                before(*args)
            raise exc
        return real(*args, **kwargs)

    return patched


def test_a_full_disk_is_one_error_saying_what_is_safe_then_resumes_bit_for_bit(
    tmp_path, monkeypatch
):
    """A full disk gave a raw ``OSError`` traceback, left ``checkpoint.npz.tmp`` and said
    nothing of the draws already safe. Plan: burn-in, then 3 chunks of 8 draws."""
    from tfp_sgmcmc.driver import RunStorageError
    from tfp_sgmcmc.driver.store import SampleStore

    ref = _run(tmp_path / "ref").samples()
    run_dir = tmp_path / "run"
    enospc = OSError(errno.ENOSPC, "No space left on device")
    # The HDF5 append of the second chunk fails.
    monkeypatch.setattr(SampleStore, "append", _fail_on_call(2, SampleStore.append, enospc))
    with pytest.raises(RunStorageError, match="8 of 24 draws are safe on disk") as e:
        _run(run_dir)
    msg = str(e.value)
    assert "No space left on device [ENOSPC] while appending the draws of chunk 3/4" in msg
    assert "Free some space, then resume with resume=True." in msg and "\n" not in msg
    assert isinstance(e.value, OSError) and e.value.errno == errno.ENOSPC
    assert e.value.num_safe == 8
    monkeypatch.undo()
    # The checkpoint's write fails half-way (a partial temporary file): the previous
    # checkpoint stays, and the temporary file goes.
    monkeypatch.setattr(
        np, "savez", _fail_on_call(1, np.savez, enospc, lambda f, **_: f.write(b"partial"))
    )
    with pytest.raises(RunStorageError, match="writing checkpoint.npz after chunk 3/4; 8 of"):
        _run(run_dir, resume=True)
    monkeypatch.undo()
    assert sorted(os.listdir(run_dir)) == ["checkpoint.npz", "config.json", "samples.h5"]
    # Space returns: the resumed run is the uninterrupted one, bit for bit.
    np.testing.assert_array_equal(_run(run_dir, resume=True).samples(), ref)


def test_a_full_disk_is_met_before_hdf5_writes(tmp_path, monkeypatch):
    """HDF5 meeting a full disk (or a file size limit) mid-append left a file whose
    recorded end lies past its written end, which no longer opens (benchmarks/
    fault_trial.py, ``file_size_limit``): the append's space is reserved first, so the
    failure leaves the store as the last chunk left it, and the run resumes bit for bit."""
    import tfp_sgmcmc.driver.store as store
    from tfp_sgmcmc.driver import RunStorageError

    ref = _run(tmp_path / "ref").samples()
    enospc = OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(store.os, "posix_fallocate",
                        _fail_on_call(2, os.posix_fallocate, enospc))
    run_dir = tmp_path / "run"
    with pytest.raises(RunStorageError, match=r"reserving [\d,]+ bytes for the next chunk.*8 of"):
        _run(run_dir)
    monkeypatch.undo()
    np.testing.assert_array_equal(open_run(str(run_dir)).samples(), ref[:8])  # intact
    # Without posix_fallocate support, the free space is compared instead.
    class Full:
        f_bavail, f_frsize, f_blocks = 10, 4096, 1000

    unsupported = OSError(errno.EOPNOTSUPP, "Operation not supported")
    monkeypatch.setattr(store.os, "posix_fallocate", _fail_on_call(1, None, unsupported))
    monkeypatch.setattr(store.os, "statvfs", lambda _: Full())
    with pytest.raises(RunStorageError, match="40,960 free.*8 of 24"):
        _run(run_dir, resume=True)
    monkeypatch.undo()
    # HDF5 reports a failed write at close as a RuntimeError naming the errno: an OSError.
    failed_close = RuntimeError(
        "Can't decrement id ref count (file write failed: time = ..., errno = 5, "
        "error message = 'Input/output error', offset = 60000)"
    )
    monkeypatch.setattr(store.SampleStore, "_append",
                        staticmethod(_fail_on_call(1, store.SampleStore._append, failed_close)))
    with pytest.raises(RunStorageError, match=r"Input/output error \[EIO\].*8 of 24"):
        _run(run_dir, resume=True)
    monkeypatch.undo()
    np.testing.assert_array_equal(_run(run_dir, resume=True).samples(), ref)
    # Permissions: the message names the fix.
    denied = PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(np, "savez", _fail_on_call(1, np.savez, denied))
    with pytest.raises(RunStorageError, match="Permission denied .EACCES.*0 of 24.*writable"):
        _run(tmp_path / "denied")


def test_cli_disk_errors_are_one_line(tmp_path, model, monkeypatch, capsys):
    from tfp_sgmcmc.driver.store import SampleStore

    enospc = OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(SampleStore, "append", _fail_on_call(3, SampleStore.append, enospc))
    run_dir = tmp_path / "run"
    _one_line(capsys, main(_cli_sample(model, run_dir)), "No space left on device",
              "20 of 40 draws are safe on disk", "then resume with --resume.")
    monkeypatch.undo()
    assert not [f for f in os.listdir(run_dir) if f.endswith(".tmp") or f == LOCK_FILE]
    # An OSError of the command's own files (here reading the run): one line too.
    def denied(*_, **__):
        raise PermissionError(errno.EACCES, "Permission denied", str(run_dir))

    monkeypatch.setattr("tfp_sgmcmc.driver.open_run", denied)
    _one_line(capsys, main(["diagnose", "--run-dir", str(run_dir)]),
              f"Permission denied: {run_dir}")


# --------------------------------------------------------------------------- #
# 4. Flag values refused before TensorFlow is imported
# --------------------------------------------------------------------------- #
def test_cheap_refusals_come_before_tensorflow(tmp_path):
    """``--num-samples 0``, ``--resume`` of a missing directory, ``--step-size 0`` and an
    unknown kernel were refused only after TensorFlow was imported and the model built
    (seconds each); they are refused first, in a process that never imports it."""
    import json

    import tfp_sgmcmc.kernels as kernels
    from tfp_sgmcmc.cli import _CHECKPOINT_FILE, _kernel_names
    from tfp_sgmcmc.driver.checkpoint import CHECKPOINT_FILE

    # The source-read names are the package's (a test, since they are read, not imported).
    assert _kernel_names() == frozenset(kernels.__all__)
    assert _CHECKPOINT_FILE == CHECKPOINT_FILE
    (tmp_path / "not_a_run").mkdir()
    base = ["sample", "--model", "m.py", "--kernel", "sgld", "--step-size", "1e-4",
            "--num-samples", "10", "--run-dir", str(tmp_path / "run")]

    def with_(flag, value):
        argv = list(base)
        argv[argv.index(flag) + 1] = value
        return argv

    cases = [
        (with_("--num-samples", "0"), "`--num-samples` must be an int >= 1, got 0."),
        (["sample", "--run-dir", str(tmp_path / "missing"), "--resume"],
         "does not exist: there is no run to resume."),
        (["sample", "--run-dir", str(tmp_path / "not_a_run"), "--resume"],
         "has no checkpoint.npz: not a run directory"),
        (with_("--step-size", "0"), "`--step-size` must be a finite number > 0, got 0.0."),
        (with_("--step-size", "-0.001"), "`--step-size` must be a finite number > 0"),
        (with_("--step-size", "nan"), "`--step-size` must be a finite number > 0"),
        (with_("--kernel", "hmc9"), "unknown kernel 'hmc9'; choose one of sgld"),
        (with_("--kernel", "SGLDKernelResults"), "unknown kernel 'SGLDKernelResults'"),
        ([*base, "--thin", "0"], "`--thin` must be an int >= 1"),
        (base[:3] + base[5:], "`--kernel` is required"),
        (["diagnose", "--run-dir", str(tmp_path / "missing")], "does not exist"),
        (["diagnose", "--run-dir", str(tmp_path), "--max-samples", "1"], "`--max-samples`"),
        (["tune", "--model", "m.py", "--kernel", "nope", "--step-sizes", "1e-4",
          "--budget-steps", "10"], "unknown kernel 'nope'"),
    ]
    child = textwrap.dedent(
        """
        import contextlib, io, json, sys
        from tfp_sgmcmc.cli import main
        out = []
        for argv in json.loads(sys.argv[1]):
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = main(argv)
            out.append([code, err.getvalue()])
        print(json.dumps({"results": out, "tensorflow": "tensorflow" in sys.modules}))
        """
    )
    done = subprocess.run([sys.executable, "-c", child, json.dumps([c[0] for c in cases])],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["tensorflow"] is False
    for (argv, expected), (code, err) in zip(cases, report["results"]):
        lines = err.splitlines()
        assert code == 2 and len(lines) == 1, (argv, err)
        assert lines[0].startswith("tfp-sgmcmc: error: ") and expected in lines[0], (argv, err)
    # A known class name passes the early check (and runs: here it fails later, on the
    # missing model, after the import).
    assert main(with_("--kernel", "SGLD")) == 2


def test_a_file_system_without_locks_runs_unguarded_with_a_warning(tmp_path, monkeypatch):
    """``flock`` refused with ENOLCK (NFSv3 without lockd): refusing would forbid every run
    there, so the run goes on, said."""
    import fcntl

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.warns(RuntimeWarning, match="cannot lock run.lock .No locks available"):
        lock = RunLock(str(tmp_path)).acquire()
    assert not lock.held and not (tmp_path / LOCK_FILE).exists()
    lock.release()


def _tiny_checkpoint():
    from tfp_sgmcmc.driver.checkpoint import Checkpoint

    rng = np.random.default_rng(0)
    return Checkpoint(
        config={"run_id": "0" * 32, "kernel": "SGLD"}, chunk_index=3, num_written=30,
        next_seed=np.array([1, 2], np.int32), state=[rng.standard_normal([2, 3])],
        kernel_results=[None, rng.standard_normal([2]), np.array([False, True])],
        reducer_states=[], chunk_digests=rng.integers(0, 255, [3, 1, 32]).astype(np.uint8),
        reductions_digest=None,
    )


def _flips_read_without_error(path) -> tuple[int, list[int], list[str]]:
    """Flip each byte of ``path`` in turn and read it: ``(bytes, positions that read
    without an error, errors other than ValueError)``."""
    from tfp_sgmcmc.driver.checkpoint import read_checkpoint

    good = path.read_bytes()
    silent, raw = [], []
    for pos in range(len(good)):
        bad = bytearray(good)
        bad[pos] ^= 0xFF
        path.write_bytes(bytes(bad))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                read_checkpoint(str(path.parent))
        except ValueError:
            continue
        except Exception as e:  # noqa: BLE001 - any other type is what the test looks for
            raw.append(f"{pos}: {type(e).__name__}: {e}")
            continue
        silent.append(pos)
    path.write_bytes(good)
    return len(good), silent, raw


def test_every_flipped_byte_of_a_checkpoint_is_refused_by_name(tmp_path):
    """A checkpoint's entries' digest does not see the zip container's own fields (time
    stamps, a local header's copy of a size); the whole-file digest in the archive's
    comment does, so a changed byte anywhere in the file is refused with a ValueError
    (the driver's ``RunDirectoryError``). Power check: the same entries written as a plain
    ``np.savez`` archive (a checkpoint from before the whole-file digest) read some flipped
    bytes without an error, and those only."""
    from tfp_sgmcmc.driver.checkpoint import CHECKPOINT_FILE, write_checkpoint

    write_checkpoint(str(tmp_path), _tiny_checkpoint())
    size, silent, raw = _flips_read_without_error(tmp_path / CHECKPOINT_FILE)
    assert size > 3000 and silent == [] and raw == [], (silent[:10], raw[:5])

    legacy = tmp_path / "legacy"
    legacy.mkdir()
    with zipfile.ZipFile(tmp_path / CHECKPOINT_FILE) as z:
        entries = {n: z.read(n) for n in z.namelist() if n not in ("format.npy", "sha256.npy")}
    with zipfile.ZipFile(legacy / CHECKPOINT_FILE, "w") as z:
        for n, b in entries.items():
            z.writestr(n, b)
    _, silent, raw = _flips_read_without_error(legacy / CHECKPOINT_FILE)
    assert silent and raw == [], raw[:5]
