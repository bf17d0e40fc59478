"""An arm's chunk program is traced and XLA-compiled once, whatever its seed and first step.

XLA compiles a ``jit_compile`` function once per input *shape*, except for the
inputs its constant analysis marks as compile-time constants: their *values*
key the compilation cache, so every new value compiles a new program. Some ops
take an input as a constant when it can be one (``tf.slice``'s ``begin``: a
static slice, else a dynamic one); the analysis walks back from it through
the ops it depends on, and through a ``tf.while_loop`` only along loop
variables that the body passes on unchanged (loop invariants, e.g. tensors the
body captures). The ``"random_window"`` minibatch (``tf.slice`` at a random
start drawn from the step's seed) thus turns the chunk program's seed into a
compile-time constant if the seed reaches the step through a loop invariant:
one compilation per call, ~1 s each at ``N = 10⁶``, and the tuner's rounds then
run a handful of steps.

The check compares the HLO that XLA would compile for each call's actual
arguments (``experimental_get_compiler_ir``): the program of the first call
must serve every later one.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
from tfp_sgmcmc.models.logistic_regression import log_likelihood, log_prior
from tfp_sgmcmc.tuning import runner as runner_module
from tfp_sgmcmc.tuning.runner import ArmRunner

N, D, BATCH = 400, 3, 10


def _data(scheme: str) -> sg.InMemoryData:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(N, D)).astype(np.float32)
    y = (rng.uniform(size=N) < 1.0 / (1.0 + np.exp(-x @ np.ones(D)))).astype(np.float32)
    return sg.InMemoryData((x, y), scheme=scheme)


def _spy(owner: object, attr: str) -> tuple[list[tuple], object]:
    """Replace the program ``owner.attr`` by one recording the arguments of every later call."""
    program = getattr(owner, attr)
    calls: list[tuple] = []

    def spy(*args):
        calls.append(args)
        return program(*args)

    setattr(owner, attr, spy)
    return calls, program


def _spy_on_chunks(runner: ArmRunner) -> tuple[list[tuple], object]:
    """Record the arguments of every later call of the runner's (one) chunk program."""
    (prog,) = runner._programs.values()
    return _spy(prog, "chunk_fn")


def _distinct_programs(program, calls: list[tuple]) -> int:
    return len({program.experimental_get_compiler_ir(*a)(stage="hlo") for a in calls})


@pytest.mark.parametrize("scheme", ["random_window", "epoch"])
def test_in_memory_arm_program_compiles_once(scheme):
    est = sg.MinibatchEstimator(log_likelihood, _data(scheme), BATCH, log_prior)
    runner = ArmRunner(
        lambda step_size: sg.SGLD(est, step_size),
        [{"step_size": 1e-3}, {"step_size": 3e-3}],
        tf.zeros([D]),
        thin=2,
        seed=5,
        max_steps_per_call=20,
    )
    first = runner.run(0, 3, tu.steps(1))  # compiles (with its warm-up call)
    assert first.compile_seconds > 0
    calls, program = _spy_on_chunks(runner)
    for index, steps in [(0, 30), (1, 45), (0, 7), (1, 26), (0, 41)]:
        out = runner.run(index, steps, tu.steps(1))
        assert out.steps == steps and out.compile_seconds == 0 and not out.diverged
    assert len(calls) == 11  # two arms (two seeds), calls of at most 20 steps
    assert program.experimental_get_tracing_count() == 1
    assert _distinct_programs(program, calls) == 1


def test_the_first_compile_collects_the_garbage_left_before_it():
    # Cyclic garbage from earlier models slows tracing (runner._compile): the runner's
    # first compile collects it, once.
    class Node:
        pass

    est = sg.MinibatchEstimator(log_likelihood, _data("epoch"), BATCH, log_prior)
    runner = ArmRunner(lambda step_size: sg.SGLD(est, step_size), [{"step_size": 1e-3}],
                       tf.zeros([D]), thin=2, seed=5, max_steps_per_call=20)
    gc.disable()
    try:
        cycle = Node()
        cycle.self = cycle
        ref = weakref.ref(cycle)
        del cycle
        assert ref() is not None  # only a collection frees a cycle
        assert runner.run(0, 3, tu.steps(1)).compile_seconds > 0
        assert ref() is None
        again = Node()
        again.self = again
        ref = weakref.ref(again)
        del again
        runner.run(0, 3, tu.steps(1))  # compiled already: no collection
        assert ref() is not None
    finally:
        gc.enable()


def _tf_data_estimator() -> sg.MinibatchEstimator:
    x, y = (np.asarray(t) for t in _data("epoch").arrays)
    ds = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .batch(BATCH, drop_remainder=True)
        .cache()
        .shuffle(N // BATCH, seed=2)
        .repeat()
    )
    return sg.MinibatchEstimator(log_likelihood, sg.DatasetData(ds, N), BATCH, log_prior)


