"""Executors: the sequential default reproduces Algorithm 1 run by hand, arm for arm.

The Ray executor's equality with the sequential one is in ``test_ray.py`` (marker
``cluster``); here: the reference loop, the interface, and the errors.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
from tfp_sgmcmc.tuning.budget import per_arm_budgets
from tfp_sgmcmc.tuning.executors import ArmPool, evaluate_metric
from tfp_sgmcmc.tuning.metrics import resolve_metric
from tfp_sgmcmc.tuning.runner import ArmRunner

D = 2
STEPS = [1e-3, 1e-2, 0.1, 1.5, 50.0, 4.5]  # as test_mamba.py: 0.1 best, 50 and 4.5 diverge
INIT = tf.constant(np.full([D], 8.0))
EST = sg.NoisyGradientEstimator(
    lambda x: -0.5 * tf.reduce_sum(tf.square(x), axis=-1), noise_scale=0.1
)


def make_kernel(step_size):
    return sg.SGLD(EST, step_size)


def build():
    return make_kernel


BUDGET = tu.gradient_evaluations(4800)
KW = dict(budget=BUDGET, eta=2, seed=3, progress=False)


def successive_halving_by_hand(arms, budget, eta, seed):
    """Algorithm 1 written out on one ArmRunner (the code path before executors)."""
    runner = ArmRunner(make_kernel, arms, INIT, seed=seed)
    metric = resolve_metric("ksd")
    survivors = list(range(len(arms)))
    rows = []
    per_arm = per_arm_budgets(len(arms), eta, budget)
    for i, r_i in enumerate(per_arm):
        scores = {}
        for j in survivors:
            out = runner.run(j, r_i, budget, screening=i < len(per_arm) - 1)
            value, _, note = evaluate_metric(metric, out, runner.reference_estimator)
            scores[j] = value
            rows.append((j, out.steps, value, out.diverged, note, out.samples))
        ranked = sorted(survivors, key=lambda j: (scores[j], survivors.index(j)))
        survivors = ranked[: max(1, len(survivors) // eta)]
    return rows, runner


@pytest.fixture(scope="module")
def by_hand():
    return successive_halving_by_hand(tu.grid(step_size=STEPS), BUDGET, 2, 3)


def test_sequential_executor_is_the_hand_written_loop_bit_for_bit(by_hand):
    rows, runner = by_hand
    res = tu.MAMBA(
        tu.grid(step_size=STEPS), INIT, make_kernel, executor=tu.SequentialExecutor(), **KW
    ).run()
    assert res.method == "MAMBA" and res.best_arm == {"step_size": 0.1}
    assert len(res.records) == len(rows)
    for rec, (j, steps, value, diverged, note, _) in zip(res.records, rows):
        # Exact equality: same seeds, same programs, same order of operations.
        assert (rec.arm_index, rec.steps, rec.diverged, rec.note) == (j, steps, diverged, note)
        assert rec.metric == value or (math.isinf(rec.metric) and math.isinf(value))
    last = [r for r in rows if r[0] == res.best_index][-1][-1]
    np.testing.assert_array_equal(res.best_samples, last[0])
    for got, st in zip(res.final_states, runner.arm_states):
        assert (got is None) == st.diverged
        if got is not None:
            np.testing.assert_array_equal(got[0], st.state[0])


def test_problem_factory_gives_the_same_records_as_make_kernel(by_hand):
    rows, _ = by_hand
    res = tu.MAMBA(tu.grid(step_size=STEPS), INIT, tu.TuningProblem(build), **KW).run()
    assert [(r.arm_index, r.steps) for r in res.records] == [(j, s) for j, s, *_ in rows]
    assert [r.metric for r in res.records] == [v for _, _, v, *_ in rows]
    assert isinstance(res.kernel(), sg.SGLD)  # built from the factory in this process


class _ReversedPool(ArmPool):
    """A custom executor's pool: runs the arms in reverse order (completion order is free)."""

    def __init__(self, job):
        super().__init__(job)
        self.inner = tu.SequentialExecutor().open(job)
        self.costs, self.chains_per_arm = self.inner.costs, self.inner.chains_per_arm

    def _runs(self, indices, amount, budget, screening=False):
        yield from self.inner._runs(list(indices)[::-1], amount, budget, screening)

    def final_states(self):
        return self.inner.final_states()

    @property
    def num_programs(self):
        return self.inner.num_programs


