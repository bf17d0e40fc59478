"""Unit tests of the structured SG-MCMC estimators (S- and Sd-SGMCMC), partitions, history."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from _stats import Z
from scipy import stats

import tfp_sgmcmc as sg
from tfp_sgmcmc.estimators.history import init_history
from tfp_sgmcmc.estimators.partitions import (
    Partition,
    partition_by_neuron,
    partition_by_part,
    partition_from_group_ids,
    partition_fully_factorized,
    partition_modulo,
    partition_random,
)
from tfp_sgmcmc.estimators.structured import (
    BernoulliMask,
    BetaMask,
    StructuredDropoutEstimator,
    StructuredEstimator,
    StructuredEstimatorState,
    UniformMask,
    trace_without_history,
)


# --------------------------------------------------------------------------- #
# Models                                                                       #
# --------------------------------------------------------------------------- #
def _logistic(n=40, batch_size=10, seed=0):
    """Two-part logistic regression: state [w (3,), b ()]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3))
    y = (rng.random(n) < 0.5).astype(np.float64)

    def loglik(state, batch):
        w, b = state
        xb, yb = batch
        logits = tf.einsum("nd,...d->...n", xb, w) + b[..., tf.newaxis]
        return -tf.nn.sigmoid_cross_entropy_with_logits(
            tf.broadcast_to(yb, tf.shape(logits)), logits
        )

    def logprior(state):
        w, b = state
        return -0.5 * tf.reduce_sum(w**2, -1) - 0.5 * b**2

    return sg.MinibatchEstimator(loglik, (x, y), batch_size=batch_size, log_prior_fn=logprior)


def _state(batch=()):
    w = tf.constant(np.broadcast_to([0.3, -0.2, 0.5], tuple(batch) + (3,)).copy())
    b = tf.constant(np.broadcast_to(0.1, tuple(batch)).copy())
    return [w, b]


FF = partition_fully_factorized([(3,), ()])


def _fill_history(est, states):
    """Bootstrap at states[0] and evaluate at the following states (as a kernel does)."""
    es = est.bootstrap(states[0])
    for i, s in enumerate(states):
        _, es = est(s, es, tf.constant([i, 1]))
    return es


# --------------------------------------------------------------------------- #
# Partitions                                                                   #
# --------------------------------------------------------------------------- #
def test_partition_constructors():
    p = partition_by_part([(3, 2), (4,)])
    assert p.num_groups == 2 and list(p.group_sizes) == [6, 4]
    p = partition_by_part([(3, 2), (2,), (2, 1), (1,)], part_layers=["a", "a", "b", "b"])
    assert p.num_groups == 2 and list(p.group_sizes) == [8, 3]
    p = partition_modulo([(3, 2), (4,)], 3)
    assert p.num_groups == 3 and list(p.group_sizes) == [4, 3, 3]
    np.testing.assert_array_equal(p.group_ids[1], [0, 1, 2, 0])
    p1, p2 = partition_random([(5, 4)], 6, seed=3), partition_random([(5, 4)], 6, seed=3)
    np.testing.assert_array_equal(p1.group_ids[0], p2.group_ids[0])
    assert set(p1.group_sizes) <= {3, 4}
    assert not np.array_equal(p1.group_ids[0], partition_random([(5, 4)], 6, seed=4).group_ids[0])
    assert partition_fully_factorized([(3,), ()]).num_groups == 4
    p = partition_by_neuron([(3, 4), (4,), (4, 2), (2,)], part_layers=[0, 0, 1, 1])
    assert p.num_groups == 6
    np.testing.assert_array_equal(p.group_ids[0], np.tile(np.arange(4), (3, 1)))
    np.testing.assert_array_equal(p.group_ids[1], np.arange(4))
    np.testing.assert_array_equal(p.group_ids[2], np.tile([4, 5], (4, 1)))
    p = partition_by_neuron([np.zeros((3, 4))], axis=0)
    np.testing.assert_array_equal(p.group_ids[0][:, 0], [0, 1, 2])
    # Tensors (weight tensors of a model) work as well as shapes.
    assert partition_by_neuron([tf.zeros([2, 5])]).num_groups == 5


