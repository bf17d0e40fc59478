"""``sample_chain``: ``tfp.mcmc.sample_chain``'s interface as one flat loop.

``tfp.mcmc.sample_chain`` runs a ``tf.while_loop`` over results and, inside it, a second
``tf.while_loop`` over the steps of each result whose trip count is a tensor
(``1 + num_burnin_steps`` for the first result, ``1 + num_steps_between_results`` for the
rest). Compiled with XLA, a flat loop lets the compiler drop every step's work whose
result nothing reads, and that nested loop does not. With ``trace_fn=None``, that work is
the minibatch log-density and the divergence flag of every step, and for SGHMC also the
last leapfrog step's minibatch and gradient: they only set the momentum the next sample
redraws and the score reported in the kernel results. Stochastic-gradient kernels
therefore run faster in one flat loop (``benchmarks/bench_loops.py``;
``docs/benchmarks.md``, "One flat loop"). Work a ``trace_fn`` or a reducer reads is done
in either loop.

[`sample_chain`][tfp_sgmcmc.driver.flat.sample_chain] takes the same arguments and runs
the loop every entry point shares ([`run_steps`][tfp_sgmcmc.loop.run_steps]):

* the burn-in as one flat loop of ``num_burnin_steps`` kernel steps, then
* one flat loop of ``(num_results - 1)·(1 + num_steps_between_results) + 1`` kernel steps
  that records a result on every ``(1 + num_steps_between_results)``-th step (with
  thinning, every step writes its state into the slot of the next result, which that
  result's step overwrites, and ``trace_fn`` runs in a ``tf.cond`` on the kept steps only).

Seeds. By default (``seed_rule="fold_in"``) kernel step ``t`` (burn-in included) takes
``stateless_fold_in(seed, t)``, the library's one seed rule (``tfp_sgmcmc.loop``),
so the chain equals the driver's and a tuner arm's with the same kernel and seed. With
``seed_rule="tfp"`` the step seeds follow ``tfp.mcmc.sample_chain``'s: the run seed is
sanitised with the salt ``"mcmc.sample_chain"`` and every step splits it in two
(``step_seed, seed = tfp.random.split_seed(seed)``), the first going to ``one_step``; the
chain is then ``tfp.mcmc.sample_chain``'s, bit for bit under XLA.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.internal.util import (
    check_int,
    check_seed,
    first_nonfinite,
    in_xla_context,
    results_field,
    stateless_seed,
    static_value,
)
from tfp_sgmcmc.loop import SEED_RULES, run_steps

__all__ = ["sample_chain"]

#: The salt ``tfp.mcmc.sample_chain`` sanitises its seed with (the same chain needs it).
_SEED_SALT = "mcmc.sample_chain"


def _count(value: Any, arg_name: str, minimum: int) -> tf.Tensor:
    """An int32 count ``>= minimum``, checked when it is known before the run."""
    static = tf.get_static_value(value) if tf.is_tensor(value) else value
    if static is None:  # known only when the program runs
        if not value.dtype.is_integer or value.shape.rank not in (0, None):
            raise ValueError(f"`{arg_name}` must be a scalar integer, got {value!r}.")
        return tf.cast(value, tf.int32)
    arr = np.asarray(static)
    if isinstance(static, bool) or arr.shape != () or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"`{arg_name}` must be an integer, got {value!r}.")
    if int(arr) < minimum:
        raise ValueError(f"`{arg_name}` must be >= {minimum}, got {int(arr)}.")
    return tf.constant(int(arr), tf.int32)


def _where(index: tuple[int, ...], what: str) -> str:
    """`` for chain (0, 1)``-style text (nothing for a value without chain dimensions)."""
    if not index:
        return ""
    return f" for {what} {index[0] if len(index) == 1 else index}"


def _check_finite_state(state: Any) -> None:
    """``ValueError`` naming ``current_state`` when a value known before the run (eager,
    an array, a constant in the graph) holds NaN or Inf.

    The kernel would run the whole chain on it and return NaN draws.
    """
    leaves = tf.nest.flatten(state)
    for i, leaf in enumerate(leaves):
        value = static_value(leaf)
        if value is None:
            continue
        index = first_nonfinite(value, np.ndim(value))
        if index is not None:
            part = f" (part {i})" if len(leaves) > 1 else ""
            raise ValueError(
                f"`current_state`{part} contains NaN or Inf (first at index {list(index)}): "
                "start the chain from a finite state."
            )


def _check_nonempty_state(state: Any) -> None:
    """``ValueError`` naming ``current_state`` when a part has a zero-size dimension.

    A ``[0, 2]`` state (no chains) or a ``[2, 0]`` one (no parameters) has nothing to
    sample; it used to end in a NumPy reshape error of the start checks.
    """
    leaves = tf.nest.flatten(state)
    for i, leaf in enumerate(leaves):
        shape = leaf.shape
        if shape.rank is not None and any(d == 0 for d in shape.as_list()):
            part = f" (part {i})" if len(leaves) > 1 else ""
            raise ValueError(
                f"`current_state`{part} has shape {shape.as_list()}, with no elements: a "
                "chain needs at least one chain and one parameter. Give a state of shape "
                "chains + event with every dimension >= 1 (e.g. [2, 3] for two chains of "
                "3 parameters, or [3] for one)."
            )


def _checked_trace_fn(trace_fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``trace_fn`` whose value is a nest of numeric or boolean tensors (Python and NumPy
    numbers converted); ``ValueError`` naming ``trace_fn`` otherwise.

    A string, ``None`` or another object in the trace used to end in an
    ``AttributeError`` (``'str' object has no attribute 'dtype'``) where the trace's
    buffers are made. The check is static: it costs nothing in a compiled step.
    """

    def leaf(path: str, x: Any) -> tf.Tensor:
        if x is not None and not isinstance(x, (str, bytes)):
            try:
                t = tf.convert_to_tensor(x)
            except (TypeError, ValueError):
                t = None
            if t is not None and (t.dtype.is_floating or t.dtype.is_integer
                                  or t.dtype.is_complex or t.dtype.is_bool):
                return t
        where = f" at {path}" if path else ""
        raise ValueError(
            f"`trace_fn` must return a tensor or a nest (tuple, list, dict) of numeric or "
            f"boolean tensors, got {type(x).__name__} {x!r:.60}{where}: return values "
            "computed from the state and kernel results (e.g. `lambda s, r: "
            "r.target_log_prob`), or `trace_fn=None` to trace nothing."
        )

    def checked(state: Any, results: Any) -> Any:
        out = trace_fn(state, results)
        if isinstance(out, (str, bytes)) or out is None:
            return leaf("", out)  # raises: a nest of nothing is `()`, not None
        flat = tf.nest.flatten(out)
        nested = tf.nest.is_nested(out)
        leaves = [leaf(f"leaf {i} of the nest" if nested else "", x) for i, x in enumerate(flat)]
        return tf.nest.pack_sequence_as(out, leaves)

    return checked