class _ReversedExecutor(tu.Executor):
    name = "reversed"

    def open(self, job):
        return _ReversedPool(job)


def test_a_custom_executor_plugs_into_grid_search_and_order_does_not_matter():
    arms = tu.grid(step_size=STEPS[:4])
    spec = tu.KernelSpec(sg.SGLD, EST)  # keeps its programs: one compilation for both runs
    kw = dict(budget_per_arm=tu.steps(200), seed=1, progress=False)
    seq = tu.grid_search(arms, INIT, spec, **kw)
    rev = tu.grid_search(arms, INIT, spec, executor=_ReversedExecutor(), **kw)
    assert rev.method == "grid search (reversed)"
    assert [r.arm_index for r in rev.records] == [0, 1, 2, 3]  # grid order in the result
    # Each arm has its own seed stream: the order it runs in changes nothing.
    assert [r.metric for r in rev.records] == [r.metric for r in seq.records]
    assert rev.best_index == seq.best_index == 2
    # The second run reused the spec's compiled program.
    assert seq.records[0].compile_seconds > 0
    assert all(r.compile_seconds == 0 for r in rev.records)


def test_heuristic_takes_an_executor():
    res = tu.heuristic(
        100,
        INIT,
        lambda step_size, batch_fraction: make_kernel(step_size),
        budget=tu.steps(100),
        executor=_ReversedExecutor(),
    )
    assert res.method == "heuristic (reversed)" and res.best_arm["step_size"] == 0.01


def test_bad_executor_and_kernel_arguments_are_named():
    arms = tu.grid(step_size=STEPS)
    with pytest.raises(TypeError, match="`executor` must be an Executor"):
        tu.MAMBA(arms, INIT, make_kernel, executor="ray", **KW)
    with pytest.raises(ValueError, match="`build` must be a callable"):
        tu.TuningProblem(42)
    with pytest.raises(ValueError, match="`build` must be a callable"):
        tu.TuningProblem(tu.KernelSpec(sg.SGLD, EST))
    with pytest.raises(ValueError, match="`kernel` must build a kernel from an arm, got int"):
        tu.MAMBA(arms, INIT, tu.TuningProblem(lambda: 42), **KW)
    with pytest.raises(ValueError, match="build\\(\\) must return a KernelSpec"):
        tu.grid_search(arms, INIT, tu.TuningProblem(lambda: tu.TuningProblem(build)))
    with pytest.raises(ValueError, match="`kernel_class` must be a kernel class"):
        tu.KernelSpec(make_kernel, EST)
    with pytest.raises(ValueError, match="`estimator` is required"):
        tu.KernelSpec(sg.SGLD, None)
    with pytest.raises(ValueError, match="`num_workers` must be an int >= 1"):
        tu.RayExecutor(num_workers=0)
    with pytest.raises(ValueError, match="`num_cpus_per_worker` must be a number > 0"):
        tu.RayExecutor(num_cpus_per_worker=float("nan"))
    with pytest.raises(TypeError, match="`address` must be a string"):
        tu.RayExecutor(address=6379)


def test_without_ray_the_executor_and_the_cli_say_how_to_install_it(monkeypatch, tmp_path,
                                                                      capsys):
    from tfp_sgmcmc.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ImportError, match=r"pip install \"tfp-sgmcmc\[ray\]\""):
        tu.RayExecutor()
    model = tmp_path / "m.py"
    model.write_text(
        "import tensorflow as tf\nimport tfp_sgmcmc as sg\n"
        "def build():\n"
        "    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.1)\n"
        "    return est, tf.zeros([2])\n"
    )
    code = main(["tune", "--model", str(model), "--kernel", "sgld", "--step-sizes", "1e-2,1e-1",
                 "--budget-steps", "100", "--eta", "2", "--plot", "", "--ray"])
    err = capsys.readouterr().err
    assert code == 2 and "--ray needs Ray" in err and "tfp-sgmcmc[ray]" in err
    assert len(err.strip().splitlines()) == 1
