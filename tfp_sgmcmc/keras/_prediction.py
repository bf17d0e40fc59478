"""``BayesianModel``'s posterior predictive: ``predict``, ``evaluate`` and the draws they
read (from memory or a run directory, a chunk at a time), as a mixin of the class."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import h5py
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.diagnostics.calibration import predictive_metrics
from tfp_sgmcmc.driver.store import SAMPLES_FILE
from tfp_sgmcmc.internal.util import check_int
from tfp_sgmcmc.keras._inputs import num_rows, take, to_host

__all__ = [
    "BayesianPrediction",
    "ConcreteCall",
    "sublayers",
    "mixture_quantile",
    "VALIDATION_DRAWS",
    "READ_BYTES",
    "PREDICT_BYTES",
    "ACTIVATIONS_UNKNOWN",
]

#: Draws kept for the validation metrics at an epoch's end (evenly spaced).
VALIDATION_DRAWS = 20
#: Bytes of draws ``predict`` and ``evaluate`` read at a time from a run directory.
READ_BYTES = 64 * 2**20
#: Bytes of stacked weights and outputs one forward call over draws may take (and of the
#: activations of the draws it runs at once), and the activations per example assumed
#: when the layers' shapes are unknown.
PREDICT_BYTES = 256 * 2**20
ACTIVATIONS_UNKNOWN = 16384


def sublayers(model: Any) -> list:
    """Every layer inside ``model``, nested models and layers followed."""
    if hasattr(model, "_flatten_layers"):
        return list(model._flatten_layers(include_self=False, recursive=True))
    return list(getattr(model, "layers", []))


class ConcreteCall:
    """A ``tf.function`` called through its concrete function per input signature: a
    step is called thousands of times with the same shapes, and the polymorphic
    dispatch would cost more than a small network's step."""

    def __init__(self, fn: Any) -> None:
        self._fn = fn
        self._cache: dict = {}

    def __call__(self, *args: Any) -> Any:
        args = tf.nest.map_structure(
            lambda a: a if isinstance(a, tf.Tensor) else tf.convert_to_tensor(a), args
        )
        flat = tf.nest.flatten(args)
        key = (
            str(tf.nest.map_structure(lambda _: 0, args)),
            tuple((t.dtype, tuple(t.shape)) for t in flat),
        )
        fn = self._cache.get(key)
        if fn is None:
            fn = self._cache[key] = self._fn.get_concrete_function(*args)
        return fn(*args)


def mixture_quantile(means: np.ndarray, sigmas: np.ndarray, q: float) -> np.ndarray:
    """The ``q`` quantile of ``(1/S) Σ_s N(means[s], sigmas[s]²)`` per element of
    ``means[0]``: bisection on the mixture's CDF, between the components' own
    quantiles (which bracket it), to the float64 resolution of the bracket."""
    from scipy.special import ndtr, ndtri

    sig = np.reshape(sigmas, (-1,) + (1,) * (means.ndim - 1))
    z = float(ndtri(q))
    lo = (means + z * sig).min(0)
    hi = (means + z * sig).max(0)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        below = ndtr((mid - means) / sig).mean(0) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        if np.all(hi - lo <= 4 * np.finfo(np.float64).eps * np.maximum(1.0, np.abs(mid))):
            break
    return 0.5 * (lo + hi)


