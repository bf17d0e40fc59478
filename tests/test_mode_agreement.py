"""Eager, graph and XLA runs of one chain agree to rounding over 1,000 steps.

Why they can disagree by more: TensorFlow's stateless generators are not the same
function in every mode. With ``alg="auto_select"`` (the default of
``tf.random.stateless_uniform``, ``stateless_split``, ``stateless_fold_in`` and hence of
``tfp.random.split_seed``) XLA derives another key and counter from most seeds than
TensorFlow's own kernels do, and TensorFlow's float samplers (``stateless_uniform`` of a
float, ``stateless_normal``) map the random bits to floats differently under XLA even with
``alg="philox"``. A chain seeded through either draws other numbers when compiled: a
different chain, not a rounding error. Pinned to Philox, the integer draws (seed splits,
the step seed, minibatch indices) are bit-identical in every mode, and the kernels' normals
come from ``tfp_sgmcmc.internal.random`` (Threefry bits, the same in every mode, mapped by
``erf⁻¹``, whose implementations differ in the last bits). What is left is rounding: the
two modes group a step's sums differently, and a contracting chain does not amplify that.

``BOUND`` is a few times the largest gap seen on these models (states of sd 0.3-0.4); the
power check shows that a changed seed misses it by orders of magnitude.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.driver.loop import run_steps
from tfp_sgmcmc.models.logistic_regression import log_likelihood, log_prior

STEPS = 1_000
#: Largest |difference| of any state coordinate between two modes, over every step.
BOUND = 2e-4


def _estimator(scheme: str) -> sg.MinibatchEstimator:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2_000, 5)).astype(np.float32)
    y = (rng.uniform(size=2_000) < 1.0 / (1.0 + np.exp(-x @ np.ones(5)))).astype(np.float32)
    return sg.MinibatchEstimator(
        log_likelihood, sg.InMemoryData((x, y), scheme=scheme), 20, log_prior
    )


def _chains(kernel, seed):
    def run(seed):
        init = tf.zeros([5])
        out = run_steps(kernel, init, kernel.bootstrap_results(init), STEPS, seed)
        return out.draws

    seed = tf.constant(seed, tf.int32)
    return {
        "eager": run(seed).numpy(),
        "graph": tf.function(run, autograph=False)(seed).numpy(),
        "xla": tf.function(run, jit_compile=True, autograph=False)(seed).numpy(),
    }


@pytest.mark.parametrize(
    "name, scheme",
    [
        # Slow tier, to keep CI within its time; the seed primitives' agreement, the
        # cause, is checked in CI below.
        pytest.param("sgld", "epoch", marks=pytest.mark.slow),
        pytest.param("sghmc", "random_window", marks=pytest.mark.slow),
    ],
)
def test_eager_graph_and_xla_agree_to_rounding(name, scheme):
    est = _estimator(scheme)
    kernel = sg.SGLD(est, 1e-3) if name == "sgld" else sg.SGHMC(est, 1e-3, num_leapfrog_steps=2)
    seed = [-1_234_567_890, 2_013_265_920]  # XLA's auto_select key differs for this seed
    runs = _chains(kernel, seed)
    assert runs["eager"].shape == (STEPS, 5)
    for a, b in [("eager", "graph"), ("graph", "xla"), ("eager", "xla")]:
        gap = float(np.abs(runs[a] - runs[b]).max())
        assert gap < BOUND, f"{name} ({scheme}): {a} vs {b} differ by {gap:.3g}"
    # Power: the chain moves, and another seed is another chain, far beyond the bound.
    assert float(runs["xla"].std(0).mean()) > 0.1
    other = tf.function(
        lambda s: run_steps(kernel, tf.zeros([5]), kernel.bootstrap_results(tf.zeros([5])),
                            STEPS, s).draws,
        jit_compile=True, autograph=False,
    )(tf.constant([seed[0], seed[1] + 1], tf.int32)).numpy()
    assert float(np.abs(other - runs["xla"]).max()) > 1e3 * BOUND


def test_the_seed_primitives_are_the_same_in_every_mode_when_pinned_to_philox():
    """The cause of the mode gaps, pinned down: auto_select differs under XLA for most
    seeds; Philox integer draws and the library's Threefry normals do not."""
    seeds = tf.constant(np.random.default_rng(0).integers(-2**31, 2**31, (64, 2)), tf.int32)

    def draws(seeds, alg):
        def one(s):
            return (
                tf.reshape(tf.random.experimental.stateless_split(s, 3, alg=alg), [-1]),
                tf.random.stateless_uniform([20], s, minval=0, maxval=1000, dtype=tf.int32,
                                            alg=alg),
            )
        return tf.map_fn(one, seeds, fn_output_signature=(tf.int32, tf.int32))

    for alg, same in [("philox", True), ("auto_select", False)]:
        eager = draws(seeds, alg)
        xla = tf.function(lambda s, alg=alg: draws(s, alg), jit_compile=True)(seeds)
        equal = all(np.array_equal(a, b) for a, b in zip(eager, xla))
        assert equal is same, alg
    # TFP's split chain (tfp.mcmc.sample_chain's seeds) is auto_select: not mode-stable.
    seed = tfp.random.sanitize_seed(tf.constant([1, 2]), salt="mcmc.sample_chain")

    def split_chain(seed):
        out = []
        for _ in range(4):
            s, seed = tfp.random.split_seed(seed)
            out.append(s)
        return tf.stack(out)

    assert not np.array_equal(split_chain(seed), tf.function(split_chain, jit_compile=True)(seed))
