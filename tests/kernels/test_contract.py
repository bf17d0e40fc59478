"""Contract tests run over every kernel (TFP ``TransitionKernel`` behaviour).

Parameterised over ``KERNEL_SPECS`` (``tests/kernels/_models.py``): every kernel
exported from :mod:`tfp_sgmcmc.kernels`, i.e. SGLD, SGLD-CV, pSGLD, SGHMC (L ∈ {1, 3}
× {chen, explicit} × momentum refresh on/off), SGNHT, the adaptive-drift family and
the ``StochasticApproximation`` wrapper. A new sampler adds one line there.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

from ._models import KERNEL_SPECS, KernelSpec, LinearGaussianModel, core_results

#: The SGHMC configurations (L in {1, 3} x {chen, explicit} x momentum refresh on/off) share
#: one kernel; CI runs two of them (L1-explicit-refresh and L3-chen-keep: both integrators,
#: both refresh rules, one and several leapfrog steps) and the slow tier all eight. ASGLD's
#: second placement of its factor (``asgld-inside``) runs in the slow tier too; the
#: ``asgld`` spec keeps the kernel in CI.
SGHMC_KEPT_IN_CI = ("sghmc-L1-explicit-refresh", "sghmc-L3-chen-keep")
SLOW_SPECS = frozenset(
    str(s) for s in KERNEL_SPECS
    if str(s).startswith("sghmc-L") and str(s) not in SGHMC_KEPT_IN_CI
) | {"asgld-inside"}
specs = pytest.mark.parametrize(
    "spec",
    [pytest.param(s, marks=pytest.mark.slow) if str(s) in SLOW_SPECS else s for s in KERNEL_SPECS],
    ids=str,
)
parts_param = pytest.mark.parametrize("parts", [False, True], ids=["tensor", "parts"])


def _leaves(x):
    return tf.nest.flatten(x)


def _steps(kernel, state, results, seeds):
    states = []
    for s in seeds:
        state, results = kernel.one_step(state, results, seed=s)
        states.append(state)
    return states, results


def _seeds(seed: int, n: int) -> list[tf.Tensor]:
    return list(tfp.random.split_seed([seed, 1], n=n, salt="test_contract"))


def _kernel(spec: KernelSpec, model: LinearGaussianModel, chains=None, step_size=1e-3, **kw):
    """The spec's kernel on ``model`` (the SSGL estimator needs the chain rank)."""
    est = model.estimator(spec.estimator_kind, batch_ndims=len(chains or []), **kw)
    return spec(est, step_size)


def test_every_exported_kernel_is_listed():
    """Adding a kernel to ``tfp_sgmcmc.kernels`` without a ``KERNEL_SPECS`` line fails here."""
    exported = {
        obj
        for name in sg.kernels.__all__
        if inspect.isclass(obj := getattr(sg.kernels, name))
        and issubclass(obj, tfp.mcmc.TransitionKernel)
        and obj is not sg.kernels.SGMCMCKernel
        # The change-of-variables wrapper holds another kernel; its own tests are in
        # tests/kernels/test_tfp_wrappers.py and tests/estimators/test_transformed.py.
        and not issubclass(obj, tfp.mcmc.TransformedTransitionKernel)
    }
    model = LinearGaussianModel()
    covered = {
        type(_kernel(s, model)) for s in KERNEL_SPECS
    } | {type(_kernel(s, model).inner_kernel) for s in KERNEL_SPECS if s.estimator_kind == "ssgl"}
    assert exported - covered == set(), f"kernels without a contract spec: {exported - covered}"


def assert_moves(states: list) -> None:
    """Every part of every chain changes at every step (a frozen sampler fails)."""
    for prev, new in zip(states[:-1], states[1:]):
        for a, b in zip(_leaves(prev), _leaves(new)):
            a, b = np.asarray(a), np.asarray(b)
            assert np.all(np.isfinite(b))
            moved = np.abs(b - a).reshape(b.shape[0], -1).max(-1) if b.ndim else np.abs(b - a)
            assert np.all(moved > 0), "a chain did not move in one step"


@specs
@parts_param
def test_chain_moves_every_step(spec: KernelSpec, parts, seed):
    """The does-it-move check: five steps from a non-trivial state, every part changes."""
    model = LinearGaussianModel(dtype=tf.float64, parts=parts)
    kernel = _kernel(spec, model, chains=[3], step_size=1e-2)
    state = model.init_state(chains=[3], value=0.2)
    r = kernel.bootstrap_results(state)
    states = [state]
    for s in _seeds(seed, 5):
        state, r = kernel.one_step(state, r, seed=s)
        states.append(state)
    assert_moves(states)


