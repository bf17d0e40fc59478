"""Result objects of the tuners: best arm, per-round table, samples, plot."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfp_sgmcmc.tuning.arms import arm_label

__all__ = ["RoundRecord", "TuningResult"]


@dataclass
class RoundRecord:
    """One arm in one round.

    Attributes:
      round: 0-based round index.
      arm_index: index of the arm in the grid.
      arm: its hyperparameters.
      metric: the discrepancy (``+inf`` if it diverged or the metric failed).
      steps: sampler steps run this round.
      samples: thinned samples kept this round (the metric's input).
      sampling_seconds: wall-clock sampling time (synchronised, no compilation).
      compile_seconds: tracing + compilation charged to this arm (first use of
        its structural key), excluded from the budget.
      metric_seconds: time to compute the metric (not charged to the budget).
      budget: this round's per-arm budget ``r_i`` in the budget's unit.
      diverged: the chain produced a non-finite state/score.
      survived: the arm was kept for the next round (or won the last one).
      note: why the metric is infinite, if it is.
      spent: budget spent, in the budget's unit.
      metric_se: standard error of ``metric`` over the arm's independent
        chains (``sd/√C``); ``nan`` with one chain per arm.
    """

    round: int
    arm_index: int
    arm: dict[str, Any]
    metric: float
    steps: int
    samples: int
    sampling_seconds: float
    compile_seconds: float
    metric_seconds: float
    budget: float
    diverged: bool
    survived: bool = False
    note: str = ""
    spent: float = 0.0
    metric_se: float = math.nan


class _RecordTotal:
    """A read-only attribute of a result: one field of its records, summed."""

    def __init__(self, field_name: str, kind: type) -> None:
        self.field_name = field_name
        self.kind = kind

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return self.kind(sum(getattr(r, self.field_name) for r in obj.records))


@dataclass
class TuningResult:
    """What a tuner returns.

    Attributes:
      method: ``"MAMBA"``, ``"grid search"`` or ``"heuristic"``.
      best_arm, best_index: the chosen hyperparameters and their grid index.
      arms: the whole grid.
      records: one [`RoundRecord`][tfp_sgmcmc.tuning.results.RoundRecord] per arm and round.
      samples: the best arm's thinned samples of its last round (list of parts).
      final_states: last state of every arm (list of parts; ``None`` if diverged).
      metric_name: the reward metric's name.
      budget: the budget, as a string.
      eta: the pruning rate η.
      num_rounds: ``K``.
      round_sizes: ``|S_i|`` for each round.
      per_arm_budgets: ``r_i`` for each round.
      make_kernel: the kernel factory; `kernel` builds the best arm's kernel.
      round_seconds: wall-clock seconds of each round (sampling, compilation,
        metric and dispatch: with parallel arms, less than the sum of the
        arms' sampling seconds).
      chains_per_arm: independent chains per arm (``samples`` and
        ``final_states`` then lead with a ``[C]`` chain axis after the draw
        axis / as their first axis).
    """

    method: str
    best_arm: dict[str, Any]
    best_index: int
    arms: list[dict[str, Any]]
    records: list[RoundRecord]
    samples: list[np.ndarray]
    final_states: list[Any]
    metric_name: str
    budget: str
    budget_unit: str
    make_kernel: Any = field(repr=False, default=None)
    eta: int | None = None
    num_rounds: int = 1
    round_sizes: list[int] = field(default_factory=list)
    per_arm_budgets: list[float] = field(default_factory=list)
    num_programs: int = 0
    single_part: bool = True
    round_seconds: list[float] = field(default_factory=list)
    chains_per_arm: int = 1
    #: The gradient-noise ratio of the best arm at its final state (a
    #: [`GradientNoiseReport`][tfp_sgmcmc.diagnostics.GradientNoiseReport];
    #: ``None`` if not derived).
    gradient_noise: Any = field(default=None, repr=False)
    #: The [`ArmRunner`][tfp_sgmcmc.tuning.runner.ArmRunner] that ran the arms in this
    #: process (``None`` when they ran elsewhere): `sample` runs its compiled programs.
    #: Default value: the live runner of ``make_kernel`` and ``arms``, if any (see
    #: [`runner_for`][tfp_sgmcmc.tuning.runner.runner_for]).
    runner: Any = field(default=None, repr=False, compare=False)
    _own_runner: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.runner is None and self.make_kernel is not None:
            from tfp_sgmcmc.tuning.runner import runner_for

            self.runner = runner_for(self.make_kernel, self.arms, self.chains_per_arm)

    def __getstate__(self) -> dict[str, Any]:
        # A copy or a pickle leaves the compiled programs behind (a runner holds
        # tf.functions); its `sample` builds a runner for the best arm when first called.
        return {**self.__dict__, "runner": None, "_own_runner": None}

    # -- derived ------------------------------------------------------------ #
    @property
    def best_metric(self) -> float:
        last = [r for r in self.records if r.arm_index == self.best_index]
        return last[-1].metric if last else math.inf

    @property
    def best_metric_se(self) -> float:
        """Standard error of ``best_metric`` (``nan`` with one chain per arm)."""
        last = [r for r in self.records if r.arm_index == self.best_index]
        return last[-1].metric_se if last else math.nan

    def runner_up(self) -> RoundRecord | None:
        """The second-best arm of the last round (``None`` if it had one arm)."""
        last_round = max((r.round for r in self.records), default=0)
        recs = sorted(
            (r for r in self.records if r.round == last_round and r.arm_index != self.best_index),
            key=lambda r: _sort_metric(r.metric),
        )
        return recs[0] if recs else None

    def pick_confidence(self) -> str:
        """How sure the pick is: the winner's metric ± SE against the runner-up's.

        The gap ``d = m_2 − m_1`` between the last round's two best arms has
        standard error ``√(se_1² + se_2²)`` (independent chains); ``d/se``
        above 2 means the two are distinguishable at two standard errors.
        """
        best = self.best_metric
        se1 = self.best_metric_se
        ru = self.runner_up()
        name = self.metric_name
        head = f"{name} {_pm(best, se1)}"
        if ru is None:
            return head + " (no runner-up)"
        line = f"{head} vs runner-up {arm_label(ru.arm)}: {_pm(ru.metric, ru.metric_se)}"
        if not (math.isfinite(se1) and math.isfinite(ru.metric_se) and math.isfinite(ru.metric)):
            return line + " (standard errors need chains_per_arm >= 2)"
        gap = ru.metric - best
        se = math.hypot(se1, ru.metric_se)
        z = gap / se if se > 0 else math.inf
        verdict = "distinguishable" if z >= 2 else "NOT distinguishable"
        return line + f"; gap {gap:.3g} = {z:.1f} SE ({verdict} at 2 SE)"

    def grid_edges(self) -> dict[str, str]:
        """The numeric hyperparameters whose chosen value is an end of the values tried.

        For each numeric key ``k`` of ``best_arm``, the axis through the pick is the
        arms that agree with it on every other key (for a product grid: the other
        hyperparameters held at the pick's values). When that axis tried at least
        three values of ``k`` and the pick has the smallest (largest) of them, the
        reward may still improve beyond the grid in that direction: widen the grid
        there before trusting the value. ``{}`` when no pick sits at an end.

        Returns:
          ``{key: "smallest" | "largest"}``.

        See docs/tuning.md, "The result".
        """
        edges: dict[str, str] = {}
        best = self.best_arm
        for key, value in best.items():
            if not _is_number(value):
                continue
            axis = {
                float(arm[key])
                for arm in self.arms
                if arm.keys() == best.keys()
                and _is_number(arm[key])
                and all(_same(arm[o], best[o]) for o in best if o != key)
            }
            if len(axis) < 3:
                continue
            if float(value) == min(axis):
                edges[key] = "smallest"
            elif float(value) == max(axis):
                edges[key] = "largest"
        return edges

    def grid_edge_message(self) -> str:
        """``grid_edges`` in words (``""`` when the pick is inside the grid)."""
        edges = self.grid_edges()
        if not edges:
            return ""
        parts = [f"{key} is the {end} tried" for key, end in edges.items()]
        return (
            "the pick is at the grid's end (" + "; ".join(parts) + "): the reward may "
            "improve beyond it, so widen the grid in that direction before trusting the value"
        )

    #: Sampling seconds summed over arms and rounds.
    total_sampling_seconds = _RecordTotal("sampling_seconds", float)
    #: Tracing + compilation seconds summed over arms and rounds.
    total_compile_seconds = _RecordTotal("compile_seconds", float)
    #: Metric seconds summed over arms and rounds.
    total_metric_seconds = _RecordTotal("metric_seconds", float)
    #: Sampler steps summed over arms and rounds.
    total_steps = _RecordTotal("steps", int)
    #: Total spent in the budget's unit (seconds, steps or gradient evaluations).
    budget_used = _RecordTotal("spent", float)

    def budget_honesty(self) -> float:
        """Sampling time / allotted time over arm-rounds that did not diverge.

        (A diverged arm stops early and leaves its time unspent.)
        """
        ok = [r for r in self.records if not r.diverged]
        allotted = sum(r.budget for r in ok)
        return float(sum(r.sampling_seconds for r in ok) / allotted) if allotted else math.nan

    @property
    def best_state(self) -> Any:
        st = self.final_states[self.best_index]
        if st is None:
            return None
        return st[0] if self.single_part else st

    @property
    def best_samples(self) -> Any:
        """The best arm's thinned samples (a tensor-like array if the state has one part)."""
        return self.samples[0] if self.single_part else self.samples

    def kernel(self, **overrides: Any) -> Any:
        """The kernel of the best arm (built by the tuner's ``make_kernel``)."""
        if self.make_kernel is None:
            raise ValueError("This result has no `make_kernel` to build a kernel with.")
        return self.make_kernel(**{**self.best_arm, **overrides})

    def sample(
        self,
        num_results: int,
        seed: Any = 0,
        num_burnin_steps: int = 0,
        thin: int = 1,
        num_chains: int | None = None,
        initial_state: Any = None,
        return_log_prob: bool = False,
    ) -> Any:
        """Draws ``num_results`` states with the best arm's kernel, in the tuner's program.

        The tuner compiled one program per structural key (batch size, ...) with the
        float hyperparameters and the seed as runtime inputs; the best arm's program
        runs these draws too, so a state of the shape it had in the tuning compiles
        nothing new. The chain equals

        ```none
        sample_chain(num_results, initial_state, kernel=result.kernel(), seed=seed,
                     num_burnin_steps=num_burnin_steps, num_steps_between_results=thin - 1)
        ```

        ([`sample_chain`][tfp_sgmcmc.driver.flat.sample_chain], the library's seed
        rule): draw ``r`` is the state after ``1 + num_burnin_steps + r·thin`` kernel
        steps from ``initial_state``, step ``t`` seeded with ``stateless_fold_in(seed,
        t)``. When the arms ran in other processes (a Ray executor) or the result was
        built without a runner, a runner for the best arm is built here on the first
        call (one compile) and kept for the next.

        Args:
          num_results: draws to return, ``>= 1``.
          seed: the chain seed, an int ``>= 0`` or an int32 pair. Default value: ``0``.
          num_burnin_steps: steps before the first draw's step. Default value: ``0``.
          thin: keep every ``thin``-th state. Default value: ``1``.
          num_chains: chains run side by side (a leading ``[num_chains]`` state
            dimension), each starting from the best arm's last state. The tuner's
            layout (``num_chains = chains_per_arm``: its chains from their own last
            states, with no chain dimension for one chain) reuses its program;
            another count traces it once more for the new shape. Default value:
            ``None`` (the tuner's layout).
          initial_state: the start, in place of the best arm's last state(s) (one
            part or a list of parts, with the chain dimension ``num_chains`` gives).
            Default value: ``None``.
          return_log_prob: also return each draw's ``target_log_prob`` (the kernel's
            minibatch estimate of ``log π`` there), ``[num_results]`` (``[num_results,
            num_chains]``). Default value: ``False``.

        Returns:
          The draws, ``[num_results, ...]`` (``[num_results, num_chains, ...]`` with
          chains): an array for a one-part state, else a list of arrays; with
          ``return_log_prob``, the pair ``(draws, log_prob)``.

        Raises:
          ValueError: ``num_results < 1``, ``num_burnin_steps < 0``, ``thin < 1``,
            ``num_chains < 1``, a bad ``seed``, no ``make_kernel`` to build the kernel
            with, or no ``initial_state`` when the best arm diverged.

        Warns:
          RuntimeWarning: the chain diverged (the draws after it are NaN).
        """
        from tfp_sgmcmc.internal.util import check_int

        if num_chains is not None:
            num_chains = check_int(num_chains, "num_chains", 1)
        runner, index = self._sampling_runner()
        if initial_state is None:
            state = self.final_states[self.best_index]
            if state is None:
                raise ValueError(
                    "The best arm diverged, so it has no last state: pass `initial_state`."
                )
            state = [np.asarray(p) for p in state]
            if num_chains is not None and num_chains != self.chains_per_arm:
                one = [p[0] if self.chains_per_arm > 1 else p for p in state]
                state = [np.broadcast_to(p, (num_chains, *p.shape)).copy() for p in one]
            initial_state = state
        out = runner.sample(
            index,
            num_results,
            seed,
            initial_state=initial_state,
            num_burnin_steps=num_burnin_steps,
            thin=thin,
        )
        if out.diverged:
            warnings.warn(
                f"{self.method}: the best arm's chain diverged after {out.steps} steps; the "
                "draws from there on are NaN. A smaller step size avoids it.",
                RuntimeWarning,
                stacklevel=2,
            )
        draws = out.draws[0] if self.single_part else out.draws
        return (draws, out.target_log_prob) if return_log_prob else draws

    def _sampling_runner(self) -> tuple[Any, int]:
        """``(runner, arm index)`` that runs the best arm's program (see `sample`)."""
        if self.runner is not None:
            return self.runner, self.best_index
        if self.make_kernel is None:
            raise ValueError("This result has no `make_kernel` to build a kernel with.")
        if self._own_runner is None:
            from tfp_sgmcmc.tuning.runner import ArmRunner

            state = self.final_states[self.best_index]
            if state is None:
                raise ValueError("The best arm diverged, so it has no last state to start from.")
            one = [np.asarray(p)[0] if self.chains_per_arm > 1 else np.asarray(p) for p in state]
            self._own_runner = ArmRunner(
                self.make_kernel,
                [dict(self.best_arm)],
                one,
                chains_per_arm=self.chains_per_arm,
            )
            # The runner's arm continues from the best arm's last state(s).
            self._own_runner.arm_states[0].state = [np.asarray(p) for p in state]
        return self._own_runner, 0

    def round_table(self, round_index: int | None = None) -> list[RoundRecord]:
        if round_index is None:
            return list(self.records)
        return [r for r in self.records if r.round == round_index]

    # -- presentation ------------------------------------------------------ #
    def to_markdown(self, max_rows: int | None = None) -> str:
        """The per-round table (arm, metric, samples drawn, seconds) as markdown."""
        unit = self.budget_unit
        head = (
            f"| round | arm | hyperparameters | {self.metric_name} (± SE) | steps | samples kept | "
            "sampling s | compile s | metric s | kept |"
        )
        lines = [head, "|" + "---|" * 10]
        recs = sorted(self.records, key=lambda r: (r.round, _sort_metric(r.metric)))
        if max_rows is not None:
            recs = recs[:max_rows]
        for r in recs:
            if r.diverged:
                m = "inf (diverged)"
            elif math.isinf(r.metric):
                # The reason's gist ("did not move", "far from the posterior", ...).
                reason = (r.note or "").split(" (")[0].split(":")[0].strip()
                m = f"inf ({reason})" if reason else "inf"
            else:
                m = _pm(r.metric, r.metric_se)
            lines.append(
                f"| {r.round} | {r.arm_index} | {arm_label(r.arm)} | {m} | {r.steps} | "
                f"{r.samples} | {r.sampling_seconds:.3f} | {r.compile_seconds:.2f} | "
                f"{r.metric_seconds:.3f} | {'yes' if r.survived else ''} |"
            )
        del unit
        return "\n".join(lines)

    def summary(self) -> str:
        lines = [
            f"{self.method}: {len(self.arms)} arms, {self.num_rounds} round(s), "
            f"budget {self.budget}, metric {self.metric_name}"
            + (f", eta={self.eta}" if self.eta else ""),
            f"  best arm #{self.best_index}: {arm_label(self.best_arm)} ({self.pick_confidence()})",
            f"  sampling {self.total_sampling_seconds:.2f} s, compile "
            f"{self.total_compile_seconds:.2f} s ({self.num_programs} program(s)), metric "
            f"{self.total_metric_seconds:.2f} s, {self.total_steps} steps",
        ]
        edge = self.grid_edge_message()
        if edge:
            lines.append("  " + edge)
        if self.gradient_noise is not None:
            lines.append("  " + self.gradient_noise.message())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"TuningResult(method={self.method!r}, best_arm={{{arm_label(self.best_arm)}}}, "
            f"{self.metric_name}={self.best_metric:.4g}, arms={len(self.arms)}, "
            f"rounds={self.num_rounds}, budget={self.budget}, "
            f"sampling_s={self.total_sampling_seconds:.2f}, "
            f"compile_s={self.total_compile_seconds:.2f})"
        )

    def plot(self, path: str | None = None, ax: Any = None, title: str | None = None) -> Any:
        """Metric of every arm by round (log scale; diverged arms marked at the top).

        Args:
          path: save the figure there (PNG). Default value: ``None``.
          ax: a matplotlib axes to draw into. Default value: ``None`` (new figure).
          title: Default value: ``None`` (method and budget).

        Returns:
          The matplotlib figure.
        """
        import matplotlib

        if path is not None and ax is None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        if ax is None:
            fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
        else:
            fig = ax.figure
        finite = [r.metric for r in self.records if math.isfinite(r.metric) and r.metric > 0]
        top = max(finite) * 3 if finite else 1.0
        by_arm: dict[int, list[RoundRecord]] = {}
        for r in self.records:
            by_arm.setdefault(r.arm_index, []).append(r)
        for idx, recs in by_arm.items():
            xs = [r.round for r in recs]
            ys = [r.metric if math.isfinite(r.metric) else top for r in recs]
            best = idx == self.best_index
            ax.plot(
                xs,
                ys,
                "-o" if best else "-",
                color="C3" if best else "0.6",
                lw=2 if best else 0.7,
                ms=4,
                zorder=3 if best else 1,
                label=f"best: {arm_label(self.best_arm)}" if best else None,
            )
            for r in recs:
                if not math.isfinite(r.metric):
                    ax.plot([r.round], [top], "x", color="k", ms=4)
        if finite and min(finite) > 0:
            ax.set_yscale("log")
        ax.set_xlabel("round")
        ax.set_ylabel(self.metric_name + " (x = diverged / failed)")
        ax.set_xticks(range(self.num_rounds))
        ax.set_title(title or f"{self.method}, budget {self.budget}", fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path)
        return fig


def _pm(value: float, se: float) -> str:
    """``value ± se`` (just ``value`` when the SE is unknown)."""
    if not math.isfinite(value):
        return "inf"
    return f"{value:.4g} ± {se:.2g}" if math.isfinite(se) else f"{value:.4g}"


def _is_number(value: Any) -> bool:
    """A real number, not a bool (an on/off switch has no 'beyond')."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def _same(a: Any, b: Any) -> bool:
    """Equal hyperparameter values (arrays elementwise; what cannot compare, by identity)."""
    try:
        return bool(np.all(np.asarray(a == b)))
    except (TypeError, ValueError):
        return a is b


def _sort_metric(m: float) -> float:
    return math.inf if not math.isfinite(m) else m


def warn_if_no_usable_arm(result: TuningResult) -> None:
    """Warn when the chosen arm's metric is infinite: every arm diverged, ran too few
    steps for a thinned sample or was disqualified, so the "best" arm is only the first
    in grid order. The warning gives each arm's reason."""
    last = [r for r in result.records if r.round == result.num_rounds - 1] or result.records
    if last and all(math.isinf(r.metric) for r in last):

        def reason(r: Any) -> str:
            if r.diverged:
                return "diverged"
            if r.samples == 0:
                return "no thinned sample"
            return f"disqualified: {r.note}" if r.note else "an infinite score"

        reasons = "; ".join(f"arm #{r.arm_index} {r.arm}: {reason(r)}" for r in last)
        warnings.warn(
            f"{result.method}: no arm of the deciding round has a finite {result.metric_name} "
            f"({reasons}). Best arm #{result.best_index} is the first in grid order, not a "
            "choice. Change the step sizes, raise the budget (at least `thin` steps per arm), "
            "or start the arms from a mode (`find_map`) when they are disqualified as far "
            "from the posterior.",
            RuntimeWarning,
            stacklevel=3,
        )