def _start_values(results: Any) -> tuple[Any, list[Any]]:
    """The kernel's log-density and score at the start (``None``/``[]`` where its results
    have none: TFP's random-walk kernels have no score)."""
    target = results_field(results, "target_log_prob")
    grads = results_field(results, "grads_target_log_prob")
    return target, ([] if grads is None else tf.nest.flatten(grads))


def _check_finite_start(results: Any) -> None:
    """``ValueError`` naming ``current_state`` when the kernel's results at the start hold
    a non-finite log-density or score, read where they are concrete (eager)."""
    target, grads = _start_values(results)
    target_value = static_value(target) if tf.is_tensor(target) else None
    if target_value is not None:
        index = first_nonfinite(target_value, np.ndim(target_value))
        if index is not None:
            shown = target_value[index] if index else target_value
            raise ValueError(
                f"The log-density at `current_state` is {float(shown)}{_where(index, 'chain')}"
                " before any step: the model (log-likelihood or prior) is not finite there, "
                "and every draw would be NaN. Start from a state where it is finite, or fix "
                "the model."
            )
    batch_ndims = 0 if target_value is None else np.ndim(target_value)
    for i, g in enumerate(grads):
        value = static_value(g) if tf.is_tensor(g) else None
        if value is None:
            continue
        index = first_nonfinite(value, min(batch_ndims, np.ndim(value)))
        if index is not None:
            part = f", part {i}" if len(grads) > 1 else ""
            raise ValueError(
                f"The gradient of the log-density at `current_state` is not finite"
                f"{_where(index, 'chain')}{part} before any step, and every draw would be "
                "NaN. Start from a state where it is finite, or fix the model."
            )