def test_tf_data_arm_program_compiles_once(monkeypatch):
    # Blocks of 16 batches: calls start at many offsets into a block, and blocks are
    # re-cut when a call would need more batches than the block has left.
    monkeypatch.setattr(runner_module, "FEED_BLOCK_BYTES", 16 * BATCH * (D + 1) * 4)
    est = _tf_data_estimator()
    runner = ArmRunner(
        lambda step_size: sg.SGLD(est, step_size),
        [{"step_size": 1e-3}, {"step_size": 3e-3}],
        tf.zeros([D]),
        thin=2,
        seed=5,
        max_steps_per_call=20,
    )
    runner.run(0, 3, tu.steps(1))
    (prog,) = runner._programs.values()
    assert prog.feeder is not None and prog.feed_steps == 16
    calls, program = _spy(prog.chunk_fn, "program")
    for index, steps in [(0, 30), (1, 45), (0, 7), (1, 26), (0, 41)]:
        out = runner.run(index, steps, tu.steps(1))
        assert out.steps == steps and out.compile_seconds == 0 and not out.diverged
    offsets = {int(a[1][0]) for a in calls}
    assert len(calls) > 10 and len(offsets) > 3
    assert program.experimental_get_tracing_count() == 1
    assert _distinct_programs(program, calls) == 1


@pytest.mark.parametrize("scheme", ["random_window", "epoch"])
def test_step_t_draws_the_same_randomness_however_the_steps_are_split(scheme):
    # Step t of arm j draws from fold_in((seed, j), t): calls of at most 6 or of at most
    # 200 steps run the same chain (rounds rebuild the sampler state from the round's
    # seed; within a round the kernel results carry the minibatch state across calls).
    def chain(max_steps: int, seed: int = 5) -> np.ndarray:
        est = sg.MinibatchEstimator(log_likelihood, _data(scheme), BATCH, log_prior)
        runner = ArmRunner(
            lambda step_size: sg.SGLD(est, step_size),
            [{"step_size": 1e-3}, {"step_size": 3e-3}],
            tf.zeros([D]),
            thin=2,
            seed=seed,
            max_steps_per_call=max_steps,
        )
        samples = []
        for index, steps in [(1, 17), (1, 40), (0, 9), (1, 23)]:
            out = runner.run(index, steps, tu.steps(1))
            assert out.steps == steps
            if index == 1:
                samples.append(out.samples[0])
        return np.concatenate(samples)

    short, long_ = chain(6), chain(200)
    assert short.shape == (39, D)  # (17 + 40 + 23) // 2 less the groups split by a round
    np.testing.assert_allclose(short, long_, rtol=1e-6, atol=1e-7)
    # Power: another seed gives another chain.
    assert np.max(np.abs(chain(200, seed=6) - long_)) > 1e-3


def _gaussian_log_likelihood(theta, x):
    # A reduction over the last axis (as most models have): under tf.vectorized_map its
    # gradient needed the reduction's shifted axis as a compile-time constant.
    return -0.5 * tf.reduce_sum((tf.expand_dims(theta, -2) - x) ** 2, -1)


def _gaussian_data(scheme: str) -> sg.InMemoryData:
    return sg.InMemoryData(
        np.random.default_rng(0).normal(1.0, 1.0, size=(N, D)).astype(np.float32), scheme=scheme
    )


def test_arms_with_several_independent_chains_share_one_compilation():
    """``chains_per_arm > 1`` maps the likelihood over the chains (``tf.vectorized_map``):
    its gradient must not turn the arms' step sizes into compile-time constants (they
    did: every arm compiled its own program and its first call charged the compilation
    to sampling)."""
    est = sg.MinibatchEstimator(
        _gaussian_log_likelihood, _gaussian_data("epoch"), BATCH, independent_chains=True
    )
    runner = ArmRunner(
        lambda step_size: sg.SGLD(est, step_size),
        [{"step_size": 1e-3}, {"step_size": 3e-3}, {"step_size": 2e-3}],
        tf.zeros([D]),
        thin=2,
        seed=5,
        chains_per_arm=3,
        max_steps_per_call=20,
    )
    runner.run(0, 3, tu.steps(1))
    calls, program = _spy_on_chunks(runner)
    for index, steps in [(0, 30), (1, 45), (2, 7), (1, 26)]:
        out = runner.run(index, steps, tu.steps(1))
        assert out.compile_seconds == 0 and not out.diverged
    assert program.experimental_get_tracing_count() == 1
    assert _distinct_programs(program, calls) == 1


def test_independent_chains_gradient_keeps_state_and_seed_out_of_the_compilation():
    """A jit-compiled step with per-chain batches: new seeds and new states reuse the
    program (XLA's HLO for each call's arguments is the same)."""
    est = sg.MinibatchEstimator(
        _gaussian_log_likelihood, _gaussian_data("with_replacement"), BATCH,
        independent_chains=True,
    )
    kernel = sg.SGLD(est, 1e-3)

    @tf.function(jit_compile=True)
    def step(state, seed):
        results = kernel.bootstrap_results(state)
        return kernel.one_step(state, results, seed=seed)[0]

    args = [
        (tf.fill([3, D], v), tf.constant(s, tf.int32))
        for v, s in [(0.0, [1, 2]), (0.5, [1, 3]), (-1.0, [7, 2])]
    ]
    assert len({step.experimental_get_compiler_ir(*a)(stage="hlo") for a in args}) == 1
