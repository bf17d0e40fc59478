"""Quickstart: tune SGLD-CV on the MAMBA paper's logistic regression with MAMBA.

The model is the paper's §4.1 logistic regression (N = 10⁶ rows, d = 10,
800k train / 200k test, prior N(0, 10 I); ``tfp_sgmcmc/models/logistic_regression.py``).
MAMBA (successive halving, η = 3) picks the step size and batch size of SGLD
with control variates at the MAP (SGLD-CV) that minimise the kernel Stein
discrepancy (full-data scores, every 10th sample) within a wall-clock sampling
budget; compilation and metric time are reported separately. The final draws of the chosen
arm (``result.sample``) run in the program the tuner compiled for its batch size.

Run::

    python examples/quickstart_mamba.py            # ~1 minute on 2 cores
    python examples/quickstart_mamba.py --quick    # smoke test

Prints the per-round table and the chosen arm, and writes the plot and a study page under
``--out`` (default ``out/quickstart_mamba/``); ``--write-docs`` regenerates the committed
``docs/figures/mamba_quickstart.png`` and ``docs/studies/mamba_quickstart.md`` (``--quick``
names its files ``*_quick``).
"""

from __future__ import annotations

import os
import time

import _cli
import numpy as np
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning
from tfp_sgmcmc.models.logistic_regression import logistic_regression
from tfp_sgmcmc.tuning.arms import arm_label


def main() -> None:
    parser = _cli.parser(
        "quickstart_mamba", __doc__.split("\n\n")[0], quick_help="tiny budget and grid (smoke test)"
    )
    parser.add_argument(
        "--budget", type=_cli.positive_float, default=None, help="total sampling seconds T"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = _cli.outputs(args)
    print(
        "MAMBA quickstart: tuning SGLD-CV's step size and batch size on the logistic regression "
        "(N = 10^6, d = 10)",
        flush=True,
    )

    t_start = time.time()
    problem = logistic_regression()  # §14.1 data, seed 42
    base = problem.estimator(
        batch_size=problem.batch_size_from_fraction(0.01), scheme="random_window"
    )
    # Start every arm at the MAP (as the paper's MAMBA runs); L-BFGS on the full data.
    theta_map = sg.find_map(base, tf.zeros([problem.num_features], tf.float32)).position
    # SGLD-CV (the paper's SGLD with control variates at the MAP): plain minibatch
    # gradients at these batch sizes carry noise that inflates the posterior variance
    # (the gradient-noise check below says by how much).
    cv = sg.ControlVariateEstimator(base, theta_map)

    if args.quick:
        steps = tuning.log10_grid(-5, -7, 1.0)  # 3 step sizes
        fractions = [0.01, 0.001]
        budget = args.budget if args.budget is not None else 3.0
    else:
        steps = tuning.log10_grid(-4, -7.5, 0.5)  # 8 step sizes (the paper's grid, trimmed)
        fractions = [0.1, 0.01, 0.001]  # 10%, 1%, 0.1% batches
        budget = args.budget if args.budget is not None else 20.0
    arms = tuning.grid(step_size=steps, batch_fraction=fractions)

    result = tuning.MAMBA(
        arms,
        theta_map,
        tuning.KernelSpec(sg.SGLD, cv),
        budget=tuning.seconds(budget),
        eta=3,
        metric=tuning.KSDMetric(max_samples=100),
        seed=args.seed,
    ).run()
    print()
    print(result.to_markdown())
    print()
    print(result.summary())
    print(
        f"  budget honesty (sampling time / allotted, non-diverged arms): "
        f"{result.budget_honesty():.3f}"
    )
    samples = np.asarray(result.best_samples)
    extra = [
        f"  chosen arm: {arm_label(result.best_arm)}",
        f"  test accuracy of its last-round samples: {problem.predictive_accuracy(samples):.4f}",
    ]
    gt = problem.ground_truth()
    if gt is not None and samples.shape[0] > 1:
        xi = np.linalg.norm(samples.std(0) - np.asarray(gt["std"])) / np.linalg.norm(gt["std"])
        extra.append(f"  relative std error xi vs the stored HMC ground truth: {100 * xi:.1f}%")
    # The final draws: the chosen arm's kernel from its last state, run by the program the
    # tuner compiled for its batch size (step size and seed are inputs: nothing compiles).
    t_final = time.perf_counter()
    final = np.asarray(result.sample(500 if args.quick else 1000, seed=args.seed))
    extra.append(
        f"  result.sample: {final.shape[0]} final draws in "
        f"{time.perf_counter() - t_final:.2f} s, test accuracy "
        f"{problem.predictive_accuracy(final):.4f}"
    )
    print(extra[-1])
    # The one-call path on the same model: mode, Laplace preconditioner, tuned step and
    # batch size, 4 chains and a verdict on the draws.
    print("\nsg.sample_posterior on the same model (the one-call path):", flush=True)
    res = sg.sample_posterior(
        base,
        num_results=500 if args.quick else 1000,
        initial_state=tf.zeros([problem.num_features], tf.float32),
        seed=args.seed,
        progress=False,
    )
    draws = res.draws["part_0"].reshape(-1, problem.num_features)
    extra += [
        f"  sample_posterior: verdict {res.verdict}"
        + (f" ({'; '.join(res.reasons)})" if res.reasons else "")
        + f", step size {res.step_size:g} (whitened), batch size {res.batch_size}, "
        f"{res.timings['total']:.1f} s",
        f"  sample_posterior: test accuracy {problem.predictive_accuracy(draws):.4f}",
    ]
    if gt is not None:
        xi = np.linalg.norm(draws.std(0) - np.asarray(gt["std"])) / np.linalg.norm(gt["std"])
        extra.append(f"  sample_posterior: relative std error xi vs HMC: {100 * xi:.1f}%")
    print("\n".join(extra[-3:]))
    fig = out.figure("mamba_quickstart.png")
    result.plot(fig, title=f"MAMBA-KSD, SGLD-CV, logistic regression (T = {budget:g} s)")
    wall = time.time() - t_start
    study = out.write_study(
        "mamba_quickstart.md",
        "# MAMBA quickstart: SGLD-CV on the paper's logistic regression\n\n"
        f"Command: `{_cli.command_line()}` (wall time {wall:.0f} s, including data generation, "
        "MAP, compilation and metric time).\n\n"
        f"{_cli.provenance()}\n\n"
        "The budget is wall-clock sampling seconds (the MAMBA paper's), so the rounds, and "
        "possibly the chosen arm, depend on the machine and its load.\n\n"
        + "![metric by round](../figures/"
        + out.name("mamba_quickstart.png")
        + ")\n\n"
        + result.to_markdown()
        + "\n\n```\n"
        + result.summary()
        + "\n"
        + f"  budget honesty: {result.budget_honesty():.3f}\n"
        + "\n".join(extra)
        + "\n```\n",
    )
    print(f"  wrote {os.path.relpath(fig)} and {os.path.relpath(study)}; wall time {wall:.1f} s")


if __name__ == "__main__":
    main()
