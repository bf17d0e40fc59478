"""Cost per step of S-SGLD and Sd-SGLD: S-SGLD grows with M, Sd-SGLD with K (not M).

Workload: a 64→64→10 tanh MLP (4,810 parameters, 4 state parts) on 10,000
synthetic rows, batch 500, float32, one chain, SGLD through
``tfp.mcmc.sample_chain`` in ``tf.function(jit_compile=True)`` (``trace_fn=None``;
the history buffer stays out of the trace). Configurations:

* ``sgld``: plain SGLD (reference);
* ``s_sgld``: S-SGLD with M ∈ {2, 4, 8, 16} groups (flat index mod M) — M
  likelihood evaluations per step;
* ``sd_sgld_K``: Sd-SGLD with K ∈ {1, 2, 4, 8} at M = 16 — K evaluations;
* ``sd_sgld_M``: Sd-SGLD with K = 4 at M ∈ {4, 64, 4810 (|θ|)} — cost must not
  depend on M.

History capacity 200, thinning 1. Each configuration is compiled by a warm-up
call, then timed ``--repeats`` times round-robin; medians are reported, and the
time per step relative to plain SGLD (measured in the same round).

Usage::

    python benchmarks/bench_structured.py [--quick] [--output results.json]
    # writes docs/studies/structured_cost.md:
    python benchmarks/bench_structured.py --repeats 3 --write-docs
    python benchmarks/bench_structured.py --from-json results.json --write-docs  # redraw only

``--write-docs`` writes the page from this run's JSON: the command, commit,
versions, machine and load, the table, a reading whose numbers come from the
table, and the JSON itself. It is a timing page: a rerun gives other
milliseconds, and the ratios within a round are what it reports.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from _common import dump_json, environment, load_average, median, timed_call  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc.estimators.partitions import partition_fully_factorized, partition_modulo  # noqa: E402
from tfp_sgmcmc.estimators.structured import (  # noqa: E402
    StructuredDropoutEstimator,
    StructuredEstimator,
)

H = 64


def model(n=10_000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 64)).astype(np.float32)
    y = rng.integers(0, 10, n).astype(np.int32)

    def loglik(params, batch):
        w1, b1, w2, b2 = params
        xb, yb = batch
        h = tf.tanh(tf.einsum("nd,...dh->...nh", xb, w1) + b1[..., tf.newaxis, :])
        lg = tf.einsum("...nh,...hk->...nk", h, w2) + b2[..., tf.newaxis, :]
        labels = tf.broadcast_to(yb, tf.shape(lg)[:-1])
        return -tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=lg)

    def logprior(params):
        return sum(
            -0.5 * tf.reduce_sum(p**2, axis=list(range(-r, 0)))
            for p, r in zip(params, [2, 1, 2, 1])
        )

    init = [
        tf.constant(rng.normal(0, 0.1, (64, H)), tf.float32),
        tf.zeros([H]),
        tf.constant(rng.normal(0, 0.1, (H, 10)), tf.float32),
        tf.zeros([10]),
    ]
    return sg.MinibatchEstimator(loglik, (x, y), batch_size=500, log_prior_fn=logprior), init


PAGE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "docs",
    "studies",
    "structured_cost.md",
)


def _ratios(res: dict, prefix: str) -> list[tuple[str, float]]:
    """(configuration suffix, relative time) of the configurations named ``prefix/...``."""
    return [
        (k.split("/", 1)[1], v["relative_to_sgld"])
        for k, v in res.items()
        if k.startswith(prefix + "/")
    ]


def render_page(out: dict) -> str:
    """The study page of one run's JSON ``out`` (what ``--write-docs`` writes)."""
    w, res, env = out["workload"], out["results"], out["environment"]
    ver, mach = env["versions"], env["machine"]
    load = out.get("load_average") or []
    commit = out.get("commit") or env.get("commit", "unknown")
    cmd = out.get("command", "python benchmarks/bench_structured.py --repeats 3 --write-docs")
    lines = [
        "# Cost per step of S-SGLD and Sd-SGLD",
        "",
        f"Command: `{cmd}` (it writes this page; the JSON it printed is at the end).",
        f"This run: commit `{commit}`; Python {ver['python']}, "
        f"TensorFlow {ver['tensorflow']}, TFP {ver['tensorflow_probability']}, "
        f"NumPy {ver['numpy']}; "
        f"{mach['nproc']} × {mach['cpu']}, {mach['platform']}, "
        + (f"{mach['gpus']} GPU(s)" if mach["gpus"] else "CPU only")
        + (
            f"; load average {load[0]:.1f} (1 min), {load[1]:.1f} (5 min) at the end."
            if load
            else "."
        ),
        "",
        f"Workload: {w['model']} ({w['parameters']:,} parameters in 4 state parts), {w['rows']:,} "
        f"synthetic rows, batch {w['batch_size']}, {w['dtype']}, one chain, SGLD in "
        "`tfp.mcmc.sample_chain` under `tf.function(jit_compile=True)`, "
        f"{w['steps_per_call']} steps per timed call, history capacity {w['history_capacity']}. "
        f"Medians of {out.get('repeats', 3)} round-robin repeats. This is a timing page: a rerun "
        "gives other milliseconds, more so on a loaded machine, and the ratios measured within "
        "a round are what it reports.",
        "",
        "| configuration | likelihood evaluations / step | ms / step "
        "| relative to SGLD (median of per-round ratios) |",
        "|---|---|---|---|",
    ]
    for name, r in res.items():
        lines.append(
            f"| {name} | {r['likelihood_evaluations_per_step']} | {r['ms_per_step']:.2f} "
            f"| {r['relative_to_sgld']:.2f} |"
        )

    def times(pairs: list[tuple[str, float]]) -> str:
        return ", ".join(f"{v:.1f}×" for _, v in pairs)

    def labels(pairs: list[tuple[str, float]], key: str) -> str:
        vals = [dict(kv.split("=") for kv in s.split(","))[key] for s, _ in pairs]
        return ", ".join(f"{int(v):,}" for v in vals)

    s_m, sd_k, sd_m = _ratios(res, "s_sgld"), _ratios(res, "sd_sgld_K"), _ratios(res, "sd_sgld_M")
    lines += [
        "",
        "Reading (the numbers are this run's):",
        "",
        f"* **S-SGLD grows with M**: {times(s_m)} plain SGLD for M = {labels(s_m, 'M')} "
        "(M likelihood passes per step, evaluated as one vectorised call with a leading "
        "dimension of size M).",
        f"* **Sd-SGLD grows with K**: {times(sd_k)} for K = {labels(sd_k, 'K')} at M = 16: "
        "it makes K likelihood passes per step"
        + (
            f"; at the paper's K = 2 a step takes {k2:.2f}× SGLD's."
            if (k2 := res.get("sd_sgld_K/K=2,M=16", {}).get("relative_to_sgld")) is not None
            else "."
        ),
        f"* **Sd-SGLD does not grow with M** the way S-SGLD does: at K = 4, {times(sd_m)} for "
        f"M = {labels(sd_m, 'M')} (the last is |θ|, fully factorised). What growth there is "
        "comes from the O(K·M) mask and history-index draws and gathers (one index per group "
        "and mask), small next to the K likelihood passes.",
        "",
        "```json",
        json.dumps(out, indent=2),
        "```",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--output", default=None)
    p.add_argument(
        "--write-docs", action="store_true",
        help="write docs/studies/structured_cost.md from this run (or from --from-json)",
    )  # fmt: skip
    p.add_argument(
        "--from-json", default=None, metavar="FILE", help="render a saved JSON; runs nothing"
    )
    args = p.parse_args(argv)
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            out = json.load(f)
        if args.write_docs:
            _write_page(out)
        else:
            print(render_page(out))
        return
    base, init = model()
    shapes = [tuple(q.shape) for q in init]
    n_params = sum(int(np.prod(s)) for s in shapes)
    steps = 50 if args.quick else 300
    cap = 200
    configs = {"sgld": (base, 1)}
    for m in [2, 8] if args.quick else [2, 4, 8, 16]:
        configs[f"s_sgld/M={m}"] = (StructuredEstimator(base, partition_modulo(shapes, m), cap), m)
    for k in [1, 4] if args.quick else [1, 2, 4, 8]:
        configs[f"sd_sgld_K/K={k},M=16"] = (
            StructuredDropoutEstimator(
                base, partition_modulo(shapes, 16), num_masks=k, keep_prob=0.5, history_capacity=cap
            ),
            k,
        )
    for m in [4, n_params] if args.quick else [4, 64, n_params]:
        part = partition_fully_factorized(shapes) if m == n_params else partition_modulo(shapes, m)
        configs[f"sd_sgld_M/K=4,M={m}"] = (
            StructuredDropoutEstimator(
                base, part, num_masks=4, keep_prob=0.5, history_capacity=cap
            ),
            4,
        )

    fns, compile_s = {}, {}
    for name, (est, _) in configs.items():
        kernel = sg.SGLD(est, 1e-5)

        @tf.function(jit_compile=True)
        def run(seed, kernel=kernel):
            return tfp.mcmc.sample_chain(steps, init, kernel=kernel, trace_fn=None, seed=seed)

        t_first, _ = timed_call(run, tf.constant([1, 1]))
        fns[name] = run
        compile_s[name] = t_first
        print(f"compiled {name} ({t_first:.1f} s)", file=sys.stderr)

    per_step = {n: [] for n in configs}
    ratio = {n: [] for n in configs}
    for r in range(args.repeats):
        times = {}
        for name, fn in fns.items():
            t, _ = timed_call(fn, tf.constant([2, r]))
            times[name] = t / steps
            per_step[name].append(times[name])
        for name in configs:
            ratio[name].append(times[name] / times["sgld"])
        print(f"round {r + 1}/{args.repeats} done", file=sys.stderr)

    out = {
        "benchmark": "bench_structured",
        "workload": {
            "model": "MLP 64-64-10 tanh",
            "parameters": n_params,
            "rows": 10_000,
            "batch_size": 500,
            "dtype": "float32",
            "steps_per_call": steps,
            "history_capacity": cap,
            "xla": True,
        },
        "load_average": load_average(),
        "results": {
            name: {
                "likelihood_evaluations_per_step": configs[name][1],
                "ms_per_step": round(1e3 * median(per_step[name]), 4),
                "relative_to_sgld": round(median(ratio[name]), 3),
                "first_call_s_incl_compile": round(compile_s[name], 2),
            }
            for name in configs
        },
        "environment": environment(),
        "repeats": args.repeats,
        "command": "python benchmarks/bench_structured.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
    }
    dump_json(out, args.output)
    if args.write_docs:
        _write_page(out)


def _write_page(out: dict) -> None:
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(render_page(out))
    print(f"wrote {PAGE}", file=sys.stderr)


if __name__ == "__main__":
    main()
