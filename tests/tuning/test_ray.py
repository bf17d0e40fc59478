"""MAMBA with the Ray executor (local 2-CPU Ray): same tuner as the sequential one,
arms in parallel.

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
from tfp_sgmcmc.tuning.ray_backend import RayExecutor

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


def gaussian_problem():
    """The ``build`` of a ``TuningProblem``: a make_kernel whose estimator is built here."""
    est = sg.NoisyGradientEstimator(
        lambda x: -0.5 * tf.reduce_sum(tf.square(x), axis=-1), noise_scale=0.1
    )
    return lambda step_size: sg.SGLD(est, step_size)


KW = dict(budget=tu.gradient_evaluations(4800), eta=2, seed=3, progress=False)


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


def kill_one_actor_in_round_0(pool):
    """Kills an actor while the first round is in flight (its arm must be rerun)."""
    runs = pool._runs
    pool.killed = False

    def killing_runs(survivors, amount, budget, screening=False):
        gen = runs(survivors, amount, budget, screening)
        first = next(gen)
        if not pool.killed:
            # The actor that did not return first is still running an arm.
            busy = [w for w in pool._alive if pool._home[first[0]] != w]
            ray.kill(pool._workers[busy[0]])
            pool.killed = True
        yield first
        yield from gen

    pool._runs = killing_runs


def ray_mamba_tuner(problem, arms, init, num_workers=None, **kw):
    """MAMBA with a Ray executor, its kernel built in each actor by ``problem()``."""
    return tu.MAMBA(arms, init, tu.TuningProblem(problem), executor=RayExecutor(num_workers), **kw)


@pytest.fixture(scope="module")
def pair(local_ray):
    """Sequential MAMBA and Ray MAMBA (2 actors) on the same arms, seed and budget.

    One of the two actors is killed in the middle of round 0, so the Ray run
    also shows that a lost actor costs a rerun of its arm, not the result.
    """
    arms = tu.grid(step_size=STEPS)
    seq = tu.MAMBA(arms, tf.constant(INIT), gaussian_problem(), **KW).run()
    tuner = ray_mamba_tuner(gaussian_problem, arms, INIT, num_workers=2, **KW)
    pool = tuner.pool
    kill_one_actor_in_round_0(pool)
    pids = {d["pid"] for d in pool.worker_info}
    threads = {d["intra_op_threads"] for d in pool.worker_info}
    par = tuner.run()
    return seq, par, pids, threads, pool


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
    _, par, _, _, pool = pair
    assert pool.killed and len(pool.reruns) == 1
    j, err = pool.reruns[0]
    assert "Actor" in err
    assert [r.arm_index for r in par.records if r.round == 0] == list(range(len(STEPS)))


def test_result_builds_the_best_kernel_on_the_driver_and_actors_are_released(pair):
    _, par, _, _, pool = pair
    k = par.kernel()
    assert isinstance(k, sg.SGLD) and float(k.step_size) == 0.1
    assert "MAMBA (Ray)" in par.summary()
    assert pool.num_workers == 0  # run() killed its actors
    with pytest.raises(RuntimeError, match="shut down"):
        list(pool.run_round(0, [0], 10.0, KW["budget"]))


def test_wall_clock_budget_is_spent_in_each_actor(local_ray):
    # Loose bounds (shared machine), as the sequential test in test_baselines.py:
    # every arm spends its own r_i of sampling time in its actor; compile time
    # is reported apart; the round's wall time is recorded next to the sum. The upper
    # bound allows a 5x slowdown within a call (see test_baselines.py).
    arms = tu.grid(step_size=[1e-3, 1e-2, 0.1, 1.5])
    res = ray_mamba_tuner(
        gaussian_problem,
        arms,
        INIT,
        budget=2.4,
        eta=2,
        seed=1,
        progress=False,
        sampling=tu.ArmSampling(jit_compile=False),
        num_workers=2,
    ).run()
    assert res.per_arm_budgets == pytest.approx([0.3, 0.6])
    assert 0.8 < res.budget_honesty() < 3.0, res.budget_honesty()
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

    with pytest.raises(ValueError, match=r"`kernel` \(a TuningProblem\) cannot be pickled"):
        ray_mamba_tuner(problem, tu.grid(step_size=STEPS), INIT, **KW)
    with pytest.raises(ValueError, match="`metric` cannot be pickled"):
        ray_mamba_tuner(
            gaussian_problem, tu.grid(step_size=STEPS), INIT, metric=lambda *a: lock, **KW
        )
    # A kernel builder given directly travels pickled too: same clear error.
    with pytest.raises(ValueError, match=r"`kernel` cannot be pickled.*TuningProblem\(build\)"):
        tu.grid_search(
            tu.grid(step_size=STEPS),
            INIT,
            lambda step_size: lock,
            executor=RayExecutor(),
            progress=False,
        )
    # 3 one-CPU actors on a 2-CPU Ray would wait forever.
    with pytest.raises(ValueError, match="`num_workers`"):
        ray_mamba_tuner(gaussian_problem, tu.grid(step_size=STEPS), INIT, num_workers=3, **KW)


def test_invalid_arm_is_reported_from_the_worker(local_ray):
    with pytest.raises(ValueError, match=r"`arms\[1\]`.*step_size"):
        ray_mamba_tuner(gaussian_problem, tu.grid(step_size=[0.1, -1.0]), INIT, num_workers=1, **KW)


def test_factory_from_a_module_the_workers_cannot_import(local_ray, tmp_path, monkeypatch):
    # The driver can import this module (its directory is on the driver's path
    # only); cloudpickle sends its function by reference, so the actor fails.
    (tmp_path / "driver_only_problem.py").write_text(
        "def problem():\n    raise AssertionError('never called')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import driver_only_problem

    with pytest.raises(RuntimeError, match="could not be started.*py_modules"):
        ray_mamba_tuner(
            driver_only_problem.problem, tu.grid(step_size=STEPS), INIT, num_workers=1, **KW
        )


@pytest.mark.slow  # MAMBA's Ray equality stays in CI
def test_grid_search_on_ray_matches_sequential_with_a_pickled_make_kernel(local_ray):
    # A make_kernel function (not a TuningProblem) is shipped pickled, with its estimator.
    arms = tu.grid(step_size=[1e-2, 0.1, 1.5, 50.0])
    kw = dict(budget_per_arm=tu.steps(300), seed=5, progress=False)
    mk = gaussian_problem()
    seq = tu.grid_search(arms, tf.constant(INIT), mk, **kw)
    par = tu.grid_search(arms, INIT, mk, executor=RayExecutor(num_workers=2), **kw)
    assert par.method == "grid search (Ray)" and seq.method == "grid search"
    assert par.best_index == seq.best_index == 1
    for a, b in zip(seq.records, par.records):
        assert (a.arm_index, a.steps, a.samples, a.diverged, a.survived, a.spent) == (
            b.arm_index, b.steps, b.samples, b.diverged, b.survived, b.spent
        )
        assert b.metric == pytest.approx(a.metric, rel=1e-6) or math.isinf(a.metric + b.metric)
    np.testing.assert_allclose(par.best_samples, seq.best_samples, rtol=1e-6, atol=1e-9)


CLI_MODEL = """
import numpy as np
import tensorflow as tf
import tfp_sgmcmc as sg
from tfp_sgmcmc.driver import ModelSpec

