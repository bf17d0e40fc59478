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
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

tfd, tfb = tfp.distributions, tfp.bijectors

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
    with pytest.raises(ValueError, match=r"`seed` must be None, an int in \[0, 2\*\*31\), or an "
                                         r"int32 pair"):
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


# --------------------------------------------------------------------------- #
# sample_chain: a state with no elements, a trace that is no tensor.
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("shape", [[0, D], [2, 0]], ids=["no_chains", "no_parameters"])
def test_a_state_with_no_elements_is_refused(shape):
    """A NumPy reshape error of the start checks before."""
    with pytest.raises(ValueError, match=rf"`current_state` has shape \[{shape[0]}, {shape[1]}\]"
                                         r", with no elements"):
        _chain(_estimator(), tf.zeros(shape))
    # Power: one chain and two chains run.
    assert np.all(np.isfinite(_chain(_estimator(), TWO_CHAINS[0])))
    assert np.all(np.isfinite(_chain(_estimator(), TWO_CHAINS)))


@pytest.mark.parametrize(
    "trace, where",
    [
        (lambda s, r: "abc", "got str 'abc'"),
        (lambda s, r: None, "got NoneType"),
        (lambda s, r: {"lp": r.target_log_prob, "tag": "x"}, "got str 'x' at leaf 1"),
        (lambda s, r: object(), "got object"),
    ],
    ids=["string", "none", "string_in_a_dict", "object"],
)
@pytest.mark.parametrize("between", [0, 1], ids=["every_step", "thinned"])
def test_a_trace_fn_returning_no_tensor_is_refused(trace, where, between):
    """An AttributeError ('str' object has no attribute 'dtype') before."""
    with pytest.raises(ValueError, match=rf"`trace_fn` must return .*{where}"):
        _chain(_estimator(), TWO_CHAINS, trace_fn=trace, num_steps_between_results=between)
    # Power: tensors, Python numbers and an empty trace are traced.
    out = _chain(_estimator(), TWO_CHAINS, num_steps_between_results=between,
                 trace_fn=lambda s, r: {"lp": r.target_log_prob, "one": 1.0, "none": ()})
    assert out.trace["lp"].shape == [2, 2] and out.trace["one"].dtype == tf.float32


# --------------------------------------------------------------------------- #
# Int seeds: [0, 2**31) everywhere; a wider int is refused, not cut.
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("seed", [2**31, 2**62, 2**62 + 5, 2**64 + 1], ids=str)
def test_an_int_seed_of_more_than_31_bits_is_refused(seed, tmp_path):
    """``seed=2**62`` gave exactly the chain of ``seed=0`` before (two 31-bit words)."""
    from tfp_sgmcmc.loop import chain_seed

    match = r"`seed` must be .*an int in \[0, 2\*\*31\).*more than 31 bits"
    kernel = sg.SGLD(_estimator(), 1e-3)
    with pytest.raises(ValueError, match=match):
        _chain(_estimator(), TWO_CHAINS, seed=seed)
    with pytest.raises(ValueError, match=match):
        chain_seed(seed)  # the driver's and the tuner's final draws' seed
    with pytest.raises(ValueError, match=match):
        sg.sample(kernel, TWO_CHAINS, 2, run_dir=str(tmp_path / "run"), seed=seed)
    with pytest.raises(ValueError, match=match):
        kernel.one_step(TWO_CHAINS, kernel.bootstrap_results(TWO_CHAINS), seed=seed)
    assert not (tmp_path / "run").exists()


