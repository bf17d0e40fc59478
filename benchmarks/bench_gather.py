"""What a random-row minibatch draw costs, and whether the second core can take it.

SGHMC with one minibatch per leapfrog step (the default, as in Chen et al.
2014) draws ``L`` random minibatches per sample where a per-trajectory sampler
draws one. On the logistic-regression workload (``N = 10^6`` rows, ``d = 10``)
those draws are random-row gathers from a table larger than the last-level
cache, so their cost is set by memory latency, not arithmetic. This script
measures the draw and the three ways one might hide it:

``draw``
    one compiled program (``tf.function(jit_compile=True)``) drawing
    ``--draws`` consecutive ``"epoch"`` minibatches through
    :meth:`tfp_sgmcmc.InMemoryData.sample_batch` from the row-packed copy
    (every gathered element read once by a sum): ns per gathered row.
``draw_two_threads``
    the same program called from two Python threads at once (TensorFlow
    releases the GIL while a program runs), against two calls back to back.
    ``concurrency_speedup`` is (time of two calls in sequence) / (time of the
    two calls overlapped): 2.0 if the second core doubled the gather rate,
    1.0 if the two gathers only share the same memory bandwidth. ``ns_per_row``
    is the overlapped time over the rows both calls gathered.
``numpy_take``
    NumPy ``take`` of the same number of rows of the packed copy on one core,
    a fresh set of uniform random rows per draw, unsorted and sorted (does
    locality of the indices help?).
``row_layout``
    the same draw from the packed copy as the library builds it (rows padded
    so that none straddles a 64-byte cache line: 64 bytes for ``d = 10``)
    and from a copy of the same rows without that padding (48 bytes, whole
    64-bit words only), timed round-robin. ``padded_over_unpadded`` > 1
    means the padding pays.
``c_loop``
    the same number of random 64-byte-row copies in plain C
    (``benchmarks/gather_rows.c``, compiled with ``cc -O2`` into a temporary
    directory when a C compiler is on the ``PATH``), on one and two threads,
    without and with a software prefetch 16 rows ahead. The plain loop is the
    floor of a gather compiled without prefetch instructions (XLA emits none);
    ``xla_over_c`` is the library's draw time per row over the two-thread
    plain loop's, ``prefetch_gain`` what the prefetch buys in C.
``huge_pages``
    the same draw, and default SGHMC (``L = 5``, one minibatch per leapfrog
    step), from the row-packed copy as TensorFlow allocates it (4 KB pages)
    and from a copy of it on transparent huge pages (a 2 MB-aligned NumPy
    buffer advised with ``madvise(MADV_HUGEPAGE)``, handed to TensorFlow
    without a copy through DLPack), timed round-robin; and the two-thread C
    loop on 4 KB and on huge pages. A random row of a 64 MB table costs a
    page-table walk on 4 KB pages and none on 2 MB ones: ``thp_over_4k`` > 1
    means the walk was part of the draw's cost. Linux only (skipped elsewhere).
``prefetch``
    an SGLD-like loop (minibatch draw, gradient, update) written two ways in
    one compiled ``tf.while_loop``: the batch of step ``t`` drawn in step ``t``
    (``inline``) or drawn in step ``t - 1`` and carried in the loop state
    (``carried``), so the draw has no data dependence on the gradient that
    runs beside it and XLA may run them at the same time.
    ``carried_over_inline`` > 1 would mean the overlap pays.

Prints one JSON document (see ``docs/benchmarks.md``, "The cost of a minibatch
draw"). Reproduce with ``python benchmarks/bench_gather.py``; ``--quick`` is a
smoke test (small data: its speeds mean nothing).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from _common import dump_json, environment, load_average, log, make_data, median, sync
from bench_samplers import log_likelihood, log_prior, make_chain, make_draw_floor, minibatch_grad

import tfp_sgmcmc as sg


def _make_sgld_loop(
    data: sg.InMemoryData, n: int, steps: int, carried: bool
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """An SGLD-like loop whose batch is drawn inline or one step ahead (carried)."""
    scale = data.num_examples / n

    @tf.function(jit_compile=True)
    def run(theta: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        batch0, state0 = data.sample_batch(
            n, data.init_batch_state(), tf.random.experimental.stateless_fold_in(seed, 0)
        )

        def body(i: tf.Tensor, theta: tf.Tensor, batch: Any, state: Any) -> tuple[Any, ...]:
            step_seed = tf.random.experimental.stateless_fold_in(seed, i + 1)
            if carried:  # next step's batch: no dependence on this step's gradient
                next_batch, next_state = data.sample_batch(n, state, step_seed)
            else:
                batch, state = data.sample_batch(n, state, step_seed)
                next_batch, next_state = batch, state
            g = minibatch_grad(theta, *batch, scale)
            noise = tf.random.stateless_normal(tf.shape(theta), seed=step_seed)
            return i + 1, theta + 1e-7 * g + 4.5e-4 * noise, next_batch, next_state

        return tf.while_loop(lambda i, *_: i < steps, body, (0, theta, batch0, state0))[1]

    return run


def _time(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # compile / warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return median(times)


def _two_threads(fn: Callable[[int], Any], repeats: int) -> dict[str, float]:
    """Median seconds of two calls in sequence and of the same two calls overlapped."""
    fn(0)
    seq, par = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        fn(2 * r)
        fn(2 * r + 1)
        seq.append(time.perf_counter() - t0)
        threads = [threading.Thread(target=fn, args=(2 * r + k,)) for k in (0, 1)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        par.append(time.perf_counter() - t0)
    s, p = median(seq), median(par)
    return {"two_in_sequence_s": s, "two_overlapped_s": p, "concurrency_speedup": s / p}


def _round_robin(calls: dict[Any, Callable[[int], Any]], repeats: int) -> dict[Any, list[float]]:
    """Seconds of each call per round, after one warm-up call each; the calls of a
    round run back to back, so load drift hits them alike."""
    for call in calls.values():
        sync(call(0))
    per_round: dict[Any, list[float]] = {k: [] for k in calls}
    for r in range(repeats):
        for k, call in calls.items():
            t0 = time.perf_counter()
            sync(call(r))
            per_round[k].append(time.perf_counter() - t0)
    return per_round


def _row_layout(
    epoch: sg.InMemoryData, n: int, draws: int, repeats: int, zeros: tf.Tensor
) -> dict[str, Any]:
    """ns per row of the draw from the library's padded rows and from unpadded ones."""
    rows = epoch._packed_cache["rows"]  # the copy the estimator gathers from
    words = sum(w for where in rows.layout if where is not None for w in where[1:])
    unpadded = epoch.with_scheme("epoch")
    # The same rows cut to whole 64-bit words: a private copy swapped into a view
    # (the views share their cache, so the view gets a dict of its own).
    unpadded._packed_cache = {
        "rows": sg.data.in_memory._PackedRows(
            tf.identity(rows.packed[:, : -(-words // 2)]), rows.layout
        )
    }
    layouts = {"padded": epoch, "unpadded": unpadded}
    floors = {k: make_draw_floor(d, n, 1, draws) for k, d in layouts.items()}
    per_round = _round_robin(
        {k: (lambda r, f=f: f(zeros, tf.constant([r, 2]))) for k, f in floors.items()}, repeats
    )
    return {
        "padded_row_bytes": 8 * int(rows.packed.shape[1]),
        "unpadded_row_bytes": 8 * -(-words // 2),
        "padded_ns_per_row": median(per_round["padded"]) / (draws * n) * 1e9,
        "unpadded_ns_per_row": median(per_round["unpadded"]) / (draws * n) * 1e9,
        "padded_over_unpadded": median(
            [u / p for u, p in zip(per_round["unpadded"], per_round["padded"])]
        ),
    }


_C_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gather_rows.c")


def _compile_c_loop(workdir: str) -> str | None:
    """``gather_rows.c`` compiled into ``workdir``; ``None`` without a C compiler."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        return None
    exe = os.path.join(workdir, "gather_rows")
    subprocess.run([cc, "-O2", "-pthread", "-o", exe, _C_SOURCE], check=True)
    return exe


def _c_loop(exe: str | None, num_rows: int, row_bytes: int, n: int, rows: int,
            repeats: int, draw_ns_per_row: float) -> dict[str, Any]:
    """The plain-C gather (see the module docstring) beside the library's draw."""
    if exe is None:
        return {"skipped": "no C compiler on the PATH (set CC)"}
    runs: dict[str, Any] = {"row_bytes": row_bytes}
    for threads in (1, 2):
        for prefetch in (0, 16):
            args = [exe, str(num_rows), str(row_bytes), str(n), str(rows), str(repeats),
                    str(threads), str(prefetch)]
            res = json.loads(subprocess.run(args, check=True, capture_output=True,
                                            text=True).stdout)
            key = f"threads_{threads}_prefetch_{prefetch}_ns_per_row"
            runs[key] = res["ns_per_row_median"]
    plain, ahead = runs["threads_2_prefetch_0_ns_per_row"], runs["threads_2_prefetch_16_ns_per_row"]
    runs["xla_over_c"] = draw_ns_per_row / plain
    runs["prefetch_gain"] = plain / ahead
    return runs


SECTIONS = ("draw", "c_loop", "row_layout", "huge_pages", "numpy_take", "prefetch")
_HUGE_PAGE = 2 << 20


def _anon_huge_kib() -> int | None:
    """This process's anonymous memory on transparent huge pages (KiB; Linux)."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _on_huge_pages(t: tf.Tensor) -> tf.Tensor:
    """A copy of ``t`` in a 2 MB-aligned buffer advised for transparent huge pages.

    The buffer is an anonymous ``mmap`` advised before its first write, so the
    kernel backs it with 2 MB pages; TensorFlow reads it in place (DLPack: no
    copy, the tensor keeps the buffer alive).
    """
    a = t.numpy()
    size = -(-a.nbytes // _HUGE_PAGE) * _HUGE_PAGE + _HUGE_PAGE
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    start = ctypes.addressof(ctypes.c_char.from_buffer(region))
    offset = (-start) % _HUGE_PAGE
    region.madvise(mmap.MADV_HUGEPAGE, offset, size - offset)
    buf = np.frombuffer(region, dtype=a.dtype, count=a.size, offset=offset).reshape(a.shape)
    buf[...] = a
    return tf.experimental.dlpack.from_dlpack(buf.__dlpack__())


def _huge_pages(epoch: sg.InMemoryData, n: int, draws: int, repeats: int,
                c_exe: str | None, zeros: tf.Tensor) -> dict[str, Any]:
    """The draw and default SGHMC from 4 KB-page and huge-page copies of the rows."""
    if not (hasattr(mmap, "MADV_HUGEPAGE") and _anon_huge_kib() is not None):
        return {"skipped": "needs Linux with transparent huge pages"}
    rows = epoch._packed_cache["rows"]
    before = _anon_huge_kib()
    huge = epoch.with_scheme("epoch")
    huge._packed_cache = {
        "rows": sg.data.in_memory._PackedRows(_on_huge_pages(rows.packed), rows.layout)
    }
    out: dict[str, Any] = {"table_bytes": int(rows.packed.shape[0]) * 8 * int(rows.packed.shape[1]),
                           "huge_page_kib_gained": (_anon_huge_kib() or 0) - (before or 0)}
    layouts = {"4k": epoch, "thp": huge}
    floors = {k: make_draw_floor(d, n, 1, draws) for k, d in layouts.items()}
    per_round = _round_robin(
        {k: (lambda r, f=f: f(zeros, tf.constant([r, 4]))) for k, f in floors.items()}, repeats
    )
    for k in layouts:
        out[f"draw_{k}_ns_per_row"] = median(per_round[k]) / (draws * n) * 1e9
    out["draw_thp_over_4k"] = median([a / b for a, b in zip(per_round["4k"], per_round["thp"])])
    samples = max(1, draws // 5)
    chains = {
        k: make_chain(sg.SGHMC(sg.MinibatchEstimator(log_likelihood, d, n, log_prior), 1e-7,
                               num_leapfrog_steps=5), samples)
        for k, d in layouts.items()
    }
    per_round = _round_robin(
        {k: (lambda r, f=f: f(zeros, tf.constant([r, 5]))) for k, f in chains.items()}, repeats
    )
    for k in layouts:
        out[f"sghmc_L5_{k}_samples_per_s"] = samples / median(per_round[k])
    out["sghmc_L5_thp_over_4k"] = median(
        [a / b for a, b in zip(per_round["4k"], per_round["thp"])]
    )
    if c_exe is not None:
        row_bytes = int(rows.packed.shape[1]) * 8
        c = {}
        for _ in range(3):  # alternated: the machine's memory speed drifts
            for flag in (0, 1):
                args = [c_exe, str(epoch.num_examples), str(row_bytes), str(n), str(draws * n),
                        str(repeats), "2", "0", str(flag)]
                res = json.loads(subprocess.run(args, check=True, capture_output=True,
                                                text=True).stdout)
                c.setdefault(flag, []).append(res["ns_per_row_median"])
        out["c_two_threads_4k_ns_per_row"] = median(c[0])
        out["c_two_threads_thp_ns_per_row"] = median(c[1])
        out["c_thp_over_4k"] = median(c[0]) / median(c[1])
    return out


def _measure(data: sg.InMemoryData, n: int, draws: int, repeats: int,
             c_exe: str | None = None, sections: set[str] | None = None) -> dict[str, Any]:
    """Every measurement (of ``sections``; all by default) at batch size ``n``,
    ``draws`` minibatches per timed call."""
    want = (lambda k: True) if sections is None else sections.__contains__
    data.prepare(n)
    epoch = data.with_scheme("epoch")
    group: dict[str, Any] = {"batch_size": n, "draws_per_call": draws}
    zeros = tf.zeros([int(epoch.arrays[0].shape[1])])  # θ of every loop below
    packed = epoch._packed_cache["rows"].packed  # the rows the estimator gathers
    if want("draw") or want("c_loop"):
        log(f"[n={n}] draws in XLA, one thread and two")
        # One program of ``draws`` consecutive draws (the estimator's own, every gathered
        # element read once by a sum): ``make_draw_floor`` with one draw per "sample".
        draw_floor = make_draw_floor(epoch, n, 1, draws)

        def draw(seed: tf.Tensor) -> tf.Tensor:
            return draw_floor(zeros, seed)

        t_one = _time(lambda: sync(draw(tf.constant([1, 2]))), repeats)
        group["draw"] = {"seconds_per_call": t_one, "ns_per_row": t_one / (draws * n) * 1e9}
        two = _two_threads(lambda r: sync(draw(tf.constant([r, 3]))), repeats)
        # Both programs' rows over the overlapped wall time: the pair's cost per row.
        two["ns_per_row"] = two["two_overlapped_s"] / (2 * draws * n) * 1e9
        group["draw_two_threads"] = two

    if want("c_loop"):
        log(f"[n={n}] the same gather in plain C")
        row_bytes = int(packed.shape[1]) * packed.dtype.size
        group["c_loop"] = _c_loop(c_exe, data.num_examples, row_bytes, n, draws * n, repeats,
                                  group["draw"]["ns_per_row"])

    if want("row_layout"):
        log(f"[n={n}] draws from rows padded to cache lines and from unpadded rows")
        group["row_layout"] = _row_layout(epoch, n, draws, repeats, zeros)

    if want("huge_pages"):
        log(f"[n={n}] draws and default SGHMC from 4 KB pages and from huge pages")
        group["huge_pages"] = _huge_pages(epoch, n, draws, repeats, c_exe, zeros)

    if want("numpy_take"):
        log(f"[n={n}] NumPy take, random and sorted rows")
        packed_np = packed.numpy()
        # A fresh index set per draw, as in sampling: cycling through a few sets
        # would keep their rows in the last-level cache and flatter the gather.
        sets = np.random.default_rng(0).integers(0, data.num_examples, (draws, n))
        buf = np.empty((n, packed_np.shape[1]), packed_np.dtype)
        numpy_take = {}
        for label, idx in (("random", sets), ("sorted", np.sort(sets, axis=1))):
            def take(idx: np.ndarray = idx) -> None:
                for k in range(draws):
                    np.take(packed_np, idx[k], axis=0, out=buf)

            numpy_take[f"{label}_ns_per_row"] = _time(take, repeats) / (draws * n) * 1e9
        group["numpy_take"] = numpy_take

    if want("prefetch"):
        log(f"[n={n}] SGLD-like loop, batch drawn inline or carried one step ahead")
        steps = draws
        loops = {c: _make_sgld_loop(epoch, n, steps, c) for c in (False, True)}
        per_round = _round_robin(
            {c: (lambda r, fn=fn: fn(zeros, tf.constant([r, 1]))) for c, fn in loops.items()},
            repeats,
        )
        inline, carried = median(per_round[False]), median(per_round[True])
        group["prefetch"] = {
            "steps_per_call": steps,
            "inline_steps_per_s": steps / inline,
            "carried_steps_per_s": steps / carried,
            "carried_over_inline": median(
                [i / c for i, c in zip(per_round[False], per_round[True])]
            ),
        }
    return group


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-examples", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=10)
    p.add_argument("--batch-fractions", type=float, nargs="+", default=[0.01, 0.001])
    p.add_argument("--rows-per-call", type=int, default=2_000_000,
                   help="gathered rows per timed call (sets --draws per batch size)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="smoke test: N = 20,000, 3 repeats")
    p.add_argument("--no-c-loop", action="store_true",
                   help="skip the plain-C gather (c_loop) even if a C compiler is found")
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                   help="what to measure (default: all; see the module docstring)")
    p.add_argument("--output", default=None)
    a = p.parse_args(argv)
    if a.quick:
        a.num_examples, a.rows_per_call, a.repeats = 20_000, 20_000, 3
    x, y = make_data(a.num_examples, a.dim)
    data = sg.InMemoryData((x, y), pack_rows=True)
    out: dict[str, Any] = {
        "benchmark": "bench_gather",
        "workload": {"N": a.num_examples, "d": a.dim, "scheme": "epoch", "pack_rows": True},
        "environment": environment(),
        "load_average_start": load_average(),
        "groups": [],
    }
    with tempfile.TemporaryDirectory() as workdir:
        needs_c = {"c_loop", "huge_pages"} & set(a.sections)
        c_exe = None if a.no_c_loop or not needs_c else _compile_c_loop(workdir)
        for frac in a.batch_fractions:
            n = max(1, int(round(frac * a.num_examples)))
            group = _measure(data, n, max(1, a.rows_per_call // n), a.repeats, c_exe,
                             set(a.sections))
            group["load_average"] = load_average()
            out["groups"].append(group)
    out["load_average_end"] = load_average()
    dump_json(out, a.output)
    return out


if __name__ == "__main__":
    main()
