"""Steps per second of the SG-MCMC kernels on a large Bayesian logistic regression.

Workload: N = 1,000,000 examples, d = 10 features, prior N(0, 10 I),
minibatches of 1% (10,000) and 0.1% (1,000) of the rows, one chain, float32,
CPU. For every minibatch scheme of :class:`tfp_sgmcmc.InMemoryData`
(``with_replacement``, ``epoch``, ``random_window``) it times

* our kernels, each through :func:`tfp_sgmcmc.sample_chain` (``--loop sg``, the
  default: one flat loop) or ``tfp.mcmc.sample_chain`` (``--loop tfp``: a nested
  loop per result, which XLA does not remove) inside
  ``tf.function(jit_compile=True)`` with ``trace_fn=None`` (only the 10-float
  states are stacked): SGLD, SGLD-CV (:class:`ControlVariateEstimator`
  centred at the MAP from :func:`find_map`), pSGLD, SGHMC (L = 5, reported
  per sample and per gradient evaluation) and SGNHT; with ``--loop sg``, SGHMC
  is also timed through ``tfp.mcmc.sample_chain`` (``sghmc_L5_tfp_loop``);
* (a) ``hand_sgld``: the same SGLD written by hand as one fused
  ``tf.while_loop`` in one jit-compiled function, drawing its minibatches with
  the same scheme (its own code: uniform indices + gather, a Feistel
  permutation per epoch via :func:`tfp_sgmcmc.data.permutation.feistel_permutation`, or a
  uniform window of a once-shuffled copy) and its noise from philox;
* (b) ``gradient_floor``: the minibatch gradient alone, on a fixed batch, in
  the same kind of loop (θ ← θ + ε∇, so nothing can be hoisted out of it);
* (c) ``sample_chain_bare``: (a)'s arithmetic (same batch draw, gradient and
  noise, keys derived from the step seed by the same integer offsets) as the
  barest possible ``TransitionKernel`` -- no log-density, no divergence flag,
  no step counter -- run through the same loop as our kernels.
  It is what *any* kernel pays for that loop (a per-step seed split
  with TFP's default generator, its loop and trace plumbing): ``sgld / (c)``
  is the cost of our kernel itself, ``(c) / (a)`` that of the loop.

Each configuration is compiled by a warm-up call (its time minus a steady
call's is reported as ``compile_s``), then timed ``--repeats`` times in
round-robin order within its (scheme, batch) group, so that load drift on the
shared machine hits every configuration of a group alike. Speeds are medians;
ratios (ours / hand, ours / floor) are medians of the per-round ratios.
Everything is printed as one JSON document on stdout (progress on stderr).

Usage::

    python benchmarks/bench_samplers.py            # full run (~10 min on 2 idle cores)
    python benchmarks/bench_samplers.py --quick    # smoke test: N = 20,000, 1% batch, epoch
    python benchmarks/bench_samplers.py --quick --schemes with_replacement epoch random_window
    python benchmarks/bench_samplers.py --output benchmarks/results/samplers.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import dump_json, environment, load_average, log, make_data, median, timed_call  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.data.permutation import feistel_permutation  # noqa: E402

PRIOR_VARIANCE = 10.0
SCHEMES = ("with_replacement", "epoch", "random_window")
RNG = "philox"  # the generator our kernels use under XLA (see tfp_sgmcmc/internal/util.py)

#: Peers' figures measured with their own scripts (samples/s at 1% / 0.1% batch, same workload, this
#: machine kind), quoted: not re-measured by this script. ``bench_vs_peers.py`` runs the peers'
#: scripts round-robin with our samplers in the same run.
PEERS_QUOTED = {
    "sgmcmcjax_sgld": [2436, 17523],
    "sgmcmcjax_sgld_cv": [1907, 13534],
    "sgmcmcjax_sghmc_L5": [326, 2635],
    "sgmcmcjax_sgnht": [1681, 13316],
    "blackjax_sghmc_L5": [1043, 7802],
    "blackjax_sgnht": [1785, 13684],
    "plain_tf_loop_random_rows": [2900, 17000],
    "gradient_alone": [17200, 163000],
}


# --------------------------------------------------------------------------- #
# The model.
# --------------------------------------------------------------------------- #


def log_likelihood(theta: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
    """Per-example Bernoulli log-likelihood, shape ``[n]`` (one chain)."""
    x, y = batch
    logits = tf.linalg.matvec(x, theta)
    return -tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits)


def log_likelihood_chains(theta: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
    """The same with leading chain dimensions (replica exchange's replicas)."""
    x, y = batch
    logits = tf.einsum("nd,...d->...n", x, theta)
    return -tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits
    )