@pytest.mark.parametrize(
    "make, arg",
    [
        (lambda: partition_modulo([(2,), (1,)], 4), "num_groups"),
        (lambda: partition_random([(2,)], 3), "num_groups"),
        (lambda: partition_modulo([(2,)], 0), "num_groups"),
        (lambda: partition_from_group_ids([np.array([0, 2])]), "group_ids"),
        (lambda: partition_from_group_ids([np.array([0, 1])], num_groups=3), "group_ids"),
        (lambda: partition_from_group_ids([np.array([-1, 0])]), "group_ids"),
        (lambda: partition_from_group_ids([np.array([0.0, 1.0])]), "group_ids"),
        (lambda: partition_from_group_ids([np.array([0, 1, 2])], num_groups=3.5), "num_groups"),
        (lambda: partition_from_group_ids([np.array([0, 1])], num_groups="2"), "num_groups"),
        (lambda: partition_by_neuron([(3, 4), (3,)], part_layers=[0, 0]), "part_layers"),
        (lambda: partition_by_part([(3,)], part_layers=[0, 1]), "part_layers"),
        (lambda: partition_by_neuron([(3,)], axis=2), "axis"),
    ],
)
def test_partition_bad_input(make, arg):
    with pytest.raises(ValueError, match=f"`{arg}"):
        make()


@pytest.mark.parametrize(
    "make, arg",
    [
        (lambda b: StructuredDropoutEstimator(b, FF, keep_prob=0.0), "keep_prob"),
        (lambda b: StructuredDropoutEstimator(b, FF, keep_prob=1.5), "keep_prob"),
        (lambda b: StructuredDropoutEstimator(b, FF, num_masks=0), "num_masks"),
        (
            lambda b: StructuredDropoutEstimator(b, FF, keep_prob=0.5, mask=UniformMask()),
            "keep_prob",
        ),
        (lambda b: StructuredEstimator(b, FF, history_capacity=0), "history_capacity"),
        (lambda b: StructuredEstimator(b, FF, thinning=0), "thinning"),
        (lambda b: StructuredEstimator(b, FF, evaluation="loop"), "evaluation"),
        (lambda b: StructuredEstimator(b, [np.arange(3)]), "partition"),
        (lambda b: StructuredEstimator(sg.NoisyGradientEstimator(lambda s: s), FF), "base"),
        # 1/(K·E[r]) overflows float64 (the data's dtype): every energy would be infinite.
        (lambda b: StructuredDropoutEstimator(b, FF, keep_prob=1e-310), "keep_prob"),
        (lambda b: StructuredDropoutEstimator(b, FF, mask=BetaMask(1e-310, 1.0)), "mask"),
        (lambda b: BetaMask(0.0, 1.0), "concentration1"),
        (lambda b: BetaMask(1.0, -2.0), "concentration0"),
    ],
)
def test_estimator_bad_input(make, arg):
    with pytest.raises(ValueError, match=f"`{arg}"):
        make(_logistic())


def test_smallest_mask_mean_the_dtype_can_scale():
    """Power for the overflow check: a mask mean well above the float64 limit is accepted
    and gives a finite energy."""
    est = StructuredDropoutEstimator(_logistic(), FF, keep_prob=1e-300)
    kernel = sg.SGLD(est, 1e-3)
    results = kernel.bootstrap_results([tf.zeros([3], tf.float64), tf.zeros([], tf.float64)])
    assert np.isfinite(results.target_log_prob.numpy())


def test_state_must_match_partition():
    est = StructuredEstimator(_logistic(), FF)
    with pytest.raises(ValueError, match="`init_state`"):
        sg.SGLD(est, 1e-3).bootstrap_results([tf.zeros([4], tf.float64), tf.zeros([], tf.float64)])
    with pytest.raises(ValueError, match="`init_state`"):
        est.bootstrap([tf.zeros([2, 3], tf.float64), tf.zeros([3], tf.float64)])


# --------------------------------------------------------------------------- #
# History                                                                      #
# --------------------------------------------------------------------------- #
def test_history_ring_buffer_and_thinning():
    est = StructuredEstimator(_logistic(), FF, history_capacity=3, thinning=2)
    states = [
        [tf.fill([3], tf.constant(float(t), tf.float64)), tf.constant(float(t), tf.float64)]
        for t in range(9)
    ]
    es = _fill_history(est, states)
    h = es.history
    # Stored: θ0 (initial), then θ2, θ4, θ6, θ8 into a ring of 3 slots.
    np.testing.assert_array_equal(h.buffer[1].numpy()[:3], [6.0, 8.0, 4.0])
    np.testing.assert_array_equal(h.buffer[0].numpy()[:3, 0], [6.0, 8.0, 4.0])
    assert int(h.count) == 3 and int(h.position) == 2 and int(h.calls) == 9
    assert est.history_memory_floats(states[0]) == 4 * 4