def test_in_range_int_seeds_keep_their_chains():
    """Power: every int in [0, 2**31) is still the pair [0, s] (chains pinned elsewhere stay
    as they were), the largest one runs, and it is another chain than 0's."""
    est = _estimator()
    for s in (0, 5, 2**31 - 1):
        np.testing.assert_array_equal(
            _chain(est, TWO_CHAINS, seed=s), _chain(est, TWO_CHAINS, seed=[0, s])
        )
    top = _chain(est, TWO_CHAINS, seed=2**31 - 1)
    assert np.abs(top - _chain(est, TWO_CHAINS, seed=0)).max() > 0
    # A wide seed mapped to a pair by the caller, as the error says, runs.
    pair = np.random.SeedSequence(2**62).generate_state(2).view(np.int32)
    assert np.all(np.isfinite(_chain(est, TWO_CHAINS, seed=pair)))


# --------------------------------------------------------------------------- #
# A log-likelihood that ignores the chain dimension.
# --------------------------------------------------------------------------- #
def test_a_log_likelihood_that_ignores_the_chain_dimension_is_refused():
    """``ll(theta[0], batch)`` for a 2-chain state ran before: chain 1 random-walked."""
    est = _estimator(ll=lambda t, b: _linear(t[0], b), prior=None)
    with pytest.raises(ValueError, match=r"`log_likelihood_fn` ignores the chain dimension.*"
                                         r"`init_state`.*slice 0 .*size 2"):
        _chain(est, TWO_CHAINS)
    # The same with the last chain read, and three chains.
    est = _estimator(ll=lambda t, b: _linear(t[-1], b), prior=None)
    with pytest.raises(ValueError, match=r"slice 2 of the leading axis of size 3"):
        _chain(est, tf.fill([3, D], 0.1))


def test_one_chain_of_a_matrix_parameter_is_no_ignored_chain():
    """Power: a single chain whose state is a [2, D] matrix, both rows read, runs; so do
    chains kept by the likelihood with a flat prior."""

    def ll(theta, batch):
        xb, yb = batch
        mean = tf.einsum("nd,...d->...n", xb, theta[..., 0, :] + 0.5 * theta[..., 1, :])
        return -0.5 * tf.square(yb - mean)

    draws = _chain(_estimator(ll=ll, prior=None), TWO_CHAINS)
    assert draws.shape == [2, 2, D] and np.all(np.isfinite(draws))
    assert np.all(np.isfinite(_chain(_estimator(prior=None), TWO_CHAINS)))


# --------------------------------------------------------------------------- #
# JointPosterior (the model of sg.sample_posterior): discrete parts, likelihood shapes,
# data of another float dtype.
# --------------------------------------------------------------------------- #
def _jd(**extra):
    return tfd.JointDistributionNamedAutoBatched(
        dict(mu=tfd.Normal(0.0, 10.0), sigma=tfd.HalfNormal(5.0), **extra)
    )


def _normal_lik(p, y):
    return tfd.Normal(p["mu"][..., None], p["sigma"][..., None])


Y64 = np.random.default_rng(0).normal(1.0, 2.0, 64)  # NumPy's float64


@pytest.mark.parametrize(
    "part, match",
    [
        ("bernoulli", r"`prior` has discrete parts: 'k' \(Bernoulli, dtype int32\).*marginalise"),
        ("poisson", r"`prior` has no event-space bijector for 'k' \(Poisson\).*marginalise"),
        ("mixture", r"`prior` has no event-space bijector for 'k' \(MixtureSameFamily\).*"
                    r"pass `bijector=`"),
    ],
)
def test_a_prior_part_no_gradient_sampler_can_move_is_named(part, match):
    """An AttributeError of TFP before ('NoneType' object has no attribute
    'inverse_event_ndims'), or a model built on an integer part."""
    k = {
        "bernoulli": tfd.Bernoulli(probs=0.3),
        "poisson": tfd.Poisson(3.0),
        "mixture": tfd.MixtureSameFamily(
            tfd.Categorical(probs=[0.5, 0.5]), tfd.Normal([-1.0, 1.0], 1.0)
        ),
    }[part]
    with pytest.raises(ValueError, match=match):
        sg.JointPosterior(_jd(k=k), _normal_lik, Y64.astype(np.float32), 16)
    if part == "mixture":  # Power: the mixture with a bijector of its own samples.
        bij = tfb.JointMap(dict(k=tfb.Identity(), mu=tfb.Identity(), sigma=tfb.Softplus()))
        post = sg.JointPosterior(_jd(k=k), _normal_lik, Y64.astype(np.float32), 16, bijector=bij)
        assert np.all(np.isfinite(_chain_z(post, post.initial_state(2, seed=1))[0]))


