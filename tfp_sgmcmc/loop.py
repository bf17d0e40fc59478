r"""The one loop every chain runs in, and its seed rule.

Every entry point that runs a kernel for many steps runs
[`run_steps`][tfp_sgmcmc.loop.run_steps]:
[`sample_chain`][tfp_sgmcmc.driver.flat.sample_chain], the long-run driver
([`sample`][tfp_sgmcmc.driver.sample] and [`ChunkedChain`][tfp_sgmcmc.driver.ChunkedChain]),
the tuner's arms ([`ArmRunner`][tfp_sgmcmc.tuning.runner.ArmRunner]) and the final draws
of a tuning result, in the program that ran its best arm
([`TuningResult.sample`][tfp_sgmcmc.tuning.results.TuningResult.sample]), the chains of
[`sample_posterior`][tfp_sgmcmc.automatic.sample_posterior], the sampler of
[`BayesianModel.fit`][tfp_sgmcmc.keras.BayesianModel] (on minibatches the host feeds,
[`FedBatches`][tfp_sgmcmc.data.fed.FedBatches]), and Adam in
[`find_map`][tfp_sgmcmc.estimators.find_map].
It imports nothing of the library but ``tfp_sgmcmc.internal``, so every layer above it
(estimators, kernels, driver, tuner) can import it: the layer order is in
``docs/conventions.md`` ("Layers").

**The seed rule.** Step ``t`` of a chain (``t = 0, 1, …`` counted over the whole chain,
burn-in included) steps the kernel with

```none
step_seed(chain_seed, t) = tf.random.experimental.stateless_fold_in(chain_seed, t, alg="philox")
```

where ``chain_seed`` is the run's ``int32`` pair (a Python int ``0 <= s < 2**31`` maps to
``[0, s]``; a wider int is refused, see [`chain_seed`][tfp_sgmcmc.loop.chain_seed]).
A step's seed depends on the chain seed and the step's index only, so a chain does not
depend on how its steps are split into calls: the same kernel, start and seed give the
same chain through ``sample_chain``, the driver with any ``chunk_size`` (resumed or not),
a tuner arm run for any number of rounds and a tuning result's final draws.

**The compatibility rule** ``seed_rule="tfp"`` is ``tfp.mcmc.sample_chain``'s: the seed
is sanitised with the salt ``"mcmc.sample_chain"`` and every step splits it in two
(``step_seed, seed = tfp.random.split_seed(seed)``), the first going to ``one_step``.
``sample_chain(..., seed_rule="tfp")`` returns ``tfp.mcmc.sample_chain``'s chain bit for
bit under XLA. Its step seeds depend on every step before them, so it serves one call.

**Why one flat loop.** Compiled with XLA, a flat ``tf.while_loop`` lets the compiler drop
every step's work whose result nothing reads (with no trace: the minibatch log-density
and divergence flag of every step, and for SGHMC the last leapfrog step's minibatch and
gradient), which the nested per-result loops of ``tfp.mcmc.sample_chain`` and
``tfp.experimental.mcmc.sample_fold`` prevent. With thinning, every step writes its state
into the slot of the next kept state (which that state's own step overwrites): a write
per step is cheaper than a branch around the buffers, which XLA copies; only
``trace_fn`` and the reducers, which may be costly, run in a branch on the kept steps.

**Compile once.** The chain seed and the first step index enter a compiled program as
tensors that the loop carries as one ``int32`` vector ``[s0, s1, t]`` whose last entry
every step increments. Were the seed or the step index a loop invariant, XLA's constant
analysis could walk back to it from an op that takes a compile-time constant (the start
of a ``tf.slice`` drawn from the step's seed, as in the ``"random_window"`` minibatch),
and every new seed or start would compile a new program.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.internal.util import RNG_ALG, check_seed, int_seed_pair, results_field

__all__ = ["SEED_RULES", "chain_seed", "step_seed", "LoopResult", "run_steps"]

#: The seed rules: ``"fold_in"`` (the default of every entry point) and ``"tfp"``
#: (``tfp.mcmc.sample_chain``'s split chain, for ``sample_chain`` only).
SEED_RULES = ("fold_in", "tfp")


def chain_seed(seed: Any) -> np.ndarray:
    """A chain's ``int32[2]`` stateless seed from an int in ``[0, 2**31)`` or an int32 pair.

    An int ``s`` maps to ``[0, s]`` (the map of every ``seed=int`` of this library,
    ``tfp_sgmcmc.internal.util.int_seed_pair``): every accepted int gives
    its own pair, and an int of more than 31 bits, which two int32 words would cut to
    another int's pair, is refused. A pair (list, tuple, array or tensor of two ints) is
    taken as it is when both lie within int32.

    Raises:
      ValueError: naming ``seed``: an int outside ``[0, 2**31)``, ``None``, or anything
        but an int or a pair of int32 ints.
    """
    if isinstance(seed, (tf.Tensor, tf.Variable)) and tf.executing_eagerly():
        seed = seed.numpy()  # a host value: its range is checked as an array's
    if seed is None or callable(seed):
        raise ValueError(
            f"`seed` must be an int in [0, 2**31) or an int32 pair, got {seed!r}."
        )
    checked = check_seed(seed)
    if isinstance(checked, (int, np.integer)):
        return int_seed_pair(checked)
    return np.asarray(checked).astype(np.int32)


def step_seed(seed: Any, t: Any) -> tf.Tensor:
    """The seed of step ``t`` of the chain with seed ``seed``: ``stateless_fold_in(seed, t)``
    with the Philox generator (the same bits eagerly, in a graph and under XLA)."""
    return tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int32), t, alg=RNG_ALG)


class LoopResult(NamedTuple):
    """What [`run_steps`][tfp_sgmcmc.loop.run_steps] returns (tensors).

    Attributes:
      state: the chain state after the last step run.
      kernel_results: the kernel results there.
      draws: the recorded states, ``[num_slots, ...]`` per part (``None`` unrecorded).
      trace: the ``trace_fn`` values, ``[num_slots, ...]`` per leaf (``()`` without).
      reducer_state: the reducers' states after the last kept step (as given without).
      num_steps: ``int32``, the steps run (fewer than asked when the chain diverged and
        ``stop_on_divergence``).
      diverged: ``bool``, some step's kernel results flagged ``diverged`` (any chain):
        the loop stopped there with ``stop_on_divergence``, or ran on with
        ``track_divergence``; ``False`` with neither.
      seed: the carried seed after the loop (the ``"tfp"`` rule's remainder; the chain
        seed under ``"fold_in"``; ``None`` unseeded).
    """

    state: Any
    kernel_results: Any
    draws: Any
    trace: Any
    reducer_state: Any
    num_steps: tf.Tensor
    diverged: tf.Tensor
    seed: Any


def _reduce(reducer: Any, state: Any, results: Any, reducer_state: Any) -> Any:
    if isinstance(reducer, Mapping):
        return {k: r.one_step(state, reducer_state[k], results) for k, r in reducer.items()}
    return reducer.one_step(state, reducer_state, results)


def run_steps(
    kernel: Any,
    state: Any,
    kernel_results: Any,
    num_steps: Any,
    seed: Any,
    *,
    first_step: Any = 0,
    seed_rule: str = "fold_in",
    record: bool = True,
    thin: Any = 1,
    offset: Any = 0,
    num_slots: Any = None,
    trace_fn: Callable[[Any, Any], Any] | None = None,
    reducer: Any = None,
    reducer_state: Any = None,
    stop_on_divergence: bool = False,
    track_divergence: bool = False,
    parallel_iterations: int = 10,
) -> LoopResult:
    """Runs ``num_steps`` steps of ``kernel`` in one flat ``tf.while_loop``.

    Step ``i`` of the loop (``i = 0, …, num_steps - 1``) is step ``first_step + i`` of
    the chain; under the ``"fold_in"`` rule it steps the kernel with
    [`step_seed`][tfp_sgmcmc.loop.step_seed]``(seed, first_step + i)``. When
    ``record``, the state after loop step ``i`` is written to slot
    ``(offset + i) // thin``, so slot ``j`` ends up holding the state after loop step
    ``(j + 1)·thin - offset - 1``: with ``offset = 0`` every ``thin``-th state
    (the driver's rule), with ``offset = thin - 1`` the first state and every
    ``thin``-th after it (``tfp.mcmc.sample_chain``'s). ``trace_fn`` and ``reducer``
    run on those kept steps only.

    Args:
      kernel: a ``tfp.mcmc.TransitionKernel``.
      state: the chain state before the first step.
      kernel_results: the kernel results at ``state``.
      num_steps: steps to run (an int or a scalar ``int32`` tensor).
      seed: the chain seed (``int32[2]``) under ``"fold_in"``; the carried seed (already
        sanitised) under ``"tfp"``; ``None`` steps the kernel without seeds.
      first_step: the chain's index of the first step (``"fold_in"`` only). Default
        value: ``0``.
      seed_rule: ``"fold_in"`` or ``"tfp"`` (see the module docstring). Default value:
        ``"fold_in"``.
      record: record the kept states. Default value: ``True``.
      thin: keep every ``thin``-th state. Default value: ``1``.
      offset: the phase of the kept states (see above), ``0 <= offset < thin``.
        Default value: ``0``.
      num_slots: recorded slots; must be static under XLA. Default value: ``None``
        (``(offset + num_steps - 1) // thin + 1``, from a static ``num_steps``).
      trace_fn: ``(state, kernel_results) -> nest`` recorded at the kept steps.
        Default value: ``None``.
      reducer: a ``tfp.experimental.mcmc.Reducer`` or a dict of them, run on the kept
        states. Default value: ``None``.
      reducer_state: its state before the first step. Default value: ``None``.
      stop_on_divergence: stop after the first step whose kernel results flag
        ``diverged`` (any chain). Default value: ``False``.
      track_divergence: run every step, and say in ``LoopResult.diverged`` whether
        any flagged ``diverged`` (a flag a thinned trace would miss between its kept
        steps). Default value: ``False``.
      parallel_iterations: passed to ``tf.while_loop``. Default value: ``10``.

    Returns:
      A [`LoopResult`][tfp_sgmcmc.loop.LoopResult].

    Raises:
      ValueError: an unknown ``seed_rule``.
    """
    if seed_rule not in SEED_RULES:
        raise ValueError(f"`seed_rule` must be one of {SEED_RULES}, got {seed_rule!r}.")
    seeded = seed is not None
    fold = seeded and seed_rule == "fold_in"
    if fold:
        # [s0, s1, t]: the step index travels with the seed (see "Compile once").
        carry_seed = tf.concat(
            [tf.cast(seed, tf.int32), tf.reshape(tf.cast(first_step, tf.int32), [1])], axis=0
        )
        advance = tf.constant([0, 0, 1], tf.int32)
    elif seeded:
        carry_seed = tf.convert_to_tensor(seed, tf.int32)
    else:
        carry_seed = tf.zeros([], tf.int32)  # a placeholder the loop carries unchanged
    num_steps = tf.cast(num_steps, tf.int32)
    trace = (lambda s, r: ()) if trace_fn is None else trace_fn
    thinned = tf.get_static_value(thin) != 1
    has_reducer = reducer is not None

    def one_step(carry, state, results):
        if fold:
            s = step_seed(carry[:2], carry[2])
            return carry + advance, *kernel.one_step(state, results, seed=s)
        if seeded:  # tfp.mcmc.sample_chain's order: the step takes the first half
            s, carry = tfp.random.split_seed(carry)
            return carry, *kernel.one_step(state, results, seed=s)
        return carry, *kernel.one_step(state, results)

    if record:
        probe = (state, trace(state, kernel_results))
        if num_slots is None:
            n = tf.get_static_value(num_steps)
            if n is None:
                raise ValueError("`num_slots` is needed when `num_steps` is not static.")
            num_slots = (int(tf.get_static_value(offset)) + int(n) - 1) // int(
                tf.get_static_value(thin)
            ) + 1
        arrays = [
            tf.TensorArray(
                leaf.dtype, size=num_slots, element_shape=leaf.shape, clear_after_read=False
            )
            for leaf in tf.nest.flatten(probe)
        ]

        # What a step that is not kept writes in the trace's slots (never kept). Built in
        # the step (not captured from outside the loop): XLA then names its constants alike
        # in every call's program.
        def blank_trace():
            return tf.nest.map_structure(lambda x: tf.zeros(tf.shape(x), x.dtype), probe[1])
    else:
        arrays = []
    rstate = reducer_state if has_reducer else ()

    def body(i, carry, state, results, arrays, rstate, diverged):
        carry, state, results = one_step(carry, state, results)
        if record or has_reducer:
            kept = tf.equal((offset + i + 1) % thin, 0) if thinned else None
        if record:
            slot = (offset + i) // thin
            if not thinned:
                traced = trace(state, results)
            elif trace_fn is None:
                traced = ()
            else:
                traced = tf.cond(kept, lambda: trace(state, results), blank_trace)
            leaves = tf.nest.flatten((state, traced))
            arrays = [a.write(slot, leaf) for a, leaf in zip(arrays, leaves)]
        if has_reducer:
            if thinned:
                rstate = tf.cond(
                    kept, lambda: _reduce(reducer, state, results, rstate), lambda: rstate
                )
            else:
                rstate = _reduce(reducer, state, results, rstate)
        if stop_on_divergence or track_divergence:
            flagged = tf.reduce_any(results_field(results, "diverged"))
            diverged = tf.logical_or(diverged, flagged) if track_divergence else flagged
        return i + 1, carry, state, results, arrays, rstate, diverged

    def cond(i, *rest):
        if stop_on_divergence:
            return tf.logical_and(i < num_steps, tf.logical_not(rest[-1]))
        return i < num_steps

    i, carry_seed, state, results, arrays, rstate, diverged = tf.while_loop(
        cond,
        body,
        (
            tf.constant(0, tf.int32),
            carry_seed,
            state,
            kernel_results,
            arrays,
            rstate,
            tf.constant(False),
        ),
        parallel_iterations=parallel_iterations,
    )
    draws, traced = None, ()
    if record:
        draws, traced = tf.nest.pack_sequence_as(probe, [a.stack() for a in arrays])
    if fold:
        out_seed = carry_seed[:2]
    else:
        out_seed = carry_seed if seeded else None
    return LoopResult(
        state=state,
        kernel_results=results,
        draws=draws,
        trace=traced,
        reducer_state=rstate if has_reducer else reducer_state,
        num_steps=i,
        diverged=diverged,
        seed=out_seed,
    )
