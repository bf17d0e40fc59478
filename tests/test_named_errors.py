"""Nothing silent: bad runs and bad input end in a named ``ValueError``.

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
    # (Valid graph runs: tests/test_flat_chain.py.)


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
# A gradient that never reaches the state; a prior of the wrong shape.
# --------------------------------------------------------------------------- #
def test_a_log_likelihood_without_gradient_is_refused():
    est = _estimator(ll=lambda t, b: tf.stop_gradient(_linear(t, b)))
    with pytest.raises(ValueError, match=r"`log_likelihood_fn`'s gradient .* exactly zero"):
        _chain(est, TWO_CHAINS)


def test_a_zero_gradient_at_one_state_or_a_constant_likelihood_is_accepted():
    """Power: a stationary start (zero targets, θ = 0) and a likelihood that does not
    depend on the state (the prior is sampled, as asked) run."""
    x, _ = _data()
    at_zero = sg.MinibatchEstimator(_linear, (x, np.zeros(N, np.float32)), BATCH, _prior)
    assert np.all(np.isfinite(_chain(at_zero, tf.zeros([2, D]))))
    flat = _estimator(ll=lambda t, b: tf.zeros([2, BATCH]))
    assert np.all(np.isfinite(_chain(flat, TWO_CHAINS)))


@pytest.mark.parametrize(
    "prior, shape",
    [
        (lambda t: -0.5 * tf.reduce_sum(t**2), r"\[\]"),  # one value for both chains
        (lambda t: -0.5 * t**2, r"\[2, 3\]"),  # no reduction at all
    ],
    ids=["scalar", "per_coordinate"],
)
def test_a_prior_of_the_wrong_shape_is_refused(prior, shape):
    match = rf"`log_prior_fn` must return one log-prior per chain.*\[2\].*got shape {shape}"
    with pytest.raises(ValueError, match=match):
        _chain(_estimator(prior=prior), TWO_CHAINS)
    # While a graph is traced (XLA or not), too.
    with pytest.raises(ValueError, match=match):
        tf.function(lambda init: _chain(_estimator(prior=prior), init))(TWO_CHAINS)
    # Power: a scalar is the one value of a single chain.
    if shape == r"\[\]":
        assert np.all(np.isfinite(_chain(_estimator(prior=prior), TWO_CHAINS[0])))


def test_a_constant_scalar_prior_is_every_chain_s():
    """Power: a flat prior written by hand (one constant) broadcasts to every chain, as
    it always did, eagerly and in a graph."""
    est = _estimator(prior=lambda t: tf.zeros([]))
    assert np.all(np.isfinite(_chain(est, TWO_CHAINS)))
    kernel = sg.SGLD(est, 1e-3)
    results = tf.function(kernel.bootstrap_results)(TWO_CHAINS)
    assert results.target_log_prob.shape == [2]


# --------------------------------------------------------------------------- #
# Raw TensorFlow tracebacks that are named errors now.
# --------------------------------------------------------------------------- #
def test_integer_data_with_a_float_state():
    x, y = _data()
    est = _estimator(data=(x.astype(np.int32), y.astype(np.int32)))
    with pytest.raises(ValueError, match=r"`log_likelihood_fn` failed on `init_state`.*`data` "
                                         r"holds no floating array.*cast the data to float32"):
        _chain(est, TWO_CHAINS)


@pytest.mark.parametrize("data", [None, (np.zeros((N, D)), None)], ids=["none", "none_array"])
def test_data_none(data):
    with pytest.raises(ValueError, match="`data`"):
        sg.MinibatchEstimator(_linear, data, BATCH)
    with pytest.raises(ValueError, match="`data`"):
        sg.InMemoryData(data)


@pytest.mark.parametrize(
    "init, data",
    [
        (TWO_CHAINS, (_data()[0][:, 0], _data()[1])),  # 1-D data, 3-D state
        (tf.zeros([2, D + 1]), None),  # a state of the wrong width
        (tf.zeros([]), None),  # a scalar state
    ],
    ids=["one_dim_data", "wrong_width", "scalar_state"],
)
def test_state_and_data_that_do_not_fit_are_named(init, data):
    with pytest.raises(ValueError, match=r"`log_likelihood_fn` failed on `init_state` \(float32"
                                         r".*minibatch of `data`"):
        _chain(_estimator(data=data), init)
    # Power: the model's own width runs.
    assert np.all(np.isfinite(_chain(_estimator(), TWO_CHAINS)))


def test_a_state_that_does_not_fit_is_named_while_a_graph_is_traced():
    """In a graph the step's own call of the model names it (nothing is probed)."""
    run = tf.function(lambda init: _chain(_estimator(), init), jit_compile=True)
    with pytest.raises(ValueError, match=r"`log_likelihood_fn` failed on the state"):
        run(tf.zeros([2, D + 1]))


@pytest.mark.parametrize(
    "ll, match",
    [
        (lambda t, b: tf.zeros([2, BATCH], tf.int32), "got int32"),
        (lambda t, b: tf.cast(_linear(t, b), tf.float64), "got float64"),
        (lambda t, b: None, "returned None"),
    ],
    ids=["int", "float64", "none"],
)
def test_a_log_likelihood_of_the_wrong_kind_is_named(ll, match):
    with pytest.raises(ValueError, match=rf"`log_likelihood_fn` .*{match}"):
        _chain(_estimator(ll=ll), TWO_CHAINS)


def test_a_prior_of_the_wrong_dtype_is_named():
    with pytest.raises(ValueError, match="`log_prior_fn` .*got float64"):
        _chain(_estimator(prior=lambda t: tf.cast(_prior(t), tf.float64)), TWO_CHAINS)


@pytest.mark.parametrize("state", [None, [], [tf.zeros([D]), None]], ids=["none", "empty", "part"])
def test_no_state(state):
    kernel = sg.SGLD(_estimator(), 1e-3)
    with pytest.raises(ValueError, match="`init_state`"):
        kernel.bootstrap_results(state)


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


def test_sample_names_an_empty_run_dir(tmp_path):
    est = sg.MinibatchEstimator(
        lambda t, x: -0.5 * tf.reduce_sum((x - t[..., None, :]) ** 2, -1),
        np.zeros([8, 2], np.float32), 4,
    )
    kernel = sg.SGLD(est, step_size=1e-3)
    with pytest.raises(ValueError, match="`run_dir` must be a non-empty path"):
        sg.sample(kernel, tf.zeros([2], tf.float32), 4, run_dir="")
    # Power check: a real directory runs.
    sg.sample(kernel, tf.zeros([2], tf.float32), 4, run_dir=str(tmp_path / "run"))
