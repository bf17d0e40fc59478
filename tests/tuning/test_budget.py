"""Round counts and budgets of Algorithm 1 (pure Python, no TensorFlow work)."""

from __future__ import annotations

import math

import pytest

from tfp_sgmcmc.tuning.budget import (
    Budget,
    num_rounds,
    per_arm_budgets,
    round_sizes,
    seconds,
    steps,
)


@pytest.mark.parametrize(
    "m, eta, k, sizes",
    [
        (56, 3, 3, [56, 18, 6]),
        (81, 3, 4, [81, 27, 9, 3]),
        (243, 3, 5, [243, 81, 27, 9, 3]),  # float int(log(243)/log(3)) gives 4
        (56, 2, 5, [56, 28, 14, 7, 3]),
        (81, 2, 6, [81, 40, 20, 10, 5, 2]),
        (243, 2, 7, [243, 121, 60, 30, 15, 7, 3]),
    ],
)
def test_rounds_match_algorithm_1(m, eta, k, sizes):
    assert num_rounds(m, eta) == k
    assert eta**k <= m < eta ** (k + 1)
    assert round_sizes(m, eta) == sizes
    total = 1000.0
    r = per_arm_budgets(m, eta, Budget(total, "steps"))
    # r_i = T / (|S_i| K): every round spends T/K in total.
    for s, ri in zip(sizes, r):
        assert ri == pytest.approx(total / (s * k))
        assert s * ri == pytest.approx(total / k)
    assert sum(s * ri for s, ri in zip(sizes, r)) == pytest.approx(total)


def test_integer_rounds_on_exact_powers():
    for eta in (2, 3, 4, 5):
        for k in range(1, 9):
            assert num_rounds(eta**k, eta) == k
            assert num_rounds(eta**k - 1, eta) == k - 1
    # The authors' floating-point formula is wrong here; ours is not.
    assert int(math.log(243) / math.log(3)) == 4
    assert num_rounds(243, 3) == 5


def test_r_parameterisation_of_the_authors_code():
    # docs/algorithms.md#mamba: M = 56, eta = 3, R = 1 s -> K = 3, r = 0.077, 0.239, 0.718 s.
    r = per_arm_budgets(56, 3, seconds(1.0, per="arm"))
    assert r == pytest.approx([1 / 13, 56 * 3 / 13 / 54, 56 * 3 / 13 / 18])
    assert [round(x, 3) for x in r] == [0.077, 0.239, 0.718]
    # The survivor runs R in total only approximately (floor division of |S_i|).
    assert sum(r) == pytest.approx(1.0, rel=0.05)
    b = seconds(1.0, per="arm")
    assert b.total(56, 3) == pytest.approx(56 * 3 / 13)


@pytest.mark.parametrize("eta", [1, 0, -3, 2.5, True])
def test_eta_below_two_raises(eta):
    with pytest.raises(ValueError, match="`eta`"):
        num_rounds(10, eta)


def test_too_few_arms_and_bad_budgets_raise():
    with pytest.raises(ValueError, match="`arms`"):
        per_arm_budgets(2, 3, steps(100))
    with pytest.raises(ValueError, match="`amount`"):
        Budget(0.0)
    with pytest.raises(ValueError, match="`amount`"):
        Budget(float("nan"))
    with pytest.raises(ValueError, match="`unit`"):
        Budget(1.0, unit="minutes")
    with pytest.raises(ValueError, match="`per`"):
        Budget(1.0, per="round")
    assert str(seconds(60)) == "T=60s"
    assert not seconds(1).deterministic and steps(1).deterministic
