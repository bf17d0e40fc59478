"""The Fashion-MNIST BNN study's quick mode runs end to end and reports every method.

Runs ``examples/fashion_mnist_bnn_study.py --quick`` into a temporary folder and reads
the results JSON and the page it writes: every method (the paper's six samplers and
the three Keras baselines) has a row with finite accuracy, NLL and ECE, and its test
accuracy is far above chance (10 classes: 0.1). An unknown ``--samplers`` entry is a
``ValueError`` naming the option.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "fashion_mnist_bnn_study.py")
DATA = "/usr/share/datasets/fashion-mnist"
FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
         "t10k-labels-idx1-ubyte")  # fmt: skip
SAMPLERS = ("SGLD", "SGLD-CV", "SGHMC", "SGHMC-CV", "SGNHT", "SGNHT-CV")
METHODS = (
    *(f"{s} (MAMBA-KSD)" for s in SAMPLERS),
    "Keras MAP (model.fit)",
    "MC dropout",
    "deep ensemble (5 members)",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all(
            os.path.isfile(os.path.join(DATA, f)) or os.path.isfile(os.path.join(DATA, f + ".gz"))
            for f in FILES
        ),
        reason=f"Fashion-MNIST IDX files not found in {DATA}",
    ),
]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("fashion")
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--out", str(out)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stem = out / "studies" / "fashion_mnist_bnn_quick"
    with open(stem.with_suffix(".json"), encoding="utf-8") as f:
        results = json.load(f)
    with open(stem.with_suffix(".md"), encoding="utf-8") as f:
        page = f.read()
    assert (out / "figures" / "fashion_mnist_bnn_quick.png").is_file()
    return results, page


def test_every_method_has_finite_metrics_far_above_chance(quick_run: tuple[dict, str]) -> None:
    results, _ = quick_run
    assert results["finished"]
    rows = {r["method"]: r for r in results["rows"]}
    assert set(rows) == set(METHODS)
    for name, r in rows.items():
        for key in ("accuracy", "nll", "ece", "wall_s"):
            assert math.isfinite(r[key]), (name, key, r[key])
        # Ten classes: chance is 0.1; every method must reach at least 3× that.
        assert r["accuracy"] > 0.3, (name, r["accuracy"])
        assert 0.0 <= r["ece"] <= 1.0, (name, r["ece"])
        assert r["nll"] < math.log(10), (name, r["nll"])  # better than the uniform guess


def test_baselines_get_the_sgmcmc_wall_time(quick_run: tuple[dict, str]) -> None:
    results, _ = quick_run
    budget = results["config"]["baseline_seconds"]
    sg_walls = [r["wall_s"] for r in results["rows"] if r["kind"] == "sgmcmc"]
    assert budget == pytest.approx(max(sg_walls))
    for r in results["rows"]:
        if r["kind"] != "sgmcmc":
            # Stopped at the first batch past the budget: never short of it.
            assert r["wall_s"] >= budget * 0.99, (r["method"], r["wall_s"], budget)


def test_page_has_the_command_figure_and_every_row(quick_run: tuple[dict, str]) -> None:
    _, page = quick_run
    assert "python examples/fashion_mnist_bnn_study.py --quick --write-docs" in page
    figure = page.index("![")
    table = page.index("| method | accuracy | NLL | ECE % | wall s |")
    assert figure < table
    for m in METHODS:
        assert f"| {m} |" in page


def test_every_sampler_is_tuned_on_its_own_grid(quick_run: tuple[dict, str]) -> None:
    results, _ = quick_run
    rows = {r["method"].split(" ")[0]: r for r in results["rows"] if r["kind"] == "sgmcmc"}
    assert tuple(rows) == SAMPLERS
    for name, r in rows.items():
        grid = r["grid"]
        assert set(r["arm"]) == set(grid), name
        for key, value in r["arm"].items():
            assert value in grid[key], (name, key, value)
        # Only SGHMC(-CV) has a leapfrog axis.
        assert ("num_leapfrog_steps" in grid) == name.startswith("SGHMC"), name
        assert r["samples"] >= 1 and not r["diverged"], name


def test_unknown_sampler_is_a_value_error(tmp_path: os.PathLike[str]) -> None:
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--samplers", "SGLD,SGLD-XX", "--out", str(tmp_path)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "ValueError: `--samplers`" in proc.stderr
    assert "SGLD-XX" in proc.stderr
