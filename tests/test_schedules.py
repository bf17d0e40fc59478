"""Step-size schedules: formulas, conventions and retrace-free tensor parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.kernels.arguments import as_schedule

STEPS = np.arange(0, 40)


def _eval(schedule, steps=STEPS, dtype=tf.float64):
    return np.array([float(schedule(tf.constant(int(t)), dtype)) for t in steps])


def test_constant():
    np.testing.assert_allclose(_eval(sg.ConstantStepSize(0.3)), np.full(len(STEPS), 0.3))
    assert sg.ConstantStepSize(0.3)(tf.constant(0), tf.float32).dtype == tf.float32


@pytest.mark.parametrize("one_based", [False, True])
def test_polynomial_decay(one_based):
    a, b, gamma = 0.5, 2.0, 0.55
    got = _eval(sg.PolynomialDecay(a, b, gamma, one_based=one_based))
    k = STEPS + (1 if one_based else 0)
    np.testing.assert_allclose(got, a * (b + k) ** -gamma, rtol=1e-12)


def test_polynomial_decay_b_zero_needs_one_based():
    got = _eval(sg.PolynomialDecay(1.0, 0.0, 1.0, one_based=True), [0, 1, 9])
    np.testing.assert_allclose(got, [1.0, 0.5, 0.1], rtol=1e-12)


def test_cyclical_formula_one_based():
    """ε_k = (ε₀/2)[cos(π·mod(k−1, c)/c) + 1], c = ⌈K/M⌉, with k = t + 1."""
    eps0, big_k, m = 0.2, 30, 4
    sched = sg.CyclicalStepSize(eps0, big_k, m)
    c = math.ceil(big_k / m)  # 8
    k = STEPS + 1
    want = eps0 / 2 * (np.cos(np.pi * np.mod(k - 1, c) / c) + 1)
    got = _eval(sched)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # The very first step, and the first of every cycle, uses ε₀ (not ~the smallest).
    assert got[0] == pytest.approx(eps0)
    assert got[c] == pytest.approx(eps0) and got[2 * c] == pytest.approx(eps0)
    assert got[c // 2] == pytest.approx(eps0 / 2)
    assert np.all(np.diff(got[:c]) < 0)


def test_cyclical_exploration_fraction():
    sched = sg.CyclicalStepSize(0.1, 20, 2, exploration_fraction=0.3)  # c = 10
    flags = [bool(sched.is_exploration(tf.constant(t))) for t in range(20)]
    assert flags == ([True] * 3 + [False] * 7) * 2


def test_tensor_parameters_do_not_retrace():
    traces = [0]

    @tf.function
    def f(a, eps0):
        traces[0] += 1
        return (sg.PolynomialDecay(a, 1.0, 0.55)(tf.constant(3), tf.float64),
                sg.CyclicalStepSize(eps0, 10, 2)(tf.constant(0), tf.float64))

    p1, c1 = f(tf.constant(1.0, tf.float64), tf.constant(0.1, tf.float64))
    p2, c2 = f(tf.constant(2.0, tf.float64), tf.constant(0.3, tf.float64))
    assert traces[0] == 1 and f.experimental_get_tracing_count() == 1
    assert float(p2) == pytest.approx(2 * float(p1)) and float(c2) == pytest.approx(0.3)


def test_variable_step_size_is_read_at_call_time():
    v = tf.Variable(0.1, dtype=tf.float64)
    sched = as_schedule(v)
    assert float(sched(tf.constant(0), tf.float64)) == pytest.approx(0.1)
    v.assign(0.25)
    assert float(sched(tf.constant(0), tf.float64)) == pytest.approx(0.25)


def test_as_schedule_promotes_and_validates():
    assert isinstance(as_schedule(0.1), sg.ConstantStepSize)
    s = sg.PolynomialDecay(1.0)
    assert as_schedule(s) is s
    with pytest.raises(ValueError, match="`step_size`"):
        as_schedule(lambda t: 0.1)
    with pytest.raises(ValueError, match="`step_size`"):
        as_schedule(np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match="`step_size`"):
        as_schedule(0.0)
    with pytest.raises(ValueError, match="`temperature`"):
        as_schedule(-1.0, "temperature", allow_zero=True)
    assert float(as_schedule(0.0, "temperature", allow_zero=True)(tf.constant(0), tf.float64)) == 0


def test_parameters_record_the_constructor_arguments():
    s = sg.CyclicalStepSize(0.2, 30, 4, exploration_fraction=0.25)
    assert s.parameters == {"initial_step_size": 0.2, "num_steps": 30, "num_cycles": 4,
                            "exploration_fraction": 0.25}
    assert sg.PolynomialDecay(1.0, 2.0, 0.6).parameters == {
        "a": 1.0, "b": 2.0, "gamma": 0.6, "one_based": False}


@pytest.mark.parametrize(
    "build,arg",
    [
        (lambda: sg.ConstantStepSize(-0.1), "step_size"),
        (lambda: sg.PolynomialDecay(0.0), "a"),
        (lambda: sg.PolynomialDecay(1.0, b=0.0), "b"),
        (lambda: sg.PolynomialDecay(1.0, gamma=-1.0), "gamma"),
        (lambda: sg.CyclicalStepSize(0.0, 10, 2), "initial_step_size"),
        (lambda: sg.CyclicalStepSize(0.1, 0, 1), "num_steps"),
        (lambda: sg.CyclicalStepSize(0.1, 10, 11), "num_cycles"),
        (lambda: sg.CyclicalStepSize(0.1, 10, 2, exploration_fraction=1.0),
         "exploration_fraction"),
    ],
)
def test_bad_schedule_arguments(build, arg):
    with pytest.raises(ValueError, match=f"`{arg}`"):
        build()


@pytest.mark.parametrize(
    "build,arg",
    [
        (lambda: sg.SAStepSize(1.0, alpha=None), "alpha"),  # was accepted, failed when evaluated
        (lambda: sg.SAStepSize(1.0, alpha="a"), "alpha"),  # was numpy's unnamed TypeError
        (lambda: sg.SAStepSize(1.0, alpha=[0.5, 0.7]), "alpha"),
        (lambda: sg.SAStepSize(1.0, cap="a"), "cap"),
        (lambda: sg.CyclicalStepSize(1.0, 10, 2, exploration_fraction="a"),
         "exploration_fraction"),
        (lambda: sg.CyclicalStepSize(1.0, 10, 2, exploration_fraction=None),
         "exploration_fraction"),
        (lambda: sg.CyclicalStepSize(1.0, True, 1), "num_steps"),  # a bool is not an int
        (lambda: sg.CyclicalStepSize(1.0, 10, np.True_), "num_cycles"),
        (lambda: sg.CyclicalStepSize(1.0, 10.0, 2), "num_steps"),
        (lambda: sg.ConstantStepSize("a"), "step_size"),
        (lambda: sg.ConstantStepSize(None), "step_size"),
        (lambda: as_schedule("a", "temperature", allow_zero=True), "temperature"),
    ],
)
def test_non_numeric_or_non_scalar_schedule_arguments_raise_value_error(build, arg):
    """Every bad schedule argument is a ``ValueError`` naming it, at construction."""
    with pytest.raises(ValueError, match=f"`{arg}`"):
        build()


def test_cyclical_accepts_numpy_ints():
    s = sg.CyclicalStepSize(1.0, np.int64(10), np.int32(2))
    assert s.parameters["num_steps"] == 10 and s.parameters["num_cycles"] == 2
    plain = sg.CyclicalStepSize(1.0, 10, 2)
    for t in range(10):
        step = tf.constant(t)
        assert float(s(step, tf.float64)) == float(plain(step, tf.float64))
