"""Kim, Song & Liang §4.2: 5-component Gaussian mixture, mode occupancy.

Target π(θ) ∝ Σ_i exp(−‖θ − μ_i‖²) (each component N(μ_i, ½ I), equal
weights), μ = (−3,−3), (−3,0), (0,0), (3,0), (3,3); stochastic gradient =
exact gradient + N(0, I). Paper settings (docs/algorithms.md#exp-mixture): ε = 0.05, τ = 1;
MSGLD a = 10, β1 = 0.9; ASGLD a = 1, β1 = 0.9, β2 = 0.999 (SGLD ε = 0.05 as
the baseline; the paper's NGVI baseline is not reproduced). Each sampler runs
``--chains`` chains from θ0 = (0, 0) (the central mode); a sample is assigned
to its nearest centre. The reference occupancy is the target's own mass of
each nearest-centre cell (computed by exact sampling from the mixture).

Usage::

    python examples/adaptive_drift_mixture.py           # a few minutes
    python examples/adaptive_drift_mixture.py --quick   # < 1 min
"""

from __future__ import annotations

import _cli
import numpy as np
import tensorflow as tf
from adaptive_drift_common import run_chain, sgld_msgld_asgld, timer

import tfp_sgmcmc as sg

MU = np.array([[-3.0, -3.0], [-3.0, 0.0], [0.0, 0.0], [3.0, 0.0], [3.0, 3.0]])


def log_prob(theta: tf.Tensor) -> tf.Tensor:
    mu = tf.constant(MU, theta.dtype)
    d2 = tf.reduce_sum(tf.square(theta[..., None, :] - mu), -1)
    return tf.reduce_logsumexp(-d2, -1)


def nearest(x: np.ndarray) -> np.ndarray:
    return np.argmin(((x[..., None, :] - MU) ** 2).sum(-1), -1)


def target_occupancy(rng: np.random.Generator, n: int = 2_000_000) -> np.ndarray:
    comp = rng.integers(0, 5, n)
    x = MU[comp] + np.sqrt(0.5) * rng.standard_normal((n, 2))
    return np.bincount(nearest(x), minlength=5) / n


