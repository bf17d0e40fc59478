"""Issue 36, "nothing silent": bad runs and bad input end in a named ``ValueError``.

Each case here returned all-NaN draws, sampled the prior, or died in a raw TensorFlow
or NumPy traceback before (``sg.sample_chain`` on a ``MinibatchEstimator``); each now
raises a ``ValueError`` that names the argument at fault (or warns, for a chain that
diverges during the run). Every group has a power check: the valid neighbour of the
bad input still runs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg

N, D, BATCH = 40, 3, 8


def _data(dtype=np.float32):
    rng = np.random.default_rng(3)
    return rng.normal(size=(N, D)).astype(dtype), rng.normal(size=N).astype(dtype)


def _linear(theta, batch):
    xb, yb = batch
    return -0.5 * tf.square(yb - tf.einsum("nd,...d->...n", xb, theta))


def _prior(theta):
    return -0.5 * tf.reduce_sum(theta**2, -1)


def _estimator(ll=_linear, data=None, prior=_prior) -> sg.MinibatchEstimator:
    return sg.MinibatchEstimator(ll, _data() if data is None else data, BATCH, log_prior_fn=prior)


def _chain(estimator, init, num_results=2, **kw):
    kernel = sg.SGLD(estimator, kw.pop("step_size", 1e-3), temperature=kw.pop("temperature", 1.0))
    return sg.sample_chain(num_results, init, kernel=kernel, seed=kw.pop("seed", [0, 1]), **kw)


TWO_CHAINS = tf.fill([2, D], 0.1)


# --------------------------------------------------------------------------- #
# Non-finite starts: all-NaN draws before, a ValueError before the loop now.
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("fill", [np.nan, np.inf])
def test_a_non_finite_initial_state_is_refused(fill):
    init = tf.tensor_scatter_nd_update(TWO_CHAINS, [[1, 2]], [fill])
    with pytest.raises(ValueError, match=r"`current_state` contains NaN or Inf .*\[1, 2\]"):
        _chain(_estimator(), init)


def test_a_non_finite_constant_state_is_refused_inside_a_compiled_function():
    """A state known while the function is traced is checked there, XLA or not."""
    init = tf.fill([2, D], np.nan)

    @tf.function(jit_compile=True)
    def run():
        return _chain(_estimator(), init)

    with pytest.raises(ValueError, match="`current_state` contains NaN"):
        run()


@pytest.mark.parametrize(
    "kw",
    [
        dict(ll=lambda t, b: _linear(t, b) * np.nan),
        dict(prior=lambda t: _prior(t) * np.nan),
        dict(prior=lambda t: _prior(t) - np.inf),
    ],
    ids=["nan_likelihood", "nan_prior", "minus_inf_prior"],
)
def test_a_non_finite_log_density_at_the_start_is_refused(kw):
    with pytest.raises(ValueError, match=r"log-density at `current_state` is (nan|-inf) for chain 0"
                       ):
        _chain(_estimator(**kw), TWO_CHAINS)


def test_a_non_finite_gradient_at_the_start_is_refused():
    # sqrt(|θ|) is finite at 0, its gradient is not (0·inf).
    def ll(theta, batch):
        return _linear(theta, batch) - tf.reduce_sum(tf.sqrt(tf.abs(theta)), -1)[..., None]

    init = tf.constant([[0.1, 0.2, 0.3], [0.1, 0.0, 0.3]])
    with pytest.raises(ValueError, match=r"gradient of the log-density at `current_state` .*chain 1"
                       ):
        _chain(_estimator(ll=ll), init)
    # Power: away from 0 it runs.
    assert np.all(np.isfinite(_chain(_estimator(ll=ll), init + 0.5)))


def test_a_non_finite_start_fails_when_a_graph_runs():
    """Without XLA the graph asserts (XLA drops assertions: the documented limit)."""
    est = _estimator(ll=lambda t, b: _linear(t, b) * np.nan)
    run = tf.function(lambda init: _chain(est, init))
    with pytest.raises(tf.errors.InvalidArgumentError, match="`current_state`"):
        run(TWO_CHAINS)
    assert np.all(np.isfinite(tf.function(lambda init: _chain(_estimator(), init))(TWO_CHAINS)))


# --------------------------------------------------------------------------- #
# A chain that diverges during the run warns, naming where.
# --------------------------------------------------------------------------- #
def _quartic_estimator() -> sg.MinibatchEstimator:
    """log π(θ) = -Σ θ⁴ exactly: deterministic gradient descent with ε = 0.1 is stable
    from 0.1 and explodes from 5 (θ → θ − 0.2 θ³ overflows float32 within a few steps)."""

    def ll(theta, batch):
        per_chain = -tf.reduce_sum(theta**4, -1, keepdims=True) / N
        return per_chain * tf.ones_like(batch[1])

    return sg.MinibatchEstimator(ll, _data(), BATCH)


def test_a_divergence_during_the_run_warns_naming_the_result_and_chain():
    init = tf.constant([[0.1], [5.0]])
    with pytest.warns(RuntimeWarning, match=r"diverged: result (\d+) .* for chain 1;"):
        draws = _chain(_quartic_estimator(), init, num_results=8, step_size=0.1, temperature=0.0)
    assert np.all(np.isfinite(draws[:, 0])) and not np.all(np.isfinite(draws[:, 1]))
    # Power: two stable chains, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _chain(_quartic_estimator(), tf.constant([[0.1], [0.2]]), num_results=8, step_size=0.1,
               temperature=0.0)


def test_the_warning_counts_the_kernel_steps():
    """Result r is the state after 1 + burn-in + r·(1 + between) steps: the message says
    which step that is, here with a burn-in and thinning."""
    init = tf.constant([[5.0]])
    with pytest.warns(RuntimeWarning) as record:
        _chain(_quartic_estimator(), init, num_results=6, step_size=0.1, temperature=0.0,
               num_burnin_steps=1, num_steps_between_results=1)
    (message,) = [str(w.message) for w in record if "diverged" in str(w.message)]
    result = int(message.split("result ")[1].split()[0])
    step = int(message.split("kernel step ")[1].split(")")[0])
    assert step == 2 + 2 * result, message


# --------------------------------------------------------------------------- #
# Seeds: raw TensorFlow tracebacks before.
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    "seed", ["abc", 1.5, [1, 2, 3], True, [1.0, 2.0], tf.constant(3), tf.constant([1, 2], tf.int64)]
)
def test_bad_sample_chain_seeds_are_named(seed):
    with pytest.raises(ValueError, match="`seed` must be None, an int >= 0, or an int32 pair"):
        _chain(_estimator(), TWO_CHAINS, seed=seed)


def test_seed_forms_that_give_one_chain():
    """Power: a list, a tuple, an int32 tensor and a NumPy pair are the same seed."""
    est = _estimator()
    want = _chain(est, TWO_CHAINS, seed=[4, 5])
    for seed in [(4, 5), tf.constant([4, 5]), np.array([4, 5]), np.array([4, 5], np.uint8)]:
        np.testing.assert_array_equal(_chain(est, TWO_CHAINS, seed=seed), want)