def build(n=400, batch_size=40):
    x = np.random.default_rng(0).normal(1.0, 1.0, size=(n, 2)).astype("float32")
    loglik = lambda theta, batch: -0.5 * tf.reduce_sum((theta[..., None, :] - batch) ** 2, -1)
    est = sg.MinibatchEstimator(loglik, x, batch_size,
                                log_prior_fn=lambda t: -0.5 * tf.reduce_sum(t**2, -1))
    return ModelSpec(est, tf.fill([2], 1.0), name="gauss")
"""


@pytest.mark.slow  # MAMBA's Ray equality stays in CI
def test_cli_tune_with_ray_matches_the_sequential_table(local_ray, tmp_path, capsys):
    # `--ray` without an address attaches to the running local Ray (2 CPUs);
    # every actor loads the model file itself. Same round table as without --ray.
    from tfp_sgmcmc.cli import main

    model = tmp_path / "gauss_cli_model.py"
    model.write_text(CLI_MODEL)
    args = ["tune", "--model", str(model), "--kernel", "sgld", "--step-sizes",
            "1e-5,1e-3,1e-2,1e6", "--budget-steps", "800", "--eta", "2", "--thin", "2",
            "--plot", "", "--no-progress", "--no-xla"]
    assert main(args) == 0, capsys.readouterr().err
    seq = capsys.readouterr().out
    assert main([*args, "--ray"]) == 0, capsys.readouterr().err
    par = capsys.readouterr().out
    rows = [[line.split("|") for line in out.splitlines() if line.startswith("|")]
            for out in (seq, par)]
    assert len(rows[0]) == 2 + 4 + 2 and "MAMBA (Ray)" in par
    # Ranked rows (round, arm, hyperparameters, steps, samples kept, kept) agree; the
    # metrics agree to ~1e-6 (one-thread actors) and the seconds differ.
    keep = [1, 2, 3, 5, 6, 10]
    assert [[r[k] for k in keep] for r in rows[0]] == [[r[k] for k in keep] for r in rows[1]]

    def best(out):
        return next(line for line in out.splitlines() if "best arm" in line).split("(")[0]

    assert best(seq) == best(par)


def test_cli_ray_address_reaches_ray_init(monkeypatch, tmp_path, capsys):
    # `--ray ADDRESS` connects to that cluster: the address goes to ray.init (a bad
    # one is a one-line error, not a traceback).
    from tfp_sgmcmc.cli import build_parser, main

    assert build_parser().parse_args(
        ["tune", "--model", "m", "--kernel", "sgld", "--step-sizes", "1", "--budget-steps",
         "1", "--ray"]).ray == ""
    assert build_parser().parse_args(
        ["tune", "--model", "m", "--kernel", "sgld", "--step-sizes", "1", "--budget-steps",
         "1", "--ray", "10.0.0.1:6379"]).ray == "10.0.0.1:6379"
    seen = []

    def fake_init(address=None, **kw):
        seen.append(address)
        raise ConnectionError(f"could not connect to {address}")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", fake_init)
    model = tmp_path / "gauss_cli_model.py"
    model.write_text(CLI_MODEL)
    code = main(["tune", "--model", str(model), "--kernel", "sgld", "--step-sizes", "1e-3,1e-2",
                 "--budget-steps", "100", "--eta", "2", "--plot", "", "--no-progress",
                 "--ray", "10.0.0.1:6379"])
    err = capsys.readouterr().err
    assert code == 2 and seen == ["10.0.0.1:6379"]
    assert err.startswith("tfp-sgmcmc: error: --ray: could not connect to 10.0.0.1:6379")
    assert len(err.strip().splitlines()) == 1
