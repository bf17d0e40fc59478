"""A quiet start: importing the package prints nothing, the CLI and the examples print no
TensorFlow C++ log line, and an example run from the checkout leaves ``git status`` clean.

The filter itself (``tfp_sgmcmc/_startup.py``) is tested against a stand-in ``tensorflow``
module that writes TensorFlow's real start-up lines plus real errors to descriptor 2: the
notices must go, everything else must stay. The end-to-end tests run real subprocesses.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tfp_sgmcmc._startup import is_startup_noise

ROOT = Path(__file__).resolve().parents[1]

# A TensorFlow (absl/glog format) log line, or the absl preamble.
TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d|absl::InitializeLog")

# Lines captured from TensorFlow 2.21 on a CPU-only machine.
NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795408966.236768   11791 port.cc:153] oneDNN custom operations are on. You "
    "may see slightly different numerical results due to floating-point round-off errors from "
    "different computation orders. To turn them off, set the environment variable "
    "`TF_ENABLE_ONEDNN_OPTS=0`.",
    "I0000 00:00:1795408966.237135   11791 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "I0000 00:00:1795408966.294712   11791 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795408970.162404   11791 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
]
KEPT = [
    "E0000 00:00:1795408970.1 11791 op_kernel.cc:1857] OP_REQUIRES failed at matmul_op.cc",
    "W0000 00:00:1795408970.1 11791 cpu_allocator_impl.cc:83] Allocation exceeds 10% of memory",
    "WARNING: something else entirely",
    "MAMBA quickstart: tuning SGLD",
]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CPP_", "TFP_SGMCMC_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["MPLBACKEND"] = "Agg"
    env.update(extra)
    return env


def _tf_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if TF_LOG_LINE.search(ln)]


def _chatter(text: str) -> list[str]:
    """TensorFlow's start-up notices and its informational (``I``) lines. Warnings and errors
    about a real condition pass through by design (for example XLA's alarm when a compilation
    takes minutes on an overloaded machine), so they are not counted here."""
    return [
        ln
        for ln in text.splitlines()
        if is_startup_noise(ln) or (TF_LOG_LINE.search(ln) and not ln.startswith(("W", "E")))
    ]


@pytest.mark.parametrize("line", NOISE)
def test_startup_notices_are_recognised(line):
    assert is_startup_noise(line)


@pytest.mark.parametrize("line", KEPT)
def test_other_lines_are_kept(line):
    assert not is_startup_noise(line)


FAKE_TF = textwrap.dedent(
    """
    import os, sys
    os.write(2, ({noise!r} + "\\n" + {kept!r} + "\\n").encode())
    sys.stderr.write("a Python warning during the import\\n")

    class config:
        probed = False

        @classmethod
        def list_physical_devices(cls):
            # Like TensorFlow: the CUDA probe (and its error line) happens once.
            if not cls.probed:
                os.write(2, ({cuinit!r} + "\\n").encode())
                cls.probed = True
            return []
    """
)

RUN_STARTUP = textwrap.dedent(
    """
    import importlib.util, os, sys
    spec = importlib.util.spec_from_file_location("s", {path!r})
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    m.import_tensorflow()
    import tensorflow  # what the package does next
    tensorflow.config.list_physical_devices()
    print(os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
    """
)


def _run_fake(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    pkg = tmp_path / "tensorflow"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text(
        FAKE_TF.format(noise="\n".join(NOISE[:5]), kept=KEPT[0], cuinit=NOISE[5])
    )
    code = RUN_STARTUP.format(path=str(ROOT / "tfp_sgmcmc" / "_startup.py"))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CPP_", "TFP_"))}
    full_env.update(PYTHONPATH=str(tmp_path), **env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, check=True
    )


def test_filter_drops_the_notices_and_keeps_everything_else(tmp_path):
    res = _run_fake(tmp_path)
    assert res.stderr.splitlines() == [KEPT[0], "a Python warning during the import"]
    assert res.stdout.strip() == "1"  # INFO lines off by default


def test_filter_respects_the_users_choices(tmp_path):
    # A log level the user set is kept as is.
    assert _run_fake(tmp_path, TF_CPP_MIN_LOG_LEVEL="0").stdout.strip() == "0"
    # The opt-out shows TensorFlow's start-up unfiltered (power check of the filter test).
    res = _run_fake(tmp_path, TFP_SGMCMC_TF_STARTUP_LOGS="1")
    assert len(_tf_lines(res.stderr)) == 6 and res.stdout.strip() == "None"


def test_import_prints_nothing():
    # Also: the Keras bridge is its own module, imported on demand (exit status 3 if not).
    # The first use of a name imports TensorFlow (quietly).
    code = (
        "import sys, tfp_sgmcmc; tfp_sgmcmc.SGLD; sys.exit(3 * ('tfp_sgmcmc.keras' in sys.modules))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=ROOT,
        timeout=600,
        check=True,
    )
    assert res.stdout == "" and res.stderr == "", res.stderr


def test_cli_run_prints_no_tensorflow_log_line(tmp_path):
    # A real (tiny) XLA-compiled run, so compilation-time log lines would show up too.
    cmd = [sys.executable, "-m", "tfp_sgmcmc.cli", "sample", "--model", "logistic_regression"]
    cmd += ["--model-arg", "num_examples=2000", "--model-arg", "num_features=3"]
    cmd += ["--model-arg", "batch_size=100", "--kernel", "sgld", "--step-size", "1e-4"]
    cmd += ["--num-samples", "100", "--chunk-size", "50", "--seed", "1", "--no-progress"]
    cmd += ["--run-dir", str(tmp_path / "run")]
    res = subprocess.run(
        cmd, capture_output=True, text=True, env=_clean_env(), timeout=600, check=True
    )
    assert res.stdout.startswith("100 draws of SGLD"), res.stdout
    assert not _chatter(res.stdout + res.stderr), res.stderr
    assert "not calibrated" not in res.stderr  # TFP's warning about every SG kernel


def _porcelain() -> str | None:
    try:
        res = subprocess.run(
            ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True
        )
    except FileNotFoundError:
        return None
    return res.stdout if res.returncode == 0 else None


def _run_example(script: str, first_line: str, outputs: list[str]) -> None:
    """Runs ``examples/<script> --quick`` as the README does (from the checkout's root)."""
    before = _porcelain()
    for rel in outputs:
        (ROOT / rel).unlink(missing_ok=True)
    res = subprocess.run(
        [sys.executable, f"examples/{script}", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=1200,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.startswith(first_line), res.stdout[:500]
    assert not _chatter(res.stdout + res.stderr), _chatter(res.stdout + res.stderr)
    for rel in outputs:
        assert (ROOT / rel).is_file(), rel
    if before is not None:
        assert _porcelain() == before, "the example changed the checkout (git status)"


def test_example_starts_quietly_and_leaves_the_checkout_clean():
    _run_example(
        "quickstart.py",
        "Bayesian logistic regression: N = 20,000",
        ["out/quickstart/studies/quickstart_quick.md"],
    )


@pytest.mark.slow
def test_readme_first_command_quick_form_starts_quietly_and_leaves_the_checkout_clean():
    # The README's first command, in its quick form (about a minute on 2 idle cores).
    _run_example(
        "quickstart_mamba.py",
        "MAMBA quickstart:",
        [
            "out/quickstart_mamba/figures/mamba_quickstart_quick.png",
            "out/quickstart_mamba/studies/mamba_quickstart_quick.md",
        ],
    )
