"""Long runs in bounded memory: peak RSS of the driver for 1x, 10x (and 30x) one chunk.

Each configuration runs in a fresh subprocess (so the peak resident set size,
``ru_maxrss``, belongs to that run alone): SGLD on a ``d``-dimensional Gaussian
with noisy gradients, ``chunk_size`` draws per compiled chunk, streamed to
HDF5 by :func:`tfp_sgmcmc.driver.sample`. If the driver kept the draws in
memory, 10 chunks would need 10x the chunk's bytes; the peak stays flat
instead (the file grows, the process does not).

Run::

    python examples/long_run.py            # d = 20,000, chunk 500 draws: 1x, 10x, 30x
    python examples/long_run.py --quick    # d = 5,000: 1x and 10x (< 1 min)

Prints a markdown table and writes ``studies/long_run.md`` under ``--out`` (default
``out/long_run/``; ``--write-docs`` for ``docs/``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import _cli


def child(dim: int, chunk_size: int, num_chunks: int, run_dir: str, jit: bool) -> None:
    import tensorflow as tf

    import tfp_sgmcmc as sg
    from tfp_sgmcmc.driver import sample

    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.1)
    kernel = sg.SGLD(est, 0.01)
    init = tf.zeros([dim])
    kernel.bootstrap_results(init)  # warm the TF runtime before the baseline reading
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    t0 = time.perf_counter()
    run = sample(
        kernel,
        init,
        chunk_size * num_chunks,
        run_dir,
        seed=1,
        chunk_size=chunk_size,
        jit_compile=jit,
        progress=False,
    )
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(
        json.dumps(
            {
                "num_chunks": num_chunks,
                "draws": run.num_written,
                "rss_before_mb": round(before, 1),
                "peak_rss_mb": round(peak, 1),
                "growth_mb": round(peak - before, 1),
                "draws_in_ram_mb": round(run.num_written * dim * 4 / 2**20, 1),
                "chunk_mb": round(chunk_size * dim * 4 / 2**20, 1),
                "file_mb": round(os.path.getsize(os.path.join(run_dir, "samples.h5")) / 2**20, 1),
                "wall_s": round(wall, 1),
            }
        )
    )


def main() -> None:
    p = _cli.parser("long_run", __doc__.splitlines()[0], quick_help="small run (< 1 min)")
    p.add_argument("--dim", type=_cli.positive_int, default=None)
    p.add_argument("--chunk-size", type=_cli.positive_int, default=500)
    p.add_argument("--no-xla", action="store_true")
    p.add_argument(
        "--child", nargs=2, type=int, metavar=("NUM_CHUNKS", "DIM"), help=argparse.SUPPRESS
    )
    p.add_argument("--run-dir", help=argparse.SUPPRESS)
    a = p.parse_args()
    outputs = _cli.outputs(a)
    if a.child:
        child(a.child[1], a.chunk_size, a.child[0], a.run_dir, not a.no_xla)
        return
    dim = a.dim if a.dim is not None else (5_000 if a.quick else 20_000)
    multiples = [1, 10] if a.quick else [1, 10, 30]
    rows = []
    from tqdm import tqdm

    with tempfile.TemporaryDirectory() as tmp:
        for m in tqdm(multiples, desc="runs", unit="run"):
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--child",
                str(m),
                str(dim),
                "--chunk-size",
                str(a.chunk_size),
                "--run-dir",
                os.path.join(tmp, f"r{m}"),
            ]
            if a.no_xla:
                cmd.append("--no-xla")
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                sys.stderr.write(out.stderr)
                sys.exit(
                    f"long_run.py: error: the run of {m} chunk(s) failed "
                    f"(exit code {out.returncode}; its stderr is above)"
                )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    head = (
        "| chunks | draws | chunk (MB) | all draws (MB) | HDF5 file (MB) | RSS before (MB) "
        "| peak RSS (MB) | growth (MB) | wall (s) |\n|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head] + [
        f"| {r['num_chunks']} | {r['draws']} | {r['chunk_mb']} | {r['draws_in_ram_mb']} | "
        f"{r['file_mb']} | {r['rss_before_mb']} | {r['peak_rss_mb']} | {r['growth_mb']} | "
        f"{r['wall_s']} |"
        for r in rows
    ]
    table = "\n".join(lines)
    print(table)
    md = (
        "# Long runs in bounded memory\n\n"
        f"Command: `{_cli.command_line()}` (SGLD, d = {dim:,} float32, chunk = {a.chunk_size} "
        f"draws, {'graph mode' if a.no_xla else 'XLA'}; each row a fresh process; peak RSS = "
        "`ru_maxrss`; the wall column is for information only).\n\n"
        f"{_cli.provenance()}\n\n"
        f"{table}\n\n"
        "The draws of the longest run would take the 'all draws' column in RAM; the "
        "peak RSS stays at the 1-chunk level because each chunk is written to "
        "`samples.h5` and dropped (see `docs/driver.md`).\n"
    )
    print("wrote", outputs.write_study("long_run.md", md))


if __name__ == "__main__":
    main()
