r"""MAMBA inside ``BayesianModel.fit``: the sampler, step size and batch size, tuned.

``fit(..., tune=Tuning(...))`` replaces the one-rule step size of ``fit`` (SGLD at the
step the gradient noise and the curvature allow) by the library's tuner,
[`MAMBA`][tfp_sgmcmc.tuning.MAMBA] (Coullon, South & Nemeth 2021, Algorithm 1:
successive halving, reward ``−KSD``), run on the model's posterior after the MAP search
and the curvature pass. Every arm samples the **whitened** posterior
``w = (θ − θ_MAP) / √P`` of a [`WhitenedEstimator`][tfp_sgmcmc.estimators.WhitenedEstimator]
(``P`` the diagonal preconditioner ``fit`` measured at the MAP), so one grid of step
sizes, multiples of the rule's step ``ε₀``, is scale-free:

```none
arms = samplers × {f · ε₀ : f in step_factors} × batch_sizes
sampler ∈ {sgld, sghmc, sgnht} on the posterior's minibatch estimator,
          {sgld-cv, sghmc-cv, sgnht-cv} on its control-variate estimator at the MAP
```

The arms' minibatches are the training arrays with their sample and class weights
(a [`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior] with ``sample_weight``). The
reward is the kernel Stein discrepancy in the curvature metric
([`KSDMetric`][tfp_sgmcmc.tuning.KSDMetric], the metric that a frozen, over-dispersed or
diverged chain cannot fool at ``10⁵`` weights), with its validity checks, on scores
from an [`AnchoredSubsetEstimator`][tfp_sgmcmc.estimators.AnchoredSubsetEstimator]: a
fixed random subset of ``score_rows`` rows scaled by ``N/n`` and anchored at the MAP's
exact score, so that scoring a sample costs ``score_rows`` rows and not an epoch.
MAMBA compiles one program per sampler and batch size, by a warm-up call that is not
charged to any arm; the budget is per-example gradient evaluations (``epochs · N``) or
seconds. The winner then samples ``sample_epochs`` epochs of gradient evaluations from
its last state in the program the tuning compiled for it.

See docs/keras.md, "Tuning the sampler with MAMBA".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.estimators import (
    AnchoredSubsetEstimator,
    ControlVariateEstimator,
    WhitenedEstimator,
)
from tfp_sgmcmc.internal.util import check_int
from tfp_sgmcmc.keras._posterior import KerasPosterior
from tfp_sgmcmc.kernels import SGHMC, SGLD, SGNHT
from tfp_sgmcmc.tuning import MAMBA, ArmSampling, KSDMetric, TuningResult, grid
from tfp_sgmcmc.tuning.budget import Budget, gradient_evaluations, per_arm_budgets, seconds
from tfp_sgmcmc.tuning.runner import gradient_cost_per_step

__all__ = ["Tuning", "SAMPLER_NAMES", "tune_posterior"]

#: The samplers ``Tuning`` can choose among.
SAMPLER_NAMES = ("sgld", "sghmc", "sgnht", "sgld-cv", "sghmc-cv", "sgnht-cv")
_KERNELS = {"sgld": SGLD, "sghmc": SGHMC, "sgnht": SGNHT}


@dataclass(frozen=True)
class Tuning:
    """MAMBA's settings for ``BayesianModel.fit(..., tune=...)`` (module docstring).

    Args:
      samplers: the samplers to choose among, names from ``SAMPLER_NAMES``:
        ``"sgld"``, ``"sghmc"``, ``"sgnht"`` and their control-variate forms
        ``"sgld-cv"``, ``"sghmc-cv"``, ``"sgnht-cv"`` (the same kernel on the
        control-variate estimator centred at the MAP; its minibatch noise grows with
        the distance from the MAP, which a short tuning run may not see: ``fit``
        falls back to its rule's sampler if the winner's loss blows up). Default
        value: ``("sgld", "sghmc", "sgnht")``.
      step_factors: the step sizes, as multiples of the step ``ε₀`` ``fit`` chooses by
        its rule (in the whitened coordinates, where the posterior's scale is about
        1, ``ε₀`` is at most 1 over its stiffest curvature; SGLD is stable up to
        ``2/λ``, SGHMC and SGNHT to about ``4/λ`` along a direction of curvature
        ``λ``, and an arm that diverges is pruned). Default value: ``(1.0, 0.3,
        0.1)``.
      batch_sizes: the minibatch sizes (ints, capped at ``N``); each is a program of
        every sampler to compile. Default value: ``None`` (``fit``'s
        ``batch_size``).
      epochs: MAMBA's total budget ``T`` in epochs of per-example gradient
        evaluations, ``epochs · N`` (an SGHMC step counts its ``L`` minibatches, a
        control-variate step its two gradients per row). Default value: ``None``
        (``4.0`` unless ``seconds`` is given).
      seconds: a wall-clock budget ``T`` in seconds instead of ``epochs`` (compiling
        and scoring are not charged to it). Default value: ``None``.
      num_leapfrog_steps: SGHMC's ``L``. Default value: ``5``.
      eta: MAMBA's pruning rate ``η``. Default value: ``3``.
      score_rows: rows of the fixed subset the KSD's scores are computed on.
        Default value: ``2048``.
      max_samples: at most this many evenly spaced samples of an arm's round are
        scored. Default value: ``8``.
      metric: the KSD's metric: ``"curvature"`` (the whitened coordinates, the
        MAP's curvature metric) or ``"unit"`` (the MAMBA paper's, the weights' own
        coordinates: ``KSDMetric(preconditioner=1/√P)`` on the whitened samples), kept
        to compare with the paper. Default value: ``"curvature"``.
      jit_compile: XLA-compile the arms' programs (the winner samples in its program).
        Default value: ``None`` (as ``fit``'s own programs: its measured choice, or
        ``BayesianModel``'s ``jit_compile``).

    Raises:
      ValueError: an unknown sampler, no samplers, a non-positive step factor, a
        batch size that is not a positive int, both or neither of ``epochs`` and
        ``seconds`` as positive numbers, or another field out of range, naming it.
    """

    samplers: tuple[str, ...] = ("sgld", "sghmc", "sgnht")
    step_factors: tuple[float, ...] = (1.0, 0.3, 0.1)
    batch_sizes: tuple[int, ...] | None = None
    epochs: float | None = None
    seconds: float | None = None
    num_leapfrog_steps: int = 5
    eta: int = 3
    score_rows: int = 2048
    max_samples: int = 8
    metric: str = "curvature"
    jit_compile: bool | None = None

    def __post_init__(self) -> None:
        names = self.samplers
        if isinstance(names, str):
            names = (names,)
        names = tuple(str(n).lower() for n in names)
        if not names:
            raise ValueError("`samplers` is empty: name at least one of " f"{SAMPLER_NAMES}.")
        unknown = [n for n in names if n not in SAMPLER_NAMES]
        if unknown:
            raise ValueError(f"`samplers`: unknown {unknown}; choose from {SAMPLER_NAMES}.")
        object.__setattr__(self, "samplers", tuple(dict.fromkeys(names)))
        factors = tuple(float(f) for f in self.step_factors)
        if not factors or not all(np.isfinite(f) and f > 0 for f in factors):
            raise ValueError(
                f"`step_factors` must be positive finite numbers, got {self.step_factors!r}."
            )
        object.__setattr__(self, "step_factors", factors)
        if self.batch_sizes is not None:
            sizes = tuple(check_int(b, "batch_sizes", 1) for b in self.batch_sizes)
            if not sizes:
                raise ValueError("`batch_sizes` is empty: give at least one, or None.")
            object.__setattr__(self, "batch_sizes", tuple(dict.fromkeys(sizes)))
        if self.seconds is not None and self.epochs is not None:
            raise ValueError("Give `epochs` or `seconds` as the budget, not both.")
        if self.seconds is not None:
            _positive(self.seconds, "seconds")
        else:
            if self.epochs is None:
                object.__setattr__(self, "epochs", 4.0)
            _positive(self.epochs, "epochs")
        object.__setattr__(
            self, "num_leapfrog_steps", check_int(self.num_leapfrog_steps, "num_leapfrog_steps", 1)
        )
        object.__setattr__(self, "eta", check_int(self.eta, "eta", 2))
        object.__setattr__(self, "score_rows", check_int(self.score_rows, "score_rows", 2))
        object.__setattr__(self, "max_samples", check_int(self.max_samples, "max_samples", 2))
        if self.metric not in ("curvature", "unit"):
            raise ValueError(f"`metric` must be 'curvature' or 'unit', got {self.metric!r}.")
        if self.jit_compile is not None and not isinstance(self.jit_compile, (bool, np.bool_)):
            raise ValueError(f"`jit_compile` must be a bool or None, got {self.jit_compile!r}.")

    def budget(self, num_examples: int) -> Budget:
        """MAMBA's budget: ``epochs · N`` per-example gradient evaluations, or seconds."""
        if self.seconds is not None:
            return seconds(float(self.seconds))
        return gradient_evaluations(float(self.epochs) * num_examples)

    def arms(self, step_size: float, batch_size: int, num_examples: int) -> list[dict[str, Any]]:
        """The grid: sampler × step size × batch size, the sampler varying slowest."""
        sizes = self.batch_sizes or (batch_size,)
        sizes = tuple(dict.fromkeys(min(int(b), num_examples) for b in sizes))
        return grid(
            sampler=list(self.samplers),
            step_size=[float(f * step_size) for f in self.step_factors],
            batch_size=list(sizes),
        )

    def describe(self) -> str:
        budget = f"{self.seconds:g} s" if self.seconds is not None else f"{self.epochs:g} epochs"
        return (
            f"MAMBA over {', '.join(self.samplers)} × steps {list(self.step_factors)} × ε₀ × "
            f"batches {list(self.batch_sizes) if self.batch_sizes else 'auto'}, budget {budget}"
        )


def _positive(x: Any, name: str) -> None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not np.isfinite(x) or x <= 0:
        raise ValueError(f"`{name}` must be a positive number, got {x!r}.")


class TunedSampler:
    """The estimators and kernels of the tuning arms on the whitened posterior.

    Args:
      posterior: the training rows as a ``KerasPosterior`` with their weights.
      scoring: the posterior on the scoring subset (weights scaled by ``N/n``).
      centre: ``θ_MAP`` as the posterior's list of parts.
      scale: ``√P``, ``[d]``.
      batch_sizes: every batch size of the arms (their estimators are built here,
        eagerly: a data source precomputes per-batch-size copies outside a trace).
      control_variates: whether any arm is a ``-cv`` sampler.
      num_leapfrog_steps: SGHMC's ``L``.
    """

    def __init__(
        self,
        posterior: KerasPosterior,
        scoring: KerasPosterior,
        centre: list[np.ndarray],
        scale: np.ndarray,
        batch_sizes: Sequence[int],
        control_variates: bool,
        num_leapfrog_steps: int,
    ) -> None:
        centre_t = [tf.constant(c) for c in centre]
        scale = np.asarray(scale, np.float64)
        self.num_leapfrog_steps = num_leapfrog_steps
        full = posterior.estimator(max(batch_sizes))
        # One full pass: the exact score at the MAP anchors the KSD's subset scores and
        # the control-variate estimators alike.
        anchor = full.full_log_prob_and_gradient(centre_t)
        self._estimators: dict[tuple[bool, int], WhitenedEstimator] = {}
        for n in batch_sizes:
            base = posterior.estimator(n)
            self._estimators[(False, n)] = self._whiten(base, centre_t, scale)
            if control_variates:
                cv = ControlVariateEstimator(
                    base,
                    centre_t,
                    centering_gradient=anchor.grads_target_log_prob,
                    centering_log_prob=anchor.target_log_prob,
                )
                self._estimators[(True, n)] = self._whiten(cv, centre_t, scale)
        #: The KSD's scores: the subset's, anchored at the MAP's exact score, whitened.
        self.scorer = self._whiten(
            AnchoredSubsetEstimator(
                scoring.estimator(scoring.data.num_examples), full, centre_t, anchor=anchor
            ),
            centre_t,
            scale,
        )
        self.centre = np.concatenate([np.reshape(c, -1) for c in centre]).astype(np.float64)
        self.scale = scale

    @staticmethod
    def _whiten(inner: Any, centre: list[tf.Tensor], scale: np.ndarray) -> WhitenedEstimator:
        # Arms are judged by the KSD and MAMBA's divergence checks, not a χ² radius.
        return WhitenedEstimator(inner, centre, scale, flag_runaway_steps=False)

    def __call__(self, sampler: str, step_size: Any, batch_size: int) -> Any:
        """The kernel of one arm (MAMBA's ``make_kernel``)."""
        name = sampler.split("-")[0]
        est = self._estimators[(sampler.endswith("-cv"), int(batch_size))]
        if name == "sghmc":
            return SGHMC(est, step_size=step_size, num_leapfrog_steps=self.num_leapfrog_steps)
        return _KERNELS[name](est, step_size=step_size)

    def weights(self, w: np.ndarray) -> np.ndarray:
        """``θ = θ_MAP + √P w`` for whitened states ``w`` ``[..., d]``."""
        return self.centre + self.scale * np.asarray(w, np.float64)


def tune_posterior(
    tuning: Tuning,
    posterior: KerasPosterior,
    scoring: KerasPosterior,
    centre: list[np.ndarray],
    scale: np.ndarray,
    step_size: float,
    batch_size: int,
    *,
    seed: int,
    jit_compile: bool,
    progress: bool,
) -> tuple[TuningResult, TunedSampler]:
    """Runs MAMBA on the whitened posterior from the MAP (``w = 0``); returns its
    result and the arms' kernels."""
    n_all = posterior.data.num_examples
    arms = tuning.arms(step_size, batch_size, n_all)
    sizes = sorted({a["batch_size"] for a in arms})
    kernels = TunedSampler(
        posterior,
        scoring,
        centre,
        scale,
        sizes,
        any(s.endswith("-cv") for s in tuning.samplers),
        tuning.num_leapfrog_steps,
    )
    # The whitened coordinates are the MAP's curvature metric (the posterior's scale is
    # about 1 in each): the KSD there needs no metric of its own samples, which a few
    # samples of a slowly mixing deep model cannot give.
    ksd = KSDMetric(
        max_samples=tuning.max_samples,
        score_block_size=tuning.max_samples,
        jit_compile=jit_compile,
        # The paper's unit metric in the weights' coordinates θ = θ_MAP + √P w: whitening
        # w by the scales 1/√P gives θ's differences and θ's scores.
        preconditioner=None if tuning.metric == "curvature" else 1.0 / kernels.scale,
        check_validity=False,
    )

    def metric(samples: list[np.ndarray], trace: Any, estimator: Any) -> float:
        """The KSD (in ``tuning.metric``) with the anchored subset's scores."""
        del estimator
        return ksd(samples, trace, kernels.scorer)

    metric.__name__ = "KSD" if tuning.metric == "curvature" else "KSD (unit metric)"
    dim = int(kernels.centre.shape[0])
    dtype = np.dtype(tf.as_dtype(posterior.model.trainable_variables[0].dtype).as_numpy_dtype)
    budget = tuning.budget(n_all)
    thin = arm_thinning(arms, kernels, budget, tuning.eta)
    tuner = MAMBA(
        arms,
        tf.zeros([dim], dtype),
        kernels,
        budget=budget,
        metric=metric,
        eta=tuning.eta,
        seed=seed,
        progress=progress,
        sampling=ArmSampling(
            thin=thin, jit_compile=jit_compile, max_steps_per_call=max(2 * thin, 200)
        ),
    )
    return tuner.run(), kernels


def arm_thinning(arms: list[dict[str, Any]], kernels: TunedSampler, budget: Budget,
                 eta: int) -> int:
    """The thinning of the arms' samples: every arm keeps at least two samples in the
    first round (the costliest arm's steps / 2), so that a round of a large model keeps
    tens of states per arm rather than every step's ``d`` weights. A wall-clock budget
    has no steps known in advance: 1."""
    if budget.unit != "gradient_evaluations":
        return 1
    r0 = per_arm_budgets(len(arms), eta, budget)[0]
    steps = [int(r0 // gradient_cost_per_step(kernels(**arm))) for arm in arms]
    return max(1, min(steps) // 2)


def steps_per_epoch(result: TuningResult, num_examples: int) -> int:
    """Steps of the chosen arm that cost one epoch of per-example gradient evaluations."""
    cost = gradient_cost_per_step(result.kernel())
    return max(1, int(round(num_examples / cost)))
