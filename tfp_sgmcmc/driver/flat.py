"""``sample_chain``: ``tfp.mcmc.sample_chain`` as one flat loop (the same chain, faster under XLA).

``tfp.mcmc.sample_chain`` runs a ``tf.while_loop`` over results and, inside it, a second
``tf.while_loop`` over the steps of each result whose trip count is a tensor
(``1 + num_burnin_steps`` for the first result, ``1 + num_steps_between_results`` for the
rest). Compiled with XLA, a flat loop lets the compiler drop every step's work whose result
nothing reads, and that nested loop does not. With ``trace_fn=None``, that work is the
minibatch log-density and the divergence flag of every step, and for SGHMC also the last
leapfrog step's minibatch and gradient: they only set the momentum the next sample redraws
and the score reported in the kernel results. On a logistic regression with 1% and 0.1%
minibatches, default SGHMC ran 16-18% slower through ``tfp.mcmc.sample_chain`` than in
one flat loop, and SGLD 10-19% slower (``benchmarks/bench_loops.py``;
``docs/benchmarks.md``, "One flat loop"). Work a ``trace_fn`` or a reducer reads is done
in either loop.

[`sample_chain`][tfp_sgmcmc.driver.flat.sample_chain] takes the same arguments and
returns the same chain (same seeds, same steps, same traces; bit for bit under XLA), running

* the burn-in as one flat loop of ``num_burnin_steps`` kernel steps, then
* one flat loop of ``(num_results - 1)·(1 + num_steps_between_results) + 1`` kernel steps
  that records a result on every ``(1 + num_steps_between_results)``-th step (with
  thinning, every step writes its state into the slot of the next result, which that
  result's step overwrites, and ``trace_fn`` runs in a ``tf.cond`` on the kept steps only).

The step seeds follow ``tfp.mcmc.sample_chain``'s: the run seed is sanitised with the salt
``"mcmc.sample_chain"`` and every step splits it in two
(``step_seed, seed = tfp.random.split_seed(seed)``), the first going to ``one_step``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.internal.util import check_int, stateless_seed

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
) -> Any:
    """Runs ``kernel`` like ``tfp.mcmc.sample_chain``, in one flat loop.

    The arguments and return values are ``tfp.mcmc.sample_chain``'s, and so is the chain:
    with the same seed it returns the same states and traces bit for bit. Under
    ``tf.function(jit_compile=True)`` it avoids ``tfp.mcmc.sample_chain``'s nested
    per-result loop, across which XLA cannot drop the work whose results nothing reads
    (see the module docstring).

    Three differences from ``tfp.mcmc.sample_chain``: ``trace_fn`` defaults to ``None``
    (no trace, the default ``tfp.mcmc.sample_chain`` announces for its future), a Python
    ``int`` seed is a fixed stateless seed (see ``seed``), and no "kernel is not
    calibrated" warning is printed (no stochastic-gradient kernel is). Compiled with XLA
    the chain is the same bit for bit; in a graph without XLA it agrees to the last bits
    of the floats (TensorFlow's graph optimiser may group a step's arithmetic differently
    in a different loop).

    Result ``r`` (``r = 0, …, num_results - 1``) is the state after
    ``1 + num_burnin_steps + r·(1 + num_steps_between_results)`` kernel steps.

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
      seed: a stateless seed: an int32 pair (e.g. ``tf.constant([0, 42])``) or a Python
        int ``>= 0``, which maps to a fixed pair (``tfp.mcmc.sample_chain`` instead draws
        a stateful seed from an int, a new chain on every call of a ``tf.function``; see
        ``docs/conventions.md``, "Seeds"). ``None`` steps the kernel without seeds,
        as ``tfp.mcmc.sample_chain`` does. Default value: ``None``.
      name: name scope of the ops. Default value: ``None`` (``"sample_chain"``).

    Returns:
      As ``tfp.mcmc.sample_chain``: the stacked states ``[num_results, ...]`` when
      ``trace_fn`` is ``None`` and ``return_final_kernel_results`` is ``False``; else a
      ``tfp.mcmc.StatesAndTrace`` (``all_states``, ``trace``) or, with
      ``return_final_kernel_results``, a ``tfp.mcmc.CheckpointableStatesAndTrace``
      (``all_states``, ``trace``, ``final_kernel_results``).

    Raises:
      ValueError: ``seed`` is a negative int; ``kernel`` is not a
        ``tfp.mcmc.TransitionKernel``; ``num_results`` is not an integer ``>= 1``;
        ``num_burnin_steps`` or ``num_steps_between_results`` is not an integer
        ``>= 0``; ``trace_fn`` is neither ``None`` nor callable; ``parallel_iterations``
        is not a positive int.
    """
    if not isinstance(kernel, tfp.mcmc.TransitionKernel):
        raise ValueError(
            f"`kernel` must be a tfp.mcmc.TransitionKernel, got {type(kernel).__name__}."
        )
    if trace_fn is not None and not callable(trace_fn):
        raise ValueError(f"`trace_fn` must be None or callable, got {trace_fn!r}.")
    parallel_iterations = check_int(parallel_iterations, "parallel_iterations", 1)
    is_seeded = seed is not None
    with tf.name_scope(name or "sample_chain"):
        num_results = _count(num_results, "num_results", 1)
        num_burnin_steps = _count(num_burnin_steps, "num_burnin_steps", 0)
        between = _count(num_steps_between_results, "num_steps_between_results", 0)
        seed = stateless_seed(seed, salt=_SEED_SALT)
        state = tf.nest.map_structure(
            lambda x: tf.convert_to_tensor(x, name="current_state"), current_state
        )
        results = (
            kernel.bootstrap_results(state)
            if previous_kernel_results is None
            else previous_kernel_results
        )
        no_trace = trace_fn is None
        trace = (lambda s, r: ()) if no_trace else trace_fn

        def step(seed: tf.Tensor, state: Any, results: Any) -> tuple[tf.Tensor, Any, Any]:
            # tfp.mcmc.sample_chain's order: the step takes the first half of the split.
            if is_seeded:
                step_seed, seed = tfp.random.split_seed(seed)
                state, results = kernel.one_step(state, results, seed=step_seed)
            else:
                state, results = kernel.one_step(state, results)
            return seed, state, results

        # Burn-in: a flat loop with nothing recorded (skipped when it is zero).
        def burn(i, seed, state, results):
            return (i + 1, *step(seed, state, results))

        if tf.get_static_value(num_burnin_steps) != 0:
            _, seed, state, results = tf.while_loop(
                lambda i, *_: i < num_burnin_steps,
                burn,
                (tf.constant(0, tf.int32), seed, state, results),
                parallel_iterations=parallel_iterations,
            )

        # The recorded loop: a result on every (1 + between)-th step, the first on step 0.
        probe = (state, trace(state, results))
        arrays = [
            tf.TensorArray(
                leaf.dtype, size=num_results, element_shape=leaf.shape, clear_after_read=False
            )
            for leaf in tf.nest.flatten(probe)
        ]
        thinned = tf.get_static_value(between) != 0
        period = between + 1
        num_steps = (num_results - 1) * period + 1
        # What a discarded step writes in the trace's slots (never kept).
        blank_trace = tf.nest.map_structure(tf.zeros_like, probe[1]) if thinned else ()

        def body(t, seed, state, results, arrays):
            seed, state, results = step(seed, state, results)
            if not thinned:
                slot, traced = t, trace(state, results)
            else:
                # Every step writes slot ceil(t / period): a discarded step fills the next
                # result's slot, which that result's own step overwrites. A state write per
                # step is cheaper than a branch around the TensorArrays, which XLA copies;
                # only trace_fn, which may be costly, runs in a branch.
                slot = (t + between) // period
                traced = (
                    blank_trace
                    if no_trace
                    else tf.cond(
                        tf.equal(t % period, 0),
                        lambda: trace(state, results),
                        lambda: blank_trace,
                    )
                )
            leaves = tf.nest.flatten((state, traced))
            arrays = [a.write(slot, leaf) for a, leaf in zip(arrays, leaves)]
            return t + 1, seed, state, results, arrays

        _, _, state, results, arrays = tf.while_loop(
            lambda t, *_: t < num_steps,
            body,
            (tf.constant(0, tf.int32), seed, state, results, arrays),
            parallel_iterations=parallel_iterations,
        )
        stacked = tf.nest.pack_sequence_as(probe, [a.stack() for a in arrays])
        all_states, traced = stacked
        if return_final_kernel_results:
            return tfp.mcmc.CheckpointableStatesAndTrace(
                all_states=all_states, trace=traced, final_kernel_results=results
            )
        if no_trace:
            return all_states
        return tfp.mcmc.StatesAndTrace(all_states=all_states, trace=traced)