def test_each_group_draws_its_own_uniform_time_index():
    est = StructuredDropoutEstimator(
        _logistic(), FF, num_masks=2, keep_prob=0.5, history_capacity=50
    )
    chains = 2000
    states = [
        [
            tf.fill([chains, 3], tf.constant(float(t), tf.float64)),
            tf.fill([chains], tf.constant(float(t), tf.float64)),
        ]
        for t in range(8)
    ]
    es = _fill_history(est, states)
    _, hist, _ = est.composites(states[-1], es, tf.constant([5, 5]))
    vals = np.concatenate([hist[0].numpy(), hist[1].numpy()[..., None]], -1)  # [K, chains, 4]
    # Uniform over the stored θ0..θ7 for every group.
    for g in range(4):
        counts = np.bincount(vals[..., g].astype(int).ravel(), minlength=8)
        assert stats.chisquare(counts).pvalue > 1e-3, counts
    # Groups mix time points: all four equal would have probability 8^-3.
    frac_all_equal = np.mean(np.all(vals == vals[..., :1], axis=-1))
    assert frac_all_equal < 0.01
    # Chains draw independently.
    assert np.mean(vals[:, 0] == vals[:, 1]) < 0.3


def test_history_capacity_is_checked():
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="`capacity`"):
            init_history([tf.zeros([2])], bad)


def test_multiple_chains_have_their_own_history():
    est = StructuredEstimator(_logistic(), FF, history_capacity=10)
    states = [
        [
            tf.constant([[1.0 * t] * 3, [-1.0 * t] * 3], tf.float64),
            tf.constant([1.0 * t, -1.0 * t], tf.float64),
        ]
        for t in range(1, 6)
    ]
    es = _fill_history(est, states)
    _, hist, _ = est.composites(states[-1], es, tf.constant([1, 2]))
    assert np.all(hist[0].numpy()[:, 0] > 0) and np.all(hist[0].numpy()[:, 1] < 0)
    assert np.all(hist[1].numpy()[:, 0] > 0) and np.all(hist[1].numpy()[:, 1] < 0)


# --------------------------------------------------------------------------- #
# The energies                                                                 #
# --------------------------------------------------------------------------- #
def _manual(est, base, state, es, seed, scale):
    """Σ_k scale · r_k ⊙ ∇ℓ̂(θ^(k)) + ∇ log p(θ), on the batch the base draws from ``seed``."""
    batch, _ = base.sample_batch(es.base_state, seed)
    r, hist, masks = est.composites(state, es, seed)
    n = int(batch[0].shape[0])
    with tf.GradientTape() as tape:
        tape.watch(state)
        total = base.log_prior(state)
        for k in range(int(r.shape[0])):
            x = [m[k] * p + (1 - m[k]) * h[k] for p, h, m in zip(state, hist, masks)]
            total += scale * base.scaled_log_likelihood(x, batch, n)
    return total, tape.gradient(total, state)


@pytest.mark.parametrize("kind", ["S", "Sd", "Sd-beta"])
@pytest.mark.parametrize("partition", [FF, partition_by_part([(3,), ()])], ids=["ff", "part"])
def test_energy_matches_direct_computation(kind, partition):
    base = _logistic()
    if kind == "S":
        est, scale = StructuredEstimator(base, partition, history_capacity=20), 1.0
    elif kind == "Sd":
        est = StructuredDropoutEstimator(base, partition, num_masks=3, keep_prob=0.4)
        scale = 1.0 / (3 * 0.4)
    else:
        est = StructuredDropoutEstimator(base, partition, num_masks=2, mask=BetaMask(2.0, 3.0))
        scale = 1.0 / (2 * 0.4)
    rng = np.random.default_rng(1)
    states = [
        [tf.constant(rng.normal(size=3)), tf.constant(rng.normal(), tf.float64)] for _ in range(6)
    ]
    es = _fill_history(est, states[:-1])
    seed = tf.constant([3, 4])
    # The estimator first stores the state it is evaluated at, then draws.
    est_state_after = est(states[-1], es, seed)[1]
    es_draw = es._replace(history=est_state_after.history._replace(calls=es.history.calls + 1))
    got, _ = est(states[-1], es, seed)
    want_v, want_g = _manual(est, base, states[-1], es_draw, seed, scale)
    np.testing.assert_allclose(got.target_log_prob, want_v, rtol=1e-12)
    for g, w in zip(got.grads_target_log_prob, want_g):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    # S-SGMCMC: each parameter's gradient comes from its own group's composite only.
    assert est.gradient_evaluations_per_call == (
        partition.num_groups if kind == "S" else est.num_masks
    )


