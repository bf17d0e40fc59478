"""Contract tests run over every kernel (TFP ``TransitionKernel`` behaviour).

Parameterised over ``KERNEL_SPECS``: SGLD, SGLD-CV, pSGLD, SGHMC (L ∈ {1, 3} ×
{chen, explicit} × momentum refresh on/off) and SGNHT.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from ._models import KERNEL_SPECS, KernelSpec, LinearGaussianModel

specs = pytest.mark.parametrize("spec", KERNEL_SPECS, ids=str)
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


@specs
@parts_param
def test_results_structure_dtype_and_shapes_are_stable(spec: KernelSpec, parts, float_dtype, seed):
    model = LinearGaussianModel(dtype=float_dtype, parts=parts)
    kernel = spec(model.estimator(spec.estimator_kind))
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
    assert len(r2.grads_target_log_prob) == len(_leaves(s2))
    for g, p in zip(r2.grads_target_log_prob, _leaves(s2)):
        assert g.shape == p.shape and g.dtype == float_dtype
    assert int(r2.step) == 2 and r2.diverged.dtype == tf.bool


@specs
@parts_param
def test_many_chains_through_a_leading_batch_dimension(spec: KernelSpec, parts, seed):
    model = LinearGaussianModel(dtype=tf.float64, parts=parts)
    kernel = spec(model.estimator(spec.estimator_kind))
    state0 = model.init_state(chains=[4])
    r0 = kernel.bootstrap_results(state0)
    (s1,), r1 = _steps(kernel, state0, r0, _seeds(seed, 1))
    for r in (r0, r1):
        assert r.target_log_prob.shape == [4]
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
    kernel = spec(model.estimator(spec.estimator_kind))
    params = dict(kernel.parameters)
    # `parameters` holds exactly the constructor arguments.
    ctor = set(inspect.signature(type(kernel).__init__).parameters) - {"self"}
    assert set(params) == ctor
    same = kernel.copy()
    assert type(same) is type(kernel)
    assert same.parameters.keys() == params.keys()
    assert all(same.parameters[k] is params[k] or same.parameters[k] == params[k] for k in params)
    changed = kernel.copy(step_size=0.5)
    assert changed.parameters["step_size"] == 0.5
    for k in params:
        if k != "step_size":
            assert changed.parameters[k] is params[k] or changed.parameters[k] == params[k]
    assert kernel.parameters["step_size"] == params["step_size"]  # original untouched
    np.testing.assert_allclose(changed.step_size_schedule(tf.constant(0), tf.float64), 0.5)


@specs
def test_is_not_calibrated(spec: KernelSpec):
    kernel = spec(LinearGaussianModel().estimator(spec.estimator_kind))
    assert kernel.is_calibrated is False


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
    est = model.estimator(spec.estimator_kind)
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
    kernel = spec(model.estimator(spec.estimator_kind))
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
    est = model.estimator(spec.estimator_kind)
    state0 = model.init_state(chains=[2])
    python_traces = [0]

    @tf.function
    def run(step_size):
        python_traces[0] += 1
        kernel = spec(est, step_size)
        r = kernel.bootstrap_results(state0)
        s, r = kernel.one_step(state0, r, seed=tf.constant([5, 6]))
        return s, r.step_size

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
    kernel = spec(model.estimator(spec.estimator_kind))
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
# one configuration per code path: plain, control-variate, preconditioned,
# SGHMC with kept momentum (tf.cond) and L = 3, SGHMC explicit with refresh, SGNHT.
XLA_LOOP_SPECS = [
    s for s in KERNEL_SPECS
    if s.name in ("sgld", "sgld-cv", "psgld", "sghmc-L3-chen-keep", "sghmc-L1-explicit-refresh",
                  "sgnht")
]


@pytest.mark.parametrize("spec", XLA_LOOP_SPECS, ids=str)
def test_runs_in_sample_chain_and_sample_fold_under_xla(spec: KernelSpec, seed):
    model = LinearGaussianModel(dtype=tf.float32, parts=True)
    kernel = spec(model.estimator(spec.estimator_kind))
    state0 = model.init_state(chains=[2])

    @tf.function(jit_compile=True)
    def run(sd):
        chain = tfp.mcmc.sample_chain(
            4, state0, kernel=kernel, num_burnin_steps=2,
            trace_fn=lambda _, r: (r.target_log_prob, r.diverged, r.step), seed=sd,
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
    diffusion), so it stays finite and must never be flagged.

    SGHMC with L = 1 and momentum refresh moves by the fresh momentum alone
    (``θ' = θ + v₀``: the kick is discarded with the momentum), so its chain
    can only overflow through the ``√η`` random walk: it gets a larger step.
    SGNHT's thermostat fluctuates on the scale of ``h`` even on a flat target,
    so a huge ``h`` would destabilise chain 0 too: it gets ``h = 0.05``, already
    ``h·λ_max ≈ 16`` on chain 1's stiff target.
    """
    model = LinearGaussianModel(dtype=tf.float32, zero_targets=True, precision_scale=10.0)
    chain_weight = tf.constant([0.0, 1.0], tf.float32)

    def log_likelihood(state, batch):
        xb, yb = batch
        resid = chain_weight[:, tf.newaxis] * (yb - tf.einsum("nd,...d->...n", xb, state))
        return -0.5 * tf.square(resid)

    model.log_likelihood = log_likelihood
    model.log_prior = lambda s: tf.zeros([], tf.float32)
    est = model.estimator(spec.estimator_kind, centre=0.0)
    state0 = tf.constant([[0.0, 0.0, 0.0], [1.0, -1.0, 1.0]], tf.float32)
    random_walk_only = spec.name.startswith("sghmc-L1-") and spec.name.endswith("-refresh")

    def run(kernel, num_steps):
        return tfp.mcmc.sample_chain(
            num_steps, state0, kernel=kernel, trace_fn=lambda _, r: r.diverged, seed=[1, 2]
        )

    # BADODAB's thermostat, like SGNHT's, moves by (h/2)(pᵀp − D T) even on a flat
    # target: h = 2 is already h²λ_max ≈ 1e3 ≫ 4 (unstable) on chain 1's target.
    huge = (1e38 if random_walk_only else 0.05 if spec.name == "sgnht"
            else 2.0 if spec.name == "badodab" else 1e18)
    states, flags = run(spec(est, huge), 30)
    flags = flags.numpy()
    assert not flags[:, 0].any()
    assert np.all(np.isfinite(states.numpy()[:, 0]))
    assert flags[-1, 1]
    first = int(np.argmax(flags[:, 1]))
    assert flags[first:, 1].all()  # once diverged, stays diverged

    states, flags = run(spec(est, 1e-3), 10)
    assert not flags.numpy().any()
    assert np.all(np.isfinite(states.numpy()))
