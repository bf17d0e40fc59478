"""Posteriors written the TFP way: a ``tfd.JointDistribution*`` prior and a likelihood.

A TFP model is a prior ``p(θ)`` given as a ``tfd.JointDistribution`` (Named,
Sequential or Coroutine, auto-batched or not) and a per-example likelihood
``p(y_i | θ, x_i)`` given as a function returning a ``tfd.Distribution``.
`JointPosterior` turns the pair plus the data into everything the
samplers, the tuner, the driver and the diagnostics need:

```none
log π(θ) = log p(θ) + Σ_{i=1..N} log p(y_i | θ, x_i)                 (model space)
z = f^{-1}(θ),  f = prior.experimental_default_event_space_bijector()
log π_z(z) = log π(f(z)) + log |det J_f(z)|                        (sampler space)
```

* `JointPosterior.estimator` — the minibatch estimate of ``log π_z``
  and its score (a `tfp_sgmcmc.estimators.TransformedEstimator`
  around a `tfp_sgmcmc.estimators.MinibatchEstimator`): give it to any
  kernel, to MAMBA or to the driver; the state is the list of unconstrained
  parts, in the prior's flattened order (`JointPosterior.names`);
* `JointPosterior.constrained_estimator` and `JointPosterior.bijector`
  — the same model in the model space, for
  `tfp_sgmcmc.kernels.TransformedTransitionKernel` (same chain);
* `JointPosterior.control_variates` — SGLD-CV & co. on the same model;
* `JointPosterior.initial_state` — a prior draw or the MAP;
* `JointPosterior.score_fn` / `JointPosterior.target_log_prob_fn`
  — full-data scores for KSD/FSSD, and the full-data log-density for TFP's
  exact kernels (NUTS, HMC, MALA);
* `JointPosterior.constrain`, `JointPosterior.to_arviz`,
  `JointPosterior.model_spec` — named, constrained draws for ArviZ, and
  the ``ModelSpec`` a ``tfp-sgmcmc --model`` file returns.

See ``docs/tfp_models.md``.

#### References

[1]: Dan Piponi, Dave Moore and Joshua V. Dillon. Joint distributions for
     TensorFlow Probability. _arXiv:2001.11819_, 2020.
[2]: Max Welling and Yee Whye Teh. Bayesian learning via stochastic gradient
     Langevin dynamics. In _ICML_, 2011 (the ``N/n``-scaled minibatch estimate).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc.data import DataSource
from tfp_sgmcmc.estimators.base import GradientEstimator
from tfp_sgmcmc.estimators.control_variates import ControlVariateEstimator
from tfp_sgmcmc.estimators.laplace import PerExampleEstimator as _PerExample
from tfp_sgmcmc.estimators.map import find_map
from tfp_sgmcmc.estimators.minibatch import MinibatchEstimator
from tfp_sgmcmc.estimators.transformed import TransformedEstimator
from tfp_sgmcmc.internal.util import AttributeView, as_parts, check_int

tfb = tfp.bijectors
tfd = tfp.distributions

__all__ = ["JointPosterior"]

LikelihoodFn = Callable[[Any, Any], tfd.Distribution]


def _part_names(prior: tfd.JointDistribution) -> list[str]:
    """Names of the prior's parts in ``tf.nest.flatten`` order (sorted keys for Named)."""
    structure = prior.dtype
    if isinstance(structure, Mapping):
        return [str(k) for k in tf.nest.flatten({k: k for k in structure})]
    if hasattr(structure, "_fields"):  # Coroutine: a StructTuple
        return [str(f) for f in structure._fields]
    names = list(prior._flat_resolve_names())  # Sequential: TFP's own argument-name resolution
    return [str(n) for n in names]


