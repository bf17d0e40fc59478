"""The user's functions keep AutoGraph where the library's programs are traced without it.

The library's ``tf.function``s run with ``autograph=False`` (converting the library's own
code cost seconds per process); a log-likelihood with a Python ``if`` on a tensor is
converted where the estimator calls it (``tfp_sgmcmc.internal.autograph``). Each test
compares a model written with Python control flow on tensors against the same model
written with ``tf.cond``: the chains must be the same numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.automatic import _Chain, _Runner
from tfp_sgmcmc.driver import sample
from tfp_sgmcmc.internal.autograph import needs_autograph
from tfp_sgmcmc.loop import chain_seed
from tfp_sgmcmc.schedules import PolynomialDecay, StepSizeSchedule

# Rows with mean 1: a minibatch's mean falls on either side of 1, so both branches run.
DATA = np.random.default_rng(0).normal(1.0, 1.0, (200, 2))
BATCH = 10


def _robust(r):
    return -tf.reduce_sum(tf.sqrt(1.0 + r**2), -1)


def _gaussian(r):
    return -0.5 * tf.reduce_sum(r**2, -1)


def _helper(r, batch):
    # A helper with its own Python `if`: conversion must be recursive.
    if tf.reduce_mean(batch) > 1.0:
        out = _robust(r)
    else:
        out = _gaussian(r)
    return out


def branchy_log_lik(theta, batch):
    theta = theta[0] if isinstance(theta, list) else theta
    r = tf.expand_dims(theta, -2) - batch
    return _helper(r, batch)


def cond_log_lik(theta, batch):
    theta = theta[0] if isinstance(theta, list) else theta
    r = tf.expand_dims(theta, -2) - batch
    return tf.cond(tf.reduce_mean(batch) > 1.0, lambda: _robust(r), lambda: _gaussian(r))


def branchy_log_prior(theta):
    theta = theta[0] if isinstance(theta, list) else theta
    if tf.reduce_sum(theta) > 1e6:  # never taken; still a Python `if` on a tensor
        lp = -tf.reduce_sum(theta**2, -1)
    else:
        lp = -0.5 * tf.reduce_sum(theta**2, -1)
    return lp


def cond_log_prior(theta):
    theta = theta[0] if isinstance(theta, list) else theta
    return -0.5 * tf.reduce_sum(theta**2, -1)


def _estimator(log_lik, log_prior):
    return sg.MinibatchEstimator(log_lik, DATA, BATCH, log_prior_fn=log_prior)


def _runner_draws(log_lik, log_prior, jit_compile):
    est = _estimator(log_lik, log_prior)
    assert not needs_autograph(est)  # the library's programs: no AutoGraph
    white = sg.WhitenedEstimator(est, [tf.zeros([2], tf.float64)], 0.07 * np.eye(2))
    runner = _Runner(white, jit_compile)
    chain = _Chain(np.zeros([2, 2]), chain_seed(3))
    return runner(chain, 0.1, 20, 2)


@pytest.mark.parametrize(
    "jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)]  # XLA: two compiles
)
def test_python_if_on_tensors_in_the_users_functions_under_the_automatic_runner(jit_compile):
    w, diverged = _runner_draws(branchy_log_lik, branchy_log_prior, jit_compile)
    ref, _ = _runner_draws(cond_log_lik, cond_log_prior, jit_compile)
    assert not diverged and np.isfinite(w).all() and np.std(w) > 0
    np.testing.assert_array_equal(w, ref)


def test_python_if_on_tensors_in_the_users_functions_under_the_driver(tmp_path):
    def run(log_lik, log_prior, name):
        kernel = sg.SGLD(_estimator(log_lik, log_prior), 1e-5)
        out = sample(kernel, tf.zeros([1, 2], tf.float64), 12, str(tmp_path / name),
                     seed=1, chunk_size=12, progress=False, jit_compile=False)
        return out.samples()

    got = run(branchy_log_lik, branchy_log_prior, "if")
    ref = run(cond_log_lik, cond_log_prior, "cond")
    assert np.isfinite(got).all() and np.std(got) > 0
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)


def test_noisy_estimator_target_keeps_autograph():
    def target(theta):
        if tf.reduce_sum(theta) > 1e6:
            lp = -tf.reduce_sum(theta**2, -1)
        else:
            lp = -0.5 * tf.reduce_sum(theta**2, -1)
        return lp

    est = sg.NoisyGradientEstimator(target, 0.1)
    got = tf.function(est.full_log_prob_and_gradient, autograph=False)(tf.ones([2, 3]))
    np.testing.assert_allclose(got.target_log_prob, [-1.5, -1.5])
    np.testing.assert_allclose(got.grads_target_log_prob[0], -np.ones([2, 3]))


class _BranchyEstimator(sg.NoisyGradientEstimator):
    """A user's estimator class whose own method branches on a tensor in Python."""

    def _estimate(self, state, estimator_state, seed):
        est, st = super()._estimate(state, estimator_state, seed)
        if tf.reduce_all(tf.math.is_finite(est.target_log_prob)):
            value = est.target_log_prob
        else:
            value = tf.zeros_like(est.target_log_prob)
        return sg.GradientEstimate(value, est.grads_target_log_prob), st


