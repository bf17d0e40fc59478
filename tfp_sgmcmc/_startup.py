"""A quiet TensorFlow start-up: the first import of TensorFlow without its platform notices.

TensorFlow's C++ runtime writes a few lines straight to file descriptor 2 while its shared
libraries load and when it first probes for devices, before its logging is configured, so
``TF_CPP_MIN_LOG_LEVEL`` does not reach them::

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 ... port.cc:153] oneDNN custom operations are on. ...
    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    I0000 ... cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use ...
    To enable the following instructions: AVX2 ...
    E0000 ... cuda_platform.cc:52] failed call to cuInit: ...

``import_tensorflow`` imports TensorFlow (and probes its devices, where the ``cuInit`` line
is written) with descriptor 2 redirected to a temporary file, then writes back every line that
is not one of these notices, so real warnings and errors still reach the user. It changes no
numerics: oneDNN stays on (``TF_ENABLE_ONEDNN_OPTS`` is left alone; the notice is only hidden).

It also makes ``TF_CPP_MIN_LOG_LEVEL`` default to ``1`` (TensorFlow's informational C++ lines,
such as "Compiled cluster using XLA!", are hidden; its warnings and errors are not) unless the
user set it. Both happen only if TensorFlow was not imported yet; setting
``TFP_SGMCMC_TF_STARTUP_LOGS=1`` turns both off. This module imports nothing from TensorFlow
at module level and prints nothing of its own.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

__all__ = ["STARTUP_NOISE", "import_tensorflow", "is_startup_noise"]

#: Patterns of the start-up lines hidden by ``import_tensorflow``; each names the C++
#: source file that writes it, so an unrelated line with similar words is kept.
STARTUP_NOISE: tuple[re.Pattern[str], ...] = (
    re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called"),
    re.compile(r"^[IWE]\d{4} .*\] oneDNN custom operations are on"),
    re.compile(r"^[IWE]\d{4} .*cudart_stub\.cc:\d+\] Could not find cuda drivers"),
    re.compile(r"^[IWE]\d{4} .*cpu_feature_guard\.cc:\d+\]"),
    re.compile(r"^To enable the following instructions: .* in other operations"),
    re.compile(r"^[IWE]\d{4} .*\] failed call to cuInit"),
)

_OPT_OUT = "TFP_SGMCMC_TF_STARTUP_LOGS"


def is_startup_noise(line: str) -> bool:
    """Whether ``line`` is one of TensorFlow's start-up notices (``STARTUP_NOISE``)."""
    return any(p.search(line) for p in STARTUP_NOISE)


def _import_and_probe() -> None:
    import tensorflow as tf

    # Device discovery is where the CUDA stub writes its cuInit error on a CPU-only
    # machine; it does not create the runtime context, so the user can still configure
    # devices (tf.config.set_visible_devices and friends) afterwards.
    tf.config.list_physical_devices()


def import_tensorflow() -> None:
    """Imports TensorFlow once, hiding its start-up notices (see the module docstring)."""
    if "tensorflow" in sys.modules or os.environ.get(_OPT_OUT, "") not in ("", "0"):
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 (a daemon, some embedded interpreters): nothing to hide
        _import_and_probe()
        return
    captured = tempfile.TemporaryFile(mode="w+b")
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        os.dup2(captured.fileno(), 2)
        try:
            _import_and_probe()
        finally:
            if sys.stderr is not None:
                sys.stderr.flush()
            os.dup2(saved, 2)
    finally:
        os.close(saved)
        captured.seek(0)
        text = captured.read().decode("utf-8", errors="replace")
        captured.close()
        kept = [line for line in text.splitlines(keepends=True) if not is_startup_noise(line)]
        if kept and sys.stderr is not None:
            sys.stderr.write("".join(kept))
            sys.stderr.flush()