def log_prior(theta: tf.Tensor) -> tf.Tensor:
    return -0.5 * tf.reduce_sum(tf.square(theta), axis=-1) / PRIOR_VARIANCE


# --------------------------------------------------------------------------- #
# (a) SGLD by hand and (b) the gradient floor.
# --------------------------------------------------------------------------- #


def make_batch_fn(
    scheme: str, x: tf.Tensor, y: tf.Tensor, n: int, shuffle_seed: int = 1
) -> Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """``(step i, key) -> (x_batch, y_batch)`` drawn by hand with ``scheme``.

    ``key`` must vary from step to step inside the loop (see ``make_hand_sgld``).
    """
    big_n = int(x.shape[0])
    if scheme == "with_replacement":

        def batch(i: tf.Tensor, key: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            idx = tf.random.stateless_uniform(
                [n], seed=key, minval=0, maxval=big_n, dtype=tf.int32, alg=RNG
            )
            return tf.gather(x, idx), tf.gather(y, idx)

    elif scheme == "epoch":
        per_epoch = big_n // n

        def batch(i: tf.Tensor, key: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            # Epoch e is keyed by the key of its first step (as the library does).
            pos = i % per_epoch
            epoch_key = key - tf.stack([0, pos])
            rows = tf.cast(pos, tf.int64) * n + tf.range(n, dtype=tf.int64)
            idx = feistel_permutation(rows, big_n, epoch_key)
            return tf.gather(x, idx), tf.gather(y, idx)

    elif scheme == "random_window":
        perm = tf.random.experimental.stateless_shuffle(tf.range(big_n), seed=[shuffle_seed, 7])
        ext = tf.concat([perm, perm[:n]], axis=0)
        xw, yw = tf.gather(x, ext), tf.gather(y, ext)

        def batch(i: tf.Tensor, key: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            start = tf.random.stateless_uniform(
                [], seed=key, minval=0, maxval=big_n, dtype=tf.int32, alg=RNG
            )
            return tf.slice(xw, [start, 0], [n, xw.shape[1]]), tf.slice(yw, [start], [n])

    else:
        raise ValueError(f"`scheme` must be one of {SCHEMES}, got {scheme!r}.")
    return batch


def minibatch_grad(theta: tf.Tensor, xb: tf.Tensor, yb: tf.Tensor, scale: float) -> tf.Tensor:
    with tf.GradientTape() as tape:
        tape.watch(theta)
        lp = scale * tf.reduce_sum(log_likelihood(theta, (xb, yb))) + log_prior(theta)
    return tape.gradient(lp, theta)


def make_hand_sgld(
    scheme: str, x: tf.Tensor, y: tf.Tensor, n: int, step_size: float, num_steps: int
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """(a): θ ← θ + ε ∇log π̃(θ) + √(2ε) ξ, one fused XLA loop, states stacked."""
    batch = make_batch_fn(scheme, x, y, n)
    scale = float(x.shape[0]) / n
    eps = tf.constant(step_size, tf.float32)
    noise_scale = tf.sqrt(2.0 * eps)

    @tf.function(jit_compile=True)
    def run(theta0: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        # Per-step keys are carried and advanced in the loop: [s0, s1 + i] for
        # the batch, [s1, s0 + i] for the noise. A key that is a loop invariant
        # would let XLA's compile-time-constant analysis treat the seed argument
        # as a constant (tf.slice's begin must be one): a recompile per seed.
        def body(i, theta, kb, kn, trace):
            xb, yb = batch(i, kb)
            g = minibatch_grad(theta, xb, yb, scale)
            xi = tf.random.stateless_normal(tf.shape(theta), seed=kn, dtype=theta.dtype, alg=RNG)
            theta = theta + eps * g + noise_scale * xi
            inc = tf.constant([0, 1])
            return i + 1, theta, kb + inc, kn + inc, trace.write(i, theta)

        trace = tf.TensorArray(theta0.dtype, size=num_steps, element_shape=theta0.shape)
        init = (tf.constant(0), theta0, seed, tf.reverse(seed, [0]), trace)
        *_, trace = tf.while_loop(lambda i, *_: i < num_steps, body, init)
        return trace.stack()

    return run


def make_gradient_floor(
    x: tf.Tensor, y: tf.Tensor, n: int, step_size: float, num_steps: int
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """(b): the minibatch gradient on a fixed batch, θ ← θ + ε∇ (no RNG, no gather)."""
    xb, yb = x[:n], y[:n]
    scale = float(x.shape[0]) / n
    eps = tf.constant(step_size, tf.float32)

    @tf.function(jit_compile=True)
    def run(theta0: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        del seed
        _, theta = tf.while_loop(
            lambda i, _: i < num_steps,
            lambda i, t: (i + 1, t + eps * minibatch_grad(t, xb, yb, scale)),
            (tf.constant(0), theta0),
        )
        return theta

    return run


def make_draw_floor(
    data: sg.InMemoryData, n: int, draws_per_sample: int, num_samples: int
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """The minibatch draws of one sample alone, ``draws_per_sample`` of them: no gradient.

    Each draw is the estimator's own (``data.sample_batch`` with the scheme's
    state), and every gathered element is read once by a sum, so the rows are
    gathered as a gradient reads them; nothing else is computed. With
    ``draws_per_sample = 5`` it is the data access of one default SGHMC (L = 5)
    sample: a floor no SGHMC drawing a batch per leapfrog step can beat.
    """
    data.prepare(n)

    @tf.function(jit_compile=True)
    def run(init: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        def sample(i: tf.Tensor, acc: tf.Tensor, state: Any) -> tuple[Any, ...]:
            for j in range(draws_per_sample):
                draw_seed = tf.random.experimental.stateless_fold_in(seed, i * draws_per_sample + j)
                (xb, yb), state = data.sample_batch(n, state, draw_seed)
                acc = acc + tf.reduce_sum(xb, axis=0) + tf.reduce_sum(yb)
            return i + 1, acc, state

        _, acc, _ = tf.while_loop(
            lambda i, *_: i < num_samples,
            sample,
            (tf.constant(0), tf.zeros_like(init), data.init_batch_state()),
        )
        return acc

    return run


def make_numpy_take_floor(
    data: sg.InMemoryData, n: int, draws_per_sample: int, num_samples: int
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """``draws_per_sample`` NumPy ``take`` calls of ``n`` random rows of the packed copy per sample.

    One core, uniform random rows, no XLA: what a random-row gather of this data
    costs on this machine outside our programs. The precomputed index sets are
    cycled, and there are enough of them to cover the table four times over
    (at least 256): with fewer, their rows would stay in the last-level cache
    and flatter the gather (256 sets of 1,000 rows are 12 MB of rows).
    """
    data.prepare(n)
    packed = data._packed_cache["rows"].packed.numpy()  # the rows the estimator gathers
    num_sets = max(256, -(-4 * packed.shape[0] // n))
    idx = np.random.default_rng(0).integers(0, packed.shape[0], (num_sets, n), dtype=np.int32)
    out = np.empty((n, packed.shape[1]), packed.dtype)

    def run(init: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        del seed
        for k in range(num_samples * draws_per_sample):
            np.take(packed, idx[k % num_sets], axis=0, out=out)
        return tf.zeros_like(init) + float(out[0, 0] & 1)

    return run


class _BareSGLD(tfp.mcmc.TransitionKernel):
    """(c): (a)'s step as a bare ``TransitionKernel`` (results = the score only)."""

    def __init__(self, batch: Callable, scale: float, step_size: float) -> None:
        self._batch, self._scale = batch, scale
        self._eps = tf.constant(step_size, tf.float32)
        self._parameters = {"step_size": step_size}

    @property
    def parameters(self) -> dict[str, Any]:
        return self._parameters

    @property
    def is_calibrated(self) -> bool:
        return False

    def bootstrap_results(self, init_state: tf.Tensor) -> tf.Tensor:
        xb, yb = self._batch(tf.constant(0), tf.constant([0, 0]))
        return minibatch_grad(init_state, xb, yb, self._scale)

    def one_step(self, theta: tf.Tensor, grad: tf.Tensor, seed: Any = None):
        seed = tf.cast(seed, tf.int32)
        xi = tf.random.stateless_normal(
            tf.shape(theta), seed=tf.reverse(seed, [0]), dtype=theta.dtype, alg=RNG
        )
        theta = theta + self._eps * grad + tf.sqrt(2.0 * self._eps) * xi
        xb, yb = self._batch(tf.constant(0), seed)
        return theta, minibatch_grad(theta, xb, yb, self._scale)


def make_bare_chain(
    scheme: str,
    x: tf.Tensor,
    y: tf.Tensor,
    n: int,
    step_size: float,
    num_steps: int,
    loop: str = "sg",
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """(c): :class:`_BareSGLD` through ``sample_chain`` (random_window / with_replacement)."""
    kernel = _BareSGLD(make_batch_fn(scheme, x, y, n), float(x.shape[0]) / n, step_size)
    return make_chain(kernel, num_steps, loop)


# --------------------------------------------------------------------------- #
# Our kernels through sample_chain.
# --------------------------------------------------------------------------- #


#: The loops a kernel can be timed through (``--loop``).
LOOPS = {
    "sg": "tfp_sgmcmc.sample_chain(trace_fn=None) in tf.function(jit_compile=True)",
    "tfp": "tfp.mcmc.sample_chain(trace_fn=None) in tf.function(jit_compile=True)",
}


def make_chain(kernel: tfp.mcmc.TransitionKernel, num_results: int, loop: str = "sg"):
    """``num_results`` steps of ``kernel`` through ``loop`` (see ``LOOPS``), states stacked."""
    chain = sg.sample_chain if loop == "sg" else tfp.mcmc.sample_chain

    @tf.function(jit_compile=True)
    def run(init: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        return chain(num_results, init, kernel=kernel, trace_fn=None, seed=seed)

    return run


def build_group(
    scheme: str,
    data: sg.InMemoryData,
    x: tf.Tensor,
    y: tf.Tensor,
    n: int,
    steps: int,
    floor_steps: int,
    centre: tf.Tensor,
    centre_full: sg.GradientEstimate,
    only: set[str] | None,
    loop: str = "sg",
) -> dict[str, dict[str, Any]]:
    """Every configuration of one (scheme, batch size) group: fn, steps, grads per step."""
    est = sg.MinibatchEstimator(log_likelihood, data.with_scheme(scheme), n, log_prior)
    cv = sg.ControlVariateEstimator(
        est,
        centre,
        centering_gradient=centre_full.grads_target_log_prob,
        centering_log_prob=centre_full.target_log_prob,
    )
    sgld_eps = 1e-6
    hmc_steps = max(1, steps // 5)
    kernels: dict[str, tuple[tfp.mcmc.TransitionKernel, int]] = {
        "sgld": (sg.SGLD(est, sgld_eps), steps),
        # The next step's noise drawn ahead (pays off on large models; here d = 10).
        "sgld_prefetch": (sg.SGLD(est, sgld_eps, prefetch_noise=True), steps),
        "sgld_cv": (sg.SGLD(cv, sgld_eps), steps),
        "psgld": (sg.PSGLD(est, 1e-4), steps),
        "sghmc_L5": (sg.SGHMC(est, 1e-7, num_leapfrog_steps=5), hmc_steps),
        "sgnht": (sg.SGNHT(est, 1e-7), steps),
        # BlackJAX's scheme: one minibatch per trajectory of L = 5 leapfrog steps.
        "sghmc_L5_traj": (
            sg.SGHMC(est, 1e-7, num_leapfrog_steps=5, minibatch_per_trajectory=True),
            hmc_steps,
        ),
        "sgld_svrg": (sg.SGLD(sg.SVRGEstimator(est, update_rate=1000), sgld_eps), steps),
        # Physical time step h with h²/2 = ε of SGLD.
        "baoab": (sg.BAOAB(est, 1.4e-3, friction=1.0), steps),
        "badodab": (sg.BADODAB(est, 1.4e-3, diffusion=1.0), steps),
        # BlackJAX's benchmark settings: 512 partitions of Δu = 10 from −log π(MAP) − 1000.
        "csgld": (
            sg.CSGLD(
                est,
                sgld_eps,
                num_partitions=512,
                energy_gap=10.0,
                min_energy=float(-centre_full.target_log_prob) - 1000.0,
                zeta=1.0,
                sa_step_size=1e-3,
            ),
            steps,
        ),
        # Two replicas: samples/s counts samples of the cold chain (2 gradients each).
        "resgld_K2": (
            sg.RESGLD(
                sg.MinibatchEstimator(log_likelihood_chains, est.data, n, log_prior),
                sgld_eps,
                num_replicas=2,
            ),
            steps,
        ),
    }
    out: dict[str, dict[str, Any]] = {}
    for name, (k, k_steps) in kernels.items():
        if only and name not in only:
            continue
        grads = k.gradient_evaluations_per_step * k.estimator.gradient_evaluations_per_call
        grads *= getattr(k, "num_replicas", 1)
        out[name] = {"fn": make_chain(k, k_steps, loop), "steps": k_steps, "grads_per_step": grads}
    if "sghmc_L5" in out and loop == "sg":  # the same kernel through TFP's nested loop
        k, k_steps = kernels["sghmc_L5"]
        out["sghmc_L5_tfp_loop"] = {
            "fn": make_chain(k, k_steps, "tfp"),
            "steps": k_steps,
            "grads_per_step": 5,
        }
    out["hand_sgld"] = {
        "fn": make_hand_sgld(scheme, x, y, n, sgld_eps, steps),
        "steps": steps,
        "grads_per_step": 1,
    }
    if scheme != "epoch":  # the hand epoch scheme needs the step index, which
        # sample_chain does not give a kernel; (c) is defined for the other two.
        out["sample_chain_bare"] = {
            "fn": make_bare_chain(scheme, x, y, n, sgld_eps, steps, loop),
            "steps": steps,
            "grads_per_step": 1,
        }
    if "sghmc_L5" in out:  # the data access of its samples alone (a floor for it)
        out["sghmc_L5_draws_only"] = {
            "fn": make_draw_floor(est.data, n, 5, hmc_steps),
            "steps": hmc_steps,
            "grads_per_step": 0,
        }
        if scheme != "random_window":  # the same draws by NumPy on one core
            out["sghmc_L5_draws_numpy_take"] = {
                "fn": make_numpy_take_floor(est.data, n, 5, hmc_steps),
                "steps": hmc_steps,
                "grads_per_step": 0,
            }
    out["gradient_floor"] = {
        "fn": make_gradient_floor(x, y, n, 1e-9, floor_steps),
        "steps": floor_steps,
        "grads_per_step": 1,
    }
    return out


def run_group(
    configs: dict[str, dict[str, Any]], init: tf.Tensor, repeats: int, label: str
) -> dict[str, dict[str, Any]]:
    """Warm up (compile) every config, then time them round-robin ``repeats`` times."""
    seed = tf.constant([11, 23], tf.int32)
    for name, c in configs.items():
        t, out = timed_call(c["fn"], init, seed)
        c["first_call_s"] = t
        c["finite"] = bool(np.all(np.isfinite(out)))
        c["times"] = []
        log(f"  [{label}] {name}: first call {t:.2f} s")
    for r in range(repeats):
        for c in configs.values():
            s = tf.constant([101 + r, 7 * r + 3], tf.int32)
            t, out = timed_call(c["fn"], init, s)
            c["times"].append(t)
            c["finite"] = c["finite"] and bool(np.all(np.isfinite(out)))
        log(f"  [{label}] round {r + 1}/{repeats} done, load {load_average()}")

    results: dict[str, dict[str, Any]] = {}
    rate = {name: [c["steps"] / t for t in c["times"]] for name, c in configs.items()}
    for name, c in configs.items():
        med_t = median(c["times"])
        sps = median(rate[name])
        entry: dict[str, Any] = {
            "steps_per_s": round(sps, 1),
            "steps_per_s_repeats": [round(v, 1) for v in rate[name]],
            "steps_per_call": c["steps"],
            "gradient_evals_per_step": c["grads_per_step"],
            "gradient_evals_per_s": round(sps * c["grads_per_step"], 1),
            "compile_s": round(max(c["first_call_s"] - med_t, 0.0), 2),
            "first_call_s": round(c["first_call_s"], 2),
            "finite": c["finite"],
        }
        for ref in ("hand_sgld", "sample_chain_bare", "gradient_floor"):
            if ref in rate and name != ref:
                paired = [a / b for a, b in zip(rate[name], rate[ref])]
                entry[f"ratio_to_{ref}"] = round(median(paired), 3)
        results[name] = entry
    return results


OURS = (
    "sgld",
    "sgld_prefetch",
    "sgld_cv",
    "psgld",
    "sghmc_L5",
    "sgnht",
    "sghmc_L5_traj",
    "sgld_svrg",
    "baoab",
    "badodab",
    "csgld",
    "resgld_K2",
    "sghmc_L5_tfp_loop",
)
PEER_ROWS = {
    "sgld": ["sgmcmcjax_sgld"],
    "sgld_cv": ["sgmcmcjax_sgld_cv"],
    "sghmc_L5": ["sgmcmcjax_sghmc_L5", "blackjax_sghmc_L5"],
    "sgnht": ["sgmcmcjax_sgnht", "blackjax_sgnht"],
}


def render_markdown(report: dict[str, Any]) -> str:
    """Markdown tables (steps/s, ratios, quoted peers) from a report of :func:`main`."""
    groups = report["groups"]
    sizes = sorted({g["batch_size"] for g in groups}, reverse=True)
    schemes = [s for s in SCHEMES if any(g["scheme"] == s for g in groups)]
    by = {(g["scheme"], g["batch_size"]): g["results"] for g in groups}
    cols = [(s, n) for n in sizes for s in schemes]
    head = "| samples/s | " + " | ".join(f"{s} n={n:,}" for s, n in cols) + " |"
    lines = [head, "|---" * (len(cols) + 1) + "|"]
    names = [
        c
        for c in (*OURS, "hand_sgld", "sample_chain_bare", "gradient_floor")
        if any(c in by[k] for k in cols)
    ]
    for name in names:
        cells = []
        for key in cols:
            e = by[key].get(name)
            if e is None:
                cells.append("")
                continue
            cell = f"{e['steps_per_s']:,.0f}"
            if name != "hand_sgld" and "ratio_to_hand_sgld" in e:
                cell += f" ({e['ratio_to_hand_sgld']:.2f}× a)"
            cells.append(cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if all("sghmc_L5" in by[k] for k in cols):
        lines.append(
            "| sghmc_L5 gradient evals/s | "
            + " | ".join(f"{by[k]['sghmc_L5']['gradient_evals_per_s']:,.0f}" for k in cols)
            + " |"
        )
    lines.append(
        "| sgld / gradient floor (b) | "
        + " | ".join(
            f"{by[k]['sgld']['ratio_to_gradient_floor']:.3f}" for k in cols if "sgld" in by[k]
        )
        + " |"
    )
    if any("ratio_to_sample_chain_bare" in by[k].get("sgld", {}) for k in cols):
        lines.append(
            "| sgld / sample_chain_bare (c) | "
            + " | ".join(
                f"{by[k]['sgld']['ratio_to_sample_chain_bare']:.3f}"
                if "ratio_to_sample_chain_bare" in by[k].get("sgld", {})
                else "–"
                for k in cols
            )
            + " |"
        )
    out = ["\n".join(lines), ""]
    # Best of our schemes per batch size next to the quoted peers.
    peer = report.get("peers_quoted_samples_per_s_1pct_0.1pct", PEERS_QUOTED)
    fracs = [round(n / report["workload"]["num_examples"], 6) for n in sizes]
    pidx = {0.01: 0, 0.001: 1}
    plines = [
        "| sampler | "
        + " | ".join(f"ours n={n:,} (best scheme)" for n in sizes)
        + " | "
        + " | ".join(f"quoted peer n={n:,}" for n in sizes)
        + " |",
        "|---" * (1 + 2 * len(sizes)) + "|",
    ]
    for name in OURS:
        if name not in by[cols[0]]:
            continue
        best = []
        for n in sizes:
            cand = [(by[(s, n)][name]["steps_per_s"], s) for s in schemes]
            v, s = max(cand)
            best.append(f"{v:,.0f} ({s})")
        quoted = []
        for f in fracs:
            i = pidx.get(f)
            qs = [f"{k}: {peer[k][i]:,}" for k in PEER_ROWS.get(name, [])] if i is not None else []
            quoted.append("; ".join(qs) if qs else "–")
        plines.append(f"| {name} | " + " | ".join(best) + " | " + " | ".join(quoted) + " |")
    out.append("\n".join(plines))
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke test: N = 20,000, few steps")
    p.add_argument("--num-examples", type=int, default=None, help="N (default 1,000,000)")
    p.add_argument("--dim", type=int, default=10)
    p.add_argument(
        "--batch-fractions",
        type=float,
        nargs="+",
        default=None,
        help="minibatch sizes as fractions of N (default 0.01 0.001; --quick: 0.01)",
    )
    p.add_argument(
        "--schemes",
        nargs="+",
        default=None,
        choices=SCHEMES,
        help="minibatch schemes (default: all three; --quick: epoch only, to keep it short)",
    )
    p.add_argument(
        "--configs",
        nargs="+",
        default=None,
        help="subset of sgld sgld_prefetch sgld_cv psgld sghmc_L5 sghmc_L5_traj sgnht sgld_svrg "
        "baoab badodab csgld resgld_K2 (hand_sgld, gradient_floor always run)",
    )
    p.add_argument(
        "--loop",
        choices=sorted(LOOPS),
        default="sg",
        help="the loop our kernels run in: 'sg' tfp_sgmcmc.sample_chain (one flat loop, default), "
        "'tfp' tfp.mcmc.sample_chain (a nested loop per result); with 'sg', sghmc_L5 is also "
        "timed through 'tfp' as sghmc_L5_tfp_loop",
    )
    p.add_argument("--repeats", type=int, default=None, help="timed calls per config (>= 3)")
    p.add_argument(
        "--seconds",
        type=float,
        default=1.0,
        help="target seconds per timed call (sets the steps from the quoted speeds)",
    )
    p.add_argument("--output", default=None, help="also write the JSON here")
    p.add_argument(
        "--peer-command",
        default=None,
        help="a peer benchmark to run in the same process tree after ours (a shell command "
        "printing one '@@JSON@@{...}' line with logreg runs, e.g. a BlackJAX timing script "
        "run by its own venv's python); its samples/s and our/peer ratios go into the JSON",
    )
    p.add_argument(
        "--render",
        default=None,
        metavar="JSON",
        help="print the markdown tables of a saved report (no benchmark is run)",
    )
    args = p.parse_args(argv)
    if args.render:
        with open(args.render, encoding="utf-8") as f:
            report = json.load(f)
        print(render_markdown(report))
        return report

    big_n = args.num_examples or (20_000 if args.quick else 1_000_000)
    if args.batch_fractions is None:
        args.batch_fractions = [0.01] if args.quick else [0.01, 0.001]
    if args.schemes is None:
        # XLA compilation dominates a quick run (~2-5 s per configuration).
        args.schemes = ["epoch"] if args.quick else list(SCHEMES)
    repeats = args.repeats or 3 if args.quick else max(3, args.repeats or 5)
    env = environment()
    load_start = load_average()
    log(f"load average at start: {load_start}; nproc {env['machine']['nproc']}")

    t0 = time.perf_counter()
    x_np, y_np = make_data(big_n, args.dim)
    x, y = tf.constant(x_np), tf.constant(y_np)
    # The row-packed copy (opt-in: it doubles the data's memory) is the fast configuration.
    data = sg.InMemoryData((x, y), scheme="with_replacement", pack_rows=True)

    # The control-variate centre: the MAP by L-BFGS on the full data, and the
    # full-data score there, computed once and shared by every group.
    full_est = sg.MinibatchEstimator(log_likelihood, data, big_n, log_prior)
    t_map = time.perf_counter()
    mp = sg.find_map(full_est, tf.zeros([args.dim], tf.float32))
    centre = tf.convert_to_tensor(mp.position)
    centre_full = full_est.full_log_prob_and_gradient(centre)
    map_s = time.perf_counter() - t_map
    log(f"MAP: converged={mp.converged} in {mp.num_iterations} its, {map_s:.1f} s")

    groups = []
    only = set(args.configs) if args.configs else None
    for frac in args.batch_fractions:
        n = max(1, int(round(frac * big_n)))
        # Steps per timed call: about --seconds at the speeds quoted for this
        # machine kind (SGLD ~2,900/17,000 steps/s at 1%/0.1%; gradient ~10x).
        sgld_rate = 2_900 * (10_000 / n) ** 0.77 if not args.quick else 2_000
        steps = max(50, int(args.seconds * sgld_rate)) if not args.quick else 100
        floor_steps = steps * 8
        for scheme in args.schemes:
            label = f"{scheme}, n={n}"
            log(f"group {label}: {steps} steps per call, floor {floor_steps}")
            configs = build_group(
                scheme, data, x, y, n, steps, floor_steps, centre, centre_full, only, args.loop
            )
            res = run_group(configs, centre, repeats, label)
            groups.append(
                {
                    "scheme": scheme,
                    "batch_size": n,
                    "batch_fraction": n / big_n,
                    "load_average_end_of_group": load_average(),
                    "results": res,
                }
            )

    summary = []
    for g in groups:
        r = g["results"]
        row = {"scheme": g["scheme"], "batch_size": g["batch_size"]}
        for name, e in r.items():
            row[name] = e["steps_per_s"]
        if "sgld" in r:
            row["sgld_over_hand"] = r["sgld"]["ratio_to_hand_sgld"]
            row["sgld_over_floor"] = r["sgld"]["ratio_to_gradient_floor"]
            row["sgld_meets_0.9x_hand"] = r["sgld"]["ratio_to_hand_sgld"] >= 0.9
        if "sghmc_L5" in r:
            row["sghmc_L5_gradient_evals_per_s"] = r["sghmc_L5"]["gradient_evals_per_s"]
        summary.append(row)

    report = {
        "benchmark": "bench_samplers: Bayesian logistic regression, steps/s",
        "workload": {
            "num_examples": big_n,
            "dim": args.dim,
            "prior": f"N(0, {PRIOR_VARIANCE:g} I)",
            "dtype": "float32",
            "chains": 1,
            "batch_fractions": args.batch_fractions,
            "schemes": args.schemes,
            "quick": args.quick,
            "repeats": repeats,
            "driver": LOOPS[args.loop],
            "rng": RNG,
        },
        **env,
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "map": {"converged": mp.converged, "iterations": mp.num_iterations, "seconds": map_s},
        "summary": summary,
        "groups": groups,
        "peers_quoted_samples_per_s_1pct_0.1pct": PEERS_QUOTED,
        "peers_note": (
            "measured with each peer's own script (same workload, this machine kind);"
            " not re-measured"
        ),
        "total_seconds": round(time.perf_counter() - t0, 1),
    }
    if args.peer_command:
        report["peer_run"] = run_peer(args.peer_command, groups)
    dump_json(report, args.output)
    return report


#: Our configuration name -> the peer benchmark's sampler name.
PEER_NAMES = {
    "csgld": "csgld",
    "sghmc_L5": "sghmc_L5",
    "sghmc_L5_traj": "sghmc_L5",
    "sghmc_L5_tfp_loop": "sghmc_L5",
    "sghmc_L5_draws_only": "sghmc_L5",
    "sgld": "sgld",
    "sgnht": "sgnht",
}


def run_peer(command: str, groups: list[dict[str, Any]]) -> dict[str, Any]:
    """Run a peer benchmark (same machine, right after ours) and pair its samples/s with ours."""
    import shlex
    import subprocess

    log(f"peer benchmark: {command}")
    t0 = time.perf_counter()
    proc = subprocess.run(shlex.split(command), capture_output=True, text=True, check=False)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@JSON@@")), None)
    if proc.returncode != 0 or line is None:
        return {"command": command, "error": proc.stderr[-2000:], "returncode": proc.returncode}
    peer = json.loads(line[len("@@JSON@@") :])
    runs = peer.get("logreg", {}).get("runs", [])
    pairs = []
    for g in groups:
        for ours, theirs in PEER_NAMES.items():
            if ours not in g["results"]:
                continue
            for r in runs:
                if r["sampler"] == theirs and int(r["batch"]) == int(g["batch_size"]):
                    mine = g["results"][ours]["steps_per_s"]
                    pair = {
                        "scheme": g["scheme"],
                        "batch_size": g["batch_size"],
                        "ours": ours,
                        "peer": theirs,
                        "ours_samples_per_s": mine,
                        "peer_samples_per_s": round(r["samples_per_s"], 1),
                        "ratio_ours_over_peer": round(mine / r["samples_per_s"], 3),
                    }
                    if r.get("run_s_min") and r.get("run_s_median"):
                        # Best call against best call (timeit's convention): our programs
                        # run on two threads and some calls fall into a slow state of the
                        # machine (docs/benchmarks.md), which a median of 7 may not outvote.
                        best = max(g["results"][ours]["steps_per_s_repeats"])
                        peer_best = r["samples_per_s"] * r["run_s_median"] / r["run_s_min"]
                        pair["ours_best_samples_per_s"] = best
                        pair["peer_best_samples_per_s"] = round(peer_best, 1)
                        pair["ratio_best_ours_over_best_peer"] = round(best / peer_best, 3)
                    pairs.append(pair)
    return {
        "command": command,
        "library": peer.get("library"),
        "version": peer.get("version"),
        "seconds": round(time.perf_counter() - t0, 1),
        "pairs": pairs,
        "runs": runs,
    }


if __name__ == "__main__":
    main()
