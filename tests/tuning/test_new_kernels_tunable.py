"""MAMBA tunes the float hyperparameters of BAOAB, BADODAB, cSGLD, reSGLD and SGLD-SVRG.

Float arms (step size, friction, diffusion, ζ, the SA step, the top
temperature, ...) reach the kernel as tensors of one compiled program: one
program serves every arm, and the best arm is found on a Gaussian whose good
step size is known.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu


def _gauss(x):
    return -0.5 * tf.reduce_sum(tf.square(x), axis=-1)


EST = sg.NoisyGradientEstimator(_gauss, noise_scale=0.1)

CASES = {
    "baoab": (lambda **a: sg.BAOAB(EST, **a), dict(friction=[1.0, 2.0])),
    "badodab": (lambda **a: sg.BADODAB(EST, **a), dict(diffusion=[1.0, 2.0])),
    "csgld": (
        lambda **a: sg.CSGLD(EST, num_partitions=20, energy_gap=2.0, **a),
        dict(zeta=[0.5, 0.75], sa_step_size=[0.01]),
    ),
    "resgld": (
        lambda **a: sg.RESGLD(EST, num_replicas=2, **a),
        dict(max_temperature=[3.0, 10.0]),
    ),
}
#: Step sizes of the grid: the middle one mixes in the budget, the tiny one stays
#: in the tail and the huge one diverges (h² λ = 25 > 4; ε = 5 > 2).
STEPS = {"baoab": [1e-3, 0.5, 5.0], "badodab": [1e-3, 0.5, 5.0]}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n in ("baoab", "badodab") else n
        for n in sorted(CASES)
    ],
)
def test_mamba_tunes_floats_with_one_program(name):
    make, extra = CASES[name]
    steps = STEPS.get(name, [1e-4, 0.1, 5.0])
    traced = []

    def make_kernel(**arm):
        traced.append(arm)
        return make(**arm)

    result = tu.MAMBA(
        tu.grid(step_size=steps, **extra),
        tf.fill([2], tf.constant(6.0, tf.float64)),
        make_kernel,
        budget=tu.steps(600 * len(steps) * len(tu.grid(**extra))),
        eta=3,
        seed=1,
        progress=False,
        sampling=tu.ArmSampling(jit_compile=False),
    ).run()
    assert result.num_programs == 1
    assert any(all(tf.is_tensor(v) for v in arm.values()) for arm in traced)
    assert result.best_arm["step_size"] == steps[1]


@pytest.mark.slow
def test_svrg_estimator_tunes_the_batch_size():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 3))
    y = x @ np.array([1.0, -1.0, 0.5]) + rng.standard_normal(40)

    def loglik(theta, batch):
        return -0.5 * tf.square(batch[1] - tf.einsum("nd,...d->...n", batch[0], theta))

    est = sg.SVRGEstimator(sg.MinibatchEstimator(loglik, (x, y), 8), update_rate=5)
    result = tu.MAMBA(
        tu.grid(step_size=[1e-3, 3e-3], batch_size=[4, 8]),
        tf.zeros([3], tf.float64),
        tu.KernelSpec(sg.SGLD, est),
        budget=tu.steps(400),
        eta=2,
        seed=1,
        progress=False,
        sampling=tu.ArmSampling(jit_compile=False),
    ).run()
    assert result.num_programs == 2  # one per batch size
    assert result.best_arm["batch_size"] in (4, 8)
