"""The ``tfp-sgmcmc`` command line: sample / resume / diagnose / tune and its errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from tfp_sgmcmc.cli import main
from tfp_sgmcmc.driver import open_run

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

    def not_a_spec():
        return 42
    """
)


@pytest.fixture()
def model(tmp_path):
    path = tmp_path / "gauss_model.py"
    path.write_text(MODEL_SRC)
    return str(path)


def _sample_args(model, run_dir, *extra):
    return [
        "sample",
        "--model",
        model,
        "--kernel",
        "sgld",
        "--step-size",
        "1e-4",
        "--num-samples",
        "120",
        "--chunk-size",
        "50",
        "--thin",
        "2",
        "--seed",
        "3",
        "--run-dir",
        run_dir,
        "--no-xla",
        "--no-progress",
        *extra,
    ]


def _one_line_error(capsys, code, match):
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("tfp-sgmcmc:")]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert match in lines[0], lines[0]


def test_a_relative_model_path_resumes_from_anywhere(model, tmp_path, monkeypatch, capsys):
    """The model file is stored as an absolute path: ``--resume --run-dir`` works from
    another directory, and so does naming the same file again."""
    monkeypatch.chdir(tmp_path)
    run_dir = str(tmp_path / "run")
    assert main(_sample_args("gauss_model.py", run_dir)) == 0
    first = open_run(run_dir).samples()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["sample", "--run-dir", run_dir, "--resume", "--no-progress"]) == 0
    assert main(["sample", "--run-dir", run_dir, "--resume", "--no-progress",
                 "--model", model]) == 0
    np.testing.assert_array_equal(open_run(run_dir).samples(), first)
    assert open_run(run_dir).metadata["model"] == model