def _assert_finite_start(state: Any, results: Any) -> Any:
    """In a graph XLA does not compile: ``state`` behind an assertion that it, the
    log-density and the score at the start are finite (``InvalidArgumentError`` when the
    graph runs; nothing is known about them while it is built).

    XLA drops ``Assert`` ops, so a compiled program gets no check (see ``sample_chain``).
    """
    target, grads = _start_values(results)
    checked = [
        x for x in tf.nest.flatten(state) + [target] + grads
        if tf.is_tensor(x) and x.dtype.is_floating
    ]
    if not checked:
        return state
    finite = tf.reduce_all(
        tf.stack([tf.reduce_all(tf.math.is_finite(x)) for x in checked])
    )
    check = tf.debugging.Assert(
        finite,
        [
            "sample_chain: `current_state`, the log-density or its gradient there is not "
            "finite (NaN or Inf) before any step; every draw would be NaN."
        ],
    )
    with tf.control_dependencies([check]):
        return tf.nest.map_structure(tf.identity, state)


def _warn_if_diverged(all_states: Any, batch_ndims: int, first_step: int, period: int) -> None:
    """Warns (``RuntimeWarning``) naming the first result and chain whose state is not
    finite, when the draws are concrete (eager)."""
    first: tuple[int, ...] | None = None
    bad_results = None  # per result: some part of some chain is not finite
    for leaf in tf.nest.flatten(all_states):
        value = static_value(leaf) if tf.is_tensor(leaf) else None
        if value is None or value.dtype.kind not in "fc" or value.size == 0:
            continue
        index = first_nonfinite(value, min(1 + batch_ndims, value.ndim))
        if index is not None and (first is None or index < first):
            first = index
        bad = ~np.isfinite(value.reshape(value.shape[:1] + (-1,))).all(axis=-1)
        bad_results = bad if bad_results is None else bad_results | bad
    if first is None or bad_results is None:
        return
    result, chain = first[0], first[1:]
    warnings.warn(
        f"sample_chain: the chain diverged: result {result} (the state after kernel step "
        f"{first_step + result * period}) is the first with NaN or Inf"
        f"{_where(chain, 'chain')}; {int(np.sum(bad_results))} of {len(bad_results)} "
        "results are not finite. A smaller step size, or a model finite where the chain "
        "went, avoids it.",
        RuntimeWarning,
        stacklevel=3,  # the caller of sample_chain
    )


