"""``tfp_sgmcmc.sample_chain``: one flat loop; with ``seed_rule="tfp"`` the chain of
``tfp.mcmc.sample_chain``.

With the compatibility rule, under XLA the states, traces and final kernel results must be
equal bit for bit to ``tfp.mcmc.sample_chain``'s for every combination of burn-in,
thinning, tracing and returned results, for our kernels and for TFP's own; hand-stepped
references pin which steps are results and which seed each step takes under either rule
(so a loop off by one step fails even if TFP changed).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.driver.flat import sample_chain


def _estimator(seed: int, dim: int = 3) -> sg.MinibatchEstimator:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(240, dim)).astype(np.float32)
    y = (rng.uniform(size=240) < 0.5).astype(np.float32)

    def log_likelihood(theta, batch):
        xb, yb = batch
        logits = tf.einsum("nd,...d->...n", xb, theta)
        return -tf.nn.sigmoid_cross_entropy_with_logits(
            labels=tf.broadcast_to(yb, tf.shape(logits)), logits=logits
        )

    return sg.MinibatchEstimator(
        log_likelihood,
        sg.InMemoryData((x, y)),
        24,
        lambda t: -0.5 * tf.reduce_sum(t**2, -1),
    )


def _kernels(seed: int) -> dict[str, tfp.mcmc.TransitionKernel]:
    est = _estimator(seed)
    return {
        "sgld": sg.SGLD(est, 1e-3),
        "sghmc": sg.SGHMC(est, 1e-4, num_leapfrog_steps=3),
        "tfp_hmc": tfp.mcmc.HamiltonianMonteCarlo(
            lambda t: -0.5 * tf.reduce_sum(t**2, -1), 0.3, 2
        ),
    }


def _log_prob(state, results):
    inner = getattr(results, "accepted_results", results)
    return {"lp": inner.target_log_prob, "twice": 2.0 * state}


_CASES = [
    dict(),
    dict(num_burnin_steps=3),
    dict(num_steps_between_results=2),
    dict(num_burnin_steps=2, num_steps_between_results=1, trace_fn=_log_prob),
    dict(return_final_kernel_results=True, trace_fn=_log_prob),
    dict(num_steps_between_results=3, return_final_kernel_results=True),
]


def _equal(a, b) -> bool:
    fa, fb = tf.nest.flatten(a), tf.nest.flatten(b)
    return len(fa) == len(fb) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(fa, fb)
    )


# Every case for SGLD and TFP's HMC; SGHMC (slow to compile) on the two loops' shapes.
@pytest.mark.parametrize(
    "name, case",
    [("sgld", c) for c in range(len(_CASES))]
    + [("tfp_hmc", c) for c in range(len(_CASES))]
    + [("sghmc", 0), ("sghmc", 3)],
)
def test_same_chain_as_tfp_sample_chain_under_xla(seed, name, case):
    kernel = _kernels(seed)[name]
    kw = _CASES[case]
    init = tf.fill([2, 3], 0.1)  # two chains

    @tf.function(jit_compile=True)
    def ours(seed):
        return sample_chain(5, init, kernel=kernel, seed=seed, seed_rule="tfp", **kw)

    @tf.function(jit_compile=True)
    def theirs(seed):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "not calibrated"
            return tfp.mcmc.sample_chain(
                5, init, kernel=kernel, seed=seed, **({"trace_fn": None} | kw)
            )

    seed = tf.constant([seed, 5], tf.int32)
    a, b = ours(seed), theirs(seed)
    assert type(a) is type(b)
    assert _equal(a, b)
    states = a if tf.is_tensor(a) else a.all_states
    assert states.shape == [5, 2, 3]
    # Power: another seed gives another chain (the seed reaches the kernel).
    assert not _equal(ours(seed + 1), b)


def test_graph_mode_agrees_to_rounding(seed):
    kernel = _kernels(seed)["sghmc"]
    init = tf.zeros([3])
    seed = tf.constant([1, seed], tf.int32)
    kw = dict(num_burnin_steps=2, num_steps_between_results=1)
    a = tf.function(
        lambda s: sample_chain(6, init, kernel=kernel, seed=s, seed_rule="tfp", **kw)
    )(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = tf.function(
            lambda s: tfp.mcmc.sample_chain(6, init, kernel=kernel, seed=s, trace_fn=None, **kw)
        )(seed)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert float(tf.reduce_max(tf.abs(a[1:] - a[:-1]))) > 1e-4  # the chain moves


def test_results_are_the_states_after_the_stated_steps(seed):
    """Result r is the state after 1 + burn-in + r·(1 + between) steps, each step taking
    the first half of a split of the running seed."""
    kernel = _kernels(seed)["sgld"]
    burnin, between, num_results = 3, 2, 4
    seed = tf.constant([seed, 9], tf.int32)
    got = sample_chain(
        num_results, tf.zeros([3]), kernel=kernel, seed=seed,
        num_burnin_steps=burnin, num_steps_between_results=between, seed_rule="tfp",
    )
    s = tfp.random.sanitize_seed(seed, salt="mcmc.sample_chain")
    state, results = tf.zeros([3]), kernel.bootstrap_results(tf.zeros([3]))
    visited = []
    for _ in range(1 + burnin + (num_results - 1) * (1 + between)):
        step_seed, s = tfp.random.split_seed(s)
        state, results = kernel.one_step(state, results, seed=step_seed)
        visited.append(state.numpy())
    want = [visited[burnin + r * (1 + between)] for r in range(num_results)]
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-6, atol=1e-7)
    # Power: the steps just before are other states.
    shifted = [visited[burnin + r * (1 + between) - 1] for r in range(num_results)]
    assert not np.allclose(got, np.stack(shifted), rtol=1e-6, atol=1e-7)


def test_the_default_rule_folds_the_step_index_into_the_seed(seed):
    """By default step t (burn-in included) takes stateless_fold_in(seed, t) (Philox)."""
    kernel = _kernels(seed)["sgld"]
    burnin, between, num_results = 3, 2, 4
    run_seed = tf.constant([seed, 9], tf.int32)
    got = sample_chain(
        num_results, tf.zeros([3]), kernel=kernel, seed=run_seed,
        num_burnin_steps=burnin, num_steps_between_results=between,
    )
    state, results = tf.zeros([3]), kernel.bootstrap_results(tf.zeros([3]))
    visited = []
    for t in range(1 + burnin + (num_results - 1) * (1 + between)):
        step_seed = tf.random.experimental.stateless_fold_in(run_seed, t, alg="philox")
        state, results = kernel.one_step(state, results, seed=step_seed)
        visited.append(state.numpy())
    want = [visited[burnin + r * (1 + between)] for r in range(num_results)]
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-6, atol=1e-7)
    # Power: the compatibility rule is another chain.
    tfp_rule = sample_chain(
        num_results, tf.zeros([3]), kernel=kernel, seed=run_seed,
        num_burnin_steps=burnin, num_steps_between_results=between, seed_rule="tfp",
    )
    assert not np.allclose(got, tfp_rule, rtol=1e-6, atol=1e-7)


def test_list_state_previous_results_and_a_runtime_num_results(seed):
    target = tfp.distributions.JointDistributionSequential(
        [tfp.distributions.Normal(0.0, 1.0), tfp.distributions.Normal(1.0, 2.0)]
    )
    kernel = tfp.mcmc.HamiltonianMonteCarlo(lambda a, b: target.log_prob([a, b]), 0.4, 3)
    init = [tf.constant(0.5), tf.constant(-0.5)]
    pkr = kernel.bootstrap_results(init)

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
    def run(n):
        return sample_chain(
            n, init, previous_kernel_results=pkr, kernel=kernel, seed=[seed, 2],
            return_final_kernel_results=True,
        )

    out = run(tf.constant(7))
    assert [s.shape for s in out.all_states] == [[7], [7]]
    assert out.trace == ()
    assert out.final_kernel_results.accepted_results.target_log_prob.shape == []


def test_an_int_seed_is_a_fixed_chain(seed):
    kernel = _kernels(seed)["sgld"]
    run = tf.function(lambda: sample_chain(4, tf.zeros([3]), kernel=kernel, seed=seed))
    np.testing.assert_array_equal(run(), run())
    other = sample_chain(4, tf.zeros([3]), kernel=kernel, seed=seed + 1)
    assert not np.array_equal(run(), other)


def test_top_level_name():
    assert sg.sample_chain is sample_chain
    assert sg.driver.sample_chain is sample_chain


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(kernel=None), "`kernel`"),
        (dict(num_results=0), "`num_results` must be >= 1"),
        (dict(num_results=2.5), "`num_results` must be an integer"),
        (dict(num_results=True), "`num_results` must be an integer"),
        (dict(num_results=[3]), "`num_results` must be an integer"),
        (dict(num_burnin_steps=-1), "`num_burnin_steps` must be >= 0"),
        (dict(num_steps_between_results="2"), "`num_steps_between_results` must be"),
        (dict(trace_fn=3), "`trace_fn`"),
        (dict(parallel_iterations=0), "`parallel_iterations`"),
        (dict(seed=-4), "`seed`"),
        (dict(seed_rule="split"), "`seed_rule`"),
    ],
)
def test_bad_arguments_are_named(seed, kw, match):
    args = dict(num_results=3, current_state=tf.zeros([3]),
                kernel=_kernels(seed)["sgld"], seed=[0, 1])
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        sample_chain(**args)


def test_a_runtime_float_count_is_refused():
    kernel = tfp.mcmc.RandomWalkMetropolis(lambda t: -0.5 * t**2)

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def run(n):
        return sample_chain(n, tf.constant(0.0), kernel=kernel, seed=[0, 1])

    with pytest.raises(ValueError, match="`num_results` must be a scalar integer"):
        run(tf.constant(3.0))


def test_unknown_chain_count_with_thinning_and_a_trace(seed):
    """A state whose chain dimension is known only at run time (graph mode)."""
    kernel = tfp.mcmc.HamiltonianMonteCarlo(lambda t: -0.5 * tf.reduce_sum(t**2, -1), 0.3, 2)

    def trace(s, r):
        return s**2, r.accepted_results.target_log_prob

    def run_with(chain, **extra):
        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def run(init):
            return chain(5, init, kernel=kernel, seed=[seed, 2], num_steps_between_results=2,
                         trace_fn=trace, **extra)
        return run(tf.fill([4, 3], 0.5))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = run_with(tfp.mcmc.sample_chain)
    got = run_with(sample_chain, seed_rule="tfp")
    assert got.all_states.shape == [5, 4, 3] and got.trace[1].shape == [5, 4]
    for a, b in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
