"""`TuningResult.grid_edges`: a pick at the end of the values tried is reported."""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
from tfp_sgmcmc.tuning.results import TuningResult


def _result(arms: list[dict], best_index: int) -> TuningResult:
    return TuningResult(
        method="MAMBA", best_arm=dict(arms[best_index]), best_index=best_index, arms=arms,
        records=[], samples=[], final_states=[], metric_name="KSD", budget="1 steps",
        budget_unit="steps",
    )


def test_grid_edges_follow_the_axis_through_the_pick():
    arms = tu.grid(sampler=["sgld", "sghmc"], step_size=[1e-3, 1e-2, 1e-1], batch_size=[8, 32])
    at = {(a["sampler"], a["step_size"], a["batch_size"]): i for i, a in enumerate(arms)}
    # Inside the step grid, and batch has two values only (every pick an end): nothing.
    assert _result(arms, at[("sgld", 1e-2, 32)]).grid_edges() == {}
    assert _result(arms, at[("sgld", 1e-2, 32)]).grid_edge_message() == ""
    low = _result(arms, at[("sghmc", 1e-3, 8)])
    assert low.grid_edges() == {"step_size": "smallest"}
    assert "step_size is the smallest tried" in low.grid_edge_message()
    assert "step_size is the smallest" in low.summary()
    assert _result(arms, at[("sgld", 1e-1, 8)]).grid_edges() == {"step_size": "largest"}
    # A ragged grid: the axis is the arms sharing the pick's other values only.
    ragged = [{"sampler": "sgld", "step_size": v} for v in (1.0, 2.0, 3.0)] + [
        {"sampler": "sghmc", "step_size": 0.5}
    ]
    assert _result(ragged, 0).grid_edges() == {"step_size": "smallest"}
    assert _result(ragged, 3).grid_edges() == {}  # one value on its axis
    # Array-valued hyperparameters (a preconditioner per arm) compare elementwise.
    arrays = [{"scale": np.array([1.0, 2.0]), "step_size": v} for v in (0.1, 0.2, 0.3)]
    assert _result(arrays, 2).grid_edges() == {"step_size": "largest"}


def test_mamba_on_a_grid_of_too_small_steps_says_so(rng):
    # A standard normal target and steps far below its scale: the largest mixes best, and
    # the result must say the optimum may lie beyond the grid. The power check: a grid
    # that brackets a good step (5.0 diverges: its drift overshoots by 1.5×; 1e-4 barely moves)
    # picks inside it.
    x = rng.standard_normal((200, 2))

    def ll(theta, batch):
        return -0.5 * tf.reduce_sum(tf.square(batch - theta[..., tf.newaxis, :]), -1) / 200.0

    est = sg.MinibatchEstimator(ll, x, 50)
    start = tf.zeros([2], tf.float64)

    def run(steps):
        return tu.MAMBA(
            tu.grid(step_size=steps), start, tu.KernelSpec(sg.SGLD, est),
            budget=tu.steps(3000), eta=3, seed=0, progress=False,
            sampling=tu.ArmSampling(jit_compile=False),
        ).run()

    small = run([1e-6, 1e-5, 1e-4])
    assert math.isfinite(small.best_metric)
    assert small.grid_edges() == {"step_size": "largest"}, small.to_markdown()
    bracket = run([1e-4, 0.1, 5.0])
    assert bracket.best_arm["step_size"] == 0.1, bracket.to_markdown()
    assert bracket.grid_edges() == {}
