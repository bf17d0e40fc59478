"""Our samplers and the peers' (SGMCMCJax, BlackJAX) timed round-robin in one run.

Workload: ``bench_samplers.py``'s Bayesian logistic regression (N = 1,000,000,
d = 10, prior N(0, 10 I), one float32 chain started at the MAP), minibatches of
0.1% and 1% of the rows, our default ``"epoch"`` scheme with the row-packed copy.

Every round runs, one after another and never two at once:

* our worker (a long-lived process that compiled each configuration once, at
  the start): ``--calls`` timed calls of each of our configurations;
* optionally a second worker of ours on another checkout of the library
  (``--baseline-root DIR``: a directory holding a ``tfp_sgmcmc`` package, put in
  front of ``PYTHONPATH``), so a change is timed against the code before it in
  the same run;
* each peer's own benchmark script, run afresh in the peer's virtualenv
  (``--sgmcmcjax-python``, ``--blackjax-python``) with its logistic-regression
  section restricted to this round's batch size and number of samples per call
  (set through the script's problem-size constants before it runs; its code is
  not changed). Each invocation compiles again and times ``--peer-repeats`` calls.

``--intra-op-threads 0 1`` times our side twice, with TensorFlow's default thread
pool (XLA on CPU then splits some fused ops of a step, such as the minibatch
gather, across the cores) and with one intra-op thread
(``tf.config.threading.set_intra_op_parallelism_threads(1)``, no such split; the
peers' jax compiles this workload's ops without it).

For each round the figure is our median samples/s over the round's calls divided
by the peer's median samples/s of that round; the report gives every round's ratio
and their median, against each peer and against the faster of the two. The machine
may be shared, so only these ratios are comparable; the load average is recorded
at every round.

Pairs (ours: peers):

* ``sgld``: SGMCMCJax ``build_sgld_sampler``, BlackJAX ``sgld``;
* ``sgld_cv`` (control variates at the MAP): SGMCMCJax ``build_sgldCV_sampler``,
  BlackJAX ``sgld`` on ``control_variates``;
* ``sgnht``: SGMCMCJax ``build_sgnht_sampler``, BlackJAX ``sgnht``;
* ``sghmc_L5_traj`` (L = 5, one minibatch per trajectory): BlackJAX ``sghmc``
  (which uses one minibatch per trajectory).

The peers' scripts are not part of this project. Point ``--peer-scripts`` (or the
environment variable ``SGMCMC_PEER_SCRIPTS``) at a directory holding
``bench_sgmcmcjax.py``, ``bench_blackjax.py`` and their ``common.py``, and the
``--*-python`` options (or ``SGMCMCJAX_PYTHON``, ``BLACKJAX_PYTHON``) at the
interpreters of virtualenvs where SGMCMCJax 0.2.13 (jax 0.7.2) and BlackJAX
1.7.1 (jax 0.10.2) are installed. A peer whose script or interpreter is missing
is skipped (the report says so); with none, only our side is timed.

``--profile`` times no peer: it reports, per batch size and thread setting, the
CPU time per step (process time, all threads) of our SGLD, SGLD-CV and SGNHT, of
the minibatch draw alone and of the minibatch gradient alone, round-robin in one
process.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_vs_peers.py --quick   # smoke test, ours only
    PYTHONPATH=. python benchmarks/bench_vs_peers.py --peer-scripts DIR \\
        --sgmcmcjax-python VENV_SG/bin/python --blackjax-python VENV_BJ/bin/python \\
        --batch-fractions 0.001 0.01 --rounds 5 --intra-op-threads 0 1 \\
        --output benchmarks/results/vs_peers.json
    PYTHONPATH=. python benchmarks/bench_vs_peers.py --profile --batch-fractions 0.001 \\
        --intra-op-threads 0 1 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))

#: Our configuration -> the peers' sampler name in their logistic-regression section.
PAIRS = {
    "sgld": {"sgmcmcjax": "sgld", "blackjax": "sgld"},
    "sgld_cv": {"sgmcmcjax": "sgld_cv", "blackjax": "sgld_cv"},
    "sgnht": {"sgmcmcjax": "sgnht", "blackjax": "sgnht"},
    "sghmc_L5_traj": {"blackjax": "sghmc_L5"},
}
PEER_SCRIPTS = {"sgmcmcjax": "bench_sgmcmcjax.py", "blackjax": "bench_blackjax.py"}
ENV_PYTHON = {"sgmcmcjax": "SGMCMCJAX_PYTHON", "blackjax": "BLACKJAX_PYTHON"}

#: Runs a peer's script with its logistic-regression sizes set for one batch size:
#: argv[1] the script, argv[2] the batch size, argv[3] samples per call, the rest
#: the script's own arguments.
PEER_BOOTSTRAP = (
    "import os, runpy, sys\n"
    "script, batch, nsamples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])\n"
    "sys.path.insert(0, os.path.dirname(script))\n"
    "import common\n"
    "common.LOGREG_BATCHES = (batch,)\n"
    "common.LOGREG_NSAMPLES = nsamples\n"
    "sys.argv = [script] + sys.argv[4:]\n"
    "runpy.run_path(script, run_name='__main__')\n"
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_average() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def median(xs: list[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else 0.5 * (s[m - 1] + s[m])


# --------------------------------------------------------------------------- #
# Our worker: compiles once, then answers one request per round on stdin.
# --------------------------------------------------------------------------- #


def worker(args: argparse.Namespace) -> None:
    """Build every (configuration, batch size) once, then time on request.

    Requests are JSON lines ``{"batch": n, "calls": k, "round": r}`` on stdin;
    each answer is one ``@@JSON@@{...}`` line on stdout with the samples/s of
    every call of every configuration. An empty line ends the worker.
    """
    import tensorflow as tf

    if args.intra_op_threads[0]:  # before TensorFlow starts its thread pools
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads[0])
    import bench_samplers as bs
    import numpy as np
    from _common import make_data, timed_call

    import tfp_sgmcmc as sg

    x_np, y_np = make_data(args.num_examples, args.dim)
    x, y = tf.constant(x_np), tf.constant(y_np)
    data = sg.InMemoryData((x, y), scheme="epoch", pack_rows=True)
    full = sg.MinibatchEstimator(bs.log_likelihood, data, args.num_examples, bs.log_prior)
    centre = tf.convert_to_tensor(sg.find_map(full, tf.zeros([args.dim], tf.float32)).position)
    centre_full = full.full_log_prob_and_gradient(centre)
    configs: dict[tuple[str, int], dict[str, Any]] = {}
    first: dict[str, float] = {}
    for n, samples in zip(args.batch_sizes, args.samples):
        group = bs.build_group(
            "epoch", data, x, y, n, samples, samples, centre, centre_full, set(args.configs)
        )
        for name in args.configs:
            c = group[name]
            t, out = timed_call(c["fn"], centre, tf.constant([11, 23], tf.int32))
            if not np.all(np.isfinite(out)):
                raise RuntimeError(f"{name} at n = {n} gave a non-finite chain")
            configs[(name, n)] = c
            first[f"{name}@{n}"] = round(t, 2)
            log(f"  [ours {args.label}] {name} n={n}: first call {t:.1f} s")
    hello = {
        "ready": True,
        "first_call_s": first,
        "tfp_sgmcmc": sg.__file__,
        "intra_op_parallelism_threads": tf.config.threading.get_intra_op_parallelism_threads(),
    }
    print("@@JSON@@" + json.dumps(hello), flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        req = json.loads(line)
        n, calls, r = int(req["batch"]), int(req["calls"]), int(req["round"])
        out: dict[str, list[float]] = {}
        for name in args.configs:
            c = configs[(name, n)]
            rates = []
            for k in range(calls):
                seed = tf.constant([1000 * r + k + 1, 17 * k + 5], tf.int32)
                t, _ = timed_call(c["fn"], centre, seed)
                rates.append(c["steps"] / t)
            out[name] = rates
        print("@@JSON@@" + json.dumps({"samples_per_s": out}), flush=True)


def profile(args: argparse.Namespace) -> None:
    """Where a step's time goes: CPU µs per step (process time, all threads) and samples/s.

    In one process, round-robin: our SGLD, SGLD-CV and SGNHT, the minibatch draw
    alone (the estimator's own ``sample_batch``, every gathered element read once),
    and the minibatch gradient alone on a fixed batch (``bench_samplers``' floor),
    at the first batch size. Prints one ``@@JSON@@`` line.
    """
    import tensorflow as tf

    if args.intra_op_threads[0]:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads[0])
    import bench_samplers as bs
    from _common import make_data, sync

    import tfp_sgmcmc as sg

    n, steps = args.batch_sizes[0], args.samples[0]
    x_np, y_np = make_data(args.num_examples, args.dim)
    x, y = tf.constant(x_np), tf.constant(y_np)
    data = sg.InMemoryData((x, y), scheme="epoch", pack_rows=True)
    full = sg.MinibatchEstimator(bs.log_likelihood, data, args.num_examples, bs.log_prior)
    centre = tf.convert_to_tensor(sg.find_map(full, tf.zeros([args.dim], tf.float32)).position)
    group = bs.build_group(
        "epoch",
        data,
        x,
        y,
        n,
        steps,
        steps,
        centre,
        full.full_log_prob_and_gradient(centre),
        {"sgld", "sgld_cv", "sgnht"},
    )
    fns = {k: group[k]["fn"] for k in ("sgld", "sgld_cv", "sgnht", "gradient_floor")}
    fns["draw_alone"] = bs.make_draw_floor(data, n, 1, steps)
    for f in fns.values():
        sync(f(centre, tf.constant([1, 2], tf.int32)))
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(args.rounds):
        for k, f in fns.items():
            c0, t0 = time.process_time(), time.perf_counter()
            sync(f(centre, tf.constant([r + 2, 7], tf.int32)))
            wall[k].append(steps / (time.perf_counter() - t0))
            cpu[k].append(1e6 * (time.process_time() - c0) / steps)
    out = {
        k: {
            "samples_per_s_median": round(median(wall[k])),
            "cpu_us_per_step_median": round(median(cpu[k]), 2),
            "cpu_us_per_step_rounds": [round(v, 2) for v in cpu[k]],
        }
        for k in fns
    }
    out["intra_op_threads"] = args.intra_op_threads[0]
    out["load_average_end"] = load_average()
    print("@@JSON@@" + json.dumps(out), flush=True)


class OurWorker:
    """A worker process of ours (this checkout, or ``root`` in front of ``PYTHONPATH``)."""

    def __init__(
        self, label: str, root: str | None, threads: int, args: argparse.Namespace
    ) -> None:
        env = dict(os.environ)
        if root:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            "--label",
            label,
            "--num-examples",
            str(args.num_examples),
            "--dim",
            str(args.dim),
            "--batch-sizes",
            *map(str, args.batch_sizes),
            "--samples",
            *map(str, args.samples),
            "--intra-op-threads",
            str(threads),
            "--configs",
            *args.configs,
        ]
        self.label = label
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        self.hello = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("@@JSON@@"):
                return json.loads(line[len("@@JSON@@") :])
        raise RuntimeError(f"our worker {self.label!r} ended (rc {self.proc.wait()})")

    def run(self, batch: int, calls: int, r: int) -> dict[str, list[float]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"batch": batch, "calls": calls, "round": r}) + "\n")
        self.proc.stdin.flush()
        return self._read()["samples_per_s"]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        self.proc.wait(timeout=60)


def run_peer(
    python: str, script: str, samplers: list[str], batch: int, nsamples: int, repeats: int
) -> dict[str, Any]:
    """One invocation of a peer's script: its samples/s per sampler at ``batch``."""
    cmd = [
        python,
        "-c",
        PEER_BOOTSTRAP,
        script,
        str(batch),
        str(nsamples),
        "--sections",
        "logreg",
        "--samplers",
        ",".join(samplers),
        "--repeats",
        str(repeats),
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@JSON@@")), None)
    if proc.returncode != 0 or line is None:
        return {
            "error": proc.stderr[-1500:],
            "returncode": proc.returncode,
            "command": shlex.join(cmd),
        }
    res = json.loads(line[len("@@JSON@@") :])
    runs = {r["sampler"]: r for r in res["logreg"]["runs"] if int(r["batch"]) == batch}
    return {
        "library": res.get("library"),
        "version": res.get("version"),
        "jax": res.get("env", {}).get("jax"),
        "wall_s": round(time.perf_counter() - t0, 1),
        "samples_per_s": {k: r["samples_per_s"] for k, r in runs.items()},
        "samples_per_s_calls": {k: [nsamples / t for t in r["run_s_all"]] for k, r in runs.items()},
        "finite": {k: r["finite"] for k, r in runs.items()},
    }


def find_peers(args: argparse.Namespace) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """The peers that can run: name -> (python, script); and why the others are skipped."""
    scripts = args.peer_scripts or os.environ.get("SGMCMC_PEER_SCRIPTS")
    found, skipped = {}, {}
    for name, fname in PEER_SCRIPTS.items():
        python = getattr(args, f"{name}_python") or os.environ.get(ENV_PYTHON[name])
        script = os.path.join(scripts, fname) if scripts else None
        if not python or not os.path.exists(os.path.expanduser(python)):
            skipped[name] = f"no interpreter (--{name}-python or {ENV_PYTHON[name]})"
        elif not script or not os.path.exists(script):
            skipped[name] = f"no {fname} (--peer-scripts or SGMCMC_PEER_SCRIPTS)"
        else:
            found[name] = (os.path.expanduser(python), script)
    return found, skipped


def summarise(rounds: list[dict[str, Any]], ours_labels: list[str]) -> list[dict[str, Any]]:
    """Per (batch, configuration, our checkout): samples/s and ratios, per round and median."""
    rows = []
    batches = sorted({r["batch"] for r in rounds})
    for n in batches:
        rs = [r for r in rounds if r["batch"] == n]
        for label in ours_labels:
            for name, peers in PAIRS.items():
                if name not in rs[0]["ours"].get(label, {}):
                    continue
                mine = [median(r["ours"][label][name]) for r in rs]
                row: dict[str, Any] = {
                    "batch": n,
                    "config": name,
                    "ours": label,
                    "ours_samples_per_s_rounds": [round(v) for v in mine],
                    "ours_samples_per_s_median": round(median(mine)),
                }
                best = [0.0] * len(rs)
                for peer, theirs in peers.items():
                    vals = [
                        r["peers"].get(peer, {}).get("samples_per_s", {}).get(theirs) for r in rs
                    ]
                    if any(v is None for v in vals):
                        continue
                    ratios = [a / b for a, b in zip(mine, vals)]
                    row[f"{peer}_samples_per_s_rounds"] = [round(v) for v in vals]
                    row[f"{peer}_samples_per_s_median"] = round(median(vals))
                    row[f"ratio_to_{peer}_rounds"] = [round(v, 3) for v in ratios]
                    row[f"ratio_to_{peer}_median"] = round(median(ratios), 3)
                    best = [max(b, v) for b, v in zip(best, vals)]
                if all(best):
                    ratios = [a / b for a, b in zip(mine, best)]
                    row["ratio_to_faster_peer_rounds"] = [round(v, 3) for v in ratios]
                    row["ratio_to_faster_peer_median"] = round(median(ratios), 3)
                for other in ours_labels:
                    if other != label and name in rs[0]["ours"].get(other, {}):
                        ratios = [a / median(r["ours"][other][name]) for a, r in zip(mine, rs)]
                        row[f"ratio_to_ours_{other}_median"] = round(median(ratios), 3)
                rows.append(row)
    return rows


def render_markdown(summary: list[dict[str, Any]]) -> str:
    """One table: samples/s (medians over rounds) and the medians of per-round ratios."""
    lines = [
        "| batch | config | ours | ours samples/s | SGMCMCJax | BlackJAX | ours/SGMCMCJax "
        "| ours/BlackJAX | ours/faster peer (rounds) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary:

        def cell(key: str, fmt: str = "{:,}", r: dict[str, Any] = r) -> str:
            return fmt.format(r[key]) if key in r else "–"

        rounds = ", ".join(f"{v:.2f}" for v in r.get("ratio_to_faster_peer_rounds", []))
        faster = cell("ratio_to_faster_peer_median", "**{:.2f}**")
        lines.append(
            f"| {r['batch']:,} | {r['config']} | {r['ours']} | {r['ours_samples_per_s_median']:,} "
            f"| {cell('sgmcmcjax_samples_per_s_median')} | {cell('blackjax_samples_per_s_median')} "
            f"| {cell('ratio_to_sgmcmcjax_median', '{:.2f}')} "
            f"| {cell('ratio_to_blackjax_median', '{:.2f}')} | {faster} ({rounds}) |"
        )
    return "\n".join(lines) + "\n"


def run_profiles(args: argparse.Namespace) -> dict[str, Any]:
    """``--profile``: one process per (thread setting, batch size), one after another."""
    from _common import dump_json, environment

    env, load_start, runs = environment(), load_average(), []
    for threads in args.intra_op_threads:
        for n, steps in zip(args.batch_sizes, args.samples):
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--worker",
                "--profile",
                "--num-examples",
                str(args.num_examples),
                "--dim",
                str(args.dim),
                "--batch-sizes",
                str(n),
                "--samples",
                str(steps),
                "--rounds",
                str(args.rounds),
                "--intra-op-threads",
                str(threads),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("@@JSON@@"))
            runs.append({"batch": n, "steps_per_call": steps, **json.loads(line[8:])})
            log(f"profile n={n}, intra-op threads {threads or 'default'}: {runs[-1]}")
    report = {
        "benchmark": "bench_vs_peers --profile: CPU time per step of our SGLD and its parts",
        **env,
        "command": shlex.join([os.path.basename(sys.executable), *sys.argv]),
        "load_average_start": load_start,
        "runs": runs,
    }
    dump_json(report, args.output)
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke test: N = 20,000, 2 rounds")
    p.add_argument("--num-examples", type=int, default=None, help="N (default 1,000,000)")
    p.add_argument("--dim", type=int, default=10)
    p.add_argument("--batch-fractions", type=float, nargs="+", default=[0.001, 0.01])
    p.add_argument(
        "--samples",
        type=int,
        nargs="+",
        default=None,
        help="samples per timed call, one per batch fraction (default 10,000 at 0.1%%, "
        "2,000 at 1%%); the peers are run with the same number",
    )
    p.add_argument("--configs", nargs="+", default=list(PAIRS), choices=list(PAIRS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=3, help="our timed calls per round")
    p.add_argument("--peer-repeats", type=int, default=3, help="peers' timed calls per round")
    p.add_argument("--peer-scripts", default=None, help="directory of the peers' scripts")
    p.add_argument("--sgmcmcjax-python", default=None)
    p.add_argument("--blackjax-python", default=None)
    p.add_argument(
        "--baseline-root",
        default=None,
        help="also time the tfp_sgmcmc package found in this directory (e.g. an export of "
        "an earlier commit), as our second worker 'baseline'",
    )
    p.add_argument(
        "--intra-op-threads",
        type=int,
        nargs="+",
        default=[0],
        help="TensorFlow intra-op threads of our worker (0: TensorFlow's default, one per "
        "core); several values start one worker each (e.g. 0 1)",
    )
    p.add_argument("--output", default=None, help="also write the JSON here")
    p.add_argument("--render", default=None, metavar="JSON", help="print a saved report's table")
    # The worker's own arguments (internal).
    p.add_argument(
        "--profile",
        action="store_true",
        help="no peers: where our step's time goes (CPU us per step of SGLD, SGLD-CV, SGNHT, "
        "the minibatch draw alone and the gradient alone), per batch size and thread setting",
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--label", default="current", help=argparse.SUPPRESS)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        (profile if args.profile else worker)(args)
        return {}
    if args.render:
        with open(args.render, encoding="utf-8") as f:
            report = json.load(f)
        print(render_markdown(report["summary"]))
        return report

    args.num_examples = args.num_examples or (20_000 if args.quick else 1_000_000)
    if args.quick:
        args.rounds = min(args.rounds, 2)
    args.batch_sizes = [max(1, round(f * args.num_examples)) for f in args.batch_fractions]
    if args.samples is None:
        args.samples = [10_000 if f <= 0.001 else 2_000 for f in args.batch_fractions]
        if args.quick:
            args.samples = [200] * len(args.batch_fractions)
    if len(args.samples) != len(args.batch_sizes):
        raise ValueError("`--samples` needs one value per batch fraction.")
    if args.profile:
        return run_profiles(args)
    peers, skipped = ({}, {"all": "--quick"}) if args.quick else find_peers(args)
    for name, why in skipped.items():
        log(f"peer {name} skipped: {why}")

    from _common import dump_json, environment

    env = environment()
    load_start = load_average()
    t0 = time.perf_counter()
    workers = []
    for threads in args.intra_op_threads:
        suffix = "" if len(args.intra_op_threads) == 1 else f"_threads_{threads or 'default'}"
        workers.append(OurWorker("current" + suffix, None, threads, args))
        if args.baseline_root:
            workers.append(OurWorker("baseline" + suffix, args.baseline_root, threads, args))
    rounds = []
    for r in range(args.rounds):
        for n, nsamples in zip(args.batch_sizes, args.samples):
            entry: dict[str, Any] = {"round": r, "batch": n, "load_average_start": load_average()}
            entry["ours"] = {w.label: w.run(n, args.calls, r) for w in workers}
            entry["peers"] = {}
            for name, (python, script) in peers.items():
                samplers = sorted({PAIRS[c][name] for c in args.configs if name in PAIRS[c]})
                entry["peers"][name] = run_peer(
                    python, script, samplers, n, nsamples, args.peer_repeats
                )
            entry["load_average_end"] = load_average()
            rounds.append(entry)
            log(f"round {r + 1}/{args.rounds}, n={n}: load {entry['load_average_end']}")
    for w in workers:
        w.close()
    summary = summarise(rounds, [w.label for w in workers])
    report = {
        "benchmark": "bench_vs_peers: logistic regression, ours and the peers round-robin",
        "workload": {
            "num_examples": args.num_examples,
            "dim": args.dim,
            "dtype": "float32",
            "chains": 1,
            "scheme": "epoch (pack_rows=True)",
            "batch_sizes": args.batch_sizes,
            "samples_per_call": args.samples,
            "rounds": args.rounds,
            "our_calls": args.calls,
            "peer_repeats": args.peer_repeats,
            "configs": args.configs,
            "intra_op_threads": args.intra_op_threads,
        },
        **env,
        "command": shlex.join([os.path.basename(sys.executable), *sys.argv]),
        "ours": {w.label: w.hello for w in workers},
        "peers_skipped": skipped,
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "summary": summary,
        "rounds": rounds,
        "total_seconds": round(time.perf_counter() - t0, 1),
    }
    log(render_markdown(summary))
    dump_json(report, args.output)
    return report


if __name__ == "__main__":
    main()