def main() -> None:
    import matplotlib.pyplot as plt  # Agg selected by adaptive_drift_common

    ap = _cli.parser("adaptive_drift_mixture", __doc__.split("\n")[0])
    ap.add_argument("--steps", type=_cli.positive_int, default=None)
    ap.add_argument("--chains", type=_cli.positive_int, default=None)
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args()
    out = _cli.outputs(args)
    steps = args.steps if args.steps is not None else (5_000 if args.quick else 200_000)
    chains = args.chains if args.chains is not None else (4 if args.quick else 10)

    est = sg.NoisyGradientEstimator(log_prob, noise_scale=1.0)
    samplers = sgld_msgld_asgld(est, 0.05, a_momentum=10.0, a_adam=1.0)
    ref = target_occupancy(np.random.default_rng(args.seed))
    occ, occ_sd, switches, samples, seconds = {}, {}, {}, {}, {}
    for name, kernel in samplers.items():
        init = tf.zeros([chains, 2], tf.float64)
        with timer() as t:
            x = run_chain(kernel, init, steps, args.seed, desc=name)
        seconds[name] = t.seconds
        lab = nearest(x)  # [steps, chains]
        per_chain = np.stack([np.bincount(lab[:, c], minlength=5) / steps for c in range(chains)])
        occ[name] = per_chain.mean(0)
        occ_sd[name] = per_chain.std(0, ddof=1) / np.sqrt(chains)
        switches[name] = (np.diff(lab, axis=0) != 0).sum() / chains / steps * 1000
        samples[name] = x[:: max(1, steps // 600)].reshape(-1, 2)

    # Figure: target contours + thinned samples per sampler, and occupancy bars.
    g = np.linspace(-6, 6, 200)
    gx, gy = np.meshgrid(g, g)
    dens = np.exp(-((np.stack([gx, gy], -1)[..., None, :] - MU) ** 2).sum(-1)).sum(-1)
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.1), dpi=80)
    for ax, (name, s) in zip(axes, samples.items()):
        ax.contour(gx, gy, dens, levels=8, colors="k", linewidths=0.5)
        ax.scatter(s[:, 0], s[:, 1], s=1, alpha=0.25, color="C3", rasterized=True)
        ax.set_title(name)
        ax.set_xlim(-6, 6)
        ax.set_ylim(-6, 6)
        ax.set_aspect("equal")
    w = 0.2
    ax = axes[3]
    ax.bar(np.arange(5) - 1.5 * w, ref, w, label="target", color="k")
    for j, name in enumerate(samplers):
        ax.bar(np.arange(5) + (j - 0.5) * w, occ[name], w, yerr=2 * occ_sd[name], label=name)
    ax.set_xticks(range(5), [f"({m[0]:g},{m[1]:g})" for m in MU], fontsize=6)
    ax.set_title("occupancy of nearest-centre cells")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig_file = out.name("adaptive_mixture.png")
    fig_path = out.figure("adaptive_mixture.png")
    fig.savefig(fig_path)

    header = (
        "| sampler | "
        + " | ".join(f"({m[0]:g},{m[1]:g})" for m in MU)
        + " | TV distance to target | mode switches / 1000 steps | s/run |"
    )
    lines = [header, "|---" * 9 + "|"]
    lines.append("| target | " + " | ".join(f"{r:.3f}" for r in ref) + " | 0 | — | — |")
    for name in samplers:
        tv = 0.5 * np.abs(occ[name] - ref).sum()
        cells = [f"{o:.3f} ± {2 * s:.3f}" for o, s in zip(occ[name], occ_sd[name])]
        lines.append(
            f"| {name} | "
            + " | ".join(cells)
            + f" | {tv:.3f} | {switches[name]:.1f} | {seconds[name]:.1f} |"
        )
    table = "\n".join(lines)
    print(table)

    tv_text = ", ".join(f"{k} {0.5 * np.abs(occ[k] - ref).sum():.3f}" for k in samplers)
    text = f"""# Adaptive drifts: 5-component mixture (Kim, Song & Liang §4.2)

Command: `{_cli.command_line()}` ({steps:,} iterations × {chains} chains per sampler,
all chains start at the central mode (0, 0), float64, XLA).

{_cli.provenance()}

π(θ) ∝ Σ_i exp(−‖θ − μ_i‖²), μ = (−3,−3), (−3,0), (0,0), (3,0), (3,3);
gradient noise N(0, I). Paper settings ([algorithms reference](../algorithms.md#exp-mixture)): ε =
0.05, τ = 1;
MSGLD a = 10, β1 = 0.9; ASGLD a = 1, β1 = 0.9, β2 = 0.999; SGLD with the same ε.
Occupancy = fraction of iterations whose nearest centre is μ_i (mean over
chains ± 2 s.e. across chains); the "target" row is the exact mixture's mass of
each nearest-centre cell (0.2 each: the mass one component leaks into a
neighbour's cell is returned by that neighbour, by symmetry).

![mixture](../figures/{fig_file})

{table}

**Reading.** The paper shows only contour plots (MSGLD and ASGLD cover the five
modes; its NGVI baseline misses some). Here every sampler visits all five modes
from a start in the central one: the barrier between adjacent modes is ≈ 1.6
nats, so at τ = 1 plain SGLD crosses it too. Mode switches per 1000 steps:
{", ".join(f"{k} {v:.1f}" for k, v in switches.items())}; total-variation distance of
the occupancy to the target: {tv_text}.
A sampler that hops more often but whose occupancy is further from 0.2 per cell
(more than the ± 2 s.e. allow) has a visibly biased stationary law at these
settings: the bias term is not a Metropolis-corrected move, and with a large
bias factor (MSGLD a = 10) the O(ε) bias grows. All samplers also carry the
O(ε) discretisation bias and the heating by the N(0, I) gradient noise.
"""
    print("wrote", out.write_study("adaptive_drift_mixture.md", text), fig_path)


if __name__ == "__main__":
    main()