def _part_distributions(prior: tfd.JointDistribution) -> list[Any] | None:
    """The prior's part distributions in flattened order (``None`` if it cannot say)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TFP's note on stateless vectorised sampling
            dists, _ = prior.sample_distributions(seed=(7, 11))
        return list(tf.nest.flatten(dists))
    except Exception:  # noqa: BLE001 - only the message's detail depends on it
        return None


#: What to change for a discrete parameter.
_DISCRETE_FIX = (
    "marginalise it out of the model (sum the likelihood over its values), or replace it "
    "by a continuous relaxation (e.g. tfd.RelaxedBernoulli, tfd.RelaxedOneHotCategorical)"
)


def _check_prior_parts(prior: tfd.JointDistribution, names: list[str], bijector: Any) -> None:
    """``ValueError`` naming ``prior`` for a part no gradient sampler can move.

    An integer or boolean part (``tfd.Bernoulli``, ``tfd.Categorical``) is discrete. A part
    without an event-space bijector (``experimental_default_event_space_bijector()`` is
    ``None``: ``tfd.Poisson``, ``tfd.Binomial``, which are discrete in a float dtype, or a
    continuous law whose support TFP does not map, ``tfd.MixtureSameFamily``) has no
    unconstrained space to sample in unless ``bijector`` gives one. Both used to end in
    TensorFlow or TFP errors (``'NoneType' object has no attribute
    'inverse_event_ndims'``).
    """
    dtypes = [tf.as_dtype(d) for d in tf.nest.flatten(prior.dtype)]
    discrete = [i for i, d in enumerate(dtypes) if not (d.is_floating or d.is_complex)]
    dists = None
    if discrete:
        dists = _part_distributions(prior)
        listed = ", ".join(
            f"{names[i]!r} ({type(dists[i]).__name__ + ', ' if dists else ''}"
            f"dtype {dtypes[i].name})"
            for i in discrete
        )
        raise ValueError(
            f"`prior` has discrete parts: {listed}. A gradient sampler moves continuous "
            f"parameters only: {_DISCRETE_FIX}."
        )
    if bijector is not None:
        return
    try:
        found = prior.experimental_default_event_space_bijector()
        problem = None if found is not None else "returned None"
    except Exception:  # noqa: BLE001 - TFP fails in several ways on a missing part
        found, problem = None, "failed"
    if found is not None:
        return
    dists = _part_distributions(prior)
    parts = []
    for i, d in enumerate(dists or []):
        try:
            ok = d.experimental_default_event_space_bijector() is not None
        except Exception:  # noqa: BLE001
            ok = False
        if not ok:
            parts.append(f"{names[i]!r} ({type(d).__name__})")
    which = f" for {', '.join(parts)}" if parts else ""
    raise ValueError(
        f"`prior` has no event-space bijector{which}: "
        f"`experimental_default_event_space_bijector()` {problem}, so there is no "
        "unconstrained space to sample in. A discrete part (tfd.Poisson, tfd.Binomial are "
        f"discrete in a float dtype): {_DISCRETE_FIX}. "
        "A continuous part whose support TFP does not map (e.g. a mixture): pass "
        "`bijector=`, a bijector with the prior's structure (e.g. a tfb.JointMap with "
        "tfb.Identity() for a real-valued part)."
    )


def _float_dtype(prior: tfd.JointDistribution) -> tf.DType | None:
    """The prior's one floating dtype (``None`` when its parts mix float dtypes)."""
    floats = {tf.as_dtype(d) for d in tf.nest.flatten(prior.dtype)}
    floats = {d for d in floats if d.is_floating}
    return floats.pop() if len(floats) == 1 else None


def _cast_data(data: Any, dtype: tf.DType | None) -> Any:
    """``data`` with its floating arrays cast to the prior's float ``dtype``.

    NumPy's float64 data with TFP's float32 priors met in ``log_prob`` as TensorFlow's
    dtype error. They are cast as ``KerasPosterior`` casts features to its weights'
    dtype; integer arrays (counts, labels) are kept. A ``DataSource`` holds its arrays
    already converted: one of another float dtype is a ``ValueError`` naming ``data``.
    """
    if dtype is None:
        return data
    if isinstance(data, DataSource):
        have = data.float_dtype
        if have is not None and have != dtype:
            raise ValueError(
                f"`data` holds {have.name} arrays and the prior is {dtype.name}: build the "
                f"data source from arrays cast to {dtype.name} (or give the arrays "
                f"themselves, which are cast), or write the prior in {have.name}."
            )
        return data

    def cast(x: Any) -> Any:
        if tf.is_tensor(x):
            return tf.cast(x, dtype) if x.dtype.is_floating and x.dtype != dtype else x
        if x is None or isinstance(x, (str, bytes)):
            return x  # not an array: InMemoryData names it
        arr = np.asarray(x)
        if arr.dtype.kind == "f" and arr.dtype != dtype.as_numpy_dtype:
            return arr.astype(dtype.as_numpy_dtype)
        return x

    return tf.nest.map_structure(cast, data)


