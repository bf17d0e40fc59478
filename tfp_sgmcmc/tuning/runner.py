"""The execution engine shared by MAMBA and the grid-search baseline.

One `ArmRunner` owns the compiled programs. A program is built per
*structural key* (batch size, leapfrog steps, ... -- see
[`tfp_sgmcmc.tuning.arms`][tfp_sgmcmc.tuning.arms]); float hyperparameters (step size, friction,
...) are arguments of that program, so the kernel is rebuilt *inside* the
trace from tensors and every arm with the same structure reuses one compiled
program. The program runs ``num_steps`` (a tensor) sampler steps in one
``tf.while_loop`` and writes every ``thin``-th state into a fixed-size buffer;
it stops early when the kernel flags divergence (non-finite state, score or
log-density), so a diverging arm costs little and never crashes the run.

Wall-clock budgets are spent in chunks: the first chunk of a program runs one
step (to measure its speed and the fixed cost of a call), later chunks are
sized from the measured rate to fill half the remaining time net of that
fixed cost, and an arm stops once less than half a call's fixed cost remains
(a further call would overshoot more than stopping undershoots); every chunk
is synchronised (``.numpy()``) before the clock stops. The first call of a program (tracing + XLA
compilation, plus a one-step run whose output is discarded, so the chain does
not advance -- as the authors' warm-up) is timed separately as compile time.

The programs run the library's one loop
([`run_steps`][tfp_sgmcmc.loop.run_steps]) and its seed rule: step ``t`` of arm
``j``'s chain (counted over all its rounds) takes ``stateless_fold_in((seed, j), t)``, so
a chain does not depend on how its steps are split into calls, and the first round of
arm ``j`` is the chain ``sample_chain(..., seed=[seed, j])`` and the driver give with
the same kernel and start. The thinning is a runtime input too, so
[`ArmRunner.sample`][tfp_sgmcmc.tuning.runner.ArmRunner.sample] draws an arm's final
sample (any seed, burn-in and thinning) in the program its rounds ran. The first
round bootstraps the sampler state as ``sample_chain`` does (the kernel's default first
minibatch);
a later round, which restarts the sampler state at
the arm's last θ after ``t`` steps, bootstraps it from the seed
``sanitize_seed(stateless_fold_in((seed, j), t), salt="tuning.restart")``. A ``tf.data`` source
([`DatasetData`][tfp_sgmcmc.data.DatasetData]) has no XLA kernel: under
``jit_compile`` its batches are stacked into prefetched blocks of at most
``FEED_BLOCK_BYTES`` by a
[`StreamFeeder`][tfp_sgmcmc.data.stream.StreamFeeder], a call runs at most the
steps its block holds, and consumes exactly the batches it read (the
step-by-step order; docs/tuning.md, "Tuning on tf.data").
"""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.data.stream import stream_feeder
from tfp_sgmcmc.internal.autograph import autograph_context, call_user, needs_autograph
from tfp_sgmcmc.internal.util import as_parts, check_int, get_outermost, restructure
from tfp_sgmcmc.kernels.base import BOOTSTRAP_SEED
from tfp_sgmcmc.loop import chain_seed, run_steps, step_seed
from tfp_sgmcmc.tuning.arms import split_arm, structural_keys
from tfp_sgmcmc.tuning.budget import Budget, steps_for

__all__ = [
    "ArmRunner",
    "ArmState",
    "RunOutput",
    "ArmDraws",
    "gradient_cost_per_step",
    "runner_for",
]

#: Share of the remaining wall-clock time (net of the per-call overhead) a chunk is
#: sized to fill: at 0.5 a chunk that runs twice as slow as its measured rate
#: predicts (a load spike on a shared machine) still ends within the budget.
_FILL = 0.5

#: Bytes of stacked minibatches in one prefetched block of a ``tf.data`` source
#: (the steps of one fed call are bounded by it; the reader holds about two blocks).
FEED_BLOCK_BYTES = 128 << 20