def test_sequential_equals_vectorized():
    base = _logistic()
    rng = np.random.default_rng(2)
    states = [
        [tf.constant(rng.normal(size=(2, 3))), tf.constant(rng.normal(size=2))] for _ in range(5)
    ]
    for cls, kw in [(StructuredEstimator, {}), (StructuredDropoutEstimator, {"num_masks": 3})]:
        a = cls(base, FF, evaluation="vectorized", **kw)
        b = cls(base, FF, evaluation="sequential", **kw)
        ea, eb = _fill_history(a, states[:-1]), _fill_history(b, states[:-1])
        ga, _ = a(states[-1], ea, tf.constant([9, 9]))
        gb, _ = b(states[-1], eb, tf.constant([9, 9]))
        np.testing.assert_allclose(ga.target_log_prob, gb.target_log_prob, rtol=1e-12)
        for x, y in zip(ga.grads_target_log_prob, gb.grads_target_log_prob):
            np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)


@pytest.mark.statistical
@pytest.mark.parametrize("mask", [BernoulliMask(0.3), UniformMask(), BetaMask(2.0, 5.0)], ids=repr)
def test_dropout_scaling_uses_each_masks_own_mean(mask, seed):
    """With θ̃ = θ the composites equal θ, so E[∇ log π̂^(Sd)] must be the plain gradient.

    The reference code divides by ρ·M for every mask type; with any ρ ≠ E[r]
    this test fails (power check below).
    """
    base = _logistic(batch_size=40)  # full batch: the only randomness is the masks
    chains, k = 4000, 2
    est = StructuredDropoutEstimator(base, partition_by_part([(3,), ()]), num_masks=k, mask=mask)
    state = _state((chains,))
    es = est.bootstrap(state)  # history = {θ}, so every composite is θ
    got, _ = est(state, es, tf.constant([seed, 3]))
    want = base(state, base.bootstrap(state), tf.constant([seed, 3]))[0].grads_target_log_prob
    for g, w in zip(got.grads_target_log_prob, want):
        g, w = g.numpy().reshape(chains, -1), w.numpy().reshape(chains, -1)[0]
        se = g.std(0, ddof=1) / np.sqrt(chains)
        assert np.all(np.abs(g.mean(0) - w) <= Z * se), (g.mean(0), w, se)
        # Power: the scaling a wrong mean (ρ = 0.5 for every mask) would give.
        wrong = g.mean(0) * mask.mean / 0.5 if mask.mean != 0.5 else g.mean(0) * 1.1
        assert not np.all(np.abs(wrong - w) <= Z * se)


def _eager_chain(kernel, init, steps, seed=4):
    """A few kernel steps in eager mode (no tracing: fast for tiny models)."""
    state, res = init, kernel.bootstrap_results(init)
    out = []
    for t in range(steps):
        state, res = kernel.one_step(state, res, seed=tf.constant([seed, t]))
        out.append(state)
    return out, res


def test_keep_prob_one_reproduces_plain_sgld():
    base = _logistic()
    init = _state((2,))
    plain, _ = _eager_chain(sg.SGLD(base, 1e-2), init, 15)
    for k in (1, 3):
        sd = StructuredDropoutEstimator(base, FF, num_masks=k, keep_prob=1.0, history_capacity=5)
        structured, _ = _eager_chain(sg.SGLD(sd, 1e-2), init, 15)
        for a_parts, b_parts in zip(plain, structured):
            for a, b in zip(a_parts, b_parts):
                np.testing.assert_allclose(a, b, rtol=1e-12 if k == 1 else 1e-10, atol=1e-13)
        assert np.std(plain[-1][0].numpy() - init[0].numpy()) > 1e-3  # the chain moved


