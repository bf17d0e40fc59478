"""Grid search, heuristic, deterministic gradient budgets, wall-clock honesty."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
from tfp_sgmcmc.tuning.baselines import heuristic_arm

RNG = np.random.default_rng(5)
X = RNG.normal(1.0, 1.0, size=(200, 2))


def _loglik(theta, batch):
    return -0.5 * tf.reduce_sum(tf.square(batch - theta[..., tf.newaxis, :]), axis=-1)


BASE = sg.MinibatchEstimator(
    _loglik, X, batch_size=20, log_prior_fn=lambda t: -0.5 * tf.reduce_sum(t**2, -1)
)


def test_heuristic_arm_is_one_over_n():
    assert heuristic_arm(1_000_000) == {"step_size": 1e-6, "batch_fraction": 0.1}
    assert heuristic_arm(60_000, num_leapfrog_steps=10)["num_leapfrog_steps"] == 10
    with pytest.raises(ValueError, match="`num_examples`"):
        heuristic_arm(0)


def test_gradient_budget_grid_search_and_shared_programs():
    # Posterior N(mean, 1/(N+1)) per coordinate: gradients scale with N = 200.
    arms = tu.grid(step_size=[1e-5, 1e-3, 5e-2], batch_size=[10, 40])
    x0 = tf.constant([3.0, -3.0], tf.float64)
    res = tu.grid_search(
        arms,
        x0,
        tu.KernelSpec(sg.SGLD, BASE),
        budget_per_arm=tu.gradient_evaluations(8000),
        progress=False,
        sampling=tu.ArmSampling(jit_compile=False),
    )
    # One program per batch size, shared by the three step sizes.
    assert res.num_programs == 2
    for r in res.records:
        n = r.arm["batch_size"]
        if not r.diverged:
            assert r.steps == 8000 // n  # per-example gradient evaluations
            assert r.spent == r.steps * n
    by = {(r.arm["step_size"], r.arm["batch_size"]): r for r in res.records}
    # ε = 5e-2 with ∇ ∝ N = 200 is unstable (ελ ≈ 10 > 2): diverges, never crashes.
    assert by[(5e-2, 10)].diverged and math.isinf(by[(5e-2, 10)].metric)
    assert res.best_arm["step_size"] == 1e-3
    assert res.method == "grid search" and "grid search" in repr(res)


def test_heuristic_runs_and_scores():
    x0 = tf.constant([3.0, -3.0], tf.float64)
    res = tu.heuristic(
        200,
        x0,
        tu.KernelSpec(sg.SGLD, BASE),
        budget=tu.steps(500),
        sampling=tu.ArmSampling(jit_compile=False),
    )
    assert res.best_arm == {"step_size": 1 / 200, "batch_fraction": 0.1}
    assert res.records[0].steps == 500 and res.records[0].samples == 50
    assert np.isfinite(res.best_metric)


def test_heuristic_names_an_option_it_does_not_take():
    with pytest.raises(ValueError, match="budget_per_arm"):
        tu.heuristic(200, tf.zeros([2]), tu.KernelSpec(sg.SGLD, BASE), budget_per_arm=1.0)


def test_wall_clock_budget_is_spent_and_compile_time_excluded():
    # Loose bounds: the machine is shared, so only gross errors fail (e.g.
    # compile time counted as sampling time, or chunks ignoring the clock). Load only
    # lengthens the calls: the lower bounds hold under any load; a call sized for half
    # the time left overshoots only under a slowdown of more than 2x within it, and the
    # upper bound allows one of 5x.
    arms = tu.grid(step_size=[1e-4, 1e-3, 3e-3])
    x0 = tf.constant([3.0, -3.0], tf.float64)
    res = tu.MAMBA(
        arms,
        x0,
        tu.KernelSpec(sg.SGLD, BASE),
        budget=3.0,
        eta=3,
        progress=False,
        seed=1,
        sampling=tu.ArmSampling(jit_compile=False),
    ).run()
    assert res.num_rounds == 1
    honesty = res.budget_honesty()
    assert 0.8 < honesty < 3.0, honesty
    assert res.total_compile_seconds > 0
    for r in res.records:
        assert r.sampling_seconds >= 0.8 * r.budget
        assert r.steps > 0
