"""The MAMBA paper's §4.3 BNN study (Tables 3, 8) at CPU scale.

The 784-100-10 network with a softmax hidden layer and N(0, 1) priors
(``tfp_sgmcmc/models/mnist_bnn.py``, plain TF) on the synthetic MNIST-shaped
images (default) or MNIST files (``--mnist DIR|mnist.npz``). Six samplers
(SGLD, SGLD-CV, SGHMC, SGHMC-CV, SGNHT, SGNHT-CV), each tuned by

* MAMBA-KSD over the paper's grid: log10 ε ∈ {−2, −2.5, …, −7.5} × batch
  {100, 10, 1}% [× L ∈ {5, 10} for SGHMC], η = 3, total sampling budget T s;
* grid search: 10% batch, the same step sizes [× L], ``--grid-steps``
  iterations per configuration from the MAP plus N(0, 1) noise (the paper's
  start), picking the highest test accuracy (every 20th sample, as the
  paper's code);
* the heuristic: ε = 1/N (log10 ε = −4.8), 10% batch, L = 10;

then every tuned sampler runs ``--eval-seconds`` from the MAP and we report
the test accuracy, ECE and MCE (10 equal-width bins, Bayesian model average)
and KSD, beside the paper's Table 3.

Run::

    python examples/mamba_mnist_bnn_study.py --quick     # smoke test
    python examples/mamba_mnist_bnn_study.py             # full CPU-scale study

Writes ``<out>/mamba_mnist_bnn.md`` (the table) and ``<out>/results.json`` under ``--out`` (default
``out/mamba_mnist_bnn/``); ``--write-docs`` also writes
``docs/studies/mamba_mnist_bnn.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import _cli  # noqa: F401  (first: quiet TensorFlow start-up)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _paper_tables import SAMPLERS, tune_three_ways, write_partial  # noqa: E402

import tfp_sgmcmc as sg  # noqa: E402
from tfp_sgmcmc import tuning  # noqa: E402
from tfp_sgmcmc.models import mnist_bnn as mb  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
STUDY_NAME = "mamba_mnist_bnn"
#: Paper Table 3 (ECE %, MCE %) and Table 8 (log10 ε, batch %, L).
PAPER = {
    "MAMBA-KSD": {
        "SGLD": (1.0, 36.4, "-5.5, 1%"),
        "SGLD-CV": (0.9, 15.7, "-5.5, 1%"),
        "SGHMC": (0.7, 47.1, "-6.5, 1%, L=5"),
        "SGHMC-CV": (0.7, 21.3, "-6, 1%, L=5"),
        "SGNHT": (9.3, 45.7, "-5, 1%"),
        "SGNHT-CV": (0.9, 27.4, "-7.5, 1%"),
    },
    "Grid": {
        "SGLD": (14.6, 42.1, "-3.5, 10%"),
        "SGLD-CV": (8.8, 40.7, "-3.5, 10%"),
        "SGHMC": (20.1, 65.5, "-5, 10%, L=10"),
        "SGHMC-CV": (25.1, 55.2, "-5, 10%, L=10"),
        "SGNHT": (5.4, 42.2, "-5, 10%"),
        "SGNHT-CV": (7.7, 42.3, "-4.5, 10%"),
    },
    "Heuristic": {
        "SGLD": (0.8, 23.3, "-4.8, 10%"),
        "SGLD-CV": (0.7, 22.0, "-4.8, 10%"),
        "SGHMC": (50.9, 71.6, "-4.8, 10%, L=10"),
        "SGHMC-CV": (40.8, 74.8, "-4.8, 10%, L=10"),
        "SGNHT": (6.2, 43.2, "-4.8, 10%"),
        "SGNHT-CV": (7.0, 51.5, "-4.8, 10%"),
    },
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="reduced grids and budgets (smoke)")
    ap.add_argument("--samplers", default=",".join(SAMPLERS))
    ap.add_argument("--mnist", default=None, help="IDX directory or mnist.npz (default: synthetic)")
    ap.add_argument("--budget", type=float, default=None, help="MAMBA total sampling seconds T")
    ap.add_argument("--grid-steps", type=int, default=None, help="iterations per grid point")
    ap.add_argument("--eval-seconds", type=float, default=None)
    ap.add_argument("--ksd-samples", type=int, default=None, help="max samples per KSD")
    ap.add_argument("--map-steps", type=int, default=None, help="Adam steps for the MAP")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "mamba_mnist_bnn"))
    ap.add_argument(
        "--write-docs",
        action="store_true",
        help="also write docs/studies/mamba_mnist_bnn.md (a tracked file)",
    )
    args = ap.parse_args()
    quick = args.quick
    samplers = args.samplers.split(",")
    budget = args.budget or (10.0 if quick else 60.0)
    eval_s = args.eval_seconds or (5.0 if quick else 30.0)
    grid_steps = args.grid_steps or (100 if quick else 1000)
    ksd_n = args.ksd_samples or (10 if quick else 30)
    map_steps = args.map_steps or (500 if quick else 3000)
    steps = tuning.log10_grid(-3, -7, 1.0) if quick else tuning.log10_grid(-2, -7.5, 0.5)
    fractions = [0.1, 0.01] if quick else [1.0, 0.1, 0.01]
    leapfrogs = [5] if quick else [5, 10]
    os.makedirs(args.out, exist_ok=True)

    t0 = time.time()
    prob = mb.mnist_bnn(path=args.mnist) if args.mnist else mb.mnist_bnn(synthetic=True)
    base = prob.estimator(prob.batch_size_from_fraction(0.01))
    theta_map = sg.find_map(
        base, mb.init_state(), method="adam", num_steps=map_steps, learning_rate=1e-3
    ).position
    map_m = prob.metrics([p.numpy() for p in theta_map])
    cv = sg.ControlVariateEstimator(base, theta_map)
    ksd = tuning.KSDMetric(max_samples=ksd_n, score_block_size=2)
    neg_acc = tuning.FunctionMetric(
        lambda s: (
            -prob.metrics([p[::20] if p.shape[0] >= 40 else p for p in s], max_samples=20)[
                "accuracy"
            ]
        ),
        "-accuracy",
    )
    rng = np.random.default_rng(1)
    noisy_map = [p + tf.constant(rng.standard_normal(p.shape), p.dtype) for p in theta_map]
    n_heur = prob.num_train  # 1/60,000: log10 ε = −4.8 as the paper
    rows: list[dict] = []

    for name in samplers:
        for method, key, r, ev in tune_three_ways(
            name,
            base=base,
            control_variate=cv,
            theta_map=theta_map,
            grid_start=noisy_map,
            steps=steps,
            fractions=fractions,
            leapfrogs=leapfrogs,
            budget=budget,
            ksd=ksd,
            grid_metric=neg_acc,
            grid_steps=grid_steps,
            num_train=n_heur,
            eval_seconds=eval_s,
            thin=1,
        ):
            rec = ev.records[0]
            s = [np.asarray(p) for p in ev.best_samples]
            ok = not rec.diverged and s[0].shape[0] >= 1
            m = (
                prob.metrics(s, max_samples=50)
                if ok
                else {k: float("nan") for k in ("accuracy", "log_loss", "ece", "mce")}
            )
            row = {
                "sampler": name,
                "method": method,
                "arm": key,
                "ksd": rec.metric if ok else float("inf"),
                **m,
                "samples": int(rec.steps),
                "tuning_sampling_s": float(r.total_sampling_seconds),
            }
            rows.append(row)
            write_partial(args.out, rows)
            print(
                f"{name:9s} {method:10s} {key:55s} KSD {row['ksd']:10.4g} "
                f"acc {m['accuracy']:.4f} ECE {100 * m['ece']:.1f}% MCE {100 * m['mce']:.1f}% "
                f"steps {row['samples']}",
                flush=True,
            )
    config = {
        "budget_T_s": budget,
        "eval_s": eval_s,
        "grid_steps": grid_steps,
        "ksd_max_samples": ksd_n,
        "map_steps": map_steps,
        "step_grid_log10": [float(np.log10(x)) for x in steps],
        "batch_fractions": fractions,
        "leapfrogs": leapfrogs,
        "data": prob.source,
        "map_metrics": map_m,
        "wall_s": time.time() - t0,
        "command": "python examples/mamba_mnist_bnn_study.py " + " ".join(sys.argv[1:]),
    }
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"config": config, "rows": rows}, f, indent=1)
    text = render(rows, config)
    with open(os.path.join(args.out, f"{STUDY_NAME}.md"), "w") as f:
        f.write(text)
    if args.write_docs:
        with open(os.path.join(ROOT, "docs", "studies", f"{STUDY_NAME}.md"), "w") as f:
            f.write(text)
    print(text)


def render(rows: list[dict], cfg: dict) -> str:
    lines = [
        "| sampler | method | chosen arm | KSD | accuracy | ECE % | MCE % | samples "
        "| paper: arm | paper ECE % | paper MCE % |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = PAPER.get(r["method"], {}).get(r["sampler"], ("-", "-", "-"))
        lines.append(
            f"| {r['sampler']} | {r['method']} | {r['arm']} | {r['ksd']:.4g} | "
            f"{r['accuracy']:.4f} | {100 * r['ece']:.1f} | {100 * r['mce']:.1f} | "
            f"{r['samples']} | {p[2]} | {p[0]} | {p[1]} |"
        )
    mm = cfg["map_metrics"]
    head = (
        f"Command: `{cfg['command'].strip()}` ({cfg['wall_s']:.0f} s wall). Data: "
        f"{cfg['data']}; MAP ({cfg['map_steps']} Adam steps): accuracy "
        f"{mm['accuracy']:.4f}, ECE {100 * mm['ece']:.1f}%, MCE {100 * mm['mce']:.1f}%. "
        f"MAMBA T = {cfg['budget_T_s']:g} s, grid {cfg['grid_steps']} steps per point, "
        f"evaluation {cfg['eval_s']:g} s from the MAP, KSD on at most "
        f"{cfg['ksd_max_samples']} thinned samples. Step grid log10 ε "
        f"{cfg['step_grid_log10'][0]:g} … {cfg['step_grid_log10'][-1]:g}, batch fractions "
        f"{cfg['batch_fractions']}, L {cfg['leapfrogs']}."
    )
    return head + "\n\n" + "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
