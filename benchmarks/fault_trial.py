"""Fault trial of the long-run driver and the ``tfp-sgmcmc`` command line.

Runs a small set of faults in a temporary directory, each in real processes
(``python -m tfp_sgmcmc.cli``, or a ``python -c`` child that patches one writer), with a
tiny model (a 2-d Gaussian mean, 400 rows, 2 chains, SGLD in graph mode, 3,000 draws),
and counts how each ends:

* ``clear``: one ``tfp-sgmcmc: error:`` line (or, from Python, one named exception),
  exit status 2, no traceback, and the files it must not touch unchanged; where the
  fault allows it, the run then resumes to the uninterrupted run's draws, bit for bit;
* ``ok``: a recovery that worked (a killed run resumed to the uninterrupted draws);
* ``traceback``: a Python traceback on stderr;
* ``silent``: exit status 0 where the fault should have been reported, or a wrong
  result (duplicated rows, damaged values read as numbers, a resumed chain that differs);
* ``unclear``: anything else (another exit status, several error lines);
* ``skipped``: not runnable here (a permission fault as root).

Prints one JSON document (the scenarios, the counts, the environment) and then the
markdown table of ``docs/faults.md``; progress goes to stderr. The exit status is 1 when
any scenario ends ``silent`` or ``traceback`` (0 otherwise), so the trial can gate a
build; ``--quick`` runs the refusals only (no kills, no full disks) on a shorter run.

```bash
python benchmarks/fault_trial.py                  # about 4-8 minutes on 2 shared cores
python benchmarks/fault_trial.py --quick          # about 2-4 minutes
python benchmarks/fault_trial.py --output benchmarks/results/fault_trial.json
```
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import io
import json
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from typing import Any

import h5py
import numpy as np

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
NUM_SAMPLES = 3000


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _env() -> dict[str, str]:
    # TensorFlow's C++ notices are hidden by the CLI itself; this keeps children quiet too.
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def _sample_argv(model: str, run_dir: str, seed: int = 7) -> list[str]:
    return ["sample", "--model", model, "--kernel", "sgld", "--step-size", "1e-4",
            "--num-samples", str(NUM_SAMPLES), "--chunk-size", "100", "--thin", "2",
            "--seed", str(seed), "--run-dir", run_dir, "--no-xla", "--no-progress"]


def _resume_argv(run_dir: str) -> list[str]:
    return ["sample", "--run-dir", run_dir, "--resume", "--no-progress"]


def _cli(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tfp_sgmcmc.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, env=_env())


# A child that runs the CLI's `main` with one writer patched to fail, as a full disk
# would, on its K-th call: `SampleStore.append` (the HDF5 append) or `np.savez` (the
# checkpoint, after writing part of its temporary file).
PATCHED_CHILD = textwrap.dedent(
    """
    import errno, json, sys
    import numpy as np
    from tfp_sgmcmc.driver.store import SampleStore
    from tfp_sgmcmc.cli import main

    what, k, argv = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    calls = [0]

    def failing(real, before=None):
        def patched(*args, **kwargs):
            calls[0] += 1
            if calls[0] == k:
                if before is not None:
                    before(*args)
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(*args, **kwargs)
        return patched

    if what == "append":
        SampleStore.append = failing(SampleStore.append)
    else:
        np.savez = failing(np.savez, lambda f, **_: f.write(b"partial"))
    sys.exit(main(argv))
    """
)

# A child under a file size limit (RLIMIT_FSIZE): the real writers (h5py, numpy) meet
# EFBIG, with no patch. SIGXFSZ is ignored so that the write fails instead of the process.
FSIZE_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = int(sys.argv[1])
    from tfp_sgmcmc.cli import main  # imports before the limit: only the run's files grow
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    sys.exit(main(json.loads(sys.argv[2])))
    """
)

# A child that runs the CLI paced (a pause before each checkpoint, numerics untouched), so
# that the parent can SIGKILL it part-way.
PACED_CHILD = textwrap.dedent(
    """
    import json, sys, time
    import tfp_sgmcmc.driver.sampler as s
    from tfp_sgmcmc.cli import main
    _w = s.write_checkpoint
    s.write_checkpoint = lambda *a, **k: (time.sleep(0.05), _w(*a, **k))
    sys.exit(main(json.loads(sys.argv[1])))
    """
)

