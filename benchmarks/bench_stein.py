"""Speed and memory of the Stein discrepancies; prints JSON.

Times ``kernel_stein_discrepancy`` (IMQ, V-statistic, float32) for
n ∈ {1000, 4000} × d ∈ {10, 1000} and ``fssd`` (IMQ, J = 10) next to a
vectorised NumPy reference of the same statistic in the same run (NumPy uses
the same matrix-product formulation on full n × n matrices). Seconds are the
median of ``--repeats`` calls after one warm-up call (tracing excluded; the
first-call time is reported separately).

Peak memory for n = 20,000, d = 1,000: a fresh child process imports TF,
builds the float32 inputs, then calls the KSD; its peak RSS (``VmHWM`` from
``/proc/self/status``) is read before and after the call, so the figure is the
process high-water mark and ``delta`` is what the KSD call added on top of TF
and the inputs.

Usage::

    python benchmarks/bench_stein.py            # full (the memory run takes minutes)
    python benchmarks/bench_stein.py --quick    # n=1000 only, no memory run
    python benchmarks/bench_stein.py --memory-only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402


def numpy_ksd(x: np.ndarray, s: np.ndarray, c: float = 1.0, beta: float = -0.5) -> float:
    """Vectorised NumPy IMQ V-statistic KSD (full n × n matrices)."""
    d = x.shape[1]
    x = x - x.mean(0)
    xx = x @ x.T
    sq = np.diag(xx)
    r2 = np.maximum(sq[:, None] + sq[None, :] - 2 * xx, 0)
    sxy = s @ x.T  # s_i · x_j
    sxx = np.einsum("ij,ij->i", s, x)
    sxr = sxx[:, None] - sxy  # s_iᵀ(x_i − x_j)
    syr = sxy.T - sxx[None, :]  # s_jᵀ(x_i − x_j)
    base = c * c + r2
    bb = base**beta
    bb1 = bb / base
    k = (s @ s.T) * bb - 2 * beta * bb1 * (sxr - syr) - 2 * d * beta * bb1
    k -= 4 * beta * (beta - 1) * r2 * bb1 / base
    return float(np.sqrt(k.sum(dtype=np.float64)) / x.shape[0])


def numpy_fssd(x: np.ndarray, s: np.ndarray, v: np.ndarray) -> float:
    """Vectorised NumPy IMQ FSSD²_U."""
    n, d = x.shape
    j = v.shape[0]
    diff = x[:, None, :] - v[None]
    base = 1.0 + np.sum(diff**2, -1, keepdims=True)
    xi = s[:, None, :] * base**-0.5 - base**-1.5 * diff
    tau = xi.reshape(n, -1) / np.sqrt(d * j)
    st = tau.sum(0, dtype=np.float64)
    return float((st @ st - np.sum(tau.astype(np.float64) ** 2)) / (n * (n - 1)))


def _time(fn, repeats: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return first, float(np.median(ts))


def speed(ns: list[int], ds: list[int], repeats: int) -> list[dict]:
    from tfp_sgmcmc.diagnostics import fssd, kernel_stein_discrepancy

    rows = []
    rng = np.random.default_rng(0)
    for n in ns:
        for d in ds:
            x = rng.normal(size=(n, d)).astype(np.float32)
            s = (-x + 0.1 * rng.normal(size=(n, d))).astype(np.float32)
            v = rng.normal(size=(10, d)).astype(np.float32)
            def ksd(jit=False, x=x, s=s):
                return kernel_stein_discrepancy(x, s, jit_compile=jit).numpy()

            def ours_fssd(x=x, s=s, v=v):
                return fssd(x, s, v, kernel="imq").numpy()

            first, ours = _time(ksd, repeats)
            _, ours_xla = _time(lambda ksd=ksd: ksd(True), repeats)
            _, ref = _time(lambda x=x, s=s: numpy_ksd(x, s), max(1, repeats // 2))
            val, val_ref = float(ksd()), numpy_ksd(x, s)
            f_first, f_ours = _time(ours_fssd, repeats)
            _, f_ref = _time(lambda x=x, s=s, v=v: numpy_fssd(x, s, v), repeats)
            rows.append(dict(
                n=n, d=d,
                ksd_seconds=ours, ksd_seconds_xla=ours_xla, ksd_first_call_seconds=first,
                ksd_numpy_seconds=ref, ksd_numpy_over_ours=ref / ours,
                ksd_value=val, ksd_numpy_value=val_ref,
                fssd_seconds=f_ours, fssd_first_call_seconds=f_first, fssd_numpy_seconds=f_ref,
                fssd_value=float(ours_fssd()), fssd_numpy_value=numpy_fssd(x, s, v),
            ))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


_CHILD = r"""
import os, time, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np, tensorflow as tf
from tfp_sgmcmc.diagnostics import kernel_stein_discrepancy

def hwm_mib():
    # VmHWM is per address space (reset by exec), unlike getrusage's ru_maxrss,
    # which Linux carries over from the parent across fork + exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

n, d = {n}, {d}
rng = np.random.default_rng(0)
x = rng.standard_normal(size=(n, d), dtype=np.float32)
s = -x
kernel_stein_discrepancy(x[:8], s[:8])  # trace the small path first (not measured)
before = hwm_mib()
t0 = time.perf_counter()
v = float(kernel_stein_discrepancy(x, s))
dt = time.perf_counter() - t0
after = hwm_mib()
print(json.dumps(dict(n=n, d=d, seconds=dt, value=v, input_mib=2 * x.nbytes / 2**20,
                      peak_rss_mib_before_call=before, peak_rss_mib_after_call=after,
                      delta_mib=after - before)))
"""


def memory(n: int, d: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD.format(n=n, d=d)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n=1000 only, no memory run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--memory-only", action="store_true", help="only the n=20,000 memory run")
    args = ap.parse_args()
    import tensorflow as tf

    result = dict(
        machine=dict(cpus=os.cpu_count(), tensorflow=tf.__version__,
                     load_average=list(os.getloadavg())),
    )
    if not args.memory_only:
        result["speed"] = speed([1000] if args.quick else [1000, 4000], [10, 1000],
                                args.repeats)
    if not args.quick:
        result["memory"] = memory(20_000, 1_000)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
