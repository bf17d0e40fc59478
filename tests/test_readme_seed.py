"""The README's "Sixty seconds of API" snippet reproduces its chain, bit for bit.

The snippet used to pass ``seed=42`` (a Python int) to ``sample_chain`` inside
``tf.function(jit_compile=True)``: TFP reads an int as a stateful seed, so each
call gave a different chain. Stateless seeds (a tensor pair, or an int given to
our kernels directly) must reproduce.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _snippet() -> str:
    text = README.read_text()
    section = text.split("## Sixty seconds of API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_snippet_gives_the_same_chain_twice():
    code = _snippet()
    *setup, call = [blk for blk in code.split("\n\n") if blk.strip()]
    assert call.lstrip().startswith(("samples", "#")) and "run(" in call, call
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2000, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0, 0.5], np.float32) > 0).astype(np.float32)
    ns = {"x": x, "y": y, "theta0": tf.zeros([3])}
    exec(code, ns)  # the snippet as a user runs it (defines run, calls it once)
    first = [np.asarray(ns[k]) for k in ("samples", "scores")]
    exec(call, ns)  # the same call again, on the same compiled function
    second = [np.asarray(ns[k]) for k in ("samples", "scores")]
    assert np.isfinite(first[0]).all() and first[0].shape == (10_000, 3)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    # The KSD line ran on the traced scores.
    assert np.isfinite(float(ns["ksd"]))


def test_int_seed_given_to_one_step_is_deterministic_under_xla():
    """Where an int reaches our kernel it is a fixed stateless pair, not a stateful draw."""
    x = np.random.default_rng(1).standard_normal((500, 2)).astype(np.float32)
    est = sg.MinibatchEstimator(
        lambda t, b: -0.5 * tf.reduce_sum((tf.expand_dims(t, -2) - b) ** 2, -1), x, 50
    )
    kernel = sg.SGLD(est, step_size=1e-3)
    state = tf.zeros([2])
    results = kernel.bootstrap_results(state, seed=7)

    @tf.function(jit_compile=True)
    def step():
        return kernel.one_step(state, results, seed=42)[0]

    np.testing.assert_array_equal(step().numpy(), step().numpy())
    ref = kernel.one_step(state, results, seed=tf.constant([0, 42]))[0]
    np.testing.assert_allclose(step().numpy(), ref.numpy(), rtol=1e-5)
