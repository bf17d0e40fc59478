"""``tfp-sgmcmc posterior``: the one-call path from the command line, with its verdict."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from tfp_sgmcmc.cli import main

MODEL_SRC = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.driver import ModelSpec

    def build(n=2000, batch_size=100, num_chains=2, d=2):
        x = np.random.default_rng(0).normal(1.0, 1.0, size=(n, d)).astype("float32")

        def loglik(theta, batch):  # N(x; θ, I) per example, chains broadcast
            return -0.5 * tf.reduce_sum((tf.expand_dims(theta, -2) - batch) ** 2, -1)

        est = sg.MinibatchEstimator(
            loglik, x, batch_size, log_prior_fn=lambda t: -0.5 * tf.reduce_sum(t**2, -1)
        )
        return ModelSpec(est, tf.fill([num_chains, d], 1.0), name="gauss", param_names=["mu"])
    """
)


def _one_line_error(capsys, code, match):
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("tfp-sgmcmc:")]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert match in lines[0], lines[0]


@pytest.fixture()
def model(tmp_path):
    path = tmp_path / "gauss_model.py"
    path.write_text(MODEL_SRC)
    return str(path)


def test_posterior_prints_the_verdict_and_writes_right_draws(model, tmp_path, capsys):
    out, doc = tmp_path / "draws.npz", tmp_path / "summary.json"
    code = main(["posterior", "--model", model, "--num-results", "300", "--seed", "1",
                 "--out", str(out), "--json", str(doc), "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "verdict: ok" in printed and "| mu" in printed
    draws = np.load(out)["mu"]
    assert draws.shape == (300, 4, 2)
    # Exact posterior of the model: N(Σx / (n + 1), I / (n + 1)) per coordinate.
    x = np.random.default_rng(0).normal(1.0, 1.0, size=(2000, 2)).astype("float32")
    mean, sd = x.sum(0) / 2001, 1 / np.sqrt(2001)
    flat = draws.reshape(-1, 2)
    assert np.max(np.abs(flat.mean(0) - mean) / sd) < 0.2
    assert np.all(np.abs(flat.std(0) / sd - 1) < 0.15)
    summary = json.loads(doc.read_text())
    assert summary["verdict"] == "ok" and summary["batch_size"] == 2000
    assert "full batches" in " ".join(summary["notes"])


def test_posterior_flags_are_checked_before_the_model_is_built(model, tmp_path, capsys):
    for extra, match in (
        (["--num-chains", "1"], "--num-chains"),
        (["--num-results", "2"], "--num-results"),
        (["--out", str(tmp_path / "nowhere" / "d.npz")], "does not exist"),
        (["--out", str(tmp_path / "d.txt")], "must end with .npz"),
        (["--json", str(tmp_path / "d.npz")], "must end with .json"),
    ):
        _one_line_error(capsys, main(["posterior", "--model", model, *extra]), match)
