"""The PMF study's budgets, its determinism under gradient budgets, and its page.

The full study takes about forty minutes; these tests run a few-arm version of its quick
path (twice, to show that gradient budgets make the picks reproducible) and draw the page
from a made-up, partial results JSON.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from tfp_sgmcmc import tuning

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def study():
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(ROOT / "examples"))  # the example imports its siblings
    module = _load("mamba_pmf_study")
    yield module
    mp.undo()


def _budgets(study, argv):
    return study._budgets(study._parser().parse_args(argv))


def test_default_budgets_are_gradient_evaluations(study):
    b = _budgets(study, [])
    assert all(x.unit == "gradient_evaluations" for x in b.values())
    assert b["mamba"].amount == study.DEFAULT_MAMBA_GRADIENTS[0] == 60 * 9e5
    assert b["grid"].amount == study.DEFAULT_GRID_GRADIENTS[0]
    assert b["eval"].amount == study.DEFAULT_EVAL_GRADIENTS[0]
    q = _budgets(study, ["--quick"])
    for k, defaults in (
        ("mamba", study.DEFAULT_MAMBA_GRADIENTS),
        ("grid", study.DEFAULT_GRID_GRADIENTS),
        ("eval", study.DEFAULT_EVAL_GRADIENTS),
    ):
        assert q[k].amount == defaults[1] < b[k].amount


def test_time_and_step_options_still_work(study):
    b = _budgets(study, ["--budget", "60", "--grid-steps", "500", "--eval-seconds", "20"])
    assert b["mamba"] == tuning.seconds(60)
    assert b["grid"] == tuning.steps(500)
    assert b["eval"] == tuning.seconds(20)
    b = _budgets(study, ["--budget-gradients", "1e7", "--grid-seconds", "2", "--eval-steps", "9"])
    assert b["mamba"] == tuning.gradient_evaluations(1e7)
    assert b["grid"] == tuning.seconds(2) and b["eval"] == tuning.steps(9)
    with pytest.raises(SystemExit):  # one unit per budget
        study._parser().parse_args(["--grid-steps", "500", "--grid-gradients", "1e6"])


def test_budget_options_are_the_bnn_studys(study):
    # One helper gives both studies the same flags: the PMF study's parser accepts every
    # budget flag of the BNN study's, with the same meaning.
    bnn = _load("mamba_mnist_bnn_study")

    def flags(ap):
        return {
            s for a in ap._actions for s in a.option_strings if "budget" in s or "grid" in s
        } | {s for a in ap._actions for s in a.option_strings if s.startswith("--eval")}

    assert flags(study._parser()) == flags(bnn._parser())
    argv = ["--budget-gradients", "3e6", "--grid-steps", "7", "--eval-seconds", "4"]
    assert _budgets(study, argv) == bnn._budgets(bnn._parser().parse_args(argv))


def _run(study, tmp_path, name):
    argv = [
        "--quick", "--samplers", "SGLD", "--map-steps", "30", "--ksd-samples", "10",
        "--budget-gradients", "4e6", "--grid-gradients", "2e5",
        "--eval-gradients", "4e5", "--out", str(tmp_path / name),
    ]  # fmt: skip
    args = study._parser().parse_args(argv)
    return study.run(args, study._cli.outputs(args))


def _fingerprint(results):
    """What must repeat exactly: the picks, their evaluation, MAMBA's every arm-round."""
    rows = [
        (r["method"], r["label"], r["eval_steps"], r["eval_samples"], r["ksd"], r["xi"], r["rmse"])
        for r in results["rows"]
    ]
    mamba = [
        (q["round"], q["arm_index"], q["steps"], q["samples"], q["spent"], q["metric"])
        for m in results["mamba"].values()
        for q in m["records"]
    ]
    return rows, mamba, [m["best_index"] for m in results["mamba"].values()]