class BayesianPrediction:
    """The predictive half of ``BayesianModel`` (``predict``, ``evaluate``): it reads the
    fitted draws; ``BayesianModel`` holds the model, the likelihood and ``fit``."""

    # -- predict / evaluate -------------------------------------------------------------- #
    def _check_fitted(self) -> None:
        if not self.num_kept:
            raise ValueError("call `fit` first: the model has no posterior draws yet.")

    def _draw_chunks(self, indices: np.ndarray | None = None) -> Any:
        """The draws (those at the increasing ``indices``, else all) as flat parameter
        vectors ``[c, D]``, a chunk of at most ``READ_BYTES`` at a time: from memory,
        or read from the run directory."""
        max_bytes = READ_BYTES
        if self.run_dir is None:
            step = max(1, max_bytes // max(1, self._flat_draws[0].nbytes))
            rows = np.arange(self.num_kept) if indices is None else indices
            for a in range(0, len(rows), step):
                yield self._flat_draws[rows[a : a + step]]
            return
        path = os.path.join(self.run_dir, SAMPLES_FILE)
        step = max(1, max_bytes // (sum(self._sizes) * self._dtype.itemsize))
        with h5py.File(path, "r") as f:
            parts = [f["samples"][str(i)] for i in range(len(self._sizes))]
            n = min(ds.shape[0] for ds in parts)
            rows = np.arange(n) if indices is None else indices
            for a in range(0, len(rows), step):
                sel = rows[a : a + step]
                # A contiguous slice when the rows are (fast); else h5py's point selection.
                pick = slice(sel[0], sel[-1] + 1) if sel[-1] - sel[0] == len(sel) - 1 else sel
                yield np.concatenate([ds[pick].reshape(len(sel), -1) for ds in parts], axis=1)

    def _draw_indices(self, num_draws: int | None) -> np.ndarray | None:
        """The draws ``predict`` and ``evaluate`` use: ``num_draws`` evenly thinned
        from the kept ones, the last included (``None``: all of them)."""
        if num_draws is None:
            return None
        num_draws = check_int(num_draws, "num_draws", 1)
        if num_draws > self.num_kept:
            raise ValueError(
                f"`num_draws` ({num_draws}) is more than the {self.num_kept} draws kept: pass "
                f"at most {self.num_kept}, or None for all of them."
            )
        # Spaced back from the last draw, so that one draw is the last (not the first).
        last = self.num_kept - 1
        return np.unique(np.linspace(last, 0, num_draws).round().astype(np.int64))

    def _forward(self) -> Any:
        """``θ [k, D], statistics, x [b, ...] -> outputs [k, b, ...]``: the model in
        inference mode for ``k`` draws in one compiled call, a loop over the stacked
        draws inside the program (``tf.map_fn``, up to ``_parallel_draws`` draws at a
        time) in place of ``k`` calls from Python.

        Not ``tf.vectorized_map``: its rewrite of Keras's convolution (the bias added
        to a batch of filters' outputs) fails on shapes, and on a CPU its batched
        convolutions ran slower than the loop."""
        if self._forward_fn is None:
            model = self.model
            kwargs = {"training": False} if self._call_kwargs_ok else {}

            nw = self._num_model_weights

            # Not reduce_retracing: the rows' count must stay static (parallel draws).
            @tf.function(jit_compile=bool(self.jit_compile), autograph=False)
            def forward(thetas, nt, x):
                def one(theta: tf.Tensor) -> Any:
                    out, _ = model.stateless_call(self._parts(theta)[:nw], nt, x, **kwargs)
                    return self._cast_outputs(out)

                rows = tf.nest.flatten(x)[0].shape[0] or 1024
                return tf.map_fn(one, thetas, parallel_iterations=self._parallel_draws(rows))

            self._forward_fn = ConcreteCall(forward)
        return self._forward_fn

    def _draws_per_call(self, rows: int, total: int) -> int:
        """Draws per forward call: as many as keep the stacked weights and the outputs
        of ``rows`` examples per draw under ``PREDICT_BYTES``, at most ``total``."""
        outputs = getattr(self, "_num_outputs", None) or self._activation_size()
        per_draw = (rows * outputs + sum(self._sizes)) * self._dtype.itemsize
        return int(min(total, max(1, PREDICT_BYTES // max(1, per_draw))))

    def _parallel_draws(self, rows: int) -> int:
        """Draws run at once inside a forward call: up to 10, as many as keep their
        activations for ``rows`` examples under ``PREDICT_BYTES``."""
        per_draw = rows * self._activation_size() * self._dtype.itemsize
        return int(min(10, max(1, PREDICT_BYTES // max(1, per_draw))))

    def _activation_size(self) -> int:
        """Numbers one example makes through the model's layers (their outputs' sizes
        summed), read from the layers' output shapes; ``ACTIVATIONS_UNKNOWN`` when
        they are not known (a subclassed model)."""
        total = 0
        for layer in sublayers(self.model):
            try:
                shape = layer.output.shape
            except (AttributeError, ValueError):
                return ACTIVATIONS_UNKNOWN
            if any(d is None for d in shape[1:]):
                return ACTIVATIONS_UNKNOWN
            total += int(np.prod(shape[1:]))
        return max(total, 1)

    def _batches(self, x: Any, y: Any, batch_size: int, labelled: bool) -> Any:
        if isinstance(x, tf.data.Dataset):
            for element in x:
                if isinstance(element, (tuple, list)) and len(element) >= 2:
                    xb, yb = element[0], element[1]
                elif labelled:
                    raise ValueError("the dataset must yield (x, y) pairs to be evaluated.")
                else:
                    xb, yb = element, None
                yield (
                    tf.nest.map_structure(np.asarray, xb),
                    (None if yb is None else np.asarray(yb)),
                )
            return
        xs = tf.nest.map_structure(np.asarray, x)
        n = num_rows(xs)
        if labelled:
            if y is None:
                raise ValueError("`y` is required when `x` holds arrays.")
            y = np.asarray(y)
            if y.shape[0] != n:
                raise ValueError(f"`x` has {n} rows but `y` has shape {y.shape}.")
        for a in range(0, n, batch_size):
            idx = np.arange(a, min(n, a + batch_size))
            yield take(xs, idx), (None if y is None else y[idx])

    def _outputs(
        self,
        draws: Sequence[Any] | None,
        x: Any,
        y: Any,
        batch_size: int,
        labelled: bool,
        indices: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any, np.ndarray | None]:
        """Raw outputs ``[S, n, ...]`` of the given draws (flat ``θ``; ``None``: the
        fit's draws at ``indices``, or all, read a chunk at a time), the labels in
        order, and each draw's ``log σ`` for a learned Gaussian noise (else ``None``).
        The inputs are read once (a dataset is iterated once) and kept for the passes
        over the draws, which run ``_draws_per_call`` draws per compiled call (the
        last group padded with copies of its last draw, so one program serves all)."""
        forward = self._forward()
        nt = self._non_trainable
        xs, ys = [], []
        for xb, yb in self._batches(x, y, batch_size, labelled):
            xs.append(tf.nest.map_structure(tf.convert_to_tensor, to_host(xb, self._dtype)))
            if yb is not None:
                ys.append(yb)
        if not xs:
            raise ValueError("`x` is empty.")
        if draws is not None:
            chunks: Any = [np.stack([np.asarray(d, self._dtype) for d in draws])]
            total = len(draws)
        else:
            chunks = self._draw_chunks(indices)
            total = self.num_kept if indices is None else len(indices)
        per_call = self._draws_per_call(num_rows(xs[0]), total)
        outs, log_sigma = [], []
        for chunk in chunks:
            for a in range(0, len(chunk), per_call):
                group = np.asarray(chunk[a : a + per_call], self._dtype)
                k = len(group)
                if k < per_call:
                    group = np.concatenate([group, np.repeat(group[-1:], per_call - k, 0)])
                th = tf.convert_to_tensor(group)
                outs.append(
                    np.concatenate([np.asarray(forward(th, nt, xb))[:k] for xb in xs], axis=1)
                )
                log_sigma += group[:k, -1].astype(np.float64).tolist()
        ls = np.array(log_sigma) if self._learn_noise else None
        return np.concatenate(outs), (np.concatenate(ys) if ys else None), ls

    def _transform(self, out: np.ndarray) -> np.ndarray:
        """Per-draw predictive from raw outputs: probabilities or the mean."""
        lik = self.likelihood
        if lik == "categorical" and self.from_logits:
            z = out - out.max(-1, keepdims=True)
            e = np.exp(z)
            return e / e.sum(-1, keepdims=True)
        if lik == "bernoulli" and self.from_logits:
            return 1.0 / (1.0 + np.exp(-out))
        return out

    def predict(
        self,
        x: Any,
        *,
        batch_size: int = 1024,
        return_draws: bool = False,
        return_std: bool = False,
        interval: float | None = None,
        num_draws: int | None = None,
    ) -> Any:
        """The posterior-predictive mean over the draws, and optionally its spread.

        With draws ``W_1..W_S`` and the per-draw predictive ``p_s = g(f_{W_s}(x))``
        (class probabilities, ``p(y = 1)``, the Gaussian mean, or the raw outputs):

        * the mean is ``(1/S) Σ_s p_s``;
        * ``interval=c`` gives the central interval of level ``c``, the
          ``(1 − c)/2`` and ``(1 + c)/2`` quantiles of the posterior predictive.
          For ``"gaussian"`` that is the predictive distribution of a new ``y``,
          the mixture ``(1/S) Σ_s N(μ_s, σ_s²)``, its quantiles solved from the
          mixture's CDF (observation noise included); otherwise the quantiles over
          the draws of ``p_s`` (``numpy.quantile``, linear interpolation), i.e. a
          credible interval for each class probability (or output);
        * ``return_std`` (``"gaussian"`` only) gives the mixture's standard deviation
          ``√(Var_s μ_s + mean_s σ_s²)``;
        * ``return_draws`` gives the ``p_s`` themselves, ``[S, n, ...]``.

        The forward passes of many draws run in one compiled call, a loop over the
        stacked draws inside the program (as many draws per call as keep the stacked
        weights and outputs under 256 MiB); with a ``run_dir`` fit, the draws are read
        back a chunk at a time.

        Args:
          x: inputs (arrays or a dataset; a dataset of ``(x, y)`` pairs is read for
            its ``x``).
          batch_size: rows per forward pass for arrays. Default value: ``1024``.
          return_draws: also return the per-draw predictive ``[S, n, ...]``.
            Default value: ``False``.
          return_std: also return the predictive standard deviation (``"gaussian"``
            only). Default value: ``False``.
          interval: a level ``c`` in ``(0, 1)`` to also return the lower and upper
            ends of the central interval. Default value: ``None``.
          num_draws: use this many of the draws, evenly thinned from the kept ones
            (the last included), for a cheaper prediction. Default value: ``None``
            (all of them).

        Returns:
          Class probabilities ``[n, K]`` (``"categorical"``), ``p(y = 1)`` in the
          model's output shape (``"bernoulli"``), the predictive mean
          (``"gaussian"``), or the mean of the raw outputs (a callable likelihood);
          with any of ``return_std``, ``interval`` and ``return_draws``, the tuple
          ``(mean, std, lower, upper, draws)`` of what was asked, in that order.

        Raises:
          ValueError: ``return_std`` without a Gaussian likelihood, an ``interval``
            outside ``(0, 1)``, no draws yet.
        """
        self._check_fitted()
        if return_std and self.likelihood != "gaussian":
            raise ValueError("`return_std` applies to likelihood='gaussian' only.")
        if interval is not None:
            if (
                isinstance(interval, bool)
                or not isinstance(interval, (int, float))
                or not (0.0 < float(interval) < 1.0)
            ):
                raise ValueError(f"`interval` must be a level in (0, 1), got {interval!r}.")
            interval = float(interval)
        indices = self._draw_indices(num_draws)
        out, _, log_sigma = self._outputs(
            None, x, None, batch_size, labelled=False, indices=indices
        )
        per_draw = self._transform(out.astype(np.float64))
        mean = per_draw.mean(0)
        result: list[Any] = [mean]
        sigma = None
        if self.likelihood == "gaussian":
            sigma = (
                np.exp(log_sigma)
                if self._learn_noise
                else np.full(per_draw.shape[0], self.noise_scale)
            )
        if return_std:
            result.append(np.sqrt(per_draw.var(0) + np.mean(sigma**2)))
        if interval is not None:
            qs = ((1 - interval) / 2, (1 + interval) / 2)
            if sigma is not None:
                result += [mixture_quantile(per_draw, sigma, q) for q in qs]
            else:
                result += list(np.quantile(per_draw, qs, axis=0))
        if return_draws:
            result.append(per_draw)
        return result[0] if len(result) == 1 else tuple(result)

    def _metrics(
        self,
        draws: Sequence[Any] | None,
        x: Any,
        y: Any,
        batch_size: int,
        indices: np.ndarray | None = None,
    ) -> dict[str, float]:
        out, labels, log_sigma = self._outputs(
            draws, x, y, batch_size, labelled=True, indices=indices
        )
        yy = self._labels(labels)
        ll = np.stack(
            [
                np.asarray(
                    self._log_lik(
                        tf.constant(yy),
                        tf.constant(out[s]),
                        [tf.constant(log_sigma[s], self._dtype)] if self._learn_noise else [],
                    ),
                    np.float64,
                )
                for s in range(out.shape[0])
            ]
        )
        smax = ll.max(0)
        nll = -float(np.mean(smax + np.log(np.mean(np.exp(ll - smax), 0))))
        per_draw = self._transform(out.astype(np.float64))
        lik = self.likelihood
        if lik in ("categorical", "bernoulli"):
            pbar = per_draw.mean(0).reshape(out.shape[1], -1)
            if lik == "bernoulli":
                pbar = np.concatenate([1 - pbar, pbar], -1)
            m = predictive_metrics(pbar, np.asarray(yy).astype(int).reshape(-1))
            return {"accuracy": m["accuracy"], "nll": nll, "ece": m["ece"]}
        if lik == "gaussian":
            mean = per_draw.mean(0)
            err = mean.reshape(-1) - np.asarray(yy, np.float64).reshape(-1)
            return {"rmse": float(np.sqrt(np.mean(err**2))), "nll": nll}
        return {"nll": nll}

    def evaluate(
        self, x: Any, y: Any = None, *, batch_size: int = 1024, num_draws: int | None = None
    ) -> dict[str, float]:
        """Scores of the posterior predictive on labelled data.

        Args:
          x: inputs, or a dataset of ``(x, y)`` pairs.
          y: labels for array inputs. Default value: ``None``.
          batch_size: rows per forward pass. Default value: ``1024``.
          num_draws: use this many of the draws, evenly thinned from the kept ones
            (the last included). Default value: ``None`` (all of them).

        Returns:
          ``{"accuracy", "nll", "ece"}`` for classification (ECE with 10 equal-width
          bins), ``{"rmse", "nll"}`` for ``"gaussian"``, ``{"nll"}`` for a callable
          likelihood. ``nll`` is the mean negative log of the model-averaged
          predictive density ``(1/S) Σ_s p(y_i | x_i, W_s)``.
        """
        self._check_fitted()
        return self._metrics(None, x, y, batch_size, indices=self._draw_indices(num_draws))

    def _validation_logs(self, val: tuple[Any, Any], draws: Sequence[Any]) -> dict:
        if len(draws) > VALIDATION_DRAWS:
            idx = np.linspace(0, len(draws) - 1, VALIDATION_DRAWS).round().astype(int)
            draws = [draws[i] for i in idx]
        saved = self._non_trainable
        if saved is None:  # MAP phase: the current statistics
            self._non_trainable = [
                tf.convert_to_tensor(v.value) for v in self.model.non_trainable_variables
            ]
        try:
            metrics = self._metrics(draws, val[0], val[1], 1024)
        finally:
            self._non_trainable = saved
        logs = {"val_loss": metrics.pop("nll")}
        logs.update({f"val_{k}": v for k, v in metrics.items()})
        return logs

    # -- keeping a posterior ------------------------------------------------------------ #
