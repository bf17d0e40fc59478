"""MAMBA on problems whose best arm is known (deterministic step budgets)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu

D = 2


def _gauss(x):
    return -0.5 * tf.reduce_sum(tf.square(x), axis=-1)


ESTIMATOR = sg.NoisyGradientEstimator(_gauss, noise_scale=0.1)
# SGLD on N(0, I) (ε-form) has stationary variance 1/(1 − ε/2) per coordinate
# and contracts by (1 − ε) per step: ε = 1e-3 cannot reach the target from
# θ0 = 8 in the budget, ε = 1.5 has variance 4, ε = 50 overflows. ε = 0.1
# (variance 1.05, ~10-step mixing) is the clearly best arm.
STEPS = [1e-3, 1e-2, 0.1, 1.5, 50.0, 4.5]
BEST = 2
DIVERGING = 4
TRACES = []


def make_kernel(step_size):
    TRACES.append(step_size)
    return sg.SGLD(ESTIMATOR, step_size)


@pytest.fixture(scope="module")
def result():
    TRACES.clear()
    return tu.MAMBA(
        tu.grid(step_size=STEPS),
        tf.fill([D], tf.constant(8.0, tf.float64)),
        make_kernel,
        budget=tu.steps(4800),
        eta=2,
        seed=3,
        progress=False,
        sampling=tu.ArmSampling(jit_compile=False),
    ).run()


def test_right_arm_wins_and_diverging_arm_is_pruned(result):
    assert result.best_index == BEST
    assert result.best_arm == {"step_size": 0.1}
    assert result.num_rounds == 2 and result.round_sizes == [6, 3]
    r0 = [r for r in result.records if r.round == 0]
    div = [r for r in r0 if r.arm_index == DIVERGING][0]
    assert div.diverged and math.isinf(div.metric) and not div.survived
    assert "diverged" in result.to_markdown()
    # Pruned: never run again; the diverged arm's final state is not kept.
    assert all(r.arm_index != DIVERGING for r in result.records if r.round == 1)
    assert result.final_states[DIVERGING] is None
    # The small-step arm is pruned in round 0 too (it never leaves the tail).
    assert all(r.arm_index != 0 for r in result.records if r.round == 1)


def test_budgets_follow_algorithm_1(result):
    # T = 4800 steps, K = 2: r_0 = 4800/(6*2) = 400, r_1 = 4800/(3*2) = 800.
    assert result.per_arm_budgets == pytest.approx([400.0, 800.0])
    for r in result.records:
        if not r.diverged:
            assert r.steps == [400, 800][r.round]
            assert r.samples == r.steps // 10  # thinned by 10
    assert result.budget_used <= 4800
    # Best arm's samples (last round, thinned) are near N(0, I).
    s = np.asarray(result.best_samples)
    assert s.shape == (80, D)
    assert np.all(np.abs(s.mean(0)) < 1.0)


def test_one_program_for_all_step_sizes(result):
    # M eager validation builds, then ONE trace of init and chunk for all arms, then
    # the best arm's kernel once more for its gradient-noise ratio.
    assert result.num_programs == 1
    eager = [t for t in TRACES if isinstance(t, float)]
    traced = [t for t in TRACES if tf.is_tensor(t)]
    assert len(eager) == len(STEPS) + 1
    assert eager[-1] == result.best_arm["step_size"]
    assert len(traced) == 2
    assert all(t.dtype == tf.float64 for t in traced)


def test_result_presentation(result, tmp_path):
    text = repr(result)
    assert "MAMBA" in text and "step_size=0.1" in text and "KSD" in text
    md = result.to_markdown()
    assert md.count("\n") == 1 + len(result.records)
    assert "compile s" in md and "sampling s" in md
    fig = result.plot(str(tmp_path / "m.png"))
    assert (tmp_path / "m.png").stat().st_size > 1000
    fig.clf()
    k = result.kernel()
    assert isinstance(k, sg.SGLD) and float(k.step_size) == 0.1
    assert result.total_compile_seconds > 0
    assert result.total_metric_seconds > 0


def test_nan_and_failing_metrics_prune_without_crashing():
    calls = []

    def metric(samples, trace, estimator):
        # arm with the largest |mean| -> NaN; a mid one raises; others: variance error.
        x = samples[0]
        calls.append(x.shape[0])
        m = float(np.abs(x.mean()))
        if m > 5:
            return float("nan")
        if len(calls) == 2:
            raise FloatingPointError("boom")
        return abs(float(x.var()) - 1.0)

    res = tu.MAMBA(
        tu.grid(step_size=[1e-3, 0.05, 0.1]),
        tf.fill([D], tf.constant(8.0, tf.float64)),
        lambda step_size: sg.SGLD(ESTIMATOR, step_size),
        budget=tu.steps(1500),
        eta=3,
        metric=metric,
        progress=False,
        sampling=tu.ArmSampling(jit_compile=False),
    ).run()
    notes = {r.arm_index: r.note for r in res.records}
    assert "non-finite" in notes[0] and "boom" in notes[1]
    assert res.best_index == 2


def test_construction_errors():
    x0 = tf.zeros([D], tf.float64)
    mk = lambda step_size: sg.SGLD(ESTIMATOR, step_size)  # noqa: E731
    arms = tu.grid(step_size=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="`eta`"):
        tu.MAMBA(arms, x0, mk, eta=1)
    with pytest.raises(ValueError, match="`arms`"):
        tu.MAMBA(arms[:2], x0, mk, eta=3)
    with pytest.raises(ValueError, match=r"`arms\[1\]`"):
        tu.MAMBA([{"step_size": 0.1}, {"step_size": -1.0}, {"step_size": 0.3}], x0, mk)
    with pytest.raises(ValueError, match="`metric`"):
        tu.MAMBA(arms, x0, mk, metric="kdd")
    with pytest.raises(ValueError, match="`budget`"):
        tu.MAMBA(arms, x0, mk, budget=tu.steps(2))
    with pytest.raises(TypeError, match="kernel"):
        tu.MAMBA(arms, x0)  # what to sample is required
    with pytest.raises(ValueError, match="`sampling` must be a tuning.ArmSampling"):
        tu.MAMBA(arms, x0, mk, sampling={"thin": 5})
    with pytest.raises(ValueError, match="`max_steps_per_call` must be an int >= 20"):
        tu.ArmSampling(max_steps_per_call=10)


def test_arm_names_seed_and_budget_amounts_are_checked():
    x0 = tf.zeros([D], tf.float64)
    arms = tu.grid(step_size=[0.1, 0.2, 0.3])
    # A hyperparameter the kernel does not take (a typo) names the arm, not a TypeError.
    with pytest.raises(ValueError, match=r"`arms\[0\]`.*'frictoin'.*it takes: .*step_size"):
        tu.MAMBA(
            tu.grid(step_size=[0.1, 0.2, 0.3], frictoin=[0.1]),
            x0,
            tu.KernelSpec(sg.SGLD, ESTIMATOR),
            budget=tu.steps(300),
        )
    with pytest.raises(ValueError, match=r"`arms\[0\]`"):  # a make_kernel's TypeError too
        tu.MAMBA(arms, x0, lambda step: sg.SGLD(ESTIMATOR, step), budget=tu.steps(300))
    for bad in (-1, 2**40, 1.5):
        with pytest.raises(ValueError, match="`seed`"):
            tu.MAMBA(arms, x0, tu.KernelSpec(sg.SGLD, ESTIMATOR), budget=tu.steps(300), seed=bad)
    assert tu.steps(np.float32(100)).amount == 100.0
    assert tu.steps(np.int64(100)).amount == 100
    for bad in (True, np.nan, "100"):
        with pytest.raises(ValueError, match="`amount`"):
            tu.steps(bad)


def test_budget_without_a_thinned_sample_is_refused_and_all_inf_warns():
    x0 = tf.fill([D], tf.constant(8.0, tf.float64))
    arms = tu.grid(step_size=[0.1, 0.2, 0.3])
    # 12 steps over 3 arms: 4 each, fewer than thin = 10 even in the last round.
    with pytest.raises(ValueError, match=r"fewer than `thin` = 10"):
        tu.MAMBA(arms, x0, tu.KernelSpec(sg.SGLD, ESTIMATOR), budget=tu.steps(12))
    # Every arm diverges: the result says so instead of presenting arm 0 as a choice.
    with pytest.warns(RuntimeWarning, match=r"no arm of the deciding round .*arm #0 .*diverged"):
        res = tu.grid_search(
            tu.grid(step_size=[50.0, 60.0]),
            x0,
            tu.KernelSpec(sg.SGLD, ESTIMATOR),
            budget_per_arm=tu.steps(200),
            progress=False,
            sampling=tu.ArmSampling(jit_compile=False),
        )
    assert all(math.isinf(r.metric) for r in res.records)
