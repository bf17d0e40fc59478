"""The score of every posteriordb posterior, eager against compiled.

A compiled chain (``tf.function``, XLA) and an eager call must see one density. For each
posterior of `models` this evaluates ``JointPosterior.estimator.full_log_prob_and_gradient``
at three prior draws (unconstrained, float64) eagerly and inside ``tf.function``, and
prints JSON: per posterior the largest relative difference of the scores,
``|g_graph − g_eager| / (|g_eager| + 1e-8)`` over every coordinate and draw, and the part
where it is largest, and the posteriors where it exceeds ``1e-6`` (rounding stays below
``1e-7``). The library is this checkout's, or the one at ``--library`` (run in a
child process with that checkout first on its path); the models are always this
checkout's.

```bash
python -m benchmarks.posteriordb.score_modes --label <commit> \\
    --json benchmarks/results/score_modes_after.json
git worktree add /tmp/before <earlier commit>
python -m benchmarks.posteriordb.score_modes --library /tmp/before --label <earlier commit> \\
    --json benchmarks/results/score_modes_before.json
```
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_before_after import CHILD_PREAMBLE, HERE

#: The child that runs another checkout's library (`CHILD_PREAMBLE`).
_CHILD = CHILD_PREAMBLE + """
from benchmarks.posteriordb import score_modes
score_modes.main(sys.argv[3:])
"""


def compare(name: str, sg: Any, models: Any) -> dict[str, Any]:
    """One posterior's row."""
    import tensorflow as tf

    model = models.load(name, dtype=np.float64)
    post = sg.JointPosterior(
        model.prior, model.likelihood_fn, model.data, batch_size=model.num_examples
    )
    est = post.estimator
    parts = [tf.constant(np.asarray(p)) for p in post.initial_state(3, seed=1)]
    eager = est.full_log_prob_and_gradient(parts)
    graph = tf.function(est.full_log_prob_and_gradient, autograph=False)(parts)
    worst, where = 0.0, None
    for part, a, b in zip(post.names, eager.grads_target_log_prob,
                          graph.grads_target_log_prob):
        a, b = np.asarray(a), np.asarray(b)
        ok = np.isfinite(a) & np.isfinite(b)
        if ok.any():
            rel = float(np.max(np.abs(a[ok] - b[ok]) / (np.abs(a[ok]) + 1e-8)))
            if rel > worst or where is None:
                worst, where = max(worst, rel), part
    return {"posterior": name, "max_rel_diff": worst, "worst_part": where}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, help="a checkout whose tfp_sgmcmc to use")
    parser.add_argument("--label", default="", help="what the library is (a commit)")
    parser.add_argument("--posteriors", nargs="+", help="default: all")
    parser.add_argument("--json", help="also write the JSON document here")
    args = parser.parse_args(argv)
    if args.library is not None:
        # Another checkout's library, in a process of its own.
        rest = ["--label", args.label]
        if args.posteriors:
            rest += ["--posteriors", *args.posteriors]
        if args.json:
            rest += ["--json", str(Path(args.json).resolve())]
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.run(
                [sys.executable, "-c", _CHILD, str(HERE), str(args.library.resolve()), *rest],
                cwd=tmp, env=env,
            )
        raise SystemExit(proc.returncode)
    import tfp_sgmcmc as sg
    from benchmarks.posteriordb import models

    t0 = time.perf_counter()
    rows = [compare(n, sg, models) for n in (args.posteriors or models.NAMES)]
    doc = {
        "benchmark": "posteriordb score, eager against tf.function",
        "library": args.label,
        "seconds": round(time.perf_counter() - t0, 1),
        "num_posteriors": len(rows),
        "max_rel_diff": max(r["max_rel_diff"] for r in rows),
        "results": rows,
        # Beyond float64 rounding through a Cholesky or an ODE solve (1e-8 at most here).
        "disagree": [r["posterior"] for r in rows if r["max_rel_diff"] > 1e-6],
    }
    text = json.dumps(doc, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
