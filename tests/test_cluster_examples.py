"""The two ``docs/scale_out.md`` examples that need a cluster, run on local clusters.

* ``MultiWorkerMirroredStrategy``: the page's ``TF_CONFIG`` block, with its two hosts made
  ``127.0.0.1`` ports, in two worker processes that then run the page's first example (its
  one-machine ``MirroredStrategy`` line left out: the block's strategy takes its place).
  Both workers must hold the draws of the page's first example run as written in one
  process.

Marked ``cluster`` (left out of CI, with the slow tier): ``pytest -m cluster``. Every process
a test starts is ended before it returns.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest
from test_docs_blocks import page_blocks

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "scale_out.md"

pytestmark = pytest.mark.cluster


def _blocks():
    blocks = page_blocks(PAGE)
    first = blocks[0]
    assert "MirroredStrategy()" in first.code and "samples = run(" in first.code
    tf_config = next(b for b in blocks if "TF_CONFIG" in b.code)
    assert tf_config.mode == "skip"
    return first, tf_config


def _free_ports(k: int) -> list[int]:
    socks = [socket.socket() for _ in range(k)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


_PRINT = "\nimport json as _j\nprint(_j.dumps(samples.numpy().tolist()), flush=True)\n"


def _worker_code(first: str, tf_config: str, ports: list[int], index: int) -> str:
    """The page's TF_CONFIG block on ``127.0.0.1`` (its strategy line first, before any op
    runs), then the page's first example with its one-machine strategy left out."""
    cluster = tf_config.replace("host0:12345", f"127.0.0.1:{ports[0]}")
    cluster = cluster.replace("host1:12345", f"127.0.0.1:{ports[1]}")
    cluster = cluster.replace('"index": 0', f'"index": {index}')
    head, _, tail = cluster.partition("strategy = tf.distribute.MultiWorkerMirroredStrategy()")
    assert tail.strip() == "estimator = DistributedMinibatchEstimator(base, strategy)"
    example = "\n".join(
        ln for ln in first.splitlines() if not ln.startswith("strategy = tf.distribute.Mirrored")
    )
    assert example != first
    return (
        "import tensorflow as tf\n" + head
        + "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n" + example + _PRINT
    )  # fmt: skip


def _run_all(codes: list[str], timeout: float) -> list[np.ndarray]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        for code in codes
    ]  # fmt: skip
    outs = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=timeout)
            assert p.returncode == 0, stderr[-4000:]
            outs.append(np.asarray(json.loads(stdout.strip().splitlines()[-1])))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs


def test_the_multiworker_example_on_two_local_workers():
    first, tf_config = _blocks()
    (alone,) = _run_all([first.code + _PRINT], timeout=600)
    ports = _free_ports(2)
    workers = _run_all([_worker_code(first.code, tf_config.code, ports, i) for i in (0, 1)],
                       timeout=600)
    assert alone.shape == (1000, 5) and np.abs(alone[-1] - alone[0]).max() > 1e-2
    # The two workers hold one chain, bit for bit (the same reduced gradient, the same noise).
    np.testing.assert_array_equal(workers[0], workers[1])
    # And the one-process chain, to float32 rounding of the sums' order (two shards of 500
    # rows added, not 1,000 rows at once).
    np.testing.assert_allclose(workers[0], alone, rtol=0, atol=1e-4)
