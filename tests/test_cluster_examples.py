"""The two ``docs/scale_out.md`` examples that need a cluster, run on local clusters.

* ``MultiWorkerMirroredStrategy``: the page's ``TF_CONFIG`` block, with its two hosts made
  ``127.0.0.1`` ports, in two worker processes that then run the page's first example (its
  one-machine ``MirroredStrategy`` line left out: the block's strategy takes its place).
  Both workers must hold the draws of the page's first example run as written in one
  process.
* ``ray.init(address=...)`` with a ``runtime_env`` of the reader's package: the page's Ray
  block, on a local cluster of a Ray head and a second Ray node (``ray.cluster_utils``; the
  page's budget of 10⁹ gradient evaluations made 1,200 steps), must make the picks of the
  same tuner run in one process without Ray: the same arms in every round, the same winner.

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


# --------------------------------------------------------------------------- #
# MAMBA's arms on a Ray head and a second Ray node, both on this machine
# --------------------------------------------------------------------------- #
#: The reader's package of models the page's Ray block imports: the page's `build` (SGLD-CV
#: on the paper's logistic regression), on 2,000 rows to keep the run small.
MY_MODELS = '''
import tensorflow as tf
import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
from tfp_sgmcmc.models.logistic_regression import logistic_regression


def build():
    lr = logistic_regression(num_examples=2_000)
    base = lr.estimator(100)
    mode = sg.find_map(base, tf.zeros([10], tf.float32)).position
    return tu.KernelSpec(sg.SGLD, sg.ControlVariateEstimator(base, mode))
'''

#: What the page defines before its Ray block (``arms``, ``theta0``, ``problem``).
_PRELUDE = '''
import json, sys
sys.path.insert(0, {pkg!r})
import numpy as np
import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
import my_models
arms = tu.grid(step_size=tu.log10_grid(-4.5, -7.0))
theta0 = np.zeros(10, np.float32)
problem = tu.TuningProblem(my_models.build)
'''

_REPORT = '''
print(json.dumps({{"best": result.best_index, "nodes": {nodes},
                  "records": [[r.round, r.arm_index, r.steps, r.metric] for r in result.records]}}),
      flush=True)
'''

#: The page's budget (10⁹ gradient evaluations) made small.
_BUDGET = "tu.steps(1_200)"


def _ray_processes(marker: str) -> list[int]:
    """PIDs of the processes whose command line names ``marker`` (the test's Ray directory)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


def test_the_ray_cluster_example_on_a_head_and_a_second_node(tmp_path):
    import signal
    import tempfile

    block = next(b for b in page_blocks(PAGE) if 'ray.init(address="auto"' in b.code)
    assert block.mode == "skip" and "my_models" in block.code
    pkg = tmp_path / "pkg"
    (pkg / "my_models").mkdir(parents=True)
    (pkg / "my_models" / "__init__.py").write_text(MY_MODELS, encoding="utf-8")
    prelude = _PRELUDE.format(pkg=str(pkg))
    assert "tu.gradient_evaluations(1e9)" in block.code
    # A short directory of its own (Ray's socket paths are length-limited), so that the
    # processes of this cluster, and only they, can be found and ended.
    ray_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    on_cluster = (
        prelude
        + "import ray\nfrom ray.cluster_utils import Cluster\n"
        + f"cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=4, "
        f"temp_dir={ray_dir!r}, include_dashboard=False))\n"
        + "cluster.add_node(num_cpus=4)\n"
        + "cluster.wait_for_nodes()\n"
        + block.code.replace('address="auto"', "address=cluster.address")
        .replace("tu.gradient_evaluations(1e9)", _BUDGET)
        + _REPORT.format(nodes="len([n for n in ray.nodes() if n['Alive']])")
        + "ray.shutdown()\ncluster.shutdown()\n"
    )
    alone = prelude + f"result = tu.MAMBA(arms, theta0, problem, budget={_BUDGET}).run()\n"
    alone += _REPORT.format(nodes=1)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", RAY_USAGE_STATS_ENABLED="0")
    outs = []
    try:
        for code in (on_cluster, alone):
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  env=env, cwd=tmp_path, timeout=900, start_new_session=True)
            assert done.returncode == 0, done.stderr[-4000:]
            outs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        left = _ray_processes(ray_dir)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert not _ray_processes(ray_dir), "Ray processes left running"
    ray_run, one = outs
    assert ray_run["nodes"] == 2
    # The same picks: the same arms survive each round, with the same steps, and the same
    # arm wins; the metrics agree to the threads' rounding.
    key = sorted
    assert key(r[:3] for r in ray_run["records"]) == key(r[:3] for r in one["records"])
    assert ray_run["best"] == one["best"]
    got = {(r[0], r[1]): r[3] for r in ray_run["records"]}
    for rnd, arm, _, metric in one["records"]:
        np.testing.assert_allclose(got[rnd, arm], metric, rtol=1e-3)
