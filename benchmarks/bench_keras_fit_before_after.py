"""``BayesianModel.fit`` before and after a change, side by side in one run.

Runs ``benchmarks/bench_keras_fit.py`` (this checkout's copy, so both sides are
measured alike) against the library of an earlier checkout and of this one,
alternating (before, after, before, after, ...) so that a change of the machine's load
hits both alike; every run is a fresh process, compilation included. Prints JSON: per
model and side the figures of every repeat (time to the first posterior, the sampling
and MAP steps/s after their first epoch, CPU ms per sampling step, test accuracy, NLL
and ECE), their medians, and the ratios of the medians (after / before; for times,
above 1 is slower).

```bash
git worktree add /tmp/before <commit>
python benchmarks/bench_keras_fit_before_after.py --before /tmp/before --before-label <commit> \\
    --models mlp --n-train 60000 --epochs 2 --batch-size 128 --num-draws 20 --repeats 3 \\
    --out keras_fit_before_after.json
```
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import dump_json, environment, load_average, log

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: The figures kept from each run, read from ``bench_keras_fit``'s ``bayesian_model``.
FIGURES = (
    "time_to_first_posterior",
    "sampling_steps_per_second",
    "cpu_ms_per_sampling_step",
    "accuracy",
    "nll",
    "ece",
)


def run_once(tree: Path, args: argparse.Namespace, model: str) -> dict[str, Any]:
    """One ``bench_keras_fit`` run of ``model`` with the library in ``tree``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        env = dict(os.environ, PYTHONPATH=str(tree), TF_CPP_MIN_LOG_LEVEL="2")
        cmd = [
            sys.executable, str(HERE / "bench_keras_fit.py"), "--models", model,
            "--n-train", str(args.n_train), "--n-test", str(args.n_test),
            "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
            "--num-draws", str(args.num_draws), "--seed", str(args.seed), "--out", str(out),
        ]
        if args.sample_epochs is not None:
            cmd += ["--sample-epochs", str(args.sample_epochs)]
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        doc = json.loads(out.read_text())
    bm = doc["models"][model]["bayesian_model"]
    rates = bm["sampling_steps_per_second_per_epoch"]
    return {
        "time_to_first_posterior": bm["time_to_first_posterior"],
        # After the first sampling epoch, which may include compiling.
        "sampling_steps_per_second": statistics.median(rates[1:] or rates),
        "cpu_ms_per_sampling_step": 1e3 * bm["sampling"]["cpu_seconds_per_step"],
        "accuracy": bm["accuracy"],
        "nll": bm["nll"],
        "ece": bm["ece"],
        "timings": bm["timings"],
        "notes": bm["notes"],
        "commit": doc["environment"].get("commit"),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before", type=Path, required=True, help="the earlier checkout")
    p.add_argument("--after", type=Path, default=ROOT, help="the later one (this checkout)")
    p.add_argument("--before-label", default="before")
    p.add_argument("--after-label", default="after")
    p.add_argument("--models", default="mlp")
    p.add_argument("--n-train", type=int, default=60_000)
    p.add_argument("--n-test", type=int, default=10_000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--sample-epochs", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--num-draws", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    result: dict[str, Any] = {
        "environment": environment(),
        "arguments": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "load_before": load_average(),
        "models": {},
    }
    sides = ((args.before_label, args.before), (args.after_label, args.after))
    for model in args.models.split(","):
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in sides}
        for r in range(args.repeats):
            for label, tree in sides:
                log(f"{model}: {label}, repeat {r + 1}/{args.repeats}")
                runs[label].append(run_once(tree, args, model))
        medians = {
            label: {k: statistics.median(run[k] for run in runs[label]) for k in FIGURES}
            for label, _ in sides
        }
        before, after = (medians[label] for label, _ in sides)
        result["models"][model] = {
            "runs": runs,
            "medians": medians,
            "ratios_after_over_before": {k: after[k] / before[k] for k in FIGURES},
        }
    result["load_after"] = load_average()
    dump_json(result, args.out)
    return result


if __name__ == "__main__":
    main()
