"""``sg.sample_posterior``'s verdict over several seeds, before and after a change.

A verdict rule that misfires at one seed in six is a user's bad day one time in six:
this runs this checkout's ``benchmarks.posteriordb.bench_sample_posterior`` (one
``sample_posterior`` call, 4 chains x 1,000 draws, defaults otherwise, no NUTS) once per
seed on the library of a checkout of the earlier code and once on this one's (each call a
fresh process; the harness and the models are this checkout's on both sides, so only the
library differs), and prints JSON: per seed and side the
verdict, its reasons, the accuracy against posteriordb's reference and the seconds, and
per side how many seeds were ``ok``, how many accurate, and how many ``ok`` but wrong.

```bash
git worktree add /tmp/before <commit>
python -m benchmarks.bench_verdict_seeds --before /tmp/before --before-label <commit> \\
    --posterior eight_schools-eight_schools_noncentered --seeds 0 1 2 3 4 5 --json out.json
```
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench_before_after import CHILD_PREAMBLE, HERE, add_checkout_arguments

#: A child's program: another checkout's library (`CHILD_PREAMBLE`), this checkout's
#: harness.
_CHILD = CHILD_PREAMBLE + """
import json
import numpy as np
name, seed, out = sys.argv[3:]
from benchmarks.posteriordb import bench_sample_posterior as b
row = b.run_one(name, np.float64, int(seed), None)
open(out, "w").write(json.dumps(row))
"""


def run_once(tree: Path, posterior: str, seed: int) -> dict[str, Any]:
    """One ``bench_sample_posterior`` row: this checkout's harness, ``tree``'s library."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        env.pop("PYTHONPATH", None)
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(HERE), str(tree), posterior, str(seed),
             str(out)], cwd=tmp, env=env, capture_output=True, text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{tree}: {posterior} seed {seed} failed:\n{proc.stderr[-3000:]}")
        return json.loads(out.read_text())

KEPT = ("verdict", "reasons", "accurate", "max_mean_error", "sd_ratio_min", "sd_ratio_max",
        "seconds")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkout_arguments(parser)
    parser.add_argument("--posterior", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--json", help="also write the JSON document here")
    args = parser.parse_args(argv)
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    rows: list[dict[str, Any]] = []
    for seed in args.seeds:
        row: dict[str, Any] = {"seed": seed}
        for side, tree in sides.items():
            r = run_once(tree, args.posterior, seed)
            row[side] = {k: r[k] for k in KEPT}
            print(f"seed {seed} {side}: {r['verdict']}, accurate {r['accurate']}, "
                  f"{r['seconds']:.1f} s", file=sys.stderr)
        rows.append(row)
    summary = {
        side: {
            "ok": sum(r[side]["verdict"] == "ok" for r in rows),
            "accurate": sum(bool(r[side]["accurate"]) for r in rows),
            "ok_but_wrong": sum(r[side]["verdict"] == "ok" and not r[side]["accurate"]
                                for r in rows),
        }
        for side in sides
    }
    doc = json.dumps({"posterior": args.posterior, "before": args.before_label,
                      "after": args.after_label, "seeds": args.seeds, "summary": summary,
                      "results": rows}, indent=2)
    print(doc)
    if args.json:
        Path(args.json).write_text(doc + "\n")


if __name__ == "__main__":
    main()
