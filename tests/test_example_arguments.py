"""The examples reject bad option values with a one-line usage error (exit code 2)."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("examples_cli", ROOT / "examples" / "_cli.py")
assert _spec is not None and _spec.loader is not None
_cli = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cli)


@pytest.mark.parametrize("text", ["0", "-3", "2.5", "x"])
def test_positive_int_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="int >= 1"):
        _cli.positive_int(text)


@pytest.mark.parametrize("text", ["0", "-1e-3", "inf", "nan", "x"])
def test_positive_float_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="> 0"):
        _cli.positive_float(text)


def test_positive_values_pass() -> None:
    assert _cli.positive_int("7") == 7
    assert _cli.positive_float("0.5") == 0.5


@pytest.mark.parametrize(
    "args, message",
    [
        (["long_run.py", "--quick", "--chunk-size", "0"], "--chunk-size"),
        (["adaptive_drift_ravines.py", "--quick", "--theta0", "1"], "--theta0"),
    ],
)
def test_bad_option_is_a_usage_error(tmp_path: Path, args: list[str], message: str) -> None:
    res = subprocess.run(
        [sys.executable, str(ROOT / "examples" / args[0]), *args[1:], "--out", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 2, res.stderr[-2000:]
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    assert message in res.stderr.strip().splitlines()[-1]