def test_the_moves_check_has_power():
    """A kernel that returns its input (or moves only one chain) fails ``assert_moves``."""
    frozen = [np.ones((3, 2))] * 3
    with pytest.raises(AssertionError):
        assert_moves(frozen)
    one_stuck = [np.ones((3, 2)), np.ones((3, 2)) + np.array([[1.0], [1.0], [0.0]])]
    with pytest.raises(AssertionError):
        assert_moves(one_stuck)
    assert_moves([np.ones((3, 2)), np.full((3, 2), 2.0)])


@specs
@parts_param
def test_results_structure_dtype_and_shapes_are_stable(spec: KernelSpec, parts, float_dtype, seed):
    model = LinearGaussianModel(dtype=float_dtype, parts=parts)
    kernel = _kernel(spec, model)
    state0 = model.init_state(value=0.2)
    r0 = kernel.bootstrap_results(state0)
    (s1, s2), r2 = _steps(kernel, state0, r0, _seeds(seed, 2))
    _, r1 = kernel.one_step(state0, r0, seed=_seeds(seed, 1)[0])
    for r in (r1, r2):
        tf.nest.assert_same_structure(r0, r)
        for a, b in zip(_leaves(r0), _leaves(r)):
            assert a.dtype == b.dtype
            assert a.shape == b.shape
    for leaf in _leaves(r2):
        if leaf.dtype.is_floating:
            assert leaf.dtype == float_dtype
    # The state keeps its structure, dtype and static shape.
    tf.nest.assert_same_structure(state0, s2)
    for a, b in zip(_leaves(state0), _leaves(s2)):
        assert b.dtype == float_dtype and a.shape == b.shape
    # The score in the results is one gradient per state part, shaped like it.
    grads = core_results(r2).grads_target_log_prob
    assert len(grads) == len(_leaves(s2))
    for g, p in zip(grads, _leaves(s2)):
        assert g.shape == p.shape and g.dtype == float_dtype
    assert int(r2.step) == 2 and r2.diverged.dtype == tf.bool


@specs
@parts_param
def test_many_chains_through_a_leading_batch_dimension(spec: KernelSpec, parts, seed):
    model = LinearGaussianModel(dtype=tf.float64, parts=parts)
    kernel = _kernel(spec, model, chains=[4])
    state0 = model.init_state(chains=[4])
    r0 = kernel.bootstrap_results(state0)
    (s1,), r1 = _steps(kernel, state0, r0, _seeds(seed, 1))
    for r in (r0, r1):
        assert core_results(r).target_log_prob.shape == [4]
        assert r.diverged.shape == [4]
        if hasattr(r, "thermostat"):
            assert all(a.shape == [4] for a in r.thermostat)
    for a, b in zip(_leaves(state0), _leaves(s1)):
        assert a.shape == b.shape and a.shape[0] == 4
    # Each chain draws its own noise: identical starts must separate.
    w = _leaves(s1)[0].numpy()
    assert not np.allclose(w[0], w[1])
    assert not np.any(r1.diverged.numpy())


@specs
def test_copy_and_parameters_round_trip(spec: KernelSpec):
    model = LinearGaussianModel()
    kernel = _kernel(spec, model)
    params = dict(kernel.parameters)
    # `parameters` holds exactly the constructor arguments.
    ctor = set(inspect.signature(type(kernel).__init__).parameters) - {"self"}
    assert set(params) == ctor
    same = kernel.copy()
    assert type(same) is type(kernel)
    assert same.parameters.keys() == params.keys()
    assert all(same.parameters[k] is params[k] or same.parameters[k] == params[k] for k in params)
    arg, value = spec.copy_change
    changed = kernel.copy(**{arg: value})
    assert type(changed) is type(kernel) and changed.parameters[arg] == value
    for k in params:
        if k != arg:
            assert changed.parameters[k] is params[k] or changed.parameters[k] == params[k]
    assert kernel.parameters[arg] == params[arg]  # original untouched
    if arg == "step_size":
        np.testing.assert_allclose(changed.step_size_schedule(tf.constant(0), tf.float64), value)
    # The change reaches the update (adaptive drifts rebuild their transform from the
    # arguments; their bias is lagged, so it shows from the second step on).
    state = model.init_state(value=0.2)
    a, _ = _steps(kernel, state, kernel.bootstrap_results(state), _seeds(3, 3))
    b, _ = _steps(changed, state, changed.bootstrap_results(state), _seeds(3, 3))
    # Same seeds, same program: any difference at all shows the argument is used (a small
    # change of a decay rate can move three steps by less than allclose's rtol).
    assert not np.array_equal(np.concatenate(_leaves(a[-1])), np.concatenate(_leaves(b[-1])))


@specs
def test_is_not_calibrated(spec: KernelSpec):
    kernel = _kernel(spec, LinearGaussianModel())
    assert kernel.is_calibrated is False