def test_control_variate_base():
    base = _logistic()
    centre = [tf.constant([0.2, -0.1, 0.3], tf.float64), tf.constant(0.05, tf.float64)]
    cv = sg.ControlVariateEstimator(base, centre)
    full = base.full_log_prob_and_gradient(centre)
    # S-SGMCMC at θ = θ̂ with history {θ̂}: the exact full-data score, whatever the batch.
    est = StructuredEstimator(cv, FF)
    es = est.bootstrap(centre)
    got, _ = est(centre, es, tf.constant([1, 1]))
    for g, w in zip(got.grads_target_log_prob, full.grads_target_log_prob):
        np.testing.assert_allclose(g, w, rtol=1e-10)
    assert est.gradient_evaluations_per_call == FF.num_groups + 1
    # Sd-SGMCMC with CV: the correction enters every composite, masked.
    rng = np.random.default_rng(3)
    states = [
        [tf.constant(rng.normal(0, 0.3, size=3)), tf.constant(rng.normal(0, 0.3), tf.float64)]
        for _ in range(5)
    ]
    est = StructuredDropoutEstimator(cv, FF, num_masks=3, keep_prob=0.5)
    es = _fill_history(est, states[:-1])
    seed = tf.constant([7, 1])
    got, new_es = est(states[-1], es, seed)
    batch, _ = base.sample_batch(es.base_state, seed)
    n = int(batch[0].shape[0])
    es_draw = es._replace(history=new_es.history)
    es_draw = es_draw._replace(history=es_draw.history._replace(calls=es.history.calls + 1))
    scale = 1.0 / (3 * 0.5)
    _, plain_g = _manual(est, base, states[-1], es_draw, seed, scale)
    r, _, masks = est.composites(states[-1], es_draw, seed)
    with tf.GradientTape() as tape:
        tape.watch(centre)
        ll_hat = base.scaled_log_likelihood(centre, batch, n)
    g_hat = tape.gradient(ll_hat, centre)
    with tf.GradientTape() as tape:
        tape.watch(centre)
        lp = base.log_prior(centre)
    gp = tape.gradient(lp, centre)
    for g, pg, m, f, gh, gpc in zip(
        got.grads_target_log_prob, plain_g, masks, full.grads_target_log_prob, g_hat, gp
    ):
        want = pg + scale * tf.reduce_sum(m, 0) * (f - gpc - gh)
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel_name", ["SGLD", "PSGLD", "SGHMC", "SGNHT"])
def test_runs_with_every_kernel(kernel_name):
    base = _logistic()
    est = StructuredDropoutEstimator(
        base,
        partition_by_part([(3,), ()]),
        num_masks=2,
        keep_prob=0.5,
        history_capacity=20,
        thinning=2,
    )
    make = {
        "SGLD": lambda e: sg.SGLD(e, 1e-2),
        "PSGLD": lambda e: sg.PSGLD(e, 1e-2),
        "SGHMC": lambda e: sg.SGHMC(e, 1e-2, num_leapfrog_steps=2),
        "SGNHT": lambda e: sg.SGNHT(e, 1e-2),
    }[kernel_name]
    kernel = make(est)
    init = _state((3,))
    if kernel_name != "SGLD":
        # Eager for three kernels (compiling is slow on a loaded CI box), XLA for SGLD.
        states, res = _eager_chain(kernel, init, 12)
        assert not np.any(res.diverged.numpy())
        assert (
            int(res.estimator_state.history.count)
            == 1 + (int(res.estimator_state.history.calls) - 1) // 2
        )
        assert all(np.all(np.isfinite(p.numpy())) for p in states[-1])
        return

    # Graph mode here; the XLA path is exercised by test_structured_gaussian.py.
    @tf.function
    def run():
        return tfp.mcmc.sample_chain(
            40,
            init,
            kernel=kernel,
            trace_fn=trace_without_history,
            seed=[1, 5],
            return_final_kernel_results=True,
        )

    res = run()
    traced = res.trace
    assert isinstance(traced.estimator_state, StructuredEstimatorState)
    assert traced.estimator_state.history.buffer == []
    assert not np.any(traced.diverged.numpy())
    final = res.final_kernel_results.estimator_state.history
    assert int(final.count) == min(20, 1 + int(final.calls - 1) // 2)
    for part in res.all_states:
        assert np.all(np.isfinite(part.numpy()))


def test_init_history_holds_initial_state():
    h = init_history([tf.constant([1.0, 2.0])], 4)
    assert h.buffer[0].shape == (5, 2) and int(h.count) == 1
    assert isinstance(Partition([np.zeros(3, np.int32)]), Partition)