@pytest.mark.slow  # about a minute: the quick study run twice
def test_quick_path_with_gradient_budgets_is_deterministic(study, tmp_path):
    a = _run(study, tmp_path, "a")
    b = _run(study, tmp_path, "b")
    assert _fingerprint(a) == _fingerprint(b)
    # It compared a real run: three methods, finite metrics, and MAMBA's round-0 arms ran
    # exactly the steps their gradient budget buys (an SGLD step at batch n costs n), so
    # the equality above comes from the budget, not from runs too short to differ (a
    # seconds budget gives a load-dependent step count here).
    assert [r["method"] for r in a["rows"]] == list(study.METHODS)
    assert all(math.isfinite(r["ksd"]) and math.isfinite(r["xi"]) for r in a["rows"])
    m = a["mamba"]["SGLD"]
    r0 = m["per_arm_budgets"][0]
    ran = [q for q in m["records"] if q["round"] == 0 and not q["diverged"]]
    assert len(ran) >= 5
    for q in ran:
        n = round(q["batch_fraction"] * 80_000)
        assert q["steps"] == int(r0 // n) > 0 and q["spent"] == q["steps"] * n
    # The JSON beside the run is the results it returned.
    saved = json.loads((tmp_path / "a" / "studies" / "mamba_pmf_quick.json").read_text())
    assert saved["rows"] == json.loads(json.dumps(a["rows"]))


def _row(sampler, method, step, frac, ksd, xi, rmse, leapfrogs=None):
    arm = {"step_size": step, "batch_fraction": frac}
    if leapfrogs:
        arm["num_leapfrog_steps"] = leapfrogs
    return {
        "sampler": sampler, "method": method, "arm": arm, "label": str(arm), "ksd": ksd,
        "xi": xi, "rmse": rmse, "test_loglik": -1.9, "eval_steps": 4500, "eval_samples": 500,
        "eval_sampling_s": 1.0, "eval_diverged": False, "tuning_sampling_s": 1.0,
        "tuning_steps": 10, "elapsed_s": 60.0,
    }  # fmt: skip


def _mamba():
    recs = [
        {"round": 0, "arm_index": i, "batch_fraction": f, "metric": m, "steps": s,
         "samples": s // 10, "spent": 800.0 * s, "sampling_s": 0.1, "metric_s": 0.1,
         "diverged": False}
        for i, (f, m, s) in enumerate([(0.01, 50.0, 600), (0.1, 80.0, 60), (1.0, math.inf, 6)])
    ]  # fmt: skip
    recs.append(dict(recs[0], round=1, metric=40.0))
    return {"best_index": 0, "round_sizes": [3, 1], "per_arm_budgets": [1.0, 3.0],
            "records": recs, "compile_s": 1.0, "metric_s": 1.0}  # fmt: skip


def test_partial_results_render_a_page_that_says_so(study, tmp_path):
    grad = {"amount": 5.4e7, "unit": "gradient_evaluations"}
    results = {
        "config": {
            "budgets": {
                "mamba": grad,
                "grid": dict(grad, amount=8e6),
                "eval": dict(grad, amount=1.8e7),
            },
            "idle_gradients_per_second": 9e5,
            "ksd_max_samples": 100,
            "mamba_thin": 10,
            "eval_samples": 500,
            "map_steps": 500,
            "step_grid_log10": [-2.0, -7.5],
            "batch_fractions": [1.0, 0.1, 0.01],
            "leapfrogs": [5, 10],
            "samplers": ["SGLD", "SGHMC"],
            "quick": False,
            "data": "synthetic",
            "num_train": 80000,
            "map_test_rmse": 1.024,
            "reference_test_rmse": 0.835,
            "ground_truth": {
                "method": "gibbs",
                "chains": 4,
                "draws_per_chain": 3000,
                "ess": {"min": 1793.0},
                "rhat": {"max": 1.014},
                "relative_mcse_of_std_norm": 0.0076,
            },
            "command": "python examples/mamba_pmf_study.py",
            "wall_s": 600.0,
            "load_average": {"mean": 3.0, "min": 2.0, "max": 4.0, "n": 30},
        },  # fmt: skip
        "rows": [
            _row("SGLD", "MAMBA-KSD", 1e-5, 0.01, 200.0, 0.6, 1.02),
            _row("SGLD", "Grid", 10**-3.5, 0.1, 400.0, 0.5, 1.01),
            _row("SGLD", "Heuristic", 1 / 80000, 0.1, 300.0, 0.7, 1.03),
            _row("SGHMC", "MAMBA-KSD", 1e-6, 0.01, 100.0, 0.9, 1.02, leapfrogs=5),
            _row("SGHMC", "Grid", 1e-5, 0.1, 900.0, 0.8, 1.03, leapfrogs=10),
            dict(
                _row("SGHMC", "Heuristic", 1 / 80000, 0.1, math.inf, math.inf, math.nan, 10),
                eval_diverged=True,
                eval_steps=2,
                eval_samples=2,
                test_loglik=math.nan,
            ),
        ],
        "mamba": {"SGLD": _mamba(), "SGHMC": _mamba()},
        "finished": False,
    }
    sghmc_done = json.loads(json.dumps(results))
    results["rows"] = results["rows"][:4]
    study.publish(json.loads(json.dumps(results)), study._cli.Outputs(str(tmp_path)))
    page = (tmp_path / "studies" / "mamba_pmf.md").read_text()
    assert (tmp_path / "figures" / "mamba_pmf.png").is_file()
    assert "## Results (partial)" in page
    assert "samplers with all three rows: SGLD" in page
    # The chosen arm in the paper's Table 6 form beside the paper's arm, KSD, ξ and RMSE.
    assert "| SGLD | MAMBA-KSD | −5, 1% | 200 | 60.0 | 1.020 |" in page
    assert "| −5, 1% | 213 | 69.2 | 1.13 |" in page
    assert "| SGHMC | MAMBA-KSD | −6, 1%, L=5 |" in page
    assert "| −6, 1%, L=5 | 543 | 83.7 | 1.10 |" not in page  # SGHMC-CV's, not SGHMC's
    # The findings are counted over the samplers with all three rows only (SGLD), ours
    # against the paper's.
    assert "MAMBA-KSD picks a 1% batch for 1 of 1 samplers (paper: 1 of 1)" in page
    assert "lowest KSD of the three for 1 of 1 samplers (paper: 1 of 1): SGLD" in page
    assert "ξ is lower than the grid's for 0 of 1 samplers (paper: 1 of 1): none" in page
    assert "ξ is lower than the heuristic's for 1 of 1 samplers (paper: 1 of 1): SGLD" in page
    assert "test RMSE is lower than the grid's for 0 of 1 samplers (paper: 1 of 1)" in page
    # Budgets: round 0's steps by batch size, and the evaluation in epochs.
    assert "6 steps at a 100% batch (2 of 2 arms without a thinned sample)" in page
    assert "225 epochs" in page  # 1.8e7 gradients / 80,000 ratings
    assert "T = 5.4e7 gradients (≈ 60 s idle at 1%)" in page
    assert "exact posterior (Gibbs reference) 0.835" in page
    again = json.loads((tmp_path / "studies" / "mamba_pmf.json").read_text())
    assert again["rows"] == results["rows"]
    # With SGHMC's three rows the counts cover both samplers, and a diverged heuristic
    # evaluation is reported as such (no metric), not as a number.
    study.publish(sghmc_done, study._cli.Outputs(str(tmp_path)))
    page = (tmp_path / "studies" / "mamba_pmf.md").read_text()
    assert "samplers with all three rows: SGLD, SGHMC" in page
    assert "MAMBA-KSD picks a 1% batch for 2 of 2 samplers (paper: 2 of 2)" in page
    assert (
        "RMSE grid picks a larger step than MAMBA-KSD for 2 of 2 samplers (paper: 2 of 2)" in page
    )
    assert "| SGHMC | Heuristic | −4.9, 10%, L=10 | diverged | – | – | – | 2 |" in page
    assert "paper KSD 3942, ξ×100 50.3): diverged after 2 steps." in page
