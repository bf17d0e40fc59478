"""A Keras 3 Bayesian neural network on sklearn's digits, tuned by MAMBA vs grid and heuristic.

The network (64 → 32 tanh → 10, N(0, 1) prior, ``tfp_sgmcmc/models/bnn_digits.py``) is a
Keras 3 model sampled through ``tfp_sgmcmc.keras.KerasPosterior``
(weights as state parts, ``stateless_call``). SGLD is tuned three ways, as the
paper's §4.3 (MNIST there, the bundled digits here):

* MAMBA-KSD over step × batch (η = 3, budget T);
* grid search: 10% batch, a fixed budget per step size, metric = −test accuracy
  (the paper's NN grid search);
* the heuristic: ε = 1/N, 10% batch.

Each tuned sampler then runs the same fixed budget from the MAP; we report test
accuracy, log-loss, ECE and MCE (10 equal-width bins) of the Bayesian model
average.

Budgets are per-example likelihood gradient evaluations
(``tuning.gradient_evaluations``, the options of ``_paper_tables.add_budget_options``),
so a rerun gives the same table on any machine; the defaults convert the paper-style
seconds (T = 30 s, 15 s per evaluation) at ``IDLE_GRADIENTS_PER_SECOND``, and the grid's
is about 1,000 SGLD steps at a 10% batch. Seconds remain available (``--budget``,
``--grid-seconds``, ``--eval-seconds``).

Run::

    python examples/mamba_bnn_digits.py --quick   # smoke test: 9 arms, small budgets
    python examples/mamba_bnn_digits.py

Writes ``studies/mamba_bnn_digits.md`` and ``figures/mamba_bnn_digits.png`` under
``--out`` (default ``out/mamba_bnn_digits/``; ``--write-docs`` for ``docs/``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import _cli
import numpy as np
from _paper_tables import add_budget_options, budget_json, budget_text, budgets

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning
from tfp_sgmcmc.keras import posterior_predictive_metrics
from tfp_sgmcmc.models.bnn_digits import bnn_digits
from tfp_sgmcmc.tuning.arms import arm_label
from tfp_sgmcmc.tuning.baselines import heuristic_arm, run_fixed

#: Per-example likelihood gradients per second of SGLD on this network at a 10% batch
#: (135 rows) on a 2-core CPU, rounded (about 4,000 steps/s): converts the paper-style
#: seconds to the deterministic defaults below.
IDLE_GRADIENTS_PER_SECOND = 5e5

#: Default budgets (full, quick) in per-example gradient evaluations: MAMBA's T ≈ 30 s /
#: 0.6 s, each grid configuration about 1,000 / 200 SGLD steps at a 10% batch, each
#: evaluation ≈ 15 s / 0.4 s.
DEFAULT_MAMBA_GRADIENTS = (30 * IDLE_GRADIENTS_PER_SECOND, 3e5)
DEFAULT_GRID_GRADIENTS = (1.35e5, 2.7e4)
DEFAULT_EVAL_GRADIENTS = (15 * IDLE_GRADIENTS_PER_SECOND, 2e5)


def _parser() -> Any:
    ap = _cli.parser(
        "mamba_bnn_digits",
        __doc__.split("\n\n")[0],
        "9 arms, 100 MAP steps, small gradient budgets (smoke)",
    )
    add_budget_options(ap, DEFAULT_MAMBA_GRADIENTS, DEFAULT_GRID_GRADIENTS, DEFAULT_EVAL_GRADIENTS)
    return ap


def _budgets(args: Any) -> dict[str, tuning.Budget]:
    return budgets(args, DEFAULT_MAMBA_GRADIENTS, DEFAULT_GRID_GRADIENTS, DEFAULT_EVAL_GRADIENTS)


def main() -> None:
    args = _parser().parse_args()
    out = _cli.outputs(args)
    bud = _budgets(args)
    t0 = time.time()

    prob = bnn_digits(hidden=32, seed=0)
    post = prob.posterior
    n = prob.num_train
    base = post.estimator(batch_size=max(1, n // 10))
    mp = sg.find_map(
        base,
        post.init_state(),
        method="adam",
        num_steps=100 if args.quick else 2000,
        learning_rate=1e-2,
    )
    theta0 = mp.position
    steps = tuning.log10_grid(-3, -5, 0.25) if args.quick else tuning.log10_grid(-2.5, -5.5, 0.5)
    fractions = [0.1] if args.quick else [0.1, 0.03]
    arms = tuning.grid(step_size=steps, batch_fraction=fractions)
    common = dict(kernel=tuning.KernelSpec(sg.SGLD, base))
    # The paper's KSD, as the paper ran it.
    ksd = tuning.KSDMetric(max_samples=100, preconditioner=None, check_validity=False)

    def neg_acc(samples):
        return -posterior_predictive_metrics(
            post, samples, prob.x_test, prob.y_test, max_samples=20
        )["accuracy"]

    res = {
        "MAMBA-KSD": tuning.MAMBA(
            arms, theta0, budget=bud["mamba"], metric=ksd, progress=False, **common
        ).run(),
        "Grid": tuning.grid_search(
            tuning.grid(step_size=steps, batch_fraction=[0.1]),
            theta0,
            budget_per_arm=bud["grid"],
            metric=tuning.FunctionMetric(neg_acc, "-accuracy"),
            progress=False,
            **common,
        ),
        "Heuristic": run_fixed(
            "heuristic",
            [heuristic_arm(n)],
            theta0,
            budget_per_arm=tuning.steps(1),
            metric="ksd_unit",
            progress=False,
            **common,
        ),
    }
    res["MAMBA-KSD"].plot(
        out.figure("mamba_bnn_digits.png"), title="MAMBA-KSD, SGLD, Keras BNN on digits"
    )
    rows = []
    for method, r in res.items():
        ev = run_fixed(
            "eval",
            [r.best_arm],
            theta0,
            budget_per_arm=bud["eval"],
            metric=ksd,
            progress=False,
            **common,
        )
        rec = ev.records[0]
        if rec.diverged or ev.samples[0].shape[0] == 0:
            m = {
                "accuracy": float("nan"),
                "log_loss": float("nan"),
                "ece": float("nan"),
                "mce": float("nan"),
            }
        else:
            m = posterior_predictive_metrics(post, ev.samples, prob.x_test, prob.y_test)
        rows.append((method, arm_label(r.best_arm), rec.metric, m, rec.steps))
        print(
            f"{method:10s} {arm_label(r.best_arm):45s} KSD {rec.metric:.4g} "
            f"acc {m['accuracy']:.4f} ECE {m['ece']:.4f} MCE {m['mce']:.4f} steps {rec.steps}",
            flush=True,
        )
    map_m = posterior_predictive_metrics(
        post, [np.asarray(p)[None] for p in theta0], prob.x_test, prob.y_test
    )
    rate, b = IDLE_GRADIENTS_PER_SECOND, {k: budget_json(x) for k, x in bud.items()}
    trims = (
        " This quick run is a smoke version: 9 step sizes × 10% (the full run: 7 × "
        "{10, 3}%), a 100-step MAP (2,000), budgets about 2% of the full run's (the grid's "
        "a fifth)."
        if args.quick
        else ""
    )
    lines = [
        "# MAMBA study: Keras BNN on the digits data (paper §4.3 at CPU scale"
        + (", quick run)" if args.quick else ")"),
        "",
        f"Regenerate: `{_cli.command_line()}`",
        "",
        _cli.provenance(),
        "",
        f"{post.num_parameters} weights, N = {n} train / {prob.x_test.shape[0]} test. MAMBA "
        f"budget T = {budget_text(b['mamba'], rate, '10%')}; grid "
        f"{budget_text(b['grid'], rate, '10%')} per step size at 10% batch (−test accuracy); "
        f"evaluation: {budget_text(b['eval'], rate, '10%')} from the MAP, Bayesian model "
        "average, 10 equal-width bins. Budgets are per-example gradient evaluations, so the "
        "table does not depend on the machine's speed or load." + trims,
        "",
        f"Wall time of this run: {time.time() - t0:.0f} s.",
        "",
        "| method | chosen arm | KSD | accuracy | log-loss | ECE % | MCE % | samples |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method, arm, k, m, steps_ in rows:
        lines.append(
            f"| {method} | {arm} | {k:.4g} | {m['accuracy']:.4f} | {m['log_loss']:.4f} "
            f"| {100 * m['ece']:.1f} | {100 * m['mce']:.1f} | {steps_} |"
        )
    lines.append(
        f"| MAP (reference) | - | - | {map_m['accuracy']:.4f} | {map_m['log_loss']:.4f} "
        f"| {100 * map_m['ece']:.1f} | {100 * map_m['mce']:.1f} | - |"
    )
    path = out.write_study("mamba_bnn_digits.md", "\n".join(lines))
    print("\n".join(lines))
    print(res["MAMBA-KSD"].to_markdown())
    print(f"wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
