"""The in-memory chunked runner (`ChunkedChain`) and the chunk steps it shares with `sample`.

`ChunkedChain` and `sample` are two loops over the same steps (chunk plan, chunk seeds,
`compile_chunk`, `run_chunk`), so with equal arguments they must produce the same draws
bit for bit; graph mode (``jit_compile=False``) keeps the tests fast.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.driver import ChunkedChain, sample
from tfp_sgmcmc.driver.chunks import compile_chunk, run_chunk


def _kernel(noise: float = 0.5):
    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), noise)
    return sg.SGLD(est, 0.05)


def _list_kernel():
    def log_prob(parts):
        a, b = parts
        return -0.5 * tf.reduce_sum(a**2, -1) - 0.5 * tf.reduce_sum(b**2, [-2, -1])

    return sg.SGLD(sg.NoisyGradientEstimator(log_prob, 0.3), 0.05)


def test_same_draws_as_the_run_directory_driver(tmp_path):
    # Graph mode; the XLA path is the class docstring's example.
    jit_compile = False
    kernel = _kernel()
    args = dict(seed=7, thin=3, num_burnin_steps=25, chunk_size=8)
    init = tf.fill([3, 4], 2.0)
    chain = ChunkedChain(
        kernel,
        chunk_size=8,
        thin=3,
        trace_fn=lambda s, r: {"lp": r.target_log_prob},
        jit_compile=jit_compile,
    )
    out = chain.run(init, 21, seed=7, num_burnin_steps=25)
    run = sample(
        kernel, init, 21, str(tmp_path / "r"), progress=False, jit_compile=jit_compile, **args
    )
    assert out.states.shape == (21, 3, 4)
    np.testing.assert_array_equal(out.states, run.samples())
    np.testing.assert_array_equal(out.trace["lp"], run.trace()["target_log_prob"])
    np.testing.assert_array_equal(out.final_state.numpy(), run.final_state())


def test_list_state_programs_are_reused_and_seeds_matter():
    chain = ChunkedChain(_list_kernel(), chunk_size=5, thin=2, jit_compile=False)
    init = [tf.zeros([2, 3]), tf.ones([2, 2, 2])]
    # One chunk that compiles its program: no rate sample.
    assert math.isnan(chain.run(init, 5, seed=1).steps_per_second)
    first = chain.run(init, 12, seed=1)
    programs = dict(chain._programs)
    again = chain.run(init, 12, seed=1)
    other = chain.run(init, 12, seed=2)
    # Two sampling chunk shapes (5 and the last 2), compiled once and then reused.
    assert sorted(programs) == [("sample", 2), ("sample", 5)]
    assert chain._programs == programs
    assert [s.shape for s in first.states] == [(12, 2, 3), (12, 2, 2, 2)]
    assert first.trace == ()
    for a, b, c in zip(first.states, again.states, other.states):
        np.testing.assert_array_equal(a, b)
        assert not np.allclose(a, c)
    assert again.steps_per_second > 0 and again.seconds > 0


def test_chunk_steps_chain_like_one_long_chunk():
    """A burn-in chunk and two chunks of 4 draws, each given the run seed and its first
    step, equal `ChunkedChain` with chunk 4, and the burn-in program returns no draws."""
    kernel = _kernel()
    init = tf.fill([2, 4], 1.0)
    burn = compile_chunk(kernel, "burnin", 6, jit_compile=False)
    draw = compile_chunk(kernel, "sample", 4, thin=2, jit_compile=False)
    state, results = init, kernel.bootstrap_results(init)
    out = run_chunk(burn, state, results, {}, 5, 0)
    assert out.draws is None and out.trace is None
    draws = []
    for i in (1, 2):
        out = run_chunk(draw, out.state, out.kernel_results, {}, 5, 6 + (i - 1) * 8)
        draws.append(out.draws.numpy())
    ref = ChunkedChain(kernel, chunk_size=4, thin=2, jit_compile=False).run(
        init, 8, seed=5, num_burnin_steps=6
    )
    np.testing.assert_array_equal(np.concatenate(draws), ref.states)


@pytest.mark.parametrize(
    "kwargs, run_kwargs, name",
    [
        ({"chunk_size": 0}, {}, "chunk_size"),
        ({"thin": 0}, {}, "thin"),
        ({"thin": 1.5}, {}, "thin"),
        ({"trace_fn": 3}, {}, "trace_fn"),
        ({}, {"num_samples": 0}, "num_samples"),
        ({}, {"num_burnin_steps": -1}, "num_burnin_steps"),
        ({}, {"seed": -2}, "seed"),
    ],
)
def test_bad_arguments_are_named(kwargs, run_kwargs, name):
    with pytest.raises(ValueError, match=name):
        chain = ChunkedChain(_kernel(), jit_compile=False, **kwargs)
        chain.run(tf.zeros([2]), **{"num_samples": 3, **run_kwargs})


def test_bad_kernel_and_kind():
    with pytest.raises(ValueError, match="kernel"):
        ChunkedChain(object())
    with pytest.raises(ValueError, match="kind"):
        compile_chunk(_kernel(), "warmup", 3)