#: The runners alive in this process, by their ``make_kernel`` (see `runner_for`).
_LIVE_RUNNERS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def runner_for(make_kernel: Any, arms: list[dict[str, Any]], chains_per_arm: int = 1) -> Any:
    """The live [`ArmRunner`][tfp_sgmcmc.tuning.runner.ArmRunner] built last in this
    process with this ``make_kernel`` (the same object), these arms and chains, or
    ``None``.

    A tuner's result takes it while the tuner's runner is alive, so that
    [`TuningResult.sample`][tfp_sgmcmc.tuning.results.TuningResult.sample] runs the
    programs the tuning compiled. The runner holds ``make_kernel``, so the id it is
    filed under is not reused while it lives.
    """
    runner = _LIVE_RUNNERS.get(id(make_kernel))
    if (
        runner is None
        or runner.make_kernel is not make_kernel
        or runner.chains_per_arm != int(chains_per_arm)
        or runner.arms != [dict(a) for a in arms]
    ):
        return None
    return runner


def _estimator_of(kernel: Any) -> Any:
    """The outermost ``estimator`` of ``kernel`` or of the kernels it wraps (through
    ``inner_kernel``), ``None`` without one.

    The search is TFP's ``unnest.get_outermost`` (breadth first over the attributes in
    ``NESTED_ATTRS``), as ported to ``tfp_sgmcmc.internal.util``: TFP 0.25 has no public
    ``tfp.experimental.unnest``.
    """
    return get_outermost(kernel, "estimator")


def gradient_cost_per_step(kernel: Any) -> int:
    """Per-example gradient evaluations of one step of ``kernel``.

    ``(estimator calls per step) × (gradients per call) × (batch size)``, times
    the number of replicas for replica exchange; the batch size is 1 for
    estimators without data.
    """
    est = _estimator_of(kernel)
    calls = int(getattr(kernel, "gradient_evaluations_per_step", 1))
    per_call = int(getattr(est, "gradient_evaluations_per_call", 1)) if est is not None else 1
    batch = int(getattr(est, "batch_size", 1) or 1) if est is not None else 1
    # Replica exchange evaluates its K replicas in one estimator call.
    replicas = int(getattr(kernel, "num_replicas", 1))
    return calls * per_call * batch * replicas


@dataclass
class ArmState:
    """What the tuner keeps for one arm between rounds."""

    index: int
    arm: dict[str, Any]
    state: list[np.ndarray]
    seed: np.ndarray
    diverged: bool = False
    total_steps: int = 0
    calls: int = 0


@dataclass
class RunOutput:
    """One arm's run for one round."""

    samples: list[np.ndarray]  # thinned, [m, ...] per part ([m, C, ...] with C chains)
    target_log_prob: np.ndarray  # stochastic log π̃ at the thinned samples, [m] ([m, C])
    steps: int
    sampling_seconds: float
    compile_seconds: float
    diverged: bool
    extras: dict = field(default_factory=dict)
    num_chains: int = 1  # C independent chains per arm (axis 1 of the samples if C > 1)


@dataclass
class ArmDraws:
    """What [`ArmRunner.sample`][tfp_sgmcmc.tuning.runner.ArmRunner.sample] returns.

    Attributes:
      draws: the kept states, ``[num_results, ...]`` per part (NaN after a divergence).
      target_log_prob: the kernel's (stochastic) log-density at each kept state.
      final_state: the state after the last step run (list of parts).
      steps: kernel steps run (burn-in included).
      diverged: the chain stopped on a non-finite state, score or log-density.
    """

    draws: list[np.ndarray]
    target_log_prob: np.ndarray
    final_state: list[np.ndarray]
    steps: int
    diverged: bool


