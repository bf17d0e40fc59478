r"""``sample_posterior``: a posterior sampled right by default, with a verdict.

One call runs the whole path a careful user would compose by hand:

1. **Mode.** `tfp_sgmcmc.estimators.laplace.find_mode`: L-BFGS on the full
   data from the origin of the unconstrained space and from prior draws,
   keeping the best converged point; an announced Adam fallback; a named error
   when everything fails. Searches that run away with the log density still
   rising end the search ("no mode found": an unbounded density). Up to
   ``MODE_SEARCH_MAX_DIM`` coordinates, Newton searches from over-dispersed
   starts then look for other modes (`tfp_sgmcmc.estimators.laplace.local_modes`);
   when the one of highest density holds more Laplace mass, ``log π(m) + ½ log det
   Σ``, than the first by more than ``MODE_SWITCH_NATS``, the chains start there
   (the verdict names every mode; one with less than ``e^-NEGLIGIBLE_MODE_NATS`` of
   the chains' mode's Laplace mass in a note only).
2. **Curvature.** `tfp_sgmcmc.estimators.laplace.laplace_approximation`: the
   Hessian there (dense up to ``max_dense_dim`` coordinates, its Hutchinson
   diagonal above), giving the Laplace covariance ``Σ = L Lᵀ``.
3. **Preconditioner.** The chains run on ``w`` with ``z = m + L w``
   (`tfp_sgmcmc.estimators.whitened.WhitenedEstimator`): every direction has
   unit scale, so step sizes are dimensionless and one step fits all. The
   minibatch gradient is a control variate centred at the mode (Baker et al.
   2019), each chain drawing its own minibatch.
4. **Tuning.** Successive halving (Coullon, South & Nemeth 2021; the library's
   rule, `tfp_sgmcmc.tuning.halving.successive_halving`, in two rounds with η = 3) over step
   sizes and batch sizes, every arm running the same chains for the same
   number of data rows touched. The reward is minus the kernel Stein
   discrepancy measured in whitened coordinates with full-data scores — the
   Langevin Stein discrepancy in the Laplace metric (Gorham et al. 2019;
   Riabiz et al. 2022) — so a frozen or an over-dispersed chain cannot beat
   true draws whatever the posterior's scale. An arm whose chains did not
   move, left the posterior or diverged is disqualified, with its reason.
5. **Adaptation.** The chosen arm's chains run burn-in windows of
   ``ADAPT_WINDOW`` draws; each window's covariance of ``w``, shrunk towards
   the identity, refines the map where it differs from the Laplace fit by more
   than a factor 1.5 in some direction's variance (windowed adaptation as in
   Stan's and TFP's warm-up; `tfp_sgmcmc.estimators.adaptation`), up to
   ``ADAPT_MAX_WINDOWS`` windows, stopping at the first that needs no change.
6. **Sampling.** The chains continue for a burn-in of about five
   autocorrelation times (``10/ε`` steps) and then ``num_results`` draws,
   thinned by ``⌈1/ε⌉``; then, in chunks continuing the same chains, until
   the rank-normalised split R̂ is at most 1.01 and the bulk ESS at least 400
   in every coordinate, whitened and unconstrained (Vehtari et al. 2021), or
   until the budget (``max_gradient_evaluations`` per chain in this phase,
   ``max_seconds`` for the call) ends it. ``ended_by`` says which; a budget
   that ends it with the ESS below 400 or R̂ above 1.05 is a ``suspect`` reason.
   When every step uses the full data (the chosen batch is all of it) the final
   chains are MALA (Roberts & Tweedie 1996): SGLD's proposal ``w + ε ∇ log π_w +
   √(2ε) ξ`` accepted with the Metropolis–Hastings probability, through
   ``tfp.mcmc.MetropolisAdjustedLangevinAlgorithm`` on the full-data whitened density
   (``metropolis_adjust``). A full gradient costs the same either way, and the test
   removes SGLD's discretisation bias, which a skewed or curved posterior makes far
   larger than the Gaussian prediction (a shifted mean at any tuned ε); minibatch
   steps stay SGLD's. Every chain here (the tuning arms, the burn-in windows and the
   final chains) runs in the library's loop, `tfp_sgmcmc.loop.run_steps`, under its seed rule:
   the final draws are ``sg.sample_chain``'s for ``kernel``, ``init_state`` and
   ``seed`` (`PosteriorSamples`), however many chunks lengthened the run.
7. **Verdict.** `tfp_sgmcmc.diagnostics.verdict.judge_whitened_draws`:
   ``ok`` / ``suspect`` / ``failed`` with reasons (divergence; runaway, a draw
   beyond the radius ``‖w‖² > q`` where the full-data log-density has also
   fallen by more than ``q/2``, as the Laplace fit's would, so that a long run
   of a tail heavier than the fit's is not taken for one; frozen chains, split
   R̂, ESS, the predicted inflation from the step size
   and the gradient noise, for SGLD's draws); a budget that ended the run short of the targets;
   the Stein moment check (`tfp_sgmcmc.diagnostics.verdict.stein_moment_check`:
   ``E[s] = 0`` and ``E[(w − w̄) s] = −1`` under the posterior, read with the
   full-data score at draws spread over the run, which sees a bias every
   chain shares); and every problem met on the way (no mode, a saddle, a
   disqualified grid, a diverged burn-in, several modes; when the chains
   disagree, the modes they ended in).

The sampler is SGLD, ``w ← w + ε ĝ_w + √(2ε) ξ`` (Welling & Teh 2011), in
whitened coordinates, with a Metropolis–Hastings test on the final draws when the
gradients are full-data (MALA); ``docs/algorithms.md#sample-posterior``.

#### References

[1]: Jack Baker, Paul Fearnhead, Emily B. Fox and Christopher Nemeth. Control
     variates for stochastic gradient MCMC. _Statistics and Computing_ 29, 2019.
[2]: Jeremie Coullon, Leah South and Christopher Nemeth. Stochastic gradient
     MCMC with multi-armed bandit tuning. _arXiv:2105.13059_, 2021.
[3]: Jackson Gorham, Andrew B. Duncan, Sebastian J. Vollmer and Lester Mackey.
     Measuring sample quality with diffusions. _Annals of Applied
     Probability_ 29(5), 2019.
[4]: Marina Riabiz, Wilson Ye Chen, Jon Cockayne, Pawel Swietach, Steven A.
     Niederer, Lester Mackey and Chris J. Oates. Optimal thinning of MCMC
     output. _JRSS-B_ 84(4), 2022.
[5]: Max Welling and Yee Whye Teh. Bayesian learning via stochastic gradient
     Langevin dynamics. In _ICML_, 2011.
[6]: Aki Vehtari, Andrew Gelman, Daniel Simpson, Bob Carpenter and
     Paul-Christian Bürkner. Rank-normalization, folding, and localization: an
     improved R̂ for assessing convergence of MCMC. _Bayesian Analysis_ 16(2), 2021.
[7]: Gareth O. Roberts and Richard L. Tweedie. Exponential convergence of Langevin
     distributions and their discrete approximations. _Bernoulli_ 2(4), 1996.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.data import InMemoryData
from tfp_sgmcmc.diagnostics.ksd import kernel_stein_discrepancy
from tfp_sgmcmc.diagnostics.verdict import (
    FROZEN_SD,
    RHAT_SUSPECT,
    TARGET_ESS,
    TARGET_RHAT,
    RunawayDraws,
    Verdict,
    bulk_mixing,
    judge_whitened_draws,
    runaway_draws,
    stein_moment_check,
)
from tfp_sgmcmc.estimators.adaptation import adapt_whitening, rewhiten
from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator, WrappingEstimator
from tfp_sgmcmc.estimators.control_variates import ControlVariateEstimator
from tfp_sgmcmc.estimators.laplace import (
    LaplaceApproximation,
    LocalMode,
    ModeResult,
    find_mode,
    laplace_approximation,
    local_modes,
)
from tfp_sgmcmc.estimators.minibatch import MinibatchEstimator
from tfp_sgmcmc.estimators.transformed import TransformedEstimator
from tfp_sgmcmc.estimators.whitened import WhitenedEstimator
from tfp_sgmcmc.internal.autograph import needs_autograph
from tfp_sgmcmc.internal.util import as_parts, check_int, is_list_like
from tfp_sgmcmc.kernels.langevin import SGLD
from tfp_sgmcmc.loop import chain_seed, run_steps
from tfp_sgmcmc.tuning.halving import successive_halving

__all__ = [
    "sample_posterior",
    "PosteriorSamples",
    "ArmRecord",
    "DEFAULT_STEP_SIZES",
    "DEFAULT_MAX_GRADIENT_EVALUATIONS",
]

#: Dimensionless step sizes tried (in whitened units; SGLD is stable below 2).
DEFAULT_STEP_SIZES = (0.15, 0.08, 0.04, 0.02)
#: At or below this many examples every step uses the full data.
FULL_BATCH_MAX = 10_000
#: Successive halving's rounds and pruning rate: the best third of the arms goes on to a
#: second round of three times the steps.
_ROUNDS, _ETA = 2, 3
#: Draws per arm the tuner's Stein discrepancy reads (pooled over chains).
_METRIC_POINTS = 200
#: Results per compiled call. XLA needs the trace's length at compile time, so every
#: call returns this many (a longer run is several calls): one program per batch size.
_BLOCK = 50
#: Rows per compiled call of the full-data log-density that judges draws beyond the
#: runaway radius (one program whatever their number).
_DROP_BATCH = 64
#: Draws (thinned as the final ones) per burn-in adaptation window.
ADAPT_WINDOW = 200
#: At most this many adaptation windows.
ADAPT_MAX_WINDOWS = 3
#: Up to this many coordinates, Newton searches from further starts look for other modes
#: (and, when the chains disagree, for the modes the chains ended in).
MODE_SEARCH_MAX_DIM = 200
#: Further over-dispersed starts (prior draws, or 3 Laplace sds out) of that search.
EXTRA_MODE_STARTS = 3
#: The chains move to another mode found when its Laplace mass exceeds their mode's by
#: more than this many nats (a factor e).
MODE_SWITCH_NATS = 1.0
#: Other modes whose Laplace mass is below the chains' mode's by more than this many nats
#: (a fraction e^-20, 2e-9) are named in a note, not a verdict reason.
NEGLIGIBLE_MODE_NATS = 20.0
#: Default budget of the final sampling (burn-in and draws): gradient evaluations per chain.
DEFAULT_MAX_GRADIENT_EVALUATIONS = 200_000
#: Draws per chain whose full-data scores the Stein check reads: this many tuning-metric
#: batches (one compiled shape).
_STEIN_BATCHES = 5


@dataclasses.dataclass
class ArmRecord:
    """One tuning arm: its settings, its rounds' discrepancies and why it stopped.

    Attributes:
      step_size: ``ε`` in whitened units.
      batch_size: minibatch rows per chain and step.
      ksd: the Stein discrepancy of its last round (``inf`` when disqualified).
      rounds: rounds it ran.
      reason: why it was disqualified (``""`` when it was not).
    """

    step_size: float
    batch_size: int
    ksd: float = math.inf
    rounds: int = 0
    reason: str = ""


@dataclasses.dataclass
class PosteriorSamples:
    """What `sample_posterior` returns.

    Attributes:
      draws: constrained draws by name, each ``[num_results, num_chains, ...]``
        (for a plain estimator: the state's parts, ``"part_0"``, ...).
      unconstrained: the chains' states, a list of parts
        ``[num_results, num_chains, ...]``.
      whitened: the draws in whitened coordinates ``[num_results, num_chains, d]``.
      verdict: ``"ok"``, ``"suspect"`` or ``"failed"``.
      reasons: one sentence per check that fired.
      diagnostics: the numbers behind the verdict (R̂, ESS, ...).
      kernel: the kernel that produced the final draws, on the whitened estimator:
        MALA (``tfp.mcmc.MetropolisAdjustedLangevinAlgorithm``, TFP's step ``2ε``) when
        every step used the full data and ``metropolis_adjust`` is on, else SGLD.
      step_size: the chosen ``ε`` (whitened units).
      batch_size: the chosen minibatch size.
      num_steps_between_results: the thinning.
      num_burnin_steps: the final chains' burn-in, in steps.
      init_state: the whitened states ``[num_chains, d]`` the final chains started
        from. The draws are those of the library's loop for ``kernel``, this start and
        ``seed``: ``sample_chain(len(whitened), init_state, kernel=kernel, seed=seed,
        num_burnin_steps=num_burnin_steps + num_steps_between_results - 1,
        num_steps_between_results=num_steps_between_results - 1)`` (up to XLA's
        rounding) gives ``whitened`` again, and a longer call continues it.
      tuning: one `ArmRecord` per arm tried.
      mode: the mode search's result.
      laplace: the Laplace approximation at the mode.
      timings: seconds per phase (``map``, ``curvature``, ``other_modes`` (when
        searched), ``tuning_sampling``, ``tuning_metric``, ``adaptation``,
        ``sampling``, ``verdict``, ``total``).
      notes: what the automatic choices were, one sentence each.
      ended_by: what ended the final sampling: convergence (rank-normalised
        split R̂ ≤ 1.01 and bulk ESS ≥ 400), the budget (with the numbers it
        left unmet; a ``suspect`` reason too when the ESS is below 400 or R̂
        above 1.05), or a divergence.
    """

    draws: dict[str, np.ndarray]
    unconstrained: list[np.ndarray]
    whitened: np.ndarray
    verdict: str
    reasons: list[str]
    diagnostics: dict[str, float]
    kernel: Any
    step_size: float
    batch_size: int
    num_steps_between_results: int
    num_burnin_steps: int
    init_state: np.ndarray
    tuning: list[ArmRecord]
    mode: ModeResult
    laplace: LaplaceApproximation
    timings: dict[str, float]
    notes: list[str]
    ended_by: str = ""
    _posterior: Any = None

    def to_arviz(self, **kwargs: Any) -> Any:
        """``arviz.InferenceData`` of the constrained draws (``draws`` by name)."""
        from tfp_sgmcmc.export import to_arviz

        if self._posterior is not None:
            return self._posterior.to_arviz(
                [tf.constant(p) for p in self.unconstrained], **kwargs
            )
        names = list(self.draws)
        return to_arviz([self.draws[n] for n in names], var_names=names, **kwargs)

    def summary(self) -> str:
        """A table: per scalar coordinate, posterior mean, sd and the 90% interval."""
        rows = ["| parameter | mean | sd | 5% | 95% |", "|---|---|---|---|---|"]
        for name, x in self.draws.items():
            flat = np.reshape(x, x.shape[:2] + (-1,))
            for j in range(flat.shape[-1]):
                v = flat[..., j].ravel()
                label = name if flat.shape[-1] == 1 else f"{name}[{j}]"
                q5, q95 = np.quantile(v, [0.05, 0.95])
                rows.append(
                    f"| {label} | {v.mean():.4g} | {v.std():.4g} | {q5:.4g} | {q95:.4g} |"
                )
        return "\n".join(rows)

    def __repr__(self) -> str:
        shapes = {k: list(v.shape) for k, v in self.draws.items()}
        return (
            f"PosteriorSamples(verdict={self.verdict!r}, step_size={self.step_size:.3g}, "
            f"batch_size={self.batch_size}, draws={shapes})"
        )


# -- the target ------------------------------------------------------------------ #
@dataclasses.dataclass
class _Target:
    estimator: GradientEstimator  # full-data log π_z on a list of parts
    starts: list[list[tf.Tensor]]
    names: list[str]
    constrain: Callable[[list[tf.Tensor]], list[np.ndarray]]
    posterior: Any
    # More over-dispersed starts for the search for other modes (prior draws), or None.
    more_starts: Callable[[int], list[list[tf.Tensor]]] | None = None


class _OnePart(WrappingEstimator):
    """An estimator of a single-tensor state, seen as taking a list of one part."""

    def bootstrap(self, state: Any) -> Any:
        return self._base.bootstrap(as_parts(state)[0])

    def validate_state(self, state: Any, arg_name: str = "init_state") -> None:
        self._base.validate_state(as_parts(state)[0], arg_name)

    def _estimate(self, state: Any, estimator_state: Any, seed: tf.Tensor):
        est, nxt = self._base(as_parts(state)[0], estimator_state, seed)
        return GradientEstimate(est.target_log_prob, as_parts(est.grads_target_log_prob)), nxt

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        est = self._base.full_log_prob_and_gradient(as_parts(state)[0])
        return GradientEstimate(est.target_log_prob, as_parts(est.grads_target_log_prob))

    def with_batch_size(self, batch_size: int) -> _OnePart:
        return _OnePart(self._base.with_batch_size(batch_size))


def _resolve_target(posterior: Any, initial_state: Any, seed: int) -> _Target:
    from tfp_sgmcmc.joint import JointPosterior

    if isinstance(posterior, JointPosterior):
        origin = [tf.zeros_like(p) for p in posterior.initial_state(seed=seed)]
        starts = [origin] + [posterior.initial_state(seed=seed + k) for k in (1, 2)]
        if initial_state is not None:
            starts.insert(0, [tf.convert_to_tensor(p) for p in as_parts(initial_state)])

        def constrain(parts: list[tf.Tensor]) -> list[np.ndarray]:
            return [np.asarray(t) for t in posterior.constrain(parts, as_dict=False)]

        def more(k: int) -> list[list[tf.Tensor]]:
            return [posterior.initial_state(seed=seed + 3 + j) for j in range(k)]

        return _Target(posterior.estimator, starts, posterior.names, constrain, posterior, more)
    if isinstance(posterior, GradientEstimator):
        if initial_state is None:
            raise ValueError(
                "`initial_state` is required with an estimator (a state without chain "
                "dimensions, e.g. a list of zero tensors)."
            )
        single = not is_list_like(initial_state)
        init = [tf.convert_to_tensor(p) for p in as_parts(initial_state)]
        posterior.validate_state(init[0] if single else init, "initial_state")
        estimator = _OnePart(posterior) if single else posterior
        starts = [init, [tf.zeros_like(p) for p in init]]
        names = [f"part_{i}" for i in range(len(init))]

        def forward(parts: list[tf.Tensor]) -> list[np.ndarray]:
            if isinstance(posterior, TransformedEstimator):
                parts = as_parts(posterior.forward(parts[0] if single else parts))
            return [np.asarray(p) for p in parts]

        return _Target(estimator, starts, names, forward, None)
    raise ValueError(
        "`posterior` must be a JointPosterior or a GradientEstimator with a full-data "
        f"log-density, got {type(posterior).__name__}."
    )


def _minibatch_estimator(
    target: GradientEstimator, mode: list[tf.Tensor], batch_size: int, num_examples: int
) -> tuple[GradientEstimator, str]:
    """The chains' estimator at ``batch_size``: control variates at the mode where possible."""
    if isinstance(target, _OnePart):
        est, how = _minibatch_estimator(target.base, mode[0], batch_size, num_examples)
        return _OnePart(est), how
    inner = target.estimator if isinstance(target, TransformedEstimator) else target
    if not isinstance(inner, MinibatchEstimator):
        if hasattr(target, "with_batch_size"):
            return target.with_batch_size(batch_size), "plain minibatches"
        return target, "the estimator as given"
    base = inner.with_batch_size(batch_size)
    if batch_size >= num_examples:
        est: GradientEstimator = base
        how = "full batches"
    else:
        if isinstance(base.data, InMemoryData):
            base = base.with_independent_chains(True)
        transformed = isinstance(target, TransformedEstimator)
        centre = target.forward(mode) if transformed else mode
        est = ControlVariateEstimator(base, centre)
        how = "control variates at the mode"
    if isinstance(target, TransformedEstimator):
        est = target._around(est)
    return est, how


def _batch_candidates(num_examples: int, batch_size: Any) -> tuple[list[int], str]:
    if batch_size is not None:
        sizes = [batch_size] if isinstance(batch_size, (int, np.integer)) else list(batch_size)
        checked = [check_int(n, "batch_size", 1) for n in sizes]
        for n in checked:
            if n > num_examples:
                raise ValueError(
                    f"`batch_size` must be at most the number of examples {num_examples}, "
                    f"got {n}."
                )
        return checked, "batch size given"
    if num_examples <= FULL_BATCH_MAX:
        return [num_examples], (
            f"full batches: N = {num_examples} <= {FULL_BATCH_MAX}, where a full gradient "
            "costs little"
        )
    small = max(256, num_examples // 100)
    large = max(small, num_examples // 20)
    sizes = sorted({min(small, num_examples), min(large, num_examples)})
    return sizes, f"batch sizes tried: {sizes} (1% and 5% of N = {num_examples})"


# -- the compiled chain ------------------------------------------------------------ #
@dataclasses.dataclass
class _Chain:
    """Chains in progress, continued call after call as one chain under the library's seed
    rule: step ``t`` (counted from the chain's start) takes ``fold_in(seed, t)``.

    Attributes:
      state: the whitened states ``[num_chains, d]`` (the estimator's dtype).
      seed: the chain seed, ``int32[2]``.
      results: the kernel results at ``state``; ``None`` bootstraps them at the next call
        (a new start, or a map that changed under the state).
      steps: the steps taken, the index of the next one.
    """

    state: np.ndarray
    seed: np.ndarray
    results: Any = None
    steps: int = 0


class _Runner:
    """The chains on one whitened estimator in the library's loop (`run_steps`), compiled
    once per kernel: SGLD (the tuning arms and the burn-in windows), and, for the final
    draws when every step uses the full data, MALA (`_mala`).

    ε, the chain seed, the first step's index and the thinning are runtime tensors; the
    number of results per call is fixed (`_BLOCK`), since the length of a trace is a
    compile-time constant under XLA, and longer runs are several calls continuing one
    another. A chain is the same however its steps are split into calls, and the same as
    `sample_chain` gives for the kernel, start and seed (`tests/test_one_loop.py`).
    """

    def __init__(self, estimator: WhitenedEstimator, jit_compile: bool) -> None:
        self.estimator = estimator
        self.dtype = estimator.dtype or tf.float32
        graph = needs_autograph(estimator)
        self._programs: dict[bool, tuple[Any, Any]] = {}

        for metropolis in (False, True):
            def kernel(eps: tf.Tensor, metropolis: bool = metropolis) -> Any:
                return _mala(estimator, eps) if metropolis else SGLD(estimator, step_size=eps)

            # Traced (not eager): an eager bootstrap would run the estimator's
            # `tf.vectorized_map`, which traces a new function at every call.
            @tf.function(autograph=graph)  # once per chain: no XLA
            def start(w0, eps, kernel=kernel):
                return kernel(eps).bootstrap_results(w0)

            @tf.function(jit_compile=jit_compile, autograph=graph)
            def run(w0, results, eps, seed, first_step, thin, num_results,
                    kernel=kernel, metropolis=metropolis):
                # MALA's step cannot diverge (a non-finite proposal is rejected); its
                # trace is the acceptance probability at each kept step.
                out = run_steps(
                    kernel(eps), w0, results, num_results * thin, seed,
                    first_step=first_step, thin=thin, num_slots=_BLOCK,
                    track_divergence=not metropolis,
                    trace_fn=_acceptance if metropolis else None,
                )
                return (out.draws, out.state, out.kernel_results, out.num_steps,
                        out.diverged, out.trace)  # SGLD's trace: ()

            # Built lazily by tf.function: a kernel never run is never compiled.
            self._programs[metropolis] = (start, run)

        @tf.function(jit_compile=jit_compile, autograph=graph)
        def scores(w):
            return estimator.full_log_prob_and_gradient(w).grads_target_log_prob[0]

        @tf.function(jit_compile=jit_compile, autograph=graph)
        def log_prob(w):
            return estimator.full_log_prob_and_gradient(w).target_log_prob

        self.scores, self._log_prob = scores, log_prob
        #: The acceptance probabilities at the MALA draws of the last call ``[T, C]``.
        self.acceptance = np.zeros([0, 0])

    def log_density_drop(self, w: np.ndarray) -> np.ndarray:
        """``log π_w(0) − log π_w(w)`` on the full data for rows ``w`` ``[k, d]``, in
        compiled batches of `_DROP_BATCH` rows (one program, whatever ``k``); the mode's
        value is computed with them, since the map may have changed since the last call."""
        rows = np.concatenate([np.zeros([1, w.shape[-1]]), np.asarray(w, np.float64)])
        pad = -len(rows) % _DROP_BATCH
        rows = np.concatenate([rows, np.zeros([pad, rows.shape[-1]])])
        lp = np.concatenate([
            np.asarray(self._log_prob(tf.constant(rows[i:i + _DROP_BATCH], self.dtype)),
                       np.float64)
            for i in range(0, len(rows), _DROP_BATCH)
        ])
        return lp[0] - lp[1:len(w) + 1]

    def runaway(self, w: np.ndarray) -> RunawayDraws:
        """Which chains of the draws ``w`` ``[T, C, d]`` left the posterior: beyond the
        runaway radius, where the full-data log-density has fallen as far as the Laplace
        fit's would (`runaway_draws`)."""
        return runaway_draws(w, self.log_density_drop)

    def __call__(
        self, chain: _Chain, eps: float, num_results: int, thin: int, metropolis: bool = False
    ) -> tuple[np.ndarray, bool]:
        """``num_results`` more draws ``[T, C, d]`` of ``chain`` (every ``thin``-th step),
        and whether a step diverged (a non-finite state, score or log-density, kept or
        not: the map's kernel does not flag the runaway radius, `runaway` judges the
        draws); ``chain`` moves on to the last step run. ``metropolis``: MALA's steps
        (`_mala`) instead of SGLD's, and `acceptance` holds their acceptance
        probabilities.

        Draws that turned non-finite end the call early (nothing after them is worth
        the time): then ``T < num_results``.
        """
        start_fn, run_fn = self._programs[metropolis]
        eps_t = tf.constant(eps, self.dtype)
        w = tf.constant(chain.state, self.dtype)
        results = start_fn(w, eps_t) if chain.results is None else chain.results
        draws, accept, diverged = [], [], False
        for start in range(0, num_results, _BLOCK):
            # The last call may fill only part of its slots: the chain runs exactly the
            # steps of its draws, so the next call continues it where they end.
            size = min(_BLOCK, num_results - start)
            out, w, results, n, div, acc = run_fn(
                w, results, eps_t, tf.constant(chain.seed, tf.int32),
                tf.constant(chain.steps, tf.int32), tf.constant(thin, tf.int32),
                tf.constant(size, tf.int32),
            )
            chain.steps += int(n)
            draws.append(np.asarray(out, np.float64)[:size])
            if metropolis:
                accept.append(np.asarray(acc, np.float64)[:size])
            diverged = diverged or bool(div)
            if not np.isfinite(draws[-1]).all():
                break
        chain.state, chain.results = np.asarray(w), results
        self.acceptance = np.concatenate(accept) if accept else np.zeros([0, 0])
        return np.concatenate(draws), diverged


def _mala(estimator: WhitenedEstimator, eps: tf.Tensor) -> tfp.mcmc.TransitionKernel:
    """MALA on the full-data whitened density with SGLD's proposal at step ``ε``:
    ``w' = w + ε ∇ log π_w(w) + √(2ε) ξ``, TFP's step ``h = 2ε`` (its proposal is
    ``w + (h/2) ∇ + √h ξ``), accepted with the Metropolis–Hastings probability (Roberts &
    Tweedie 1996), so that the draws carry no discretisation bias."""
    return tfp.mcmc.MetropolisAdjustedLangevinAlgorithm(
        estimator.full_log_prob_fn(), step_size=2.0 * eps
    )


def _acceptance(state: tf.Tensor, results: Any) -> tf.Tensor:
    """MALA's acceptance probability ``min(1, exp(log_accept_ratio))`` of the step."""
    del state
    r = results.log_accept_ratio
    r = tf.where(tf.math.is_nan(r), tf.constant(-math.inf, r.dtype), r)  # a rejected NaN
    return tf.exp(tf.minimum(r, 0.0))


def _stein(runner: _Runner, w: np.ndarray) -> float:
    """KSD (IMQ, unit scale) of whitened draws with their full-data whitened scores."""
    x = tf.constant(w, tf.float64)
    s = tf.cast(runner.scores(tf.constant(w, runner.dtype)), tf.float64)
    if not bool(tf.reduce_all(tf.math.is_finite(s))):
        return math.inf
    return float(kernel_stein_discrepancy(samples=x, scores=s))


def _disqualify(w: np.ndarray, diverged: bool, start_sd: float, runner: _Runner) -> str:
    """Why an arm's draws ``[T, C, d]`` cannot be right, or ``""``."""
    if diverged or not np.isfinite(w).all():
        return "diverged (non-finite state, score or log-density)"
    away = runner.runaway(w)
    if away.away.any():
        return (
            "left the posterior (beyond the runaway radius "
            f"{math.sqrt(away.threshold):.3g} Laplace scales from the mode, where log π "
            f"fell more than the Laplace fit's; largest kept radius "
            f"{math.sqrt(away.max_radius2):.3g})"
        )
    sd = np.median(w.std(axis=0), axis=-1)
    if (sd < FROZEN_SD * start_sd).any():
        return f"did not move (median sd {sd.min():.2g} of the posterior's scale)"
    return ""


def _noise_variance(
    estimator: WhitenedEstimator, w: np.ndarray, seed: int, num_probes: int = 32
) -> np.ndarray:
    """Per-coordinate minibatch-gradient variance at the chains' states (max over chains)."""
    dtype = estimator.dtype or tf.float32
    state = tf.constant(w, dtype)

    @tf.function(autograph=needs_autograph(estimator))
    def probe(s: tf.Tensor) -> tf.Tensor:
        est, _ = estimator(state, estimator.bootstrap(state), s)
        return est.grads_target_log_prob[0]

    g = np.stack(
        [np.asarray(probe(tf.constant([seed, k], tf.int32)), np.float64) for k in range(num_probes)]
    )
    return g.var(axis=0, ddof=1).max(axis=0)


def _adapt(
    runner: _Runner,
    chain: _Chain,
    eps: float,
    thin: int,
    notes: list[str],
    say: Callable[[str], None],
    problems: list[tuple[str, str]],
) -> np.ndarray:
    """Burn-in windows of ``chain`` that refine ``runner``'s map in place; the chains' new
    states (in the final map's coordinates).

    A window that diverged adds a ``suspect`` reason to ``problems``: the chosen step
    met a region steeper (or a tail heavier) than either map, which the final draws'
    checks may not see again.
    """
    previous: tuple[np.ndarray, np.ndarray] | None = None  # (scale, state) before a change
    state = chain.state
    for k in range(ADAPT_MAX_WINDOWS + 1):
        w, div = runner(chain, eps, ADAPT_WINDOW, thin)
        if div or not np.isfinite(w).all() or runner.runaway(w).away.any():
            if previous is not None:
                # The refined map made the chains diverge (a steep side the step
                # cannot take): go back to the last map that worked.
                runner.estimator.set_scale(previous[0])
                msg = ("preconditioner adaptation undone: the chains diverged after "
                       f"burn-in window {k}")
                notes.append(msg)
                say(msg)
                problems.append((
                    "suspect",
                    f"the chains diverged in burn-in window {k + 1} after the preconditioner "
                    "was refined (the refinement was undone): the posterior has a direction "
                    "steeper or heavier-tailed than its Laplace fit, which the final draws "
                    "may not have explored",
                ))
                return previous[1]
            msg = f"adaptation stopped: burn-in window {k + 1} diverged"
            notes.append(msg)
            say(msg)
            problems.append((
                "suspect",
                f"the chains diverged in burn-in window {k + 1} at the tuned step size: the "
                "posterior has a direction steeper or heavier-tailed than its Laplace fit, "
                "which the final draws may not have explored",
            ))
            return state
        state = chain.state
        if k == ADAPT_MAX_WINDOWS:
            return state  # the last window only checked the last change
        before = runner.estimator.scale
        step = adapt_whitening(runner.estimator, w)
        lo, hi = step.variance_range
        if not step.changed:
            detail = step.reason if step.reason != "fits" else (
                f"the draws' shrunk variances {lo:.2f}..{hi:.2f} of the fit's")
            msg = f"preconditioner kept after {k + 1} burn-in window(s): {detail}"
            notes.append(msg)
            say(msg)
            return state
        previous = (before, state)
        # The chains go on from the same points in the new coordinates; their kernel
        # results (gradients in the old ones) are bootstrapped again.
        state = rewhiten(state, step).astype(state.dtype)
        chain.state, chain.results = state, None
        msg = (f"preconditioner adapted in burn-in window {k + 1}: the draws' shrunk "
               f"variances were {lo:.2f}..{hi:.2f} of the fit's "
               f"(n_eff {step.effective_draws:.0f})")
        notes.append(msg)
        say(msg)
    return state


def _describe(target: _Target, parts: list[tf.Tensor], others: list[list[tf.Tensor]]) -> str:
    """``"mu1 = -1.98, mu2 = 2.03"``: the constrained coordinates of ``parts`` that differ
    most from those of ``others`` (at most four)."""
    def flat(p: list[tf.Tensor]) -> tuple[list[str], np.ndarray]:
        labels, values = [], []
        for name, x in zip(target.names, target.constrain(p)):
            x = np.reshape(np.asarray(x, np.float64), [-1])
            labels += [name] if x.size == 1 else [f"{name}[{j}]" for j in range(x.size)]
            values.append(x)
        return labels, np.concatenate(values)

    labels, x = flat(parts)
    spread = np.zeros_like(x)
    for other in others:
        spread = np.maximum(spread, np.abs(x - flat(other)[1]))
    top = sorted(np.argsort(-spread)[:4])
    return ", ".join(f"{labels[j]} = {x[j]:.4g}" for j in top)


def _other_modes(
    target: _Target,
    mode: ModeResult,
    lap: LaplaceApproximation,
    seed: int,
    say: Callable[[str], None],
) -> tuple[list[LocalMode], int]:
    """Newton searches from the mode, the given starts and over-dispersed ones: the
    distinct modes they reach (`local_modes`) and which of them is the chains' (or -1)."""
    extra: list[list[tf.Tensor]] = []
    if target.more_starts is not None:
        extra = target.more_starts(EXTRA_MODE_STARTS)
    else:
        # No prior to draw from: three Laplace standard deviations out from the mode.
        rng = np.random.default_rng(seed + 17)
        centre = np.concatenate([np.reshape(np.asarray(p), [-1]) for p in mode.position])
        shapes = [p.shape for p in mode.position]
        sizes = [int(np.prod(s)) for s in shapes]
        for _ in range(EXTRA_MODE_STARTS):
            u = 3.0 * rng.standard_normal(centre.size)
            step = lap.scale @ u if lap.dense else lap.scale * u
            flat = tf.constant(centre + step, mode.position[0].dtype)
            extra.append([tf.reshape(c, s) for c, s in zip(tf.split(flat, sizes), shapes)])
    starts = [mode.position] + list(target.starts) + extra
    say(f"looking for other modes: Newton searches from {len(starts) - 1} starts")
    modes = local_modes(target.estimator, starts)
    own = next((k for k, m in enumerate(modes) if 0 in m.starts), -1)
    return modes, own


def _log_laplace_mass(lap: LaplaceApproximation, log_prob: float) -> float:
    """``log π(m) + ½ log det Σ``: the log of a mode's Laplace mass, up to a constant
    shared by every mode of one posterior."""
    diag = np.diag(lap.scale) if lap.dense else np.asarray(lap.scale)
    return float(log_prob + np.sum(np.log(np.abs(diag))))


def _laplace_at(
    target: _Target,
    modes: list[LocalMode],
    k: int,
    max_dense_dim: int,
    fits: dict[int, LaplaceApproximation],
) -> LaplaceApproximation:
    """Mode ``k``'s Laplace fit, from ``fits`` or computed once and kept there (a
    Hessian each: an ODE's costs seconds)."""
    if k not in fits:
        fits[k] = laplace_approximation(target.estimator, modes[k].position,
                                        max_dense_dim=max_dense_dim)
    return fits[k]


def _heavier_mode(
    target: _Target,
    modes: list[LocalMode],
    own: int,
    lap: LaplaceApproximation,
    max_dense_dim: int,
    fits: dict[int, LaplaceApproximation] | None = None,
) -> tuple[int, LaplaceApproximation, float] | None:
    """The mode (its index, Laplace fit and gain in log mass) whose Laplace mass exceeds
    that of the chains' mode ``own`` by more than `MODE_SWITCH_NATS`, the largest such;
    ``None`` when the chains' mode holds the most. Only the mode of highest density is
    fitted (one Hessian): a mode can outweigh it only by being far wider, which the
    searches' own widths rarely show at this cost. ``fits``: the Laplace fits already
    made, by mode index (the new one is added)."""
    if own < 0:
        return None
    k = max(range(len(modes)), key=lambda j: modes[j].log_prob)
    if k == own or modes[k].log_prob <= modes[own].log_prob + MODE_SWITCH_NATS:
        return None
    lap_k = _laplace_at(target, modes, k, max_dense_dim, {} if fits is None else fits)
    if not np.all(np.isfinite(lap_k.scale)):
        return None
    gain = (_log_laplace_mass(lap_k, modes[k].log_prob)
            - _log_laplace_mass(lap, modes[own].log_prob))
    return (k, lap_k, gain) if gain > MODE_SWITCH_NATS else None


def _other_modes_negligible(
    target: _Target,
    modes: list[LocalMode],
    own: int,
    lap: LaplaceApproximation,
    max_dense_dim: int,
    fits: dict[int, LaplaceApproximation] | None = None,
) -> bool:
    """Whether every mode but the chains' (``own``) holds less Laplace mass than theirs
    by more than `NEGLIGIBLE_MODE_NATS`. A mode whose density is not that far below
    is not negligible whatever its width (no Hessian is spent on it); the others are
    fitted, one Hessian each, unless ``fits`` (by mode index) has them."""
    if own < 0:
        return False
    top = modes[own].log_prob
    if any(m.log_prob > top - NEGLIGIBLE_MODE_NATS for k, m in enumerate(modes) if k != own):
        return False
    mass = _log_laplace_mass(lap, top)
    for k, m in enumerate(modes):
        if k == own:
            continue
        lap_k = _laplace_at(target, modes, k, max_dense_dim, {} if fits is None else fits)
        other = _log_laplace_mass(lap_k, m.log_prob)
        if not (np.isfinite(other) and other < mass - NEGLIGIBLE_MODE_NATS):
            return False
    return True


@dataclasses.dataclass
class _RunLength:
    """How the final sampling ended: its mixing numbers and which rule stopped it."""

    rhat: float
    ess: float
    ended_by: str
    budget_ended: bool
    #: MALA's mean acceptance probability over the draws (NaN for SGLD's).
    acceptance: float = math.nan


def _run_mixing(runner: _Runner, w: np.ndarray) -> tuple[float, float]:
    """Rank-normalised split R̂ and bulk ESS, the worst over the whitened coordinates and
    the parameters' own (unconstrained) coordinates."""
    rhat_w, ess_w = bulk_mixing(w)
    dtype = runner.estimator.dtype or tf.float32
    parts = runner.estimator.unwhiten(tf.constant(w, dtype))
    z = np.concatenate(
        [np.reshape(np.asarray(p, np.float64), w.shape[:2] + (-1,)) for p in parts], -1
    )
    rhat_z, ess_z = bulk_mixing(z)
    return max(rhat_w, rhat_z), min(ess_w, ess_z)


def _draw_until_long_enough(
    runner: _Runner,
    chain: _Chain,
    eps: float,
    burn: int,
    num_results: int,
    thin: int,
    max_seconds: float | None,
    max_gradient_evaluations: int | None,
    t_start: float,
    metropolis: bool = False,
) -> tuple[np.ndarray, bool, _RunLength]:
    """Burn-in and ``num_results`` draws of ``chain``, then more, in chunks continuing the
    same chains, until rank-normalised split R̂ ≤ `TARGET_RHAT` and bulk ESS ≥
    `TARGET_ESS` in every coordinate, or the budget ends it; the draws after burn-in,
    whether a step diverged and how the run ended.

    Each chunk asks for the draws the ESS so far says are missing (at least half and at
    most three times the draws so far, a whole number of compiled blocks), cut to what
    the budget leaves: ``max_gradient_evaluations`` steps per chain in this phase, and
    ``max_seconds`` since ``t_start`` at the pace measured so far. ``metropolis``: MALA's
    steps (`_Runner`), whose mean acceptance probability the run length then holds.
    """
    def rate(a: np.ndarray) -> float:
        return float(np.mean(a)) if metropolis and a.size else math.nan

    t0 = time.perf_counter()
    w, div = runner(chain, eps, burn + num_results, thin, metropolis)
    accept = runner.acceptance[burn:]
    w, steps = w[burn:], (burn + num_results) * thin
    new = w  # the draws not judged yet: each chunk is judged once, when it arrives
    while True:
        if div or not np.isfinite(new).all() or runner.runaway(new).away.any():
            return w, div, _RunLength(
                math.inf, 0.0, "stopped: the chains diverged", False, rate(accept))
        rhat, ess = _run_mixing(runner, w)
        done = f"rank-normalised split R-hat {rhat:.3g}, bulk ESS {ess:.0f}"
        if rhat <= TARGET_RHAT and ess >= TARGET_ESS:
            return w, div, _RunLength(rhat, ess, f"converged after {len(w)} draws per chain "
                                      f"({done})", False, rate(accept))
        have = len(w)
        want = have * (1.2 * TARGET_ESS / max(ess, 1.0) - 1.0) if ess < TARGET_ESS else 0.0
        more = int(min(max(want, have / 2), 3 * have))
        more = _BLOCK * -(-more // _BLOCK)
        limits = []
        if max_gradient_evaluations is not None:
            limits.append(((max_gradient_evaluations - steps) // thin,
                           f"{max_gradient_evaluations} gradient evaluations per chain"))
        if max_seconds is not None:
            pace = (time.perf_counter() - t0) / max(steps // thin, 1)  # seconds per draw
            left = max_seconds - (time.perf_counter() - t_start)
            limits.append((int(left / pace), f"{max_seconds:g} s"))
        for allowed, what in limits:
            allowed = _BLOCK * (allowed // _BLOCK)
            if allowed < _BLOCK:
                return w, div, _RunLength(rhat, ess, (
                    f"the budget ({what}) ended the run before it was long enough: after "
                    f"{len(w)} draws per chain, {done}, where the targets are R-hat <= "
                    f"{TARGET_RHAT} and ESS >= {TARGET_ESS:.0f}; more draws (a larger "
                    "`max_gradient_evaluations` or `max_seconds`) or a reparametrisation"
                ), True, rate(accept))
            more = min(more, allowed)
        new, div = runner(chain, eps, more, thin, metropolis)
        w = np.concatenate([w, new])
        accept = np.concatenate([accept, runner.acceptance])
        steps += more * thin


def _stein_sample(runner: _Runner, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Draws spread evenly over the run and their full-data whitened scores, in batches of
    the tuning metric's shape (no new compilation)."""
    t, c, d = w.shape
    per_chain = max(1, _METRIC_POINTS // c)
    n = min(t, _STEIN_BATCHES * per_chain)
    idx = np.unique(np.linspace(0, t - 1, n).round().astype(int))
    sub = w[idx]
    dtype = runner.estimator.dtype or tf.float32
    scores = []
    for i in range(0, len(idx), per_chain):
        block = sub[i:i + per_chain]
        s = runner.scores(tf.constant(block.reshape(-1, d), dtype))
        scores.append(np.asarray(s, np.float64).reshape(block.shape))
    return sub, np.concatenate(scores)


def _say(progress: bool) -> Callable[[str], None]:
    def say(msg: str) -> None:
        if progress:
            print(f"[sample_posterior] {msg}", file=sys.stderr, flush=True)

    return say


def sample_posterior(
    posterior: Any,
    num_results: int = 1000,
    num_chains: int = 4,
    seed: int = 0,
    *,
    initial_state: Any = None,
    step_sizes: Sequence[float] = DEFAULT_STEP_SIZES,
    batch_size: int | Sequence[int] | None = None,
    max_dense_dim: int = 1000,
    tuning_steps: int = 400,
    adapt: bool = True,
    max_gradient_evaluations: int | None = DEFAULT_MAX_GRADIENT_EVALUATIONS,
    max_seconds: float | None = None,
    metropolis_adjust: bool = True,
    jit_compile: bool = True,
    progress: bool = True,
) -> PosteriorSamples:
    """Sample ``posterior`` with every choice made from the posterior itself (module docstring).

    Args:
      posterior: a `tfp_sgmcmc.JointPosterior`, or a gradient estimator with a
        full-data log-density (then ``initial_state`` is required).
      num_results: draws per chain at least; the run goes on, in chunks, until
        rank-normalised split R̂ ≤ 1.01 and bulk ESS ≥ 400 in every coordinate
        or the budget ends it (module docstring, step 6). Default value: ``1000``.
      num_chains: independent chains (at least 2, for R̂). Default value: ``4``.
      seed: an int in ``[0, 2**31)``. Default value: ``0``.
      initial_state: a state without chain dimensions where the mode search
        starts (first). Default value: ``None`` (the origin of the
        unconstrained space and two prior draws).
      step_sizes: the dimensionless step sizes the tuner tries. Default value:
        `DEFAULT_STEP_SIZES`.
      batch_size: an int, or the candidates to tune over. Default value:
        ``None`` (full batches up to 10,000 examples, else 1% and 5% of them).
      max_dense_dim: a dense preconditioner up to this dimension, diagonal
        above. Default value: ``1000``.
      tuning_steps: steps per arm in the first tuning round at the smallest
        batch size (larger batches run proportionally fewer; the second round
        three times as many). Default value: ``400``.
      adapt: refine the preconditioner from burn-in windows of the chosen
        arm's chains (module docstring, step 5). Default value: ``True``.
      max_gradient_evaluations: the budget of the final sampling (burn-in and
        draws) in gradient evaluations per chain, one per step; ``None`` for no
        limit. ``num_results`` draws are always taken. Default value:
        `DEFAULT_MAX_GRADIENT_EVALUATIONS`.
      max_seconds: a budget of the whole call in seconds (draws beyond
        ``num_results`` stop when the pace so far says the next chunk would
        exceed it). Default value: ``None`` (no time limit: the gradient
        budget alone, which gives the same draws on any machine).
      metropolis_adjust: when the chosen batch is the full data, draw the final
        chains by MALA (SGLD's proposal with a Metropolis–Hastings test, module
        docstring, step 6), which has no discretisation bias; ``False`` keeps SGLD.
        Minibatch steps are always SGLD's. Default value: ``True``.
      jit_compile: XLA-compile the chains. Default value: ``True``.
      progress: one line per phase on standard error. Default value: ``True``.

    Returns:
      A `PosteriorSamples`.

    Raises:
      ValueError: a bad argument (named), or no mode could be found.
    """
    t_start = time.perf_counter()
    num_results = check_int(num_results, "num_results", 4)
    num_chains = check_int(num_chains, "num_chains", 2)
    seed = check_int(seed, "seed", 0)
    tuning_steps = check_int(tuning_steps, "tuning_steps", 20)
    if max_gradient_evaluations is not None:
        max_gradient_evaluations = check_int(
            max_gradient_evaluations, "max_gradient_evaluations", 0
        )
    if max_seconds is not None and not (
        isinstance(max_seconds, (int, float)) and max_seconds >= 0 and math.isfinite(max_seconds)
    ):
        raise ValueError(
            f"`max_seconds` must be a non-negative number or None, got {max_seconds!r}."
        )
    if seed >= 2**31:
        raise ValueError(f"`seed` must be in [0, 2**31), got {seed}.")
    if not isinstance(metropolis_adjust, bool):
        raise ValueError(
            f"`metropolis_adjust` must be True or False, got {metropolis_adjust!r}."
        )
    eps_list = [float(e) for e in step_sizes]
    if not eps_list or any(not (0.0 < e < 2.0) or not math.isfinite(e) for e in eps_list):
        raise ValueError(
            f"`step_sizes` must be a non-empty list of numbers in (0, 2), got {step_sizes!r}."
        )
    say = _say(progress)
    notes: list[str] = []
    timings: dict[str, float] = {}

    target = _resolve_target(posterior, initial_state, seed)
    num_examples = int(getattr(target.estimator, "num_examples", 1) or 1)

    # (status, reason) of everything that went wrong before the final draws: each
    # reaches the verdict (and so its progress line), not only `notes`.
    problems: list[tuple[str, str]] = []
    t0 = time.perf_counter()
    say("searching for the mode")
    mode = find_mode(target.estimator, target.starts, num_examples, log=say)
    timings["map"] = time.perf_counter() - t0
    notes += mode.notes
    if mode.converged:
        say(f"mode found by {mode.method} (log density {mode.log_prob:.6g}) "
            f"in {timings['map']:.1f} s")
    elif mode.unbounded:
        msg = (f"no mode found in {timings['map']:.1f} s: the searches ran away with the "
               "log density still rising (it looks unbounded, e.g. a scale parameter going "
               "to zero in a centred hierarchy); the preconditioner is fitted at a start "
               f"(log density {mode.log_prob:.6g}) instead")
        say(msg)
        problems.append(("suspect", "no mode found: the mode searches ran away with the log "
                         "density still rising (it looks unbounded, e.g. a scale parameter "
                         "going to zero in a centred hierarchy), so the preconditioner, the "
                         "step sizes and the runaway radius have no reference scale; "
                         "reparametrise (e.g. non-centred)"))
    else:
        msg = (f"no converged mode in {timings['map']:.1f} s: the best point, by "
               f"{mode.method}, has log density {mode.log_prob:.6g}")
        say(msg)
        notes.append("the mode search did not converge; the preconditioner may be poor")
        problems.append(("suspect", f"no converged mode: the best point ({mode.method}, log "
                         f"density {mode.log_prob:.6g}) is where the preconditioner is "
                         "fitted, so the step sizes and the runaway radius may have the "
                         "wrong scale"))

    t0 = time.perf_counter()
    lap = laplace_approximation(target.estimator, mode.position, max_dense_dim=max_dense_dim)
    timings["curvature"] = time.perf_counter() - t0
    notes += lap.notes
    for note in lap.notes:
        # A curvature that is not positive definite at a converged mode: a saddle or a
        # flat direction, where the Laplace width is a measurement, not a fit.
        if mode.converged:
            problems.append(("suspect", note))
            say(note)
    kind = "dense" if lap.dense else "diagonal"
    say(f"{kind} Laplace curvature, lambda_max {lap.lambda_max:.3g}, "
        f"in {timings['curvature']:.1f} s")

    d_total = int(sum(np.prod(p.shape) for p in mode.position))
    if mode.converged and d_total <= MODE_SEARCH_MAX_DIM:
        # Every chain starts near the one mode found (from `initial_state` first, when
        # given): a second mode would never be visited and nothing after this would
        # see it. A few cheap searches from over-dispersed starts look for one.
        t0 = time.perf_counter()
        modes, own = _other_modes(target, mode, lap, seed, say)
        timings["other_modes"] = time.perf_counter() - t0
        if len(modes) > 1:
            # The modes' Laplace fits, made once: a switch keeps the old mode's for
            # the negligible-mass check below.
            fits = {own: lap} if own >= 0 else {}
            heavier = _heavier_mode(target, modes, own, lap, max_dense_dim, fits)
            if heavier is not None:
                k, lap_k, gain = heavier
                msg = (f"the chains start at the mode with the most Laplace mass instead "
                       f"(log density {modes[k].log_prob:.6g}, log mass {gain:.3g} above that "
                       f"of the mode the search found first)")
                say(msg)
                notes.append(msg)
                mode = mode._replace(position=modes[k].position, log_prob=modes[k].log_prob,
                                     method=mode.method + ", then the heaviest local mode")
                lap, own = lap_k, k
            where = []
            for k, m in enumerate(modes):
                rest = [o.position for o in modes if o is not m]
                here = " (where the chains start)" if k == own else ""
                where.append(f"{_describe(target, m.position, rest)} "
                             f"(log density {m.log_prob:.6g}){here}")
            msg = (f"several modes: Newton searches from over-dispersed starts found "
                   f"{len(modes)} distinct modes, at " + "; and at ".join(where))
            if _other_modes_negligible(target, modes, own, lap, max_dense_dim, fits):
                # A mode whose mass is a fraction e^-20 of the chains' cannot move any
                # expectation the draws estimate: worth knowing, not a reason to doubt them.
                msg += (f"; the others hold less than e^-{NEGLIGIBLE_MODE_NATS:g} of the "
                        "chains' mode's Laplace mass, which the draws can ignore")
                say(msg)
                notes.append(msg)
            else:
                say(msg)
                notes.append(msg)
                problems.append(("suspect", msg + (
                    ". The chains start near one mode and the draws may cover only it"
                    if own >= 0 else ". The chains start at none of them")))
        else:
            say(f"no other mode found ({timings['other_modes']:.1f} s)")

    sizes, why = _batch_candidates(num_examples, batch_size)
    notes.append(why)
    say(why)
    runners: dict[int, _Runner] = {}
    for n in sizes:
        est, how = _minibatch_estimator(target.estimator, mode.position, n, num_examples)
        # Steps beyond the runaway radius are not flagged by the kernel: a long run of a
        # tail heavier than the Laplace fit's reaches it; `_Runner.runaway` judges the draws
        # there by their log-density instead.
        whitened = WhitenedEstimator(est, mode.position, lap.scale, flag_runaway_steps=False)
        runners[n] = _Runner(whitened, jit_compile)
    notes.append(f"gradients: {how}")
    d = runners[sizes[0]].estimator.dimension

    rng = np.random.default_rng(seed)
    w_start = rng.standard_normal([num_chains, d])
    w_start = w_start.astype(runners[sizes[0]].dtype.as_numpy_dtype)
    arms: list[ArmRecord] = []
    # Arm j's chains: seed (seed, j), as the library tuner's arms (`ArmRunner`); its
    # second round continues the first round's chain.
    chains: dict[int, _Chain] = {}
    t_sample = t_metric = 0.0
    alive: list[ArmRecord] = []
    per_chain = max(1, _METRIC_POINTS // num_chains)
    # When every arm of the grid is disqualified (a posterior far steeper on one side
    # than its Laplace fit), the grid is tried once more, ten times smaller.
    for attempt, grid in enumerate((eps_list, [e / 10 for e in eps_list])):
        if attempt:
            msg = ("every tuning arm was disqualified; trying step sizes ten times "
                   f"smaller: {', '.join(f'{e:g}' for e in grid)}")
            notes.append(msg)
            say(msg)
            first = sorted({a.reason for a in arms if a.reason})
            problems.append((
                "suspect",
                "every tuning arm at the given step sizes was disqualified ("
                + "; ".join(first) + "): the posterior is far from its Laplace fit in some "
                "direction (a heavy tail or a steep wall) that the final draws may not show",
            ))
        tried = [ArmRecord(e, n) for n in sizes for e in grid]
        chains.update({
            id(a): _Chain(w_start, chain_seed([seed, len(arms) + j]))
            for j, a in enumerate(tried)
        })
        arms += tried

        def run_round(i: int, survivors: list[int], tried: list[ArmRecord] = tried
                      ) -> dict[int, float]:
            """Round ``i`` of the arms ``survivors``: ``η^i`` times the first round's
            steps, continuing each arm's chains; the metric is the whitened KSD."""
            nonlocal t_sample, t_metric
            for j in survivors:
                arm = tried[j]
                steps = max(50, tuning_steps * _ETA**i * sizes[0] // arm.batch_size)
                # The same number of results per arm, so one compiled program serves all.
                thin = max(1, steps // per_chain)
                t0 = time.perf_counter()
                w, div = runners[arm.batch_size](chains[id(arm)], arm.step_size, per_chain,
                                                 thin)
                t_sample += time.perf_counter() - t0
                arm.rounds += 1
                arm.reason = _disqualify(w, div, 1.0, runners[arm.batch_size])
                if arm.reason:
                    arm.ksd = math.inf
                    continue
                t0 = time.perf_counter()
                arm.ksd = _stein(runners[arm.batch_size], w.reshape(-1, d))
                t_metric += time.perf_counter() - t0
            return {j: tried[j].ksd for j in survivors}

        # The library's successive halving (MAMBA's rule, `successive_halving`) in two
        # rounds: the best third goes on with three times the steps; a disqualified arm
        # cannot win.
        halving = successive_halving(
            list(range(len(tried))), _ROUNDS, _ETA, run_round, drop_unusable=True
        )
        alive = [tried[j] for j in halving.ranked]
        if alive:
            break
    timings["tuning_sampling"] = t_sample
    timings["tuning_metric"] = t_metric
    if not alive:
        reasons = sorted({a.reason for a in arms if a.reason})
        before = "".join(f" Before that: {r}." for status, r in problems)
        raise RuntimeError(
            "sample_posterior: every tuning arm was disqualified (" + "; ".join(reasons)
            + "), also at step sizes ten times smaller. The Laplace approximation may be "
            "far from the posterior; try another parametrisation." + before
        )
    best = alive[0]
    say(f"tuned: step size {best.step_size:g} (whitened), batch size {best.batch_size} "
        f"(KSD {best.ksd:.3g}); tuning {t_sample:.1f} s sampling + {t_metric:.1f} s metric")

    runner = runners[best.batch_size]
    thin = max(1, math.ceil(1.0 / best.step_size))
    burn = max(1, math.ceil(10.0 / best.step_size / thin))
    state = chains[id(best)].state
    t0 = time.perf_counter()
    if adapt:
        # The adaptation windows are a chain of their own, numbered after the arms.
        warm = _Chain(state, chain_seed([seed, len(arms)]))
        state = _adapt(runner, warm, best.step_size, thin, notes, say, problems)
    timings["adaptation"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    # Full-data steps cost no more with a Metropolis test, which removes SGLD's
    # discretisation bias (a skewed or curved posterior shifts SGLD's draws at any ε).
    exact = metropolis_adjust and best.batch_size >= num_examples
    # The final chains: `sample_chain(kernel, state, seed=seed)`'s, burn-in included.
    final = _Chain(state, chain_seed(seed))
    w, div, run = _draw_until_long_enough(
        runner, final, best.step_size, burn, num_results, thin,
        max_seconds, max_gradient_evaluations, t_start, metropolis=exact,
    )
    timings["sampling"] = time.perf_counter() - t0
    say(f"sampled {w.shape[0]} x {num_chains} draws (thinned by {thin}) in "
        f"{timings['sampling']:.1f} s: {run.ended_by}")
    notes.append(f"run length: {run.ended_by}")
    if exact:
        msg = (f"final draws by MALA (Metropolis-adjusted, no discretisation bias) at the "
               f"tuned step: mean acceptance probability {run.acceptance:.3f}")
        notes.append(msg)
        say(msg)

    t0 = time.perf_counter()
    noise = None
    if best.batch_size < num_examples and np.isfinite(w[-1]).all():
        noise = _noise_variance(runner.estimator, w[-1], seed)
    # MALA's draws have no step-size bias to predict: the bias check is SGLD's alone.
    verdict: Verdict = judge_whitened_draws(
        w, None if exact else best.step_size, noise, log_density_drop=runner.log_density_drop)
    if exact:
        verdict.stats["mala_acceptance"] = run.acceptance
    tail = int(verdict.stats.get("tail_draws_beyond_radius", 0))
    if tail:
        msg = (f"{tail} draw(s) lie beyond the runaway radius where the log-density is "
               "still above the Laplace fit's: the posterior's tail is heavier than its "
               "Laplace fit there (kept as draws)")
        notes.append(msg)
        say(msg)
    verdict.stats["bulk_rhat"] = run.rhat
    verdict.stats["bulk_ess"] = run.ess
    if run.budget_ended and (run.ess < TARGET_ESS or run.rhat > RHAT_SUSPECT):
        # Short of the targets by more than R-hat's own noise: with ESS >= 400 a
        # rank-normalised R-hat between 1.01 and 1.05 is left to `ended_by` and the notes.
        verdict.add("suspect", run.ended_by)
    if np.isfinite(w).all():
        stein = stein_moment_check(*_stein_sample(runner, w))
        verdict.stats.update(stein.stats)
        for reason in stein.reasons:
            verdict.add(stein.status, reason)
    for status, reason in problems:
        verdict.add(status, reason)
    rhat = verdict.stats.get("max_rhat", math.nan)
    if (rhat > RHAT_SUSPECT and d_total <= MODE_SEARCH_MAX_DIM
            and np.isfinite(w[-1]).all()):
        # The chains disagree: where does each end? Newton from each chain's last draw
        # names the modes when they sit in different ones.
        dtype = runner.estimator.dtype or tf.float32
        last = runner.estimator.unwhiten(tf.constant(w[-1], dtype))
        ends = [[p[c] for p in last] for c in range(num_chains)]
        modes = local_modes(target.estimator, ends)
        if len(modes) > 1:
            groups = []
            for m in modes:
                rest = [o.position for o in modes if o is not m]
                chains = ", ".join(str(c) for c in m.starts)
                groups.append(f"chain(s) {chains} near {_describe(target, m.position, rest)} "
                              f"(log density {m.log_prob:.6g})")
            verdict.add("failed", "several modes: the chains end in different modes, "
                        + "; ".join(groups))
    if div:
        verdict.add(
            "failed",
            "the sampler reported diverged steps (a non-finite state, score or "
            "log-density)",
        )
    timings["verdict"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_start

    dtype = runner.estimator.dtype or tf.float32
    z = runner.estimator.unwhiten(tf.constant(w, dtype))
    constrained = target.constrain(z)
    draws = dict(zip(target.names, constrained))
    say(f"verdict: {verdict}")
    return PosteriorSamples(
        draws=draws,
        unconstrained=[np.asarray(p) for p in z],
        whitened=w,
        verdict=verdict.status,
        reasons=list(verdict.reasons),
        diagnostics=dict(verdict.stats),
        kernel=(_mala(runner.estimator, tf.constant(best.step_size, dtype)) if exact
                else SGLD(runner.estimator, step_size=best.step_size)),
        step_size=best.step_size,
        batch_size=best.batch_size,
        num_steps_between_results=thin,
        num_burnin_steps=burn * thin,
        init_state=state,
        tuning=arms,
        mode=mode,
        laplace=lap,
        timings=timings,
        notes=notes,
        ended_by=run.ended_by,
        _posterior=target.posterior,
    )