# open_run from Python: one named exception, or the draws read.
OPEN_RUN_CHILD = textwrap.dedent(
    """
    import sys
    from tfp_sgmcmc import _startup
    _startup.import_tensorflow()  # without TensorFlow's start-up notices, as the CLI
    from tfp_sgmcmc.driver import open_run
    try:
        open_run(sys.argv[1]).samples()
    except Exception as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(2)
    """
)

# The CLI's main on bad flags: exit status, stderr, and whether TensorFlow was imported.
CHEAP_CHILD = textwrap.dedent(
    """
    import contextlib, io, json, sys, time
    t0 = time.perf_counter()
    from tfp_sgmcmc.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(json.loads(sys.argv[1]))
        except SystemExit as e:
            code = e.code
    print(json.dumps({"code": code, "stderr": err.getvalue(),
                      "tensorflow": "tensorflow" in sys.modules,
                      "seconds": time.perf_counter() - t0}))
    """
)


def _python(code: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=_env())


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("tfp-sgmcmc: error:")]


def _classify_refusal(code: int | None, stderr: str, python: bool = False) -> str:
    """How a step that must fail ended (``clear`` / ``traceback`` / ``silent`` / ``unclear``)."""
    if "Traceback" in stderr:
        return "traceback"
    if code == 0:
        return "silent"
    if python:  # one line naming the exception (other stderr lines: warnings, if any)
        lines = [ln for ln in stderr.splitlines() if re.match(r"[A-Z]\w*(Error|Exception): ", ln)]
    else:
        lines = _error_lines(stderr)
    return "clear" if code == 2 and len(lines) == 1 else "unclear"


def _message(stderr: str) -> str:
    lines = _error_lines(stderr) or [ln for ln in stderr.splitlines() if ln.strip()]
    text = lines[-1] if lines else ""
    return text if len(text) <= 400 else text[:397] + "..."


def _draws(run_dir: str) -> np.ndarray:
    with h5py.File(os.path.join(run_dir, "samples.h5"), "r") as f:
        return f["samples/0"][()]


def _num_written(run_dir: str) -> int:
    try:
        with np.load(os.path.join(run_dir, "checkpoint.npz")) as z:
            return int(z["num_written"])
    except (OSError, KeyError, ValueError, EOFError):
        return 0


def _leftovers(run_dir: str) -> list[str]:
    return sorted(f for f in os.listdir(run_dir) if f.endswith(".tmp") or f == "run.lock")


def _same_as_reference(run_dir: str, ref: np.ndarray) -> bool:
    try:
        got = _draws(run_dir)
    except (OSError, KeyError):
        return False
    return got.shape == ref.shape and np.array_equal(got, ref)


def _resume_and_compare(run_dir: str, ref: np.ndarray) -> tuple[str, str]:
    """Resumes with the real CLI; ``(outcome, detail)`` of the recovery."""
    done = _cli(_resume_argv(run_dir))
    if "Traceback" in done.stderr:
        return "traceback", "resume: traceback"
    if done.returncode != 0:
        return "unclear", f"resume: exit {done.returncode}: {_message(done.stderr)}"
    if not _same_as_reference(run_dir, ref):
        return "silent", "resume: exit 0 but the draws differ from the uninterrupted run"
    return "ok", "resumed to the uninterrupted draws, bit for bit"


def _combine(fault: str, recovery: str) -> str:
    """The worse of a fault step's and its recovery's outcomes."""
    order = ["traceback", "silent", "unclear", "clear", "ok"]
    worst = min(order.index(fault), order.index(recovery))
    return "clear" if order[worst] == "ok" and fault == "clear" else order[worst]


