"""Compile once: a tuner's best arm and its final draws share one program, and repeated
``find_map`` calls on one estimator share theirs.

The tuner cases run MAMBA and are in the slow tier; the fast tier checks the same reuse
on an ``ArmRunner`` in ``tests/test_one_loop.py``.

``TuningResult.sample`` runs the program the tuner compiled for the best arm's structure
(float hyperparameters, seed, burn-in and thinning are runtime inputs), so its tracing
count does not grow, and its draws are ``sg.sample_chain``'s with the best arm's kernel,
start and seed (to a rounding tolerance: the two programs differ; a changed seed, the
power check, misses it by far).
"""

from __future__ import annotations

import warnings
from copy import deepcopy

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning
from tfp_sgmcmc.estimators import map as map_module
from tfp_sgmcmc.loop import chain_seed
from tfp_sgmcmc.models.logistic_regression import log_likelihood, log_prior

N, D, BATCH = 400, 3, 20
NUM, BURNIN, THIN, SEED = 30, 5, 3, 11
TOL = dict(rtol=1e-5, atol=1e-6)


def _estimator() -> sg.MinibatchEstimator:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(N, D)).astype(np.float32)
    y = (rng.uniform(size=N) < 1.0 / (1.0 + np.exp(-x @ np.ones(D)))).astype(np.float32)
    return sg.MinibatchEstimator(log_likelihood, sg.InMemoryData((x, y)), BATCH, log_prior)


@pytest.fixture(scope="module")
def tuned():
    est = _estimator()
    arms = tuning.grid(step_size=[1e-4, 1e-3, 1e-2])  # one structure: one program
    with warnings.catch_warnings():  # (the best arm's gradient-noise note)
        warnings.simplefilter("ignore", RuntimeWarning)
        return tuning.MAMBA(
            arms,
            tf.zeros([D]),
            lambda step_size: sg.SGLD(est, step_size),
            budget=tuning.steps(300),
            seed=0,
            progress=False,
        ).run()


def _sample_chain(result, seed):
    @tf.function(jit_compile=True, autograph=False)
    def run(seed):
        return sg.sample_chain(
            NUM,
            tf.constant(result.best_state),
            kernel=result.kernel(),
            seed=seed,
            num_burnin_steps=BURNIN,
            num_steps_between_results=THIN - 1,
        )

    return run(tf.constant(chain_seed(seed))).numpy()


@pytest.mark.slow  # a MAMBA run and two compiled sample_chain programs
def test_final_draws_reuse_the_tuners_program_and_equal_sample_chain(tuned):
    runner = tuned.runner
    assert runner is not None  # the tuner's runner, taken by the result
    traces = runner.num_traces
    assert traces == 1
    draws = tuned.sample(NUM, seed=SEED, num_burnin_steps=BURNIN, thin=THIN)
    again = tuned.sample(2 * NUM, seed=SEED + 1, thin=1)  # other runtime inputs
    assert runner.num_traces == traces  # no new trace
    # Nor a new XLA program: burn-in, thinning, offsets and seeds are runtime values
    # (the HLO XLA would compile for each call's arguments is the tuner's).
    (prog,) = [runner._programs[k] for k in runner._used]
    program, calls = prog.chunk_fn, []
    prog.chunk_fn = lambda *a: calls.append(a) or program(*a)
    try:
        tuned.sample(4, seed=SEED, num_burnin_steps=7, thin=2)
    finally:
        prog.chunk_fn = program
    assert len(calls) == 2  # the burn-in call and the recorded one
    hlo = {program.experimental_get_compiler_ir(*a)(stage="hlo") for a in calls}
    assert len(hlo) == 1
    assert draws.shape == (NUM, D) and again.shape == (2 * NUM, D)
    want = _sample_chain(tuned, SEED)
    np.testing.assert_allclose(draws, want, **TOL)
    # Power: another seed is another chain, and the chain moves.
    other = _sample_chain(tuned, SEED + 1)
    assert np.abs(other - want).max() > 1e3 * TOL["atol"]
    assert np.abs(np.diff(draws, axis=0)).max() > 1e-3


@pytest.mark.slow
def test_a_result_without_its_runner_builds_one_for_the_best_arm(tuned):
    copy = deepcopy(tuned)  # a copy (or a pickle) leaves the compiled programs behind
    assert copy.runner is None and tuned.runner is not None
    a = copy.sample(5, seed=SEED, thin=2)
    assert copy._own_runner is not None and copy._own_runner.num_traces == 1
    np.testing.assert_allclose(a, tuned.sample(5, seed=SEED, thin=2), **TOL)


@pytest.mark.slow
def test_sample_refuses_bad_arguments(tuned):
    with pytest.raises(ValueError, match="num_results"):
        tuned.sample(0)
    with pytest.raises(ValueError, match="thin"):
        tuned.sample(3, thin=0)
    with pytest.raises(ValueError, match="num_chains"):
        tuned.sample(3, num_chains=0)
    with pytest.raises(ValueError, match="seed"):
        tuned.sample(3, seed=-1)


def test_find_map_adam_compiles_once_per_estimator_and_structure():
    est = _estimator()
    before = len(map_module._PROGRAMS)
    first = sg.find_map(est, tf.zeros([D]), method="adam", num_steps=30, seed=1)
    (program,) = [p for e, p in map_module._PROGRAMS.values() if e is est]
    assert len(map_module._PROGRAMS) == min(before + 1, map_module.MAX_PROGRAMS)
    assert program.experimental_get_tracing_count() == 1
    # Another learning rate, step count and seed: the same program.
    second = sg.find_map(
        est, tf.zeros([D]), method="adam", num_steps=80, learning_rate=5e-2, seed=2
    )
    assert program.experimental_get_tracing_count() == 1
    # Power: those inputs reach the program (another optimum estimate), and a repeat
    # is the same run.
    assert np.abs(first.position - second.position).max() > 1e-3
    repeat = sg.find_map(est, tf.zeros([D]), method="adam", num_steps=30, seed=1)
    np.testing.assert_array_equal(repeat.position, first.position)


@pytest.mark.slow  # (the default tier checks the same cache with Adam)
def test_find_map_lbfgs_traces_its_objective_once_per_estimator():
    est = _estimator()
    first = sg.find_map(est, tf.zeros([D]))
    (objective,) = [p for e, p in map_module._PROGRAMS.values() if e is est]
    again = sg.find_map(est, tf.ones([D]), num_steps=200)
    assert objective.experimental_get_tracing_count() == 1
    assert first.converged and again.converged
    np.testing.assert_allclose(again.position, first.position, atol=1e-4)
    # Power: another estimator (other data) is another objective with another mode.
    other = sg.MinibatchEstimator(
        log_likelihood,
        sg.InMemoryData(tuple(a[: N // 2] for a in est.data.arrays)),
        BATCH,
        log_prior,
    )
    half = sg.find_map(other, tf.zeros([D]))
    assert objective.experimental_get_tracing_count() == 1
    assert np.abs(half.position - first.position).max() > 1e-3
