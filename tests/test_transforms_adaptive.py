"""Unit tests of the adaptive-bias drift transforms, eager and fast.

Update rules: docs/algorithms.md#adaptive-drift."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfp_sgmcmc.transforms.drifts import (
    AdadeltaBias,
    AdaMaxBias,
    AdamBias,
    AdaptiveBias,
    MomentumBias,
    PreconditionedBias,
    RMSPreconditioner,
)


def _run(transform, grads_seq):
    """Drifts and preconditioners of a transform fed a sequence of single-part grads."""
    state = transform.init([tf.constant(grads_seq[0])])
    drifts, preconds = [], []
    for g in grads_seq:
        res = transform.update([tf.constant(g)], state)
        state = res.state
        drifts.append(res.drift[0].numpy())
        preconds.append(None if res.preconditioner is None else res.preconditioner[0].numpy())
    return np.array(drifts), preconds, state


@pytest.fixture
def grads(rng):
    return [rng.normal(size=3) * (1 + k) for k in range(6)]


def test_momentum_bias_is_lagged_and_uncorrected(grads):
    a, b1 = 2.0, 0.8
    drifts, preconds, _ = _run(MomentumBias(a, b1), grads)
    m = np.zeros(3)
    for g, d, p in zip(grads, drifts, preconds):
        np.testing.assert_allclose(d, g + a * m, rtol=1e-12)  # m holds g_{<t} only
        assert p is None
        m = b1 * m + (1 - b1) * g
    np.testing.assert_array_equal(drifts[0], grads[0])  # step 0 is plain SGLD


@pytest.mark.parametrize("placement", ["outside", "inside"])
def test_adam_bias_and_lambda_placement(grads, placement):
    a, b1, b2, lam = 0.5, 0.9, 0.99, 1e-2
    drifts, _, _ = _run(AdamBias(a, b1, b2, lam, placement), grads)
    m, v = np.zeros(3), np.zeros(3)
    for g, d in zip(grads, drifts):
        den = np.sqrt(v) + lam if placement == "outside" else np.sqrt(v + lam)
        np.testing.assert_allclose(d, g + a * m / den, rtol=1e-12)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g**2
    # The two placements really differ (λ = 1e-2 is not negligible here).
    other = "inside" if placement == "outside" else "outside"
    d2, _, _ = _run(AdamBias(a, b1, b2, lam, other), grads)
    assert np.abs(drifts[1:] - d2[1:]).max() > 1e-4


def test_adamax_bias(grads):
    a, b1, b2, lam = 1.5, 0.7, 0.95, 1e-8
    drifts, _, _ = _run(AdaMaxBias(a, b1, b2, lam), grads)
    m, u = np.zeros(3), np.zeros(3)
    for g, d in zip(grads, drifts):
        np.testing.assert_allclose(d, g + a * m / (u + lam), rtol=1e-12)
        m, u = b1 * m + (1 - b1) * g, np.maximum(b2 * u, np.abs(g))
        # The documented bound |m/u| ≤ (1−β1)/(1−β1/β2).
        assert np.all(np.abs(m / u) <= (1 - b1) / (1 - b1 / b2) + 1e-12)


def test_adadelta_bias(grads):
    a, b1, rho, lam = 3.0, 0.9, 0.9, 1e-4
    drifts, _, _ = _run(AdadeltaBias(a, b1, rho, lam), grads)
    m, eg, ed = np.zeros(3), np.zeros(3), np.zeros(3)
    for g, d in zip(grads, drifts):
        bias = np.sqrt(ed + lam) / np.sqrt(eg + lam) * m
        np.testing.assert_allclose(d, g + a * bias, rtol=1e-12)
        m, eg, ed = (
            b1 * m + (1 - b1) * g,
            rho * eg + (1 - rho) * g**2,
            rho * ed + (1 - rho) * bias**2,
        )


def test_preconditioned_bias_is_psgld_times_biased_drift(grads):
    a, b1, alpha, lam = 1.0, 0.9, 0.9, 1e-3
    drifts, preconds, _ = _run(PreconditionedBias(MomentumBias(a, b1), alpha, lam), grads)
    _, rms_p, _ = _run(RMSPreconditioner(alpha, lam), grads)
    m = np.zeros(3)
    for g, d, p, q in zip(grads, drifts, preconds, rms_p):
        np.testing.assert_allclose(d, g + a * m, rtol=1e-12)
        np.testing.assert_allclose(p, q, rtol=1e-12)  # pSGLD's G_t, updated before use
        m = b1 * m + (1 - b1) * g


def test_float64_constants_are_exact():
    """β = 0.999 must not be rounded through float32 in a float64 chain."""
    t = AdamBias(1.0, 0.9, 0.999, 1e-8)
    g = tf.constant([1.0], tf.float64)
    s = t.update([g], t.init([g])).state
    np.testing.assert_allclose(s[0][1].numpy(), 1 - 0.999, rtol=1e-15)


def test_parameters_and_repr():
    t = AdamBias(0.3, 0.8, 0.9, 1e-4, "inside")
    assert t.parameters == dict(
        a=0.3, beta1=0.8, beta2=0.9, epsilon=1e-4, lambda_placement="inside"
    )
    assert type(t)(**t.parameters).parameters == t.parameters
    p = PreconditionedBias(MomentumBias(), 0.9, 1e-3)
    assert p.parameters["decay"] == 0.9 and isinstance(p.parameters["bias"], AdaptiveBias)
    assert "AdamBias(a=0.3" in repr(t)


@pytest.mark.parametrize(
    "make, arg",
    [
        (lambda: MomentumBias(a=-0.1), "`a`"),
        (lambda: MomentumBias(beta1=1.0), "`beta1`"),
        (lambda: AdamBias(beta2=-0.5), "`beta2`"),
        (lambda: AdamBias(beta1=0.5, beta2=0.25), r"`beta1`\*\*2"),
        (lambda: AdamBias(epsilon=0.0), "`epsilon`"),
        (lambda: AdamBias(lambda_placement="both"), "`lambda_placement`"),
        (lambda: AdaMaxBias(beta1=0.99, beta2=0.9), "`beta1`"),
        (lambda: AdadeltaBias(rho=1.0), "`rho`"),
        (lambda: AdadeltaBias(epsilon=-1.0), "`epsilon`"),
        (lambda: PreconditionedBias(RMSPreconditioner()), "`bias`"),
        (lambda: PreconditionedBias(MomentumBias(), decay=2.0), "`decay`"),
        (lambda: MomentumBias(a=float("nan")), "`a`"),
    ],
)
def test_bad_input(make, arg):
    with pytest.raises(ValueError, match=arg):
        make()