def _sigkill_part_way(model: str, run_dir: str, min_draws: int = 600) -> int:
    """Runs the paced CLI in a child and SIGKILLs it once ``min_draws`` are checkpointed."""
    proc = subprocess.Popen([sys.executable, "-c", PACED_CHILD,
                             json.dumps(_sample_argv(model, run_dir))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if _num_written(run_dir) >= min_draws:
                break
            time.sleep(0.02)
        if proc.poll() is not None:
            raise RuntimeError("the paced run finished before it could be killed")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return _num_written(run_dir)


def _flip_bytes(path: str, row: np.ndarray) -> None:
    """16 flipped bits over 4 stored values of one draw (the file is uncompressed)."""
    data = bytearray(open(path, "rb").read())
    at = data.find(np.ascontiguousarray(row).tobytes())
    if at < 0:
        raise RuntimeError("the draw's bytes were not found in the store")
    for k in range(4):
        for b in range(4):
            data[at + 4 * k + b] ^= 1 << (b + 1)
    with open(path, "wb") as f:
        f.write(bytes(data))


def _chunk_span(path: str, dataset: str, i: int) -> tuple[int, int]:
    """(offset, size) in the file of HDF5 chunk ``i`` of ``dataset``."""
    with h5py.File(path, "r") as f:
        info = f[dataset].id.get_chunk_info(i)
    return info.byte_offset, info.size


def _swap_chunks(run_dir: str, other: str) -> None:
    """HDF5 chunks 3 and 7 of the draws swapped in place (each keeps its checksum)."""
    path = os.path.join(run_dir, "samples.h5")
    (o1, n1), (o2, n2) = _chunk_span(path, "samples/0", 3), _chunk_span(path, "samples/0", 7)
    data = bytearray(open(path, "rb").read())
    data[o1:o1 + n1], data[o2:o2 + n2] = data[o2:o2 + n2], data[o1:o1 + n1]
    with open(path, "wb") as f:
        f.write(bytes(data))


def _chunk_from_other(run_dir: str, other: str) -> None:
    """HDF5 chunk 5 of the draws replaced by the same chunk of another run."""
    path, src = os.path.join(run_dir, "samples.h5"), os.path.join(other, "samples.h5")
    (o, n), (o_src, n_src) = _chunk_span(path, "samples/0", 5), _chunk_span(src, "samples/0", 5)
    assert n == n_src
    data = bytearray(open(path, "rb").read())
    data[o:o + n] = open(src, "rb").read()[o_src:o_src + n]
    with open(path, "wb") as f:
        f.write(bytes(data))


def _file_from_other(name: str) -> Any:
    def edit(run_dir: str, other: str) -> None:
        shutil.copyfile(os.path.join(other, name), os.path.join(run_dir, name))
    return edit


def _npz_digest(arrays: dict[str, np.ndarray]) -> str:
    """The checkpoint's own SHA-256, recomputed as an editor would (the driver's rule)."""
    h = hashlib.sha256()
    for key in sorted(k for k in arrays if k != "sha256"):
        a = np.ascontiguousarray(arrays[key])
        h.update(f"{key}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(memoryview(a).cast("B") if a.nbytes else b"")
    return h.hexdigest()


def _with_file_digest(npz: bytes) -> bytes:
    """``npz`` with the archive comment ``sha256:<hex digest of every byte before the 64
    digits>``, the whole-file digest of a checkpoint (docs/driver.md, Safety)."""
    buf = io.BytesIO(npz)
    with zipfile.ZipFile(buf, "a") as z:
        z.comment = b"sha256:" + b"0" * 64
    body = buf.getvalue()[:-64]
    return body + hashlib.sha256(body).hexdigest().encode()


def _lower_num_written(run_dir: str, other: str) -> None:
    """``num_written`` lowered by 300 in checkpoint.npz, both its SHA-256 digests (of the
    entries and of the whole file) recomputed."""
    path = os.path.join(run_dir, "checkpoint.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["num_written"] = np.asarray(int(arrays["num_written"]) - 300, np.int64)
    arrays["sha256"] = np.asarray(_npz_digest(arrays))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with open(path, "wb") as f:
        f.write(_with_file_digest(buf.getvalue()))
    with zipfile.ZipFile(path) as z:  # a valid archive, as np.savez wrote it
        assert z.testzip() is None


def _delete_diverged(run_dir: str, other: str) -> None:
    with h5py.File(os.path.join(run_dir, "samples.h5"), "r+") as f:
        del f["trace/diverged"]


#: Edits of a finished run that every checksum passes: each must be refused.
INTEGRITY_EDITS = (
    ("swapped_chunks", "two HDF5 chunks of the draws swapped in the file", _swap_chunks),
    ("chunk_from_other_run", "one HDF5 chunk of the draws copied from another run",
     _chunk_from_other),
    ("checkpoint_from_other_run", "checkpoint.npz copied from another run",
     _file_from_other("checkpoint.npz")),
    ("store_from_other_run", "samples.h5 copied from another run",
     _file_from_other("samples.h5")),
    ("lowered_num_written", "num_written lowered in checkpoint.npz (its SHA-256 recomputed)",
     _lower_num_written),
    ("deleted_trace_diverged", "trace/diverged deleted from samples.h5", _delete_diverged),
)


def _snapshot(run_dir: str) -> dict[str, bytes]:
    return {n: open(os.path.join(run_dir, n), "rb").read()
            for n in ("samples.h5", "checkpoint.npz")}


# --------------------------------------------------------------------------- #
# Scenarios
# --------------------------------------------------------------------------- #
def run_trial(work: str, quick: bool = False) -> list[dict[str, Any]]:
    model = os.path.join(work, "model.py")
    with open(model, "w") as f:
        f.write(MODEL_SRC)
    rows: list[dict[str, Any]] = []

    def record(name: str, fault: str, outcome: str, detail: str, t0: float,
               message: str = "") -> None:
        # Paths relative to the temporary directory, which is gone afterwards.
        message = message.replace(work + os.sep, "").replace(work, ".")
        detail = detail.replace(work + os.sep, "")
        rows.append({"scenario": name, "fault": fault, "outcome": outcome, "detail": detail,
                     "message": message, "seconds": round(time.perf_counter() - t0, 1)})
        _log(f"  {name}: {outcome} ({detail})")

    def path(name: str) -> str:
        return os.path.join(work, name)

    _log("reference: the uninterrupted run")
    t0 = time.perf_counter()
    done = _cli(_sample_argv(model, path("reference")))
    if done.returncode != 0:
        raise RuntimeError(f"the reference run failed:\n{done.stderr}")
    ref = _draws(path("reference"))
    _log(f"  {ref.shape[0]} draws in {time.perf_counter() - t0:.1f} s")

    # Edits every checksum passes (another run's files or chunks, moved chunks, an edited
    # count, a deleted dataset): diagnose, --resume and open_run must each refuse by name.
    _log("another run (seed 8), for its files")
    done = _cli(_sample_argv(model, path("other"), seed=8))
    if done.returncode != 0:
        raise RuntimeError(f"the second run failed:\n{done.stderr}")
    for name, fault, edit in INTEGRITY_EDITS:
        run_dir = path(name)
        shutil.copytree(path("reference"), run_dir)
        edit(run_dir, path("other"))
        before = _snapshot(run_dir)
        for then, step in (
            ("diagnose", lambda d=run_dir: _cli(["diagnose", "--run-dir", d])),
            ("resume", lambda d=run_dir: _cli(_resume_argv(d))),
            ("open_run", lambda d=run_dir: _python(OPEN_RUN_CHILD, d)),
        ):
            t0 = time.perf_counter()
            done = step()
            outcome = _classify_refusal(done.returncode, done.stderr, python=then == "open_run")
            untouched = _snapshot(run_dir) == before
            if outcome == "clear" and not untouched:
                outcome = "unclear"  # refused, but wrote to the run
            record(f"{name}_{then}", f"{fault}, then `{then}`", outcome,
                   f"exit {done.returncode}; files unchanged: {untouched}", t0,
                   message=_message(done.stderr))
    if quick:
        _cheap_scenarios(model, rows, record, path)
        return rows

    # SIGKILL part-way, then --resume.
    t0 = time.perf_counter()
    killed = _sigkill_part_way(model, path("killed"))
    shutil.copytree(path("killed"), path("two_writers"))
    outcome, detail = _resume_and_compare(path("killed"), ref)
    record("sigkill_resume", f"SIGKILL after {killed} of {NUM_SAMPLES} draws, then --resume",
           outcome, detail, t0)

    # Two writers: two `--resume` of one partial run at once.
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "tfp_sgmcmc.cli",
                               *_resume_argv(path("two_writers"))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env()) for _ in range(2)]
    results = [(p.wait(timeout=600), p.communicate()[1]) for p in procs]
    codes = sorted(c for c, _ in results)
    rows_after = _draws(path("two_writers")).shape[0]
    right = _same_as_reference(path("two_writers"), ref)
    errs = [e for c, e in results if c != 0]
    if any("Traceback" in e for _, e in results):
        outcome = "traceback"
    elif not right:
        outcome = "silent"
    elif codes == [0, 2] and len(_error_lines(errs[0])) == 1:
        outcome = "clear"
    elif codes == [0, 0]:
        outcome = "ok"  # they did not overlap: the second resumed a complete run to itself
    else:
        outcome = "unclear"
    detail = (f"exit {codes}, {rows_after} rows for {NUM_SAMPLES} draws"
              + (", draws = uninterrupted run" if right else ", draws differ"))
    record("two_writers", "two `sample --resume` of one run at once", outcome, detail, t0,
           message=_message(errs[0]) if errs else "")

    # A full disk met by the HDF5 append, then by the checkpoint (patched writers).
    for name, what, k in (("enospc_append", "append", 5), ("enospc_checkpoint", "savez", 6)):
        t0 = time.perf_counter()
        run_dir = path(name)
        done = _python(PATCHED_CHILD, what, str(k), json.dumps(_sample_argv(model, run_dir)))
        fault = _classify_refusal(done.returncode, done.stderr)
        left = _leftovers(run_dir)
        if fault == "clear" and ("draws are safe" not in done.stderr or left):
            fault = "unclear"
        recovery, rdetail = _resume_and_compare(run_dir, ref)
        writer = "HDF5 append" if what == "append" else "checkpoint write (np.savez)"
        record(name, f"ENOSPC from the {writer} (patched), then --resume",
               _combine(fault, recovery), f"exit {done.returncode}; leftovers {left}; {rdetail}",
               t0, message=_message(done.stderr))

    # The real writers under a file size limit (EFBIG), no patch.
    t0 = time.perf_counter()
    run_dir = path("file_size_limit")
    # Half the finished store, plus what the driver reserves ahead of one append (twice
    # the chunk's 3,000 bytes and 64 KiB; tfp_sgmcmc/driver/store.py): it fails half-way.
    limit = os.path.getsize(os.path.join(path("reference"), "samples.h5")) // 2 + 71_536
    done = _python(FSIZE_CHILD, str(limit), json.dumps(_sample_argv(model, run_dir)))
    fault = _classify_refusal(done.returncode, done.stderr)
    left = _leftovers(run_dir) if os.path.isdir(run_dir) else []
    if fault == "clear" and ("draws are safe" not in done.stderr or left):
        fault = "unclear"
    recovery, rdetail = _resume_and_compare(run_dir, ref)
    record("file_size_limit", f"real writers past RLIMIT_FSIZE = {limit:,} bytes (EFBIG), "
           "then --resume", _combine(fault, recovery),
           f"exit {done.returncode}; leftovers {left}; {rdetail}", t0,
           message=_message(done.stderr))

    # A read-only run directory (permissions do not bind root).
    t0 = time.perf_counter()
    if os.geteuid() == 0:
        record("read_only_dir", "--resume of a run in a read-only directory", "skipped",
               "running as root, which permissions do not bind", t0)
    else:
        run_dir = path("read_only")
        shutil.copytree(path("reference"), run_dir)
        os.chmod(run_dir, 0o555)
        try:
            done = _cli(_resume_argv(run_dir))
        finally:
            os.chmod(run_dir, 0o755)
        record("read_only_dir", "--resume of a run in a read-only directory",
               _classify_refusal(done.returncode, done.stderr), f"exit {done.returncode}", t0,
               message=_message(done.stderr))

    # Flipped bytes in the stored draws: diagnose, --resume, open_run.
    run_dir = path("flipped")
    shutil.copytree(path("reference"), run_dir)
    store = os.path.join(run_dir, "samples.h5")
    _flip_bytes(store, ref[1234])
    before = open(store, "rb").read()
    for name, then, step in (
        ("flipped_bytes_diagnose", "`diagnose`", lambda: _cli(["diagnose", "--run-dir", run_dir])),
        ("flipped_bytes_resume", "`--resume`", lambda: _cli(_resume_argv(run_dir))),
        ("flipped_bytes_open_run", "`open_run(...).samples()`",
         lambda: _python(OPEN_RUN_CHILD, run_dir)),
    ):
        t0 = time.perf_counter()
        done = step()
        outcome = _classify_refusal(done.returncode, done.stderr, python="open_run" in name)
        if outcome == "clear" and open(store, "rb").read() != before:
            outcome = "unclear"  # refused, but wrote to the damaged file
        record(name, f"16 flipped bytes (4 values of draw 1234), then {then}", outcome,
               f"exit {done.returncode}; samples.h5 unchanged: "
               f"{open(store, 'rb').read() == before}", t0, message=_message(done.stderr))

    # A zero-length samples.h5: --resume must refuse without writing over it.
    run_dir = path("zero_length")
    shutil.copytree(path("reference"), run_dir)
    open(os.path.join(run_dir, "samples.h5"), "wb").close()
    for name, argv in (("zero_length_resume", _resume_argv(run_dir)),
                       ("zero_length_diagnose", ["diagnose", "--run-dir", run_dir])):
        t0 = time.perf_counter()
        done = _cli(argv)
        outcome = _classify_refusal(done.returncode, done.stderr)
        size = os.path.getsize(os.path.join(run_dir, "samples.h5"))
        if outcome == "clear" and size != 0:
            outcome = "unclear"
        then = "`--resume`" if argv[0] == "sample" else "`diagnose`"
        record(name, f"zero-length samples.h5, then {then}", outcome,
               f"exit {done.returncode}; samples.h5 now {size} bytes", t0,
               message=_message(done.stderr))

    # A damaged checkpoint (one flipped byte in the middle of checkpoint.npz).
    t0 = time.perf_counter()
    run_dir = path("bad_checkpoint")
    shutil.copytree(path("reference"), run_dir)
    ckpt = os.path.join(run_dir, "checkpoint.npz")
    data = bytearray(open(ckpt, "rb").read())
    data[len(data) // 2] ^= 0xFF
    with open(ckpt, "wb") as f:
        f.write(bytes(data))
    done = _cli(_resume_argv(run_dir))
    record("damaged_checkpoint", "one flipped byte in checkpoint.npz, then --resume",
           _classify_refusal(done.returncode, done.stderr), f"exit {done.returncode}", t0,
           message=_message(done.stderr))

    _cheap_scenarios(model, rows, record, path)
    return rows


def _cheap_scenarios(model: str, rows: list[dict[str, Any]], record: Any, path: Any) -> None:
    """Bad flag values: refused before TensorFlow is imported, nothing written."""
    base = _sample_argv(model, path("cheap"))
    huge = str(10**15)
    cheap = [
        ("num_samples_0", "--num-samples 0", "--num-samples", "0"),
        ("num_samples_huge", f"--num-samples {huge}", "--num-samples", huge),
        ("burnin_huge", f"--burnin {huge}", "--burnin", huge),
        ("num_chains_0", "--model-arg num_chains=0", "--model-arg", "num_chains=0"),
        ("step_size_0", "--step-size 0", "--step-size", "0"),
        ("step_size_negative", "--step-size -1", "--step-size", "-1"),
        ("unknown_kernel", "--kernel hmc9", "--kernel", "hmc9"),
        ("resume_missing_dir", "--resume of a directory that does not exist", None, None),
    ]
    for name, fault, flag, value in cheap:
        t0 = time.perf_counter()
        if flag is None:
            argv = _resume_argv(path("does_not_exist"))
        else:
            argv = list(base)
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        done = _python(CHEAP_CHILD, json.dumps(argv))
        report = json.loads(done.stdout)
        outcome = _classify_refusal(report["code"], report["stderr"] + done.stderr)
        if outcome == "clear" and report["tensorflow"]:
            outcome = "unclear"  # refused, but only after importing TensorFlow
        if outcome == "clear" and os.path.exists(path("cheap")):
            outcome = "unclear"  # refused, but left a run directory behind
        record(name, fault, outcome,
               f"exit {report['code']} in {report['seconds']:.2f} s, TensorFlow imported: "
               f"{report['tensorflow']}", t0, message=_message(report["stderr"]))


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| scenario | fault | outcome | what happened | message |", "|---|---|---|---|---|"]
    for r in rows:
        msg = r["message"].replace("|", "\\|")
        detail = r["detail"].replace("|", "\\|")
        lines.append(f"| `{r['scenario']}` | {r['fault']} | **{r['outcome']}** | {detail} | "
                     f"{msg} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=None, help="also write the JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--quick", action="store_true",
                        help="the refusals only (no kills, no full disks), 1,000 draws")
    args = parser.parse_args()
    if args.quick:
        global NUM_SAMPLES
        NUM_SAMPLES = 1000  # ten chunks of 100: the edits above need at least eight
    work = tempfile.mkdtemp(prefix="fault_trial_")
    t0 = time.perf_counter()
    try:
        rows = run_trial(work, quick=args.quick)
    finally:
        if args.keep:
            _log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    counts = {k: sum(r["outcome"] == k for r in rows)
              for k in ("clear", "ok", "traceback", "silent", "unclear", "skipped")}
    result = {
        "scenarios": rows,
        "counts": counts,
        "seconds": round(time.perf_counter() - t0, 1),
        "environment": {"python": sys.version.split()[0], "platform": platform.platform(),
                        "nproc": os.cpu_count(), "h5py": h5py.__version__,
                        "rlimit_fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0],
                        "enospc": errno.ENOSPC},
    }
    text = json.dumps(result, indent=2)
    print(text)
    print()
    print(_table(rows))
    print()
    print(", ".join(f"{k}: {v}" for k, v in counts.items()))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    # A gate, not only a report: anything silent or a raw traceback fails the trial.
    return 1 if counts["silent"] or counts["traceback"] else 0


if __name__ == "__main__":
    sys.exit(main())