def sample_chain(
    num_results: Any,
    current_state: Any,
    previous_kernel_results: Any = None,
    kernel: tfp.mcmc.TransitionKernel | None = None,
    num_burnin_steps: Any = 0,
    num_steps_between_results: Any = 0,
    trace_fn: Callable[[Any, Any], Any] | None = None,
    return_final_kernel_results: bool = False,
    parallel_iterations: int = 10,
    seed: Any = None,
    name: str | None = None,
    seed_rule: str = "fold_in",
) -> Any:
    """Runs ``kernel`` like ``tfp.mcmc.sample_chain``, in one flat loop.

    The arguments and return values are ``tfp.mcmc.sample_chain``'s. Under
    ``tf.function(jit_compile=True)`` it avoids ``tfp.mcmc.sample_chain``'s nested
    per-result loop, across which XLA cannot drop the work whose results nothing reads
    (see the module docstring).

    The step seeds follow ``seed_rule``. The default, ``"fold_in"``, gives kernel step
    ``t`` (burn-in included) the seed ``stateless_fold_in(seed, t)``: the chain is the one
    the driver ([`sample`][tfp_sgmcmc.driver.sample],
    [`ChunkedChain`][tfp_sgmcmc.driver.ChunkedChain]) and a tuner arm run with the same
    kernel, start and seed. ``"tfp"`` is the compatibility rule: the chain is
    ``tfp.mcmc.sample_chain``'s with the same seed, bit for bit compiled with XLA; in a
    graph without XLA it agrees to the last bits of the floats (TensorFlow's graph
    optimiser may group a step's arithmetic differently in a different loop).

    Four differences from ``tfp.mcmc.sample_chain``: the seed rule (above), ``trace_fn``
    defaults to ``None`` (no trace, the default ``tfp.mcmc.sample_chain`` announces for
    its future), a Python ``int`` seed is a fixed stateless seed (see ``seed``), and no
    "kernel is not calibrated" warning is printed (no stochastic-gradient kernel is).

    Result ``r`` (``r = 0, …, num_results - 1``) is the state after
    ``1 + num_burnin_steps + r·(1 + num_steps_between_results)`` kernel steps.

    Non-finite runs are not silent. A ``current_state`` holding NaN or Inf is a
    ``ValueError`` whenever its value is known before the run (eagerly, or a constant or
    captured eager tensor inside ``tf.function``); so is a non-finite log-density or score
    of the kernel's results at the start (``target_log_prob``, ``grads_target_log_prob``),
    read eagerly. Called eagerly, a chain that diverges during the run warns
    (``RuntimeWarning``) naming the first non-finite result, its kernel step and chain.
    The limits: inside a ``tf.function`` the start values are computed by the graph, so
    without XLA they are checked by an assertion that fails when the graph runs
    (``tf.errors.InvalidArgumentError``), and compiled with XLA (which drops assertions)
    they are not checked; nor is a divergence during the run said in a graph. There, trace
    the kernel's ``diverged`` flag (``trace_fn=lambda s, r: r.diverged`` for this
    library's kernels) or test the returned states.

    Args:
      num_results: number of results, an int ``>= 1`` (or a scalar int tensor).
      current_state: the initial state (tensor or list of tensors).
      previous_kernel_results: kernel results at ``current_state``; ``None`` calls
        ``kernel.bootstrap_results(current_state)``. Default value: ``None``.
      kernel: a ``tfp.mcmc.TransitionKernel``.
      num_burnin_steps: steps taken before the first result (not returned), ``>= 0``.
        Default value: ``0``.
      num_steps_between_results: steps discarded between results (thinning), ``>= 0``.
        Default value: ``0``.
      trace_fn: ``(state, kernel_results) -> nest of tensors`` traced at every result;
        ``None`` traces nothing. Default value: ``None``.
      return_final_kernel_results: also return the last kernel results (as a
        ``tfp.mcmc.CheckpointableStatesAndTrace``). Default value: ``False``.
      parallel_iterations: passed to the ``tf.while_loop``s. Default value: ``10``.
      seed: a stateless seed: an int32 pair (e.g. ``tf.constant([0, 42])``, or a list or
        NumPy array of two ints) or a Python int in ``[0, 2**31)``, which maps to the pair
        ``[0, s]``
        (``tfp.mcmc.sample_chain`` instead draws a stateful seed from an int, a new chain
        on every call of a ``tf.function``; see ``docs/conventions.md``, "Seeds").
        ``None`` steps the kernel without seeds, as ``tfp.mcmc.sample_chain`` does.
        Default value: ``None``.
      name: name scope of the ops. Default value: ``None`` (``"sample_chain"``).
      seed_rule: ``"fold_in"`` (step ``t`` takes ``stateless_fold_in(seed, t)``) or
        ``"tfp"`` (``tfp.mcmc.sample_chain``'s split chain). Default value: ``"fold_in"``.

    Returns:
      As ``tfp.mcmc.sample_chain``: the stacked states ``[num_results, ...]`` when
      ``trace_fn`` is ``None`` and ``return_final_kernel_results`` is ``False``; else a
      ``tfp.mcmc.StatesAndTrace`` (``all_states``, ``trace``) or, with
      ``return_final_kernel_results``, a ``tfp.mcmc.CheckpointableStatesAndTrace``
      (``all_states``, ``trace``, ``final_kernel_results``).

    Raises:
      ValueError: ``seed_rule`` is not ``"fold_in"`` or ``"tfp"``; ``seed`` is not
        ``None``, an int in ``[0, 2**31)`` or an int32 pair (a string, a float, a bool,
        three ints, a float pair, a scalar tensor, an int of more than 31 bits, which two
        int32 words would cut to another int's chain); ``kernel`` is not a
        ``tfp.mcmc.TransitionKernel``; ``num_results`` is not an integer ``>= 1``;
        ``num_burnin_steps`` or ``num_steps_between_results`` is not an integer
        ``>= 0``; ``trace_fn`` is neither ``None`` nor callable; ``parallel_iterations``
        is not a positive int; ``current_state`` has a zero-size dimension (no chains
        or no parameters), or it, the log-density or its gradient there is not finite
        (see above for when that is known); ``trace_fn`` returns something other than
        a nest of numeric or boolean tensors (a string, ``None``).

    Warns:
      RuntimeWarning: called eagerly, some results are not finite (the chain diverged).
    """
    if not isinstance(kernel, tfp.mcmc.TransitionKernel):
        raise ValueError(
            f"`kernel` must be a tfp.mcmc.TransitionKernel, got {type(kernel).__name__}."
        )
    if trace_fn is not None and not callable(trace_fn):
        raise ValueError(f"`trace_fn` must be None or callable, got {trace_fn!r}.")
    parallel_iterations = check_int(parallel_iterations, "parallel_iterations", 1)
    seed = check_seed(seed)
    if seed_rule not in SEED_RULES:
        raise ValueError(f"`seed_rule` must be one of {SEED_RULES}, got {seed_rule!r}.")
    with tf.name_scope(name or "sample_chain"):
        num_results = _count(num_results, "num_results", 1)
        num_burnin_steps = _count(num_burnin_steps, "num_burnin_steps", 0)
        between = _count(num_steps_between_results, "num_steps_between_results", 0)
        if seed is not None:
            seed = stateless_seed(seed, salt=_SEED_SALT if seed_rule == "tfp" else None)
        state = tf.nest.map_structure(
            lambda x: tf.convert_to_tensor(x, name="current_state"), current_state
        )
        _check_nonempty_state(state)
        # A NaN start gives all-NaN draws: refused before the run wherever it can be seen.
        _check_finite_state(state)
        results = (
            kernel.bootstrap_results(state)
            if previous_kernel_results is None
            else previous_kernel_results
        )
        if tf.executing_eagerly():
            _check_finite_start(results)
        elif not in_xla_context():
            state = _assert_finite_start(state, results)
        start_target = results_field(results, "target_log_prob")
        chain_ndims = getattr(getattr(start_target, "shape", None), "rank", None) or 0
        no_trace = trace_fn is None
        if not no_trace:
            trace_fn = _checked_trace_fn(trace_fn)
        loop = dict(seed_rule=seed_rule, parallel_iterations=parallel_iterations)

        # Burn-in: a flat loop with nothing recorded (skipped when it is zero).
        if tf.get_static_value(num_burnin_steps) != 0:
            burnt = run_steps(
                kernel, state, results, num_burnin_steps, seed, record=False, **loop
            )
            state, results = burnt.state, burnt.kernel_results
            if seed_rule == "tfp":
                seed = burnt.seed  # the split chain goes on where the burn-in left it

        # The recorded loop: a result on every (1 + between)-th step, the first on step 0.
        period = between + 1
        out = run_steps(
            kernel,
            state,
            results,
            (num_results - 1) * period + 1,
            seed,
            first_step=num_burnin_steps,
            thin=period,
            offset=between,
            num_slots=num_results,
            trace_fn=trace_fn,
            **loop,
        )
        results = out.kernel_results
        all_states, traced = out.draws, out.trace
        if tf.executing_eagerly():  # the draws are concrete: a divergence is said, not left
            _warn_if_diverged(
                all_states, chain_ndims, 1 + int(num_burnin_steps), int(period)
            )
        if return_final_kernel_results:
            return tfp.mcmc.CheckpointableStatesAndTrace(
                all_states=all_states, trace=traced, final_kernel_results=results
            )
        if no_trace:
            return all_states
        return tfp.mcmc.StatesAndTrace(all_states=all_states, trace=traced)