_TWINS = {
    tfd.JointDistributionNamedAutoBatched: tfd.JointDistributionNamed,
    tfd.JointDistributionSequentialAutoBatched: tfd.JointDistributionSequential,
    tfd.JointDistributionCoroutineAutoBatched: tfd.JointDistributionCoroutine,
}


def _unbatched_twin(prior: tfd.JointDistribution) -> tfd.JointDistribution:
    """The prior written without auto-batching, where it is the same law; else the prior.

    An auto-batched prior vectorises its ``log_prob`` and its event-space bijector over
    chain dimensions at run time, and under XLA that makes the state a compile-time
    constant: a compiled chain would be compiled again for every new state, step size
    or seed. The same model without auto-batching broadcasts over the chain dimensions
    on its own. It is used when its parts have the same event ranks and it gives a
    prior draw with two chains the same log-density and unconstrained values.
    """
    twin_type = _TWINS.get(type(prior))
    if twin_type is None:
        return prior
    try:
        twin = twin_type(prior.model)
        own_b = prior.experimental_default_event_space_bijector()
        twin_b = twin.experimental_default_event_space_bijector()
        # The same event ranks (a vector of independent scalars is one event of the
        # auto-batched prior but a batch of the twin's).
        ranks_own = [int(r) for r in tf.nest.flatten(own_b.forward_min_event_ndims)]
        ranks_twin = [int(r) for r in tf.nest.flatten(twin_b.forward_min_event_ndims)]
        if ranks_own != ranks_twin:
            return prior
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TFP's note on stateless vectorised sampling
            draw = prior.sample(2, seed=(7, 11))
        pairs = list(
            zip(
                tf.nest.flatten(own_b.inverse(draw)) + [prior.log_prob(draw)],
                tf.nest.flatten(twin_b.inverse(draw)) + [twin.log_prob(draw)],
            )
        )
        same = all(
            a.shape == b.shape and np.allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
            for a, b in pairs
        )
    except Exception:  # noqa: BLE001 - any failure means: keep the prior as given
        return prior
    return twin if same else prior


class _JointEstimator(TransformedEstimator):
    """A `TransformedEstimator` whose states must have one part per prior part."""

    def __init__(
        self,
        inner: GradientEstimator,
        bijector: tfb.Bijector,
        names: Sequence[str],
        include_log_det_jacobian: bool = True,
        event_ranks: Sequence[int] | None = None,
    ) -> None:
        super().__init__(inner, bijector, include_log_det_jacobian=include_log_det_jacobian)
        self._names = list(names)
        # Each unconstrained part's event rank: what follows the chain dimensions.
        self._event_ranks = None if event_ranks is None else list(event_ranks)

    def _around(self, inner: GradientEstimator) -> _JointEstimator:
        return _JointEstimator(
            inner, self._bijector, self._names, include_log_det_jacobian=self._include_ldj,
            event_ranks=self._event_ranks,
        )

    def validate_state(self, state: Any, arg_name: str = "init_state") -> None:
        if isinstance(state, Mapping):
            raise ValueError(
                f"`{arg_name}` must be a list of {len(self._names)} unconstrained parts in the "
                f"order {self._names}, got a dict (use `JointPosterior.unconstrain`)."
            )
        parts = as_parts(state)
        if len(parts) != len(self._names):
            raise ValueError(
                f"`{arg_name}` must have {len(self._names)} parts, one per prior part "
                f"{self._names}, got {len(parts)}."
            )
        self._check_chain_shapes(parts, arg_name)
        super().validate_state(parts, arg_name)

    def _check_chain_shapes(self, parts: list[tf.Tensor], arg_name: str) -> None:
        """Every part must lead with the same chain dimensions before its event."""
        if self._event_ranks is None:
            return
        chains: dict[str, list[int | None]] = {}
        for name, p, rank in zip(self._names, parts, self._event_ranks):
            shape = tf.TensorShape(p.shape if hasattr(p, "shape") else np.shape(p))
            if shape.rank is None:
                continue
            if shape.rank < rank:
                raise ValueError(
                    f"`{arg_name}`: part {name!r} has shape {shape.as_list()}, fewer "
                    f"dimensions than its unconstrained event rank {rank}."
                )
            chains[name] = shape.as_list()[: shape.rank - rank]
        if len({tuple(c) for c in chains.values()}) > 1:
            listed = ", ".join(f"{k}: {v}" for k, v in chains.items())
            raise ValueError(
                f"`{arg_name}`: the parts must share their chain dimensions (the dimensions "
                f"before each part's event), got {listed}."
            )


