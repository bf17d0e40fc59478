"""The Fashion-MNIST ``BayesianModel`` study: its verdict on the goal, and its quick run.

The page's verdict is computed from the results alone (``render``): a synthetic table
where the tuned ``BayesianModel`` wins must read "met", one where it loses "not met"
(power). The quick run (slow tier) fits every method on a subset and reports finite
metrics far above chance.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
SCRIPT = os.path.join(ROOT, "examples", "fashion_mnist_bayesian_model_study.py")
DATA = "/usr/share/datasets/fashion-mnist"

study = pytest.importorskip("fashion_mnist_bayesian_model_study")


def _row(method: str, kind: str, acc: float, nll: float, ece: float, h: float) -> dict:
    row = {"method": method, "kind": kind, "accuracy": acc, "nll": nll, "ece": ece,
           "entropy_digits": h, "entropy_noise": h, "wall_s": 10.0, "epochs": "3"}
    if kind in ("sgmcmc", "rule"):
        row.update({"timings": {"map": 1.0, "tuning": 5.0, "sampling": 2.0},
                    "sampler": "SGLD chosen by MAMBA", "arms": 9, "compile_s": 3.0,
                    "metric_s": 1.0, "tuning_sampling_s": 1.0})
    return row


def _results(tuned: dict, unit_entropy: float = 1.0) -> dict:
    rows = [
        tuned,
        _row("BayesianModel, MAMBA (paper's unit KSD)", "sgmcmc", 0.80, 0.60, 0.05,
             unit_entropy),
        _row("Keras fit", "keras", 0.85, 0.45, 0.03, 0.5),
        _row("MC dropout", "keras", 0.84, 0.44, 0.02, 0.6),
        _row("deep ensemble (5 members)", "keras", 0.86, 0.40, 0.015, 0.7),
    ]
    cfg = {"command": "python examples/fashion_mnist_bayesian_model_study.py", "quick": False,
           "commit": "abc", "versions": {"python": "3.11"}, "machine": "test",
           "num_train": 100, "num_test": 10, "wall_s": 60.0, "load_average": 1.0}
    return {"config": cfg, "networks": {"mlp": {"seconds": 10.0, "rows": rows}}}


def test_the_verdict_reads_met_only_when_the_goal_is_met():
    winner = _row("BayesianModel, MAMBA (curvature KSD)", "sgmcmc", 0.857, 0.35, 0.01, 1.2)
    page = study.render(_results(winner))
    assert "**NLL: met.**" in page and "**ECE: met.**" in page
    assert "**Accuracy within 0.5 points of the best: met.**" in page
    assert "(digits) above `fit`'s: met" in page
    loser = copy.deepcopy(winner)
    loser.update(nll=0.41, ece=0.02, accuracy=0.80, entropy_digits=0.4, entropy_noise=0.4)
    page = study.render(_results(loser, unit_entropy=0.3))
    assert "**NLL: not met.**" in page and "**ECE: not met.**" in page
    assert "**Accuracy within 0.5 points of the best: not met.**" in page
    assert "(noise) above `fit`'s: not met" in page
    assert "deep ensemble (5 members), 0.4000" in page  # the rival is named with its figure


def test_accuracy_exactly_half_a_point_below_the_best_is_within_it():
    # 50 of 10,000 test images: 0.9089 - 0.9039 exceeds 0.005 in floats.
    winner = _row("BayesianModel, MAMBA (curvature KSD)", "sgmcmc", 0.9039, 0.35, 0.01, 1.2)
    results = _results(winner)
    results["networks"]["mlp"]["rows"][4]["accuracy"] = 0.9089
    assert "**Accuracy within 0.5 points of the best: met.**" in study.render(results)
    winner["accuracy"] = 0.9038  # 51 images: not within (power)
    assert "**Accuracy within 0.5 points of the best: not met.**" in study.render(results)


def test_a_reference_row_is_shown_but_left_out_of_the_verdict_and_map_lines_read_it():
    winner = _row("BayesianModel, MAMBA (curvature KSD)", "sgmcmc", 0.857, 0.35, 0.01, 1.2)
    winner["map_epochs"] = [{"accuracy": a, "nll": 0.5, "ece": 0.02}
                            for a in (0.70, 0.80, 0.845, 0.85)]
    results = _results(winner)
    # Better than the winner on everything, but not a baseline: the verdict is unchanged.
    results["networks"]["mlp"]["rows"].append(
        _row("Keras fit with the prior as an L2 penalty", "reference", 0.99, 0.1, 0.001, 2.0))
    page = study.render(results)
    assert "| Keras fit with the prior as an L2 penalty | 0.9900 |" in page
    assert "**NLL: met.**" in page and "**ECE: met.**" in page
    assert "**Accuracy within 0.5 points of the best: met.**" in page
    # The MAP's trace: within a point of its final 85% from epoch 3 on; sampling's gain.
    assert "was 85.00% after its 4 epochs, and within a point of that from epoch 3 on" in page
    assert "MAMBA (curvature KSD) 0.5000 → 0.3500" in page


def test_the_page_names_a_pick_at_the_grids_end_from_the_stored_grid_edges():
    winner = _row("BayesianModel, MAMBA (curvature KSD)", "sgmcmc", 0.857, 0.35, 0.01, 1.2)
    winner["grid_edges"] = {"step_size": "smallest"}
    page = study.render(_results(winner))
    assert "the pick is the smallest step size tried (the grid's end)" in page
    winner["grid_edges"] = {}  # a pick inside the grid: nothing said, whatever the notes
    winner["notes"] = ["MAMBA: the pick is at the grid's end"]
    assert "grid's end" not in study.render(_results(winner))
    del winner["grid_edges"]  # a JSON from before the field: the note is read
    assert "the pick is at the step grid's end" in study.render(_results(winner))


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(DATA), reason=f"Fashion-MNIST not found in {DATA}")
def test_quick_run_reports_every_method(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--networks", "mlp", "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    path = tmp_path / "studies" / f"{study.STUDY_NAME}_quick.json"
    rows = json.loads(path.read_text())["networks"]["mlp"]["rows"]
    assert len(rows) == 7  # three BayesianModel rows, four Keras ones (one a reference)
    for r in rows:
        assert all(math.isfinite(r[k]) for k in ("accuracy", "nll", "ece")), r
        assert r["accuracy"] > 0.5, r
        if r["kind"] == "sgmcmc":
            assert isinstance(r["grid_edges"], dict), r
    page = (tmp_path / "studies" / f"{study.STUDY_NAME}_quick.md").read_text()
    assert "**NLL:" in page and "What the metric changed" in page