@specs
@pytest.mark.parametrize("step_size", [0.0, -1e-3, float("nan"), np.inf])
def test_bad_step_size_names_the_argument(spec: KernelSpec, step_size):
    with pytest.raises(ValueError, match="`(step_size|learning_rate)`"):
        _kernel(spec, LinearGaussianModel(), step_size=step_size)


@specs
def test_state_dtype_must_match_the_data(spec: KernelSpec):
    kernel = _kernel(spec, LinearGaussianModel(dtype=tf.float64))  # data are float64
    with pytest.raises(ValueError, match="`init_state`"):
        kernel.bootstrap_results(tf.zeros(3, tf.float32))
    with pytest.raises(ValueError, match="`init_state`"):
        kernel.bootstrap_results(tf.zeros(3, tf.int32))


@specs
def test_negative_temperature_names_the_argument(spec: KernelSpec):
    est = LinearGaussianModel().estimator(spec.estimator_kind)
    with pytest.raises(ValueError, match="`temperature`"):
        spec(est, 1e-3, temperature=-1.0)


@specs
def test_exactly_one_estimator_call_per_step(spec: KernelSpec):
    """Counted at trace time: ``L`` calls per step for SGHMC, one otherwise,
    and the model's likelihood is evaluated only at the new state(s)."""
    model = LinearGaussianModel()
    lik_calls = [0]
    original = model.log_likelihood

    def counted(state, batch):
        # Minibatch evaluations only: SVRG's full pass (anchor refresh) is not one.
        if batch[0].shape[0] == model.batch_size:
            lik_calls[0] += 1
        return original(state, batch)

    model.log_likelihood = counted
    est = model.estimator(spec.estimator_kind, batch_ndims=1)
    kernel = spec(est)
    assert kernel.gradient_evaluations_per_step == spec.calls_per_step
    state = model.init_state(chains=[2])
    calls0, lik0 = est.num_calls, lik_calls[0]
    r0 = kernel.bootstrap_results(state)
    assert est.num_calls - calls0 == 1
    per_call = lik_calls[0] - lik0  # 1 for a plain minibatch, 2 for control variates
    assert per_call == est.gradient_evaluations_per_call

    step = tf.function(lambda s, r, sd: kernel.one_step(s, r, seed=sd))
    calls0, lik0 = est.num_calls, lik_calls[0]
    step.get_concrete_function(state, r0, tf.constant([1, 2]))
    assert est.num_calls - calls0 == spec.calls_per_step
    assert lik_calls[0] - lik0 == spec.calls_per_step * per_call
    # Eagerly too (no hidden extra evaluation outside tracing).
    calls0 = est.num_calls
    kernel.one_step(state, r0, seed=[3, 4])
    assert est.num_calls - calls0 == spec.calls_per_step


@specs
def test_same_seed_same_chain_different_seed_different_chain(spec: KernelSpec, seed):
    model = LinearGaussianModel(dtype=tf.float32)
    kernel = _kernel(spec, model, chains=[2])
    state0 = model.init_state(chains=[2])
    r0 = kernel.bootstrap_results(state0)
    a, _ = _steps(kernel, state0, r0, _seeds(seed, 3))
    b, _ = _steps(kernel, state0, r0, _seeds(seed, 3))
    c, _ = _steps(kernel, state0, r0, _seeds(seed + 1, 3))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert not np.allclose(a[-1].numpy(), c[-1].numpy())


@specs
def test_tensor_step_size_does_not_retrace(spec: KernelSpec):
    model = LinearGaussianModel(dtype=tf.float64)
    est = model.estimator(spec.estimator_kind, batch_ndims=1)
    state0 = model.init_state(chains=[2])
    python_traces = [0]

    @tf.function
    def run(step_size):
        python_traces[0] += 1
        kernel = spec(est, step_size)
        r = kernel.bootstrap_results(state0)
        s, r = kernel.one_step(state0, r, seed=tf.constant([5, 6]))
        return s, core_results(r).step_size

    s1, e1 = run(tf.constant(1e-3, tf.float64))
    s2, e2 = run(tf.constant(3e-3, tf.float64))
    assert python_traces[0] == 1
    assert run.experimental_get_tracing_count() == 1
    assert float(e1) == pytest.approx(1e-3) and float(e2) == pytest.approx(3e-3)
    assert not np.allclose(s1.numpy(), s2.numpy())  # the new value is actually used


@specs
def test_sample_chain_thinning_identity(spec: KernelSpec, seed):
    """n results thinned by 1 are results 0, 2, 4, ... of 2n unthinned results
    (the first result follows one step, every later one two)."""
    model = LinearGaussianModel(dtype=tf.float64)
    kernel = _kernel(spec, model, chains=[2])
    state0 = model.init_state(chains=[2])
    n = 3
    full = tfp.mcmc.sample_chain(
        2 * n, state0, kernel=kernel, num_steps_between_results=0, trace_fn=None, seed=[seed, 9]
    )
    thin = tfp.mcmc.sample_chain(
        n, state0, kernel=kernel, num_steps_between_results=1, trace_fn=None, seed=[seed, 9]
    )
    np.testing.assert_array_equal(full.numpy()[0::2], thin.numpy())
    assert not np.allclose(full.numpy()[0], full.numpy()[1])