class JointPosterior:
    """The posterior of a ``tfd.JointDistribution`` prior and a per-example likelihood.

    Args:
      prior: a ``tfd.JointDistribution`` (``Named``, ``Sequential``,
        ``Coroutine``, or their ``AutoBatched`` variants) over the parameters.
        Its ``log_prob`` must return one value per chain for values with a
        leading chain dimension (true of the auto-batched variants, and of the
        others when every part's event is declared, e.g. with
        ``tfd.Sample``/``tfd.Independent``).
      likelihood_fn: ``(params, batch) -> tfd.Distribution`` over the observed
        values of the batch: ``params`` has the prior's structure (dict,
        namedtuple or list) with leading chain dimensions, ``batch`` is a
        minibatch of ``data`` (leading dimension ``n``); the distribution's
        ``log_prob(observed)`` must have shape ``chains + [n]`` (e.g.
        ``tfd.Normal(params["mu"][..., None], params["sigma"][..., None])``).
      data: the ``N`` examples: an array (the observations), a tuple/list/dict
        of arrays with a common leading dimension, or a
        `tfp_sgmcmc.data.DataSource`. Floating arrays are cast to the prior's
        float dtype (float64 NumPy data for a float32 prior); integer arrays are
        kept.
      batch_size: ``n``, the minibatch size.
      observed: which part of a batch the likelihood scores: a key/index into
        the batch, or a callable ``batch -> observed``. Default value: ``None``
        (the batch itself for a single array, its last element for a tuple or
        list; required for a dict).
      bijector: a ``tfb.Bijector`` from the unconstrained space to the prior's
        support, with the prior's structure (e.g. a ``tfb.JointMap`` of a dict
        of bijectors for a ``Named`` prior). Default value: ``None``
        (``prior.experimental_default_event_space_bijector()``).
      full_data_chunk_size: rows per chunk of full-data sums. Default value:
        ``100_000``.

    Raises:
      TypeError: ``prior`` is not a JointDistribution or ``likelihood_fn`` is
        not callable.
      ValueError: ``observed`` is missing for dict data, or is a key (index)
        the dict (tuple/list) data does not have; ``bijector`` is not a
        ``tfb.Bijector`` with the prior's structure; ``prior`` has a discrete
        part (an integer dtype, or no event-space bijector without
        ``bijector``); ``data`` is a data source of another float dtype than
        the prior's; ``likelihood_fn``'s ``log_prob``, probed once on two prior
        draws and a batch of in-memory data, is not of shape ``chains + [n]``
        (a probe that fails inside TensorFlow is left to the first estimate,
        which names the failure).

    #### Examples

    ```python
    import numpy as np, tensorflow as tf, tensorflow_probability as tfp
    import tfp_sgmcmc as sg
    from tfp_sgmcmc.joint import JointPosterior

    tfd = tfp.distributions
    y = np.random.default_rng(0).normal(1.0, 2.0, 1_000).astype("float32")
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(mu=tfd.Normal(0., 10.), sigma=tfd.HalfNormal(5.)))
    lik = lambda p, y: tfd.Normal(p["mu"][..., None], p["sigma"][..., None])
    post = JointPosterior(prior, lik, y, batch_size=100)
    kernel = sg.SGLD(post.estimator, step_size=1e-4)
    z = tfp.mcmc.sample_chain(100, post.initial_state(4, seed=1), kernel=kernel,
                              trace_fn=None, seed=(1, 2))
    draws = post.constrain(z)          # {"mu": ..., "sigma": ...}, sigma > 0
    ```
    """

    def __init__(
        self,
        prior: tfd.JointDistribution,
        likelihood_fn: LikelihoodFn,
        data: Any,
        batch_size: int,
        observed: Any = None,
        bijector: tfb.Bijector | None = None,
        full_data_chunk_size: int = 100_000,
    ) -> None:
        if not isinstance(prior, tfd.JointDistribution):
            raise TypeError(
                f"`prior` must be a tfd.JointDistribution*, got {type(prior).__name__}."
            )
        if not callable(likelihood_fn):
            raise TypeError("`likelihood_fn` must be callable (params, batch) -> tfd.Distribution.")
        self._prior = prior
        self._names = _part_names(prior)
        # Parts no gradient sampler can move: named here, not deep inside TFP.
        _check_prior_parts(prior, self._names, bijector)
        data = _cast_data(data, _float_dtype(prior))
        # The same law, evaluated without run-time vectorisation where possible.
        self._fast_prior = _unbatched_twin(prior)
        self._likelihood_fn = likelihood_fn
        self._observed = self._resolve_observed(observed, data)
        n = len(self._names)
        self._structure = prior.dtype
        tokens = tf.nest.pack_sequence_as(self._structure, list(range(n)))
        if bijector is None:
            event_space = self._fast_prior.experimental_default_event_space_bijector()
        else:
            event_space = self._check_bijector(bijector, self._structure)
        # Our kernels carry a list of parts; the prior's bijector acts on its own
        # structure (dict, StructTuple, list): restructure on both sides.
        self._bijector = tfb.Chain(
            [
                tfb.Restructure(list(range(n)), tokens),
                event_space,
                tfb.Restructure(tokens, list(range(n))),
            ]
        )
        self._constrained = MinibatchEstimator(
            self._log_likelihood,
            data,
            batch_size,
            log_prior_fn=self.log_prior,
            full_data_chunk_size=full_data_chunk_size,
        )
        try:
            unconstrained_events = self._bijector.inverse_event_shape(
                [tf.TensorShape(e) for e in tf.nest.flatten(prior.event_shape)]
            )
            ranks = [tf.TensorShape(e).rank for e in unconstrained_events]
        except (TypeError, ValueError, NotImplementedError):
            ranks = [None]
        # Event ranks not known before the run: states are not checked.
        self._event_ranks = None if None in ranks else ranks
        self._estimator = _JointEstimator(
            self._constrained, self._bijector, self._names, event_ranks=self._event_ranks
        )
        self._probe_likelihood()

    def _probe_likelihood(self) -> None:
        """``ValueError`` naming ``likelihood_fn`` when its ``log_prob`` is not one value per
        chain and example: shape ``chains + [n]``, probed once on ``c`` prior draws (2, or
        3 when ``n = 2``) and the first ``n`` rows of in-memory data.

        A scalar (the batch summed), ``[c]`` (the examples summed), ``[n]`` (the chain
        dimension ignored: ``params["mu"][0]``) or ``[c, n, 1]`` (an extra axis) used to
        run, or to fail deep in the step. A probe that fails inside TensorFlow says
        nothing here (a likelihood written for one chain, say): the first estimate names
        such failures with the state that caused them.
        """
        data = self._constrained.data
        arrays = getattr(data, "arrays", None)
        if arrays is None:
            return  # a stream: its rows are not read before the run
        n = self._constrained.batch_size
        c = 3 if n == 2 else 2
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # TFP's note on stateless vectorised sampling
                # The unbatched twin where there is one: the same law, drawn faster.
                draw = tf.nest.flatten(self._fast_prior.sample(c, seed=(7, 11)))
            rows = tf.nest.map_structure(lambda t: t[:n], arrays)
            ll = self._log_likelihood(draw, rows)
        except TypeError as e:
            if str(e).startswith("`likelihood_fn`"):
                raise ValueError(str(e)) from None
            return
        except Exception:  # noqa: BLE001 - no conclusion (see the docstring)
            return
        shape = tf.TensorShape(getattr(ll, "shape", None))
        if shape.rank is None or shape.as_list() == [c, n]:
            return
        got = shape.as_list()
        if got == []:
            why = "a scalar: the examples (and chains) summed"
        elif got == [n]:
            why = (
                "no chain dimension: the parameters' chain dimension is ignored (an index "
                "such as `params[...][0]`?) or lost (a reduction over all axes?)"
            )
        elif got == [c]:
            why = (
                "one value per chain: the examples summed (a tfd.Independent or "
                "tfd.Sample over the examples?)"
            )
        elif got[:2] == [c, n]:
            why = "extra trailing axes: the distribution's batch shape has more than [n]"
        else:
            why = "neither chains nor examples where they belong"
        raise ValueError(
            f"`likelihood_fn`'s distribution must give `log_prob(observed)` of shape "
            f"chains + [n]: on {c} chains of prior draws and a batch of n = {n} rows it "
            f"gave shape {got}, {why}, where [{c}, {n}] was due. Give every parameter a "
            "trailing axis that broadcasts against the examples and keep its leading "
            "(chain) axes, e.g. `tfd.Normal(params['mu'][..., None], "
            "params['sigma'][..., None])` for scalar parameters, and a distribution with "
            "one value per example (no tfd.Independent over the examples)."
        )

    @staticmethod
    def _check_bijector(bijector: Any, structure: Any) -> tfb.Bijector:
        if not isinstance(bijector, tfb.Bijector):
            raise ValueError(
                "`bijector` must be a tfb.Bijector with the prior's structure (e.g. a "
                f"tfb.JointMap), got {type(bijector).__name__}."
            )
        try:
            tf.nest.assert_same_structure(
                bijector.forward_min_event_ndims, structure, check_types=False
            )
        except (TypeError, ValueError):
            raise ValueError(
                "`bijector` must act on the prior's structure "
                f"{tf.nest.map_structure(lambda _: '.', structure)}, but its "
                f"forward_min_event_ndims is {bijector.forward_min_event_ndims}."
            ) from None
        return bijector

    @staticmethod
    def _resolve_observed(observed: Any, data: Any) -> Callable[[Any], Any]:
        if callable(observed):
            return observed
        if observed is not None:
            if isinstance(data, Mapping) and observed not in data:
                raise ValueError(
                    f"`observed` must be a key of the data {sorted(map(str, data))}, "
                    f"got {observed!r}."
                )
            if isinstance(data, (tuple, list)) and not (
                isinstance(observed, (int, np.integer))
                and not isinstance(observed, bool)
                and -len(data) <= observed < len(data)
            ):
                raise ValueError(
                    f"`observed` must be an index into the {len(data)} data arrays, "
                    f"got {observed!r}."
                )
            return lambda batch: batch[observed]
        if isinstance(data, Mapping):
            raise ValueError(
                "`observed` must name the observed key of dict data (or be a callable "
                "batch -> observed values)."
            )
        if isinstance(data, (tuple, list)):
            return lambda batch: batch[-1]
        if isinstance(data, DataSource):
            return lambda batch: batch[-1] if isinstance(batch, (tuple, list)) else batch
        return lambda batch: batch

    # -- the model ---------------------------------------------------------- #
    prior = AttributeView[tfd.JointDistribution]("_prior")

    @property
    def names(self) -> list[str]:
        """Names of the state parts, in the order of the state list."""
        return list(self._names)

    bijector = AttributeView[tfb.Bijector]("_bijector")
    """``f``: list of unconstrained parts -> list of constrained parts."""

    estimator = AttributeView[TransformedEstimator]("_estimator")
    """Minibatch estimate of ``log π_z`` and its score (the sampler's space)."""

    constrained_estimator = AttributeView[MinibatchEstimator]("_constrained")
    """Minibatch estimate of ``log π(θ)`` in the model's space (a list of parts)."""

    num_examples = AttributeView[int]("_constrained.num_examples")

    def structure(self, parts: Sequence[Any]) -> Any:
        """A list of parts in the prior's structure (dict, namedtuple or list)."""
        return tf.nest.pack_sequence_as(self._structure, list(parts))

    def _check_num_parts(self, parts: Sequence[Any], arg_name: str) -> None:
        if len(parts) != len(self._names):
            raise ValueError(
                f"`{arg_name}` must have {len(self._names)} parts, one per prior part "
                f"{self._names}, got {len(parts)}."
            )

    def log_prior(self, parts: Any) -> tf.Tensor:
        """``log p(θ)`` for a list of constrained parts."""
        return self._fast_prior.log_prob(self.structure(as_parts(parts)))

    def _log_likelihood(self, parts: Any, batch: Any) -> tf.Tensor:
        dist = self._likelihood_fn(self.structure(as_parts(parts)), batch)
        if not isinstance(dist, tfd.Distribution):
            raise TypeError(
                f"`likelihood_fn` must return a tfd.Distribution, got {type(dist).__name__}."
            )
        return dist.log_prob(self._observed(batch))

    def with_batch_size(self, batch_size: int) -> TransformedEstimator:
        """`estimator` with another minibatch size (what MAMBA's batch arms use)."""
        return self._estimator.with_batch_size(batch_size)

    def control_variates(
        self, centre: Any = None, batch_size: int | None = None
    ) -> TransformedEstimator:
        """SGLD-CV & co.: control variates anchored at ``centre``, seen through ``f``.

        Args:
          centre: unconstrained centre (list of parts, no chain dims). Default
            value: ``None`` (the MAP, `find_map`).
          batch_size: minibatch size. Default value: ``None`` (the posterior's).
        """
        if centre is None:
            centre = self.find_map()
        base = self._constrained
        if batch_size is not None:
            base = base.with_batch_size(batch_size)
        centre = list(as_parts(centre))
        self._check_num_parts(centre, "centre")
        theta = self._estimator.forward(centre)
        return _JointEstimator(
            ControlVariateEstimator(base, theta), self._bijector, self._names,
            event_ranks=self._event_ranks,
        )

    # -- the change of variables ------------------------------------------- #
    def constrain(self, state: Any, as_dict: bool = True) -> Any:
        """``θ = f(z)``: a dict ``name -> values`` (or the list of parts)."""
        parts = [tf.convert_to_tensor(p) for p in as_parts(state)]
        self._check_num_parts(parts, "state")
        theta = self._bijector.forward(parts)
        return dict(zip(self._names, theta)) if as_dict else list(theta)

    def unconstrain(self, values: Any) -> list[tf.Tensor]:
        """``z = f^{-1}(θ)`` from a dict ``name -> values``, the prior's structure or a list.

        Raises:
          ValueError: a dict's names are not the prior's (`names`), or a list has
            another number of parts.
        """
        if isinstance(values, Mapping):
            keys = {str(k) for k in values}
            missing = [n for n in self._names if n not in keys]
            extra = sorted(keys - set(self._names))
            if missing or extra:
                raise ValueError(
                    f"`values` must have the names {self._names}; missing {missing}, "
                    f"unexpected {extra}."
                )
            values = [values[n] for n in self._names]
        parts = tf.nest.flatten(values)
        self._check_num_parts(parts, "values")
        return list(self._bijector.inverse([tf.convert_to_tensor(p) for p in parts]))

    # -- initial states ----------------------------------------------------- #
    def initial_state(
        self, num_chains: int | None = None, seed: Any = None, method: str = "prior", **map_kwargs
    ) -> list[tf.Tensor]:
        """An unconstrained initial state: a prior draw, or the MAP (tiled over chains).

        Args:
          num_chains: leading chain dimension, an int ``>= 1``. Default value:
            ``None`` (none).
          seed: seed of the prior draw. Default value: ``None``.
          method: ``"prior"`` or ``"map"``. Default value: ``"prior"``.
          **map_kwargs (Any): passed to `find_map`.

        Raises:
          ValueError: ``num_chains`` is not an int ``>= 1``, or ``method`` is unknown.
        """
        if num_chains is not None:
            num_chains = check_int(num_chains, "num_chains", minimum=1)
        if method == "prior":
            shape = [] if num_chains is None else [num_chains]
            draw = self._prior.sample(shape, seed=seed)
            return self.unconstrain(tf.nest.flatten(draw))
        if method == "map":
            z = self.find_map(**map_kwargs)
            if num_chains is None:
                return z
            return [tf.tile(p[None], [num_chains] + [1] * p.shape.rank) for p in z]
        raise ValueError(f"`method` must be 'prior' or 'map', got {method!r}.")

    def find_map(self, initial_state: Any = None, **kwargs: Any) -> list[tf.Tensor]:
        """The MAP of ``θ``, returned unconstrained (``f^{-1}(argmax log π)``).

        Maximises ``log π(f(z))`` *without* the log-det-Jacobian (the Jacobian
        would move the mode), by L-BFGS on the full data
        (`tfp_sgmcmc.estimators.find_map`). ``initial_state`` defaults
        to the origin of the unconstrained space (``θ = f(0)``, e.g. a scale of
        ``softplus(0)``), Stan's ``init=0``: a prior draw can land where the
        likelihood is extreme (a tiny scale) and throw L-BFGS off.
        """
        if initial_state is None:
            initial_state = [tf.zeros_like(p) for p in self.initial_state(seed=0)]
        no_jacobian = _PerExample(
            _JointEstimator(
                self._constrained, self._bijector, self._names, include_log_det_jacobian=False,
                event_ranks=self._event_ranks,
            ),
            self.num_examples,
        )
        return list(as_parts(find_map(no_jacobian, list(initial_state), **kwargs).position))

    # -- full data ----------------------------------------------------------- #
    def score_fn(self) -> Callable[[Any], list[tf.Tensor]]:
        """``z -> ∇_z log π_z(z)`` on the full data (for KSD / FSSD)."""
        return self._estimator.score_fn()

    def target_log_prob_fn(self, *parts: tf.Tensor) -> tf.Tensor:
        """Full-data ``log π_z(z)`` as a function of the parts (for NUTS/HMC/MALA)."""
        return self._estimator.full_log_prob_and_gradient(list(parts)).target_log_prob

    # -- outputs --------------------------------------------------------------- #
    def to_arviz(self, samples: Any, **kwargs: Any) -> Any:
        """``arviz.InferenceData`` of constrained draws, one variable per prior part.

        Args:
          samples: unconstrained draws as ``sample_chain`` returns them (list
            of parts ``[num_draws, *chains, *event]``).
          **kwargs: passed to `tfp_sgmcmc.to_arviz`.
        """
        from tfp_sgmcmc.export import to_arviz

        theta = [np.asarray(t) for t in self.constrain(samples, as_dict=False)]
        if "batch_ndims" not in kwargs:
            # [draws, *chains, *event]: the prior's event rank gives the chain dims.
            event_rank = len(tf.nest.flatten(self._prior.event_shape)[0])
            kwargs["batch_ndims"] = theta[0].ndim - 1 - event_rank
        return to_arviz(theta, var_names=self._names, **kwargs)

    def model_spec(
        self,
        num_chains: int = 1,
        seed: Any = 0,
        init: str = "prior",
        name: str = "model",
        **info: Any,
    ) -> Any:
        """The `tfp_sgmcmc.driver.ModelSpec` of a ``tfp-sgmcmc --model`` file.

        The driver and the CLI run on the unconstrained parts; their names are
        ``<name>_unconstrained`` (map draws back with `constrain`).
        """
        from tfp_sgmcmc.driver.model import ModelSpec

        return ModelSpec(
            estimator=self._estimator,
            init_state=self.initial_state(num_chains, seed=seed, method=init),
            name=name,
            param_names=[f"{n}_unconstrained" for n in self._names],
            info={"num_examples": self.num_examples, "parts": self._names, **info},
        )

    def __repr__(self) -> str:
        return (
            f"JointPosterior(prior={type(self._prior).__name__}, parts={self._names}, "
            f"N={self.num_examples}, batch_size={self._constrained.batch_size})"
        )
