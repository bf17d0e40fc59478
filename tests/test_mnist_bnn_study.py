"""The MNIST BNN study's command line (budgets) and its page, drawn from a results JSON.

The study itself takes about half an hour; these tests run none of it: they check that
the options map to the intended budgets and that a saved (here: made-up, partial) results
JSON renders a page that says what finished and counts the paper's findings on its rows.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from tfp_sgmcmc import tuning

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def study():
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(ROOT / "examples"))  # the example imports its sibling `_cli`
    spec = importlib.util.spec_from_file_location(
        "mamba_mnist_bnn_study", ROOT / "examples" / "mamba_mnist_bnn_study.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    mp.undo()


def _budgets(study, argv):
    return study._budgets(study._parser().parse_args(argv))


def test_default_budgets_are_gradient_evaluations(study):
    b = _budgets(study, [])
    assert all(x.unit == "gradient_evaluations" for x in b.values())
    assert b["mamba"].amount == study.DEFAULT_MAMBA_GRADIENTS[0]
    assert b["eval"].amount == study.DEFAULT_EVAL_GRADIENTS[0]
    q = _budgets(study, ["--quick"])
    assert q["grid"].amount == study.DEFAULT_GRID_GRADIENTS[1] < b["grid"].amount


def test_time_and_step_options_still_work(study):
    b = _budgets(study, ["--budget", "60", "--grid-steps", "1000", "--eval-steps", "500"])
    assert b["mamba"] == tuning.seconds(60)
    assert b["grid"] == tuning.steps(1000)
    assert b["eval"] == tuning.steps(500)
    b = _budgets(study, ["--grid-seconds", "2", "--eval-seconds", "30"])
    assert b["grid"] == tuning.seconds(2) and b["eval"] == tuning.seconds(30)
    with pytest.raises(SystemExit):  # one unit per budget
        study._parser().parse_args(["--budget", "60", "--budget-gradients", "1e6"])


def _row(sampler, method, step, frac, ece, leapfrogs=None):
    arm = {"step_size": step, "batch_fraction": frac}
    if leapfrogs:
        arm["num_leapfrog_steps"] = leapfrogs
    return {
        "sampler": sampler, "method": method, "arm": arm, "label": str(arm), "ksd": 100.0,
        "accuracy": 0.7, "log_loss": 0.8, "ece": ece, "mce": 0.2, "eval_steps": 160,
        "eval_samples": 50, "eval_sampling_s": 1.0, "eval_diverged": False,
        "tuning_sampling_s": 1.0, "tuning_steps": 10,
    }  # fmt: skip


def _mamba(frac_best):
    recs = [
        {"round": 0, "arm_index": i, "batch_fraction": f, "metric": m, "steps": s,
         "samples": s, "spent": 600.0 * s, "sampling_s": 0.1, "metric_s": 0.1,
         "diverged": False}
        for i, (f, m, s) in enumerate([(0.01, 50.0, 70), (0.1, 80.0, 7), (1.0, math.inf, 0)])
    ]  # fmt: skip
    recs.append(dict(recs[0], round=1, metric=40.0))
    return {"best_index": 0 if frac_best == 0.01 else 1, "round_sizes": [3, 1],
            "per_arm_budgets": [1.0, 3.0], "records": recs, "compile_s": 1.0,
            "metric_s": 1.0}  # fmt: skip


def test_partial_results_render_a_page_that_says_so(study, tmp_path):
    cfg_budget = {"amount": 4.8e6, "unit": "gradient_evaluations"}
    results = {
        "config": {
            "budgets": {"mamba": cfg_budget, "grid": dict(cfg_budget, amount=3.6e5),
                        "eval": dict(cfg_budget, amount=9.6e5)},
            "idle_gradients_per_second": 1.2e5, "ksd_max_samples": 8, "mamba_thin": 1,
            "eval_samples": 50, "map_steps": 3000, "step_grid_log10": [-2.0, -7.5],
            "batch_fractions": [1.0, 0.1, 0.01], "leapfrogs": [5, 10],
            "samplers": ["SGLD", "SGHMC"], "quick": False, "data": "synthetic",
            "num_train": 60000, "map_metrics": {"accuracy": 0.71, "ece": 0.09, "mce": 0.11},
            "command": "python examples/mamba_mnist_bnn_study.py", "wall_s": 600.0,
            "load_average": {"mean": 5.0, "min": 3.0, "max": 7.0, "n": 30},
        },  # fmt: skip
        "rows": [
            _row("SGLD", "MAMBA-KSD", 10**-5.5, 0.01, 0.05),
            _row("SGLD", "Grid", 10**-3.5, 0.1, 0.15),
            _row("SGLD", "Heuristic", 1 / 60000, 0.1, 0.08),
            _row("SGHMC", "MAMBA-KSD", 1e-6, 0.01, 0.03, leapfrogs=5),
        ],
        "mamba": {"SGLD": _mamba(0.01), "SGHMC": _mamba(0.1)},
        "finished": False,
    }
    json_path = tmp_path / "in.json"
    json_path.write_text(json.dumps(results))
    study.publish(json.loads(json_path.read_text()), study._cli.Outputs(str(tmp_path)))
    page = (tmp_path / "studies" / "mamba_mnist_bnn.md").read_text()
    assert (tmp_path / "figures" / "mamba_mnist_bnn.png").is_file()
    assert "## Results (partial)" in page
    assert "samplers with all three rows: SGLD" in page
    # The table shows the chosen arm in the paper's form beside the paper's.
    assert "| SGLD | MAMBA-KSD | −5.5, 1% |" in page and "| −5.5, 1% | 1.0 | 36.4 |" in page
    assert "| SGHMC | MAMBA-KSD | −6, 1%, L=5 |" in page
    # The findings are counted over the samplers with all three rows only (SGLD).
    assert "MAMBA-KSD picks a 1% batch for 1 of 1 samplers (paper: 1 of 1)" in page
    assert "lower ECE than the grid's for 1 of 1 samplers (paper: 1 of 1): SGLD" in page
    assert "than the heuristic's for 1 of 1 (paper: 0 of 1): SGLD" in page
    # Round 0's steps by batch size, from the MAMBA records.
    assert "0 steps at a 100% batch (2 of 2 arms without a sample)" in page
    assert "16 epochs" in page  # 9.6e5 gradients / 60,000 examples
    # The JSON written beside the page is the one it was drawn from.
    again = json.loads((tmp_path / "studies" / "mamba_mnist_bnn.json").read_text())
    assert again["rows"] == results["rows"]
