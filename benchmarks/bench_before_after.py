"""``sg.sample_posterior`` before and after a change, side by side in one run.

Runs ``benchmarks.posteriordb.bench_sample_posterior`` (one ``sample_posterior`` call,
4 chains x 1,000 draws, defaults otherwise, no NUTS) on each posterior, once in a
checkout of the earlier code and once in this one, alternating (before, after, before,
after, ...) so that a change of the machine's load hits both alike. Every call is a
fresh process, as a user's first call is: the time includes tracing and compiling.
Prints JSON: per posterior and side the wall seconds of every repeat, their median,
the verdict and the accuracy against posteriordb's reference, and the ratio of the
medians (after / before).

```bash
git worktree add /tmp/before <commit>      # or: git archive <commit> | tar -x -C /tmp/before
python -m benchmarks.bench_before_after --before /tmp/before --before-label <commit> \\
    --posteriors kidiq-kidscore_momhs earnings-earn_height --repeats 2 --json out.json
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

HERE = Path(__file__).resolve().parents[1]


#: The start of a child program that runs another checkout's library: that checkout
#: (``sys.argv[2]``) first on ``sys.path``, and this checkout's ``benchmarks`` folder
#: (under ``sys.argv[1]``; a namespace package, bound by path so that the other
#: checkout's copy cannot shadow it). The rest of the program reads ``sys.argv[3:]``.
CHILD_PREAMBLE = """
import sys, types
here, tree = sys.argv[1:3]
sys.path.insert(0, tree)
pkg = types.ModuleType("benchmarks")
pkg.__path__ = [here + "/benchmarks"]
sys.modules["benchmarks"] = pkg
import tfp_sgmcmc
assert tfp_sgmcmc.__file__.startswith(tree), (tfp_sgmcmc.__file__, tree)
"""


def run_once(tree: Path, posterior: str, seed: int) -> dict[str, Any]:
    """One ``bench_sample_posterior`` row, computed by the code in ``tree``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        env = dict(os.environ, PYTHONPATH=str(tree), TF_CPP_MIN_LOG_LEVEL="2")
        cmd = [
            sys.executable, "-c",
            # Which package answered, to catch an installed copy shadowing the tree.
            "import sys, tfp_sgmcmc; print(tfp_sgmcmc.__file__, file=sys.stderr); "
            "from benchmarks.posteriordb import bench_sample_posterior as b; "
            f"b.main(['--posteriors', {posterior!r}, '--nuts', 'none', '--seed', '{seed}', "
            f"'--json', {str(out)!r}])",
        ]
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{tree}: {posterior} failed:\n{proc.stderr[-3000:]}")
        first = proc.stderr.splitlines()[0] if proc.stderr else ""
        if not first.startswith(str(tree)):
            raise RuntimeError(f"{tree}: imported tfp_sgmcmc from {first!r}, not the tree")
        return json.loads(out.read_text())["results"][0]


def add_checkout_arguments(parser: argparse.ArgumentParser) -> None:
    """``--before``, ``--after`` and their labels: the two checkouts a comparison runs."""
    parser.add_argument("--before", type=Path, required=True,
                        help="a checkout of the earlier code (its repository root)")
    parser.add_argument("--after", type=Path, default=HERE,
                        help="a checkout of the later code (default: this one)")
    parser.add_argument("--before-label", default="before",
                        help="what the earlier checkout is (a commit), kept in the JSON")
    parser.add_argument("--after-label", default="after", help="the same for the later one")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkout_arguments(parser)
    parser.add_argument("--posteriors", nargs="+", required=True)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the JSON document here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    rows = []
    for name in args.posteriors:
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for _ in range(args.repeats):
            for side, tree in sides.items():
                runs[side].append(run_once(tree, name, args.seed))
                r = runs[side][-1]
                print(f"{name} {side}: {r['seconds']:.1f} s, {r['verdict']}", file=sys.stderr)
        row: dict[str, Any] = {"posterior": name}
        for side, rs in runs.items():
            secs = [r["seconds"] for r in rs]
            row[side] = {
                "seconds": secs,
                "median_seconds": statistics.median(secs),
                "verdict": [r["verdict"] for r in rs],
                "max_mean_error": [r["max_mean_error"] for r in rs],
                "sd_ratio": [[r["sd_ratio_min"], r["sd_ratio_max"]] for r in rs],
                "accurate": [r["accurate"] for r in rs],
                "phases": {k: statistics.median(r[k] for r in rs)
                           for k in rs[0] if k.startswith("seconds_")},
            }
        row["ratio_after_over_before"] = (
            row["after"]["median_seconds"] / row["before"]["median_seconds"]
        )
        rows.append(row)
    doc = json.dumps({
        "before": args.before_label, "after": args.after_label,
        "seed": args.seed, "repeats": args.repeats, "results": rows,
    }, indent=2)
    print(doc)
    if args.json:
        Path(args.json).write_text(doc + "\n")


if __name__ == "__main__":
    main()
