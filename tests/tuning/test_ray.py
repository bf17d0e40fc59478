"""MAMBA on Ray (local 2-CPU Ray): same tuner as the sequential one, arms in parallel.

Speed is measured in ``benchmarks/bench_ray_mamba.py``, never asserted here.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np
import pytest
import ray
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
from tfp_sgmcmc.tuning.ray_backend import RayMAMBA, TuningProblem

pytestmark = pytest.mark.cluster

D = 2
# The problem of test_mamba.py: SGLD on N(0, I) from θ0 = 8 (ε-form: stationary
# variance 1/(1 − ε/2), contraction 1 − ε per step). ε = 0.1 is the best arm,
# ε = 50 and ε = 4.5 diverge (|1 − ε| > 1), ε = 1e-3 never leaves the tail.
STEPS = [1e-3, 1e-2, 0.1, 1.5, 50.0, 4.5]
BEST = 2
DIVERGING = (4, 5)
INIT = np.full([D], 8.0)


# pytest imports this file as `tuning.test_ray`, which the Ray workers cannot
# import: ship this module's functions by value (as functions of a driver script are).
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def gaussian_problem() -> TuningProblem:
    est = sg.NoisyGradientEstimator(
        lambda x: -0.5 * tf.reduce_sum(tf.square(x), axis=-1), noise_scale=0.1
    )
    return TuningProblem(make_kernel=lambda step_size: sg.SGLD(est, step_size))


KW = dict(budget=tu.gradient_evaluations(4800), eta=2, seed=3, progress=False, jit_compile=True)


@pytest.fixture(scope="module")
def local_ray():
    # Nice 0 (Ray's default for workers is 15): on a busy CI machine the actors
    # would otherwise wait behind every other process.
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _system_config={"worker_niceness": 0},
    )
    yield
    ray.shutdown()


class _KillOneWorker(RayMAMBA):
    """Kills an actor while the first round is in flight (its arm must be rerun)."""

    killed = False

    def _run_arms(self, survivors, amount):
        gen = super()._run_arms(survivors, amount)
        first = next(gen)
        if not self.killed:
            # The actor that did not return first is still running an arm.
            busy = [w for w in self._alive if self._home[first[0]] != w]
            ray.kill(self._workers[busy[0]])
            self.killed = True
        yield first
        yield from gen


@pytest.fixture(scope="module")
def pair(local_ray):
    """Sequential MAMBA and Ray MAMBA (2 actors) on the same arms, seed and budget.

    One of the two actors is killed in the middle of round 0, so the Ray run
    also shows that a lost actor costs a rerun of its arm, not the result.
    """
    arms = tu.grid(step_size=STEPS)
    seq = tu.mamba(arms, tf.constant(INIT), make_kernel=gaussian_problem().make_kernel, **KW)
    tuner = _KillOneWorker(gaussian_problem, arms, INIT, num_workers=2, **KW)
    pids = {d["pid"] for d in tuner.worker_info}
    threads = {d["intra_op_threads"] for d in tuner.worker_info}
    par = tuner.run()
    return seq, par, pids, threads, tuner


def test_same_arm_and_round_metrics_as_sequential(pair):
    seq, par, pids, threads, _ = pair
    assert len(pids) == 2 and threads == {1}  # two single-threaded actors
    assert par.best_index == seq.best_index == BEST
    assert par.best_arm == {"step_size": 0.1}
    assert [(r.round, r.arm_index) for r in par.records] == [
        (r.round, r.arm_index) for r in seq.records
    ]
    for a, b in zip(seq.records, par.records):
        assert (a.steps, a.samples, a.diverged, a.survived) == (
            b.steps,
            b.samples,
            b.diverged,
            b.survived,
        )
        assert a.spent == b.spent and a.budget == b.budget
        if math.isfinite(a.metric):
            assert b.metric == pytest.approx(a.metric, rel=1e-6)
        else:
            assert math.isinf(b.metric)
    np.testing.assert_allclose(par.best_samples, seq.best_samples, rtol=1e-6, atol=1e-9)
    for s_seq, s_par in zip(seq.final_states, par.final_states):
        assert (s_seq is None) == (s_par is None)
        if s_seq is not None:
            np.testing.assert_allclose(s_par[0], s_seq[0], rtol=1e-6, atol=1e-9)
    assert par.per_arm_budgets == seq.per_arm_budgets
    assert par.num_programs == seq.num_programs == 1
    assert len(par.round_seconds) == par.num_rounds == 2
    assert all(t > 0 for t in par.round_seconds)


def test_diverging_arms_are_pruned_without_error(pair):
    _, par, _, _, _ = pair
    r0 = {r.arm_index: r for r in par.records if r.round == 0}
    for j in DIVERGING:
        assert r0[j].diverged and math.isinf(r0[j].metric) and not r0[j].survived
        assert r0[j].note == "diverged"
        assert par.final_states[j] is None
    assert not any(r.arm_index in DIVERGING for r in par.records if r.round == 1)


def test_a_dead_actor_costs_a_rerun_not_the_result(pair):
    # (The equality with the sequential run above holds despite the kill.)
    _, par, _, _, tuner = pair
    assert tuner.killed and len(tuner.reruns) == 1
    j, err = tuner.reruns[0]
    assert "Actor" in err
    assert [r.arm_index for r in par.records if r.round == 0] == list(range(len(STEPS)))


def test_result_builds_the_best_kernel_on_the_driver_and_actors_are_released(pair):
    _, par, _, _, tuner = pair
    k = par.kernel()
    assert isinstance(k, sg.SGLD) and float(k.step_size) == 0.1
    assert "MAMBA (Ray)" in par.summary()
    assert tuner.num_workers == 0  # run() killed its actors
    with pytest.raises(RuntimeError, match="shut down"):
        list(tuner._run_arms([0], 10.0))


def test_wall_clock_budget_is_spent_in_each_actor(local_ray):
    # Loose bounds (shared machine), as the sequential test in test_baselines.py:
    # every arm spends its own r_i of sampling time in its actor; compile time
    # is reported apart; the round's wall time is recorded next to the sum.
    arms = tu.grid(step_size=[1e-3, 1e-2, 0.1, 1.5])
    res = RayMAMBA(
        gaussian_problem,
        arms,
        INIT,
        budget=2.4,
        eta=2,
        seed=1,
        progress=False,
        jit_compile=False,
        num_workers=2,
    ).run()
    assert res.per_arm_budgets == pytest.approx([0.3, 0.6])
    assert 0.8 < res.budget_honesty() < 1.5, res.budget_honesty()
    for r in res.records:
        assert r.sampling_seconds >= 0.8 * r.budget and r.steps > 0
    assert res.total_compile_seconds > 0
    assert len(res.round_seconds) == 2
    for i, wall in enumerate(res.round_seconds):
        longest = max(r.sampling_seconds for r in res.records if r.round == i)
        assert wall >= longest


def test_non_picklable_factory_is_a_clear_error(local_ray):
    lock = threading.Lock()

    def problem():
        with lock:  # a lock cannot travel to another process
            return gaussian_problem()

    with pytest.raises(ValueError, match="`problem` cannot be pickled"):
        RayMAMBA(problem, tu.grid(step_size=STEPS), INIT, **KW)
    with pytest.raises(ValueError, match="`metric` cannot be pickled"):
        RayMAMBA(gaussian_problem, tu.grid(step_size=STEPS), INIT, metric=lambda *a: lock, **KW)
    with pytest.raises(ValueError, match="`problem` must be a callable"):
        RayMAMBA(gaussian_problem(), tu.grid(step_size=STEPS), INIT, **KW)
    # 3 one-CPU actors on a 2-CPU Ray would wait forever.
    with pytest.raises(ValueError, match="`num_workers`"):
        RayMAMBA(gaussian_problem, tu.grid(step_size=STEPS), INIT, num_workers=3, **KW)


def test_invalid_arm_is_reported_from_the_worker(local_ray):
    with pytest.raises(ValueError, match=r"`arms\[1\]`.*step_size"):
        RayMAMBA(gaussian_problem, tu.grid(step_size=[0.1, -1.0]), INIT, num_workers=1, **KW)


def test_factory_from_a_module_the_workers_cannot_import(local_ray, tmp_path, monkeypatch):
    # The driver can import this module (its directory is on the driver's path
    # only); cloudpickle sends its function by reference, so the actor fails.
    (tmp_path / "driver_only_problem.py").write_text(
        "def problem():\n    raise AssertionError('never called')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import driver_only_problem

    with pytest.raises(RuntimeError, match="could not be started.*py_modules"):
        RayMAMBA(driver_only_problem.problem, tu.grid(step_size=STEPS), INIT, num_workers=1, **KW)