def test_autograph_is_kept_on_where_a_users_class_is_reached():
    user = _BranchyEstimator(lambda t: -0.5 * tf.reduce_sum(t[0] ** 2, -1), 0.0)
    library = _estimator(cond_log_lik, cond_log_prior)
    assert needs_autograph(user) and needs_autograph(sg.SGLD(user, 0.1))
    assert needs_autograph([library, user])
    white = sg.WhitenedEstimator(user, [tf.zeros([2])], np.eye(2))
    assert needs_autograph(sg.SGLD(white, 0.1))
    assert not needs_autograph(sg.SGLD(library, 0.1))
    assert not needs_autograph(sg.ControlVariateEstimator(library, [tf.zeros([2], tf.float64)]))
    assert not needs_autograph(sg.SGLD(library, PolynomialDecay(0.1, 1.0, 0.55)))
    assert needs_autograph(sg.SGLD(library, _BranchySchedule()))


class _BranchySchedule(StepSizeSchedule):
    """A user's schedule: a Python `if` on the step tensor."""

    def __call__(self, step, dtype):
        if step < 10:
            eps = tf.constant(0.1, dtype)
        else:
            eps = tf.constant(0.01, dtype)
        return eps


@pytest.mark.slow  # AutoGraph converts the library's code: seconds (the fast check above)
def test_a_users_estimator_class_keeps_autograph_on_for_the_whole_program():
    est = _BranchyEstimator(lambda t: -0.5 * tf.reduce_sum(t[0] ** 2, -1), 0.0)
    runner = _Runner(est, jit_compile=False)
    w, diverged = runner(_Chain(np.zeros([2, 2], np.float32), chain_seed(0)), 0.1, 5, 1)
    assert not diverged and np.isfinite(w).all()


@pytest.mark.parametrize("fn", [branchy_log_lik, cond_log_lik])
def test_eager_calls_run_the_function_as_written(fn):
    est = _estimator(fn, branchy_log_prior)
    got = est.full_log_prob_and_gradient(tf.zeros([1, 2], tf.float64))
    ref = _estimator(cond_log_lik, cond_log_prior).full_log_prob_and_gradient(
        tf.zeros([1, 2], tf.float64)
    )
    np.testing.assert_allclose(got.target_log_prob, ref.target_log_prob, rtol=1e-12)


def test_functions_given_while_autograph_is_off_run_as_written():
    @tf.autograph.experimental.do_not_convert
    def build():
        return _estimator(branchy_log_lik, branchy_log_prior)

    est = build()
    state = tf.zeros([1, 2], tf.float64)
    # Copies keep the status the functions were given with, not the copy's.
    for e in (est, est.with_batch_size(5), est.with_independent_chains()):
        with pytest.raises(ValueError, match="`log_likelihood_fn` failed"):
            tf.function(e.full_log_prob_and_gradient, autograph=False)(state)
    converted = _estimator(branchy_log_lik, branchy_log_prior)
    got = tf.function(converted.full_log_prob_and_gradient, autograph=False)(state)
    assert np.isfinite(got.target_log_prob.numpy()).all()
