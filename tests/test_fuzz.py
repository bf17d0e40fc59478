"""Property-based fuzzing of the public API (Hypothesis).

Every public constructor and function gets generated bad and edge-case input:
wrong types, dtypes and shapes, NaN/Inf, negative/zero sizes and steps, empty
data, mismatched parts, huge values. The contract (``docs/conventions.md``):
each call ends either in a ``ValueError``/``TypeError`` whose message names
the argument, or in a result that is correct (finite where it claims success).
Never another exception, a hang, a silent NaN, or a half-written run directory.

Runtime is bounded: ``max_examples`` per property (25; 30 for the minibatch model's
inputs; 15 for each of the 40 kernel/argument pairs) and no per-example deadline
(TensorFlow's first call in a process traces). ``HYPOTHESIS_PROFILE=long`` tries 500
cases per property.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tfp_sgmcmc as sg
from tfp_sgmcmc import diagnostics as dg
from tfp_sgmcmc import tuning as tu

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    derandomize=True,  # CI is reproducible; the `long` profile explores
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("long", parent=settings.get_profile("ci"), max_examples=500,
                          derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: Scalars a numeric argument may be handed by mistake (or at the edge).
scalars = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0, -1, 1, 10**30, -(10**30), 1e-300, 1e300, True, False]),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from(["0.1", None, [0.1, 0.2], (), np.array([1e-3, 2e-3]), np.float32(1e-3)]),
)
ints = st.one_of(
    st.integers(min_value=-5, max_value=50),
    st.sampled_from([0, -1, 1.5, float("nan"), True, "3", None, np.int64(3), 2**40]),
)


def named_error(fn, *names: str):
    """Run ``fn``; a ValueError/TypeError must name one of ``names`` (in backticks)."""
    try:
        return True, fn()
    except (ValueError, TypeError) as e:
        msg = str(e)
        assert any(f"`{n}" in msg for n in names), f"error does not name {names}: {msg!r}"
        return False, e


def _finite(x) -> bool:
    return all(np.all(np.isfinite(np.asarray(t))) for t in tf.nest.flatten(x))


def _est(n=20, d=2, dtype=np.float64):
    x = np.random.default_rng(0).standard_normal((n, d)).astype(dtype)
    y = np.zeros(n, dtype)

    def ll(theta, batch):
        xb, yb = batch
        return -0.5 * tf.square(yb - tf.einsum("nd,...d->...n", xb, theta))

    return sg.MinibatchEstimator(ll, (x, y), 5)


EST = None


def _shared_est():
    global EST
    if EST is None:
        EST = _est()
    return EST


# --------------------------------------------------------------------------- #
# Kernels: step size, temperature and every sampler-specific hyperparameter.
# --------------------------------------------------------------------------- #
KERNEL_ARGS = {
    sg.SGLD: ["step_size", "temperature"],
    sg.PSGLD: ["step_size", "decay", "epsilon", "temperature"],
    sg.SGHMC: ["step_size", "friction", "noise_estimate", "num_leapfrog_steps", "temperature"],
    sg.SGNHT: ["step_size", "diffusion", "temperature"],
    sg.kernels.MSGLD: ["step_size", "a", "beta1", "temperature"],
    sg.kernels.ASGLD: ["step_size", "a", "beta1", "beta2", "epsilon", "temperature"],
    sg.kernels.AdaMaxSGLD: ["step_size", "a", "beta1", "beta2", "epsilon"],
    sg.kernels.AdadeltaSGLD: ["step_size", "a", "beta1", "rho", "epsilon"],
    sg.kernels.PreconditionedMomentumSGLD: ["step_size", "a", "beta1", "decay", "epsilon"],
    sg.kernels.PreconditionedAdamSGLD: ["step_size", "beta2", "decay", "precond_epsilon"],
}
KERNEL_CASES = [(cls, arg) for cls, args in KERNEL_ARGS.items() for arg in args]


def _in_domain(arg: str, value) -> bool:
    """Whether ``value`` lies in the domain of kernel hyperparameter ``arg``: every one of
    them is a finite number ``>= 0``, and a step size is ``> 0``.

    Finiteness of one step is no oracle for it: a negative step size gives a NaN noise
    scale, which the step flags as diverged, and a negative friction or temperature a
    chain that is finite for a step and wrong ever after.
    """
    if not _non_negative_number(value):
        return False
    return arg != "step_size" or bool(np.all(np.asarray(value, np.float64) > 0))


@pytest.mark.parametrize("cls, arg", KERNEL_CASES, ids=lambda c: getattr(c, "__name__", c))
@given(value=scalars)
# Out-of-domain values tried in every run, whatever the profile draws: a negative and a
# zero (every argument refuses a negative; a step size refuses 0 too).
@example(value=-1e-3)
@example(value=-1)
@example(value=0.0)
@settings(max_examples=15)  # 40 (kernel, argument) pairs: keep the matrix within CI time
def test_kernel_hyperparameters(cls, arg, value):
    kw = {"step_size": 1e-3, arg: value}
    ok, kernel = named_error(lambda: cls(_shared_est(), **kw), arg, "beta1", "friction")
    # A value outside the argument's domain must be refused, not run (the chain it gives
    # is wrong or NaN); a refused value may still be in the domain (a bound of a kernel's
    # own, e.g. beta1 < 1), which the named error covers.
    if ok:
        assert _in_domain(arg, value), f"{cls.__name__} accepted {arg}={value!r}"
    if not ok or (arg == "num_leapfrog_steps" and value > 5):
        return  # (a valid large L only costs trace time: the loop is unrolled)
    # Accepted: one step from a finite state must be finite or flagged as diverged.
    state = tf.constant([[0.1, -0.2]], tf.float64)
    ok, out = named_error(lambda: kernel.one_step(state, kernel.bootstrap_results(state), [1, 2]),
                          arg)
    if ok:
        new, results = out
        assert _finite(new) or bool(np.all(results.diverged.numpy())), (arg, value)


@given(
    # The model's event shape is [2]; leading dims are chains (possibly none, or empty).
    shape=st.sampled_from([(2,), (3, 2), (0, 2), (1, 0, 2)]),
    dtype=st.sampled_from([np.float64, np.float32, np.int32, np.float16]),
    fill=st.sampled_from([0.0, 1.0, float("nan"), float("inf"), 1e300]),
)
def test_kernel_init_state(shape, dtype, fill):
    kernel = sg.SGLD(_shared_est(), 1e-3)
    with np.errstate(over="ignore", invalid="ignore"):
        state = tf.constant(np.full(shape, fill).astype(dtype))
    ok, results = named_error(lambda: kernel.bootstrap_results(state), "init_state")
    if ok:
        assert dtype == np.float64  # the data's dtype; anything else must be rejected
        # A non-finite start is flagged as diverged, a finite one is not.
        flags = results.diverged.numpy()
        assert np.all(flags == (not _finite(state))), (shape, fill, flags)


# --------------------------------------------------------------------------- #
# Data and estimators.
# --------------------------------------------------------------------------- #
arrays = st.one_of(
    st.sampled_from(
        [
            np.zeros((0, 2)),
            np.zeros((5, 2)),
            np.full((5, 2), np.nan),
            np.full((5, 2), np.inf),
            np.ones(5),
            np.float64(1.0),
            np.array(["a", "b"]),
            np.zeros((4, 2), np.int32),
            np.zeros((5, 2), np.complex64),
        ]
    ),
    st.integers(1, 30).map(lambda n: np.random.default_rng(n).standard_normal((n, 2))),
)


@given(x=arrays, y_len=st.integers(0, 31), scheme=st.sampled_from(
    ["with_replacement", "epoch", "random_window", "sorted", ""]))
def test_in_memory_data(x, y_len, scheme):
    y = np.zeros(y_len)
    ok, data = named_error(lambda: sg.InMemoryData((x, y), scheme=scheme), "data", "scheme")
    if ok:
        assert data.num_examples == y_len == np.shape(x)[0]


@given(batch_size=ints, chunk=ints)
def test_minibatch_estimator_sizes(batch_size, chunk):
    x = np.random.default_rng(0).standard_normal((20, 2))
    data = (x, np.zeros(20))
    ll = lambda t, b: -0.5 * tf.square(b[1] - tf.einsum("nd,...d->...n", b[0], t))  # noqa: E731
    ok, est = named_error(
        lambda: sg.MinibatchEstimator(ll, data, batch_size, full_data_chunk_size=chunk),
        "batch_size",
        "full_data_chunk_size",
    )
    if ok:
        assert 1 <= batch_size <= 20 and est.batch_size == batch_size


def _non_negative_number(x) -> bool:
    """A real number (or array of them) that is finite and ``>= 0``: what a scale takes."""
    if x is None or isinstance(x, (bool, np.bool_, str, bytes)):
        return False
    try:
        v = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return False
    return v.size > 0 and bool(np.all(np.isfinite(v)) and np.all(v >= 0))


@given(noise=scalars)
def test_noisy_gradient_estimator(noise):
    # Both ways: an accepted scale is a valid one and gives a finite estimate, a refused
    # one is invalid (this fails if the constructor's check is deleted).
    ok, est = named_error(
        lambda: sg.NoisyGradientEstimator(lambda t: -tf.reduce_sum(t**2, -1), noise),
        "noise_scale",
    )
    assert ok == _non_negative_number(noise), (noise, est)
    if ok and np.max(np.asarray(noise, np.float64)) < 1e300:  # (1e308 · N(0, 1) overflows)
        state = tf.constant([0.5, -0.5], tf.float64)
        out, _ = est(state, est.bootstrap(state), tf.constant([1, 2]))
        assert _finite(out.grads_target_log_prob), noise


@given(centre_shape=st.sampled_from([(2,), (3,), (1, 2), ()]),
       fill=st.sampled_from([0.0, float("nan"), float("inf")]))
def test_control_variate_centre(centre_shape, fill):
    centre = tf.fill(centre_shape, tf.constant(fill, tf.float64))
    ok, est = named_error(lambda: sg.ControlVariateEstimator(_shared_est(), centre),
                          "centering_value")
    if ok:  # a centre per chain ([1, 2]) is fine too
        assert centre_shape in ((2,), (1, 2)) and math.isfinite(fill)
        assert np.isfinite(est.centering_log_prob.numpy()).all()


#: Per input of a minibatch model: (good values, bad values).
MODEL_INPUTS = {
    "state_shape": ([(3,), (2, 3)], [(), (2, 4), (4,)]),
    "state_dtype": (["float"], ["other_float", np.int32]),
    "x_shape": ([(20, 3)], [(20,), (20, 3, 1)]),
    "data_dtype": (["float"], [np.int32]),  # (a float of its own is a valid pair)
    "ll_kind": (["per_example"], ["int", "other_float", "none", "sum"]),
    "prior_kind": ([None, "per_chain"], ["scalar", "per_coordinate"]),
}


@given(data=st.data(), float_dtype=st.sampled_from([np.float32, np.float64]),
       faults=st.sets(st.sampled_from(sorted(MODEL_INPUTS)), max_size=2))
@settings(max_examples=30)
def test_minibatch_model_input(data, float_dtype, faults):
    """Bad shapes and dtypes of the state, the data and the model's values (one or two
    at a time, random otherwise) end in a ValueError naming one of them, never in a
    TensorFlow error; exactly the valid combinations bootstrap, to finite values of one
    log-density per chain."""
    other = np.float64 if float_dtype == np.float32 else np.float32

    def pick(name):
        good, bad = MODEL_INPUTS[name]
        v = data.draw(st.sampled_from(bad if name in faults else good), label=name)
        return {"float": float_dtype, "other_float": other}.get(v, v) if isinstance(v, str) \
            and name.endswith("dtype") else v

    state_shape, state_dtype, x_shape, data_dtype, ll_kind, prior_kind = (
        pick(k) for k in MODEL_INPUTS
    )
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_shape).astype(data_dtype)
    y = np.zeros(20, data_dtype)

    def ll(theta, batch):
        xb, yb = batch
        out = -0.5 * tf.square(yb - tf.einsum("nd,...d->...n", xb, theta))
        return {"per_example": out, "int": tf.cast(out, tf.int32),
                "other_float": tf.cast(out, other), "none": None,
                "sum": tf.reduce_sum(out)}[ll_kind]

    prior = {
        None: None,
        "per_chain": lambda t: -0.5 * tf.reduce_sum(t**2, -1),
        "scalar": lambda t: -0.5 * tf.reduce_sum(t**2),
        "per_coordinate": lambda t: -0.5 * t**2,
    }[prior_kind]
    state = tf.constant(np.full(state_shape, 0.3).astype(state_dtype))
    kernel = sg.SGLD(sg.MinibatchEstimator(ll, (x, y), 5, log_prior_fn=prior), 1e-3)
    ok, results = named_error(lambda: kernel.bootstrap_results(state), "init_state", "data",
                              "log_likelihood_fn", "log_prior_fn")
    # A scalar prior is the one value of a single chain: the only "bad" value that fits.
    valid = not faults or faults == {"prior_kind"} and (prior_kind, state_shape) == (
        "scalar", (3,))
    assert ok == valid, (results, faults)
    if ok:
        assert results.target_log_prob.shape == state_shape[:-1]
        assert _finite(results.target_log_prob) and _finite(results.grads_target_log_prob)


seeds = st.one_of(
    st.integers(-3, 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.lists(st.integers(-(2**33), 2**33), max_size=4),
    st.sampled_from([None, True, (1, 2), [1.0, 2.0], np.array([3, 4]), np.array([3, 4], np.int8),
                     tf.constant(3), tf.constant([1, 2]), tf.constant([1, 2], tf.int64),
                     tf.constant([[1, 2]])]),
)


@given(seed=seeds)
@settings(max_examples=25)
def test_sample_chain_seed(seed):
    """A seed is None, an int >= 0 or an int32 pair; anything else is a ValueError naming
    `seed` (it was a raw TensorFlow error), and an accepted seed gives a chain."""
    kernel = sg.SGLD(_shared_est(), 1e-3)
    ok, draws = named_error(
        lambda: sg.sample_chain(2, tf.zeros([2], tf.float64), kernel=kernel, seed=seed), "seed"
    )
    if ok:
        assert draws.shape == [2, 2] and _finite(draws)
        arr = None if seed is None or isinstance(seed, int) else np.asarray(seed)
        if arr is not None:  # a pair of ints within int32
            assert arr.shape == (2,) and np.issubdtype(arr.dtype, np.integer), seed
            assert np.all(np.abs(arr.astype(np.int64)) < 2**31), seed


# --------------------------------------------------------------------------- #
# Schedules.
# --------------------------------------------------------------------------- #
@given(a=scalars, b=scalars, gamma=scalars)
def test_polynomial_decay(a, b, gamma):
    ok, sched = named_error(lambda: sg.PolynomialDecay(a, b=b, gamma=gamma), "a", "b", "gamma",
                            "step_size")
    if ok:
        v = sched(tf.constant(3), tf.float64).numpy()
        assert np.isfinite(v) and v >= 0, (a, b, gamma, v)


@given(value=scalars)
def test_constant_step_size(value):
    ok, sched = named_error(lambda: sg.ConstantStepSize(value), "step_size")
    if ok:
        assert np.isfinite(sched(tf.constant(0), tf.float64).numpy())


# --------------------------------------------------------------------------- #
# Diagnostics.
# --------------------------------------------------------------------------- #
samples_st = st.one_of(
    st.sampled_from(
        [
            np.zeros((0, 2)),
            np.zeros((1, 2)),
            np.zeros(5),
            np.full((6, 2), np.nan),
            np.full((6, 2), np.inf),
            np.float64(3.0),
            np.full((6, 2), 1e300),
            np.zeros((6, 2)),
        ]
    ),
    st.integers(2, 40).map(lambda n: np.random.default_rng(n).standard_normal((n, 2))),
)


@given(samples=samples_st, score_shift=st.sampled_from([0, 1, -1]))
def test_ksd(samples, score_shift):
    scores = -np.asarray(samples)
    if score_shift and np.ndim(scores) == 2:
        scores = scores[: max(scores.shape[0] + score_shift, 0)]
    ok, value = named_error(lambda: dg.kernel_stein_discrepancy(samples, scores),
                            "samples", "scores")
    if ok:
        assert np.isfinite(value.numpy()) and value.numpy() >= -1e-12


@given(samples=samples_st, num_loc=st.integers(0, 3))
def test_fssd(samples, num_loc):
    locations = np.zeros((num_loc, 2))
    ok, value = named_error(lambda: dg.fssd(samples, -np.asarray(samples), locations),
                            "samples", "scores", "locations")
    if ok:
        assert np.isfinite(value.numpy())


@given(samples=samples_st, c=scalars)
def test_iac_and_ess(samples, c):
    ok, out = named_error(lambda: dg.integrated_autocorrelation_time(samples, c=c), "samples", "c")
    if ok:  # NaN only for a constant coordinate (documented)
        tau = out.per_parameter.numpy()
        constant = np.ptp(np.asarray(samples), axis=0) == 0
        assert np.all(np.isnan(tau[constant])) and np.all(tau[~constant] > 0)
    ok, ess = named_error(lambda: dg.effective_sample_size(samples), "samples")
    if ok:
        constant = np.ptp(np.asarray(samples), axis=0) == 0
        assert np.all(np.isnan(ess.numpy()[constant])) and np.all(ess.numpy()[~constant] > 0)


@given(samples=samples_st, ref=scalars)
def test_relative_std_error(samples, ref):
    ok, out = named_error(lambda: dg.relative_std_error(samples, ref), "samples_or_std",
                          "reference_std", "samples")
    if ok:
        assert np.all(np.isfinite(out.numpy()))


@given(
    n=st.integers(0, 6),
    k=st.integers(0, 3),
    fill=st.sampled_from([0.5, float("nan"), -0.1, 2.0]),
    num_bins=ints,
)
def test_calibration(n, k, fill, num_bins):
    probs = np.full((n, k), fill)
    labels = np.zeros(n, np.int64)
    ok, out = named_error(
        lambda: dg.expected_calibration_error(probs, labels, num_bins=num_bins),
        "probs", "labels", "num_bins",
    )
    if ok:
        assert np.isfinite(out) and 0.0 <= out <= 1.0


# --------------------------------------------------------------------------- #
# Tuning: arms and budgets.
# --------------------------------------------------------------------------- #
@given(num_arms=ints, eta=ints)
def test_budget_rounds(num_arms, eta):
    ok, k = named_error(lambda: tu.budget.num_rounds(num_arms, eta), "num_arms", "eta")
    if ok:
        assert k >= 0 and eta ** k <= max(num_arms, 1)


@given(seconds=scalars)
def test_budget(seconds):
    ok, b = named_error(lambda: tu.Budget(seconds), "seconds", "budget", "amount", "value")
    if ok:
        assert np.isfinite(float(b.amount)) and float(b.amount) > 0


# --------------------------------------------------------------------------- #
# The driver: bad arguments never leave a run directory behind.
# --------------------------------------------------------------------------- #
@given(
    num_samples=ints,
    thin=ints,
    burn=ints,
    chunk=ints,
)
@settings(max_examples=15)
def test_sample_bad_arguments_leave_no_run_directory(tmp_path_factory, num_samples, thin, burn,
                                                      chunk):
    run_dir = str(tmp_path_factory.mktemp("fuzz") / "run")
    kernel = sg.SGLD(_shared_est(), 1e-3)
    ok, _ = named_error(
        lambda: sg.sample(kernel, tf.zeros([2], tf.float64), num_samples, run_dir, thin=thin,
                          num_burnin_steps=burn, chunk_size=chunk, progress=False,
                          jit_compile=False) if _small(num_samples, thin, burn, chunk)
        else _validate_only(num_samples, thin, burn, chunk),
        "num_samples", "thin", "num_burnin_steps", "chunk_size",
    )
    if not ok:
        assert not os.path.exists(run_dir), "a rejected call created the run directory"


def _small(*vals) -> bool:
    """Valid and cheap enough to run (else only the validation is exercised)."""
    return all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals) and (
        vals[0] * vals[1] + vals[2] <= 60
    )


def _validate_only(num_samples, thin, burn, chunk):
    from tfp_sgmcmc.internal.util import check_int

    check_int(num_samples, "num_samples", 1)
    check_int(thin, "thin", 1)
    check_int(burn, "num_burnin_steps", 0)
    check_int(chunk, "chunk_size", 1)