# sample_chain/sample_fold under XLA cost 2-5 s of compilation each, so they run on
# one configuration per code path (the specs flagged ``xla_loop``): plain,
# control-variate, preconditioned, SGHMC with kept momentum (tf.cond) and L = 3,
# SGHMC explicit with refresh, SGNHT, a momentum and a preconditioned adaptive
# drift, and the SA wrapper.
XLA_LOOP_SPECS = [s for s in KERNEL_SPECS if s.xla_loop]


@pytest.mark.parametrize("spec", XLA_LOOP_SPECS, ids=str)
def test_runs_in_sample_chain_and_sample_fold_under_xla(spec: KernelSpec, seed):
    model = LinearGaussianModel(dtype=tf.float32, parts=True)
    kernel = _kernel(spec, model, chains=[2])
    state0 = model.init_state(chains=[2])

    @tf.function(jit_compile=True)
    def run(sd):
        chain = tfp.mcmc.sample_chain(
            4, state0, kernel=kernel, num_burnin_steps=2,
            trace_fn=lambda _, r: (core_results(r).target_log_prob, r.diverged, r.step),
            seed=sd,
        )
        fold_mean, end_state, end_results = tfp.experimental.mcmc.sample_fold(
            6, state0, kernel=kernel, reducer=tfp.experimental.mcmc.ExpectationsReducer(),
            seed=sd,
        )
        return chain, fold_mean, end_state, end_results.step

    (states, (tlp, diverged, step)), fold_mean, end_state, end_step = run(tf.constant([seed, 3]))
    assert [s.shape for s in states] == [[4, 2, 3], [4, 2]]
    assert tlp.shape == [4, 2] and diverged.shape == [4, 2]
    np.testing.assert_array_equal(step.numpy(), [3, 4, 5, 6])
    assert not diverged.numpy().any()
    assert np.all(np.isfinite(tlp.numpy()))
    assert [m.shape for m in fold_mean] == [[2, 3], [2]]
    assert all(np.all(np.isfinite(m.numpy())) for m in fold_mean)
    assert int(end_step) == 6
    assert [s.dtype for s in end_state] == [tf.float32, tf.float32]


@specs
def test_diverged_flags_non_finite_chains_only(spec: KernelSpec):
    """A huge step on a stiff target blows chain 1 up. Chain 0's likelihood is
    switched off (its residuals carry a per-chain weight 0: a flat target, pure
    diffusion), so it stays finite and must never be flagged. Kernels that bring
    their own prior (SSGL under the SA wrapper) have no flat chain: there chain 0
    only has to blow up no earlier than chain 1, and a small step flags nothing.
    ``spec.huge_step`` is the step that overflows the stiff chain (see
    ``_models.py`` for the SGHMC and SGNHT exceptions).
    """
    model = LinearGaussianModel(dtype=tf.float32, zero_targets=True, precision_scale=10.0)
    chain_weight = tf.constant([0.0, 1.0], tf.float32)

    def log_likelihood(state, batch):
        xb, yb = batch
        resid = chain_weight[:, tf.newaxis] * (yb - tf.einsum("nd,...d->...n", xb, state))
        return -0.5 * tf.square(resid)

    model.log_likelihood = log_likelihood
    model.log_prior = lambda s: tf.zeros([], tf.float32)
    est = model.estimator(spec.estimator_kind, centre=0.0, batch_ndims=1)
    state0 = tf.constant([[0.0, 0.0, 0.0], [1.0, -1.0, 1.0]], tf.float32)

    def run(kernel, num_steps):
        return tfp.mcmc.sample_chain(
            num_steps, state0, kernel=kernel, trace_fn=lambda _, r: r.diverged, seed=[1, 2]
        )

    states, flags = run(spec(est, spec.huge_step), 30)
    flags = flags.numpy()
    if spec.flat_chain:
        assert not flags[:, 0].any()
        assert np.all(np.isfinite(states.numpy()[:, 0]))
    else:
        assert np.argmax(flags[:, 0]) >= np.argmax(flags[:, 1]) or not flags[:, 0].any()
    assert flags[-1, 1]
    first = int(np.argmax(flags[:, 1]))
    assert flags[first:, 1].all()  # once diverged, stays diverged

    states, flags = run(spec(est, 1e-3), 10)
    assert not flags.numpy().any()
    assert np.all(np.isfinite(states.numpy()))
