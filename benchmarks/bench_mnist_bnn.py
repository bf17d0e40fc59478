"""SGLD steps per second on the MAMBA paper's 784-100-10 BNN, beside SGMCMCJax and BlackJAX.

The peers' MLP workload, reproduced exactly: N = 60,000 examples with
``X ~ U(0, 1)^784`` and labels from a random linear teacher (the peers'
``mlp_data(seed=1)``), batch 600, SGLD step 1e-6, N(0, 1) prior on all 79,510
weights, float32, initial weights ``N(0, 10⁻⁴)``, 1,000 steps per call with
**every** state stored (as SGMCMCJax's sampler and the peers' BlackJAX
loop do). Configurations:

* ``plain_tf``: [`log_likelihood`][tfp_sgmcmc.models.mnist_bnn.log_likelihood]
  (matmuls) through [`SGLD`][tfp_sgmcmc.SGLD] and ``tfp.mcmc.sample_chain`` in
  one ``tf.function(jit_compile=True)``, for each minibatch scheme;
* ``keras``: the same network as a Keras 3 ``Sequential`` through
  [`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior] (``stateless_call``), same loop;
* a ``:prefetch`` suffix: the same with ``SGLD(prefetch_noise=True)`` (each step
  draws the next step's noise);
* ``sgmcmcjax`` / ``blackjax`` (with ``--peers DIR``): the peers' own MLP
  benchmark scripts (``bench_sgmcmcjax.py`` / ``bench_blackjax.py --sections
  mlp`` in ``DIR``), each run in its own virtualenv's Python.

The machine may be shared, so the configurations are **interleaved**: each of
``--rounds`` rounds runs every configuration once (ours: ``--repeats`` timed
calls after the compiling call of the first round; a peer: one process with
its own compile and ``--repeats`` timed calls); a configuration's figure is the
median over all its timed calls, and the ratios ours/peer are taken from these
medians. The load average is recorded before and after every round. Prints one
JSON document (progress on stderr).

Usage::

    python benchmarks/bench_mnist_bnn.py --peers PEERS_DIR \\
        --sgmcmcjax-python VENV_SG/bin/python --blackjax-python VENV_BJ/bin/python
    python benchmarks/bench_mnist_bnn.py                 # ours only, ~2 min idle
    python benchmarks/bench_mnist_bnn.py --quick         # N = 6,000, batch 60, 20 steps
    python benchmarks/bench_mnist_bnn.py --profile-only  # CPU ms/step of noise and gradient
    python benchmarks/bench_mnist_bnn.py --noise-order   # where the noise is drawn in a step
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import dump_json, environment, load_average, log, median, timed_call  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.models import mnist_bnn as mb  # noqa: E402

PEER_SCRIPTS = {"sgmcmcjax": "bench_sgmcmcjax.py", "blackjax": "bench_blackjax.py"}


def peers_mlp_data(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The peers' synthetic MLP data (same generator calls, labels as int32)."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, 784), dtype=np.float32)
    w = rng.standard_normal((784, 10)).astype(np.float32) / np.sqrt(784)
    labels = np.argmax(x @ w + 0.5 * rng.standard_normal((n, 10)), axis=1)
    return x, labels.astype(np.int32)


def make_run(kernel: tfp.mcmc.TransitionKernel, num_steps: int):
    @tf.function(jit_compile=True)
    def run(init, seed):
        return tfp.mcmc.sample_chain(num_steps, init, kernel=kernel, trace_fn=None, seed=seed)

    return run


class Ours:
    """One of our configurations: compiled on the first call, then timed calls on demand."""

    def __init__(
        self, name: str, estimator, init, num_steps: int, prefetch_noise: bool = False
    ) -> None:
        self.name, self.init, self.num_steps = name, init, num_steps
        kernel = sg.SGLD(estimator, step_size=1e-6, prefetch_noise=prefetch_noise)
        self.run = make_run(kernel, num_steps)
        self.first_s, out = timed_call(self.run, init, tf.constant([0, 0], tf.int32))
        self.stored = int(sum(np.prod(o.shape) for o in out))
        self.times: list[float] = []
        self.cpu: list[float] = []
        self.finite = True

    def time(self, repeats: int) -> None:
        for _ in range(repeats):
            seed = tf.constant([len(self.times) + 1, 7], tf.int32)
            c0 = time.process_time()
            t, out = timed_call(self.run, self.init, seed)
            self.cpu.append(time.process_time() - c0)
            self.times.append(t)
            self.finite &= all(bool(np.all(np.isfinite(o))) for o in out)
        log(f"[ours {self.name}] {self.num_steps / median(self.times[-repeats:]):.1f} steps/s")

    def record(self) -> dict:
        med = median(self.times)
        return {
            "config": self.name,
            "steps_per_s": self.num_steps / med,
            "s_per_call_median": med,
            "s_all": self.times,
            "cpu_s_per_1000_steps_median": 1000 * median(self.cpu) / self.num_steps,
            "first_call_s": self.first_s,
            "compile_s_est": self.first_s - med,
            "finite": self.finite,
            "stored_floats_per_call": self.stored,
        }


def run_peer(name: str, python: str, peers_dir: str, repeats: int, quick: bool) -> dict:
    """One run of a peer's MLP section in its own interpreter: its timed calls and steps."""
    cmd = [python, PEER_SCRIPTS[name], "--sections", "mlp", "--repeats", str(repeats)]
    proc = subprocess.run(
        cmd + (["--quick"] if quick else []),
        cwd=peers_dir,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{name} benchmark failed ({proc.returncode}): {proc.stderr[-2000:]}")
    # The peers' scripts print one JSON line after a ``@@JSON@@`` marker.
    out = json.loads(proc.stdout.rsplit("@@JSON@@", 1)[-1])
    mlp = dict(out["mlp"], version=out.get("version"))
    log(f"[{name}] {mlp['steps_per_s']:.1f} steps/s")
    return mlp


def time_programs(
    programs: dict, init: list, steps: int, repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU ms per step of each compiled ``steps``-step loop, ``repeats`` interleaved
    calls each after a compiling call."""
    wall: dict[str, list[float]] = {k: [] for k in programs}
    cpu: dict[str, list[float]] = {k: [] for k in programs}
    for fn in programs.values():
        timed_call(fn, init)  # compile
    for _ in range(repeats):  # interleaved
        for name, fn in programs.items():
            c0 = time.process_time()
            t, _ = timed_call(fn, init)
            wall[name].append(1000 * t / steps)
            cpu[name].append(1000 * (time.process_time() - c0) / steps)
    return wall, cpu


def step_parts_profile(x: np.ndarray, y: np.ndarray, batch: int, steps: int, repeats: int) -> dict:
    """CPU ms per step of the pieces of an SGLD step, each alone in one compiled loop.

    ``noise_philox``: TensorFlow's stateless Philox normals for the 79,510
    weights (what the kernels drew before); ``noise_threefry``: the kernels'
    noise now (``tfp_sgmcmc.internal.random.standard_normal``);
    ``minibatch_gradient``: the gather of ``batch`` random rows and the
    gradient, no noise. Single intra-op thread, so CPU time is not inflated by
    idle worker threads spinning on a loaded machine.
    """
    from tfp_sgmcmc.internal.random import standard_normal

    xt, yt = tf.constant(x), tf.constant(y)
    scale = float(x.shape[0]) / batch

    def loop(update):
        @tf.function(jit_compile=True)
        def run(ws):
            body = lambda i, ws: (i + 1, update(i, ws))  # noqa: E731
            return tf.while_loop(lambda i, ws: i < steps, body, (0, ws))[1]

        return run

    def noise(gen):
        return lambda i, ws: [w + gen(w.shape, tf.stack([i, j])) for j, w in enumerate(ws)]

    def gradient(i, ws):
        idx = tf.random.stateless_uniform([batch], tf.stack([i, -1]), 0, x.shape[0], tf.int32)
        with tf.GradientTape() as tape:
            tape.watch(ws)
            ll = mb.log_likelihood(ws, (tf.gather(xt, idx), tf.gather(yt, idx)))
            lp = scale * tf.reduce_sum(ll) + mb.log_prior(ws)
        return [w + 1e-6 * g for w, g in zip(ws, tape.gradient(lp, ws))]

    philox = lambda s, sd: tf.random.stateless_normal(s, sd, alg="philox")  # noqa: E731
    programs = {
        "noise_philox": loop(noise(philox)),
        "noise_threefry": loop(noise(standard_normal)),
        "minibatch_gradient": loop(gradient),
    }
    _, cpu = time_programs(programs, mb.init_state(seed=3, scale=1e-2), steps, repeats)
    out = {k: median(v) for k, v in cpu.items()}
    log("[profile] CPU ms/step " + ", ".join(f"{k} {v:.2f}" for k, v in out.items()))
    return {"cpu_ms_per_step_median": out, "steps_per_loop": steps, "repeats": repeats}


def noise_order_profile(x: np.ndarray, y: np.ndarray, batch: int, steps: int, repeats: int) -> dict:
    """Wall and CPU ms per SGLD step of three bare compiled loops that differ only in
    where the step's Gaussian noise is drawn (default intra-op threads).

    ``no_noise``: ``θ + ε/2 ∇`` only. ``noise_after_gradient``: the kernels' order,
    the gradient at ``θ_t`` carried from the previous step and the noise drawn in
    the update ``θ_{t+1} = θ_t + ε/2 g_t + √ε ξ_t`` that follows the previous
    step's backward pass. ``noise_before_gradient``: the same chain, but ``ξ_t``
    is drawn at the top of the step, before the forward pass (a zero-weight data
    dependency of the forward pass on ``ξ_t`` makes XLA schedule it there), and
    used after the backward pass. Same arithmetic, same noise
    (``tfp_sgmcmc.internal.random.standard_normal``), contiguous minibatch windows.
    """
    from tfp_sgmcmc.internal.random import standard_normal

    xt, yt = tf.constant(x), tf.constant(y)
    big_n = x.shape[0]
    scale = float(big_n) / batch

    def gradient(ws, i):
        start = tf.random.stateless_uniform([], tf.stack([i, -1]), 0, big_n - batch, tf.int32)
        xb = tf.slice(xt, [start, 0], [batch, x.shape[1]])
        yb = tf.slice(yt, [start], [batch])
        with tf.GradientTape() as tape:
            tape.watch(ws)
            lp = scale * tf.reduce_sum(mb.log_likelihood(ws, (xb, yb))) + mb.log_prior(ws)
        return tape.gradient(lp, ws)

    def noise(ws, i):
        return [1e-3 * standard_normal(w.shape, tf.stack([i, j])) for j, w in enumerate(ws)]

    def carried(draw: bool):
        def body(i, ws, gs):
            zs = noise(ws, i) if draw else [0.0] * len(ws)
            new = [w + 1e-6 * g + z for w, g, z in zip(ws, gs, zs)]
            return i + 1, new, gradient(new, i)

        return body

    def before(i, ws, gs):
        zs = noise(ws, i)
        first = ws[0] + 0.0 * zs[0][0, 0]  # orders the draw before the forward pass
        g = gradient([first] + list(ws[1:]), i)
        return i + 1, [w + 1e-6 * gi + z for w, gi, z in zip(ws, g, zs)], g

    def loop(body):
        @tf.function(jit_compile=True)
        def run(ws):
            gs = [tf.zeros_like(w) for w in ws]
            return tf.while_loop(lambda i, *_: i < steps, body, (0, ws, gs))[1]

        return run

    programs = {
        "no_noise": loop(carried(False)),
        "noise_after_gradient": loop(carried(True)),
        "noise_before_gradient": loop(before),
    }
    wall, cpu = time_programs(programs, mb.init_state(seed=3, scale=1e-2), steps, repeats)
    out = {
        "wall_ms_per_step_median": {k: median(v) for k, v in wall.items()},
        "cpu_ms_per_step_median": {k: median(v) for k, v in cpu.items()},
        "steps_per_loop": steps,
        "repeats": repeats,
    }
    log(
        "[noise order] wall ms/step "
        + ", ".join(f"{k} {v:.3f}" for k, v in out["wall_ms_per_step_median"].items())
    )
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per config per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--configs",
        default="plain_tf:random_window,plain_tf:random_window:prefetch,"
        "keras:random_window,keras:random_window:prefetch",
        help="comma list of IMPL:SCHEME[:prefetch] (prefetch: SGLD(prefetch_noise=True))",
    )
    ap.add_argument("--peers", default=None, help="directory of the peers' benchmark scripts")
    ap.add_argument("--sgmcmcjax-python", default=None)
    ap.add_argument("--blackjax-python", default=None)
    ap.add_argument("--output", default=None, help="also write the JSON here")
    ap.add_argument(
        "--profile-only",
        action="store_true",
        help="only time the pieces of a step (noise, gradient) on one thread, then exit",
    )
    ap.add_argument(
        "--noise-order",
        action="store_true",
        help="only time three bare SGLD loops that differ in where the noise is drawn, then exit",
    )
    args = ap.parse_args(argv)
    if args.profile_only:  # before TensorFlow creates its thread pools
        tf.config.threading.set_intra_op_parallelism_threads(1)
    n, batch, steps = (6_000, 60, 20) if args.quick else (60_000, 600, 1_000)
    x, y = peers_mlp_data(n)
    init = mb.init_state(seed=3, scale=1e-2)
    report = {
        "workload": {
            "N": n,
            "batch": batch,
            "steps_per_call": steps,
            "sampler": "SGLD",
            "step_size": 1e-6,
            "n_params": 79_510,
            "store": "every state",
        },
        "environment": environment(),
        "loadavg_start": load_average(),
        "rounds": [],
    }
    if args.profile_only:
        report["profile"] = step_parts_profile(x, y, batch, 200 if not args.quick else 20, 5)
        dump_json(report, args.output)
        return report
    if args.noise_order:
        report["noise_order"] = noise_order_profile(x, y, batch, 20 if args.quick else 300, 7)
        dump_json(report, args.output)
        return report
    prob = mb.MnistBNN(x, y, x[:10], y[:10], source="peers_mlp_data")
    ours = []
    for cfg in args.configs.split(","):
        impl, scheme, *flags = cfg.split(":")
        if flags not in ([], ["prefetch"]):
            raise ValueError(f"unknown config {cfg!r}: IMPL:SCHEME or IMPL:SCHEME:prefetch")
        if impl == "plain_tf":
            est, state = prob.estimator(batch, scheme=scheme), init
        else:
            est = mb.keras_posterior(prob, scheme=scheme).estimator(batch)
            state = [tf.constant(np.asarray(p)) for p in init]
        ours.append(Ours(cfg, est, state, steps, prefetch_noise=flags == ["prefetch"]))
    peers = {}
    if args.peers:
        pythons = {"sgmcmcjax": args.sgmcmcjax_python, "blackjax": args.blackjax_python}
        peers = {k: (v, []) for k, v in pythons.items() if v}
    for r in range(args.rounds):
        rec = {"round": r, "loadavg_before": load_average()}
        # Alternate the order so no library always runs first or last in a round.
        order = [("peer", k) for k in peers] + [("ours", o) for o in ours]
        for kind, item in order if r % 2 == 0 else order[::-1]:
            if kind == "ours":
                item.time(args.repeats)
            else:
                python, runs = peers[item]
                runs.append(run_peer(item, python, args.peers, args.repeats, args.quick))
        rec["loadavg_after"] = load_average()
        report["rounds"].append(rec)
    report["runs"] = [o.record() for o in ours]
    for name, (_, runs) in peers.items():
        calls = [t for m in runs for t in m["run_s_all"]]
        med = median(calls)
        report["runs"].append(
            {
                "config": name,
                "steps_per_s": runs[0]["nsamples"] / med,
                "s_per_call_median": med,
                "s_all": calls,
                "first_call_s": [m["first_call_s"] for m in runs],
                "finite": all(m["finite"] for m in runs),
                # The peers' scripts record the CPU time OTHER processes used during
                # their timed calls; on a saturated machine their own share is about
                # (cores × wall − that).
                "foreign_cpu_s_during_repeats": [
                    m.get("foreign_cpu_s_during_repeats") for m in runs
                ],
                "repeats_wall_s": [m.get("repeats_wall_s") for m in runs],
                "version": runs[0]["version"],
            }
        )
    rates = {r["config"]: r["steps_per_s"] for r in report["runs"]}
    report["ratios"] = {
        f"{o.name}/{p}": rates[o.name] / rates[p] for o in ours for p in peers if p in rates
    }
    report["loadavg_end"] = load_average()
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    dump_json(report, args.output)
    return report


if __name__ == "__main__":
    main()