def test_sample_resume_diagnose(model, tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    assert main(_sample_args(model, run_dir)) == 0
    run = open_run(run_dir)
    assert run.complete and run.samples().shape == (120, 2, 2)
    assert run.metadata["model"] == model and run.metadata["param_names"] == ["mu"]
    # The posterior mean is near the data mean ≈ 1 (N = 2000, prior N(0, I)).
    assert abs(run.samples()[20:].mean() - 1.0) < 0.2
    first = run.samples()
    # --resume needs only the run directory (the rest is in the stored config).
    assert main(["sample", "--run-dir", run_dir, "--resume", "--no-progress"]) == 0
    np.testing.assert_array_equal(open_run(run_dir).samples(), first)
    capsys.readouterr()
    assert main(["diagnose", "--run-dir", run_dir, "--max-samples", "100"]) == 0
    out = capsys.readouterr().out
    assert "KSD" in out and "FSSD" in out and "ESS" in out
    with open(os.path.join(run_dir, "diagnostics.json")) as f:
        diag = json.load(f)
    assert diag["num_draws"] == 120 and diag["num_chains"] == 2
    assert diag["ksd"] > 0 and np.isfinite(diag["fssd"]) and diag["ess_min"] > 1
    assert len(diag["ess_per_parameter"]["mu"]) == 2


def test_diagnose_and_arviz_report_shared_minibatches(model, tmp_path, capsys):
    """Two chains: independent minibatches by default; `--shared-batches` is flagged."""
    pytest.importorskip("arviz")
    from tfp_sgmcmc.export import chains_independent, to_arviz

    for flag, expected in (([], True), (["--shared-batches"], False)):
        run_dir = str(tmp_path / f"run{len(flag)}")
        assert main(_sample_args(model, run_dir, *flag)) == 0
        assert chains_independent(run_dir) is expected
        capsys.readouterr()
        assert main(["diagnose", "--run-dir", run_dir, "--max-samples", "40"]) == 0
        captured = capsys.readouterr()
        with open(os.path.join(run_dir, "diagnostics.json")) as f:
            assert json.load(f)["independent_chains"] is expected
        if expected:
            assert "| chains' minibatches | independent |" in captured.out
            assert "shared each step's minibatch" not in captured.err
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                idata = to_arviz(run_dir)
        else:
            assert "| chains' minibatches | SHARED" in captured.out
            assert "shared each step's minibatch" in captured.err
            with pytest.warns(UserWarning, match="shared each step's minibatch"):
                idata = to_arviz(run_dir)
        assert idata.posterior.attrs["independent_chains"] == int(expected)


def test_errors_are_one_line(model, tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    code = main(_sample_args(str(tmp_path / "missing.py"), run_dir))
    _one_line_error(capsys, code, "does not exist")
    code = main(_sample_args(model + ":nope", run_dir))
    _one_line_error(capsys, code, "no function 'nope'")
    code = main(_sample_args(model + ":not_a_spec", run_dir))
    _one_line_error(capsys, code, "must return a ModelSpec")
    code = main(_sample_args("no_such_model", run_dir))
    _one_line_error(capsys, code, "unknown model")
    code = main(_sample_args(model, run_dir, "--model-arg", "batch_size"))
    _one_line_error(capsys, code, "name=value")
    # Bad hyperparameters: the constructors' ValueError, naming the argument.
    args = _sample_args(model, run_dir)
    args[args.index("--step-size") + 1] = "-1"
    _one_line_error(capsys, main(args), "`--step-size`")
    args = _sample_args(model, run_dir, "--kernel-arg", "num_leapfrog_steps=0")
    args[args.index("--kernel") + 1] = "sghmc"
    code = main(args)
    _one_line_error(capsys, code, "`--kernel-arg num_leapfrog_steps`")
    args = _sample_args(model, run_dir)
    args[args.index("--kernel") + 1] = "hmc9"
    _one_line_error(capsys, main(args), "unknown kernel")
    args = _sample_args(model, run_dir)
    args[args.index("--num-samples") + 1] = "0"
    _one_line_error(capsys, main(args), "`--num-samples`")
    # Never overwrite a run without being asked; corrupted run directories.
    assert main(_sample_args(model, run_dir)) == 0
    _one_line_error(capsys, main(_sample_args(model, run_dir)), "--overwrite")
    _one_line_error(capsys, main(_sample_args(model, run_dir, "--resume", "--thin", "3")), "thin")
    with open(os.path.join(run_dir, "checkpoint.npz"), "wb") as f:
        f.write(b"garbage")
    _one_line_error(capsys, main(["diagnose", "--run-dir", run_dir]), "corrupted")
    _one_line_error(capsys, main(["sample", "--run-dir", run_dir, "--resume"]), "corrupted")
    _one_line_error(capsys, main(["diagnose", "--run-dir", str(tmp_path)]), "not a run directory")
    assert main(_sample_args(model, run_dir, "--overwrite")) == 0


def test_tune_prints_round_table_and_writes_plot(model, tmp_path, capsys):
    plot = tmp_path / "mamba.png"
    code = main(
        [
            "tune",
            "--model",
            model,
            "--kernel",
            "sgld",
            "--step-sizes",
            "1e-5,1e-4,1e-2",
            "--budget-steps",
            "600",
            "--eta",
            "3",
            "--thin",
            "2",
            "--plot",
            str(plot),
            "--no-xla",
            "--no-progress",
            "--model-arg",
            "num_chains=1",  # MAMBA runs one chain per arm
        ]
    )
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, captured.err
    assert "|" in out and "step_size" in out
    assert plot.exists() and plot.stat().st_size > 1000


def test_tune_flag_values_are_checked_before_the_run(model, tmp_path, capsys):
    """A bare ``--plot`` name made matplotlib write ``NAME.png`` (replacing it); an unknown
    format failed after the run; non-finite sizes, budgets and a negative temperature
    gave tracebacks or named the wrong flag."""
    base = ["tune", "--model", model, "--kernel", "sgld", "--step-sizes", "1e-5,1e-4,1e-2",
            "--budget-steps", "600", "--no-xla", "--no-progress", "--model-arg", "num_chains=1"]
    (tmp_path / "result.png").write_text("the user's own file")
    cases = [
        (["--plot", str(tmp_path / "result")], "`--plot`", "no extension"),
        (["--plot", str(tmp_path / "tune.txt")], "`--plot`", "unknown image format"),
        (["--batch-sizes", "inf", "--no-plot"], "`--batch-sizes`", "positive integers"),
        (["--batch-sizes", "nan", "--no-plot"], "`--batch-sizes`", "positive integers"),
        (["--temperature", "-1", "--no-plot"], "`--temperature`", ">= 0"),
    ]
    for extra, flag, what in cases:
        code = main([*base, *extra])
        err = capsys.readouterr().err
        assert code == 2 and flag in err and what in err and "Traceback" not in err, err
    i = base.index("--budget-steps")
    for value in ("inf", "1e400"):
        seconds = [*base[:i], "--budget-seconds", value, *base[i + 2 :], "--no-plot"]
        _one_line_error(capsys, main(seconds), "`--budget-seconds`")
    assert (tmp_path / "result.png").read_text() == "the user's own file"
    assert not (tmp_path / "result").exists() and not (tmp_path / "tune.txt").exists()


def test_diagnose_json_and_short_runs(model, tmp_path, capsys):
    """``--json`` is checked before any work (a directory left a stray ``.tmp`` and a
    traceback; a missing directory failed after the work) and may not replace the run's
    own files; a one-draw run is named as such."""
    run_dir = str(tmp_path / "run")
    assert main(_sample_args(model, run_dir)) == 0
    config = (tmp_path / "run" / "config.json").read_text()
    (tmp_path / "adir").mkdir()
    for path, what in [(tmp_path / "adir", "is a directory"),
                       (tmp_path / "nodir" / "x.json", "does not exist"),
                       (tmp_path / "run" / "config.json", "run's own files")]:
        _one_line_error(capsys, main(["diagnose", "--run-dir", run_dir, "--json", str(path)]),
                        what)
    assert (tmp_path / "run" / "config.json").read_text() == config
    assert os.listdir(tmp_path / "adir") == [] and not (tmp_path / "adir.tmp").exists()
    one = str(tmp_path / "one")
    args = _sample_args(model, one)
    args[args.index("--num-samples") + 1] = "1"
    assert main(args) == 0
    _one_line_error(capsys, main(["diagnose", "--run-dir", one]), "needs at least 2")


def test_tune_plot_path_and_grid_flags(model, tmp_path, monkeypatch, capsys):
    """``--plot`` is checked before the run; by default no existing file is replaced;
    errors about the grid name tune's plural flags."""
    from tfp_sgmcmc.cli import _plot_path

    base = ["tune", "--model", model, "--kernel", "sgld", "--budget-steps", "600",
            "--no-xla", "--no-progress", "--model-arg", "num_chains=1"]
    code = main([*base, "--step-sizes", "1e-5,1e-4,1e-2",
                 "--plot", str(tmp_path / "missing" / "x.png")])
    err = capsys.readouterr().err
    assert code == 2 and "`--plot`" in err and "does not exist" in err
    code = main([*base, "--step-sizes", "1e-5,1e-4,-1e-2", "--no-plot"])
    err = capsys.readouterr().err
    assert code == 2 and "`--step-sizes` must be > 0, got -0.01" in err
    monkeypatch.chdir(tmp_path)
    assert _plot_path(None) == "mamba.png"
    (tmp_path / "mamba.png").write_text("the user's own file")
    (tmp_path / "mamba-2.png").write_text("another")
    assert _plot_path(None) == "mamba-3.png"
    assert _plot_path("mamba.png") == "mamba.png"  # named explicitly: replaced
    # `--plot ''` writes no plot (it once wrote a file named ".png" in the working directory).
    before = set(os.listdir(tmp_path))
    code = main([*base, "--step-sizes", "1e-5,1e-4,1e-2", "--plot", ""])
    assert code == 0 and set(os.listdir(tmp_path)) == before


@pytest.mark.subprocess
def test_ctrl_c_in_a_real_process_then_resume(model, tmp_path):
    """SIGINT (Ctrl-C) to a ``python -m tfp_sgmcmc.cli sample`` process: exit 130,
    no traceback, the run resumes to the uninterrupted draws."""
    from tfp_sgmcmc.driver.checkpoint import read_checkpoint

    run_dir = str(tmp_path / "interrupted")
    args = _sample_args(model, run_dir)
    for flag, value in (("--num-samples", "100"), ("--thin", "20"), ("--chunk-size", "10")):
        args[args.index(flag) + 1] = value
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    # The real CLI in a real process, paced by a pause before each checkpoint
    # (numerics untouched) so the interrupt lands part-way on a fast machine.
    child = (
        "import signal, sys, time\n"
        # A shell's background job starts with SIGINT ignored, and Python keeps
        # an inherited SIG_IGN: restore Ctrl-C -> KeyboardInterrupt.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import tfp_sgmcmc.driver.sampler as s\n"
        "from tfp_sgmcmc.cli import main\n"
        "_w = s.write_checkpoint\n"
        "s.write_checkpoint = lambda *a, **k: (time.sleep(0.1), _w(*a, **k))\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        # The deadline only ends a hung child (a loaded machine imports slowly).
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if read_checkpoint(run_dir).num_written >= 10:
                    break
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.01)
        assert proc.poll() is None, "the run finished before it could be interrupted"
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "resume" in err
    written = read_checkpoint(run_dir).num_written
    assert 0 < written < 100
    assert main(["sample", "--run-dir", run_dir, "--resume", "--no-progress"]) == 0
    ref_dir = str(tmp_path / "reference")
    ref_args = list(args)
    ref_args[ref_args.index("--run-dir") + 1] = ref_dir
    assert main(ref_args) == 0
    np.testing.assert_array_equal(open_run(run_dir).samples(), open_run(ref_dir).samples())


def test_kernel_arg_typo_is_one_line_naming_the_flag(model, tmp_path, capsys):
    """``--kernel-arg frictoin=0.1`` gave a full traceback and exit status 1."""
    args = _sample_args(model, str(tmp_path / "run"), "--kernel-arg", "frictoin=0.1")
    args[args.index("--kernel") + 1] = "sghmc"
    code = main(args)
    _one_line_error(capsys, code, "`--kernel-arg frictoin=...`")
    capsys.readouterr()
    code = main(args)
    err = capsys.readouterr().err
    assert "did you mean 'friction'" in err and "Traceback" not in err
    tune = ["tune", "--model", model, "--kernel", "sghmc", "--step-sizes", "1e-5,1e-4",
            "--budget-steps", "100", "--eta", "2", "--kernel-arg", "frictoin=0.1", "--no-progress"]
    _one_line_error(capsys, main(tune), "`--kernel-arg frictoin=...`")
    # A bad value of a flag that reaches a constructor names the flag, not the argument.
    bad = ["tune", "--model", model, "--kernel", "sgld", "--step-sizes", "1e-5,1e-4",
           "--budget-steps", "100", "--eta", "1", "--no-progress"]
    code = main(bad)
    err = capsys.readouterr().err
    assert code == 2 and "`--eta`" in err and "`eta`" not in err, err
    # Python argument names never leak into the messages.
    run_dir = str(tmp_path / "run2")
    assert main(_sample_args(model, run_dir)) == 0
    capsys.readouterr()
    main(_sample_args(model, run_dir))
    err = capsys.readouterr().err
    assert "--resume" in err and "--overwrite" in err and "=True" not in err, err


def test_a_failing_model_build_is_one_line(tmp_path, capsys):
    path = tmp_path / "broken.py"
    path.write_text("def build(**kw):\n    raise RuntimeError('no data here')\n")
    code = main(_sample_args(str(path), str(tmp_path / "run")))
    _one_line_error(capsys, code, "broken.py: building the model failed: RuntimeError: no data")


def _cpu_seconds_of(cmd):
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu


@pytest.mark.parametrize("sub", [[], ["sample"], ["diagnose"], ["tune"]])
def test_help_is_fast_and_does_not_import_tensorflow(sub):
    """``--help`` took ~7 s because the package imported TensorFlow first."""
    out, cpu = _cpu_seconds_of([sys.executable, "-m", "tfp_sgmcmc.cli", *sub, "--help"])
    assert out.returncode == 0 and "usage: tfp-sgmcmc" in out.stdout, out.stderr
    # CPU seconds of the child (not wall time: the test machine may be shared): about
    # 0.2 s, against about 8 s once TensorFlow is imported.
    assert cpu < 2.0, cpu
    probe = (
        "import sys; from tfp_sgmcmc.cli import build_parser; build_parser().format_help(); "
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def _docs_model_source(root=None):
    import pathlib
    import re

    root = pathlib.Path(root or pathlib.Path(__file__).resolve().parents[1])
    text = (root / "docs" / "cli.md").read_text()
    return re.search(r"```python\n(# my_model.py\n.*?)```", text, re.S).group(1)


def test_documented_model_runs_without_autograph_warnings_and_tunes(tmp_path, capsys):
    """The docs model's lambda prior made AutoGraph ask to 'report this to the TensorFlow
    team'; its 4 chains broke `tune` (reshape error) unless --model-arg num_chains=1."""
    import logging

    path = tmp_path / "my_model.py"
    path.write_text(_docs_model_source())
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        assert main(_sample_args(str(path), str(tmp_path / "r"))) == 0
        code = main(
            ["tune", "--model", str(path), "--kernel", "sgld", "--step-sizes", "1e-6,1e-5",
             "--budget-steps", "100", "--eta", "2", "--thin", "2", "--plot", "",
             "--no-xla", "--no-progress"]
        )
    finally:
        logger.removeHandler(handler)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "num_chains=1" in captured.out and "best arm" in captured.out
    assert "gradient-noise ratio" in captured.out  # MAMBA's result reports it
    messages = [r.getMessage() for r in records]
    assert not [m for m in messages if "AutoGraph" in m or "report this" in m], messages


def test_tune_with_fixed_chains_is_one_clear_line(tmp_path, capsys):
    path = tmp_path / "fixed_chains.py"
    fixed = "def build(n=2000, batch_size=100, d=2):\n    num_chains = 4"
    old = "def build(n=2000, batch_size=100, num_chains=2, d=2):"
    path.write_text(MODEL_SRC.replace(old, fixed))
    code = main(["tune", "--model", str(path), "--kernel", "sgld", "--step-sizes", "1e-5,1e-4",
                 "--budget-steps", "100", "--eta", "2", "--plot", "", "--no-xla", "--no-progress"])
    _one_line_error(capsys, code, "tune runs one chain per arm")


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["sample", "--run-dir", "r", "--step-size", "abc"], "--step-size"),
        (["sample", "--run-dir", "r", "--thin", "1.5"], "--thin"),
        (["tune", "--model", "m", "--kernel", "sgld", "--step-sizes", "1e-5",
          "--budget-steps", "1", "--metric", "kds"], "--metric"),
    ],
)
def test_bad_flag_values_are_one_line(argv, flag, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert e.value.code == 2 and len(lines) == 1 and flag in lines[0], err


def test_prefetch_noise_kernel_arg_reaches_sgld(model, tmp_path):
    """``--kernel-arg prefetch_noise=True`` is stored with the run and changes SGLD's
    random stream (not its law: see tests/kernels/test_statistical.py)."""
    runs = {}
    for name, extra in (("prefetch", ["--kernel-arg", "prefetch_noise=True"]), ("default", [])):
        run_dir = str(tmp_path / name)
        assert main(_sample_args(model, run_dir, *extra)) == 0
        runs[name] = open_run(run_dir)
    assert runs["prefetch"].metadata["kernel_args"] == {"prefetch_noise": True}
    a, b = runs["prefetch"].samples(), runs["default"].samples()
    assert a.shape == b.shape and np.all(np.isfinite(a)) and not np.array_equal(a, b)


def test_diagnose_explains_a_negative_fssd_and_hides_the_complex_cast_warning(
    model, tmp_path, capsys, monkeypatch
):
    """A negative "FSSD²" was printed without a word, next to TensorFlow's "casting
    complex64 to float32" warning (from TFP's FFT autocorrelation in the ESS); the
    gradient-noise report had two flags ("flagged": true, "violated": false)."""
    import logging

    import tensorflow_probability as tfp

    import tfp_sgmcmc.diagnostics as diagnostics
    from tfp_sgmcmc.export import _quiet_real_part_cast

    run_dir = str(tmp_path / "run")
    args = _sample_args(model, run_dir)
    args[args.index("--num-samples") + 1] = "40"
    assert main(args) == 0
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        # Power check: TFP's own ESS of these draws logs the warning, outside the filter
        # (the library's effective_sample_size filters it itself).
        tfp.mcmc.effective_sample_size(open_run(run_dir).samples()[:, 0])
        assert any("complex64" in r.getMessage() for r in records)
        records.clear()
        with _quiet_real_part_cast():
            diagnostics.effective_sample_size(open_run(run_dir).samples()[:, 0])
        assert not records
        monkeypatch.setattr(diagnostics, "fssd", lambda *a, **k: np.float32(-0.0123))
        capsys.readouterr()
        assert main(["diagnose", "--run-dir", run_dir, "--max-samples", "20"]) == 0
    finally:
        logger.removeHandler(handler)
    out = capsys.readouterr().out
    assert "unbiased estimate) | -0.0123 (below 0: no misfit detected." in out, out
    assert not [r.getMessage() for r in records if "complex" in r.getMessage()]
    with open(os.path.join(run_dir, "diagnostics.json")) as f:
        noise = json.load(f)["gradient_noise"]
    assert "too_noisy" in noise and "flagged" not in noise and "violated" not in noise
    with open(os.path.join(run_dir, "gradient_noise.json")) as f:
        stored = json.load(f)
    assert sorted(stored) == ["kernel", "max", "median", "num_probes", "threshold", "too_noisy"]
    # Files of the earlier format still read, in the current terms (plus the old name).
    old = {**{k: v for k, v in stored.items() if k != "too_noisy"}, "flagged": False,
           "violated": False}
    with open(os.path.join(run_dir, "gradient_noise.json"), "w") as f:
        json.dump(old, f)
    read = open_run(run_dir, verify=False).gradient_noise
    assert read["too_noisy"] is False and read["threshold"] is None and "flagged" not in read
    assert read["violated"] is False


def test_posterior_prints_the_verdict_and_writes_right_draws(model, tmp_path, capsys):
    out, doc = tmp_path / "draws.npz", tmp_path / "summary.json"
    code = main(["posterior", "--model", model, "--num-results", "300", "--seed", "1",
                 "--out", str(out), "--json", str(doc), "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "verdict: ok" in printed and "| mu" in printed
    draws = np.load(out)["mu"]
    # --num-results is the least a run draws: it goes on until R-hat and ESS are met.
    assert draws.shape[0] >= 300 and draws.shape[1:] == (4, 2)
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