def test_a_continuous_relaxation_is_sampled():
    """Power: the relaxation the error proposes for a Bernoulli part runs."""
    k = tfd.RelaxedBernoulli(0.5, probs=0.3)
    post = sg.JointPosterior(_jd(k=k), _normal_lik, Y64.astype(np.float32), 16)
    assert post.names == ["k", "mu", "sigma"]
    assert np.all(np.isfinite(_chain_z(post, post.initial_state(2, seed=1))[0]))


def _chain_z(post, z):
    return sg.sample_chain(2, z, kernel=sg.SGLD(post.estimator, 1e-4), seed=[0, 1])


@pytest.mark.parametrize(
    "lik, got",
    [
        (lambda p, y: tfd.Normal(
            p["mu"][0], p["sigma"][0]), r"\[16\], no chain dimension"),
        (lambda p, y: tfd.Independent(
            _normal_lik(p, y), 1), r"\[2\], one value per chain"),
        (lambda p, y: tfd.Independent(
            _normal_lik(p, y), 2), r"\[\], a scalar"),
        (lambda p, y: tfd.Normal(
            p["mu"][..., None, None], p["sigma"][..., None, None]), r"\[2, 16, 1\], extra"),
    ],
    ids=["ignores_chains", "sums_examples", "sums_all", "extra_axis"],
)
def test_a_likelihood_of_the_wrong_shape_is_named_at_construction(lik, got):
    """``params["mu"][0]`` ran before (the chains shared chain 0's likelihood); the others
    failed in the step, or (a trailing axis) ran on a [2, 16, 1] likelihood."""
    y = Y64.astype(np.float32)
    data = y[:, None] if "extra" in got else y
    with pytest.raises(ValueError, match=rf"`likelihood_fn`'s distribution must give .*shape "
                                         rf"chains \+ \[n\].*gave shape {got}"):
        sg.JointPosterior(_jd(), lik, data, 16)
    # (Power: the likelihood that keeps the chains, test_float64_data_with_a_float32_prior.)


def test_float64_data_with_a_float32_prior_is_cast():
    """TensorFlow's dtype error in ``log_prob`` before; the data are cast to the prior's
    float32 now (as KerasPosterior casts features), the same chain as float32 data."""
    post64 = sg.JointPosterior(_jd(), _normal_lik, Y64, 16)
    post32 = sg.JointPosterior(_jd(), _normal_lik, Y64.astype(np.float32), 16)
    z = post32.initial_state(2, seed=1)
    got, want = _chain_z(post64, z), _chain_z(post32, z)
    for a, b in zip(got, want):
        assert a.dtype == tf.float32
        np.testing.assert_array_equal(a, b)
    # A data source is not rewritten: named, with both dtypes and the fix.
    with pytest.raises(ValueError, match=r"`data` holds float64 arrays and the prior is "
                                         r"float32: build the data source from arrays cast"):
        sg.JointPosterior(_jd(), _normal_lik, sg.InMemoryData(Y64), 16)
    # Power: a float64 prior keeps float64 data.
    prior64 = tfd.JointDistributionNamedAutoBatched(
        dict(mu=tfd.Normal(np.float64(0), 10.0), sigma=tfd.HalfNormal(np.float64(5)))
    )
    post = sg.JointPosterior(prior64, _normal_lik, sg.InMemoryData(Y64), 16)
    assert post.constrained_estimator.dtype == tf.float64