class _Program:
    """Compiled init + chunk functions for one structural key."""

    def __init__(
        self,
        make_kernel: Callable[..., Any],
        static_arm: dict[str, Any],
        like: Any,
        thin: int,
        capacity: int,
        jit_compile: bool,
        autograph: tuple[bool, Any],
    ) -> None:
        # ``autograph``: whether the programs need AutoGraph, and the status `make_kernel`
        # is called with (see tfp_sgmcmc.internal.autograph).
        ag, user_ag = autograph
        self.make_kernel = make_kernel
        self.like = like
        self.thin = thin
        self.capacity = capacity  # buffer slots
        self.compiled = False
        #: Times ``chunk_fn``'s Python body was traced (each trace is one compile).
        self.traces = 0
        #: A StreamFeeder when the kernel reads tf.data under XLA (set by ``attach_feeder``).
        self.feeder: Any = None
        self.feed_steps = 0  # most steps one fed call runs
        self._feeder_checked = False

        def build(scalars: dict[str, tf.Tensor]) -> Any:
            # The user's factory, converted by AutoGraph as before (internal.autograph).
            return call_user(make_kernel, user_ag, **static_arm, **scalars)

        def init_fn(parts, seed, scalars):
            kernel = build(scalars)
            return kernel.bootstrap_results(restructure(parts, like), seed=seed)

        def chunk_fn(parts, results, seed, num_steps, offset, first_step, thin, scalars):
            # The library's one loop (tfp_sgmcmc.loop): step t of the arm's chain
            # (counted over all its rounds) takes stateless_fold_in(arm seed, t), whatever
            # the calls its steps are split into (budgets size the calls; a fed tf.data
            # program also stops at the end of its block). The seed, the first step and
            # the thinning are runtime inputs, so one compiled program serves every call
            # and arm of this structure, and the final sampling of the chosen arm.
            self.traces += 1
            out = run_steps(
                build(scalars),
                restructure(parts, like),
                results,
                num_steps,
                seed,
                first_step=first_step,
                thin=thin,
                offset=offset,
                num_slots=capacity,
                trace_fn=lambda s, r: r.target_log_prob,
                stop_on_divergence=True,
            )
            # Slot j is last written by the step that completes group j, so it holds
            # the state after every `thin`-th step of the round.
            return (
                as_parts(out.state),
                out.kernel_results,
                as_parts(out.draws),
                out.trace,
                out.num_steps,
                out.diverged,
            )

        # The bootstrap is one gradient evaluation: graph mode is enough, and compiling
        # it with XLA costs more than it saves when large data is captured
        # (random_window copies).
        self.init_fn = tf.function(init_fn, reduce_retracing=True, autograph=ag)
        self.chunk_fn = tf.function(
            chunk_fn, jit_compile=jit_compile, reduce_retracing=True, autograph=ag
        )
        self._chunk_py = chunk_fn

    def attach_feeder(
        self, kernel: Any, parts: list[tf.Tensor], max_steps: int, jit_compile: bool
    ) -> None:
        """Feed the chunk program its ``tf.data`` minibatches, if ``kernel`` reads any.

        A [`DatasetData`][tfp_sgmcmc.data.DatasetData] iterator has no XLA
        kernel: a [`StreamFeeder`][tfp_sgmcmc.data.stream.StreamFeeder] pulls
        the batches into prefetched blocks of at most ``FEED_BLOCK_BYTES`` and
        every chunk call reads the block it is given (one compiled shape) for
        as many steps as it runs, consuming exactly those batches: the arm
        draws the stream's batches in the order the step-by-step path draws
        them. Must run before ``init_fn`` is first traced (graph reads then
        continue the fed stream). Kernels reading only in-memory data keep
        ``chunk_fn``.
        """
        if self._feeder_checked:
            return
        self._feeder_checked = True
        feeder = stream_feeder(kernel, restructure(parts, self.like))
        if feeder is None:
            return
        per_step = sum(
            c * src.batch_nbytes for src, c in zip(feeder.sources, feeder.draws_per_step)
        )
        self.feed_steps = int(min(max_steps, max(1, FEED_BLOCK_BYTES // max(1, per_step))))
        self.chunk_fn = feeder.compile(
            self._chunk_py,
            self.feed_steps,
            jit_compile=jit_compile,
            steps_run=lambda out: int(out[4].numpy()),
        )
        self.feeder = feeder

    def steps_now(self, n: int) -> int:
        """``n``, capped at the steps the fed block holds (``n`` without a feeder)."""
        if self.feeder is None:
            return n
        return min(n, self.feeder.steps_available())


class ArmRunner:
    """Runs arms (continuing from their last state) under a budget.

    Args:
      make_kernel: ``make_kernel(**arm) -> kernel``; called eagerly once per
        arm for validation, and inside the compiled program with float
        hyperparameters as tensors.
      arms: list of hyperparameter dicts.
      init_state: initial chain state (tensor or list of parts; one chain).
      thin: keep every ``thin``-th state. Default value: ``10``.
      seed: integer seed in ``[0, 2**31)``. Default value: ``0``.
      static_keys: extra structural keys. Default value: ``()``.
      max_steps_per_call: steps per compiled call (bounds the sample buffer).
        Default value: ``2000``.
      jit_compile: XLA-compile the programs. A kernel reading a
        [`DatasetData`][tfp_sgmcmc.data.DatasetData] is then fed its
        minibatches from prefetched blocks (see `_Program.attach_feeder`);
        with ``False`` its iterator is read step by step in a graph.
        Default value: ``True``.
      program_cache: a dict shared between runners with the SAME
        ``make_kernel`` (e.g. MAMBA, grid search and the final evaluation of
        one sampler), so a structural key is compiled once for all of them.
        Default value: ``None`` (private).
      chains_per_arm: ``C``, independent chains per arm run side by side in
        one program (the state gets a leading ``[C]`` dimension; every chain
        starts from ``init_state``). With ``C > 1`` the kernel's estimator
        must draw one minibatch per chain
        (``MinibatchEstimator(independent_chains=True)``), or the chains'
        metrics would be correlated. In a screening round (see
        `ArmRunner.run`) an arm whose chains
        run fewer than ``thin`` steps returns each chain's last state as its
        one sample per chain. Default value: ``1``.

    Raises:
      ValueError: an arm the kernel rejects (the message names the arm), an
        empty arm list, ``thin < 1``, ``chains_per_arm < 1``, or
        ``chains_per_arm > 1`` with an estimator that shares minibatches
        across chains.
    """

    def __init__(
        self,
        make_kernel: Callable[..., Any],
        arms: list[dict[str, Any]],
        init_state: Any,
        thin: int = 10,
        seed: int = 0,
        static_keys: tuple = (),
        max_steps_per_call: int = 2000,
        jit_compile: bool = True,
        program_cache: dict | None = None,
        chains_per_arm: int = 1,
    ) -> None:
        chains_per_arm = check_int(chains_per_arm, "chains_per_arm", 1)
        # Arm i's chain draws from the stateless key (seed, i): both int32.
        seed = check_int(seed, "seed", 0, maximum=2**31 - 1)
        if not callable(make_kernel):
            raise ValueError("`make_kernel` must be callable (**arm) -> kernel.")
        if not arms:
            raise ValueError("`arms` must be a non-empty list of hyperparameter dicts.")
        for a in arms:
            if not isinstance(a, dict):
                raise ValueError(f"`arms` must hold dicts, got {type(a).__name__}.")
        thin = check_int(thin, "thin", 1)
        max_steps_per_call = check_int(max_steps_per_call, "max_steps_per_call", 2 * thin)
        self.make_kernel = make_kernel
        self.arms = [dict(a) for a in arms]
        self._collected = False  # see _compile
        self.thin = thin
        self.jit_compile = jit_compile
        #: How programs reading tf.data are fed: ``True`` XLA chunks (``jit_compile``),
        #: ``False`` the same fed chunks as graphs, ``None`` the iterator step by step.
        self._stream_jit: bool | None = True if jit_compile else None
        parts = [tf.convert_to_tensor(p) for p in as_parts(init_state)]
        self.like = init_state if isinstance(init_state, (list, tuple)) else parts[0]
        self.dtype = parts[0].dtype
        self.chains_per_arm = int(chains_per_arm)
        self.init_parts = [p.numpy() for p in parts]
        if self.chains_per_arm > 1:
            # C copies of the start: the chains differ only through their randomness.
            self.init_parts = [
                np.ascontiguousarray(np.broadcast_to(p, (self.chains_per_arm, *p.shape)))
                for p in self.init_parts
            ]
        self.static = structural_keys(self.arms, static_keys)
        self.capacity = max_steps_per_call // thin + 1
        self.max_steps_per_call = (self.capacity - 1) * thin
        self._programs: dict[tuple, _Program] = {} if program_cache is None else program_cache
        self._used: set = set()
        self._rates: dict[tuple, float] = {}
        #: Fixed cost of one chunk call per program (wall-clock budgets).
        self._overheads: dict[tuple, float] = {}
        self.kernels = []
        self.costs = []
        for i, arm in enumerate(self.arms):
            try:
                kernel = make_kernel(**arm)
            except (ValueError, TypeError) as e:  # a bad value, or a name the kernel lacks
                raise ValueError(f"`arms[{i}]` = {arm}: {e}") from e
            self.kernels.append(kernel)
            # Deterministic budgets count every chain's work: C chains split an arm's
            # budget, as C repeats would.
            self.costs.append(gradient_cost_per_step(kernel) * int(chains_per_arm))
        self.reference_estimator = _estimator_of(self.kernels[0])
        # The programs are traced without AutoGraph unless a kernel or estimator class of
        # the user's may need it; `make_kernel` itself is converted where it is called.
        self._autograph = (needs_autograph(*self.kernels), autograph_context())
        if self.chains_per_arm > 1:
            for i, kernel in enumerate(self.kernels):
                est = _estimator_of(kernel)
                if est is not None and getattr(est, "independent_chains", True) is False:
                    raise ValueError(
                        f"`chains_per_arm={self.chains_per_arm}` needs independent chains, but "
                        f"the estimator of `arms[{i}]` shares each minibatch across chains: "
                        "build it with `independent_chains=True` (or call "
                        "`.with_independent_chains()`)."
                    )
        self.arm_states = [
            ArmState(
                i,
                arm,
                [p.copy() for p in self.init_parts],
                np.array([seed, i], np.int32),
            )
            for i, arm in enumerate(self.arms)
        ]
        _LIVE_RUNNERS[id(make_kernel)] = self

    # ------------------------------------------------------------------ #
    def _program(self, arm: dict[str, Any]) -> tuple[_Program, dict[str, tf.Tensor], tuple]:
        key, scalars = split_arm(arm, self.static)
        key = (
            id(self.make_kernel),
            self.thin,
            self.capacity,
            self.jit_compile,
            self.chains_per_arm,
            key,
        )
        self._used.add(key)
        if key not in self._programs:
            self._programs[key] = _Program(
                self.make_kernel,
                dict(key[-1]),
                self.like,
                self.thin,
                self.capacity,
                self.jit_compile,
                self._autograph,
            )
        tensors = {k: tf.constant(v, self.dtype) for k, v in scalars.items()}
        return self._programs[key], tensors, key

    @property
    def num_programs(self) -> int:
        """How many distinct compiled programs this runner has used."""
        return len(self._used)

    def _seed(self, st: ArmState) -> tf.Tensor:
        """The seed of the sampler state's bootstrap at the start of a round."""
        st.calls += 1
        if st.total_steps == 0:  # the chain's start, as every entry point bootstraps it
            return tf.constant(BOOTSTRAP_SEED, tf.int32)
        seed = step_seed(tf.constant(st.seed, tf.int32), st.total_steps)
        return tfp.random.sanitize_seed(seed, salt="tuning.restart")

    def _compile(
        self, prog: _Program, index: int, parts: list[tf.Tensor], scalars: dict[str, tf.Tensor]
    ) -> float:
        """Traces and compiles ``prog`` on its first use (seconds taken; ``0.0`` after).

        The first call runs one step whose output is discarded, so no chain advances
        (a ``tf.data`` stream does, by the batches the bootstrap and the step read).
        """
        if prog.compiled:
            return 0.0
        t0 = time.perf_counter()
        if not self._collected:
            # Garbage left by earlier models in the process (their traced functions
            # among it) slows tracing several-fold; one collection first removes it
            # (measured: docs/keras.md, "Tuning late in a long session").
            gc.collect()
            self._collected = True
        if self._stream_jit is not None:
            # tf.data sources: XLA chunks fed from prefetched blocks (before any
            # graph that reads the source is traced).
            prog.attach_feeder(
                self.kernels[index], parts, self.max_steps_per_call, self._stream_jit
            )
        r = prog.init_fn(parts, tf.constant([0, 0], tf.int32), scalars)
        out = prog.chunk_fn(
            parts,
            r,
            tf.constant([0, 1], tf.int32),
            tf.constant(1),
            tf.constant(0),
            tf.constant(0),
            tf.constant(self.thin),
            scalars,
        )
        out[4].numpy()
        compile_s = time.perf_counter() - t0
        have = r.target_log_prob.shape.as_list()
        if int(np.prod(have, dtype=np.int64)) != self.chains_per_arm:
            raise ValueError(
                f"`init_state` must be one chain (log-density of one element, here of "
                f"shape {have}): the "
                "tuner starts every arm's chain(s) from it (use `chains_per_arm` for "
                "several); reshape it to one chain."
            )
        prog.compiled = True
        return compile_s

    @property
    def num_traces(self) -> int:
        """How many times the chunk programs this runner used were traced (each trace
        is one XLA compile under ``jit_compile``)."""
        return sum(self._programs[k].traces for k in self._used if k in self._programs)

    def sample(
        self,
        index: int,
        num_results: int,
        seed: Any,
        initial_state: Any = None,
        num_burnin_steps: int = 0,
        thin: int = 1,
    ) -> ArmDraws:
        """Draws ``num_results`` states of arm ``index``'s kernel with its compiled program.

        The arm's structural key picks the program its tuning rounds ran (compiled on
        first use, when the arm never ran), so no new program is traced when the state
        has the shape it had in the tuning. The chain is
        [`sample_chain`][tfp_sgmcmc.driver.flat.sample_chain]'s with the arm's kernel,
        ``current_state=initial_state``, ``seed``, ``num_burnin_steps`` and
        ``num_steps_between_results = thin - 1``: the sampler state is bootstrapped as
        there, step ``t`` (burn-in included) takes ``stateless_fold_in(seed, t)``, and
        draw ``r`` is the state after ``1 + num_burnin_steps + r·thin`` steps. The steps
        run in calls of at most the program's buffer (``capacity·thin`` steps); the
        arm's own chain (its state between rounds) is left as it is.

        Args:
          index: the arm.
          num_results: draws to return, ``>= 1``.
          seed: the chain seed (an int ``>= 0`` or an int pair, see
            [`chain_seed`][tfp_sgmcmc.loop.chain_seed]).
          initial_state: the start (list of parts, or one tensor). Default value:
            ``None`` (the arm's last state).
          num_burnin_steps: steps before the first draw is counted. Default value: ``0``.
          thin: keep every ``thin``-th state. Default value: ``1``.

        Returns:
          An [`ArmDraws`][tfp_sgmcmc.tuning.runner.ArmDraws]. A chain that diverges
          stops there; the draws it did not reach are NaN.

        Raises:
          ValueError: ``num_results < 1``, ``num_burnin_steps < 0``, ``thin < 1``, a bad
            ``seed``, or no ``initial_state`` for an arm that diverged.
        """
        num_results = check_int(num_results, "num_results", 1)
        num_burnin_steps = check_int(num_burnin_steps, "num_burnin_steps", 0)
        thin = check_int(thin, "thin", 1)
        seed = tf.constant(chain_seed(seed), tf.int32)
        st = self.arm_states[index]
        if initial_state is None:
            if st.diverged:
                raise ValueError(
                    f"Arm {index} diverged, so it has no last state: pass `initial_state`."
                )
            parts = [tf.constant(p) for p in st.state]
        else:
            parts = [
                tf.convert_to_tensor(p, dtype=q.dtype)
                for p, q in zip(as_parts(initial_state), st.state)
            ]
        prog, scalars, _ = self._program(st.arm)
        self._compile(prog, index, parts, scalars)
        results = prog.init_fn(parts, tf.constant(BOOTSTRAP_SEED, tf.int32), scalars)
        total = num_burnin_steps + (num_results - 1) * thin + 1
        samples: list[list[np.ndarray]] = [[] for _ in parts]
        lps: list[np.ndarray] = []
        kept = 0
        done = 0
        diverged = False
        while done < total:
            if done < num_burnin_steps:
                # Burn-in: nothing kept (a period longer than the call keeps no slot).
                n = min(num_burnin_steps - done, self.max_steps_per_call)
                period, offset = n + 1, 0
            else:
                # Kept: the steps s with (s - num_burnin_steps) % thin == 0.
                period = thin
                offset = (done - num_burnin_steps + thin - 1) % thin
                n = min(total - done, self.capacity * thin - offset)
            n = prog.steps_now(n)
            parts, results, bufs, lp_buf, k, div = prog.chunk_fn(
                parts,
                results,
                seed,
                tf.constant(n),
                tf.constant(offset),
                tf.constant(done),
                tf.constant(period),
                scalars,
            )
            k = int(k.numpy())
            if done >= num_burnin_steps:
                m = min((offset + k) // thin, num_results - kept)
                for i, b in enumerate(bufs):
                    samples[i].append(b[:m].numpy())
                lps.append(lp_buf[:m].numpy())
                kept += m
            done += k
            if bool(div.numpy()):
                diverged = True
                break
        final = [p.numpy() for p in parts]
        draws = [
            np.concatenate(s, axis=0) if s else np.zeros([0, *p.shape], p.dtype)
            for s, p in zip(samples, final)
        ]
        lp = np.concatenate(lps, axis=0) if lps else np.zeros([0])
        if kept < num_results:  # stopped on a divergence: the rest is NaN
            draws = [_pad_nan(d, num_results, p.shape) for d, p in zip(draws, final)]
            lp = _pad_nan(lp, num_results, np.shape(results.target_log_prob))
        return ArmDraws(draws, lp, final, done, diverged)

    def steps_for(self, index: int, amount: float, budget: Budget) -> int:
        """Steps arm ``index`` runs for ``amount`` of a deterministic budget (see
        [`steps_for`][tfp_sgmcmc.tuning.budget.steps_for])."""
        return steps_for(amount, budget, self.costs[index], self.chains_per_arm)

    def run(self, index: int, amount: float, budget: Budget, screening: bool = False) -> RunOutput:
        """Run arm ``index`` for ``amount`` (in ``budget.unit``) from its last state.

        A fresh sampler state (momentum, thermostat, minibatch position) is
        built from the arm's last θ, as the authors' code does every round.

        ``screening``: a round whose metric only decides which arms go on (all
        of MAMBA's rounds but the last). With ``chains_per_arm > 1``, an arm
        whose chains run fewer than ``thin`` steps in a screening round returns
        each chain's last state as its one sample, so a costly arm (a large
        batch, its budget split ``C`` ways) is not pruned for lack of samples.
        A deciding round (MAMBA's last, a grid arm) needs thinned samples, as
        in Algorithm 1: the few steps of an arm that cannot afford ``thin`` per
        chain say little about its stationary law (and the KSD favours chains
        that barely left their start).
        """
        st = self.arm_states[index]
        prog, scalars, key = self._program(st.arm)
        parts = [tf.constant(p) for p in st.state]
        compile_s = self._compile(prog, index, parts, scalars)
        lp_shape = [self.chains_per_arm] if self.chains_per_arm > 1 else []
        if st.diverged:
            return RunOutput(
                [np.zeros([0, *p.shape], p.dtype) for p in st.state],
                np.zeros([0, *lp_shape]),
                0,
                0.0,
                compile_s,
                True,
                num_chains=self.chains_per_arm,
            )

        samples: list[list[np.ndarray]] = [[] for _ in parts]
        lps: list[np.ndarray] = []
        elapsed = 0.0
        done = 0
        diverged = False
        t0 = time.perf_counter()
        results = prog.init_fn(parts, self._seed(st), scalars)
        arm_seed = tf.constant(st.seed, tf.int32)  # step t: fold_in(arm_seed, t)
        results.target_log_prob.numpy()  # synchronise before stopping the clock
        elapsed += time.perf_counter() - t0
        if budget.unit == "seconds":
            target_steps = None
            rate = self._rates.get(key)
            overhead = self._overheads.get(key, 0.0)
        else:
            target_steps = self.steps_for(index, amount, budget)
            rate = None
        while True:
            if target_steps is not None:
                n = min(target_steps - done, self.max_steps_per_call)
            else:
                remaining = amount - elapsed
                # A call costs at least its fixed overhead (dispatch, sync, buffer
                # copies): once less than half of it remains, another call would
                # overshoot by more than stopping undershoots. Without this, the
                # geometric tail of ever smaller chunks overshoots the short per-arm
                # budgets of a wide first round.
                if remaining <= 0 or (rate is not None and remaining < 0.5 * overhead):
                    break
                # Aim at a fraction of the remaining time net of the overhead:
                # timings on a shared machine are noisy, and undershooting only
                # costs another call.
                n = 1 if rate is None else max(1, int(_FILL * (remaining - overhead) * rate))
                n = min(n, self.max_steps_per_call)
            if n <= 0:
                break
            offset = done % self.thin
            t0 = time.perf_counter()
            n = prog.steps_now(n)  # a fed program runs at most the steps its block holds
            parts, results, bufs, lp_buf, k, div = prog.chunk_fn(
                parts,
                results,
                arm_seed,
                tf.constant(n),
                tf.constant(offset),
                tf.constant(st.total_steps + done),
                tf.constant(self.thin),
                scalars,
            )
            k = int(k.numpy())  # synchronises the device
            div = bool(div.numpy())
            m = (offset + k) // self.thin
            # A partial last group (offset + k not a multiple of thin) is left
            # out; the next chunk's slot 0 completes it.
            for i, b in enumerate(bufs):
                samples[i].append(b[:m].numpy())
            lps.append(lp_buf[:m].numpy())
            dt = time.perf_counter() - t0
            elapsed += dt
            done += k
            if target_steps is None and k == 1 and not div:
                # A one-step call is (almost) all overhead: keep the smallest seen.
                overhead = min(overhead, dt) if key in self._overheads else dt
                self._overheads[key] = overhead
            if k == 1 and dt > 0 and rate is None:
                rate = 1.0 / dt  # conservative: the next chunk re-measures it
            elif k > 1 and dt > 0:
                net = dt - (overhead if target_steps is None else 0.0)
                rate = k / max(net, 0.5 * dt)
            if div:
                diverged = True
                break
        if budget.unit == "seconds" and rate is not None and not diverged:
            self._rates[key] = rate
        st.total_steps += done
        final = [p.numpy() for p in parts]
        if diverged or not all(np.all(np.isfinite(p)) for p in final):
            diverged = True
            st.diverged = True
        else:
            st.state = final
        out_samples = [
            np.concatenate(s, axis=0) if s else np.zeros([0, *p.shape], p.dtype)
            for s, p in zip(samples, st.state)
        ]
        lp = np.concatenate(lps) if lps else np.zeros([0, *lp_shape])
        short = screening and self.chains_per_arm > 1 and done > 0 and not diverged
        if short and out_samples[0].shape[0] == 0:
            # C chains split the arm's budget C ways, so a costly arm (a large batch)
            # can run fewer than `thin` steps per chain in an early round. Thinning is
            # then anchored at the round's end: each chain's last state is its one
            # sample, instead of an infinite metric that would prune the arm for lack
            # of data rather than for its quality. (One chain keeps Algorithm 1's rule.)
            out_samples = [p[None] for p in st.state]
            lp = np.asarray(results.target_log_prob.numpy())[None]
        return RunOutput(
            out_samples, lp, done, elapsed, compile_s, diverged, num_chains=self.chains_per_arm
        )


def _pad_nan(x: np.ndarray, n: int, shape: Any) -> np.ndarray:
    """``x`` (``[m, *shape]``) followed by NaN up to ``n`` rows."""
    dtype = x.dtype if x.dtype.kind in "fc" else np.float32
    pad = np.full([n - x.shape[0], *shape], np.nan, dtype)
    return np.concatenate([x.astype(dtype), pad], axis=0)
