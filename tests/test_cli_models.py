"""``tfp-sgmcmc`` on the built-in pmf and mnist_bnn models, from small files of each real format."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tfp_sgmcmc.cli import main
from tfp_sgmcmc.driver.model import ModelError, load_model
from tfp_sgmcmc.models.data_files import MNIST_IDX_FILES, write_idx


def _udata(tmp_path, num_users=25, num_items=30, per_user=8, seed=0) -> str:
    rng = np.random.default_rng(seed)
    lines = []
    for u in range(1, num_users + 1):
        for i in rng.choice(num_items, per_user, replace=False) + 1:
            lines.append(f"{u}\t{i}\t{rng.integers(1, 6)}\t{881250949 + u}\n")
    p = tmp_path / "u.data"
    p.write_text("".join(lines))
    return str(p)


def _ratings_csv(tmp_path, seed=1) -> str:
    rng = np.random.default_rng(seed)
    rows = ["userId,movieId,rating,timestamp\n"]
    for u in (3, 8, 15, 42):  # sparse ids: re-indexed to 0..3
        for m in rng.choice([1, 7, 31, 1029, 2571, 60069], 4, replace=False):
            rows.append(f"{u},{m},{rng.integers(1, 11) / 2:.1f},1260759144\n")
    p = tmp_path / "ratings.csv"
    p.write_text("".join(rows))
    return str(p)


def _mnist_dir(tmp_path, gz: bool, n_train=40, n_test=12) -> str:
    rng = np.random.default_rng(0)
    d = tmp_path / ("idx_gz" if gz else "idx")
    d.mkdir()
    arrays = {
        ("train", "images"): rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        ("train", "labels"): rng.integers(0, 10, n_train).astype(np.uint8),
        ("test", "images"): rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        ("test", "labels"): rng.integers(0, 10, n_test).astype(np.uint8),
    }
    for key, a in arrays.items():
        write_idx(str(d / (MNIST_IDX_FILES[key] + (".gz" if gz else ""))), a)
    return str(d)


def _sample(model, args, run_dir, n=12):
    cmd = [
        "sample",
        "--model",
        model,
        "--kernel",
        "sgld",
        "--step-size",
        "1e-5",
        "--num-samples",
        str(n),
        "--chunk-size",
        "6",
        "--no-progress",
        "--run-dir",
        run_dir,
        "--no-xla",
    ]  # graph mode: these runs are too short to repay an XLA compile
    for a in args:
        cmd += ["--model-arg", a]
    return main(cmd)


def test_pmf_sample_and_diagnose_from_udata(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert _sample("pmf", [f"ratings={_udata(tmp_path)}", "batch_size=20"], run) == 0
    assert main(["diagnose", "--run-dir", run, "--max-samples", "12"]) == 0
    out = json.load(open(os.path.join(run, "diagnostics.json")))
    assert np.isfinite(out["ksd"]) and out["num_draws"] == 12
    assert "KSD" in capsys.readouterr().out


def test_pmf_tune_from_ratings_csv(tmp_path, capsys):
    code = main(
        [
            "tune",
            "--model",
            "pmf",
            "--model-arg",
            f"ratings={_ratings_csv(tmp_path)}",
            "--model-arg",
            "batch_size=4",
            "--kernel",
            "sgld",
            "--step-sizes",
            "1e-5,1e-4,1e-3",
            "--budget-steps",
            "40",
            "--thin",
            "2",
            "--no-progress",
            "--no-xla",
            "--plot",
            str(tmp_path / "t.png"),
        ]
    )
    assert code == 0
    assert "step_size" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["idx", "idx_gz", "npz"])
def test_mnist_bnn_sample_from_each_format(tmp_path, fmt, capsys):
    if fmt == "npz":
        rng = np.random.default_rng(0)
        path = tmp_path / "mnist.npz"
        np.savez(
            path,
            x_train=rng.integers(0, 256, (40, 28, 28), dtype=np.uint8),
            y_train=rng.integers(0, 10, 40),
            x_test=rng.integers(0, 256, (9, 28, 28), dtype=np.uint8),
            y_test=rng.integers(0, 10, 9),
        )
        path = str(path)
    else:
        path = _mnist_dir(tmp_path, gz=fmt == "idx_gz")
    run = str(tmp_path / "run")
    assert _sample("mnist_bnn", [f"path={path}", "batch_size=10"], run, n=6) == 0


@pytest.mark.slow
def test_mnist_bnn_diagnose(tmp_path):
    run = str(tmp_path / "run")
    assert (
        _sample("mnist_bnn", [f"path={_mnist_dir(tmp_path, gz=True)}", "batch_size=10"], run, n=6)
        == 0
    )
    assert main(["diagnose", "--run-dir", run, "--max-samples", "6"]) == 0
    assert np.isfinite(json.load(open(os.path.join(run, "diagnostics.json")))["ksd"])


def _one_line_error(capsys, *needles):
    err = capsys.readouterr().err.strip()
    assert err.startswith("tfp-sgmcmc: error:") and "\n" not in err, err
    for n in needles:
        assert n in err, err


def test_missing_and_malformed_files_exit_2_without_run_dir(tmp_path, capsys):
    run = str(tmp_path / "run")
    missing = str(tmp_path / "nope" / "u.data")
    assert _sample("pmf", [f"ratings={missing}"], run) == 2
    _one_line_error(capsys, missing, "no such file")
    bad = tmp_path / "bad.data"
    bad.write_text("1\t2\t3\t4\n1\t3\t9\t4\n")
    assert _sample("pmf", [f"ratings={bad}"], run) == 2
    _one_line_error(capsys, str(bad), "out of range")
    d = _mnist_dir(tmp_path, gz=False)
    f = os.path.join(d, MNIST_IDX_FILES[("train", "images")])
    with open(f, "rb") as fh:
        raw = fh.read()
    with open(f, "wb") as fh:
        fh.write(raw[:-100])  # truncated
    assert _sample("mnist_bnn", [f"path={d}"], run) == 2
    _one_line_error(capsys, f, "truncated")
    assert _sample("mnist_bnn", [], run) == 2  # no data and no synthetic: never a fallback
    _one_line_error(capsys, "synthetic=true")
    assert (
        main(
            [
                "tune",
                "--model",
                "pmf",
                "--kernel",
                "sgld",
                "--step-sizes",
                "1e-4",
                "--budget-steps",
                "10",
                "--model-arg",
                f"ratings={missing}",
            ]
        )
        == 2
    )
    _one_line_error(capsys, missing)
    assert not os.path.exists(run)  # nothing half-written


def test_builder_arguments():
    with pytest.raises(ModelError, match="must be true or false"):
        load_model("pmf", {"synthetic": "maybe"})
    with pytest.raises(ModelError, match="num_chains"):
        load_model("mnist_bnn", {"path": "x", "num_chains": 0, "synthetic": "false"})
